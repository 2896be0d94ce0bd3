"""Detecting a node: fake sysfs trees, a fake NVML module, fake nvidia-smi scripts and NCCL topology
dumps built in tmp_path (the hardware is absent here), hostile files, and the real machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pybench.measure.system_probe import probe_summary, probe_system, read_bounded, recorded_system
from tests.conftest import no_hang
from tests.measure.system_fakes import SWITCH_BUS, bus, fake_nvml, ib_port, netdev, switched_gpus


def probe(tmp_path: Path, nvml=None, smi=None, **kw) -> dict:
    sysfs = tmp_path / "sys"
    sysfs.mkdir(exist_ok=True)
    return probe_system(sysfs_root=sysfs, proc_root=tmp_path / "noproc", nvml=nvml, nvidia_smi=smi, **kw)


# --- GPUs and their links --------------------------------------------------------------------------

def test_an_nvswitch_node_with_eight_rails_is_read_from_nvml_and_sysfs(tmp_path):
    sysfs = tmp_path / "sys"
    for k in range(8):
        ib_port(sysfs, f"mlx5_{k}")
    netdev(sysfs, "eno1", speed="100000")
    p = probe(tmp_path, nvml=fake_nvml(switched_gpus()))
    f = p["fields"]
    assert (f["gpus_per_node"], f["intra_fabric"], f["intra_GBps_per_gpu"], f["nvlinks_per_gpu"]) == \
        (8, "nvswitch", 450.0, 18)
    assert (f["nics_per_node"], f["nic_Gbps"], f["nic_kind"]) == (8, 400.0, "infiniband")
    assert f["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert p["from"]["gpus_per_node"] == "nvml" and p["from"]["nic_Gbps"].startswith("sysfs /sys/class/infiniband")
    assert any("eno1" in n for n in p["notes"])  # the management port is named, not counted
    assert set(p["not_detected"]) == {"rail_optimised", "nvlink_domain_gpus"}
    assert probe_summary(p) == ("8 x NVIDIA H100 80GB HBM3, nvswitch at 450 GB/s per GPU; 8 x 400 Gb/s infiniband; "
                                f"{os.cpu_count()} CPU core(s)")


def test_direct_nvlinks_make_a_mesh_or_all_to_all_even_without_the_remote_type_call(tmp_path):
    # DGX-1-like hybrid cube-mesh: 6 NVLink2 links per GPU to 3 of 7 peers
    cube = [{"bus": bus(i), "name": "Tesla V100-SXM2-32GB",
             "links": [(2, 0, bus(p)) for p in ((i + 1) % 8, (i - 1) % 8, i ^ 4) for _ in range(2)]}
            for i in range(8)]
    f = probe(tmp_path, nvml=fake_nvml(cube, remote_type_error=True))["fields"]
    assert (f["intra_fabric"], f["intra_GBps_per_gpu"]) == ("nvlink-mesh", 150.0)
    # Polaris-like: 4 A100 (NVLink 3.0), 4 links to each of the 3 others
    quad = [{"bus": bus(i), "name": "NVIDIA A100-SXM4-40GB",
             "links": [(4, 0, bus(p)) for p in range(4) if p != i for _ in range(4)]} for i in range(4)]
    f = probe(tmp_path, nvml=fake_nvml(quad))["fields"]
    assert (f["gpus_per_node"], f["intra_fabric"], f["intra_GBps_per_gpu"]) == (4, "nvlink-all-to-all", 300.0)


def test_gpus_without_nvlink_are_pcie_at_their_link_rate(tmp_path):
    gpus = [{"bus": bus(i), "name": "NVIDIA L40S", "links": [], "pcie": (4, 16)} for i in range(2)]
    f = probe(tmp_path, nvml=fake_nvml(gpus))["fields"]
    assert (f["gpus_per_node"], f["intra_fabric"], f["intra_GBps_per_gpu"]) == (2, "pcie", 32.0)


def test_a_link_generation_outside_the_table_or_a_link_to_nowhere_is_not_detected_not_guessed(tmp_path):
    p = probe(tmp_path, nvml=fake_nvml(switched_gpus(version=99)))
    assert p["fields"]["intra_fabric"] == "nvswitch" and "intra_GBps_per_gpu" not in p["fields"]
    assert "not in pybench's table" in p["not_detected"]["intra_GBps_per_gpu"]
    # a GPU-type link whose peer is not a GPU of this node
    gpus = [{"bus": bus(0), "name": "x", "links": [(6, 0, "0000:ee:00.0")]}]
    p = probe(tmp_path, nvml=fake_nvml(gpus))
    assert "intra_fabric" not in p["fields"] and "neither a GPU" in p["not_detected"]["intra_fabric"]


def test_no_driver_and_no_nvidia_smi_is_a_gpu_less_host_saying_why(tmp_path):
    p = probe(tmp_path, nvml=fake_nvml([], init_error="Driver Not Loaded"))
    for name in ("gpus_per_node", "intra_fabric", "intra_GBps_per_gpu"):
        assert name not in p["fields"]
        assert "Driver Not Loaded" in p["not_detected"][name] and "nvidia-smi is not on PATH" in p["not_detected"][name]


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def fake_smi(tmp_path: Path, gpus: int, links: int, matrix: str | None) -> str:
    """An nvidia-smi answering --query-gpu, nvlink -s and (when ``matrix``) topo -m from files."""
    (tmp_path / "query.txt").write_text("".join(f"00000000:{0x10 + i:02x}:00.0, NVIDIA H100 80GB HBM3, 5, 16\n"
                                                for i in range(gpus)))
    (tmp_path / "nvlink.txt").write_text("".join(f"GPU {i}: NVIDIA H100 (UUID: GPU-{i})\n"
                                                 + "".join(f"\t Link {k}: 26.562 GB/s\n" for k in range(links))
                                                 + "\t Link 18: <inactive>\n" for i in range(gpus)))
    if matrix is not None:
        (tmp_path / "topo.txt").write_text(matrix)
    return _script(tmp_path, f'case "$1" in\n  --query-gpu*) cat {tmp_path}/query.txt;;\n'
                             f'  nvlink) cat {tmp_path}/nvlink.txt;;\n  topo) cat {tmp_path}/topo.txt;;\nesac\n')


def _matrix(cells) -> str:
    n = len(cells)
    head = "\t\x1b[4m" + "\t".join(f"GPU{j}" for j in range(n)) + "\tNIC0\tCPU Affinity\x1b[0m\n"
    return head + "".join(f"GPU{i}\t" + "\t".join(row) + "\tSYS\t0-63\n" for i, row in enumerate(cells)) + \
        "\nLegend:\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"


def test_nvidia_smi_gives_gpus_link_rates_and_from_its_matrix_where_links_end(tmp_path):
    switched = [["X" if i == j else "NV18" for j in range(8)] for i in range(8)]
    p = probe(tmp_path, smi=fake_smi(tmp_path, 8, 18, _matrix(switched)))
    f = p["fields"]
    assert (f["gpus_per_node"], f["intra_fabric"], f["nvlinks_per_gpu"]) == (8, "nvswitch", 18)
    assert f["intra_GBps_per_gpu"] == pytest.approx(18 * 26.562) and p["from"]["intra_fabric"] == "nvidia-smi"
    pair = [["X", "NV4"], ["NV4", "X"]]  # two PCIe cards joined by a 4-link bridge
    f = probe(tmp_path, smi=fake_smi(tmp_path, 2, 4, _matrix(pair)))["fields"]
    assert f["intra_fabric"] == "nvlink-all-to-all"
    # no matrix (an old nvidia-smi): the rate of the links is known, not where they end
    (tmp_path / "topo.txt").unlink()
    p = probe(tmp_path, smi=fake_smi(tmp_path, 2, 4, None))
    assert p["fields"]["intra_GBps_per_gpu"] == pytest.approx(4 * 26.562)
    assert "intra_fabric" not in p["fields"] and "nvidia-ml-py" in p["not_detected"]["intra_fabric"]
    # no NVLink: PCIe at the link nvidia-smi reports (generation 5, 16 lanes)
    f = probe(tmp_path, smi=fake_smi(tmp_path, 1, 0, None))["fields"]
    assert (f["gpus_per_node"], f["intra_fabric"], f["intra_GBps_per_gpu"]) == (1, "pcie", 64.0)


@pytest.mark.gpu
def test_on_a_gpu_node_the_gpus_and_their_fabric_are_detected():
    smi = shutil.which("nvidia-smi")
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True).stdout.count("GPU ") if smi else 0
    if not listed:
        pytest.skip("no NVIDIA GPU here (nvidia-smi -L lists none)")
    p = probe_system(smi_timeout_s=10.0)
    assert p["fields"]["gpus_per_node"] == listed, p
    assert "intra_fabric" in p["fields"] and "intra_GBps_per_gpu" in p["fields"], p["not_detected"]


def test_a_hanging_or_failing_nvidia_smi_is_a_note_within_its_timeout(tmp_path):
    with no_hang(5):
        p = probe(tmp_path, smi=_script(tmp_path, "sleep 30 & wait\n"), smi_timeout_s=0.2)
    assert "did not answer within 0.2 s" in p["not_detected"]["gpus_per_node"]
    (tmp_path / "nvidia-smi").unlink()
    p = probe(tmp_path, smi=_script(tmp_path, "echo 'NVIDIA-SMI has failed' >&2; exit 9\n"))
    assert "exited with status 9" in p["not_detected"]["gpus_per_node"]


# --- NICs -------------------------------------------------------------------------------------------

def test_only_physical_interfaces_with_link_up_count_and_rdma_ports_take_precedence(tmp_path):
    sysfs = tmp_path / "sys"
    netdev(sysfs, "eth0", speed="25000")
    netdev(sysfs, "eth1", speed="25000")
    netdev(sysfs, "eth2", speed="25000", operstate="down")
    netdev(sysfs, "veth9", speed="10000", virtual=True)
    netdev(sysfs, "ib0", speed="100000", type_="32")  # IPoIB
    (sysfs / "class" / "net" / "lo").symlink_to(netdev(sysfs, "lo-real", virtual=True))
    f = probe(tmp_path)["fields"]
    assert (f["nics_per_node"], f["nic_Gbps"], f["nic_kind"]) == (2, 25.0, "ethernet")
    # RoCE (Ethernet link layer) and EFA: the RDMA ports are the network; their netdevs are not counted twice
    ib_port(sysfs, "mlx5_0", rate="200 Gb/sec (4X HDR)", layer="Ethernet", netdevs=("eth0",))
    ib_port(sysfs, "mlx5_1", rate="200 Gb/sec (4X HDR)", layer="Ethernet", netdevs=("eth1",))
    ib_port(sysfs, "mlx5_2", rate="200 Gb/sec (4X HDR)", state="1: DOWN")
    p = probe(tmp_path)
    assert (p["fields"]["nics_per_node"], p["fields"]["nic_Gbps"], p["fields"]["nic_kind"]) == (2, 200.0, "roce")
    assert [n["name"] for n in p["nics"]] == ["mlx5_0/1", "mlx5_1/1"]
    ib_port(tmp_path / "efa" / "sys", "rdmap0", rate="100 Gb/sec", layer="Unspecified", driver="efa")
    assert probe(tmp_path / "efa")["fields"]["nic_kind"] == "efa"


def test_hostile_sysfs_files_become_notes_never_a_traceback_or_a_hang(tmp_path):
    sysfs = tmp_path / "sys"
    ib_port(sysfs, "mlx5_0", rate="fast")  # not a number
    fifo_port = ib_port(sysfs, "mlx5_1")
    (fifo_port / "rate").unlink()
    os.mkfifo(fifo_port / "rate")  # would block a plain open() forever
    netdev(sysfs, "eth0", speed="lots")
    (sysfs / "class" / "net" / "loop0").symlink_to(sysfs / "class" / "net" / "loop0")  # a symlink loop
    big = netdev(sysfs, "eth1")
    (big / "speed").write_text("1" * (1 << 20))  # no sysfs attribute is a megabyte
    with no_hang(5):
        p = probe(tmp_path)
    notes = " | ".join(p["notes"])
    assert "'fast'" in notes and "not a regular file" in notes and "not a whole number" in notes
    assert "loop0" in notes and "eth1" in notes
    assert p["fields"]["nics_per_node"] == 1 and "nic_Gbps" in p["not_detected"]  # mlx5_0, rate unknown


def test_read_bounded_refuses_what_is_not_a_small_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "big").write_bytes(b"x" * 11)
    with no_hang(5):
        for path, text in ((tmp_path / "fifo", "not a regular file"), (tmp_path / "big", "larger than 10"),
                           (tmp_path, "not a regular file")):
            with pytest.raises(OSError, match=text):
                read_bounded(path, 10)
    assert read_bounded(tmp_path / "big", 11) == b"x" * 11


# --- NCCL's topology dump ---------------------------------------------------------------------------

H100_DUMP = ('<system version="1"><cpu numaid="0" arch="x86_64">'
             + "".join(f'<pci busid="0000:{0x10 + i:02x}:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" '
                       f'link_width="16"><gpu dev="{i}" sm="90" rank="{i}" gdr="1">'
                       f'<nvlink target="{SWITCH_BUS}" count="18" tclass="0x068000"/></gpu></pci>'
                       for i in range(8))
             + "<nic>" + "".join(f'<net name="mlx5_{k}" dev="{k}" speed="400000" port="1" gdr="1"/>' for k in range(8))
             + "</nic></cpu></system>")


def test_an_nccl_topology_dump_fills_what_nvml_and_sysfs_did_not(tmp_path, monkeypatch):
    dump = tmp_path / "topo.xml"
    dump.write_text(H100_DUMP)
    p = probe(tmp_path, topology_dump=str(dump))
    f = p["fields"]
    assert (f["gpus_per_node"], f["intra_fabric"], f["intra_GBps_per_gpu"]) == (8, "nvswitch", 450.0)
    assert (f["nics_per_node"], f["nic_Gbps"]) == (8, 400.0) and "nic_kind" not in f
    assert p["from"]["gpus_per_node"] == f"NCCL topology dump {dump}"
    assert "InfiniBand, RoCE or EFA" in p["not_detected"]["nic_kind"]
    monkeypatch.setenv("NCCL_TOPO_DUMP_FILE", str(dump))  # NCCL's own variable names the file by default
    assert probe(tmp_path)["fields"]["gpus_per_node"] == 8
    # GPUs linked directly (tclass of a display controller), all to all
    direct = ('<system version="1"><cpu>' + "".join(
        f'<pci busid="0000:{0x10 + i:02x}:00.0"><gpu dev="{i}" sm="80">' + "".join(
            f'<nvlink target="0000:{0x10 + j:02x}:00.0" count="4" tclass="0x030200"/>' for j in range(4) if j != i)
        + "</gpu></pci>" for i in range(4)) + "</cpu></system>")
    dump.write_text(direct)
    f = probe(tmp_path, topology_dump=str(dump))["fields"]
    assert (f["gpus_per_node"], f["intra_fabric"], f["intra_GBps_per_gpu"]) == (4, "nvlink-all-to-all", 300.0)


def test_nvml_wins_over_the_dump_field_by_field(tmp_path):
    dump = tmp_path / "topo.xml"
    dump.write_text(H100_DUMP)
    p = probe(tmp_path, nvml=fake_nvml(switched_gpus(n=4)), topology_dump=str(dump))
    assert p["fields"]["gpus_per_node"] == 4 and p["from"]["gpus_per_node"] == "nvml"
    assert p["from"]["nics_per_node"].startswith("NCCL topology dump")  # sysfs had none
    assert any(n.startswith(f"gpus_per_node: NCCL topology dump {dump} says 8, nvml said 4") for n in p["notes"])


@pytest.mark.parametrize("content, says", [
    (b"<system><gpu", "not well-formed"),
    (b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
     b"<system>&b;</system>", "DTD"),
    (b"<html><body/></html>", "not NCCL's <system>"),
    (b'<system><pci busid="0000:10:00.0"><gpu sm="75"><nvlink target="0000:11:00.0" count="x"/></gpu></pci>'
     b'<nic><net name="n" speed="fast"/></nic></system>', "has count 'x'"),
])
def test_hostile_topology_dumps_are_one_note_each(tmp_path, content, says):
    dump = tmp_path / "topo.xml"
    dump.write_bytes(content)
    p = probe(tmp_path, topology_dump=str(dump))
    assert any(says in n for n in p["notes"]), p["notes"]


def test_a_huge_fifo_missing_or_looping_dump_path_is_a_note_without_waiting(tmp_path):
    huge = tmp_path / "huge.xml"
    with open(huge, "wb") as f:
        f.truncate(5 << 20)  # sparse: cheap to make, over the 4 MiB bound
    os.mkfifo(tmp_path / "fifo.xml")
    (tmp_path / "loop.xml").symlink_to(tmp_path / "loop.xml")
    expected = {"huge.xml": "larger than", "fifo.xml": "not a regular file", "loop.xml": "symbolic links",
                "absent.xml": "does not exist"}
    with no_hang(5):
        for name, says in expected.items():
            notes = probe(tmp_path, topology_dump=str(tmp_path / name))["notes"]
            assert any(says in n for n in notes), (name, notes)


# --- the real machine and the record in every result ---------------------------------------------

def test_this_machine_is_detected_and_recorded_with_sources(tmp_path):
    from pybench.measure.envinfo import environment
    recorded = environment(include_gpu=False)["system"]
    assert recorded["fields"]["cpu_cores"] == os.cpu_count() and recorded["from"]["cpu_cores"] == "os.cpu_count"
    assert set(recorded["from"]) == set(recorded["fields"])
    assert not set(recorded["fields"]) & set(recorded["not_detected"])
    # every field a description needs is either detected or named with its reason
    for name in ("gpus_per_node", "intra_fabric", "intra_GBps_per_gpu", "nics_per_node", "nic_Gbps"):
        assert name in recorded["fields"] or recorded["not_detected"][name]
    recorded["fields"].clear()  # a caller's edit does not reach the next result
    assert recorded_system()["fields"]["cpu_cores"] == os.cpu_count()


def test_a_probe_that_breaks_inside_is_recorded_as_a_note(tmp_path):
    class Exploding(SimpleNamespace):
        def __getattr__(self, name):
            raise RuntimeError("boom")
    p = probe(tmp_path, nvml=Exploding())
    assert "boom" in p["not_detected"]["gpus_per_node"]


def test_a_step_that_breaks_is_a_note_and_the_other_steps_still_run(tmp_path, monkeypatch):
    import pybench.measure.system_probe as probe_module

    def broken(*_):
        raise TypeError("an unforeseen sysfs layout")
    monkeypatch.setattr(probe_module, "_ethernet_ports", broken)
    p = probe(tmp_path, nvml=fake_nvml(switched_gpus(n=2)))
    assert "detecting the NICs stopped: TypeError: an unforeseen sysfs layout" in p["notes"]
    assert p["fields"]["gpus_per_node"] == 2 and p["fields"]["cpu_cores"] == os.cpu_count()
    assert p["not_detected"]["nics_per_node"] == "detection stopped early: see the notes"
