"""Sizes above a sweep whose bytes' rate it never measured are not determined, by the sweep's own curve and by
the topology model alike; where the topology model saw larger sizes at other layouts, it answers.

A 2-node all-reduce cut at 4 MiB priced 25 MB 1.7x too slow at 8 and 32 ranks (the topology model) while its own
layout was refused; NCCL's bandwidth protocol, which runs such sizes across nodes, was never measured.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import PUBLIC_LOGS, SHARED_DATA

from pybench.errors import NotDetermined, UsageError
from pybench.model.build import fit_model
from pybench.model.logs import load_measurements
from pybench.model.topology_fit import fit_topology_models

OCI = SHARED_DATA / "nccl-tests" / "a100_2node_16gpu_oci_roce_allreduce.txt"


def _cut(ms, top):
    keep = ms.size_bytes <= top
    return dataclasses.replace(ms, **{k: getattr(ms, k)[keep] for k in ("size_bytes", "time_s", "time_in_place_s")})


def test_a_sweep_across_nodes_that_ended_before_ncclS_bandwidth_protocol_does_not_determine_larger_sizes():
    (ms,) = load_measurements(OCI)
    short = _cut(ms, 4 << 20)
    sweep = fit_model(short)
    with pytest.raises(NotDetermined, match="the sweep ended at 4M .* is not measured"):
        sweep.predict(25e6)
    (topology,), _ = fit_topology_models([short])
    for world, nodes in ((16, 2), (32, 4), (8, 2)):
        p = topology.predict(25_000_000, world, nodes)
        assert not p.determined and "every sweep across nodes ended by 4M" in p.undetermined
    assert topology.predict(1 << 20, 32, 4).determined


def test_a_one_node_sweep_cut_below_16m_still_answers():
    """One node's NVLink or PCIe runs its bandwidth protocol from far smaller sizes: an RTX 4090 node cut at 8 MiB
    was within 1% at 16-256 MiB."""
    (ms,) = load_measurements(PUBLIC_LOGS / "rtx4090_kalavai_docker_g4_allreduce.log")
    short = fit_model(_cut(ms, 8 << 20))
    assert short.link_class == "intra-node" and short.predict(64 << 20).time_s > 0


def test_the_topology_model_answers_the_fitted_layout_beyond_its_own_sweep_where_others_reached():
    """Polaris' 256-node all-reduce cut at 64 KiB (latency still rules there); its 2- and 8-node sweeps reach
    1 GiB: at 256 nodes the topology model answers sizes that sweep never measured, not a refusal."""
    sets = [m for n in (2, 8, 256) for m in load_measurements(
        SHARED_DATA / "nccl-tests" / f"polaris_a100_{n}node_4gpu_slingshot_allreduce.txt")]
    sets = [_cut(m, 1 << 16) if m.world_size == 1024 else m for m in sets]
    models = fit_topology_models(sets)[0]
    on_256 = next(s for s in sets if s.world_size == 1024)
    sweep = dataclasses.replace(fit_model(on_256), topology=models[0])
    big = float(64 << 20)
    assert sweep._beyond_own_sweep(big)  # its own curve cannot
    assert big <= models[0].size_range[1]
    assert sweep.undetermined_at(big) == ""
    assert sweep.predict(big).time_s > 0
    # one call with its own sizes and such sizes answers each as a call of its own does: the sweep's curve at its
    # sizes (the topology model at all of them read 4 KiB 19% faster than that curve), the topology model beyond
    small = float(1 << 12)
    both = sweep.predict([small, big])
    for i, one in enumerate((sweep.predict(small), sweep.predict(big))):
        assert (both.time_s[i], both.time_low_s[i], both.time_high_s[i]) == (one.time_s, one.time_low_s,
                                                                            one.time_high_s)
    assert sweep.predict(small).provenance in both.provenance and sweep.predict(big).provenance in both.provenance
    from pybench.cli.prediction_table import format_prediction_table, prediction_records
    (row,) = prediction_records([sweep], [int(big)])  # the table says what answered: the topology model
    assert row["provenance"] == sweep.predict(big).provenance != "" and "not measured" not in row["provenance"]
    # its rows say which algorithm answered, and so does the header over both (it said 'fitted sweep' alone)
    rows = prediction_records([sweep], [int(small), int(big)])
    assert [r["algorithm"] for r in rows] == ["fitted sweep", f"{models[0].algorithm} (topology model)"]
    assert f"/ algorithm fitted sweep; {models[0].algorithm} (topology model)" in format_prediction_table(rows)
    with pytest.raises(UsageError, match="no sizes to predict"):
        sweep.predict([])
    for flag in (True, [True, False], [True, 4096], (4096, np.True_)):  # numpy reads True as 1 byte: no size
        with pytest.raises(UsageError, match="sizes to predict must be numbers of bytes"):
            sweep.predict(flag)
    assert "(a prediction interval: another layout has no confidence band)" in sweep.predict(
        [small, big], band="confidence").provenance  # the beyond part has no confidence band to give


def test_a_fitted_layout_beyond_its_own_sweep_rests_on_the_layouts_that_measured_the_size():
    """Polaris' 256-node sweep cut at 64 KiB, fitted with the 2- and 8-node sweeps to 1 GiB: the topology model
    called 1 MiB..1 GiB at 256 nodes "measured" (the sizes pooled over every layout), with an interval that missed
    the real 256-node times at 1 MiB (2.8x) and 1 GiB. They rest on the 8-node sweep, 32x fewer nodes away."""
    full = {n: load_measurements(SHARED_DATA / "nccl-tests" / f"polaris_a100_{n}node_4gpu_slingshot_allreduce.txt")[0]
            for n in (2, 8, 256)}
    sets = [_cut(m, 1 << 16) if n == 256 else m for n, m in full.items()]
    (topology,), _ = fit_topology_models(sets)
    assert (1024, 256, 4, 1 << 16) in topology.layout_sizes
    size, time = full[256].fit_points()
    for x in (1 << 20, 1 << 24, 1 << 30):
        p = topology.predict(x, 1024, 256)
        assert p.provenance == "another node count"
        assert p.low_s <= float(np.median(time[size == x])) <= p.high_s
    assert topology.predict(1 << 12, 1024, 256).provenance == "measured"  # its own sweep's sizes stay its own
    again = type(topology).from_dict(topology.to_dict())
    assert again.layout_sizes == topology.layout_sizes
    # more bytes are never faster on one layout: the low end stays at its largest measured size's (it was 24 us at
    # 128K where 64K measured 432-512 us)
    assert topology.predict(1 << 17, 1024, 256).low_s >= topology.predict(1 << 16, 1024, 256).low_s
    from pybench.errors import FileFormatError
    for spans in ([[99, 3, 4, 8]], [[8, 2, 1 << 30, 4], [32, 8, 4, 1 << 30], [1024, 256, 4, 1 << 16]],
                  [[8, 2, 4, 1 << 30]]):  # a layout never fitted, min above max, one missing
        with pytest.raises(FileFormatError, match="layout_sizes must give each fitted layout once"):
            type(topology).from_dict({**topology.to_dict(), "layout_sizes": spans})
    older = {k: v for k, v in topology.to_dict().items() if k != "layout_sizes"}  # a file from before the field
    assert type(topology).from_dict(older).predict(1 << 30, 1024, 256).provenance == "measured"


def test_above_the_sizes_a_topology_interval_is_bounded_by_the_largest_size():
    """One DGX A100 node (2, 4, 8 GPUs) with its description, 8 nodes asked above the sweep's 1 GiB: the slow end
    grew as the size to the power 2.5 (98 s for 14 GB against 157 ms at 1 GiB). More bytes are never faster than
    fewer, and per byte never slower than at the largest size: the ends stay within those bounds."""
    from pybench.model.system import load_system
    from pybench.model.topology_fit import fit_topology_models
    vtrain = SHARED_DATA / "vtrain"
    sets = [m for g in (2, 4, 8) for m in load_measurements(vtrain / f"a100_nvswitch_allreduce_{g}gpu.csv")]
    dgx = load_system("dgx-a100")
    (topology,), _ = fit_topology_models(sets, dgx)
    topology = topology.with_system(dgx)
    top = topology.size_range[1]
    edge = topology.predict(top, 64, 8)
    for factor in (2, 8, 13):
        p = topology.predict(top * factor, 64, 8)
        assert p.high_s <= edge.high_s * factor * (1 + 1e-9)
        assert p.low_s >= min(edge.low_s, p.time_s) * (1 - 1e-9)


def test_above_its_sizes_a_sweeps_interval_is_bounded_by_its_largest_size():
    """The fitted sweep's own interval above its sizes: no faster than its largest size, per byte no slower."""
    (ms,) = load_measurements(OCI)
    sweep = fit_model(ms)
    top = float(sweep.size_max_bytes)
    edge = sweep.predict(top)
    for factor in (2.0, 8.0, 64.0):
        p = sweep.predict(top * factor)
        assert edge.time_low_s * (1 - 1e-9) <= p.time_low_s
        assert p.time_high_s <= edge.time_high_s * factor * (1 + 1e-9)


def test_a_row_no_layout_reached_is_not_labelled_the_topology_models():
    """A sweep cut at 4 MiB while latency ruled: 25 MB is beyond what it determines, and no layout reached it, so
    the row is undetermined, not answered by the topology model its label named."""
    from pybench.cli.prediction_table import prediction_records
    (ms,) = load_measurements(OCI)
    short = _cut(ms, 4 << 20)
    (topology,), _ = fit_topology_models([short])
    sweep = dataclasses.replace(fit_model(short), topology=topology)
    rows = prediction_records([sweep], [1 << 20, 25_000_000])
    assert [(r["algorithm"], r["determined"]) for r in rows] == [("fitted sweep", True), ("fitted sweep", False)]


def test_a_sweep_whose_top_sizes_scatter_flat_carries_on_at_its_bytes_rate(tmp_path):
    """Two A100-PCIe nodes at about 11 GB/s in 10 MiB steps (thomaslie210/NCCL_Test_Results): the fit's top pieces
    scatter flat (1/B held at 0), and the last one carried on answered every size above 1 GiB 92.9 ms: 1 TiB at
    11.8 TB/s, its upper end 1.7 s where about 95 s are needed (helper-100)."""
    (ms,) = load_measurements(PUBLIC_LOGS / "a100pcie_n013_n014_2node2_allreduce_medium.txt")
    model = fit_model(ms)
    top = float(ms.size_bytes.max())
    rate = top / float(ms.time_s[ms.size_bytes == ms.size_bytes.max()].mean())  # bytes per second at its top
    for size in (2 * top, 1 << 40):
        p = model.predict(size)
        assert 0.8 < p.time_s * rate / size < 1.25, size  # at the sweep's own rate, within its scatter
        assert p.time_low_s <= p.time_s <= p.time_high_s
