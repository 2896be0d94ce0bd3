"""Hosts that share one NVLink domain (GB200 NVL72: 18 trays of 4 GPUs): a fit inside one, and layouts priced in
whole domains where the model's node is a domain."""

from __future__ import annotations

import dataclasses
from typing import Any

from pybench.model.crossing import FASTEST_NIC_BPS, ModelLinks, ranks_per_node


def nvlink_domain_ranks(model: ModelLinks) -> int:
    """Ranks of the NVLink domain the "nodes" of a multi-node fit share, or 0 when they do not.

    Hosts of one multi-node NVLink domain (GB200 NVL72: 18 trays of 4 GPUs) list as separate
    hosts, yet talk over NVLink. A fitted inter-node bus bandwidth beyond what every rank of a
    node could push through its own port of the fastest NIC (800 Gbit/s) is not a network:
    such a fit holds inside the domain (at least its largest fitted world), not beyond it.
    """
    layouts = [(w, n) for w, n in model.fitted if n > 1]
    if model.inter is None or not layouts or model.inter.is_preset or model.inter.is_described:
        return 0
    return max(w for w, _ in layouts) if model.inter.busbw_Bps > ranks_per_node(model) * FASTEST_NIC_BPS else 0


PART_DOMAINS = ("partly filled NVLink domains are priced as whole ones: the busiest domain's ranks set the pace, "
                "as a ring through every domain waits on it")


def whole_domains(model: ModelLinks, world: int, hosts: int) -> tuple[int, int]:
    """(ranks, hosts) of whole NVLink domains that price ``world`` ranks on ``hosts`` hosts where the model's node
    is a domain of several hosts (128 ranks on 32 GB200 trays: one full domain of 72 and 56 more, as 144 on 36);
    unchanged where a node is one host or one domain holds them all."""
    per_domain = getattr(model, "hosts_per_node", 1)
    if per_domain == 1 or hosts <= per_domain or world % hosts:
        return world, hosts
    domains = -(-hosts // per_domain)
    return world // hosts * per_domain * domains, per_domain * domains


def as_asked(priced: Any, world: int, hosts: int) -> Any:
    """A prediction on whole domains (:func:`whole_domains`) said of the layout asked, with why."""
    return dataclasses.replace(priced, world=world, nodes=hosts, caveats=(*priced.caveats, PART_DOMAINS),
                               links=f"{priced.links}; {PART_DOMAINS}")
