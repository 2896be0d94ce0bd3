"""Rank 0's table on its way to our stdout: the pybench parent always reads the launcher's
stdout and copies it, because mpiexec ignores a failing stdout (a closed pipe, a full disk)
and the run would end 0 with its table lost; the parent sees the error and fails the run."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

# Start of an in-band progress line on rank 0's stdout (see runner._Progress).
PROGRESS_MARK = "\x1bpybench-progress:"


def mute_stdout() -> None:
    """Point fd 1 at /dev/null, so that what is still buffered for a stdout that failed is
    dropped at exit instead of failing again (Python's "Exception ignored" and exit 120)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, AttributeError, ValueError):  # no fd 1 (a StringIO in tests, stdout closed)
        pass


class StdoutRelay(threading.Thread):
    """Copies rank 0's stdout to ours and draws its in-band progress lines on our terminal's
    stderr, clearing them before each line of output. The first error writing our stdout is
    kept in ``error`` and given to ``on_error`` once; what comes after is read and dropped,
    so the launcher never blocks on a full pipe."""

    def __init__(self, stream, on_error: Callable[[OSError], None]) -> None:
        super().__init__(daemon=True)
        self.stream, self.on_error = stream, on_error
        self.error: OSError | None = None

    def run(self) -> None:
        mark = PROGRESS_MARK.encode()
        shown = False
        for raw in iter(self.stream.readline, b""):
            if self.error is not None:
                continue
            if raw.startswith(mark):
                text = raw[len(mark):].rstrip(b"\n").decode(errors="replace")
                sys.stderr.write(f"\r\033[K{text}")
                sys.stderr.flush()
                shown = bool(text)
                continue
            if shown:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
                shown = False
            try:
                self._write(raw)
            except OSError as exc:
                self.error = exc
                mute_stdout()
                self.on_error(exc)
        if shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
        self.stream.close()  # read to its end: the pipe is this thread's to close

    @staticmethod
    def _write(raw: bytes) -> None:
        out = sys.stdout
        if out is None:  # started with fd 1 closed: nothing to show it on
            return
        if hasattr(out, "buffer"):  # the bytes layer itself: its errors are plain OSErrors, for run() above
            out.buffer.write(raw)
            out.buffer.flush()
        else:  # a text stream without bytes (a caller's StringIO)
            out.write(raw.decode(errors="replace"))
            out.flush()
