"""A send/recv's ring of ranks leaves each node once, whatever the ranks per node: the rate its crossing was fitted
at is one rank's flow, with that GPU's NICs, not the node's. Checked on the `h100-xr01` cluster's 2-node runs at 1,
2, 4 and 8 GPUs per node (SOURCES.md), as a user asks `pybench predict --collective sendrecv`."""

from __future__ import annotations

import numpy as np
from conftest import PUBLIC_LOGS

from pybench import load_model
from pybench.cli.main import main
from pybench.model.logs import load_measurements

SYSTEM = PUBLIC_LOGS / "systems" / "h100-xr01.json"


def _sendrecv(log):
    (ms,) = [m for m in load_measurements(log) if m.collective == "sendrecv"]
    return ms.size_bytes.astype(float), ms.time_s


def _two_nodes(per_node: int):
    return PUBLIC_LOGS / f"xr01_h100_N2_G{per_node}_002_003.log"


def test_fewer_gpus_per_node_keep_the_one_flow_that_crosses(tmp_path, capsys):
    """Fitted at 8 GPUs per node, asked for 1, 2 and 4: each run took the same time to within 14%, and so does the
    prediction; it named the NICs per rank open and went sqrt(8/q) slower (2.8x at one GPU per node)."""
    path = tmp_path / "xr01.json"
    assert main(["fit", str(_two_nodes(8)), "-o", str(path)]) == 0
    model = load_model(path, collective="sendrecv")
    for per_node in (1, 2, 4):
        sizes, measured = _sendrecv(_two_nodes(per_node))
        p = model.predict(sizes, world=2 * per_node, nodes=2)
        error = np.abs(np.log(p.time_s / measured))
        assert np.max(error) < np.log(1.15), (per_node, p.time_s, measured)
        assert np.all((p.time_low_s <= measured) & (measured <= p.time_high_s))
    capsys.readouterr()
    args = ["predict", str(path), "--collective", "sendrecv", "--world", "2", "--nodes", "2", "--sizes", "4G"]
    assert main(args) == 0
    assert "NICs per rank unknown" not in capsys.readouterr().out


def test_a_described_send_recv_crosses_at_one_gpus_nics(tmp_path):
    """One node measured and its description: the one flow that leaves a node goes through its GPU's own NIC, not
    the node's eight (the prediction was 6.3x too fast, outside its interval)."""
    path = tmp_path / "node.json"
    assert main(["fit", str(PUBLIC_LOGS / "xr01_h100_N1_G8_002.log"), "-o", str(path)]) == 0
    model = load_model(path, collective="sendrecv", system=str(SYSTEM))
    sizes, measured = _sendrecv(_two_nodes(8))
    p = model.predict(sizes, world=16, nodes=2)
    assert np.max(np.abs(np.log(p.time_s / measured))) < np.log(1.35), (p.time_s, measured)
    assert np.all((p.time_low_s <= measured) & (measured <= p.time_high_s))


def test_a_send_recv_with_ranks_placed_round_robin_is_left_out_of_the_topology_model(tmp_path, capsys):
    """nccl-tests' send/recv sends to the next rank: with ranks filled host by host one flow leaves each node, which
    the model prices; placed round-robin (`mpirun --map-by node`) every flow crosses, which it would have read as
    one flow many times faster. The Rank lines show the placement: the sweep is left out, saying why."""
    text = (PUBLIC_LOGS / "xr01_h100_N2_G2_002_003.log").read_text()
    # ranks 1 and 2 swap hosts: 002, 003, 002, 003
    cyclic = text.replace("Rank  1 Group  0 Pid 2209071 on cnode3-002", "Rank  1 Group  0 Pid 2209071 on cnode3-003")
    cyclic = cyclic.replace("Rank  2 Group  0 Pid 948406 on cnode3-003", "Rank  2 Group  0 Pid 948406 on cnode3-002")
    assert cyclic != text
    log = tmp_path / "cyclic.log"
    log.write_text(cyclic)
    (ms,) = [m for m in load_measurements(log) if m.collective == "sendrecv"]
    assert any(n.startswith("ranks not filled host by host") for n in ms.notes)
    assert main(["fit", str(log), "-o", str(tmp_path / "m.json")]) == 0
    said = capsys.readouterr()
    assert "more send/recv flows crossed the network" in said.out + said.err
    # filled host by host: fitted as before
    assert main(["fit", str(PUBLIC_LOGS / "xr01_h100_N2_G2_002_003.log"), "-o", str(tmp_path / "b.json")]) == 0
    assert "send/recv flows crossed" not in "".join(capsys.readouterr())


def test_two_ranks_per_process_placed_round_robin_are_seen_too(tmp_path):
    """`-g 2` processes placed round-robin put ranks A A B B A A B B: half the neighbours cross (helper-94)."""
    import re
    text = (PUBLIC_LOGS / "xr01_h100_N2_G4_002_003.log").read_text()
    pattern = "cnode3-002 cnode3-002 cnode3-003 cnode3-003".split() * 2
    placed = re.sub(r"(Rank +(\d+) Group +\d+ Pid +\d+ on +)(\S+)", lambda m: m.group(1) + pattern[int(m.group(2))],
                    text)
    assert placed != text
    log = tmp_path / "aabb.log"
    log.write_text(placed)
    (ms,) = [m for m in load_measurements(log) if m.collective == "sendrecv"]
    assert any(n.startswith("ranks not filled host by host") and "4 of 8 neighbours" in n for n in ms.notes), ms.notes
    (block,) = [m for m in load_measurements(PUBLIC_LOGS / "xr01_h100_N2_G4_002_003.log") if m.collective == "sendrecv"]
    assert not any(n.startswith("ranks not filled host by host") for n in block.notes)
