"""The names a model file may give a topology model's algorithm and schedule.

They are part of the file format, so they live at the io boundary, where the schema checks
them (:class:`pybench.io.document_schemas.TopologySchema`); the model layer, above it, prices
each of them (``pybench.model.topology_schedules``) and imports them from here.
"""

from __future__ import annotations

#: How an operation moves its data within the fitted link classes.
TOPOLOGY_ALGORITHMS = ("ring", "tree", "nvls")
#: How a world spread over nodes is scheduled: one ring, intra- then inter-node, or Open MPI's choice.
TOPOLOGY_SCHEDULES = ("ring", "hierarchical", "openmpi")
# The bytes a topology model's crossing formulas put through a node's NICs, as its fitted figures assume them:
# 1 priced an all-to-all across nodes as a ring; 2 as every rank sending to every other at once; 3 a sendrecv as
# one step of every rank at once, not a chain of p - 1; 4 may hold an inter-node rate on rails (``rails_ranks``),
# which a reader of version 3 would take for one rate whatever the ranks per node.
TOPOLOGY_CROSSING_VERSION = 4
#: The algorithms a link's fitted regime may price with across nodes: NCCL's ring; ``tree``, the tree's
#: latency with the ring's bytes; ``double-tree``, NCCL's double binary tree, its latency and its bytes.
LINK_ALGORITHMS = ("ring", "tree", "double-tree")
#: A link's regimes at most: LL, LL128 and Simple, plus one algorithm switch (ring to tree).
MAX_LINK_REGIMES = 4
