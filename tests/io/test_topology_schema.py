"""A model file's topology entries are validated in one place, the file format's schema at the io
boundary (pybench.io.document_schemas.TopologySchema), with the algorithm and schedule names of
pybench.io.model_names: a bad entry is one line naming the file, the entry, the field and what is
allowed, and ``TopologyModel.from_dict`` holds a dict given in Python to the same rules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pybench.errors import FileFormatError, UsageError
from pybench.io.model_names import TOPOLOGY_ALGORITHMS, TOPOLOGY_SCHEDULES
from pybench.model.model_files import load_models
from pybench.model.topology import TopologyModel

MODEL = Path(__file__).resolve().parents[1] / "fixtures" / "model_v1_allreduce.json"
ENTRY = {"collective": "allreduce", "algorithm": "ring", "fitted": [[8, 1]], "size_range": [1024, 1 << 20],
         "residual_sizes": [1024.0, 2048.0], "residuals": [0.01, -0.02], "notes": [], "schedule": "hierarchical",
         "inter_absorbs_intra": False, "layout_misses": [[16, 2, 0.2]]}

LINK = {"base_s": 1e-5, "step_s": 1e-6, "busbw_Bps": 1e11, "extra_steps": 0.0, "label": "fitted at 8 ranks"}

BAD = {
    "algorithm": ({"algorithm": "warp"}, "topology[0].algorithm: Value error, algorithm 'warp' is not one of "
                                         "ring, tree, nvls"),
    "schedule": ({"schedule": "mesh"}, "topology[0].schedule: Value error, schedule 'mesh' is not one of "
                                       "ring, hierarchical, openmpi"),
    "residuals": ({"residuals": [0.01]}, "2 residual_sizes but 1 residuals: one residual per size"),
    "layout-miss": ({"layout_misses": [[8.5, 1, 0.1]]}, "layout_misses entry [8.5, 1, 0.1] does not start with a "
                                                        "world and a node count"),
    "absorbs": ({"inter_absorbs_intra": "yes"}, "topology[0].inter_absorbs_intra: Input should be a valid boolean"),
    # the link costs are the same schema's: typed and bounded there, not by their reader
    "link-bandwidth": ({"intra": {**LINK, "busbw_Bps": -1.0}}, "topology[0].intra.busbw_Bps: Input should be "
                                                                "greater than 0"),
    "link-latency": ({"intra": {**LINK, "base_s": -1e-6}}, "topology[0].intra.base_s: Input should be greater "
                                                            "than or equal to 0"),
    "link-algorithm": ({"intra": {**LINK, "algorithm": "warp"}}, "algorithm 'warp' is not one of ring, tree"),
    "link-nested": ({"intra": {**LINK, "regimes": [{**LINK, "regimes": [LINK]}]}},
                    "topology[0].intra.regimes[0].regimes: List should have at most 0 items"),
    "link-fastest": ({"intra": {**LINK, "regimes": [{**LINK, "busbw_Bps": 2e11}]}},
                     "a small-size regime has more bandwidth than its link's bandwidth regime"),
}


def _file(tmp_path: Path, change: dict) -> Path:
    doc = json.loads(MODEL.read_text())
    doc["topology"] = [{**ENTRY, **change}]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    return path


def test_the_names_are_those_the_model_prices():
    """Every name the file format accepts is one the model prices (one copy of the names: the model's are
    these), and a name outside them is refused by the model too."""
    from pybench.model.topology_schedules import algorithm_steps, check_schedule
    for algorithm in TOPOLOGY_ALGORITHMS:
        hops, steps = algorithm_steps("allreduce", algorithm, 8)
        assert hops > 0 and steps > 0
    for schedule in TOPOLOGY_SCHEDULES:
        assert check_schedule(schedule) == schedule
    with pytest.raises(UsageError):
        algorithm_steps("allreduce", "butterfly", 8)


def test_a_good_entry_is_read(tmp_path):
    (model,) = load_models(_file(tmp_path, {}))
    topo = model.topology
    assert topo is not None and (topo.algorithm, topo.schedule, topo.layout_misses) == ("ring", "hierarchical",
                                                                                         ((16, 2, 0.2),))


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_entry_is_refused_at_the_boundary_in_one_line(tmp_path, case):
    change, message = BAD[case]
    path = _file(tmp_path, change)
    with pytest.raises(FileFormatError) as info:
        load_models(path)
    text = str(info.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text
    with pytest.raises(FileFormatError, match="a topology model"):  # a dict given in Python: the same rules
        TopologyModel.from_dict({**ENTRY, **change})


def test_the_cli_exits_2_in_one_line(tmp_path):
    path = _file(tmp_path, {"algorithm": "warp"})
    proc = subprocess.run([sys.executable, "-m", "pybench", "predict", str(path), "--sizes", "1M"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "is not one of ring, tree, nvls" in proc.stderr
