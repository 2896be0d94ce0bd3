"""Ranks and hosts from a launcher's command line, as a job log echoes it (``+ srun ...``, ``time jsrun ...``).

Each launcher counts them its own way:

* ``srun`` and ``flux run``: ``-n``/``--ntasks`` ranks; ``-N``/``--nodes`` hosts (``2`` or ``2-2``) times
  ``--ntasks-per-node`` (flux: ``--tasks-per-node``) where no rank count is given;
* ``mpirun``/``mpiexec``/``orterun``/``mpirun_rsh``: ``-np``/``-n``/``--np`` ranks; ranks per host
  from ``-ppn``/``-perhost`` (MPICH, Intel MPI), ``-npernode``/``--npernode``/``-N`` (Open MPI),
  ``--map-by ppr:K:node`` or ``-pernode`` (one), else the hosts of ``-H host:slots,...`` the ranks fill in
  order (Open MPI maps by slot; ``--map-by node``: one rank per host in turn); ``--mca NAME VALUE`` and
  ``-genv NAME VALUE`` skipped;
* ``jsrun`` (LSF): ``-p``/``--np`` ranks, else ``-n``/``--nrs`` resource sets times
  ``-a``/``--tasks_per_rs`` (1 by default); ``-r``/``--rs_per_host`` sets per host;
* ``aprun`` (Cray ALPS): ``-n`` ranks, ``-N`` ranks per node.

A host count is given only where the line fixes it; a hostfile's length is not read.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass

_LAUNCHER_RE = re.compile(r"(?:^|[\s/;&|(`'\"])(mpirun_rsh|mpirun|mpiexec(?:\.hydra)?|orterun|srun|jsrun|aprun|ibrun|"
                          r"flux(?:\s+mini)?\s+(?:run|submit))(?=\s)")


@dataclass(frozen=True)
class Launch:
    """What one launcher line says: ranks and hosts (None where it does not say)."""

    launcher: str
    ranks: int | None
    hosts: int | None
    devices_per_process: int = 1
    """GPUs each process drives, where the program is an nccl-tests binary: its ``-g`` times its ``-t``."""
    program: str = ""
    """The nccl-tests binary it runs (``all_reduce_perf``), "" where its command runs none."""

    @property
    def devices(self) -> int | None:
        """The ranks of the collective: processes times the GPUs each drives."""
        return self.ranks * self.devices_per_process if self.ranks else None


# Options that take two values (a name and its value).
_PAIRS = {"--mca", "-mca", "--gmca", "-gmca", "-genv", "--genv", "-env", "--prtemca"}
# Options that take no value, so that the word after them (the program) is not read as one.
_FLAGS = {"--allow-run-as-root", "--oversubscribe", "--tag-output", "--timestamp-output", "--report-bindings",
          "--display-map", "--exclusive", "--label", "-v", "--verbose", "-prepend-rank", "--prepend-rank",
          "-print-rank-map", "-bind-to-core", "--bind-to-core", "-l", "-pernode", "--pernode", "-exclusive",
          "--mpi-host-exclusive", "-q", "--quiet", "--no-kill", "-K"}


def _options(words: list[str], launcher: str) -> dict[str, str]:
    """``--name=value``, ``--name value``, ``-n value`` and ``-n4`` as {name: value}, up to the program."""
    flags = _FLAGS - ({"-l"} if launcher == "jsrun" else set())  # jsrun -l takes a value (cpu-cpu)
    found: dict[str, str] = {}
    k = 0
    while k < len(words):
        word = words[k]
        if not word.startswith("-"):
            break  # the program: its own options are not the launcher's
        name, eq, value = word.partition("=")
        if name in _PAIRS and not eq:  # --mca NAME VALUE
            k += 3
            continue
        if not eq and re.fullmatch(r"-[a-zA-Z]\d+", word):  # -n4 (its value glued: the next word is not it)
            name, value = word[:2], word[2:]
        elif not eq and name not in flags and k + 1 < len(words) and not words[k + 1].startswith("-"):
            value, k = words[k + 1], k + 1
        found.setdefault(name, value)
        k += 1
    return found


_NCCL_TEST = re.compile(r"(?:^|/)(\w+_perf)(?:_mpi)?$")
_PER_PROCESS = {"-g": "g", "--ngpus": "g", "-t": "t", "--nthreads": "t"}
_SEPARATORS = ("&&", "||", ";", "|", "&")


_ANOTHER_LAUNCH = re.compile(r"(?:^|/)(?:mpirun_rsh|mpirun|mpiexec(?:\.hydra)?|orterun|srun|jsrun|aprun|ibrun|flux)$")


def _nccl_test(words: list[str]) -> tuple[str, list[str]]:
    """The nccl-tests binary the launcher runs (its name without a path or ``_mpi``; "" where it runs none: a
    wrapper's ``cd DIR && ./all_reduce_perf`` counts, a second launcher's command does not) and the binary's own
    words, up to the end of its command."""
    for k, word in enumerate(words):
        if _ANOTHER_LAUNCH.search(word):
            break
        m = _NCCL_TEST.search(word)
        if m:
            own: list[str] = []
            for w in words[k + 1:]:
                if w in _SEPARATORS:
                    break
                own.append(w.rstrip(";"))
                if w.endswith(";"):
                    break
            return m.group(1), own
    return "", []


def _devices_per_process(words: list[str]) -> int:
    """An nccl-tests binary's GPUs per process from its words, ``-g`` (``--ngpus``) times ``-t`` (``--nthreads``)."""
    found: dict[str, int] = {}
    for k, word in enumerate(words):
        name, eq, value = word.partition("=")
        if not eq and re.fullmatch(r"-[gt]\d+", name):  # -g8
            name, value = name[:2], name[2:]
        elif not eq:
            value = words[k + 1] if k + 1 < len(words) else ""
        if name in _PER_PROCESS and value.isdigit() and int(value) > 0:
            found.setdefault(_PER_PROCESS[name], int(value))
    return found.get("g", 1) * found.get("t", 1)


def _count(options: dict[str, str], *names: str) -> int | None:
    for name in names:
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", options.get(name, ""))
        if m and (m.group(2) is None or m.group(2) == m.group(1)) and int(m.group(1)) > 0:
            return int(m.group(1))
    return None


def _hosts(ranks: int | None, per_host: int | None) -> int | None:
    return ranks // per_host if ranks and per_host and ranks % per_host == 0 else None


_LONGEST_COMMAND = 8000
"""Characters a command continued over lines is joined up to (a stray backslash joins no whole log)."""


def continued_lines(lines: list[str]) -> list[str]:
    """``lines`` with each command continued over lines (``mpirun --np 8 \\``, as scripts and READMEs print
    them) joined into its last line, the lines before it left empty: one launcher line, read as one. A blank
    line or a comment (a table's header) ends a continuation unjoined: a stray backslash joins no table."""
    out: list[str] = list(lines)
    held: list[int] = []  # the indices of the lines a command continues over, so far
    for k, line in enumerate(lines):
        body = line.strip()
        if held and (not body or body.startswith("#")):
            held = []  # (the lines held stay as they were)
        if body.endswith("\\") and sum(len(lines[j]) for j in held) + len(line) < _LONGEST_COMMAND:
            held.append(k)
            continue
        if held:
            out[k] = " ".join([*(lines[j].strip()[:-1].strip() for j in held), body])
            for j in held:
                out[j] = ""
            held = []
    return out


DIRECT = "direct"
"""The launcher of an nccl-tests binary run with none (``$ ./build/sendrecv_perf -g 8``): one process."""
_PROMPT = re.compile(r"^(?:[$#>+]+\s*)?")


def read_launch(line: str) -> Launch | None:
    """The launch on ``line``, or None where it holds no launcher command (a line that runs an nccl-tests binary
    itself, its first word after a shell prompt, is one process's: :data:`DIRECT`)."""
    m = _LAUNCHER_RE.search(line)
    if m is None:
        words = _PROMPT.sub("", line.strip()).split()
        if not words or not _NCCL_TEST.search(words[0]):
            return None
        program, own = _nccl_test(words)
        return Launch(DIRECT, 1, 1, _devices_per_process(own), program)
    try:
        words = shlex.split(line[m.end():], comments=False)
    except ValueError:  # an unbalanced quote: the words as they stand
        words = line[m.end():].split()
    launcher = m.group(1).split(".")[0].split()[0]
    launch = _read(launcher, _options(words, launcher))
    contexts = _app_contexts(words)
    if launcher not in ("srun", "flux", "jsrun", "aprun") and len(contexts) > 1:
        # MPMD, `mpirun -np 1 A : -np 1 B`: every app context's ranks are one job's
        parts = [_read(launcher, _options(c, launcher)).ranks for c in contexts]
        if all(parts):
            launch = dataclasses.replace(launch, ranks=sum(p for p in parts if p), hosts=None)
    program, own = _nccl_test([w for word in words for w in word.split() or [word]])  # a quoted `bash -c "..."` too
    return dataclasses.replace(launch, program=program, devices_per_process=_devices_per_process(own) if program else 1)


def _app_contexts(words: list[str]) -> list[list[str]]:
    """The words of each app context of an MPMD launch (separated by a lone ``:``)."""
    contexts: list[list[str]] = [[]]
    for word in words:
        if word == ":":
            contexts.append([])
        else:
            contexts[-1].append(word)
    return [c for c in contexts if c]


def _host_slots(value: str) -> list[int] | None:
    """The slots of each host of Open MPI's ``-H node1:8,node2:8``, None where a host names none."""
    slots = [re.fullmatch(r"[\w.-]+:(\d+)", h) for h in value.split(",")]
    if not all(slots):
        return None
    return [int(m.group(1)) for m in slots if m]


def _hosts_filled(ranks: int, slots: list[int]) -> int | None:
    """Hosts that ``ranks`` ranks occupy when mapped by slot, as Open MPI does by default: each host's slots
    filled in the order listed (None where the ranks outnumber the slots: oversubscribed, mapped otherwise)."""
    filled = 0
    for k, n in enumerate(slots, start=1):
        filled += n
        if filled >= ranks:
            return k
    return None


def _read(launcher: str, options: dict[str, str]) -> Launch:
    if launcher in ("srun", "flux"):
        hosts = _count(options, "-N", "--nodes")
        per_host = _count(options, "--ntasks-per-node", "--tasks-per-node")
        ranks = _count(options, "-n", "--ntasks") or (hosts * per_host if hosts and per_host else None)
        return Launch(launcher, ranks, hosts or _hosts(ranks, per_host))  # (--ntasks with --ntasks-per-node)
    if launcher == "jsrun":
        sets = _count(options, "-n", "--nrs")
        ranks = _count(options, "-p", "--np") or (sets * (_count(options, "-a", "--tasks_per_rs") or 1)
                                                   if sets else None)
        return Launch(launcher, ranks, _hosts(sets, _count(options, "-r", "--rs_per_host")))
    if launcher == "aprun":
        ranks = _count(options, "-n")
        return Launch(launcher, ranks, _hosts(ranks, _count(options, "-N")))
    ranks = _count(options, "-np", "--np", "-n", "-c")
    per_host = _count(options, "-ppn", "--ppn", "-perhost", "-npernode", "--npernode", "-N")  # (--ppn: Cray PALS)
    ppr = re.fullmatch(r"ppr:(\d+):node\S*", options.get("--map-by", options.get("-map-by", "")))
    if per_host is None and ppr:
        per_host = int(ppr.group(1))
    if per_host is None and ("-pernode" in options or "--pernode" in options):
        per_host = 1
    listed = _host_slots(options.get("-H", options.get("--host", "")))
    if ranks is None and listed is not None:  # no rank count: it starts every slot listed
        return Launch(launcher, sum(listed), len(listed))
    if ranks and per_host is None and listed is not None:
        by_node = options.get("--map-by", options.get("-map-by", "")).split(":")[0] == "node"  # round robin
        return Launch(launcher, ranks, min(ranks, len(listed)) if by_node else _hosts_filled(ranks, listed))
    return Launch(launcher, ranks, _hosts(ranks, per_host))
