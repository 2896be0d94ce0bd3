"""The generated hostile-input corpus (issue 28): classes of cases, each made at run time.

Each class is a function ``(folder) -> list[Case]``: it writes the files its cases read into
``folder`` and returns their command lines with the exit codes allowed. Classes:

* ``documents``: valid pybench results with one hostile value each (sizes past 2^60 and 2^63, a
  4000-digit integer, times of 0, < 0 or 1e300, worlds of 0, lone surrogates, ...), for every
  command that reads a result (compare, plot, report, fit);
* ``numbers``: every kind of numeric option given inf, 1e400, 1e-400, ``10%%``, Arabic-Indic or
  fullwidth digits, ``1_0`` and other non-numbers;
* ``outputs``: every writer given an output it cannot use (a 300-character name, a folder that
  does not exist, a file as folder, /proc, /sys);
* ``logs``: OSU logs too long, too wide, or with numbers no run measures;
* ``formats``: every other format pybench reads, each field attacked (format_cases.py);
* ``memory``: p2p windows and GEMMs that must be refused before allocating, and a fit long
  enough that an n x n search would not fit in 3 GiB but must now finish.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RESULT = FIXTURES / "cpu_mpi2_allreduce.json"
MODEL = FIXTURES / "model_v1_allreduce.json"
README_EXIT_CODES = (0, 1, 2, 3, 124, 130)


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    codes: tuple[int, ...] = (2,)
    outputs: tuple[str, ...] = ()  # files the case may leave in its folder


# ---------------------------------------------------------------- documents
def _set(path: tuple, value) -> Callable[[dict], None]:
    def apply(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return apply


_R0 = ("records", 0)
MUTATIONS: dict[str, Callable[[dict], None]] = {
    "size-2^63": _set(_R0 + ("size_bytes",), 2**63 - 1), "size-2^60": _set(_R0 + ("size_bytes",), 2**60),
    "size-2^64": _set(_R0 + ("size_bytes",), 2**64), "size-minus-8": _set(_R0 + ("size_bytes",), -8),
    "size-0": _set(_R0 + ("size_bytes",), 0), "size-true": _set(_R0 + ("size_bytes",), True),
    "size-string": _set(_R0 + ("size_bytes",), "8"), "size-fraction": _set(_R0 + ("size_bytes",), 8.5),
    "time-1e300": _set(_R0 + ("time_s",), 1e300), "time-0": _set(_R0 + ("time_s",), 0),
    "time-negative": _set(_R0 + ("time_s",), -1e-6), "time-string": _set(_R0 + ("time_s",), "1"),
    "time-true": _set(_R0 + ("time_s",), True), "time-null": _set(_R0 + ("time_s",), None),
    "time-two-days": _set(_R0 + ("time_s",), 172800.0), "p5-negative": _set(_R0 + ("time_p5_s",), -1.0),
    "p95-1e300": _set(_R0 + ("time_p95_s",), 1e300),
    "samples-negative": _set(_R0 + ("samples_s",), [-1.0]), "samples-1e300": _set(_R0 + ("samples_s",), [1e300]),
    "samples-string": _set(_R0 + ("samples_s",), "x"), "samples-bools": _set(_R0 + ("samples_s",), [True]),
    "world-0": _set(("world_size",), 0), "world-negative": _set(("world_size",), -2),
    "world-2^40": _set(("world_size",), 2**40), "world-true": _set(("world_size",), True),
    "world-string": _set(("world_size",), "2"), "world-fraction": _set(("world_size",), 1.5),
    "hosts-zero-ranks": _set(("hosts",), {"h": 0}), "hosts-list": _set(("hosts",), ["h"]),
    "backend-lone-surrogate": _set(("backend",), "mp\ud800i"), "collective-lone-surrogate":
        _set(("collective",), "\udfffallreduce"), "key-lone-surrogate": _set(("options", "\ud801"), 1),
    "dtype-surrogate-in-record": _set(_R0 + ("dtype",), "float\udc00"),
    "records-object": _set(("records",), {}), "records-string": _set(("records",), "x"),
    "records-null": _set(("records",), None), "record-list": _set(("records", 0), []),
    "record-number": _set(("records", 0), 5), "huge-page-fraction-2": _set(_R0 + ("huge_page_fraction",), 2.0),
    "wrong-negative": _set(_R0 + ("wrong",), -1), "ops-per-sample-0": _set(_R0 + ("ops_per_sample",), 0),
    "busbw-negative": _set(_R0 + ("busbw_gbps",), -3.0), "iterations-2^70": _set(_R0 + ("iterations",), 2**70),
}
READERS = {
    "compare": ("compare", "F", str(RESULT)),
    "plot": ("plot", "F", "-o", "p.png"),
    "report": ("report", "F", "-o", "r.html"),
    "fit": ("fit", "F", "-o", "m.json"),
}


def documents(folder: Path) -> list[Case]:
    base = json.loads(RESULT.read_text())
    files = {}
    for name, mutate in MUTATIONS.items():
        doc = copy.deepcopy(base)
        mutate(doc)
        path = folder / f"{name}.json"
        path.write_text(json.dumps(doc))  # ensure_ascii: lone surrogates become \ud800 escapes
        files[name] = path
    digits = folder / "size-4000-digits.json"
    doc = copy.deepcopy(base)
    doc["records"][0]["size_bytes"] = 123456789123456789
    digits.write_text(json.dumps(doc).replace("123456789123456789", "9" * 4000, 1))
    files["size-4000-digits"] = digits
    return [Case(f"{reader}-{name}", tuple(str(path) if a == "F" else a for a in argv))
            for reader, argv in READERS.items() for name, path in files.items()]


# ---------------------------------------------------------------- numbers
BAD_NUMBERS = {
    "inf": "inf", "minus-inf": "-inf", "nan": "nan", "1e400": "1e400", "minus-1e400": "-1e400",
    "1e-400": "1e-400", "double-percent": "10%%", "arabic-indic": "\u0661\u0660", "fullwidth": "\uff11\uff10",
    "underscore": "1_0", "hex": "0x10", "dangling-exponent": "1e", "empty": "", "blank": " ",
    "80-digits": "9" * 80, "comma": "1,5", "double-sign": "+-1", "two-points": "1.2.3",
    "arabic-exponent": "\u0661e3", "superscript": "\u00b2",
}
NUMERIC_OPTIONS = {
    "timeout": ("allreduce", "--sizes", "1K", "--timeout", "V"),
    "time-budget": ("allreduce", "--sizes", "1K", "--time-budget", "V"),
    "iters": ("allreduce", "--sizes", "1K", "--iters", "V"),
    "warmup": ("allreduce", "--sizes", "1K", "--warmup", "V"),
    "precision": ("allreduce", "--sizes", "1K", "--precision", "V"),
    "np": ("allreduce", "--sizes", "1K", "--np", "V"),
    "min-busbw": ("allreduce", "--sizes", "1K", "--min-busbw", "V"),
    "window": ("p2p", "--test", "bw", "--sizes", "1K", "--window", "V"),
    "fail-on-regression": ("compare", str(RESULT), str(RESULT), "--fail-on-regression", "V"),
    "tflops": ("plan", "--params", "125M", "--model", str(MODEL), "--tflops", "V"),
    "ccr-world": ("ccr", "--params", "125M", "--model", str(MODEL), "--tflops", "100", "--world", "V"),
    "copy-samples": ("copy", "--samples", "V"),
    "matrix-threshold": ("p2p", "--matrix", "--threshold", "V"),
    "profile-steps": ("profile", "--params", "1M", "--steps", "V"),
    "min-points": ("fit", str(RESULT), "-o", "m.json", "--min-points", "V"),
}


def numbers(folder: Path) -> list[Case]:
    return [Case(f"{option}-{name}", tuple(value if a == "V" else a for a in argv))
            for option, argv in NUMERIC_OPTIONS.items() for name, value in BAD_NUMBERS.items()
            if (option, name) not in _VALID]


# Values some options take on purpose: `--timeout inf` (no timeout), `ccr --world 1,5` (a list).
_VALID = {("timeout", "inf"), ("ccr-world", "comma")}


# ---------------------------------------------------------------- outputs
WRITERS = {
    "allreduce": ("allreduce", "--sizes", "1K", "--iters", "5", "--backend", "mpi", "--json", "O"),
    "fit": ("fit", str(RESULT), "-o", "O"),
    "predict": ("predict", str(MODEL), "--sizes", "1M", "--json", "O"),
    "compare": ("compare", str(RESULT), str(RESULT), "--json", "O"),
    "ccr": ("ccr", "--params", "125M", "--model", str(MODEL), "--tflops", "100", "--world", "8", "--json", "O"),
    "plan": ("plan", "--params", "125M", "--model", str(MODEL), "--tflops", "100", "--json", "O"),
    "plot": ("plot", str(RESULT), "-o", "O"),
    "report": ("report", str(RESULT), "-o", "O"),
}


def outputs(folder: Path) -> list[Case]:
    (folder / "a-file").write_text("not a folder\n")
    bad = {"name-300-chars": "x" * 296 + ".out", "no-such-folder": "no/such/folder/x.out",
           "file-as-folder": str(folder / "a-file" / "x.out"), "in-proc": "/proc/pybench-x.out",
           "in-sys": "/sys/pybench-x.out", "trailing-slash": "x.out/"}
    cases = [Case(f"{writer}-{name}", tuple(path if a == "O" else a for a in argv), (2, 3))
             for writer, argv in WRITERS.items() for name, path in bad.items()]
    # "x.out/" is read as x.out (pathlib drops the slash): written there, or refused; nothing else.
    return [Case(c.id, c.argv, (0, 2, 3), ("x.out",)) if c.id.endswith("trailing-slash") else c for c in cases]


# ---------------------------------------------------------------- logs
_OSU_HEAD = "# OSU MPI Latency Test v7.3\n# Size          Latency (us)\n"


def logs(folder: Path) -> list[Case]:
    made = {
        "600k-lines": _OSU_HEAD + "".join(f"{8 * (i % 64 + 1)}  {1.0 + i % 7:.2f}\n" for i in range(600_000)),
        "70k-distinct-sizes": _OSU_HEAD + "".join(f"{i}  {1.0 + i * 1e-4:.2f}\n" for i in range(1, 70_001)),
        "size-2^70": _OSU_HEAD + f"8  1.0\n16  1.1\n{2**70}  5.0\n",
        "size-negative": _OSU_HEAD + "8  1.0\n-16  1.1\n32  1.2\n",
        "time-nan": _OSU_HEAD + "8  1.0\n16  nan\n32  1.2\n",
        "time-inf": _OSU_HEAD + "8  1.0\n16  inf\n32  1.2\n",
        "time-1e300": _OSU_HEAD + "8  1.0\n16  1e300\n32  1.2\n",
        "time-negative": _OSU_HEAD + "8  1.0\n16  -1.1\n32  1.2\n",
        "arabic-digits": _OSU_HEAD + "\u0668  1.0\n16  1.1\n32  1.2\n",
        "one-line": _OSU_HEAD + "8  1.0\n",
    }
    cases = []
    for name, text in made.items():
        path = folder / f"{name}.txt"
        path.write_text(text)
        cases.append(Case(f"fit-log-{name}", ("fit", str(path), "-o", "m.json")))
    return cases


# ---------------------------------------------------------------- memory
def memory(folder: Path) -> list[Case]:
    cases = [Case(f"p2p-{test}-window-{window}-{size}",
                  ("p2p", "--test", test, "--window", str(window), "--sizes", size, "--np", "2", "--warmup", "0"))
             for test in ("bw", "bibw") for window, size in ((65536, "64K"), (65536, "1M"), (16384, "1M"),
                                                            (65536, "16M"), (4096, "16M"), (65536, "256K"))]
    cases += [Case(f"compute-ffn-{ffn}", ("compute", "--hidden", "128", "--layers", "1", "--ffn", str(ffn),
                                         "--engine", "numpy"))
              for ffn in (16_777_216, 8_388_608, 4_194_304)]
    cases += [Case("compute-hidden-65536", ("compute", "--hidden", "65536", "--layers", "1", "--engine", "numpy"))]
    long = folder / "sweep-5000.json"
    long.write_text(_long_sweep(5000))
    # 5000 sizes: an n x n breakpoint search would need ~2.4 GB; the thinned search must finish.
    cases.append(Case("fit-5000-sizes", ("fit", str(long), "-o", "m5000.json"), (0,), ("m5000.json",)))
    return cases


def _long_sweep(n: int) -> str:
    """A result of ``n`` sizes: two regimes and 1% deterministic ripple."""
    base = json.loads(RESULT.read_text())
    template = base["records"][0]
    records = []
    for i in range(n):
        size = 1024 + 4096 * i
        t = (5e-6 + size / 10e9 if size < 8 << 20 else 20e-6 + size / 20e9) * (1 + 0.01 * ((i * 7919) % 13 - 6) / 6)
        records.append({**template, "size_bytes": size, "count": size // 4, "time_s": t, "time_mean_s": t,
                        "time_min_s": t, "time_max_s": t, "time_p5_s": t, "time_p95_s": t, "time_p99_s": t,
                        "time_ci_low_s": t, "time_ci_high_s": t, "algbw_gbps": size / t / 1e9,
                        "busbw_gbps": size / t / 1e9, "samples_s": [t]})
    base["records"] = records
    return json.dumps(base)


CLASSES: dict[str, Callable[[Path], list[Case]]] = {
    "documents": documents, "numbers": numbers, "outputs": outputs, "logs": logs, "memory": memory,
    # every other file format (format_cases.py, which takes its fixtures from here: imported when run)
    "formats": lambda folder: __import__("format_cases").formats(folder)}
