"""The table of collectives: what Python needs to know about each one.

The C++ side (csrc/collectives/<name>.cpp) knows how to fill, run and check a
collective; this table knows how to turn a time into bandwidth and which sizes
are legal. Adding a collective adds one row here and one file there.

Sizes follow nccl-tests: for all-gather the size is the output (total) buffer,
for reduce-scatter the input buffer, for all-to-all the whole send buffer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pybench.errors import SizeError, UsageError


def _ring_allreduce(n: int) -> float:
    return 2.0 * (n - 1) / n


def _n_minus_1_over_n(n: int) -> float:
    return (n - 1) / n


def _one(n: int) -> float:
    return 1.0


@dataclass(frozen=True)
class Collective:
    """Static facts about one collective.

    Attributes
    ----------
    name : str
        CLI and file name, e.g. ``allreduce``.
    busbw_factor : callable
        world size -> factor with busbw = algbw * factor (nccl-tests convention).
    size_divisible_by_world : bool
        True when the buffer is split into one block per rank, so the size must
        be a multiple of world x element size.
    reduces : bool
        True when the collective applies a reduction op (sum, max, min).
    min_ranks : int
        Fewest ranks the collective makes sense on.
    """

    name: str
    busbw_factor: Callable[[int], float]
    size_divisible_by_world: bool
    reduces: bool
    min_ranks: int = 2
    description: str = ""

    def count(self, size_bytes: int, elem_bytes: int, world: int) -> int:
        """Element count shown in the table's ``count`` column (elements per rank buffer as nccl-tests)."""
        return size_bytes // elem_bytes

    def validate(self, size_bytes: int, elem_bytes: int, world: int, dtype: str) -> None:
        """Raise SizeError when ``size_bytes`` cannot be run at this world size and dtype."""
        refuse_partial_elements([size_bytes], dtype, self.name, elem_bytes)
        if self.size_divisible_by_world and size_bytes % (elem_bytes * world):
            unit = elem_bytes * world
            raise SizeError(
                f"{self.name}: size {size_bytes} B is not a multiple of ranks x element size "
                f"({world} x {elem_bytes} = {unit} B); use multiples of {unit} B")

    def buffer_bytes(self, size_bytes: int, world: int) -> tuple[int, int]:
        """(send, recv) buffer bytes one rank allocates for a size."""
        if self.name == "allgather":
            return size_bytes // world, size_bytes
        if self.name == "reducescatter":
            return size_bytes, size_bytes // world
        return size_bytes, size_bytes


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    Collective("allreduce", _ring_allreduce, False, True,
               description="every rank ends with the reduction of all ranks' buffers"),
    Collective("allgather", _n_minus_1_over_n, True, False,
               description="every rank ends with the concatenation of all ranks' blocks (size = total)"),
    Collective("reducescatter", _n_minus_1_over_n, True, True,
               description="rank r ends with block r of the reduction (size = input buffer)"),
    Collective("broadcast", _one, False, False,
               description="every rank ends with the root's buffer"),
    Collective("alltoall", _n_minus_1_over_n, True, False,
               description="rank r sends its block s to rank s (size = send buffer)"),
    Collective("sendrecv", _one, False, False,
               description="each rank sends to the next rank and receives from the previous"),
)}

DTYPES: dict[str, int] = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int32": 4}
DTYPE_ALIASES = {"float": "float32", "fp32": "float32", "f32": "float32", "double": "float64",
                 "fp64": "float64", "f64": "float64", "half": "float16", "fp16": "float16",
                 "f16": "float16", "bf16": "bfloat16", "int": "int32", "i32": "int32"}
OPS = ("sum", "max", "min")


def get_collective(name: str) -> Collective:
    """Look up a collective by name, with a one-line error listing the known ones."""
    try:
        return COLLECTIVES[name]
    except KeyError:
        raise UsageError(f"unknown collective {name!r}; known: {', '.join(COLLECTIVES)}") from None


# nccl-tests' collectives pybench does not run: gather and scatter move (n-1)/n of the data through each rank's
# links (nccl-tests' own factor); hypercube's and alltoallv's algbw is not size / time, so no factor of size / time
# gives their busbw.
_NCCL_TESTS_ONLY = {"gather": lambda n: (n - 1) / n, "scatter": lambda n: (n - 1) / n,
                    "hypercube": None, "alltoallv": None}


def busbw_factor(collective: str, world: int | None, unknown: float = 1.0) -> float:
    """busbw / algbw (algbw = size / time) of ``collective`` on ``world`` ranks: 1 for point-to-point and anything
    not in the table; for an unknown world the factor where it does not depend on it, else ``unknown`` (nan: a
    busbw not known)."""
    c = COLLECTIVES.get(collective)
    if c is None:
        if collective in _NCCL_TESTS_ONLY:
            factor = _NCCL_TESTS_ONLY[collective]
            return factor(world) if factor is not None and world else math.nan
        return 1.0
    if not world:
        return c.busbw_factor(2) if c.busbw_factor(2) == c.busbw_factor(3) else unknown
    return c.busbw_factor(world)


def canonical_dtype(name: str) -> str:
    """Map a dtype name or alias (fp16, bf16, ...) to its canonical name."""
    key = name.strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise UsageError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)} (aliases: fp32, fp64, fp16, bf16)")
    return key


# nccl-tests' and rccl-tests' names of the 8-bit floats, and torch's, as one name each
FP8_NAMES = {"f8e4m3": "float8_e4m3", "fp8_e4m3": "float8_e4m3", "float8_e4m3fn": "float8_e4m3", "e4m3": "float8_e4m3",
             "f8e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2", "e5m2": "float8_e5m2"}


def dtype_name(name: str) -> str:
    """pybench's name of a log's type column or a user's ``--dtype``: :func:`canonical_dtype`'s for the types
    pybench runs, one name for int8 and each 8-bit float, and a name it does not know kept as given (logs hold
    types pybench never runs)."""
    key = name.strip().lower()
    key = {"char": "int8"}.get(key, key)  # nccl-tests before 2019 (and NCCL 1.x) named int8 "char"
    key = FP8_NAMES.get(key, DTYPE_ALIASES.get(key, key))
    return key if key in DTYPES or key in ("int8", *FP8_NAMES.values()) else name.strip().lower()


def canonical_op(name: str) -> str:
    """Check a reduction op name."""
    key = name.strip().lower()
    if key not in OPS:
        raise UsageError(f"unknown reduction op {name!r}; known: {', '.join(OPS)}")
    return key


# nccl-tests' names of the element types, so `grep float` and type filters keep working.
NCCL_TESTS_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16",
                         "int32": "int32", "int8": "int8"}

# nccl-tests' program of each collective it runs (those pybench runs, and those whose logs it reads)
NCCL_TESTS_PROGRAMS = {"allreduce": "all_reduce_perf", "allgather": "all_gather_perf",
                       "reducescatter": "reduce_scatter_perf", "broadcast": "broadcast_perf", "reduce": "reduce_perf",
                       "alltoall": "alltoall_perf", "sendrecv": "sendrecv_perf", "gather": "gather_perf",
                       "scatter": "scatter_perf", "hypercube": "hypercube_perf"}


# What `fit` models (and a model file may hold): the topology model's collectives and point-to-point.
MODELLED = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv",
            "p2p_bw", "p2p_latency", "p2p_bibw")


def measure_command(collective: str, world: int, options: str = "") -> str:
    """The command that measures ``collective`` on ``world`` ranks, in backquotes: pybench's own where it runs the
    collective (``options`` appended), else nccl-tests' program (gather, scatter, reduce: pybench reads their logs)."""
    if collective in COLLECTIVES:
        return f"`pybench {collective} --np {world}{options}`"
    if collective.startswith("p2p"):
        return "`pybench p2p` (between two ranks)"
    program = NCCL_TESTS_PROGRAMS.get(collective, f"{collective}_perf")
    return f"`mpirun -np {world} {program}` (nccl-tests; pybench does not run {collective})"


def refuse_partial_elements(sizes, dtype: str, what: str, width: int | None = None) -> None:
    """SizeError for a size no run of ``dtype`` (``width`` bytes an element; by default its known width, an
    unknown type's 1) can have: 3 B of float32."""
    width = width or DTYPES.get(dtype, 1)
    odd = [s for s in sizes if s % width]
    if odd:
        raise SizeError(f"{what}: size {odd[0]} B is not a whole number of {dtype} elements ({width} B each); "
                        f"give multiples of {width} B")

