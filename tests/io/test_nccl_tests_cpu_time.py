"""nccl-tests' ``-J`` file written with ``-C 1`` (``--report_cputime 1``): each timing block holds
``cpu_time`` where it otherwise holds ``time``. The file below has the shape nccl-tests' JSON
writer gives it (src/util.cu: version, start_time, args, env, nccl_version, config with devices,
results with out_of_place / in_place blocks, end_time); it is read, its times are the host's and
its measurement sets say so."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pybench.errors import FileFormatError
from pybench.model.logs import load_measurements
from pybench.model.logs.nccl_tests_json import CPU_TIME_NOTE

SIZES = [1 << 20, 2 << 20, 4 << 20, 8 << 20]


def _block(key: str, time_us: float, size: int) -> dict:
    algbw = size / (time_us * 1e-6) / 1e9
    return {key: time_us, "alg_bw": algbw, "bus_bw": algbw * 2 * 7 / 8, "nwrong": 0.0}


def _document(key: str = "cpu_time") -> dict:
    return {
        "version": 2, "start_time": "2026-12-01 12:00:00",
        "args": ["./build/all_reduce_perf", "-b", "1M", "-e", "8M", "-f", "2", "-g", "8", "-C", "1", "-J", "out.json"],
        "env": ["NCCL_DEBUG=WARN"], "nccl_version": 22703,
        "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": SIZES[0], "maximum_bytes": SIZES[-1],
                   "step_factor": 2, "warmup_iters": 5, "iterations": 20, "aggregated_iterations": 1,
                   "validation": 1, "graph": 0, "blocking_collectives": "false", "per_iter_timing": "false",
                   "parallel_init": "false",
                   "devices": [{"rank": r, "group": 0, "pid": 100 + r, "hostname": "node1", "device": r,
                                "device_hex": f"0000:{r:02x}:00", "device_info": "NVIDIA H100 80GB HBM3"}
                               for r in range(8)]},
        "results": [{"size": s, "count": s // 4, "type": "float", "redop": "sum", "root": "    -1",
                     "out_of_place": _block(key, 20.0 + s / 1e5, s), "in_place": _block(key, 21.0 + s / 1e5, s),
                     "actual_iterations": 20, "experiment_name": ""} for s in SIZES],
        "end_time": "2026-12-01 12:00:05",
    }


def test_a_cpu_time_file_is_read_with_its_times_said_to_be_the_hosts(tmp_path):
    path = tmp_path / "cputime.json"
    path.write_text(json.dumps(_document()))
    (ms,) = load_measurements(path)
    assert ms.collective == "allreduce" and ms.world_size == 8
    assert list(ms.size_bytes) == SIZES
    assert ms.time_s == pytest.approx([(20.0 + s / 1e5) * 1e-6 for s in SIZES])
    assert ms.time_in_place_s == pytest.approx([(21.0 + s / 1e5) * 1e-6 for s in SIZES])
    assert CPU_TIME_NOTE in ms.notes
    # the same file with nccl-tests' usual times says nothing of the host
    path.write_text(json.dumps(_document("time")))
    (usual,) = load_measurements(path)
    assert list(usual.time_s) == list(ms.time_s) and CPU_TIME_NOTE not in usual.notes


@pytest.mark.parametrize("keys", [("time", "cpu_time"), ()])
def test_a_block_needs_exactly_one_time(tmp_path, keys):
    doc = _document()
    block = doc["results"][1]["out_of_place"]
    block.pop("cpu_time")
    for k in keys:
        block[k] = 25.0
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FileFormatError, match="one of 'time' and 'cpu_time'"):
        load_measurements(path)


def test_the_cli_refuses_a_block_with_both_times_in_one_line(tmp_path):
    doc = _document()
    doc["results"][0]["out_of_place"]["time"] = 25.0
    path = tmp_path / "both.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-m", "pybench", "fit", str(path), "-o", str(tmp_path / "m.json")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "cpu_time" in proc.stderr
    assert not (tmp_path / "m.json").exists()
