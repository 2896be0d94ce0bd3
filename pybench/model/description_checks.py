"""Where fitted links contradict the system description they are used with.

A description prices what was never measured; what was measured is kept as fitted. When the two
disagree beyond what any schedule explains, the answer still rests on the measurement, and the
fit's notes say which input looks wrong (the description, or the node the data came from).
"""

from __future__ import annotations

from pybench.model.link_cost import LinkCost
from pybench.model.system import SystemDescription

# NCCL's double binary tree sends S through a node's NICs on two nodes while the all-reduce's bus
# bandwidth counts 2(p-1)/p S: up to twice the NICs' rate. A ring's bus bandwidth is what the NICs carry.
_BUSBW_PER_NIC_RATE = {"allreduce": 2.0}
# Real single-node logs reach 0.6-0.95 of the fabric's per-GPU rate (generated docs hold the figures);
# under half of it, the node measured is most likely not the one described.
_SLOWEST_SHARE = 0.5
_TOLERANCE = 1.05


def fabric_mismatches(collective: str, backend: str, intra: LinkCost | None, inter: LinkCost | None,
                      system: SystemDescription) -> list[str]:
    """One note per fitted regime the description cannot have carried, or the node measured is not."""
    notes: list[str] = []
    if intra is not None and not intra.is_described and not intra.is_preset and backend != "mpi":
        regimes = intra.all_regimes()
        rate = system.intra_Bps_per_gpu
        notes += [f"the intra-node regime {k} of {len(regimes)} runs at {r.busbw_Bps / 1e9:.0f} GB/s bus bandwidth, "
                  f"above the {system.intra_GBps_per_gpu:g} GB/s per GPU that {system.name}'s {system.intra_fabric} "
                  f"carries: in-network reduction (NVLS), or a fit that does not describe this fabric"
                  for k, r in enumerate(regimes, 1) if r.busbw_Bps > _TOLERANCE * rate]
        fastest = max(r.busbw_Bps for r in regimes)
        if fastest < _SLOWEST_SHARE * rate:
            notes.append(f"the measured node's fastest intra-node regime runs at {fastest / 1e9:.0f} GB/s bus "
                         f"bandwidth, under half the {system.intra_GBps_per_gpu:g} GB/s per GPU of {system.name}'s "
                         f"{system.intra_fabric}: the node measured is likely not {system.name}'s, and its figures "
                         f"are kept inside a node")
    if inter is not None and not inter.is_described and not inter.is_preset:
        bound = _BUSBW_PER_NIC_RATE.get(collective, 1.0) * system.nic_Bps_per_node
        fastest = max(r.busbw_Bps for r in inter.all_regimes())
        if fastest > _TOLERANCE * bound:
            notes.append(f"the fitted inter-node link runs at {fastest / 1e9:.0f} GB/s bus bandwidth, more than "
                         f"{system.name}'s {system.nics_per_node} x {system.nic_Gbps:g} Gb/s NICs per node carry "
                         f"({bound / 1e9:.0f} GB/s at their full rate): in-network reduction (SHARP), a multi-node "
                         f"NVLink domain, or a description that does not match the measured cluster")
    return notes
