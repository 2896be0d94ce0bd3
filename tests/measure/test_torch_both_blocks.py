"""The torch backend measures both of nccl-tests' blocks (out of place, then in place) on 2 real gloo ranks.

Readers of nccl-tests output (CloudAI, nccl_to_csv.py, SuperBench, ``r["out_of_place"]["bus_bw"]`` on a
``-J`` file) need numbers in both blocks. All-reduce out of place is ``all_reduce`` on the output tensor
(the input copied into it before each checked operation, never in a timed one); in place on one tensor.
All-gather, reduce-scatter and broadcast run NCCL's one-buffer layouts in place; all-to-all and send/recv
send from the tensor they receive into, timed and not checked (#wrong N/A), as nccl-tests'.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import rank_results

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0)")

BOTH = ["allreduce", "allgather", "reducescatter", "broadcast"]
UNCHECKED = ["alltoall", "sendrecv"]
QUICK = ("-b", "1K", "-e", "4K", "-f", "2", "-n", "5", "-w", "1", "-c", "1")

RANK_SCRIPT = textwrap.dedent('''
    import dataclasses, json, sys
    from pybench.measure.backends import get_backend
    from pybench.measure.benchmark import BenchConfig
    from pybench.collectives import DTYPES, OPS, get_collective
    out = sys.argv[1]
    b = get_backend("torch")
    info = b.start()
    b.watch(60, None)
    rank, world = info["rank"], info["world_size"]
    results, layout = [], {}
    for name in ("allreduce", "allgather", "reducescatter", "broadcast"):
        for dtype in DTYPES:
            for op in (OPS if get_collective(name).reduces else ("sum",)):
                for size in (DTYPES[dtype] * 2 * 37, 8192):   # odd count per rank, and a round one
                    for root in ((0, 1) if name == "broadcast" else (0,)):
                        cfg = BenchConfig(benchmark=name, sizes=(size,), dtype=dtype, op=op, root=root)
                        bench = b.make_in_place_bench(cfg, size)
                        bench.warmup(1)
                        wrong = bench.check(2)
                        samples, _ = bench.measure(2, 2)
                        results.append(dict(collective=name, dtype=dtype, op=op, size=size, root=root,
                                            in_place=True, wrong=wrong, samples=samples))
        # where the one-buffer form takes its input and leaves its result (float32, 8 KiB)
        bench = b.make_in_place_bench(BenchConfig(benchmark=name, sizes=(8192,)), 8192)
        s, r = bench.send, bench.recv
        layout[name] = dict(same_storage=s.untyped_storage().data_ptr() == r.untyped_storage().data_ptr(),
                            send_offset=s.storage_offset(), recv_offset=r.storage_offset(),
                            send_n=s.numel(), recv_n=r.numel())
    unchecked = [n for n in ("alltoall", "sendrecv")
                if b.make_in_place_bench(BenchConfig(benchmark=n, sizes=(8192,)), 8192).check(2) == -1]
    b.options = dataclasses.replace(b.options, inject_wrong_rank=1)
    injected = {}
    for name in ("allreduce", "allgather", "reducescatter", "broadcast"):
        bench = b.make_in_place_bench(BenchConfig(benchmark=name, sizes=(8192,)), 8192)
        injected[name] = bench.check(2)
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump(dict(rank=rank, world=world, results=results, layout=layout, unchecked=unchecked,
                       injected=injected), f)
    b.finish()
''')


@pytest.fixture(scope="module")
def in_place_sweep(tmp_path_factory, native):
    out = tmp_path_factory.mktemp("torch_in_place")
    script = out / "in_place_torch.py"
    script.write_text(RANK_SCRIPT)
    return rank_results(script, out, timeout=240)


def _rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.split() and line.split()[0].isdigit()]


@pytest.mark.mpi
@pytest.mark.parametrize("collective", BOTH)
def test_torch_prints_and_records_both_blocks_as_nccl_tests(pybench_cli, collective, tmp_path, native):
    out, nt = tmp_path / "r.json", tmp_path / "nt.json"
    proc = pybench_cli(collective, "--backend", "torch", *QUICK, "--json", str(out), "-J", str(nt), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = _rows(proc.stdout)
    assert [int(f[0]) for f in rows] == [1024, 2048, 4096]
    for f in rows:  # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
        assert len(f) == 13 and "N/A" not in f, f
        assert float(f[5]) > 0 and float(f[9]) > 0, f
        assert float(f[6]) >= 0 and float(f[7]) >= 0 and float(f[10]) >= 0 and float(f[11]) >= 0, f
        assert f[8] == f[12] == "0", f
    d = json.loads(out.read_text())
    assert d["options"]["in_place"] is False  # measured out of place first: the first block is the record's own
    assert "out of place, then in place" in d["options"]["buffer_allocation"]
    if collective == "allreduce":  # torch reduces one tensor: no copy in the timed operations of either block
        assert "the input copied into it before each checked operation only" in d["options"]["buffer_allocation"]
    recs = d["records"]
    assert [r["size_bytes"] for r in recs] == [1024, 2048, 4096]
    for r in recs:
        assert r["time_s"] > 0 and r["algbw_gbps"] > 0 and r["busbw_gbps"] > 0 and r["wrong"] == 0
        assert r["in_place_time_s"] > 0 and r["in_place_algbw_gbps"] > 0 and r["in_place_busbw_gbps"] > 0
        assert r["in_place_wrong"] == 0
    entries = json.loads(nt.read_text())["results"]
    assert len(entries) == len(recs)
    for entry, rec in zip(entries, recs):
        for block, key in (("out_of_place", "time_s"), ("in_place", "in_place_time_s")):
            b = entry[block]
            assert b is not None, (block, entry)
            assert b["time"] == pytest.approx(rec[key] * 1e6) and b["time"] > 0
            assert b["alg_bw"] > 0 and b["bus_bw"] > 0 and b["nwrong"] == 0


@pytest.mark.mpi
@pytest.mark.parametrize("collective", UNCHECKED)
def test_alltoall_and_sendrecv_are_timed_in_place_unchecked_as_nccl_tests(pybench_cli, collective, tmp_path, native):
    # one tensor sent from and received into: what lands there depends on the transfers' order (gloo gives other
    # elements), so nccl-tests reports no #wrong in place, nor pybench; readers take the in-place time
    out, nt = tmp_path / "r.json", tmp_path / "nt.json"
    proc = pybench_cli(collective, "--backend", "torch", *QUICK, "--json", str(out), "-J", str(nt), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = _rows(proc.stdout)
    assert len(rows) == 3
    for f in rows:
        assert len(f) == 13 and float(f[5]) > 0 and f[8] == "0" and float(f[9]) > 0 and f[12] == "N/A", f
    assert all(r["in_place_time_s"] > 0 and r["in_place_wrong"] is None and r["wrong"] == 0
               for r in json.loads(out.read_text())["records"])
    assert all(e["in_place"]["bus_bw"] > 0 and e["in_place"]["nwrong"] is None and e["out_of_place"]["nwrong"] == 0
               for e in json.loads(nt.read_text())["results"])


@pytest.mark.mpi
def test_every_in_place_form_is_exact_for_every_dtype_op_and_root(in_place_sweep):
    from pybench.collectives import DTYPES, OPS, get_collective
    wanted = {(c, d, o) for c in BOTH for d in DTYPES for o in (OPS if get_collective(c).reduces else ("sum",))}
    for rank in in_place_sweep:
        results = rank["results"]
        assert {(r["collective"], r["dtype"], r["op"]) for r in results} == wanted
        assert {r["root"] for r in results if r["collective"] == "broadcast"} == {0, 1}
        assert [(r["collective"], r["dtype"], r["op"], r["size"], r["root"], r["wrong"])
                for r in results if r["wrong"]] == []
        assert all(len(r["samples"]) == 2 and all(s > 0 for s in r["samples"]) for r in results)
    assert in_place_sweep[0]["results"] == in_place_sweep[1]["results"]  # max-reduced: one set of figures


@pytest.mark.mpi
def test_in_place_forms_use_nccls_one_buffer_layouts(in_place_sweep):
    b = 8192 // 4 // 2  # float32 elements per rank block
    for rank in in_place_sweep:
        r, lay = rank["rank"], rank["layout"]
        assert all(v["same_storage"] for v in lay.values()), lay
        # all-gather: the input is this rank's block of the output
        assert lay["allgather"] == dict(same_storage=True, send_offset=r * b, recv_offset=0, send_n=b, recv_n=2 * b)
        # reduce-scatter: the output is this rank's block of the input
        assert lay["reducescatter"] == dict(same_storage=True, send_offset=0, recv_offset=r * b, send_n=2 * b,
                                            recv_n=b)
        for name in ("allreduce", "broadcast"):  # one tensor (broadcast: the root sends from its output)
            assert lay[name] == dict(same_storage=True, send_offset=0, recv_offset=0, send_n=2 * b, recv_n=2 * b)
        assert rank["unchecked"] == ["alltoall", "sendrecv"]


@pytest.mark.mpi
def test_the_in_place_check_counts_a_wrong_element(in_place_sweep):
    # rank 1 flips one element after each of 2 checked operations: 2 wrong, summed over ranks on every rank
    for rank in in_place_sweep:
        assert rank["injected"] == {"allreduce": 2, "allgather": 2, "reducescatter": 2, "broadcast": 2}


@pytest.mark.mpi
def test_the_in_place_block_of_the_table_reports_wrong_elements(pybench_cli, tmp_path, native):
    nt = tmp_path / "nt.json"
    proc = pybench_cli("reducescatter", "--backend", "torch", "-b", "8K", "-e", "8K", "-n", "2", "-w", "1",
                       "-J", str(nt), env={"PYBENCH_INJECT_WRONG": "1"}, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    (row,) = _rows(proc.stdout)
    assert row[8] == "2" and row[12] == "2", row  # 2 check iterations x 1 flipped element on rank 1, both blocks
    (entry,) = json.loads(nt.read_text())["results"]
    assert entry["out_of_place"]["nwrong"] == 2 and entry["in_place"]["nwrong"] == 2
