"""A log's lines without the labels launchers and log collectors put in front of them.

* ``kubectl logs --timestamps`` / ``docker logs -t``: an RFC 3339 time and a space, on every line;
* Open MPI's ``--tag-output`` label ``[1,0]<stdout>:``, wherever the line starts (a collector
  may indent it) and after ``--timestamp-output``'s ``Wed May  1 12:00:00 2024``, and inside a line
  where it tagged each of the writes that printed it;
* srun's ``--label`` (``-l``) task label ``0: ``, on the lines srun printed: a job script's own
  preamble (``nvidia-smi``, the environment) is not labelled, so the labels are stripped when
  most lines carry one or when a table header does (the table then came through srun);
* MPICH's ``-prepend-rank`` (and Intel MPI's ``-l``) label ``[0] ``, on every write, found alike;
* Ray's (and SkyPilot's) worker label ``(head, rank=0, pid=3808) ``, before any of the above;
* a Markdown quote ``> `` (a log pasted into a reply), around all of these, where most lines or a
  table header carry it;
* PRRTE's (Open MPI 5) ``--output`` tags ``[1,0][host:pid]<stdout>:``, ``[nspace@1,0]<stdout>:``, ``[0]<stdout>:``;
* any other text that stands before a table header and before the rows under it alike (docker compose's
  ``nccl-1  | ``, pdsh's ``node001: ``, ``kubectl logs --prefix``, stern): stripped where it stands.

ANSI colour (CSI) sequences are dropped everywhere first.

No table line starts with any of these, so a row is never taken for a label, and stripping
lines already stripped (load_measurements does it before a parser's own clean_lines) finds the
same tables.
"""

from __future__ import annotations

import re

from pybench.model.logs.nccl_tests_table import header_tokens

# RFC 3339 (kubectl's RFC3339Nano: 2024-05-01T12:00:00.123456789Z) and the space after it.
# RFC 3339 (kubectl --timestamps), or moreutils `ts`'s default "Dec 06 11:39:00 " (every line its own second)
_TIMESTAMP_RE = re.compile(r"^(?:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
                           r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?) ")
_RAY_PREFIX_RE = re.compile(r"^\s*\((?:[\w.-]+, )?(?:rank=\d+, )?pid=\d+(?:, ip=[\d.]+)?\) ")
# Open MPI 4's [1,0]; PRRTE's (Open MPI 5) [1,0][host:pid] (tag-detailed), [nspace@1,0] and [0] (--output rank)
_OMPI_PREFIX_RE = re.compile(r"^\s*(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?"
                             r"\[(?:[\w.-]+@)?\d+(?:,\d+)?\](?:\[[\w.-]+:\d+\])?<(?:stdout|stderr)>:\s?")
# The same tag glued to the text before it: Open MPI tags each write, and nccl-tests prints a row in three
# ("... sum -1[1,0]<stdout>:    459.2 ...[1,0]<stdout>:    434.2 ...")
_OMPI_GLUED_RE = re.compile(r"(?<=\S)\[(?:[\w.-]+@)?\d+(?:,\d+)?\](?:\[[\w.-]+:\d+\])?<(?:stdout|stderr)>:")
# ANSI CSI sequences (colour, cursor): a colouriser or a log viewer's capture
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Where an nccl-tests (or OSU) header starts inside a line that some other text precedes
_HEADER_AT_RE = re.compile(r"#?[ \t]*(?:size[ \t]+count|bytes[ \t]+N|Size)[ \t]")
_SRUN_PREFIX_RE = re.compile(r"^\s*\d+:\s?")
_HYDRA_PREFIX_RE = re.compile(r"^\[\d+\] ")
_HYDRA_GLUED_RE = re.compile(r"(?<=\S)\[\d+\] ")
_OSU_HEADER_RE = re.compile(r"^#\s*Size\b")
_QUOTE_RE = re.compile(r"^\s*(?:> ?)+")


def _holds_header(body: str) -> bool:
    """Whether ``body`` (a line without its label) is an nccl-tests or OSU table header."""
    return header_tokens(body) is not None or bool(_OSU_HEADER_RE.match(body.strip()))


def _labelled(lines: list[str], bodies: list[str]) -> bool:
    """Whether a launcher put the labels that ``bodies`` (labelled lines without their label) carried:
    most of ``lines`` carry one, or a table header does."""
    return bool(bodies) and (len(bodies) >= max(1, len(lines) // 2) or any(map(_holds_header, bodies)))


def _constant_prefix(lines: list[str]) -> str | None:
    """The text before a table header on its line (``nccl-1  |``, ``node001:``, ``[pod/x/c]``) when rows
    under the header carry the same text first: a collector's label this module does not know by name."""
    for k, ln in enumerate(lines):
        if not ("size" in ln or "Size" in ln or "bytes" in ln) or _holds_header(ln):
            continue
        m = _HEADER_AT_RE.search(ln)
        prefix = ln[:m.start()].rstrip() if m else ""
        if not prefix or not _holds_header(ln[len(prefix):]):
            continue
        # the same text on the header's next lines too (a time stamp that changes is no constant prefix: taken
        # as one, it would cut the table at the first line of another second)
        after = [row for row in lines[k + 1:k + 40] if row.strip()][:3]
        if after and all(row.startswith(prefix) for row in after) and \
                any(toks and toks[0].isdigit() for toks in (row[len(prefix):].split() for row in lines[k + 1:k + 40]
                                                             if row.startswith(prefix))):
            return prefix
    return None


def clean_lines(text: str) -> list[str]:
    """``text``'s lines, one for one, without ANSI colour codes and launcher labels (see the module's docstring)."""
    lines = [_ANSI_RE.sub("", ln) for ln in text.splitlines()] if "\x1b" in text else text.splitlines()
    lines = _known_labels(lines)
    prefix = _constant_prefix(lines)
    if prefix is not None:  # what stands after it may be a known label (a time stamp) in turn
        lines = _known_labels([ln[len(prefix):] if ln.startswith(prefix) else ln for ln in lines])
    return lines


def _known_labels(lines: list[str]) -> list[str]:
    """``lines`` without the labels this module knows by name."""
    if _labelled(lines, [_QUOTE_RE.sub("", ln, count=1) for ln in lines if _QUOTE_RE.match(ln)]):
        lines = [_QUOTE_RE.sub("", ln, count=1) for ln in lines]
    lines = [_OMPI_PREFIX_RE.sub("", _RAY_PREFIX_RE.sub("", _TIMESTAMP_RE.sub("", ln, count=1), count=1), count=1)
             for ln in lines]
    lines = [_OMPI_GLUED_RE.sub(" ", ln) if "<std" in ln else ln for ln in lines]
    srun = [_SRUN_PREFIX_RE.sub("", ln, count=1) for ln in lines if _SRUN_PREFIX_RE.match(ln) and ":" in ln[:8]]
    if _labelled(lines, srun):
        lines = [_SRUN_PREFIX_RE.sub("", ln, count=1) if re.match(r"^\s*\d+:", ln) else ln for ln in lines]
    # A row printed in three writes reads "[0]   size ... -1[0]   time ...[0]   time ...": drop the
    # label at the line start and where it is glued to the text before it (NCCL's own " [0] NCCL"
    # device tag has a space before it and stays).
    if _labelled(lines, [_HYDRA_PREFIX_RE.sub("", ln, count=1) for ln in lines if _HYDRA_PREFIX_RE.match(ln)]):
        lines = [_HYDRA_GLUED_RE.sub("", _HYDRA_PREFIX_RE.sub("", ln, count=1)) for ln in lines]
    return lines


def strip_launcher_labels(text: str) -> str:
    """``text`` without launcher labels, line for line (so line numbers still name the same lines)."""
    return "\n".join(clean_lines(text))
