"""The torch backend (torch.distributed, gloo on CPU) on 2 real ranks.

One MPI launch sweeps every collective x dtype x op through the backend object
(fast); CLI runs check the user-facing paths: pybench's own launch, torchrun,
the result file, wrong values, bad input and torch missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import assert_every_case_exact, rank_results

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")


RANK_SCRIPT = textwrap.dedent('''
    import json, sys
    from pybench.measure.backends import get_backend
    from pybench.measure.benchmark import BenchConfig
    from pybench.collectives import COLLECTIVES, DTYPES, OPS
    out = sys.argv[1]
    b = get_backend("torch")
    info = b.start()
    b.watch(60, None)
    results = []
    for name, coll in COLLECTIVES.items():
        for dtype in DTYPES:
            for op in (OPS if coll.reduces else ("sum",)):
                for size in (DTYPES[dtype] * 2 * 37, 8192):   # odd count per rank, and a round one
                    cfg = BenchConfig(benchmark=name, sizes=(size,), dtype=dtype, op=op)
                    bench = b.make_bench(cfg, size)
                    bench.warmup(1)
                    wrong = bench.check(2)
                    samples, wall = bench.measure(3, 2)
                    results.append(dict(collective=name, dtype=dtype, op=op, size=size, wrong=wrong,
                                        samples=samples, wall=wall))
    with open(f"{out}/rank{info['rank']}.json", "w") as f:
        json.dump(dict(info=info, version=b.library_version(), results=results), f)
    b.finish()
''')


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, native):
    out = tmp_path_factory.mktemp("torch_sweep")
    script = out / "sweep_torch.py"
    script.write_text(RANK_SCRIPT)
    return rank_results(script, out, timeout=240)


def test_every_collective_dtype_and_op_is_exact_through_gloo(sweep):
    assert_every_case_exact(sweep[0]["results"])


def test_samples_are_max_reduced_and_identical_on_every_rank(sweep):
    a, b = sweep[0]["results"], sweep[1]["results"]
    assert len(a) == len(b)
    for ra, rb in zip(a, b):
        assert ra["samples"] == rb["samples"] and ra["wall"] == rb["wall"]
        assert len(ra["samples"]) == 3 and all(s > 0 for s in ra["samples"])


def test_rank_facts_and_versions(sweep):
    i0, i1 = sweep[0]["info"], sweep[1]["info"]
    assert (i0["rank"], i1["rank"], i0["world_size"]) == (0, 1, 2)
    assert i0["hosts"] == i1["hosts"] and len(i0["hosts"]) == 2 and i0["local_size"] == 2
    assert "torch" in sweep[0]["version"] and "gloo" in sweep[0]["version"]


def test_cli_run_writes_a_complete_result_file(pybench_cli, tmp_path):
    proc = pybench_cli("allgather", "--backend", "torch", "--sizes", "1K,64K", "--iters", "4", "-w", "1",
                       "--json", str(tmp_path / "ag.json"), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads((tmp_path / "ag.json").read_text())
    assert d["backend"] == "torch" and d["finished"] is True and d["world_size"] == 2
    assert [r["size_bytes"] for r in d["records"]] == [1024, 65536]
    assert all(r["wrong"] == 0 and r["iterations"] >= 4 and r["busbw_gbps"] > 0 for r in d["records"])
    assert "gloo" in d["options"]["buffer_allocation"] and "torch" in d["options"]["buffer_allocation"]
    assert "backend torch" in proc.stdout
    meta = d["environment"].get("backend")
    if meta is not None:  # recorded where the runner asks backends for run_metadata
        assert meta["process_group"] == "gloo" and meta["torch"] == torch.__version__


def test_wrong_values_are_counted_and_exit_1(pybench_cli):
    proc = pybench_cli("alltoall", "--backend", "torch", "--sizes", "8K", "--iters", "2", "-w", "1",
                       env={"PYBENCH_INJECT_WRONG": "1"}, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    row = [line for line in proc.stdout.splitlines() if line.strip().startswith("8192")][0]
    assert row.split()[8] == "2"  # 2 check iterations x 1 flipped element on rank 1


def test_under_torchrun(tmp_path):
    out = tmp_path / "tr.json"
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "pybench",
                           "broadcast", "--backend", "torch", "--sizes", "4K", "--iters", "3", "-w", "1", "--root", "1",
                           "--json", str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads(out.read_text())
    assert d["backend"] == "torch" and d["finished"] and d["records"][0]["wrong"] == 0 and d["records"][0]["root"] == 1


def test_bad_input_is_one_line_exit_2(pybench_cli):
    proc = pybench_cli("allreduce", "--backend", "torch", "--sizes", "1G:1M")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("pybench: error:")


def test_torch_missing_says_pip_install_torch(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"
            "from pybench.measure.backends import get_backend\n"
            "from pybench.errors import BackendUnavailable\n"
            "try:\n    get_backend('torch')\nexcept BackendUnavailable as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    msg = proc.stdout.strip()
    assert len(msg.splitlines()) == 1 and "pip install torch" in msg, proc.stderr


def test_unsupported_benchmarks_are_refused_in_one_line():
    from pybench.errors import UsageError
    from pybench.measure.backends.torch import check_config
    from pybench.measure.benchmark import BenchConfig
    with pytest.raises(UsageError, match="p2p --backend mpi"):
        check_config(BenchConfig(benchmark="p2p_bw", sizes=(8,)))
    check_config(BenchConfig(benchmark="reducescatter", sizes=(8,)))  # gloo in torch 2.13 has it


def test_pattern_period_matches_the_native_rule():
    from pybench.measure.backends.torch import pattern_period
    assert pattern_period("float32", "sum", 2, True) == 13
    assert pattern_period("bfloat16", "sum", 64, True) == 4  # 256 / 64
    assert pattern_period("bfloat16", "max", 64, True) == 13
    assert pattern_period("float16", "sum", 4096, True) == 1


def test_options_are_typed_and_beat_the_environment(monkeypatch):
    """TorchOptions carries what the backend used to read from PYBENCH_* variables; given options win."""
    from pybench.errors import UsageError
    from pybench.measure.backends.torch import TorchBackend, TorchOptions
    opts = TorchOptions.from_environ({"PYBENCH_TORCH_BACKEND": " GLOO ", "PYBENCH_GLOO_IFNAME": "veth0",
                                      "PYBENCH_HOSTNAME": "ns1", "PYBENCH_INJECT_WRONG": "1",
                                      "PYBENCH_MASTER_ADDR": ""})
    assert opts == TorchOptions(process_group="gloo", gloo_ifname="veth0", hostname="ns1", inject_wrong_rank=1)
    assert opts.host() == "ns1" and TorchOptions.from_environ({}) == TorchOptions()
    assert TorchOptions.from_environ({"PYBENCH_INJECT_WRONG": "no"}).inject_wrong_rank is None  # as the C++ hook
    with pytest.raises(UsageError, match="process_group 'mpi' is not one of gloo, nccl"):
        TorchOptions(process_group="mpi")
    with pytest.raises(UsageError, match="PYBENCH_TORCH_BACKEND"):
        TorchOptions.from_environ({"PYBENCH_TORCH_BACKEND": "mpi"})
    monkeypatch.setenv("PYBENCH_TORCH_BACKEND", "nccl")
    monkeypatch.setenv("PYBENCH_HOSTNAME", "from-env")
    assert TorchBackend().options.hostname == "from-env"  # no options: the launcher's variables
    b = TorchBackend(TorchOptions(process_group="gloo"))
    assert b.pg_backend == "gloo" and b.options.hostname is None


def test_a_single_host_store_listens_on_loopback_only():
    """The TCPStore pybench opens for a one-host job is unauthenticated: it must not listen on every address."""
    pytest.importorskip("torch")
    from pybench.measure.backends.torch import TorchBackend
    backend = TorchBackend()
    store = backend._open_store("127.0.0.1", 1)
    port = int(store.port)
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                listening.add(address)
    assert listening == {"0100007F"}, listening  # 127.0.0.1 only
    del store
