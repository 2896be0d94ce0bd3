"""Fewer ranks per node than fitted, on a described node: they reach their own GPUs' NICs only, so no faster than
those carry at their full rate. Checked on the `h100-xr01` cluster (SOURCES.md) at 10 nodes, fitted at 8 GPUs per
node and asked for 1, 2 and 4, as a user asks `load_model(..., system=FILE).predict`."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from conftest import PUBLIC_LOGS

from pybench import load_model
from pybench.cli.main import main
from pybench.errors import FileFormatError
from pybench.model.logs import load_measurements
from pybench.model.system import load_system
from pybench.model.topology import Observation
from pybench.model.topology_fit import fit_topology

SYSTEM = PUBLIC_LOGS / "systems" / "h100-xr01.json"


def _measured(per_node: int, collective: str):
    (ms,) = [m for m in load_measurements(PUBLIC_LOGS / f"xr01_h100_N10_G{per_node}.log") if m.collective == collective]
    keep = ms.size_bytes >= 1 << 20
    return ms.size_bytes[keep].astype(float), ms.time_s[keep]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    path = tmp_path_factory.mktemp("xr01") / "g8.json"
    assert main(["fit", str(PUBLIC_LOGS / "xr01_h100_N10_G8.log"), "-o", str(path)]) == 0
    return path


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter", "alltoall"])
def test_a_description_keeps_fewer_ranks_to_their_own_nics(fitted, collective):
    """Without a description the answer lies between the node's NICs shared and one per rank: 40-70% too fast at one
    and two GPUs per node here, covered by a wide interval. With it, one GPU's NIC at its full rate bounds the time:
    within 15% at every count (it was the same 40-70% off)."""
    described = load_model(fitted, collective=collective, system=str(SYSTEM))
    for per_node in (1, 2, 4):
        sizes, measured = _measured(per_node, collective)
        p = described.predict(sizes, world=10 * per_node, nodes=10)
        error = np.abs(np.log(p.time_s / measured))
        assert np.expm1(np.median(error)) < 0.15, (per_node, p.time_s / measured)
        assert np.all((p.time_low_s <= measured) & (measured <= p.time_high_s)), per_node
    open_ = load_model(fitted, collective=collective).predict(*_measured(1, collective)[:1], world=10, nodes=10)
    assert np.expm1(np.median(np.abs(np.log(open_.time_s / _measured(1, collective)[1])))) > 0.35


@pytest.mark.parametrize("collective", ["allreduce", "allgather", "reducescatter", "alltoall"])
def test_sweeps_at_several_ranks_per_node_fit_a_rate_on_rails(tmp_path, capsys, collective):
    """Fitted at 1 and 8 GPUs per node, whose rates grow with the ranks (each GPU its own NIC): 2 and 4 per node lie
    within 15% (one rate through the node's NICs missed the 1-GPU sweep by 80% and put them 30-70% too fast). The
    file keeps the rate on rails; a file from before it holds one rate."""
    path = tmp_path / "g18.json"
    logs = [str(PUBLIC_LOGS / f"xr01_h100_N10_G{g}.log") for g in (1, 8)]
    assert main(["fit", *logs, "-o", str(path)]) == 0
    assert ("the inter-node rate grows with the NICs the ranks of a node reach (each GPU its own: rails), as 1, 8 "
            "ranks per node ran (one rate missed them by more than 15%)") in capsys.readouterr().out
    model = load_model(path, collective=collective, world_size=80)
    for per_node in (2, 4):
        sizes, measured = _measured(per_node, collective)
        p = model.predict(sizes, world=10 * per_node, nodes=10)
        assert np.expm1(np.median(np.abs(np.log(p.time_s / measured)))) < 0.15, (per_node, p.time_s / measured)
        assert np.all((p.time_low_s <= measured) & (measured <= p.time_high_s)), per_node
    doc = json.loads(path.read_text())
    (entry,) = [t for t in doc["topology"] if t["collective"] == collective]
    assert entry["rails_ranks"] == 8
    del entry["rails_ranks"]  # a file written before the field: one rate, whatever the ranks per node
    older = tmp_path / "older.json"
    older.write_text(json.dumps(doc))
    shared = load_model(older, collective=collective, world_size=80).predict(sizes, world=40, nodes=10)
    assert np.all(shared.time_s < 0.9 * p.time_s)


SIZES = [2.0 ** k for k in range(20, 35)]


def _sweeps(rates: dict[int, float], gpus: int = 8, nodes: int = 4) -> list[Observation]:
    """A one-node sweep and noise-free all-reduces on ``nodes`` nodes at each ranks-per-node count's bus bandwidth."""
    out = [Observation(s, gpus, 1, 20e-6 + 2 * (gpus - 1) / gpus * s / 350e9) for s in SIZES]
    for q, busbw in rates.items():
        p = q * nodes
        out += [Observation(s, p, nodes, 30e-6 + 2 * (p - 1) / p * s / busbw) for s in SIZES]
    return out


def _predicted_over_true(model, rates: dict[int, float], q: int, nodes: int = 4) -> float:
    p = q * nodes
    return dataclasses.replace(model, backend="nccl").predict(1 << 30, p, nodes).time_s / (
        30e-6 + 2 * (p - 1) / p * (1 << 30) / rates[q])


def test_rails_count_the_nics_a_description_gives():
    """AWS p4d: 4 NICs for 8 GPUs, a pair to each: 1 and 2 ranks per node reach one NIC. Fitted at 2 and 8 on the
    description, 1 rank per node runs at 2's rate (one rank per NIC put it 2x too slow); fitted without it, the
    answer lies between the two readings and covers the truth."""
    rates = {q: math.ceil(q / 2) * 12.5e9 * 0.9 for q in (1, 2, 4, 8)}
    p4d = load_system("aws-p4d")
    described = fit_topology("allreduce", _sweeps({2: rates[2], 8: rates[8]}), system=p4d)
    assert described.rails_ranks == 8 and described.system == p4d
    for q in (1, 4):
        assert _predicted_over_true(described, rates, q) == pytest.approx(1.0, rel=0.02), q
    # p3dn: one NIC for the node, which no count of ranks reaches more of: never rails
    one_nic = fit_topology("allreduce", _sweeps({4: 8e9, 8: 11.5e9}), system=load_system("aws-p3dn"))
    assert one_nic.rails_ranks == 0


def test_rails_only_where_one_rate_misses_and_between_the_readings_below_the_fewest_fitted():
    """NICs one rate serves, but for 1.3x more at 8 ranks than 4: one rate. At 1.45x one rate misses both sweeps by
    more than a fit may and rails are taken; below the fewest ranks fitted on rails the answer lies between their
    rate and the rails' share, and the interval holds both (one rank per node was put 4.2x too slow, at the rails'
    share alone)."""
    flat = {1: 60e9, 2: 62e9, 4: 64e9, 8: 64e9 * 1.3}
    assert fit_topology("allreduce", _sweeps({4: flat[4], 8: flat[8]})).rails_ranks == 0
    flat[8] = 64e9 * 1.45
    model = fit_topology("allreduce", _sweeps({4: flat[4], 8: flat[8]}))
    assert model.rails_ranks == 8
    one = dataclasses.replace(model, backend="nccl").predict(1 << 30, 4, 4)
    truth = 30e-6 + 2 * 3 / 4 * (1 << 30) / flat[1]
    assert one.low_s <= truth <= one.high_s and _predicted_over_true(model, flat, 1) < 2.2
    fewest = dataclasses.replace(model, backend="nccl").predict(1 << 30, 16, 4).time_s * (3 / 4) / (15 / 16)
    assert one.low_s <= fewest and one.high_s >= 2 * fewest  # (rails: 4 ranks' rate shared by 1 of them)


def test_a_rate_on_rails_is_a_file_older_readers_refuse_and_hostile_values_are_refused(tmp_path):
    """Version 4 of the crossing: a reader of version 3 would take the rate for one rate (3.6x too fast). A
    rails_ranks that is not the most ranks per node of a ring crossing fitted at several counts is refused."""
    from pybench.io.model_names import TOPOLOGY_CROSSING_VERSION
    from pybench.model.topology import TopologyModel
    model = fit_topology("allreduce", _sweeps({4: 100e9, 8: 200e9}))
    entry = model.to_dict()
    assert entry["crossing_version"] == TOPOLOGY_CROSSING_VERSION == 4 and entry["rails_ranks"] == 8
    assert TopologyModel.from_dict(entry) == model
    for bad in (16, 4, 4096):
        with pytest.raises(FileFormatError, match=f"rails_ranks {bad} is not the most ranks per node"):
            TopologyModel.from_dict({**entry, "rails_ranks": bad})
    one = fit_topology("allreduce", _sweeps({8: 200e9})).to_dict()
    with pytest.raises(FileFormatError, match="fitted across nodes at \\[8\\]"):
        TopologyModel.from_dict({**one, "rails_ranks": 8})
