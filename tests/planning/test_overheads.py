"""Issue 14, point 3: the three overheads per row (latency, bandwidth, synchronisation), with the
wait for stragglers and a slow node counted as communication."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_ccr import all_links, run

from pybench.cli.main import main
from pybench.errors import UsageError


def test_latency_and_bandwidth_split_the_serial_time():
    (r,) = run(models=all_links("allreduce", alpha_s=0.25)).rows
    # one all-reduce of 2000 B: 0.25 s latency + 2000 B / 2000 B/s; "latency" is the 1-byte time
    assert r.comm_s == pytest.approx(1.25)
    assert r.latency_s == pytest.approx(0.25 + 1 / 2000)
    assert r.bandwidth_s == pytest.approx(1.0 - 1 / 2000)
    (b,) = run(models=all_links("allreduce", alpha_s=0.25), overlap=True, bucket_mb=500 / 2**20).rows
    # four buckets of 500 B: four latencies, the same bytes
    assert b.comm_s == pytest.approx(4 * 0.25 + 1.0)
    assert b.latency_s == pytest.approx(4 * (0.25 + 1 / 2000))
    assert b.latency_s + b.bandwidth_s == pytest.approx(b.comm_s)


def test_worse_stragglers_make_the_ratio_worse():
    rows = [run(world=4, straggler_cv=cv).rows[0] for cv in (0.0, 0.1, 0.3)]
    assert [r.compute_s for r in rows] == [1.0, 1.0, 1.0]
    assert rows[0].sync_s == 0.0 < rows[1].sync_s < rows[2].sync_s
    assert rows[0].ccr < rows[1].ccr < rows[2].ccr
    assert rows[0].exposed_fraction < rows[1].exposed_fraction < rows[2].exposed_fraction
    for r in rows:
        assert r.step_s == pytest.approx(r.compute_s + r.bubble_s + r.exposed_s + r.sync_s)


def test_one_slow_node_is_waited_for_only_across_nodes():
    (inside,) = run(world=2, slow_node=0.9).rows  # one 2-GPU node: nobody to wait for
    assert inside.sync_s == 0.0
    (across,) = run(world=4, slow_node=0.9).rows
    assert across.sync_s == pytest.approx(1 / 0.9 - 1)
    assert across.ccr == pytest.approx((1.0 + across.sync_s) / (2.0 + across.sync_s))
    (both,) = run(world=4, slow_node=0.9, straggler_cv=0.1).rows
    from pybench.planning.stragglers import expected_max_normal
    assert both.sync_s == pytest.approx((1 + 0.1 * expected_max_normal(4)) / 0.9 - 1)
    assert math.isclose(both.straggler_factor, 1 + 0.1 * expected_max_normal(4))


@pytest.mark.parametrize("factor", [0.0, -0.5, 1.5, float("nan"), 1e-300, 0.0099])
def test_a_slow_node_factor_outside_the_slowest_node_and_1_is_refused(factor):
    """A node at 1e-300 of the others' speed has failed: its 2e299 s wait was once printed as a plan."""
    with pytest.raises(UsageError, match=r"^slow_node must lie in \[0.01, 1\]"):
        run(world=4, slow_node=factor)
    assert run(world=4, slow_node=0.01).rows[0].sync_s == pytest.approx(99.0)


def test_overheads_in_the_table_and_the_document(tmp_path, capsys):
    res = run(world="2,4", straggler_cv=0.1, models=all_links("allreduce", alpha_s=0.25))
    head = res.table().splitlines()[1]
    assert "latency" in head and "bandwidth" in head and "sync" in head
    row = json.loads(json.dumps(res.to_dict()))["rows"][1]
    assert row["latency_s"] + row["bandwidth_s"] == pytest.approx(row["comm_s"])
    assert row["sync_s"] > 0
    model = str(Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json")
    common = ["ccr", "--params", "125M", "--model", model, "--tflops", "100", "--world", "8"]
    assert main([*common, "--slow-node", "0"]) == 2
    assert "argument --slow-node: '0' must be at least 0.01 and at most 1" in capsys.readouterr().err
    assert main([*common, "--slow-node", "1e-300"]) == 2
    assert "argument --slow-node: '1e-300' must be at least 0.01 and at most 1" in capsys.readouterr().err
    assert main([*common, "--slow-node", "0.9"]) == 0
    assert "sync" in capsys.readouterr().out


# --- issue 14, point 5: breakeven among layouts that fit, with a tolerance -------------------------------

def _links(inter_alpha_s):
    from test_ccr import AlphaBeta
    return [AlphaBeta("allreduce", "intra-node", 8, 0.0, 1e30), AlphaBeta("allreduce", "inter-node", 8, inter_alpha_s,
                                                                           1e30)]


def test_breakeven_counts_a_hair_below_the_reference_as_cheap():
    from pybench.planning.grid import BREAKEVEN_TOLERANCE
    # across nodes each step pays 0.4 ms on 1 s of compute: 0.04% fewer samples per dollar
    (be,) = run(world="2,4,8", models=_links(4e-4), price_per_node_hour=3.6).breakevens
    assert be.tolerance == BREAKEVEN_TOLERANCE == 0.01
    assert be.cheaper_up_to_world == 8 and be.faster_from_world == 4
    # 5% fewer is a real difference
    (far,) = run(world="2,4,8", models=_links(0.05), price_per_node_hour=3.6).breakevens
    assert far.cheaper_up_to_world is None
    text = run(world="2,4,8", models=_links(0.05), price_per_node_hour=3.6).table()
    assert "as cheap per sample (within 1%) at no multi-node size" in text


def test_no_breakeven_against_a_reference_that_does_not_fit():
    res = run(world="2,4,8", price_per_node_hour=3.6, device_memory_gb=1e-6)
    assert res.breakevens == ()
    assert any("breakeven ddp batch 2" in w and "does not fit" in w for w in res.warnings)


# --- issue 14, point 4: memory and time agree -----------------------------------------------------------------

def test_a_layout_that_needs_checkpointing_is_timed_with_recomputation():
    # one device: 20352 B plain, 18432 B checkpointed (test_ccr): 19000 B usable fits only with checkpointing
    (plain,) = run(world=1, device_memory_gb=1e-4).rows
    (ckpt,) = run(world=1, device_memory_gb=23750 / 1e9).rows
    assert plain.memory.fits == "fits" and not plain.recomputed and plain.compute_s == 1.0
    assert ckpt.memory.fits == "fits with checkpointing" and ckpt.recomputed
    assert ckpt.compute_s == pytest.approx(8 / 6)
    assert ckpt.samples_per_s == pytest.approx(plain.samples_per_s * 6 / 8)
    res = run(world=1, device_memory_gb=23750 / 1e9)
    assert any("timed with recomputation" in n for n in res.notes)
    assert json.loads(json.dumps(res.to_dict()))["rows"][0]["recomputed"] is True


# --- issue 14, point 4: one headroom rule -------------------------------------------------------------------

@pytest.mark.parametrize("device", [20352 / 0.95, 20352 / 0.81, 20352 / 0.79, 20352 / 0.5])
def test_the_table_and_the_plan_share_one_headroom(device):
    from test_ccr import FLOPS, SHAPE

    from pybench.planning.advice import plan
    (row,) = run(world=1, device_memory_gb=device / 1e9).rows
    p = plan(1000, 4, 2, models=all_links("allreduce"), flops_per_s=FLOPS, gpus_per_node=2, shape=SHAPE,
             device_memory_gb=device / 1e9, max_world=2)
    fits = 20352 <= 0.8 * device
    assert (row.memory.fits == "fits") is fits  # 95% of the device no longer "fits"
    assert (p.verdict == "fits one device") is fits
    assert p.memory_one_device.fits == row.memory.fits


def test_headroom_is_a_share():
    with pytest.raises(UsageError, match=r"^memory_headroom must lie in \(0, 1\]"):
        run(memory_headroom=1.5)
    (all_of_it,) = run(world=1, device_memory_gb=20352 / 1e9, memory_headroom=1.0).rows
    assert all_of_it.memory.fits == "fits"
    model = str(Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json")
    assert main(["ccr", "--params", "125M", "--model", model, "--tflops", "100", "--memory-headroom", "0"]) == 2


# --- issue 14, point 4: the 18 B/param accounting beside 16 ------------------------------------------------

def test_eighteen_bytes_per_param_counts_fp32_gradients():
    from test_ccr import SHAPE

    from pybench.planning.strategies import Workload, make_layout, memory_per_device
    work = Workload(1000, SHAPE, 4, 2)
    m16 = memory_per_device(make_layout("ddp", 4, 4), work, 1e6)
    m18 = memory_per_device(make_layout("ddp", 4, 4), work, 1e6, bytes_per_param=18)
    assert (m16.grads_bytes, m18.grads_bytes) == (2000, 4000)
    assert m18.states_bytes - m16.states_bytes == 2 * 1000
    z2 = memory_per_device(make_layout("zero2", 4, 4), work, 1e6, bytes_per_param=18)
    assert z2.grads_bytes == 1000  # sharded like the bf16 ones
    (row,) = run(bytes_per_param=18).rows
    assert row.memory.states_bytes == 18000
    assert any(n.startswith("memory: 18 B/param") and "fp32 grads 4" in n for n in run(bytes_per_param=18).notes)
    with pytest.raises(UsageError, match="^bytes_per_param must be one of 16, 18"):
        run(bytes_per_param=17)


def test_plan_says_which_accounting():
    from test_ccr import FLOPS, SHAPE

    from pybench.planning.advice import plan
    p = plan(1000, 4, 2, models=all_links("allreduce"), flops_per_s=FLOPS, gpus_per_node=2, shape=SHAPE,
             device_memory_gb=1e-4, max_world=2, bytes_per_param=18)
    assert p.memory_one_device.states_bytes == 18000 and "at 18 B/param" in p.advice[0]


def test_plan_takes_stragglers_and_a_slow_node(capsys):
    from test_ccr import FLOPS, SHAPE

    from pybench.planning.advice import plan
    kw = dict(models=all_links("allreduce"), flops_per_s=FLOPS, gpus_per_node=2, shape=SHAPE,
              device_memory_gb=1e-4, max_world=8)
    calm = plan(1000, 4, 2, **kw)
    rough = plan(1000, 4, 2, straggler_cv=0.2, slow_node=0.8, **kw)
    by_world = {r.world: r for r in rough.rows}
    assert by_world[4].sync_s > by_world[2].sync_s > 0  # the slow node only across nodes
    assert all(r.ccr > c.ccr for r, c in zip(rough.rows, calm.rows) if r.world > 1)
    model = str(Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json")
    assert main(["plan", "--params", "125M", "--model", model, "--tflops", "100", "--max-world", "8",
                 "--slow-node", "1.2"]) == 2
    assert "argument --slow-node: '1.2' must be at least 0.01 and at most 1" in capsys.readouterr().err
