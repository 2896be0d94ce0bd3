"""Hostile cases for every file format pybench reads besides the result (whose cases are in
generated.py): fitted models, compute profiles, CCR tables, step profiles, comparisons, pair
matrices, system descriptions, nccl-tests ``-J`` files and pytest-benchmark saves.

Each format has a valid base document, the command that reads it, and the fields to attack; every
field gets the values that broke readers before (sizes >= 2^63, times of 1e300, NaN, lone
surrogates, worlds of 0, wrong types), and every format gets deep nesting and a huge array. Every
case must end in one ``pybench: error:`` line and exit 2; the untouched base must be read (exit 0),
so a case fails for its hostile value, not for a broken base.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path

from generated import FIXTURES, MODEL, RESULT, Case  # type: ignore[import-not-found]

SYSTEMS = Path(__file__).resolve().parents[2] / "pybench" / "model" / "systems"


def _fixture(name: str) -> Callable[[], dict]:
    return lambda: json.loads((FIXTURES / name).read_text())


def _with_topology() -> dict:
    doc = json.loads(MODEL.read_text())
    doc["topology"] = [{"collective": "allreduce", "algorithm": "ring", "schedule": "ring", "fitted": [[8, 1]],
                        "size_range": [1024, 1 << 20], "residual_sizes": [], "residuals": [], "notes": []}]
    return doc


def _pipeline_profile() -> dict:
    return {"schema": "pybench.profile", "schema_version": 1, "kind": "pipeline", "model": "mlp", "device": "cpu",
            "rows": [{"batch": 8, "steps": 4, "step_s": 0.01, "compute_s": 0.008, "loader_samples_per_s": 1000.0}]}


def _comparison() -> dict:
    sizes = [{"size_bytes": 1024 << k, "time_ratio": 1.0 + 0.1 * k, "ratio_ci": [0.95 + 0.1 * k, 1.05 + 0.1 * k],
              "verdict": "slower" if k else "not significant"} for k in range(4)]
    return {"schema": "pybench.comparison", "schema_version": 1, "a": "A", "b": "B", "alpha": 0.05, "noise": 0.05,
            "sizes": sizes, "summary": "B against A"}


def pair_matrix(n: int) -> dict:
    pairs = [{"src": i, "dst": j, "bandwidth_gbps": 100.0 + (i * 7 + j) % 13, "latency_s": 2e-6, "link": "NV12",
              "slow_bandwidth": (i + j) % 17 == 0} for i in range(n) for j in range(n) if i != j]
    return {"schema": "pybench.p2p_matrix", "schema_version": 1, "bandwidth_size_bytes": 1 << 26, "pairs": pairs}


def _pytest_benchmark() -> dict:
    benches = [{"name": f"test_allreduce[{1024 << k}]", "group": "allreduce",
                "extra_info": {"size_bytes": 1024 << k, "collective": "allreduce", "backend": "mpi",
                               "dtype": "float32", "world_size": 2},
                "stats": {"median": 1e-5 * (k + 1), "data": [1e-5 * (k + 1), 1.1e-5 * (k + 1)]}} for k in range(4)]
    return {"machine_info": {"node": "h"}, "commit_info": {}, "benchmarks": benches, "version": "4.0.0"}


# format: (base document, the command reading "F", {attacked field: path into the document})
FORMATS: dict[str, tuple[Callable[[], dict], tuple[str, ...], dict[str, tuple]]] = {
    "model": (_with_topology, ("predict", "F", "--sizes", "1M"), {
        "world": ("models", 0, "world_size"), "size": ("models", 0, "segments", 0, "size_max_bytes"),
        "alpha": ("models", 0, "segments", 0, "alpha_s"), "text": ("models", 0, "collective"),
        "topology-world": ("topology", 0, "fitted", 0, 0), "topology-nodes": ("topology", 0, "fitted", 0, 1),
        "topology-algorithm": ("topology", 0, "algorithm"), "topology-schedule": ("topology", 0, "schedule"),
        "topology-residuals": ("topology", 0, "residuals")}),
    "compute": (_fixture("compute_profile_v1.json"),
                ("ccr", "--params", "125M", "--model", str(MODEL), "--compute", "F", "--world", "8"), {
        "time": ("gemms", 0, "samples_s", 0), "size": ("params",), "world": ("seq",), "text": ("engine",),
        "rate": ("flops_per_s",), "gemm-m": ("gemms", 0, "m")}),
    "ccr": (_fixture("report_ccr_ddp.json"), ("plot", "F", "-o", "p.png"), {
        "world": ("rows", 0, "world"), "size": ("rows", 0, "batch"), "time": ("rows", 0, "comm_s"),
        "fraction": ("rows", 0, "ccr"), "text": ("rows", 0, "strategy")}),
    "profile": (_pipeline_profile,
                ("plan", "--params", "125M", "--model", str(MODEL), "--tflops", "100", "--profile", "F"), {
        "rate": ("rows", 0, "loader_samples_per_s"), "world": ("rows", 0, "batch"), "time": ("rows", 0, "step_s"),
        "text": ("kind",)}),
    "comparison": (_comparison, ("plot", "F", "-o", "p.png"), {
        "size": ("sizes", 0, "size_bytes"), "ratio": ("sizes", 1, "time_ratio"),
        "interval": ("sizes", 1, "ratio_ci", 0), "text": ("sizes", 0, "verdict"), "noise": ("noise",)}),
    "pair-matrix": (lambda: pair_matrix(4), ("plot", "F", "-o", "p.png"), {
        "gpu": ("pairs", 0, "src"), "rate": ("pairs", 0, "bandwidth_gbps"), "time": ("pairs", 0, "latency_s"),
        "size": ("bandwidth_size_bytes",), "text": ("pairs", 0, "link")}),
    "system": (lambda: json.loads((SYSTEMS / "dgx-a100.json").read_text()),
               ("fit", str(RESULT), "-o", "m.json", "--system", "F"), {
        "world": ("gpus_per_node",), "rate": ("nic_Gbps",), "nics": ("nics_per_node",), "text": ("name",),
        "fabric-rate": ("intra_GBps_per_gpu",)}),
    "nccl-tests-json": (_fixture("nccl_tests_allreduce_8xa100.json"), ("fit", "F", "-o", "m.json"), {
        "size": ("results", 1, "size"), "time": ("results", 1, "out_of_place", "time"),
        "rate": ("results", 1, "out_of_place", "bus_bw"), "text": ("results", 1, "type"),
        "world": ("config", "devices", 0, "rank")}),
    "pytest-benchmark": (_pytest_benchmark, ("report", "F", "-o", "r.html"), {
        "size": ("benchmarks", 0, "extra_info", "size_bytes"), "time": ("benchmarks", 0, "stats", "median"),
        "samples": ("benchmarks", 0, "stats", "data", 0), "world": ("benchmarks", 0, "extra_info", "world_size"),
        "text": ("benchmarks", 0, "name")}),
}

# Written as JSON; "NaN" is the literal NaN token (json.dumps of a float nan), a lone surrogate a \ud800 escape.
VALUES = {"2^63": 2**63, "2^64": 2**64, "minus-1": -1, "zero": 0, "1e300": 1e300, "nan": float("nan"),
          "string": "8", "bool": True, "null": None, "list": [1], "lone-surrogate": "x\ud800y", "object": {}}


def _set(doc: dict, path: tuple, value) -> None:
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def formats(folder: Path) -> list[Case]:
    cases = []
    for name, (base, argv, fields) in FORMATS.items():
        def case(cid: str, text: str, codes=(2,), name=name, argv=argv) -> None:
            path = folder / f"{name}-{cid}.json"
            path.write_text(text)
            outputs = tuple(a for a in argv if a.endswith((".png", ".html", ".json")) and a != "F")
            cases.append(Case(f"{name}-{cid}", tuple(str(path) if a == "F" else a for a in argv), codes, outputs))

        case("valid", json.dumps(base()), (0,))
        for field, where in fields.items():
            for label, value in VALUES.items():
                doc = copy.deepcopy(base())
                try:
                    before = _get(doc, where)
                except (KeyError, IndexError, TypeError):
                    raise AssertionError(f"{name}: no field {where} in its base document") from None
                if _same(before, value):
                    continue  # the value it already holds (a name that is already text ...)
                _set(doc, where, value)
                case(f"{field}-{label}", json.dumps(doc), _codes(name, field, label))
        # A value nested past any depth a reader allows, and a list past any record bound.
        text = json.dumps(base())
        case("deep-nesting", text[:-1] + ', "deep": ' + _nested(100_000) + "}")
        doc = base()
        first = next((k for k, v in doc.items() if isinstance(v, list) and v), None)
        if first is None:  # a system description has no list: one where a number goes
            first = next(iter(fields.values()))[0]
        doc[first] = list(range(1_100_000))
        case("huge-array", json.dumps(doc))
    return cases


def _get(doc, path: tuple):
    node = doc
    for key in path:
        node = node[key]
    return node


def _same(before, value) -> bool:
    return type(before) is type(value) and before == value


# Fields where 0 is a real value: a zero fitted latency, no communication (one rank), a CCR of 0, a
# noise band of 0, a dead link's bandwidth, an unmeasured latency, an nccl-tests row below one element.
ZERO_IS_VALID = {("model", "alpha"), ("ccr", "time"), ("ccr", "fraction"), ("profile", "time"),
                 ("comparison", "noise"), ("pair-matrix", "rate"), ("pair-matrix", "time"),
                 ("nccl-tests-json", "size"), ("nccl-tests-json", "rate")}


# Values that are valid for a field: a text field takes any text but a lone surrogate, a null
# optional field is absent, and the zeros above. Those cases must still end cleanly: read (0) or refused (2).
def _codes(name: str, field: str, label: str) -> tuple[int, ...]:
    if (field == "text" and label == "string") or label == "null" or (label == "zero" and (name, field) in
                                                                        ZERO_IS_VALID):
        return (0, 2)
    return (2,)
