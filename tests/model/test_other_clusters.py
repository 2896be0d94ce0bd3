"""Node counts on clusters whose multi-node logs no constant was chosen on (ABCI's A100 one-node logs calibrate the
GPU-count kind only, whose constants no node-count prediction takes): ABCI's A100 and V100 nodes and a RoCE cluster of
one RTX 3090 per node at 2, 3 and 4 nodes (SOURCES.md there),
fitted as a user would (`pybench fit` at 2 nodes, or 2 and 4) and predicted with `load_model(...).predict` at every
other node count of the cluster from 1 MiB up. Today's held-out accuracy is pinned so that a regression fails."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PUBLIC_LOGS

from pybench import load_model
from pybench.cli.main import main
from pybench.model.logs import load_measurements

CLUSTERS = {"abci-a100": ("abci_anode_a100_n{nodes:02d}_ppn8_nccl_allreduce.log", 8, (2, 4, 8, 16)),
            "abci-v100": ("abci_vnode_v100_n{nodes:02d}_ppn4_nccl_allreduce.log", 4, (2, 4, 8, 16, 32)),
            # one RTX 3090 and one RoCE NIC per node (added in session 35, after the constants)
            "rtx3090-roce": ("rtx3090_roce_n{nodes}x1_noinc_mtu1024.log", 1, (2, 3, 4))}


def _log(cluster: str, nodes: int):
    name, _, _ = CLUSTERS[cluster]
    return PUBLIC_LOGS / name.format(nodes=nodes)


def _scores(tmp_path, cluster: str, fitted: tuple[int, ...]) -> dict[int, tuple[float, float]]:
    """Per predicted node count: (median |error| as a ratio - 1, share of the measured times inside the interval)."""
    _, per_node, counts = CLUSTERS[cluster]
    path = tmp_path / f"{cluster}.json"
    assert main(["fit", *(str(_log(cluster, n)) for n in fitted), "-o", str(path), "--force"]) == 0
    model = load_model(path)
    out = {}
    for nodes in (n for n in counts if n not in fitted):
        (ms,) = load_measurements(_log(cluster, nodes))
        keep = ms.size_bytes >= 1 << 20
        sizes, measured = ms.size_bytes[keep].astype(float), ms.time_s[keep]
        p = model.predict(sizes, world=per_node * nodes, nodes=nodes)
        error = float(np.expm1(np.median(np.abs(np.log(p.time_s / measured)))))
        out[nodes] = (error, float(np.mean((p.time_low_s <= measured) & (measured <= p.time_high_s))))
    return out


# (cluster, fitted node counts, the most median error of any predicted count, the least coverage of any) held out
# today. ABCI's A100 8-node run is disturbed (32 MiB takes 4.3 ms there, 2.1 ms on 4 nodes and 2.5 ms on 16): the 2 + 4
# fit, whose narrower interval (46% median half-width) follows its two counts, covers 2 of its 6 sizes.
TODAY = [("abci-a100", (2,), 0.35, 1.0), ("abci-a100", (2, 4), 0.75, 0.33),
         ("abci-v100", (2,), 0.40, 1.0), ("abci-v100", (2, 4), 0.35, 1.0),
         ("rtx3090-roce", (2,), 0.10, 1.0), ("rtx3090-roce", (4,), 0.10, 1.0), ("rtx3090-roce", (2, 3), 0.10, 1.0),
         ("rtx3090-roce", (3, 4), 0.10, 1.0)]


@pytest.mark.parametrize("cluster, fitted, worst_error, least_coverage", TODAY)
def test_node_counts_of_a_cluster_no_constant_was_chosen_on(tmp_path, cluster, fitted, worst_error, least_coverage):
    scores = _scores(tmp_path, cluster, fitted)
    assert scores and all(e <= worst_error for e, _ in scores.values()), scores
    assert all(c >= least_coverage for _, c in scores.values()), scores


def test_the_planner_prices_a_loaded_model_of_several_layouts_from_each_sweep(tmp_path):
    """`ModelSet([load_model(path)])` of a 2 + 4-node fit priced 4 nodes from the topology model (6.73 ms at 1 GiB on an
    H100 fit) where the model's own predict answers from the 4-node sweep (6.50 ms): the planner takes the sweeps
    the model answers its file's other measured layouts with."""
    from pybench.planning.model_set import ModelSet
    path = tmp_path / "a.json"
    assert main(["fit", str(_log("abci-a100", 2)), str(_log("abci-a100", 4)), "-o", str(path)]) == 0
    model = load_model(path)
    for world, nodes in ((16, 2), (32, 4), (64, 8)):
        assert ModelSet([model]).time("allreduce", 1 << 30, world, "inter-node", nodes).time_s == \
            pytest.approx(model.predict(1 << 30, world=world, nodes=nodes).time_s, rel=1e-12)


def test_validation_scores_no_layout_its_fit_answers_not_determined():
    """A 4 + 8-node fit of ABCI's A100 cluster is refused at other node counts (one cost shape misses the disturbed
    8-node run by 23%): validation scored those answers as points of error NaN, which made a table's medians NaN."""
    from pybench.model.validation_cases import _layout_points, _observations
    layouts = {n: _observations(_log("abci-a100", n)) for n in (2, 4, 8)}
    assert _layout_points("abci-a100", "abci", layouts, ((4, 8),), "allreduce") == []
    answered = _layout_points("abci-a100", "abci", layouts, ((2,),), "allreduce")
    assert len(answered) == 12 and all(np.isfinite(p.error) for p in answered)
