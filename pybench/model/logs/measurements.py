"""The common shape every imported log is turned into.

A :class:`MeasurementSet` is one sweep over message sizes of one collective on one
set of ranks: what the fitter needs (sizes and median times) plus the metadata that
says which model it belongs to (collective, backend, world size, link class).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

LINK_CLASSES = ("intra-node", "inter-node")


def _frozen_array(values, name: str, dtype=float) -> np.ndarray:
    arr = np.array(values, dtype=dtype, copy=True).reshape(-1)
    # Read-only so a frozen dataclass is frozen all the way down.
    arr.setflags(write=False)
    return arr


_PER_SIZE = ("size_bytes", "time_s", "time_low_s", "time_high_s", "time_in_place_s")
"""The arrays of a set with one value per row."""


@dataclass(frozen=True, eq=False)
class MeasurementSet:
    """One size sweep of one collective, as imported from a log or result file.

    Attributes
    ----------
    source : str
        Tool that produced it: ``nccl-tests``, ``osu`` or ``pybench``.
    collective : str
        pybench name (``allreduce``, ``allgather``, ``reducescatter``, ``broadcast``,
        ``reduce``, ``alltoall``, ``sendrecv``, ``p2p_bw``, ``p2p_latency`` ...).
    backend : str
        ``nccl``, ``mpi``, ``torch`` ...
    world_size : int or None
        Number of ranks, None when the log does not say and it cannot be recovered.
    link_class : str or None
        ``intra-node``, ``inter-node`` or None when unknown.
    dtype : str
        Canonical dtype name (``float32`` ...), ``byte`` for OSU.
    size_bytes : ndarray of int64
        Message sizes (pybench/nccl-tests convention: total buffer for all-gather).
    time_s : ndarray of float
        Time of one operation in seconds (median, or the tool's average when
        that is all it prints; see ``time_statistic``).
    time_low_s, time_high_s : ndarray of float or None
        Spread when the tool gives it (p5/p95, min/max).
    time_in_place_s : ndarray of float or None
        A second measurement of the same operation at each size when the tool makes
        one (nccl-tests' in-place column; nan where a row lacks it), else None. See
        :meth:`fit_points`.
    path : str
        File it came from ('' when built in memory).
    time_statistic : str
        What ``time_s`` is: ``median`` (pybench), ``mean`` (nccl-tests, OSU).
    notes : tuple of str
        How ambiguous metadata was resolved (e.g. world size from busbw/algbw).

    Notes
    -----
    Equality is identity (``eq=False``): numpy arrays have no single truth value.
    Arrays are read-only copies.
    """

    source: str
    collective: str
    backend: str
    world_size: int | None
    link_class: str | None
    dtype: str
    size_bytes: np.ndarray
    time_s: np.ndarray
    time_low_s: np.ndarray | None = None
    time_high_s: np.ndarray | None = None
    path: str = ""
    time_statistic: str = "median"
    notes: tuple[str, ...] = field(default_factory=tuple)
    time_in_place_s: np.ndarray | None = None
    redop: str = ""
    """The reduction the rows ran (``sum``, ``max``, ...; empty where the log does not say or
    the collective does not reduce): an ``-o all`` log holds one set per reduction."""
    device: str = ""
    """The GPU model the log names for its ranks (nccl-tests' Rank lines, its JSON's config.devices), several
    joined by ", "; empty where the log does not say."""
    nccl_algo: str = ""
    """``ring`` or ``tree`` where the log forced NCCL's algorithm (NCCL_ALGO); empty where NCCL chose."""

    def __post_init__(self):
        size = _frozen_array(self.size_bytes, "size_bytes", dtype=np.int64)
        time = _frozen_array(self.time_s, "time_s")
        if size.shape != time.shape:
            raise ValueError(f"size_bytes ({size.size}) and time_s ({time.size}) differ in length")
        object.__setattr__(self, "size_bytes", size)
        object.__setattr__(self, "time_s", time)
        for name in _PER_SIZE[2:]:
            value = getattr(self, name)
            if value is not None:
                arr = _frozen_array(value, name)
                if arr.shape != time.shape:
                    raise ValueError(f"{name} has {arr.size} values, time_s has {time.size}")
                object.__setattr__(self, name, arr)
        if self.link_class is not None and self.link_class not in LINK_CLASSES:
            raise ValueError(f"link_class {self.link_class!r} is not one of {LINK_CLASSES} or None")
        object.__setattr__(self, "notes", tuple(self.notes))

    def at(self, keep: np.ndarray) -> MeasurementSet:
        """The set at the sizes ``keep`` selects (a boolean mask over its rows), every per-size array alike."""
        return dataclasses.replace(self, **{k: getattr(self, k)[keep] for k in _PER_SIZE
                                            if getattr(self, k) is not None})

    def fit_points(self):
        """(size_bytes, time_s) arrays of every measurement the fitter should use.

        nccl-tests times each size twice, out-of-place and in-place: two real, separate
        measurements of the same operation (same algorithm, same bytes on the wire; only
        the buffer aliasing differs). Both are returned, as repeated sizes, so the fit and
        the cross-validation see the mean of the two at each size, which halves the
        variance of the run-to-run noise instead of throwing half the data away. Sets
        with one time per size return it unchanged.

        Returns
        -------
        (ndarray of float, ndarray of float)
        """
        size = self.size_bytes.astype(float)
        time = np.asarray(self.time_s, dtype=float)
        if self.time_in_place_s is None:
            return size, time
        extra = np.isfinite(self.time_in_place_s) & (self.time_in_place_s > 0)
        return (np.concatenate([size, size[extra]]),
                np.concatenate([time, self.time_in_place_s[extra]]))

    def __len__(self) -> int:
        return int(self.size_bytes.size)

    @property
    def label(self) -> str:
        """Short human description, e.g. ``allreduce nccl x16 inter-node``."""
        world = f"x{self.world_size}" if self.world_size else "x?"
        return f"{self.collective} {self.backend} {world} {self.link_class or 'link?'}"

    def __repr__(self) -> str:
        span = ""
        if len(self):
            span = f", {int(self.size_bytes.min())}..{int(self.size_bytes.max())} B"
        return f"MeasurementSet({self.label}, {len(self)} sizes{span}, source={self.source!r})"


HOSTS_NOTE = re.compile(r"(\d+) ranks on (\d+) host\(s\)")
"""How a reader notes the hosts a log lists ranks on ("16 ranks on 2 host(s) per the Rank lines")."""


def listed_hosts(notes: Iterable[str], world: int | None) -> int | None:
    """The hosts the notes say all ``world`` ranks ran on; None where they say it of fewer ranks or not at all."""
    for note in notes:
        m = HOSTS_NOTE.search(note)
        if m and world and int(m.group(1)) >= world:
            return int(m.group(2))
    return None


# What stands in for a name a process did not know (pybench lists its other hosts' ranks as "GPU")
DEVICE_BUFFERS = re.compile(r"buffers in (\S+) device memory")
"""The note of a table whose buffers lay in device memory (OSU's MPI-CUDA tests, ``D D`` or ``-d cuda``): another
path than host buffers', never pooled with them."""


SOCKETS_NOTE = ("NCCL crossed the nodes by TCP sockets (NCCL_IB_DISABLE=1, NCCL_NET=Socket or NCCL's 'Using network "
                "Socket' in the log), not RDMA: not the network's RDMA figures")
"""The note of a table whose nodes NCCL joined by sockets: another path than RDMA's, never fitted with it."""


def crossing_path(m: MeasurementSet) -> str:
    """How a table crossed its nodes beyond what its link class says, as its notes say: its buffers' device
    memory (``cuda``, ``rocm`` ...: OSU's MPI-CUDA tests), ``sockets`` (NCCL over TCP), or '' (the tool's
    usual path)."""
    return next((x[1].lower() for n in m.notes if (x := DEVICE_BUFFERS.match(n))), "") or (
        "sockets" if SOCKETS_NOTE in m.notes else "")


_PLACEHOLDER_DEVICES = ("", "gpu", "cpu", "n/a", "unknown")


def device_names(names) -> str:
    """A table's :attr:`MeasurementSet.device`: the GPU names its ranks list, placeholders left out, each once,
    sorted, joined by ", "."""
    return ", ".join(sorted({n.strip()[:120] for n in names if n.strip().lower() not in _PLACEHOLDER_DEVICES}))


def one_reduction(measurements: Sequence[MeasurementSet]) -> list[MeasurementSet]:
    """The sets to fit: of a collective measured with several reductions (nccl-tests ``-o all``),
    the ``sum`` sweeps (what training all-reduces), else the first reduction's; each op's own
    compute would otherwise be pooled as noise. The others are left out, and the kept sets say so."""
    ops: dict[tuple[str, str, str | None, str], list[str]] = {}
    for m in measurements:
        key = (m.collective, m.backend, m.link_class, m.dtype)
        if m.redop and m.redop not in ops.setdefault(key, []):
            ops[key].append(m.redop)
    kept = []
    for m in measurements:
        seen = ops.get((m.collective, m.backend, m.link_class, m.dtype), [])
        if len(seen) < 2 or not m.redop:
            kept.append(m)
            continue
        chosen = "sum" if "sum" in seen else seen[0]
        if m.redop == chosen:
            others = ", ".join(op for op in seen if op != chosen)
            kept.append(dataclasses.replace(m, notes=m.notes + (f"fitted on redop {chosen}; left out: {others}",)))
    return kept
