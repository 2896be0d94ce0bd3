"""The torch backend's operation watchdog: a rank that stops making progress ends the job.

torch releases the GIL inside collectives, so a daemon thread runs while the main thread
waits in gloo or nccl. Arming is two attribute writes per operation.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["TorchWatchdog"]


class TorchWatchdog:
    """A daemon thread that ends this rank when one armed operation overruns its deadline.

    Parameters
    ----------
    info : callable
        Returns the rank facts (``rank``, ``host``) for the message; read when it fires.
    abort : callable
        ``abort(code)`` stops every rank of the job (the backend's abort).
    """

    def __init__(self, info: Callable[[], Mapping[str, Any]], abort: Callable[[int], None]) -> None:
        self._info = info
        self._abort = abort
        self.timeout_s = 0.0
        self.on_timeout: Callable[[str], None] | None = None
        self.deadline = 0.0  # 0: not armed
        self.what = ""
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.timeout_s > 0

    def configure(self, timeout_s: float, on_timeout: Callable[[str], None] | None) -> None:
        """Watch with ``timeout_s`` (<= 0: off); ``on_timeout(message)`` runs before the abort."""
        self.timeout_s, self.on_timeout = float(timeout_s or 0), on_timeout
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="pybench-torch-watchdog", daemon=True)
            self._thread.start()

    def arm(self, what: str) -> None:
        if self.timeout_s > 0:
            self.what = what
            self.deadline = time.monotonic() + self.timeout_s

    def disarm(self) -> None:
        self.deadline = 0.0

    @contextmanager
    def armed(self, what: str):
        """Armed for the body of a ``with`` block, disarmed however it leaves."""
        self.arm(what)
        try:
            yield
        finally:
            self.disarm()

    def _loop(self) -> None:
        while True:
            time.sleep(min(0.5, max(self.timeout_s / 10, 0.05)))
            d = self.deadline
            if d and time.monotonic() > d and self.deadline == d:
                self._fire()

    def _fire(self) -> None:
        info = self._info()
        msg = (f"rank {info.get('rank', '?')} ({info.get('host', '?')}): {self.what} made no progress for "
               f"{self.timeout_s:g} s; a rank stopped answering or the link is down")
        print(f"pybench: error: {msg}", file=sys.stderr, flush=True)
        if self.on_timeout is not None:
            try:
                self.on_timeout(msg)
            except Exception:  # saving is best effort; exiting is not
                pass
        self._abort(1)
