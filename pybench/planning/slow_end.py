"""The cheapest layout that meets a throughput target even with its communication at the slow end of its 95%
interval: what the plan names beside a pick that meets the target only at its estimate (:mod:`pybench.planning.choice`).

The search (:mod:`pybench.planning.search`) leaves out every combination that cannot beat a priced one at the
estimate; here those left out are priced by rising cost bound until none can be cheaper than one found.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from pybench.planning.choice import COST_TOLERANCE, Need, cheapest, cost_per_sample, good, met_at_slow_comm
from pybench.planning.search import Search
from pybench.planning.step import StepEstimate

__all__ = ["cheapest_met_at_slow_comm"]


def cheapest_met_at_slow_comm(search: Search, need: Need) -> StepEstimate | None:
    """The cheapest layout its bands allow that meets ``need``'s target even with its communication at the slow
    end of its 95% interval (the choice's rules among equals), pricing the combinations left out that could be
    it, by rising cost bound: the search left them out against the estimate, not against that end."""
    if need.target is None:
        return None
    loader = need.loader_samples_per_s

    def sure(r: StepEstimate) -> bool:
        return good(r) and met_at_slow_comm(r, need)

    found = [r for r in search.priced if sure(r)]
    heap = [(c.cost_bound, i, c) for i, c in enumerate(search.left) if c.samples_per_s_bound >= need.target]
    heapq.heapify(heap)
    taken: set[int] = set()
    while heap:
        bound, i, c = heap[0]
        if found and bound > min(cost_per_sample(r, loader) for r in found) * (1 + COST_TOLERANCE):
            break  # nothing left can be cheaper than one found
        heapq.heappop(heap)
        if not c.refined:
            c.refine()
            heapq.heappush(heap, (c.cost_bound, i, c))
            continue
        taken.add(id(c))
        row = search.price(c)
        if row is not None and sure(row):
            found.append(row)
    search.left = [c for c in search.left if id(c) not in taken]
    search.bounds = replace(search.bounds, rows_left_out=len(search.left), rows_priced=len(search.priced))
    return cheapest(found, need) if found else None

