"""Which GPU a rank drives, and which sizes an NCCL run really measures.

Pure functions, no CUDA: the NCCL backend and the runner call them, and they are
tested on CPUs.

- :func:`device_for_rank`: one GPU per rank from the launcher's local rank, or
  the only visible GPU when the launcher gave each rank its own
  (``srun --gpus-per-task=1``, ``CUDA_VISIBLE_DEVICES`` per rank).
- :func:`round_sizes_for_world`: nccl-tests' rounding for collectives whose
  buffers split into one block per rank (all-gather, reduce-scatter,
  all-to-all): a size becomes the largest multiple of ranks x element size not
  above it, so power-of-two sweeps run on 3, 6 or 12 GPUs; every change is named.
- :func:`nccl_count_limit`: NCCL counts are ``size_t``; MPI's 2**31 - 1 element
  limit does not apply on the NCCL path.
- :func:`world_one_note`: what a one-rank NCCL communicator really measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pybench.errors import SizeError, UsageError

#: Collectives whose buffers hold one block per rank (nccl-tests rounds their sizes down).
SPLIT_BY_WORLD = frozenset({"allgather", "reducescatter", "alltoall"})
#: At world 1 NCCL runs these as a device-to-device copy (nothing at all in place).
COPY_AT_WORLD_ONE = frozenset({"allreduce", "allgather", "reducescatter", "broadcast"})


def device_for_rank(local_rank: int, local_size: int, visible: int) -> int:
    """The CUDA device index a rank uses.

    ``visible`` GPUs are visible to this process. With one visible GPU every rank
    uses device 0: the launcher bound each rank to its own GPU. Otherwise ranks on
    a host take devices by local rank, and more ranks than GPUs is refused.
    """
    if visible < 1:
        raise UsageError("no GPU is visible to this rank")
    if not 0 <= local_rank < max(local_size, 1):
        raise UsageError(f"local rank {local_rank} is outside the {local_size} rank(s) on this host")
    if visible == 1:
        return 0
    if local_size > visible:
        raise UsageError(f"{local_size} ranks on this host but only {visible} GPU(s): run one rank per GPU "
                         f"(-n {visible}), or run stand-alone (no launcher) to drive every GPU from one process")
    return local_rank


@dataclass(frozen=True)
class RoundedSizes:
    """Sizes after nccl-tests' rounding, and one line per size that changed or was dropped.

    ``changes`` pairs each requested size that did not run as asked with the size it
    runs as (0: dropped); ``unit`` is ranks x element size (0 when nothing splits).
    """

    sizes: tuple[int, ...]
    notes: tuple[str, ...]
    changes: tuple[tuple[int, int], ...] = ()
    unit: int = 0
    world: int = 0

    def summary(self, collective: str) -> str | None:
        """One line for stderr and the table header: how many sizes were rounded and to what; None if none."""
        if not self.changes:
            return None
        rounded = [f"{s}->{r}" for s, r in self.changes if r]
        dropped = [str(s) for s, r in self.changes if not r]
        parts = []
        if rounded:
            parts.append(f"{len(rounded)} size(s) rounded down to a multiple of {self.unit} B "
                         f"({self.world} ranks x {self.unit // self.world} B), as nccl-tests does: "
                         + ", ".join(rounded))
        if dropped:
            parts.append(f"{len(dropped)} size(s) dropped (below {self.unit} B, one element per rank): "
                         f"{', '.join(dropped)}")
        return f"{collective} over {self.world} ranks: " + "; ".join(parts)

    def record(self, collective: str) -> dict[str, object] | None:
        """The rounding as the result file keeps it (``options["size_rounding"]``); None if nothing changed."""
        if not self.changes:
            return None
        return {"world": self.world, "unit_bytes": self.unit,
                "rounded": [[s, r] for s, r in self.changes if r], "dropped": [s for s, r in self.changes if not r],
                "note": self.summary(collective)}


def round_sizes_for_world(collective: str, sizes: Sequence[int], elem_bytes: int, world: int) -> RoundedSizes:
    """Round sizes down to a multiple of ``world`` x ``elem_bytes`` where the collective splits by rank.

    As nccl-tests (``count / nranks * nranks``): sizes smaller than one element per
    rank are dropped, repeated sizes after rounding kept once. Other collectives only
    need whole elements, which is checked, not rounded.
    """
    if world < 1 or elem_bytes < 1:
        raise UsageError(f"world ({world}) and elem_bytes ({elem_bytes}) must be positive")
    if collective not in SPLIT_BY_WORLD:
        return RoundedSizes(tuple(sizes), ())
    unit = world * elem_bytes
    out: list[int] = []
    notes: list[str] = []
    changes: list[tuple[int, int]] = []
    for s in sizes:
        r = s // unit * unit
        if r != s:
            changes.append((s, r))
        if r == 0:
            notes.append(f"{collective}: size {s} B dropped: below one element per rank ({world} x {elem_bytes} B)")
            continue
        if r != s:
            notes.append(f"{collective}: size {s} B runs as {r} B (a multiple of {world} ranks x {elem_bytes} B, "
                         "rounded down as nccl-tests does)")
        if r not in out:
            out.append(r)
    if not out:
        raise SizeError(f"{collective}: every size is below one element per rank ({unit} B at world {world}: "
                        f"a multiple of ranks x element size = {world} x {elem_bytes} B); use sizes of at least "
                        f"{unit} B")
    return RoundedSizes(tuple(out), tuple(notes), tuple(changes), unit, world)


def nccl_count_limit() -> int:
    """Largest element count an NCCL call takes (``size_t``): no 2**31 - 1 limit as MPI's ``int`` counts."""
    return 2**63 - 1


def world_one_note(collective: str, in_place: bool) -> str | None:
    """What a one-rank NCCL run of ``collective`` measures, or None when it is a real NCCL transfer."""
    if collective in COPY_AT_WORLD_ONE:
        what = "no data movement at all (in place)" if in_place else "a device-to-device copy of the buffer"
        return (f"world 1: NCCL runs {collective} as {what}, not a collective; busbw is 0 by definition, "
                "time and algbw are those of the copy")
    if collective in ("sendrecv", "alltoall"):
        return f"world 1: {collective} to self is a real NCCL send/recv kernel within one GPU (no link involved)"
    return None
