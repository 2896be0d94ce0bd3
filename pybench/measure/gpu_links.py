"""The links of a node's GPUs, however they were read (NVML, nvidia-smi, NCCL's topology dump),
and what they make of the intra-node fabric: NVSwitch, NVLink all-to-all, NVLink mesh or PCIe.

Rates are nominal, per direction, from the public specifications, so that a detected node and a
named system (``pybench/model/systems/*.json``) speak the same units: GB/s = 1e9 B/s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# NVML's NVLink version codes (nvml.h: NVML_NVLINK_VERSION_1_0 = 1 ... NVML_NVLINK_VERSION_5_0 = 7)
# to the per-link rate per direction, GB/s: NVLink 1.0 20 (P100), 2.x 25 (V100), 3.x 25 (A100:
# 12 links, 300 GB/s), 4.0 25 (H100: 18 links, 450 GB/s), 5.0 50 (B200: 18 links, 900 GB/s), as
# NVIDIA's NVLink page and the GPUs' datasheets state them. A later version is not guessed.
NVLINK_GBPS_BY_NVML_VERSION = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0}
# NVLink 4.0 and later (NVML code 6 on): the NVSwitch generation that reduces in the switch (NVLink SHARP,
# which NCCL's NVLS runs on), per NVIDIA's Hopper and Blackwell architecture papers.
SWITCH_REDUCTION_FROM_NVML_VERSION = 6
# The same rates by compute capability (sm), which is all NCCL's topology dump says of a GPU.
# Only the data-centre parts whose NVLink generation the sm names alone.
NVLINK_GBPS_BY_SM = {60: 20.0, 70: 25.0, 80: 25.0, 90: 25.0, 100: 50.0}
# PCIe transfer rate per lane, GT/s, by generation (PCI-SIG base specifications 1.0-6.0); the raw
# rate of a link is GT/s x lanes / 8 GB/s, as ethernet-25g.json quotes PCIe 4.0 x16 at 32 GB/s.
PCIE_GTPS_BY_GENERATION = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

Remote = str  # "gpu", "switch", "other" (a CPU, an NPU) or "unknown"


@dataclass(frozen=True)
class Link:
    """One active NVLink of a GPU: what is at its other end and its nominal rate (None: unknown)."""

    remote: Remote
    peer_bus: str | None = None
    GBps: float | None = None
    nvml_version: int | None = None
    """NVML's version code of the link (None where the source does not say)."""


@dataclass
class GpuLinks:
    """One GPU: its PCI bus id, name, active NVLinks and PCIe link."""

    bus: str
    name: str | None = None
    links: list[Link] = field(default_factory=list)
    pcie_GBps: float | None = None


def normal_bus_id(text: str) -> str:
    """``00000000:07:00.0`` (NVML) and ``0000:07:00.0`` (sysfs, NCCL) as one key."""
    text = text.strip().lower()
    return text[-12:] if len(text) >= 12 else text


def pcie_GBps(generation: int, lanes: int) -> float | None:
    gtps = PCIE_GTPS_BY_GENERATION.get(generation)
    return None if gtps is None or lanes <= 0 else gtps * lanes / 8.0


def resolve_remotes(gpus: list[GpuLinks]) -> None:
    """Links whose far end was not named get "gpu" when their peer's bus id is one of the GPUs."""
    buses = {g.bus for g in gpus}
    for g in gpus:
        g.links = [Link("gpu", ln.peer_bus, ln.GBps) if ln.remote == "unknown" and ln.peer_bus in buses else ln
                   for ln in g.links]


@dataclass(frozen=True)
class Fabric:
    """What the links make of a node; ``kind`` or ``GBps_per_gpu`` is None with ``why`` when unknown."""

    kind: str | None
    GBps_per_gpu: float | None
    why: str = ""
    links_per_gpu: int = 0


def classify_fabric(gpus: list[GpuLinks]) -> Fabric:
    """The intra-node fabric of ``gpus`` and the per-GPU rate every GPU reaches (the slowest GPU's).

    A link that ends at an NVSwitch makes the node switched; links that all end at GPUs make a
    mesh, all-to-all when every GPU has a link to every other; no NVLink at all leaves PCIe.
    """
    if not gpus:
        return Fabric(None, None, "no GPU")
    links = [ln for g in gpus for ln in g.links]
    if not links:
        rates = [g.pcie_GBps for g in gpus]
        if any(r is None for r in rates):
            return Fabric("pcie", None, "no NVLink is active and the PCIe link generation or width was not read")
        return Fabric("pcie", min(r for r in rates if r is not None))
    unknown = [ln for ln in links if ln.remote not in ("gpu", "switch")]
    if unknown:
        return Fabric(None, None, f"{len(unknown)} active NVLink(s) end at neither a GPU of this node nor an "
                                  "NVSwitch")
    if any(ln.remote == "switch" for ln in links):
        kind = "nvswitch"
    else:
        buses = {g.bus for g in gpus}
        everyone = all({ln.peer_bus for ln in g.links} >= buses - {g.bus} for g in gpus)
        kind = "nvlink-all-to-all" if everyone else "nvlink-mesh"
    per_link_unknown = [ln for ln in links if ln.GBps is None]
    count = min(len(g.links) for g in gpus)
    if per_link_unknown:
        return Fabric(kind, None, "the rate of this NVLink generation is not in pybench's table", count)
    return Fabric(kind, min(sum(ln.GBps or 0.0 for ln in g.links) for g in gpus), "", count)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def place_links_by_matrix(gpus: list[GpuLinks], matrix: str) -> bool:
    """Say where each GPU's links end from ``nvidia-smi topo -m`` ("NV12": 12 links to that GPU);
    True when every link's end is then known.

    Through an NVSwitch the matrix shows every peer at the GPU's full link count, more links than
    the GPU has; direct links add up to exactly the links the GPU has.
    """
    rows = [_ANSI.sub("", r).split() for r in matrix.splitlines()]
    # the rows of GPUs, not the header (which starts with GPU0 too, but has no X for "self")
    table = [r for r in rows if r and re.fullmatch(r"GPU\d+", r[0]) and "X" in r][: len(gpus)]
    if len(table) != len(gpus):
        return False
    for i, (gpu, row) in enumerate(zip(gpus, table)):
        counts = {j: int(c[2:]) for j, c in enumerate(row[1:1 + len(gpus)]) if j != i and re.fullmatch(r"NV\d+", c)}
        rates = [ln.GBps for ln in gpu.links]
        if not rates:
            continue
        if sum(counts.values()) > len(rates):
            gpu.links = [Link("switch", None, r) for r in rates]
        elif sum(counts.values()) == len(rates):
            peers = [gpus[j].bus for j, k in counts.items() for _ in range(k)]
            gpu.links = [Link("gpu", p, r) for p, r in zip(peers, rates)]
        else:
            return False
    return True
