"""A test that nccl-tests reports failed: its table has no rows, and the tests after it in the log may have run."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from pybench.errors import FileFormatError

# nccl-tests' own failure report ("Test NCCL failure common.cu:401 '...'", "Test CUDA failure ...")
_FAILURE_RE = re.compile(r"\bTest (?:NCCL |CUDA |MPI )?failure\b")


class EmptyTable(FileFormatError):
    """A header with no rows under it. ``failure``: (line number, text) of the failure the test reported, if any;
    ``resume``: the index of the line after the header, where another test's lines may begin."""

    def __init__(self, message: str, failure: tuple[int, str] | None, resume: int) -> None:
        super().__init__(message)
        self.failure, self.resume = failure, resume


def reported_failure(lines: list[str], start: int, end: int) -> tuple[int, str] | None:
    """(line number, its words) of the first failure nccl-tests reports in ``lines[start:end]``, with the rank's
    label or the row's size and type that may come before it on its line."""
    return next(((k + 1, " ".join(lines[k].split())) for k in range(start, end) if _FAILURE_RE.search(lines[k])),
                None)


def failed_after_rows(lines: list[str], end: int, is_header: Callable[[str], bool]) -> str | None:
    """A note where a test reported a failure after its last row (``end``), before the next table's header: its
    rows stand, and the run ended there, short of the sizes it was asked for. None where it reported none."""
    stop = next((k for k in range(end, min(len(lines), end + 200)) if is_header(lines[k])), min(len(lines), end + 200))
    failure = reported_failure(lines, end, stop)
    if failure is None:
        return None
    line, text = failure
    return (f"the test failed after its last row (line {line}: {text[:120]}): its rows are read, the larger sizes "
            f"it was asked for never ran")


WRONG_VALUES = "counted wrong values in their result"  # (a report of the log says that its check failed)


def wrong_note(dropped: list[tuple[int, str]], rows_lost: int, where: str) -> str:
    """The note for ``dropped``, the (size, half) of each timing left out because ``where`` counted wrong values."""
    sizes = sorted({s for s, _ in dropped})
    shown = ", ".join(map(str, sizes[:6])) + (", ..." if len(sizes) > 6 else "")
    halves = Counter(h for _, h in dropped)
    what = " and ".join(f"{n} {half} timing(s)".replace("  ", " ") for half, n in halves.items())
    return (f"{what} left out at {len(sizes)} size(s) ({shown} B; {rows_lost} row(s) with no timing left): "
            f"{where} {WRONG_VALUES}, so they did not time a working collective")
