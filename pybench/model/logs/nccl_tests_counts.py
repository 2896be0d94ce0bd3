"""What an nccl-tests table's count column says: nccl-tests prints the count per rank for all-gather,
reduce-scatter and all-to-all (size = count x ranks x type size, every era and rccl-tests alike) and the whole
buffer's for the others, so the column gives those collectives' exact world and rules the others out."""

from __future__ import annotations

import math

from pybench.collectives import COLLECTIVES, DTYPES, FP8_NAMES, dtype_name
from pybench.errors import FileFormatError
from pybench.model.logs.nccl_tests_table import Table, world_from_counts

# nccl-tests prints the count per rank for these (size = count x ranks x type size), the whole buffer's for the others
PER_RANK_COUNT = ("allgather", "reducescatter", "alltoall")


TYPE_WIDTHS = {"int8": 1, "uint8": 1, "char": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8, "uint64": 8,
                "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8, "bfloat16": 2,
                **dict.fromkeys(FP8_NAMES, 1), **dict.fromkeys(FP8_NAMES.values(), 1)}


def type_bytes(keys: list[tuple[str, str]]) -> dict[str, int]:
    widths = {name: TYPE_WIDTHS.get(name.strip().lower(), DTYPES.get(dtype_name(name))) for name, _ in set(keys)}
    return {name: w for name, w in widths.items() if w is not None}


def collective_from_counts(table: Table, notes: list[str]) -> str | None:
    """All-gather or reduce-scatter when the printed count is per rank (size = count x ranks x type
    size, ranks > 1), for tables whose bandwidths are too small to tell by busbw/algbw."""
    ranks = world_from_counts(table.sizes, table.counts, table.keys, type_bytes(table.keys))
    if ranks is None or ranks < 2:
        return None  # count = size / type size: all-reduce, broadcast, reduce and send/recv alike
    reduces = bool(table.redops - {"none", "-", ""})
    name = "reducescatter" if reduces else "allgather"
    notes.append(f"collective {name} inferred from the per-rank count (size = count x {ranks} x type size)"
                 + ("" if reduces else " and redop none; alltoall counts alike: give --collective alltoall if it was"))
    return name


def exact_world(collective: str | None, sizes: list[int], counts: list[int], keys: list[tuple[str, str]],
                world: int | None, notes: list[str]) -> int | None:
    """The per-rank count's exact world for all-gather, reduce-scatter, all-to-all (see world_from_counts)."""
    if collective not in PER_RANK_COUNT:
        return world
    exact = world_from_counts(sizes, counts, keys, type_bytes(keys))
    if exact is None or exact < 2 or exact == world:  # 1: count = size/width, nothing per rank to read
        return world
    said = f" (busbw/algbw said {world})" if world is not None else ""
    notes[:] = [n for n in notes if not n.startswith(f"world size {world} from busbw/algbw")]  # superseded
    notes.append(f"world size {exact} from size = count x ranks x type size{said}")
    return exact




def refuse_contradicting_counts(path, table: Table, collective: str | None, bus: float) -> None:
    """A --collective whose count column nccl-tests prints otherwise than the table does: an all-reduce's table
    (count = size / type size) named all-gather would be relabelled, and pooled with the log's real all-gather
    tables, where busbw/algbw alone cannot tell them apart (1.00 is a 2-rank all-reduce's, and nearly an all-gather's
    over many ranks)."""
    if collective not in COLLECTIVES or not (math.isfinite(bus) and bus > 0.005):  # busbw 0: one rank, counts alike
        return
    ranks = world_from_counts(table.sizes, table.counts, table.keys, type_bytes(table.keys))
    if ranks is None or (ranks > 1) == (collective in PER_RANK_COUNT):
        return
    printed = "size = count x type size, the whole buffer's count" if ranks == 1 else \
        f"size = count x {ranks} x type size, a count per rank"
    raise FileFormatError(f"{path}: line {table.header_line}: --collective {collective} disagrees with the table's "
                          f"count column ({printed} on every row), which no {collective} of nccl-tests prints: this "
                          f"table measured another collective; leave --collective out (the log then says which each "
                          f"table measured), or give the collective that ran")
