"""The torch.profiler traces a profile used, saved as Chrome trace JSON; and kineto kept quiet.

Each rank saves one file per batch size, ``profile_batch{B}_rank{R}.json``: the interleaved
synchronised (``pybench.step{i}``) and no_sync (``pybench.nosync{i}``) steps the decomposition
read. Perfetto (https://ui.perfetto.dev) or chrome://tracing open them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pybench.errors import UsageError
from pybench.io.files import write_atomic

__all__ = ["KINETO_QUIET", "ChromeTraceSink", "silence_kineto", "trace_dir_path", "trace_file_name",
           "trace_file_names"]

# kineto prints its stages (level 3) and USDT probe lines (level 5, its highest) to stderr
# whatever the level of its other messages; a level above every one silences them all.
KINETO_QUIET = "6"


def silence_kineto() -> None:
    """Keep kineto's own log lines off stderr (unless ``KINETO_LOG_LEVEL`` is set already).

    kineto reads the level when the process starts its first profiler.
    """
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)


def trace_file_name(batch: int, rank: int) -> str:
    """The file a rank saves its trace of one batch size to."""
    return f"profile_batch{batch}_rank{rank}.json"


def trace_file_names(folder: str | os.PathLike, batches: Sequence[int], world: int) -> list[str]:
    """Every file the ranks of a profile save (by batch, then rank)."""
    return [str(Path(folder) / trace_file_name(b, r)) for b in batches for r in range(world)]


def trace_dir_path(trace_dir: str | os.PathLike) -> Path:
    """``trace_dir`` as a Path, or a UsageError when it is not an existing folder."""
    path = Path(trace_dir)
    if not path.is_dir():
        raise UsageError(f"trace_dir {trace_dir} is not an existing folder")
    return path


class ChromeTraceSink:
    """Saves each batch's finished torch.profiler session of this rank as Chrome trace JSON.

    Parameters
    ----------
    folder : path
        An existing folder.
    rank : int
        This rank (part of each file name).
    """

    def __init__(self, folder: str | os.PathLike, rank: int) -> None:
        self.folder = trace_dir_path(folder)
        self.rank = rank
        self.written: list[Path] = []

    def __call__(self, prof: Any, batch: int) -> None:
        target = self.folder / trace_file_name(batch, self.rank)
        # torch writes the trace by path itself; let it write into a private folder, then
        # replace the target atomically (no half-written trace, no write through a planted link).
        with tempfile.TemporaryDirectory(prefix=".pybench-trace-", dir=self.folder) as tmp:
            raw = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(raw))
            write_atomic(target, raw.read_bytes())
        self.written.append(target)
