"""The schemas of other tools' JSON files pybench reads: nccl-tests' ``-J`` file and
pytest-benchmark's saves of pybench's suites.

They are not pybench documents (no ``"schema"`` key), so :func:`validate_foreign` checks one
against its schema alone, with the same bounds as pybench's own (sizes below 2^60, finite
positive times, text as text, bounded lists) and the same one-line error.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, model_validator

from pybench.errors import FileFormatError
from pybench.io.schemas import MAX_RECORDS, MAX_SAMPLES, MAX_WORLD, Count, Rate, Size, Text, Time, _Body, validate_body

#: nccl-tests prints times in microseconds; a day per operation is past any run.
MAX_TIME_US = 86_400.0 * 1e6


TimeUs = Annotated[float, Field(gt=0, le=MAX_TIME_US, allow_inf_nan=False)]


class NcclTimingSchema(_Body):
    """One of a row's ``out_of_place`` / ``in_place`` blocks: ``time`` (us), or ``cpu_time`` in its
    place when nccl-tests ran with ``-C 1`` (``--report_cputime``), never both."""

    time: TimeUs | None = None
    cpu_time: TimeUs | None = None
    alg_bw: Rate
    bus_bw: Rate
    nwrong: Annotated[float, Field(ge=0, le=2.0 ** 62, allow_inf_nan=False)] | Text | None = None

    @model_validator(mode="after")
    def _one_time(self) -> NcclTimingSchema:
        if (self.time is None) == (self.cpu_time is None):
            raise ValueError("a timing block needs one of 'time' and 'cpu_time' (nccl-tests -C 1)")
        return self


class NcclRowSchema(_Body):
    size: Size
    count: Count | None = None
    type: Text | None = None
    redop: Text | None = None
    root: Text | Annotated[int, Field(ge=-1, lt=MAX_WORLD)] | None = None
    out_of_place: NcclTimingSchema | None = None
    in_place: NcclTimingSchema | None = None


class NcclDeviceSchema(_Body):
    rank: Annotated[int, Field(ge=0, lt=MAX_WORLD)] | None = None
    hostname: Text | None = None


class NcclConfigSchema(_Body):
    devices: Annotated[list[NcclDeviceSchema], Field(max_length=MAX_WORLD)] | None = None


class NcclTestsJsonSchema(_Body):
    """The file ``all_reduce_perf -J FILE`` writes."""

    args: Annotated[list[Text], Field(max_length=4096)] | None = None
    config: NcclConfigSchema | None = None
    results: Annotated[list[NcclRowSchema], Field(max_length=MAX_RECORDS)]


class BenchmarkInfoSchema(_Body):
    size_bytes: Annotated[int, Field(gt=0, lt=1 << 60)]
    collective: Text | None = None
    backend: Text | None = None
    dtype: Text | None = None
    redop: Text | None = None
    world_size: Annotated[int, Field(ge=1, le=MAX_WORLD)] | None = None


class BenchmarkStatsSchema(_Body):
    median: Time
    data: Annotated[list[Time], Field(max_length=MAX_SAMPLES)] | None = None


class BenchmarkSchema(_Body):
    name: Text | None = None
    group: Text | None = None
    extra_info: BenchmarkInfoSchema
    stats: BenchmarkStatsSchema


class PytestBenchmarkSchema(_Body):
    """A ``pytest --benchmark-save`` file of pybench's suites (benchmarks/)."""

    machine_info: dict[str, Any]
    benchmarks: Annotated[list[BenchmarkSchema], Field(min_length=1, max_length=MAX_RECORDS)]


def validate_foreign(data: Any, schema: type[BaseModel], source: str, hint: str = "") -> Any:
    """``data`` when it fits ``schema``; else one FileFormatError line naming ``source`` and the field,
    then ``hint`` (what the file should be)."""
    if not isinstance(data, dict):
        raise FileFormatError(f"{source}: a JSON {type(data).__name__}, expected an object")
    try:
        validate_body(data, schema, source)
    except FileFormatError as exc:
        raise FileFormatError(f"{exc}{'; ' + hint if hint else ''}") from None
    return data
