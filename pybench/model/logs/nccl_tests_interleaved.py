"""Several processes' output interleaved in one log (nccl-tests built without MPI and started by mpirun, each
process a test of its own, all writing to one terminal): a header printed again inside one sweep, and rows after a
table's footer with no header of their own."""

from __future__ import annotations

import re

from pybench.model.logs.nccl_tests_counts import TYPE_WIDTHS
from pybench.model.logs.nccl_tests_table import FOOTERS, Table, header_tokens

# What starts another test between a table's last row and a header: its banner, its Rank lines, its program named.
_NEW_TEST = re.compile(r"\bnThread\s+\d|Using devices|\bRank\s+\d+\b.*\bdevice\b|_perf\b|_test\b")
_GAP = 12  # lines searched for the header printed again


def _row_size(line: str, columns: int) -> int | None:
    """The size of ``line`` when it reads as a row of a table of ``columns`` columns (a split or short row too)."""
    toks = line.split()
    return int(toks[0]) if len(toks) >= min(columns, 3) and toks[0].isdigit() and toks[1].isdigit() else None


def headerless_rows(lines: list[str], i: int, header: str) -> bool:
    """Whether ``lines[i]`` starts rows with no header of their own after a table's footer: another process's
    table, printed while the first process printed its header (nccl-tests built without MPI, run by mpirun). Only
    a line that reads as a row of that header (its size, count and a type nccl-tests names where the header has
    them) counts: other tools' numbers after a log (``nvidia-smi dmon``) do not."""
    names = header_tokens(header)
    if names is None or _row_size(lines[i], len(names)) is None or len(lines[i].split()) < len(names) - 1:
        return False
    toks = lines[i].split()
    if "type" not in names or names.index("type") >= len(toks) or toks[names.index("type")].lower() not in TYPE_WIDTHS:
        return False
    for ln in reversed(lines[max(0, i - 6):i]):  # up to the table above: its footer, then nothing but comments
        if any(f in ln for f in FOOTERS):
            return True
        if ln.strip() and not ln.strip().startswith("#"):
            return False
    return False


def header_continues(lines: list[str], i: int, table: Table) -> int | None:
    """Where a header after ``table``'s last row (``lines[i]`` on, past comment lines), the same as ``table``'s, and
    its unit line end, when the rows after them go on with sizes above ``table``'s last (a header printed again
    inside one sweep); else None."""
    for _ in range(_GAP):  # past comments and NCCL's own lines; not past a new test's banner, Rank lines or footer
        if i >= len(lines) or header_tokens(lines[i]) is not None:
            break
        if any(f in lines[i] for f in FOOTERS) or _NEW_TEST.search(lines[i]) or _row_size(lines[i], 3) is not None:
            return None
        i += 1
    if i >= len(lines) or header_tokens(lines[i]) != list(table.columns.names) or not table.sizes:
        return None
    end = i + 1
    if end < len(lines) and "(B)" in lines[end]:
        end += 1
    nxt = next((ln for ln in lines[end:end + 4] if ln.strip() and not ln.strip().startswith("#")), "")
    size = _row_size(nxt, len(table.columns.names))
    return end if size is not None and size > table.sizes[-1] else None

