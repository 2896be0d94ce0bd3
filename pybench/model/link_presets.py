"""Published per-direction link rates, for the link classes a user has not measured.

A preset is never a measurement: every prediction that uses one says so ("preset nvlink4").
Rates are the vendors' per-direction figures per GPU (NVLink, PCIe) or per port (InfiniBand,
Ethernet), in bytes per second (1 GB/s = 1e9 B/s), and the latency is a typical one-hop
figure that only matters for small messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybench.errors import UsageError


@dataclass(frozen=True)
class LinkPreset:
    """One kind of link, with its published rate."""

    name: str
    link_class: str
    """``intra-node`` (between GPUs of one node) or ``inter-node`` (a NIC)."""
    bandwidth_Bps: float
    """Per direction, per GPU (intra-node) or per NIC port (inter-node)."""
    step_latency_s: float
    """A typical one-hop latency, for the per-step term of the cost model."""
    source: str


_GB = 1e9
PRESETS: dict[str, LinkPreset] = {p.name: p for p in (
    LinkPreset("nvlink3", "intra-node", 300 * _GB, 2.0e-6, "A100: 12 NVLink3 links x 25 GB/s per direction"),
    LinkPreset("nvlink4", "intra-node", 450 * _GB, 2.0e-6, "H100/H200: 18 NVLink4 links x 25 GB/s per direction"),
    LinkPreset("nvlink5", "intra-node", 900 * _GB, 2.0e-6, "B200: 18 NVLink5 links x 50 GB/s per direction"),
    LinkPreset("nvswitch", "intra-node", 450 * _GB, 2.0e-6, "NVSwitch gen 3 (H100 HGX): NVLink4 rate per GPU"),
    LinkPreset("pcie4", "intra-node", 32 * _GB, 5.0e-6, "PCIe 4.0 x16: 32 GB/s per direction (raw)"),
    LinkPreset("pcie5", "intra-node", 64 * _GB, 5.0e-6, "PCIe 5.0 x16: 64 GB/s per direction (raw)"),
    LinkPreset("ib-hdr", "inter-node", 25 * _GB, 5.0e-6, "InfiniBand HDR: 200 Gbit/s per port"),
    LinkPreset("ib-ndr", "inter-node", 50 * _GB, 5.0e-6, "InfiniBand NDR: 400 Gbit/s per port"),
    LinkPreset("ib-xdr", "inter-node", 100 * _GB, 5.0e-6, "InfiniBand XDR: 800 Gbit/s per port"),
    LinkPreset("eth-25g", "inter-node", 3.125 * _GB, 20.0e-6, "Ethernet / RoCE 25 Gbit/s"),
    LinkPreset("eth-100g", "inter-node", 12.5 * _GB, 10.0e-6, "Ethernet / RoCE 100 Gbit/s"),
    LinkPreset("eth-200g", "inter-node", 25 * _GB, 10.0e-6, "Ethernet / RoCE 200 Gbit/s"),
    LinkPreset("eth-400g", "inter-node", 50 * _GB, 10.0e-6, "Ethernet / RoCE 400 Gbit/s"),
)}


def get_preset(name: str) -> LinkPreset:
    """The preset called ``name``; a UsageError listing the known ones otherwise."""
    key = name.strip().lower()
    if key not in PRESETS:
        raise UsageError(f"unknown link preset {name!r}; known presets: {', '.join(PRESETS)}")
    return PRESETS[key]
