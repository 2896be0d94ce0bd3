"""The schema of each pybench file format's body, validated where a file is read.

Validated with pydantic (v2) rather than jsonschema: its core is compiled (jsonschema walks a
document in pure Python, record by record, sample by sample), strict mode refuses the coercions
a hostile file relies on (``true`` as 1, ``"5"`` as 5), and the bounds are Python types beside
the dataclasses they guard, not a second language. Every number is typed and bounded: finite
(the JSON reader already refuses NaN and Infinity), positive where physical, sizes below 2^60,
worlds at least 1; strings are text (a lone surrogate, which cannot be printed, was refused by
the reader).

A schema names only what readers rely on: fields a newer pybench adds are let through
(``extra="allow"``), and fields an older one did not write may be absent; the dataclass
built from the document says which it cannot do without.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pybench.errors import FileFormatError

#: No message pybench measures, and no buffer any machine holds, comes near 2^60 bytes (1 EiB).
MAX_SIZE_BYTES = 1 << 60
#: A day per operation: a time beyond it is not a measurement (a 1e300 s time overflows plots).
MAX_TIME_S = 86_400.0
MAX_WORLD = 1 << 24
MAX_RECORDS = 1 << 20
MAX_SAMPLES = 1 << 24
MAX_COUNT = 1 << 62
_TEXT = 4096

Size = Annotated[int, Field(ge=0, lt=MAX_SIZE_BYTES)]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Time = Annotated[float, Field(gt=0, le=MAX_TIME_S)]  # a time an operation took: never 0 or negative
Spread = Annotated[float, Field(ge=0, le=MAX_TIME_S)]  # a quantile or bound of such times
Rate = Annotated[float, Field(ge=0, le=1e12)]  # GB/s; 1e12 GB/s is past any link
Text = Annotated[str, Field(max_length=_TEXT)]
Finite = Annotated[float, Field(ge=-1e30, le=1e30, allow_inf_nan=False)]  # a fitted figure: finite, sign free


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class SizeRecordSchema(_Body):
    """One size of a result (pybench.measure.results.SizeRecord)."""

    size_bytes: Annotated[int, Field(gt=0, lt=MAX_SIZE_BYTES)]
    time_s: Time
    count: Count | None = None
    dtype: Text | None = None
    redop: Text | None = None
    root: Annotated[int, Field(ge=-1, lt=MAX_WORLD)] | None = None
    time_mean_s: Spread | None = None
    time_min_s: Spread | None = None
    time_max_s: Spread | None = None
    time_p5_s: Spread | None = None
    time_p95_s: Spread | None = None
    time_p99_s: Spread | None = None
    time_ci_low_s: Spread | None = None
    time_ci_high_s: Spread | None = None
    algbw_gbps: Rate | None = None
    busbw_gbps: Rate | None = None
    wrong: Count | None = None
    check_iters: Count | None = None
    iterations: Count | None = None
    ops_per_sample: Annotated[int, Field(ge=1, le=MAX_COUNT)] | None = None
    precision_met: bool | None = None
    stop_reason: Text | None = None
    wall_s: Annotated[float, Field(ge=0, le=1e9)] | None = None
    samples_s: Annotated[list[Spread], Field(max_length=MAX_SAMPLES)] | None = None
    huge_page_fraction: Annotated[float, Field(ge=0, le=1)] | None = None
    in_place_time_s: Time | None = None
    in_place_algbw_gbps: Rate | None = None
    in_place_busbw_gbps: Rate | None = None
    in_place_wrong: Count | None = None


class ResultSchema(_Body):
    """A benchmark result (pybench.measure.results.RunResult)."""

    benchmark: Text | None = None
    collective: Text | None = None
    backend: Text | None = None
    dtype: Text | None = None
    redop: Text | None = None
    timing: Text | None = None
    world_size: Annotated[int, Field(ge=1, le=MAX_WORLD)] | None = None
    hosts: dict[Text, Annotated[int, Field(ge=1, le=MAX_WORLD)]] | None = None
    link_class: Text | None = None
    environment: dict[str, Any] | None = None
    options: dict[str, Any] | None = None
    command: list[Text] | None = None
    started_at: Text | None = None
    finished: bool | None = None
    cut_short: Text | None = None
    records: Annotated[list[SizeRecordSchema], Field(max_length=MAX_RECORDS)]

    @model_validator(mode="after")
    def _hosts_hold_the_ranks(self) -> ResultSchema:
        """A hand-edited file whose hosts hold another rank count than its world, or an intra-node link across
        several hosts, would be fitted as the layout neither says."""
        if self.hosts and self.world_size is not None and sum(self.hosts.values()) != self.world_size:
            raise ValueError(f"hosts hold {sum(self.hosts.values())} ranks, world_size says {self.world_size}")
        every_rank = not (self.benchmark or "").startswith("p2p")  # (a pair's link is its own two ranks')
        if every_rank and self.hosts and len(self.hosts) > 1 and self.link_class == "intra-node":
            raise ValueError(f"link_class intra-node, but hosts name {len(self.hosts)} hosts")
        return self


def validate_body(data: dict[str, Any], schema: type[BaseModel] | None, source: str) -> None:
    """Check ``data`` (a document whose name and version are already checked) against ``schema`` (the
    format's, from pybench.io.formats; None: not yet typed); the first problem as one FileFormatError
    line naming ``source``, the field and the value."""
    if schema is None:
        return
    _refuse_long_lists(data, schema, source)
    try:
        schema.model_validate(data, strict=True)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.get("loc", ())).lstrip(".")
        value = repr(first.get("input"))
        value = value if len(value) <= 40 else value[:37] + "..."
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        if first.get("type") == "missing":
            raise FileFormatError(f"{source}: required field {where!r} is missing{more}") from None
        why = first.get("msg", "invalid")
        if first.get("type") == "value_error" and not where:  # the document's fields contradict each other
            raise FileFormatError(f"{source}: its fields disagree: {why.removeprefix('Value error, ')}{more}; "
                                  f"was it edited by hand?") from None
        raise FileFormatError(f"{source}: {where or 'document'}: {why}, got {value}{more}") from None


def _refuse_long_lists(data: dict[str, Any], schema: type[BaseModel], source: str) -> None:
    """A top-level list past its bound, refused by its length alone: pydantic checks a length only
    after validating every item (seconds, and an error per item, for a million of them)."""
    for name, field in schema.model_fields.items():
        value = data.get(name)
        if not isinstance(value, list):
            continue
        for rule in field.metadata:
            longest = getattr(rule, "max_length", None)
            if longest is not None and len(value) > longest:
                raise FileFormatError(f"{source}: {name}: {len(value)} items, more than the {longest} "
                                      "a pybench file of this kind holds")
