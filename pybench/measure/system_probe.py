"""What this node is made of, read from the machine: GPUs and their NVLinks (NVML, else
nvidia-smi), the NICs (sysfs), NCCL's topology dump where one is given, and the CPUs.

The result is a plain dict recorded under ``environment["system"]`` of every result, in the
field names of :class:`pybench.model.system.SystemDescription`: ``fields`` holds what was
detected, ``from`` where each field came from, ``not_detected`` each field that could not be
read and why (never a guess), ``notes`` what went wrong on the way. Reading never raises and
never blocks: files are opened without waiting (a FIFO is refused, not read), read up to a bound,
and nvidia-smi runs under a timeout.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import signal
import stat
import subprocess
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from pybench.measure.gpu_links import (
    NVLINK_GBPS_BY_NVML_VERSION,
    SWITCH_REDUCTION_FROM_NVML_VERSION,
    Fabric,
    GpuLinks,
    Link,
    classify_fabric,
    normal_bus_id,
    pcie_GBps,
    place_links_by_matrix,
    resolve_remotes,
)
from pybench.measure.nccl_topology import MAX_TOPOLOGY_BYTES, TopologyDumpError, parse_nccl_topology

SMALL_FILE_BYTES = 1 << 16
MAX_NOTES = 24
MAX_LISTED_NICS = 16
# nvidia-smi answers in tens of milliseconds with the driver loaded; a result's environment must not
# wait longer than this for it (`pybench system --detect` allows more).
RECORD_SMI_TIMEOUT_S = 0.5
ARPHRD_INFINIBAND = "32"  # /sys/class/net/*/type of an IPoIB interface: the HCA is counted once, as RDMA
# The figures of a system description a node can show, in SystemDescription's names.
DESCRIBED = ("gpus_per_node", "intra_fabric", "intra_GBps_per_gpu", "nics_per_node", "nic_Gbps", "nic_kind")
NOT_FROM_A_HOST = {
    "rail_optimised": "a property of the switch fabric between nodes, which one host cannot see",
    "nvlink_domain_gpus": "the NVLink domain beyond this node (NVL72) is not read: one node is assumed unless "
                          "a file says otherwise",
}


class ProbeError(OSError):
    """A file that is not a small regular file."""


def read_bounded(path: str | Path, limit: int = SMALL_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, without ever waiting on a FIFO or device."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ProbeError(f"{path} is not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ProbeError(f"{path} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _text(path: Path) -> str:
    return read_bounded(path).decode("utf-8", "replace").strip()


class _Found:
    """Fields with their source, the fields not detected with why, and notes; first source wins."""

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.missing: dict[str, str] = {}
        self.notes: list[str] = []
        self.nics: list[dict[str, Any]] = []

    def set(self, name: str, value: Any, source: str) -> None:
        if name not in self.fields:
            self.fields[name] = value
            self.sources[name] = source
            self.missing.pop(name, None)
        elif self.fields[name] != value:  # e.g. NCCL dumped fewer GPUs than NVML sees (CUDA_VISIBLE_DEVICES)
            self.note(f"{name}: {source} says {value!r}, {self.sources[name]} said {self.fields[name]!r}; "
                      f"kept the latter")

    def miss(self, name: str, why: str) -> None:
        if name not in self.fields and name not in self.missing:
            self.missing[name] = why

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text[:300])

    def to_dict(self) -> dict[str, Any]:
        return {"fields": self.fields, "from": self.sources, "not_detected": self.missing, "nics": self.nics,
                "notes": self.notes}


# --- NICs: RDMA ports (InfiniBand, RoCE, EFA) and Ethernet interfaces, from sysfs ---------------

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def _rdma_ports(sysfs: Path, found: _Found) -> tuple[list[dict[str, Any]], set[str]]:
    """Active RDMA ports, and the network interfaces that are those same ports seen as netdevs."""
    ports: list[dict[str, Any]] = []
    behind: set[str] = set()
    base = sysfs / "class" / "infiniband"
    try:
        devices = sorted(os.listdir(base))
    except FileNotFoundError:
        return ports, behind
    except OSError as exc:
        found.note(f"{base}: {exc.strerror or exc}")
        return ports, behind
    for dev in devices[:256]:
        try:
            driver = Path(os.path.realpath(base / dev / "device" / "driver")).name
            netdevs = os.listdir(base / dev / "device" / "net") if (base / dev / "device" / "net").is_dir() else []
            behind.update(netdevs)
            for port in sorted(os.listdir(base / dev / "ports"))[:16]:
                where = base / dev / "ports" / port
                if "ACTIVE" not in _text(where / "state"):
                    continue
                layer = _text(where / "link_layer") if (where / "link_layer").exists() else "InfiniBand"
                kind = "efa" if driver == "efa" else "roce" if layer == "Ethernet" else "infiniband"
                rate_text = _text(where / "rate")
                m = _RATE.match(rate_text)
                if m is None:
                    found.note(f"{where / 'rate'} reads {rate_text[:40]!r}, not '<N> Gb/sec': rate not used")
                ports.append({"name": f"{dev}/{port}", "kind": kind, "Gbps": float(m.group(1)) if m else None,
                              "from": str(where / "rate")})
        except OSError as exc:
            found.note(f"{base / dev}: {exc.strerror or exc}: skipped")
    return ports, behind


def _ethernet_ports(sysfs: Path, behind_rdma: set[str], found: _Found) -> list[dict[str, Any]]:
    """Physical interfaces with link up: not loopback, not virtual (veth, bridges, ifb), not IPoIB."""
    base = sysfs / "class" / "net"
    try:
        names = sorted(os.listdir(base))
    except OSError as exc:
        found.note(f"{base}: {exc.strerror or exc}")
        return []
    ports = []
    for name in names[:1024]:
        if name == "lo" or name in behind_rdma:
            continue
        where = base / name
        try:
            if "/devices/virtual/" in os.path.realpath(where) + "/":
                continue
            if _text(where / "type") == ARPHRD_INFINIBAND or _text(where / "operstate") != "up":
                continue
            try:
                speed = int(_text(where / "speed"))
            except ValueError:
                speed = -1
                found.note(f"{where / 'speed'} is not a whole number of Mb/s: rate not used")
            except OSError:
                speed = -1  # the kernel answers EINVAL for interfaces that have no speed to report
            ports.append({"name": name, "kind": "ethernet", "Gbps": speed / 1000.0 if speed > 0 else None,
                          "from": str(where / "speed")})
        except OSError as exc:
            found.note(f"{where}: {exc.strerror or exc}: skipped")
    return ports


def _nics(ports: list[dict[str, Any]], what: str, found: _Found) -> None:
    """NICs per node and their rate: the fastest ports, as NCCL spreads traffic over its fastest devices."""
    found.nics = ports[:MAX_LISTED_NICS]
    rated = [p for p in ports if p["Gbps"] is not None]
    if rated:
        top = max(p["Gbps"] for p in rated)
        fastest = [p for p in rated if p["Gbps"] == top]
        found.set("nic_Gbps", top, f"{what}: {fastest[0]['from']}" + (f" and {len(fastest) - 1} more"
                                                                         if len(fastest) > 1 else ""))
        found.set("nics_per_node", len(fastest), what)
        found.set("nic_kind", fastest[0]["kind"], what)
        slower = [p["name"] for p in ports if p not in fastest]
        if slower:
            found.note(f"not counted as this node's network (slower or unrated): {', '.join(slower[:8])}")
    else:
        found.set("nics_per_node", len(ports), what)
        found.set("nic_kind", ports[0]["kind"], what)
        found.miss("nic_Gbps", f"{', '.join(p['name'] for p in ports[:8])} report(s) no link rate "
                               "(a virtual or paravirtual NIC reports none)")


def probe_nics(sysfs: Path, found: _Found) -> None:
    rdma, behind = _rdma_ports(sysfs, found)
    ethernet = _ethernet_ports(sysfs, behind, found)
    if rdma:  # NCCL's IB/RoCE/EFA transport takes precedence over sockets where an RDMA port is up
        _nics(rdma, "sysfs /sys/class/infiniband", found)
        if ethernet:
            found.note(f"Ethernet interfaces not counted beside the RDMA ports: "
                       f"{', '.join(p['name'] for p in ethernet[:8])}")
    elif ethernet:
        _nics(ethernet, "sysfs /sys/class/net", found)
    else:
        for name in ("nics_per_node", "nic_Gbps", "nic_kind"):
            found.miss(name, "no RDMA port active and no physical network interface up in sysfs")


# --- GPUs: NVML (nvidia-ml-py), else nvidia-smi ---------------------------------------------------

def _s(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# NVML's remote device types (nvml.h NVML_NVLINK_DEVICE_TYPE_*): 0 GPU, 1 IBM NPU, 2 switch, 0xFF
# unknown. A GPU or an unknown end is told by its bus id (resolve_remotes), so a GPU of another
# node is never taken for one of this node.
_NVML_REMOTE = {1: "other", 2: "switch"}


def _nvml_gpus(nvml: ModuleType) -> list[GpuLinks]:
    """Every GPU NVML sees with its active NVLinks; NVMLError from nvmlInit propagates."""
    def ask(call: str, *args: Any) -> Any:
        try:
            return getattr(nvml, call)(*args)
        except nvml.NVMLError:  # a call this GPU or driver does not support: that figure stays unknown
            return None

    nvml.nvmlInit()
    try:
        gpus = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            gpu = GpuLinks(bus=normal_bus_id(_s(nvml.nvmlDeviceGetPciInfo(h).busId)),
                           name=_s(nvml.nvmlDeviceGetName(h))[:80])
            for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
                if ask("nvmlDeviceGetNvLinkState", h, link) != 1:  # NVML_FEATURE_ENABLED; None: no such link
                    continue
                version = ask("nvmlDeviceGetNvLinkVersion", h, link)
                pci = ask("nvmlDeviceGetNvLinkRemotePciInfo", h, link)
                remote = _NVML_REMOTE.get(ask("nvmlDeviceGetNvLinkRemoteDeviceType", h, link), "unknown")
                gpu.links.append(Link(remote, normal_bus_id(_s(pci.busId)) if pci is not None else None,
                                      NVLINK_GBPS_BY_NVML_VERSION.get(version) if version is not None else None,
                                      version if isinstance(version, int) else None))
            gen, width = ask("nvmlDeviceGetMaxPcieLinkGeneration", h), ask("nvmlDeviceGetMaxPcieLinkWidth", h)
            gpu.pcie_GBps = pcie_GBps(gen, width) if gen is not None and width is not None else None
            gpus.append(gpu)
        return gpus
    finally:
        nvml.nvmlShutdown()


_SMI_LINK = re.compile(r"^\s*Link \d+: ([\d.]+) GB/s", re.MULTILINE)


def _smi_gpus(smi: str, timeout_s: float) -> tuple[list[GpuLinks], bool]:
    """GPUs, their NVLinks' rates and where the links end (True when that is known), from nvidia-smi."""
    def ask(*args: str) -> str:
        # Its own process group, killed whole on timeout: a wrapper script's children must not keep
        # the pipe open (and this call waiting) after the timeout.
        proc = subprocess.Popen([smi, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        if proc.returncode:
            raise ValueError(f"`{args[0]}` exited with status {proc.returncode}")
        return out

    gpus = []
    for row in ask("--query-gpu=pci.bus_id,name,pcie.link.gen.max,pcie.link.width.max",
                   "--format=csv,noheader,nounits").splitlines():
        cells = [c.strip() for c in row.split(",")]
        if len(cells) < 4:
            continue
        gen, width = (int(c) if c.isdigit() else 0 for c in cells[-2:])  # "[N/A]" where not reported
        gpus.append(GpuLinks(bus=normal_bus_id(cells[0]), name=",".join(cells[1:-2])[:80],
                             pcie_GBps=pcie_GBps(gen, width)))
    status = ask("nvlink", "-s") if gpus else ""
    blocks = re.split(r"^GPU \d+:", status, flags=re.MULTILINE)[1:]
    for gpu, block in zip(gpus, blocks):
        gpu.links = [Link("unknown", None, float(rate)) for rate in _SMI_LINK.findall(block)]
    if not any(g.links for g in gpus):
        return gpus, True
    try:
        return gpus, place_links_by_matrix(gpus, ask("topo", "-m"))
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return gpus, False  # the GPUs and link rates stand; where the links end stays unknown


def probe_gpus(found: _Found, nvml: ModuleType | None, smi: str | None, smi_timeout_s: float) -> list[GpuLinks]:
    """The GPUs from NVML, else nvidia-smi; an empty list (and why, in the notes) when neither answers."""
    why = []
    if nvml is not None:
        try:
            gpus = _nvml_gpus(nvml)
            resolve_remotes(gpus)
            _gpu_fields(gpus, "nvml", found)
            return gpus
        except Exception as exc:  # NVMLError, a missing driver library: recorded, never raised
            why.append(f"NVML: {str(exc)[:120] or type(exc).__name__}")
    else:
        why.append("NVML: nvidia-ml-py is not installed")
    if smi is not None:
        try:
            gpus, ends_known = _smi_gpus(smi, smi_timeout_s)
            _gpu_fields(gpus, "nvidia-smi", found, ends_known=ends_known)
            return gpus
        except subprocess.TimeoutExpired:
            why.append(f"nvidia-smi did not answer within {smi_timeout_s:g} s")
        except (OSError, ValueError) as exc:
            why.append(f"nvidia-smi: {str(exc)[:120]}")
    else:
        why.append("nvidia-smi is not on PATH")
    for name in ("gpus_per_node", "intra_fabric", "intra_GBps_per_gpu"):
        found.miss(name, "no GPU detected (" + "; ".join(why) + ")")
    return []


def _gpu_fields(gpus: list[GpuLinks], source: str, found: _Found, ends_known: bool = True) -> None:
    """GPU count, name, fabric and per-GPU rate; ``ends_known`` False when the source cannot say
    where a link ends (nvidia-smi), so the fabric is left undetected."""
    if not gpus:
        return
    found.set("gpus_per_node", len(gpus), source)
    names = sorted({g.name for g in gpus if g.name})
    if names:
        found.set("gpu_name", ", ".join(names), source)
    fabric = classify_fabric(gpus)
    if not ends_known and fabric.kind != "pcie":
        rates = [sum(ln.GBps or 0.0 for ln in g.links) for g in gpus]
        fabric = Fabric(None, min(rates) if all(ln.GBps for g in gpus for ln in g.links) else None,
                        f"{source}'s topology matrix does not say where every NVLink ends; install nvidia-ml-py",
                        min(len(g.links) for g in gpus))
    if fabric.kind is not None:
        found.set("intra_fabric", fabric.kind, source)
    else:
        found.miss("intra_fabric", fabric.why)
    if fabric.links_per_gpu:
        found.set("nvlinks_per_gpu", fabric.links_per_gpu, source)
    versions = [ln.nvml_version for g in gpus for ln in g.links]
    known = [v for v in versions if v is not None]
    if fabric.kind == "nvswitch" and known and len(known) == len(versions):
        found.set("in_switch_reduction", min(known) >= SWITCH_REDUCTION_FROM_NVML_VERSION,
                  f"{source} (NVLink generation)")
    elif fabric.kind == "nvswitch":
        found.miss("in_switch_reduction", f"{source} does not give the NVLink generation")
    if fabric.GBps_per_gpu is not None:
        found.set("intra_GBps_per_gpu", fabric.GBps_per_gpu, f"{source} (nominal rate of its links)")
    else:
        found.miss("intra_GBps_per_gpu", fabric.why)


def probe_topology_dump(path: str, found: _Found) -> None:
    """GPUs, NVLinks and network devices from NCCL's dump, for the fields nothing else gave."""
    where = f"NCCL topology dump {path}"
    try:
        topo = parse_nccl_topology(read_bounded(path, MAX_TOPOLOGY_BYTES), path)
    except FileNotFoundError:
        found.note(f"{where} does not exist (NCCL writes it when a communicator starts)")
        return
    except (OSError, TopologyDumpError) as exc:
        found.note(f"{where} not read: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}")
        return
    for text in topo.notes:
        found.note(text)
    resolve_remotes(topo.gpus)
    _gpu_fields(topo.gpus, where, found)
    rated = [(n, g) for n, g in topo.nets if g is not None]
    if rated and "nics_per_node" not in found.fields:
        _nics([{"name": n, "kind": None, "Gbps": g, "from": where} for n, g in rated], where, found)
        if found.fields.get("nic_kind") is None:
            found.fields.pop("nic_kind", None)
            found.sources.pop("nic_kind", None)
            found.miss("nic_kind", "NCCL's dump does not say whether a net is InfiniBand, RoCE or EFA")


# --- CPU ------------------------------------------------------------------------------------------

def probe_cpu(proc: Path, found: _Found) -> None:
    try:
        info = read_bounded(proc / "cpuinfo", 1 << 24).decode("utf-8", "replace")
        models = re.findall(r"^model name\s*:\s*(.+)$", info, re.MULTILINE)
        sockets = set(re.findall(r"^physical id\s*:\s*(\d+)", info, re.MULTILINE))
        if models:
            found.set("cpu_model", models[0].strip()[:120], str(proc / "cpuinfo"))
        if sockets:
            found.set("cpu_sockets", len(sockets), str(proc / "cpuinfo"))
    except OSError as exc:
        found.note(f"{proc / 'cpuinfo'}: {exc.strerror or exc}")
    cores = os.cpu_count()
    if cores:
        found.set("cpu_cores", cores, "os.cpu_count")


def _import_nvml() -> ModuleType | None:
    try:
        import pynvml  # nvidia-ml-py, the gpu extra
        return pynvml
    except Exception:  # absent, or a broken install: the host is then read as having no NVML
        return None


def probe_system(*, sysfs_root: str | Path = "/sys", proc_root: str | Path = "/proc",
                 nvml: ModuleType | None | str = "import", nvidia_smi: str | None = "PATH",
                 topology_dump: str | None = None, smi_timeout_s: float = RECORD_SMI_TIMEOUT_S) -> dict[str, Any]:
    """What this node is made of (see the module docstring); never raises.

    ``nvml="import"`` imports pynvml, ``nvidia_smi="PATH"`` finds nvidia-smi on PATH; tests pass
    fakes of both. ``topology_dump`` defaults to the file ``NCCL_TOPO_DUMP_FILE`` names.
    """
    found = _Found()
    module = _import_nvml() if nvml == "import" else nvml
    smi = shutil.which("nvidia-smi") if nvidia_smi == "PATH" else nvidia_smi
    dump = topology_dump if topology_dump is not None else os.environ.get("NCCL_TOPO_DUMP_FILE")
    steps = {"NICs": lambda: probe_nics(Path(sysfs_root), found),
             "GPUs": lambda: probe_gpus(found, module if not isinstance(module, str) else None, smi, smi_timeout_s),
             "NCCL topology dump": lambda: probe_topology_dump(dump, found) if dump else None,
             "CPUs": lambda: probe_cpu(Path(proc_root), found)}
    for what, step in steps.items():
        try:
            step()
        except Exception as exc:  # a result is never lost to the description of its machine; the next step runs
            found.note(f"detecting the {what} stopped: {type(exc).__name__}: {str(exc)[:160]}")
    for name in DESCRIBED:  # a step that stopped early still leaves every figure detected or named
        found.miss(name, "detection stopped early: see the notes")
    for name, why in NOT_FROM_A_HOST.items():
        found.miss(name, why)
    return found.to_dict()


@cache
def _probed_once() -> dict[str, Any]:
    return probe_system()


def recorded_system() -> dict[str, Any]:
    """This node as recorded in every result's environment: detected once per process, a fresh copy
    each call so that no caller's edit reaches the next result."""
    return copy.deepcopy(_probed_once())


def probe_summary(probe: dict[str, Any]) -> str:
    """One line: the GPUs, fabric and NICs detected, and what was not."""
    f = probe.get("fields", {})
    gpus = (f"{f['gpus_per_node']} x {f.get('gpu_name', 'GPU')}, {f.get('intra_fabric', 'fabric not detected')}"
            + (f" at {f['intra_GBps_per_gpu']:g} GB/s per GPU" if "intra_GBps_per_gpu" in f else "")
            if "gpus_per_node" in f else "no GPU")
    kind = f.get("nic_kind", "network")
    nics = ("no NIC detected" if "nics_per_node" not in f
            else f"{f['nics_per_node']} x {f['nic_Gbps']:g} Gb/s {kind}" if "nic_Gbps" in f
            else f"{f['nics_per_node']} {kind} NIC(s), rate not reported")
    return f"{gpus}; {nics}; {f.get('cpu_cores', '?')} CPU core(s)"
