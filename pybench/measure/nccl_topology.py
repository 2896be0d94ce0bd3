"""NCCL's topology dump (the XML that ``NCCL_TOPO_DUMP_FILE`` makes NCCL write): its GPUs, their
NVLinks, and the network devices NCCL found.

The shape read, as NCCL writes it (src/graph/xml.cc)::

    <system version="1"><cpu ...><pci busid="0000:07:00.0" ...>
      <gpu dev="0" sm="90" ...><nvlink target="0000:c9:00.0" count="2" tclass="0x068000"/></gpu>
    </pci><nic><net name="mlx5_0" speed="400000" .../></nic></cpu></system>

``tclass`` is the PCI class of the link's far end: 0x0680xx a bridge (NVSwitch), 0x03xxxx a display
controller (a GPU). ``speed`` is in Mb/s. Documents with a DTD are refused (NCCL writes none, and
entity expansion is how an XML file turns small input into huge memory).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from pybench.measure.gpu_links import NVLINK_GBPS_BY_SM, GpuLinks, Link, normal_bus_id

# A dump of a 72-GPU tray with every NIC is tens of kilobytes; more is not a topology dump.
MAX_TOPOLOGY_BYTES = 4 << 20


class TopologyDumpError(ValueError):
    """The file is not a topology dump pybench can read; the message says why in one line."""


@dataclass
class NcclTopology:
    gpus: list[GpuLinks] = field(default_factory=list)
    nets: list[tuple[str, float | None]] = field(default_factory=list)  # (name, Gb/s)
    notes: list[str] = field(default_factory=list)


def _remote(tclass: str | None) -> str:
    try:
        cls = int(tclass or "", 16)
    except ValueError:
        return "unknown"
    if cls >> 8 == 0x0680:
        return "switch"
    if cls >> 16 == 0x03:
        return "unknown"  # a GPU: resolved against the GPUs' bus ids, so a GPU of another node stays unknown
    return "other"


def _int(text: str | None) -> int | None:
    try:
        return int(text or "")
    except ValueError:
        return None


def parse_nccl_topology(data: bytes, source: str) -> NcclTopology:
    """The GPUs and network devices of one dump; TopologyDumpError in one line when it is not one."""
    if len(data) > MAX_TOPOLOGY_BYTES:
        raise TopologyDumpError(f"{source} is over {MAX_TOPOLOGY_BYTES >> 20} MiB: not an NCCL topology dump")
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise TopologyDumpError(f"{source} declares a DTD or entities, which NCCL's dumps never do: not read")
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise TopologyDumpError(f"{source} is not well-formed XML ({exc})") from None
    if root.tag != "system":
        raise TopologyDumpError(f"{source}: the root element is <{root.tag[:40]}>, not NCCL's <system>")
    topo = NcclTopology()
    parents = {child: parent for parent in root.iter() for child in parent}
    for gpu in root.iter("gpu"):
        parent = parents.get(gpu)
        bus = normal_bus_id(parent.get("busid", "")) if parent is not None else ""
        sm = _int(gpu.get("sm"))
        rate = NVLINK_GBPS_BY_SM.get(sm) if sm is not None else None
        links = []
        for nvl in gpu.iter("nvlink"):
            count = _int(nvl.get("count"))
            if count is None or not 0 < count <= 64:
                topo.notes.append(f"{source}: an nvlink of GPU {bus} has count {nvl.get('count')!r}: ignored")
                continue
            target = normal_bus_id(nvl.get("target", ""))
            links += [Link(_remote(nvl.get("tclass")), target, rate)] * count
        if links and rate is None:
            topo.notes.append(f"{source}: GPU {bus} has sm {gpu.get('sm')!r}, whose NVLink rate is not in "
                              "pybench's table")
        topo.gpus.append(GpuLinks(bus=bus, links=links))
    for net in root.iter("net"):
        speed = _int(net.get("speed"))
        Gbps = speed / 1000.0 if speed is not None and 0 < speed <= 10**8 else None
        if Gbps is None:
            topo.notes.append(f"{source}: net {net.get('name', '?')[:40]!r} has speed {net.get('speed')!r}, "
                              "not a rate in Mb/s")
        topo.nets.append((net.get("name", "?")[:40], Gbps))
    return topo
