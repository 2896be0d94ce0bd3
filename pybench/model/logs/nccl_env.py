"""What a log's NCCL was told by its environment: the algorithm (``NCCL_ALGO``) and the path across nodes
(``NCCL_IB_DISABLE``, ``NCCL_NET``), as a log's preamble sets them.

NCCL picks ring or tree per size unless ``NCCL_ALGO`` forces one. A log that forced it says how its
sweep crossed the nodes, which one node count alone cannot (the tree's bytes per node grow with the
nodes, the ring's do not). It is set on a launcher line (``mpirun -x NCCL_ALGO=Ring``, ``-genv NCCL_ALGO
Ring``, ``srun --export=ALL,NCCL_ALGO=Ring``), as a shell assignment (``export NCCL_ALGO=Ring``,
``NCCL_ALGO=Tree ./all_reduce_perf``), and NCCL echoes it (``NCCL INFO NCCL_ALGO set by environment to
Ring``); a shell comment sets nothing. NCCL 2.4's echo of ``NCCL_TREE_THRESHOLD`` 0 forces the ring as well.
One algorithm counts, for every collective or for the all-reduce
(``allreduce:tree``, NCCL 2.24's form): a list or an exclusion (``^NVLS``) forces no single one. A launcher
line's setting holds for the tests of its job, a shell's for everything after it.

``NCCL_IB_DISABLE=1`` or ``NCCL_NET=Socket`` (and NCCL's own ``Using network Socket``) send the bytes across
nodes through the kernel's TCP sockets instead of RDMA: the same nodes then give other figures, which are not
the network's RDMA ones.
"""

from __future__ import annotations

import re

FORCED = {"ring": "ring", "tree": "tree"}
SOCKETS = "socket"
"""A sweep's network path where NCCL crossed the nodes by TCP sockets (:func:`network_path`)."""


def _setting(text: str, name: str) -> str | None:
    """The last value ``text`` gives the variable ``name``: ``NAME=VALUE`` (a quoted value too), ``-genv NAME
    VALUE``, NCCL's echo ``NAME set by environment to VALUE``; None where it gives none."""
    found = re.findall(rf"\b{name}(?:=|\s+set by environment to\s+)[\"']?([^\s\"']+)"
                       rf"|-{{1,2}}g?env\s+{name}\s+[\"']?([^\s\"']+)", text)
    # (NCCL echoes a number with a full stop: "NCCL_IB_DISABLE set by environment to 1.")
    return next(v for v in found[-1] if v).rstrip(".") if found else None


def _read(line: str) -> str | None:
    """``line`` stripped, or None for a shell comment (NCCL's own echo, which a log may print behind a ``#``,
    sets what it says)."""
    text = line.strip()
    return None if text.startswith("#") and "NCCL INFO" not in text else text


def network_path(line: str) -> str | None:
    """:data:`SOCKETS` where ``line`` sends NCCL across nodes by TCP sockets, "" where it names another network
    (RDMA, a plugin's), None where it says nothing of it (:func:`network_of` what it sets)."""
    said = {k: v for k, v in nccl_settings(line).items() if k in _NETWORK and v is not None}
    return network_of(said) if said else None


def network_of(settings: dict[str, str]) -> str:
    """:data:`SOCKETS` or "" by what :func:`nccl_settings` read so far: NCCL's own "Using network X" rules, then
    ``NCCL_NET`` (a plugin still runs with InfiniBand's own transport off), then ``NCCL_IB_DISABLE``."""
    for variable in _NETWORK:
        if settings.get(variable) is not None:
            value = settings[variable]
            return SOCKETS if (value == "1" if variable == "NCCL_IB_DISABLE" else value == "socket") else ""
    return ""


def forced_algorithm(line: str) -> str | None:
    """``ring`` or ``tree`` where ``line`` forces that algorithm on an all-reduce, "" where it sets NCCL_ALGO to
    anything else (no single one), None where it does not set it. A shell comment sets nothing (NCCL's own echo,
    which a log may print behind a ``#``, does)."""
    text = _read(line)
    value = None if text is None else _setting(text, "NCCL_ALGO")
    if value is None:
        return None
    items = []
    for item in re.split(r"[,;]", value):
        if "=" in item:  # the next variable of an --export list
            break
        items.append(item.strip().lower())
    per_collective = [i.partition(":")[2] for i in items if i.startswith("allreduce:")]
    if any(":" in i for i in items):  # NCCL 2.24's "allreduce:tree;broadcast:ring": the all-reduce's own
        items = per_collective
    return FORCED.get(items[0], "") if len(items) == 1 else ""


def tree_threshold(text: str) -> str | None:
    """``ring`` where NCCL echoes ``NCCL_TREE_THRESHOLD`` 0 (NCCL 2.4's way to keep the all-reduce off its tree),
    "" where it echoes another threshold (the tree below it, the ring above), None where it echoes none. Only the
    echo counts: NCCL from 2.5 on ignores the variable and says nothing of it."""
    echoed = re.search(r"NCCL INFO NCCL_TREE_THRESHOLD set by environment to\s+(\d+)", text)
    if echoed is None:
        return None
    return "ring" if int(echoed.group(1)) == 0 else ""


TREE_THRESHOLD = "NCCL_TREE_THRESHOLD"
"""The setting :func:`tree_threshold` reads (its algorithm, as ``NCCL_ALGO``'s)."""
USING = "Using network"
"""NCCL's own line of the network it took (``NCCL INFO Using network Socket``), read as a setting of its job."""
_NETWORK = (USING, "NCCL_NET", "NCCL_IB_DISABLE")
_READ = ("NCCL_ALGO", TREE_THRESHOLD, "NCCL_NET", "NCCL_IB_DISABLE")
# unset NAME..., export -n NAME..., at a command's start, a prompt's included (not inside an echo); env -u NAME /
# --unset=NAME, each
_UNSET = re.compile(r"(?:^|[;&|(]\s*|[$#>]\s+|\b(?:then|do|else)\s+)(?:unset(?:\s+-v)?|export\s+-n)"
                    r"((?:\s+[A-Za-z_]\w*)+)")
_ENV_UNSET = re.compile(r"(?:\s-u\s*|\s--unset=?)(NCCL_\w+)")
_EMPTY = re.compile(r"\b(NCCL_(?:ALGO|NET|IB_DISABLE))=(?:[\"']{2})?(?=\s|$)")


def nccl_settings(line: str) -> dict[str, str | None]:
    """What ``line`` sets of what pybench reads, by variable (``NCCL_ALGO``: :func:`forced_algorithm`'s reading;
    :data:`TREE_THRESHOLD`: :func:`tree_threshold`'s;
    ``NCCL_NET``, ``NCCL_IB_DISABLE``: their values; :data:`USING`: NCCL's own line), None for one it unsets
    (``unset``, ``export -n``, ``env -u``, an empty assignment)."""
    text = _read(line)
    if text is None:
        return {}
    out: dict[str, str | None] = {}
    using = re.search(r"NCCL INFO Using network (\S+)", text)
    if using:
        out[USING] = using.group(1).lower()
    algo = forced_algorithm(text)
    if algo is not None:
        out["NCCL_ALGO"] = algo
    threshold = tree_threshold(text)
    if threshold is not None:
        out[TREE_THRESHOLD] = threshold
    for variable in ("NCCL_NET", "NCCL_IB_DISABLE"):
        value = _setting(text, variable)
        if value is not None:  # (up to the next variable of an --export list)
            out[variable] = value.split(",")[0].lower()
    unset = [v for names in _UNSET.findall(text) for v in names.split()] + _ENV_UNSET.findall(
        text if re.search(r"\benv\b", text) else "") + _EMPTY.findall(text)
    for variable in unset:
        if variable in _READ:
            out[variable] = None
    return out
