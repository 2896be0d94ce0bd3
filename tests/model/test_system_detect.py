"""A detected node as a system description: validated like a named one, or one line saying what
was not detected; `pybench system` lists, shows and detects. Fake hardware comes from the probe's
own tests (tests/measure/test_system_probe.py); the real machine is detected as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pybench.cli.main import main
from pybench.errors import UsageError
from pybench.measure.system_probe import probe_system
from pybench.model.system import load_system, named_systems
from pybench.model.system_detect import description_from_probe
from tests.measure.system_fakes import fake_nvml, ib_port, netdev, switched_gpus

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def h100_node(tmp_path):
    """A probe of a DGX H100-like node: 8 GPUs on NVSwitch (NVML), 8 x 400G InfiniBand (sysfs)."""
    sysfs = tmp_path / "sys"
    for k in range(8):
        ib_port(sysfs, f"mlx5_{k}")
    netdev(sysfs, "eno1", speed="100000")
    return probe_system(sysfs_root=sysfs, proc_root=tmp_path, nvml=fake_nvml(switched_gpus()), nvidia_smi=None)


def test_a_detected_node_is_a_valid_description_with_the_figures_of_its_named_twin(h100_node):
    detected = description_from_probe(h100_node, host="node7")
    twin = load_system("dgx-h100")
    same = ("gpus_per_node", "intra_fabric", "intra_GBps_per_gpu", "nics_per_node", "nic_Gbps", "nic_kind",
            "in_switch_reduction")
    assert {k: getattr(detected, k) for k in same} == {k: getattr(twin, k) for k in same}
    assert detected.name == "detected-node7"
    # a host's name may hold what no description's name may (it heads tables): replaced, not refused
    assert description_from_probe(h100_node, host="gpu_7\n\x1b[31m").name == "detected-gpu_7---31m"
    assert "gpus_per_node from nvml" in detected.source and "nic_Gbps from sysfs" in detected.source
    assert "in_switch_reduction from nvml (NVLink generation)" in detected.source
    # what a host cannot see is named, not guessed; the file's defaults apply to it
    assert "rail_optimised" in detected.description and detected.rail_optimised is False


def test_a_gpu_less_host_is_one_line_naming_every_missing_figure_and_why(tmp_path):
    sysfs = tmp_path / "sys"
    netdev(sysfs, "eth0", speed="-1")  # a paravirtual NIC reports no rate
    probe = probe_system(sysfs_root=sysfs, proc_root=tmp_path, nvml=None, nvidia_smi=None)
    with pytest.raises(UsageError) as err:
        description_from_probe(probe)
    text = str(err.value)
    assert "\n" not in text and text.count("no GPU detected") == 1
    assert "gpus_per_node, intra_fabric, intra_GBps_per_gpu: no GPU detected" in text
    assert "nic_Gbps: eth0" in text and "--system" in text


def test_a_detected_figure_outside_the_validators_bounds_is_one_usage_line(h100_node):
    h100_node["fields"]["nic_Gbps"] = 1e9
    with pytest.raises(UsageError, match=r"^the detected system: system description: nic_Gbps"):
        description_from_probe(h100_node)


def test_this_machine_is_detected_and_either_validates_or_says_what_is_missing():
    probe = probe_system()
    try:
        detected = description_from_probe(probe)
    except UsageError as exc:
        missing = [n for n in ("gpus_per_node", "intra_fabric", "intra_GBps_per_gpu", "nics_per_node", "nic_Gbps")
                   if n not in probe["fields"]]
        assert missing and all(n in str(exc) for n in missing)
    else:
        assert detected.gpus_per_node == probe["fields"]["gpus_per_node"]


# --- pybench system --------------------------------------------------------------------------------

def test_system_lists_and_shows_named_systems_as_files_that_load_back(capsys, tmp_path):
    assert main(["system"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines] == named_systems()
    assert main(["system", "dgx-1-v100"]) == 0
    path = tmp_path / "mine.json"
    path.write_text(capsys.readouterr().out)
    assert load_system(path) == load_system("dgx-1-v100")
    # every field, defaults included: a shown file left out an InfiniBand node's NIC kind (the default), so a user
    # who copied it to edit for a RoCE cluster had no field to edit
    shown = json.loads(path.read_text())
    assert shown["nic_kind"] == "infiniband" and {"rail_optimised", "in_switch_reduction"} <= set(shown)
    assert main(["system", "show", "dgx-1-v100"]) == 0  # as users guess it, with `system list`
    assert load_system(path) == load_system(path.write_text(capsys.readouterr().out) and path)
    assert main(["system", "list"]) == 0
    assert [ln.split(":")[0] for ln in capsys.readouterr().out.splitlines()] == named_systems()


def test_detect_prints_a_description_that_system_file_accepts(capsys, tmp_path, monkeypatch, h100_node):
    import pybench.measure.system_probe as probe_module
    monkeypatch.setattr(probe_module, "probe_system", lambda **_: h100_node)  # the fake node, not this host
    assert main(["system", "--detect"]) == 0
    out, err = capsys.readouterr()
    path = tmp_path / "here.json"
    path.write_text(out)
    assert load_system(path) == description_from_probe(h100_node)
    assert "eno1" in err  # the notes go to stderr, the description alone to stdout
    assert main(["system", "--detect", "--evidence"]) == 0
    assert json.loads(capsys.readouterr().out)["fields"]["nics_per_node"] == 8


@pytest.mark.parametrize("argv, says", [
    (["system", "no-such-system"], "unknown system 'no-such-system'"),
    (["system", "--evidence"], "give them with --detect"),
    (["system", "dgx-h100", "--detect"], "give one of them"),
    (["system", "show"], "`system show` needs a NAME or FILE"),
    (["system", "list", "dgx-h100"], "`system list` takes no name; show one with `pybench system show dgx-h100`"),
    (["system", "--detect", "list"], "give one of them"),
    (["system", "dgx-h100", "aws-p5"], "give one NAME or FILE, not 2"),
])
def test_system_bad_input_is_one_line_exit_2(capsys, argv, says):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_detect_on_this_machine_prints_a_description_or_one_line_exit_2(capsys):
    code = main(["system", "--detect"])
    out, err = capsys.readouterr()
    if code == 0:
        assert json.loads(out)["gpus_per_node"] >= 1
    else:
        assert code == 2 and out == "" and err.startswith("pybench: error: this host cannot be described")
        assert err.count("\n") == 1


def test_recorded_turns_a_results_record_into_the_description_of_its_machine(capsys, tmp_path, h100_node):
    result = tmp_path / "ar.json"
    result.write_text(json.dumps({"schema": "pybench.result", "hosts": {"node7": 8},
                                  "environment": {"system": h100_node}}))
    assert main(["system", "--recorded", str(result)]) == 0
    path = tmp_path / "node7.json"
    path.write_text(capsys.readouterr().out)
    assert load_system(path) == description_from_probe(h100_node, host="node7")
    result.write_text(json.dumps({"schema": "pybench.result", "environment": {"cpu_model": "x"}}))
    assert main(["system", "--recorded", str(result)]) == 2
    err = capsys.readouterr().err
    assert "records no detected system" in err and err.count("\n") == 1
    hostile = dict(h100_node, fields=dict(h100_node["fields"], gpus_per_node="eight"), not_detected=[1])
    result.write_text(json.dumps({"schema": "pybench.result", "hosts": [], "environment": {"system": hostile}}))
    assert main(["system", "--recorded", str(result)]) == 2
    err = capsys.readouterr().err
    assert "gpus_per_node" in err and err.count("\n") == 1 and "Traceback" not in err
    gpu_less = probe_system(sysfs_root=tmp_path / "none", proc_root=tmp_path, nvml=None, nvidia_smi=None)
    result.write_text(json.dumps({"schema": "pybench.result", "environment": {"system": gpu_less}}))
    assert main(["system", "--recorded", str(result)]) == 2
    assert f"the machine {result} was measured on cannot be described" in capsys.readouterr().err


# --- fit prices with the machine its results recorded ----------------------------------------------

def _result_on(tmp_path, name: str, probe) -> str:
    doc = json.loads(FIXTURES.joinpath("cpu_mpi2_allreduce.json").read_text(encoding="utf-8"))
    doc["environment"]["system"] = probe
    doc["command"] = [*doc["command"], f"# {name}"]  # each its own run: one run given twice is refused
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _fitted_systems(path) -> list:
    return [t.get("system") for t in json.loads(Path(path).read_text(encoding="utf-8"))["topology"]]


def test_fit_prices_with_the_system_its_results_recorded_and_says_so(capsys, tmp_path, h100_node):
    first, second = _result_on(tmp_path, "a.json", h100_node), _result_on(tmp_path, "b.json", h100_node)
    out = tmp_path / "m.json"
    assert main(["fit", first, second, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"pricing with the system recorded in {first}: detected-vm: 8 GPUs per node" in err
    systems = _fitted_systems(out)
    assert systems and all(s["nics_per_node"] == 8 and s["nic_Gbps"] == 400 for s in systems)
    # --system wins over the record, and says nothing about it
    assert main(["fit", first, "-o", str(out), "--force", "--system", "dgx-1-v100"]) == 0
    assert "recorded" not in capsys.readouterr().err
    assert {s["name"] for s in _fitted_systems(out)} == {"dgx-1-v100"}


def test_fit_uses_no_recorded_system_when_the_inputs_disagree_or_one_cannot_be_described(capsys, tmp_path,
                                                                                          h100_node):
    fewer_nics = json.loads(json.dumps(h100_node))
    fewer_nics["fields"]["nics_per_node"] = 4
    first, other = _result_on(tmp_path, "a.json", h100_node), _result_on(tmp_path, "b.json", fewer_nics)
    out = tmp_path / "m.json"
    assert main(["fit", first, other, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "systems that differ" in err and "give --system" in err and err.count("systems that differ") == 1
    assert _fitted_systems(out) and not any(_fitted_systems(out))
    gpu_less = probe_system(sysfs_root=tmp_path / "none", proc_root=tmp_path, nvml=None, nvidia_smi=None)
    cpu = _result_on(tmp_path, "cpu.json", gpu_less)
    assert main(["fit", cpu, "-o", str(out), "--force"]) == 0
    assert "system" not in capsys.readouterr().err
    assert not any(_fitted_systems(out))


def test_the_html_report_shows_the_recorded_machine_or_why_there_is_none(capsys, tmp_path, h100_node):
    pytest.importorskip("matplotlib", reason="reports need matplotlib (pip install matplotlib)")
    gpu_less = probe_system(sysfs_root=tmp_path / "none", proc_root=tmp_path, nvml=None, nvidia_smi=None)
    inputs = [_result_on(tmp_path, "gpu.json", h100_node), _result_on(tmp_path, "cpu.json", gpu_less),
              str(FIXTURES / "cpu_mpi2_allreduce.json")]
    out = tmp_path / "r.html"
    assert main(["report", *inputs, "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "detected-vm: 8 GPUs per node, nvswitch at 450 GB/s per GPU, 8 x 400 Gb/s infiniband" in text
    assert "cannot be described as a GPU system: gpus_per_node, intra_fabric, intra_GBps_per_gpu: no GPU" in text
    assert "not recorded (a result of an older pybench)" in text


def test_switches_reduce_from_nvlink_4_on_and_an_unread_generation_is_not_guessed(tmp_path):
    """NVLink 3.0 switches (A100, NVML code 4) do not reduce; NVLink 4.0 (H100, code 6) on do. nvidia-smi's
    matrix gives no generation: the field is named as not detected and the file's default (no) applies."""
    a100 = probe_system(sysfs_root=tmp_path, proc_root=tmp_path, nvml=fake_nvml(switched_gpus(links=12, version=4)),
                        nvidia_smi=None)
    assert a100["fields"]["in_switch_reduction"] is False
    h100 = probe_system(sysfs_root=tmp_path, proc_root=tmp_path, nvml=fake_nvml(switched_gpus()), nvidia_smi=None)
    assert h100["fields"]["in_switch_reduction"] is True
    from pybench.measure.gpu_links import GpuLinks, Link
    from pybench.measure.system_probe import _Found, _gpu_fields
    found = _Found()
    _gpu_fields([GpuLinks("0000:0%d:00.0" % i, "H100", [Link("switch", None, 25.0)] * 18) for i in range(8)],
                "nvidia-smi", found)
    assert "in_switch_reduction" in found.missing and "in_switch_reduction" not in found.fields
