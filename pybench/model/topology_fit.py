"""Fitting the topology model: single-node sweeps give the intra-node link, multi-node sweeps the
inter-node one, each as the regimes (protocol frames) that explain the measured times.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from pybench.errors import UsageError
from pybench.model.anomalies import disturbed_sizes, find_anomalies
from pybench.model.calibration import load_calibration
from pybench.model.crossing import nics_reached, ranks_at_the_nics, ranks_per_node
from pybench.model.determined import OWN_MISS, slow_network_steps
from pybench.model.link_cost import LinkCost
from pybench.model.link_presets import LinkPreset
from pybench.model.logs.measurements import HOSTS_NOTE, listed_hosts, one_reduction
from pybench.model.logs.nccl_tests_world import ROUND_ROBIN
from pybench.model.logs.pybench_json import OVERSUBSCRIBED
from pybench.model.nvlink_domains import nvlink_domain_ranks
from pybench.model.regimes import Regime, envelope, fit_regimes
from pybench.model.system import GPU_BACKENDS, LARGEST_NVLINK_DOMAIN_GPUS, SystemDescription
from pybench.model.topology import Observation, TopologyModel
from pybench.model.topology_schedules import (
    ALGORITHMS,
    algorithm_steps,
    check_schedule,
    crossing_algorithms,
    crossing_terms,
    intra_node_ranks,
)


def _design(collective: str, algorithm: str, obs: Sequence[Observation]) -> np.ndarray:
    rows = []
    for o in obs:
        hops, steps = algorithm_steps(collective, algorithm, o.world)
        rows.append((1.0, hops, o.size_bytes * steps / o.world, o.size_bytes / o.world))
    return np.array(rows, dtype=float)


def _link_from_regime(regime: Regime, label: str, algorithms: Sequence[str]) -> LinkCost:
    theta = regime.theta
    inv_b = theta[2]
    return LinkCost(float(theta[0]), float(theta[1]), float(1.0 / inv_b), float(theta[3] / inv_b), label,
                    algorithm=algorithms[regime.design])


def _link_from_regimes(regimes: Sequence[Regime], label: str, algorithms: Sequence[str]) -> LinkCost:
    """A link from fitted regimes, the bandwidth regime last (:func:`pybench.model.regimes.fit_regimes`)."""
    small = tuple(_link_from_regime(r, label, algorithms) for r in regimes[:-1])
    return dataclasses.replace(_link_from_regime(regimes[-1], label, algorithms), regimes=small)


def nodes_of(ms: object) -> int | None:
    """Node count of an imported sweep: its ``nodes``, the hosts its log listed for every rank, or 1 intra-node."""
    nodes = getattr(ms, "nodes", None)
    if nodes:
        return int(nodes)
    hosts = listed_hosts(getattr(ms, "notes", ()), getattr(ms, "world_size", None))
    if hosts:
        return hosts
    return 1 if getattr(ms, "link_class", None) == "intra-node" else None


# How an all-reduce forced to one algorithm (NCCL_ALGO) crosses the nodes: the ring's steps and bytes, or the
# double binary tree's.
FORCED_CROSSING = {"ring": "ring", "tree": "double-tree"}


def fit_topology(collective: str, observations: Sequence[Observation], *,
                 algorithm: str | None = None, intra_preset: LinkPreset | None = None,
                 inter_preset: LinkPreset | None = None, schedule: str = "ring",
                 system: SystemDescription | None = None, across: str | None = None,
                 shared_nics: bool = False) -> TopologyModel:
    """Fit a :class:`TopologyModel` to sweeps at one or more (world, nodes).

    Single-node observations give the intra-node link; multi-node ones the inter-node link
    (after the intra-node one is known). ``algorithm`` fixes the algorithm; by default the one
    whose fit has the least relative error is taken (ring when the data cannot tell). ``schedule``
    says how the multi-node sweeps crossed nodes (``ring``, ``hierarchical``, or ``openmpi`` for
    what Open MPI 5 runs by ranks, nodes and size): one layout cannot tell them apart, so it is
    the caller's knowledge of the library. ``system``: where its NVLink domain spans hosts (GB200
    NVL72), one domain is one node of the model (the network joins domains, not trays); the model
    still takes layouts in hosts (:attr:`TopologyModel.hosts_per_node`). ``across``: the one algorithm the
    multi-node sweeps crossed by (:data:`FORCED_CROSSING`), where the log forced it. ``shared_nics``: the ranks
    share every NIC of a node (CPU ranks), so no rate on rails is tried. Other systems change nothing
    here (:meth:`TopologyModel.with_system` applies them), but a sweep with more ranks per node than
    its GPUs is refused (one GPU per rank; CPU ranks are fitted without a system).
    """
    check_schedule(schedule)
    crowded = [o for o in observations if system is not None and o.world > o.nodes * system.gpus_per_node]
    if system is not None and crowded:  # one GPU per rank on the described nodes
        o = crowded[0]
        raise UsageError(f"a {collective} sweep ran {o.world} ranks on {o.nodes} node(s), more per node than the "
                         f"{system.gpus_per_node} GPUs of {system.name}: give the system it ran on (--system) or "
                         f"its node count (--nodes counts hosts: {o.world} ranks need "
                         f"{-(-o.world // system.gpus_per_node)} or more)")
    hosts = system.hosts_per_domain() if system is not None and schedule == "ring" else 1
    measured = [o for o in observations if o.time_s > 0 and o.size_bytes > 0 and o.world >= 2]
    obs = [dataclasses.replace(o, nodes=-(-o.nodes // hosts)) for o in measured if not o.off_trend]
    if not obs:
        raise UsageError(f"no {collective} measurements with 2 or more ranks to fit a topology model to")
    single = [o for o in obs if o.nodes == 1]
    multi = [o for o in obs if o.nodes > 1]
    algorithms = [algorithm] if algorithm else (list(ALGORITHMS) if collective == "allreduce" else ["ring"])
    best: tuple[float, str, LinkCost | None] | None = None
    notes: list[str] = []
    for algo in algorithms:
        if not single:
            best = (0.0, algo, LinkCost.from_preset(intra_preset) if intra_preset else None)
            break
        worlds = sorted({o.world for o in single})
        label = f"fitted at {', '.join(map(str, worlds))} ranks"
        solved = _fit_link([_design(collective, algo, single)], single, label)
        if solved is None:
            continue
        link, cost, _ = solved
        if best is None or cost < best[0] * (1 - 1e-6):  # ties keep the earlier (ring first)
            best = (cost, algo, link)
    if best is None:
        worlds = sorted({o.world for o in single})
        if len(worlds) > 1:  # no latency or bandwidth >= 0 joins them: each GPU count got other links
            raise UsageError(f"one cost shape with non-negative parameters cannot join the {collective} sweeps at "
                             f"{', '.join(map(str, worlds))} GPUs in one node: they got different links (an NVLink "
                             f"mesh or PCIe, not a switch), so other GPU counts are not determined by them: "
                             f"measure those counts")
        raise UsageError(f"the {collective} measurements cannot be fitted with non-negative parameters")
    _, algo, intra = best
    if single and len({o.world for o in single}) == 1:
        notes.append("one world size: base and per-step latency cannot be told apart; another world size, where "
                     "the inputs determine it, is predicted between the two readings, with the span in its interval")
    inter, absorbs, rails = _fit_inter(collective, algo, multi, intra, inter_preset, notes, schedule, across,
                                       None if shared_nics else (system,))
    fitted_obs = single + multi
    model = TopologyModel(collective, algo, intra, inter, tuple(sorted({(o.world, o.nodes) for o in fitted_obs})),
                          (int(min(o.size_bytes for o in measured)), int(max(o.size_bytes for o in measured))),
                          tuple(float(o.size_bytes) for o in fitted_obs), (), tuple(notes), schedule=schedule,
                          inter_absorbs_intra=absorbs, rails_ranks=rails)
    domain = nvlink_domain_ranks(model)
    if domain:
        assert model.inter is not None
        notes.append(f"the inter-node bus bandwidth ({model.inter.busbw_Bps / 1e9:.0f} GB/s) is more than "
                     f"{ranks_per_node(model)} ranks per node can move through 800 Gbit/s NICs: these hosts share "
                     + (f"an NVLink domain (multi-node NVLink, e.g. GB200 NVL72); the figures hold inside it "
                        f"({domain} ranks fitted), not across the network beyond it, which this data does not measure"
                        if domain <= LARGEST_NVLINK_DOMAIN_GPUS else
                        f"NVLink domains, and {domain} ranks are more than one holds "
                        f"({LARGEST_NVLINK_DOMAIN_GPUS} GPUs at most): the figures mix NVLink inside domains and "
                        f"the network between them; give --system NAME|FILE (its NVLink domain size) to price "
                        f"other layouts"))
    if rails and system is not None and not shared_nics:  # a rate on rails counts the NICs the description gives
        model = dataclasses.replace(model, system=system if hosts == 1 else system.per_nvlink_domain())
    residuals = [model._time(o.size_bytes, o.world, o.nodes)[0] / o.time_s - 1.0 for o in fitted_obs]
    misses = _layout_misses(fitted_obs, residuals)
    notes += _miss_notes(misses, model.backend)
    slow = slow_network_steps(model, load_calibration())
    if slow:
        notes.append(f"{slow}, so other node counts are not determined by them; their own curves answer at "
                     f"the fitted layouts")
    notes += _implausible(intra, "intra-node")
    if hosts > 1:
        assert system is not None
        notes.append(f"a node here is one NVLink domain of {system.name} ({hosts} hosts, {system.domain_gpus()} GPUs): "
                     f"the network joins domains; layouts are given in hosts and counted in domains")
    spans: dict[tuple[int, int], list[float]] = {}
    for o in measured:  # off-trend sizes too: they were measured there
        spans.setdefault((o.world, -(-o.nodes // hosts)), []).append(o.size_bytes)
    sizes = tuple((w, n, int(min(v)), int(max(v))) for (w, n), v in sorted(spans.items()) if (w, n) in model.fitted)
    return dataclasses.replace(model, residuals=tuple(residuals), notes=tuple(notes), layout_misses=misses,
                               layout_sizes=sizes, hosts_per_node=hosts)


# A per-call latency above this inside one node is no NVLink's or PCIe's: a misfit or an artefact.
NODE_LATENCY_S = 1e-3


def _layout_misses(obs: Sequence[Observation], residuals: Sequence[float]) -> tuple[tuple[int, int, float], ...]:
    """(world, nodes, miss) of each fitted layout: the larger of the median |relative residual| over its sizes
    and over its sizes where the bytes take most of the time (an algorithm bandwidth at least half the
    layout's best). Which links a layout gets shows in its bandwidth; the many sizes where latency rules
    look alike on any fabric and would hide that miss in a median over every size."""
    by_layout: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for o, r in zip(obs, residuals):
        by_layout.setdefault((o.world, o.nodes), []).append((o.size_bytes / o.time_s, abs(r)))
    out = []
    for (w, n), v in sorted(by_layout.items()):
        best = max(algbw for algbw, _ in v)
        out.append((w, n, float(max(np.median([m for _, m in v]),
                                    np.median([m for algbw, m in v if algbw >= best / 2.0])))))
    return tuple(out)


_UNDETERMINED = "other GPU counts in one node are not determined by them"


def _miss_notes(misses: Sequence[tuple[int, int, float]], backend: str | None) -> list[str]:
    """One note per fitted layout whose own sweep the model misses by more than OWN_MISS (median)."""
    counts = len({w for w, n, _ in misses if n == 1})
    nodes = len({n for _, n, _ in misses if n > 1})

    def what(n: int) -> str:
        if n == 1:
            return _UNDETERMINED if counts > 1 else "other layouts are uncertain"
        return "other node counts are not determined by them"

    def why(n: int) -> str:
        if n > 1 and nodes == 1:
            return "an algorithm switch at a size that is not to the faster one, as an MPI library's fixed " \
                   "thresholds make, or a network shared or tapered?"
        if n > 1:
            return "an algorithm switch between node counts, or a network shared or tapered?"
        return "caches, memory channels or sockets?" if backend == "mpi" else "an NVLink mesh or PCIe?"

    return [f"the topology model misses its own {w}-rank{'' if n == 1 else f' {n}-node'} sweep by "
            f"{100 * m:.0f}% (median): these layouts do not follow one algorithm on one fabric "
            f"({why(n)}), so {what(n)}; that sweep's own curve answers at its layout"
            for w, n, m in misses if m > OWN_MISS]


def _implausible(link: LinkCost | None, name: str) -> list[str]:
    """Notes on fitted regimes no real link has: a per-call latency of milliseconds inside one node."""
    if link is None:
        return []
    return [f"the {name} regime {k} of {len(link.all_regimes())} has a per-call latency of {r.base_s * 1e3:.1f} ms, "
            f"which no NVLink or PCIe link has: a misfit of too few sizes, or a step of the sweep; treat its "
            f"predictions at other GPU counts as uncertain"
            for k, r in enumerate(link.all_regimes(), 1) if r.base_s > NODE_LATENCY_S]


def _fit_link(designs: Sequence[np.ndarray], obs: Sequence[Observation], label: str,
              algorithms: Sequence[str] = ("ring",)) -> tuple[LinkCost, float, np.ndarray] | None:
    """One link class's regimes fitted to ``obs``, one design per candidate algorithm: (link, relative
    RSS, relative residuals) or None."""
    y = np.array([o.time_s for o in obs])
    regimes = fit_regimes(designs, y, np.array([o.size_bytes for o in obs]))
    if regimes is None:
        return None
    time, _ = envelope(designs, regimes)
    return _link_from_regimes(regimes, label, algorithms), float(np.sum((time / y - 1.0) ** 2)), time / y - 1.0


def _fit_inter(collective: str, algorithm: str, multi: Sequence[Observation], intra: LinkCost | None,
               preset: LinkPreset | None, notes: list[str], schedule: str = "ring",
               across: str | None = None, rails_on: tuple[SystemDescription | None] | None = (None,)
               ) -> tuple[LinkCost | None, bool, int]:
    """The inter-node link, whether it absorbed the leader schedules' intra-node phase, and the ranks per node its
    rate was fitted at on rails (0 for one rate through the node's NICs).

    With an intra-node link, that phase (:func:`pybench.model.topology_schedules.intra_node_ranks`)
    is priced with it and taken off the multi-node times first, so the inter-node link is the
    NICs' alone and the phase scales with the ranks per node of the layout asked for.
    Sweeps at several ranks-per-node counts of NCCL's ring schedule are also fitted with a rate that grows with
    the NICs their ranks reach (each GPU its own, as rail-optimised nodes run; ``rails_on``: the node's description,
    which counts them, or (None,) for one per rank; None: the ranks share every NIC, CPU ranks). It is kept only where
    one rate misses a fitted layout by more than a fit can (:data:`OWN_MISS`) and the rails miss less: one rate is the
    simpler answer, and two counts that a rate on rails fits a little better say little about a third.
    """
    if not multi:
        return (LinkCost.from_preset(preset) if preset else None), False, 0
    inside = np.array([intra.time_s(collective, algorithm, o.size_bytes, g)
                       if intra is not None and (g := intra_node_ranks(schedule, collective, o.world, o.nodes)) else 0.0
                       for o in multi])
    times = np.array([o.time_s for o in multi])
    absorbs = any(intra_node_ranks(schedule, collective, o.world, o.nodes) for o in multi) and intra is None
    if absorbs:
        notes.append(f"no single-node sweep: the {schedule} schedule's phase inside each node is part of the "
                     f"inter-node figures, so other ranks-per-node counts are priced as the fitted one")
    if np.any(inside >= 0.95 * times):
        notes.append("the intra-node link accounts for the whole of some multi-node times: the intra-node phase is "
                     "left inside the inter-node figures, not priced apart")
        inside[:] = 0.0
        absorbs = True
    between = [dataclasses.replace(o, time_s=float(t)) for o, t in zip(multi, times - inside)]
    algorithms = (across,) if across else crossing_algorithms(schedule, collective)
    per_node = {ranks_at_the_nics(collective, o.world, o.nodes) for o in between}
    system = rails_on[0] if rails_on is not None else None
    most = max(per_node) if rails_on is not None and schedule == "ring" and len(per_node) > 1 else 0
    if most and len({nics_reached(system, q) for q in per_node}) == 1:
        most = 0  # (one NIC for the node: the ranks reach the same NICs at every count)
    best: tuple[LinkCost, float, int] | None = None
    best_residuals = np.zeros(len(between))
    for rails in (0, most) if most else (0,):
        designs = []
        for algorithm in algorithms:
            rows = []
            for o in between:
                hops, data, fill, _ = crossing_terms(schedule, collective, o.size_bytes, o.world, o.nodes, algorithm)
                # no pipeline fill across nodes: over a few node counts it is free to bend the bandwidth
                # (a fill larger than the bytes it precedes at the smallest count), which no ring has
                reached = nics_reached(system, ranks_at_the_nics(collective, o.world, o.nodes))
                share = reached / nics_reached(system, rails) if rails else 1.0
                rows.append((1.0, hops, o.size_bytes * data / share, 0.0))
            designs.append(np.array(rows, dtype=float))
        solved = _fit_link(designs, between, _fitted_label(sorted({(o.world, o.nodes) for o in multi})), algorithms)
        if solved is None:
            continue
        one_rate_holds = bool(rails) and max(m for *_, m in _layout_misses(between, list(best_residuals))) <= OWN_MISS
        if best is None or (solved[1] < best[1] * (1 - 1e-6) and not one_rate_holds):
            best, best_residuals = (solved[0], solved[1], rails), solved[2]
    if best is None:
        raise UsageError(f"the multi-node {collective} measurements cannot be fitted with non-negative parameters")
    link, _, rails = best
    if rails:
        notes.append(f"the inter-node rate grows with the NICs the ranks of a node reach (each GPU its own: rails), "
                     f"as {', '.join(map(str, sorted(per_node)))} ranks per node ran (one rate missed them by more "
                     f"than {100 * OWN_MISS:.0f}%): counts between get their share of the {rails} ranks' rate; fewer "
                     f"and more lie between that share and the nearest fitted count's rate")
    if intra is not None and link.busbw_Bps > intra.busbw_Bps:
        notes.append("the multi-node sweep is faster per rank than the intra-node link: the inter-node figures "
                     "may include in-network reduction (NVLS/SHARP), or the node's own path is the slower one "
                     "(CPU ranks' shared memory)")
    return link, bool(absorbs), rails


def _fitted_label(layouts: Sequence[tuple[int, int]]) -> str:
    """What an inter-node link was fitted at, short enough for any number of layouts (a model file's text
    fields are bounded)."""
    if len(layouts) <= 12:
        return "fitted at " + ", ".join(f"{w} ranks on {n} nodes" for w, n in layouts)
    return (f"fitted at {len(layouts)} layouts, {min(w for w, _ in layouts)} to {max(w for w, _ in layouts)} ranks "
            f"on {min(n for _, n in layouts)} to {max(n for _, n in layouts)} nodes")


def observations_from(sets: Sequence, nodes_fn: Callable[[object], int | None] | None = None) -> list[Observation]:
    """Observations from imported measurement sets (``pybench.model.logs``): sizes, medians, world, nodes.

    ``nodes_fn(set)`` gives a set's node count; by default :func:`nodes_of`. A set whose node
    count is unknown is refused in one line (say how many nodes it ran on).
    """
    out = []
    for ms in sets:
        if not ms.world_size:
            raise UsageError(f"{ms.path or ms.collective}: no recorded world size; the topology model needs it")
        nodes = nodes_fn(ms) if nodes_fn else nodes_of(ms)
        if nodes is None:
            raise UsageError(f"{ms.path or ms.collective}: the node count is unknown (the log lists the hosts of "
                             f"only some ranks); the topology model needs it")
        out += [Observation(float(s), int(ms.world_size), int(nodes), float(t))
                for s, t in zip(ms.size_bytes, ms.time_s) if t > 0]
    return out


def undisturbed_observations(ms, nodes_fn: Callable[[object], int | None] | None = None) -> list[Observation]:
    """A sweep's observations (:func:`observations_from`) but at the sizes whose replicates disagree (a disturbed
    run, which the curve's note names). Where every size's do, the blocks differ throughout, and none is left out."""
    disturbed = {s for s, _ in disturbed_sizes(*ms.fit_points())}
    if len(set(int(x) for x in ms.size_bytes) - disturbed) < 2:
        disturbed = set()
    # A spike is fitted around, as in the sweep's own curve: a size slower than its neighbours' trend and than a
    # larger size. A lower envelope of regimes cannot bend up at one size and come back down, so such a point only
    # drags the regimes around it. The first size of a slower plateau (a protocol step NCCL's tuner chose: the
    # larger sizes stay up) and a faster size (a regime of its own) stay.
    size, time = ms.fit_points()
    off = ({int(a.size_bytes) for a in find_anomalies(size, time) if a.ratio > 1 and _comes_back(a, size, time)}
           if np.unique(size).size >= 3 else set())
    return [dataclasses.replace(o, off_trend=int(o.size_bytes) in off)
            for o in observations_from([ms], nodes_fn) if int(o.size_bytes) not in disturbed]


def _comes_back(anomaly, size: np.ndarray, time: np.ndarray) -> bool:
    """Whether a larger size ran faster than ``anomaly``'s by more than half its ratio off the trend (in log): the
    sweep came back down, so the size was a spike, not the first of a slower plateau (a dip within noise is not)."""
    larger = [float(np.median(time[size == s])) for s in np.unique(size[size > anomaly.size_bytes])]
    return bool(larger) and min(larger) < anomaly.time_s / math.sqrt(anomaly.ratio)


def topology_dtype(sets: Sequence, ms) -> str:
    """The element type a (collective, backend) topology model is fitted on: float32 when any sweep
    of it has that type, else the first sweep's (types are not pooled: bytes per element differ).
    ``sets``: the sweeps (or the fitted curves of a model file, which carry the same fields)."""
    types = [s.dtype for s in sets if (s.collective, s.backend) == (ms.collective, ms.backend)]
    return "float32" if "float32" in types else ms.dtype


def _ran_on_open_mpi(ms) -> bool:
    """Whether a sweep says it was measured over Open MPI (pybench results record the MPI library)."""
    return ms.backend == "mpi" and any(n.startswith("MPI library: Open MPI") for n in ms.notes)


def fit_topology_models(sets: Sequence, system: SystemDescription | None = None
                        ) -> tuple[list[TopologyModel], list[str]]:
    """One topology model per (collective, backend) over every usable sweep; and why sweeps were left out.

    An all-reduce measured over Open MPI (the MPI library a pybench result records) is fitted with
    the ``openmpi`` schedule, which prices what Open MPI runs across nodes; everything else with
    ``ring``.

    A sweep is used when it has 2 or more ranks, 3 or more distinct sizes, a collective the
    model knows and a known node count (:func:`nodes_of`).
    """
    groups: dict[tuple[str, str], list[Observation]] = {}
    open_mpi: set[tuple[str, str]] = set()
    forced: dict[tuple[str, str], set[str]] = {}  # NCCL_ALGO each group's sweeps were run with ("" where none)
    dtype_of: dict[tuple[str, str], str] = {}  # one element type per model: float32 where measured
    skipped: list[str] = []
    for ms in one_reduction(sets):
        where = f"{ms.path or 'input'}: {ms.collective}"
        try:
            algorithm_steps(ms.collective, "ring", 2)
        except UsageError:
            skipped.append(f"{where}: no cost formula prices it at other layouts")
            continue
        if not ms.world_size:
            skipped.append(f"{where}: rank count unknown; not in the topology model: give fit --world N (the ranks "
                           f"it ran on)")
            continue
        if ms.world_size < 2 or len(set(ms.size_bytes.tolist())) < 3:
            skipped.append(f"{where}: needs 2 or more ranks and 3 or more sizes for the topology model")
            continue
        if nodes_of(ms) is None:
            some = any(HOSTS_NOTE.search(n) for n in ms.notes)
            why = "hosts of only some ranks listed" if some else "no hosts listed"
            skipped.append(f"{where}: node count unknown ({why}); not in the topology model: "
                           f"give fit --nodes N (the nodes it ran on)")
            continue
        crowded = next((n for n in ms.notes if n.startswith(OVERSUBSCRIBED)), "")
        if crowded:  # its times hold the turns ranks took on the cores: no link's cost
            skipped.append(f"{where}: not in the topology model: {crowded}")
            continue
        cyclic = next((n for n in ms.notes if n.startswith(ROUND_ROBIN)), "")
        if cyclic and ms.collective == "sendrecv":  # every rank's flow crossed: the model prices one per node
            skipped.append(f"{where}: not in the topology model: {cyclic}, so more send/recv flows crossed the "
                           f"network than the one per node the model takes (ranks filled host by host, as mpirun's "
                           f"default places them); rerun without --map-by node")
            continue
        chosen = dtype_of.setdefault((ms.collective, ms.backend), topology_dtype(sets, ms))
        if ms.dtype != chosen:
            skipped.append(f"{where}: {ms.dtype}; the topology model of {ms.collective} uses the {chosen} sweeps")
            continue
        nodes = nodes_of(ms)
        if system is not None and ms.backend in GPU_BACKENDS and nodes and ms.world_size > nodes * system.gpus_per_node:
            raise UsageError(f"{where}: {ms.world_size} ranks on {nodes} node(s), more per node than the "
                             f"{system.gpus_per_node} GPUs of {system.name}: give the system it ran on (--system) "
                             f"or its node count (--nodes counts hosts: {ms.world_size} ranks need "
                             f"{-(-ms.world_size // system.gpus_per_node)} or more)")
        groups.setdefault((ms.collective, ms.backend), []).extend(undisturbed_observations(ms))
        forced.setdefault((ms.collective, ms.backend), set()).add(ms.nccl_algo)
        if _ran_on_open_mpi(ms):
            open_mpi.add((ms.collective, ms.backend))
    models = []
    for (collective, backend), obs in sorted(groups.items()):
        # Open MPI's all-reduce across nodes is HAN or coll/tuned's pick, not one ring over every rank.
        schedule = "openmpi" if collective == "allreduce" and (collective, backend) in open_mpi else "ring"
        # every sweep forced one algorithm: it crossed the nodes by that one, at any node count
        algorithm = next(iter(forced[collective, backend])) if collective == "allreduce" and schedule == "ring" \
            and len(forced[collective, backend]) == 1 else ""
        try:
            on = system if backend in GPU_BACKENDS else None  # CPU ranks are not the described GPUs
            models.append(dataclasses.replace(fit_topology(collective, obs, schedule=schedule, system=on,
                                                           algorithm=algorithm or None,
                                                           across=FORCED_CROSSING.get(algorithm),
                                                           shared_nics=backend not in GPU_BACKENDS), backend=backend))
        except UsageError as exc:
            skipped.append(f"{collective}: {exc}")
    return models, skipped
