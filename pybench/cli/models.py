"""The ``fit`` and ``predict`` subcommands (registered by pybench.cli.main via add_parsers).

``python -m pybench fit INPUT... -o MODEL.json [--force]``
    Import pybench results, nccl-tests logs or OSU logs, fit one piecewise alpha-beta
    model per collective / backend / link class / world size, print the reports, save
    them all in one model file.

``python -m pybench predict MODEL.json --sizes 1M:1G [--world N] [--json FILE]``
    Table of predicted time (us), algbw and busbw (GB/s) with the confidence band, for
    every model in the file that matches the filters.

Errors are PyBenchError subclasses; the CLI prints them on one line and exits 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from pybench.cli.argtypes import number, output_file
from pybench.cli.fit_inputs import load_named, one_per_input, per_input, ranks, refuse_repeated, with_nodes
from pybench.cli.prediction_table import format_prediction_table, prediction_records, topology_records
from pybench.collectives import DTYPES, MODELLED, measure_command, refuse_partial_elements
from pybench.errors import PyBenchError, UsageError
from pybench.io.files import refuse_existing, write_json
from pybench.io.formats import PREDICTION, stamp
from pybench.sizes import parse_sizes

_min_points = number(int, 2, strict=False, maximum=1000)


def _system(name: str | None):
    """The system description ``--system`` names (None without one)."""
    if name is None:
        return None
    from pybench.model.system import load_system

    return load_system(name)




def add_parsers(subparsers) -> None:
    """Register ``fit`` and ``predict`` on an argparse subparsers object.

    Each subparser sets ``func`` (callable(args) -> int exit status) via set_defaults.
    """
    p = subparsers.add_parser(
        "fit", help="fit piecewise alpha-beta models to measurements",
        description="Fit T(size) = alpha + size/B piecewise (regimes found from the data) to "
                    "pybench result JSON, nccl-tests logs (text or -J JSON) or OSU logs.",
        epilog="examples:\n  pybench fit tests/fixtures/shared_data/nccl-tests/"
               "h100_p5_2node_16gpu_efa_allreduce_srunprefix.txt --nodes 2 -o h100.json   "
               "# a published nccl-tests log, which lists no hosts",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="result or log files")
    p.add_argument("-o", "--output", required=True, metavar="MODEL.json", help="model file to write")
    p.add_argument("--force", action="store_true", help="replace MODEL.json if it exists")
    p.add_argument("--collective", default=None,
                   help="collective, for logs that do not name it (e.g. allreduce); on a log of several named "
                        "tests, only that one's tables")
    p.add_argument("--world", type=per_input(ranks), default=None, metavar="N[,N...]",
                   help="rank count, for logs that do not show it (OSU's): one for every input, or one per input "
                        "in their order")
    p.add_argument("--nodes", type=per_input(ranks), default=None, metavar="N[,N...]",
                   help="nodes the ranks ran on, for logs that do not list their hosts (the topology model "
                        "needs it): one for every input, or one per input in their order (--nodes 2,4 for "
                        "the logs of a 2-node and a 4-node run)")
    p.add_argument("--system", default=None, metavar="NAME|FILE",
                   help="the hardware the logs ran on: a named system (dgx-h100, aws-p5, gb200-nvl72, ...; "
                        "`pybench system` lists them) or a description file; recorded in the model, "
                        "it prices the link classes the logs did not measure and bounds the layouts; where its "
                        "NVLink domain spans hosts (gb200-nvl72), a domain is one node of the fit (default: the "
                        "GPU system pybench results recorded, when every input is one from the same machine)")
    p.add_argument("--min-points", type=_min_points, default=None, metavar="K",
                   help="fewest sizes in one piece (default 4)")
    p.add_argument("--criterion", choices=("bic", "aicc"), default="bic",
                   help="information criterion choosing the number of pieces (default bic)")
    p.set_defaults(func=run_fit)

    q = subparsers.add_parser(
        "predict", help="predict collective times from a model file",
        description="Predict time, algbw and busbw with a 95% interval (by default where one new run lands) "
                    "from a model file, and what each figure rests on.",
        epilog="examples:\n  pybench predict h100.json --sizes 1M:1G --world 64 --nodes 8 --system aws-p5   "
               "# 8 nodes of 8 GPUs",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("model", metavar="MODEL.json")
    q.add_argument("--sizes", required=True,
                   help="sizes: 1M:1G, 1K:1G:4, 1M:1G:+1M (steps of 1 MiB) or 8,1K,1M (K/M/G = 2^10/20/30)")
    q.add_argument("--world", type=ranks, default=None, metavar="N",
                   help="rank count to predict for (default: the fitted one; others extrapolate "
                        "through the model's algorithm formula)")
    q.add_argument("--nodes", type=ranks, default=None, metavar="N",
                   help="nodes the --world ranks are spread over (default: 1 for a one-node fit, else the "
                        "fitted sweeps' ranks per node, as load_model(...).predict does); predicted with the "
                        "file's topology model")
    q.add_argument("--link", action="append", default=[], metavar="PRESET",
                   help="a published link rate for a link class the file does not hold: nvlink3/4/5, nvswitch, "
                        "pcie4/5, ib-hdr/ndr/xdr, eth-25g/100g/200g/400g (repeatable; labelled preset; one port "
                        "per node: --system counts every NIC)")
    q.add_argument("--system", default=None, metavar="NAME|FILE",
                   help="the hardware to predict for: a named system (dgx-h100, aws-p5, gb200-nvl72, ...) or a "
                        "description file; it prices the link classes the file did not measure (every NIC of a "
                        "node counts) and says which layouts no measurement determines")
    q.add_argument("--collective", default=None, help="only models of this collective")
    q.add_argument("--link-class", default=None, choices=("intra-node", "inter-node"),
                   help="only models of this link class")
    q.add_argument("--dtype", default=None, metavar="TYPE",
                   help="only models of this element type (float32, float16, ...: a file fitted from a "
                        "nccl-tests -d all log holds one model per type)")
    q.add_argument("--band", choices=("confidence", "prediction"), default=None,
                   help="prediction: where one new run should land, the interval that is validated (default); "
                        "confidence: the 95%% band of the mean time at the fitted layout (narrower)")
    q.add_argument("--json", default=None, metavar="FILE", type=output_file, help="also write the predictions as JSON")
    q.add_argument("--force", action="store_true", help="replace --json FILE if it exists")
    q.set_defaults(func=run_predict)


def run_fit(args) -> int:
    """Body of ``pybench fit``; returns the exit status."""
    from pybench.model.build import fit_model_file
    from pybench.model.model_writer import save_models

    out = Path(args.output)
    # Check before the (possibly slow) fitting so a typo does not waste the user's time.
    refuse_existing(out, args.force, args.inputs)
    if args.collective is not None and args.collective not in MODELLED:
        raise UsageError(f"--collective {args.collective}: pybench fits {', '.join(MODELLED)}; give one of them")
    refuse_repeated(args.inputs)
    worlds = one_per_input(args.world, args.inputs, "--world")
    nodes = one_per_input(args.nodes, args.inputs, "--nodes")
    system = _system(args.system)
    sets: list = []
    for path, world, n in zip(args.inputs, worlds, nodes):
        these = load_named(path, args.collective, world)
        sets.extend(these if n is None else [with_nodes(m, n) for m in these])
    # A test pybench does not model (osu_mbw_mr beside osu_allreduce in one job's log) is skipped, said on
    # stderr; only a log of nothing else is refused.
    unmodelled = [m for m in sets if m.collective not in MODELLED]
    sets = [m for m in sets if m.collective in MODELLED]
    unfitted = Counter(f"{m.path}: pybench has no model for {m.collective!r} (it fits {', '.join(MODELLED)})"
                       for m in unmodelled)  # a job log repeats its tests run after run: each said once
    for why, count in unfitted.items():
        if not sets:
            raise UsageError(f"{why}: nothing here to fit (give --collective only where the log mislabels its test)")
        print(f"warning: {why}; " + (f"its {count} tables skipped" if count > 1 else "that table skipped"),
              file=sys.stderr)
    for m in sets:
        if m.world_size is None:
            raise UsageError(f"{m.path}: the log does not say how many ranks ran its {m.collective} (no launcher "
                             f"line, Rank lines or exact bandwidth ratio); give --world N (one per input)")
    # Two points fit a line exactly and leave nothing to say how far off it is: no interval.
    usable = [m for m in sets if len(set(m.size_bytes.tolist())) >= 2 and len(m.fit_points()[0]) >= 3]
    short: dict[str, int] = {}  # one line per kind of skipped table, with how many (a -d all -o all log has dozens)
    for m in sets:
        if m not in usable:
            how = "-m 1:8G" if m.source == "osu" else "--sizes 8:8G" if m.source == "pybench" else "-b 8 -e 8G"
            rows = "".join(f"; {n}" for n in m.notes if n.startswith("line "))  # its rows left out, if any
            line = (f"warning: {m.path}: {m.label}{f' {m.dtype}' if rows else ''} has {_sizes_said(m)}; skipped (a "
                    f"model needs at least 2 sizes and 3 measured times; sweep more, e.g. {how}){rows}")
            short[line] = short.get(line, 0) + 1
    for line, n in short.items():
        print(line + (f" ({n} tables alike)" if n > 1 else ""), file=sys.stderr)
    if not usable:
        raise UsageError("no input has enough sizes to fit a model (need at least 2 distinct sizes and 3 "
                         "measured times)")
    kwargs: dict[str, str | int] = {"criterion": args.criterion}
    if args.min_points is not None:
        most = max(len(set(m.size_bytes.tolist())) for m in usable)
        if args.min_points > most:
            raise UsageError(f"--min-points {args.min_points} is more than the {most} sizes of the largest input; "
                             f"give at most {most}")
        kwargs["min_points"] = args.min_points
    if system is None:
        system = _system_recorded_by(usable)
    if system is not None and system.hosts_per_domain() > 1:
        usable = [_inside_one_domain(m, system) for m in usable]
    models, topology, skipped = fit_model_file(usable, system=system, **kwargs)
    for k, model in enumerate(models):
        if k:
            print()
        print(model.report())
        for anomaly in model.anomalies:
            # One line each on stderr: what people look for in a sweep, never silently absorbed.
            where = ", ".join(model.sources) or model.collective
            print(f"pybench: fit: {where}: {model.collective} x{model.world_size or '?'}: {anomaly.describe()}; "
                  f"left out of the fit", file=sys.stderr)
    for line, count in Counter(skipped).items():  # a job log of 57 tables says each reason once
        print(f"pybench: fit: {line}" + (f" ({count} tables)" if count > 1 else ""), file=sys.stderr)
    for tm in topology:
        print(f"\n{describe_topology(tm)}")
    if args.system and not topology:  # a description lives in the topology model: none, nothing records it
        print(f"pybench: fit: --system {args.system} not used: no topology model was fitted (the lines above say "
              f"why), and only a topology model records a description", file=sys.stderr)
    save_models(models, out, overwrite=args.force, topology=topology)
    print(f"\nsaved {len(models)} model(s) and {len(topology)} topology model(s) to {out}")
    return 0


def _system_recorded_by(sets):
    """The machine every input recorded (``environment.system`` of pybench results), when all inputs
    are pybench results that recorded one describable GPU system; None otherwise, with one stderr
    line when they recorded systems that differ (a mix of machines prices with none of them)."""
    from pybench.io.files import read_json
    from pybench.model.system_detect import recorded_system

    paths = sorted({m.path for m in sets})
    if not paths or any(m.source != "pybench" or not m.path for m in sets):
        return None
    found = {}
    for path in paths:
        try:  # pybench's own stdout is a pybench source too, but records no machine
            described = recorded_system(read_json(path), path)
        except PyBenchError:  # that, or a CPU-only host: nothing the model could price with
            return None
        if described is None:
            return None
        found[path] = described
    figures = {p: d.model_dump(exclude={"name", "description", "source"}) for p, d in found.items()}
    first = paths[0]
    if any(f != figures[first] for f in figures.values()):
        differ = "; ".join(found[p].summary() for p in paths)
        print(f"pybench: fit: the inputs were measured on systems that differ ({differ}); none is used: give "
              f"--system NAME|FILE", file=sys.stderr)
        return None
    print(f"pybench: fit: pricing with the system recorded in {first}: {found[first].summary()} "
          f"(give --system NAME|FILE for another)", file=sys.stderr)
    return found[first]


def _inside_one_domain(ms, system):
    """``ms`` labelled intra-node where all its hosts fit in one NVLink domain of ``system`` (a GB200 NVL72 rack's
    trays), as its topology model counts them: its ranks talked over NVLink, not the network."""
    from pybench.model.topology_fit import nodes_of

    hosts, per_domain = nodes_of(ms), system.hosts_per_domain()
    if ms.link_class != "inter-node" or hosts is None or hosts > per_domain \
            or (ms.world_size or 0) > system.gpus_per_node * per_domain:
        return ms
    return dataclasses.replace(ms, link_class="intra-node", notes=(
        *ms.notes, f"intra-node: its {hosts} hosts fit in one NVLink domain of {system.name} ({per_domain} hosts), "
                   f"whose ranks talk over NVLink"))



def describe_topology(tm) -> str:
    """Two lines about a fitted topology model, for ``fit``'s report."""
    alone = all(n == 1 for _, n in tm.fitted)  # one node: "2, 4, 8 ranks"; else each layout whole
    fitted = ", ".join(f"{w}" if alone else f"{w} ranks on {'one node' if n == 1 else f'{n} nodes'}"
                       for w, n in tm.fitted)
    unit = " ranks" if alone else ""
    how = f"algorithm {tm.algorithm}"
    across = [(w, n) for w, n in tm.fitted if n > 1]
    if across and not tm.inside_nvlink_domain(max(across, key=lambda x: x[1])[0]):
        # what crossed the nodes, as predict's header says it (the fitted layouts are in the model's nodes)
        from pybench.cli.prediction_table import schedule_label
        from pybench.model.crossing import tree_or_ring_fitted
        w, n = max(across, key=lambda x: x[1])
        schedule = schedule_label(tm.backend, tm.predict(tm.size_range[1], w, n, nodes_are_hosts=False).schedule)
        if tree_or_ring_fitted(tm) is not None:  # one node count: the tree's bytes and the ring's fit it alike
            schedule = f"{schedule} or ring (one node count cannot tell)"
        how += f"; across nodes {schedule}"
    lines = [f"topology model: {tm.collective} / {tm.backend} / {how}, fitted at {fitted}{unit}"]
    for name, link in (("intra-node", tm.intra), ("inter-node", tm.inter)):
        if link is None:
            continue
        regimes = link.all_regimes()
        spans = _regime_spans(tm, name) if link.regimes else {}
        for k, r in enumerate(regimes, 1):
            bandwidth = " (bandwidth)" if k == len(regimes) else ""
            which = f" regime {k} of {len(regimes)}{bandwidth}" if link.regimes else ""
            per_node = f", per node boundary {r.node_step_s * 1e6:.2f} us" if r.node_step_s else ""
            lines.append(f"  {name}{which}: base {r.base_s * 1e6:.2f} us, per step {r.step_s * 1e6:.3f} us{per_node}, "
                         f"bus bandwidth {r.busbw_Bps / 1e9:.2f} GB/s, pipeline steps c {r.extra_steps:.3f}"
                         f"{spans.get(f'{k} of {len(regimes)}', '')}")
    lines += [f"  note: {n}" for n in tm.notes]
    single = {w for w, n in tm.fitted if n == 1}
    # one fitted GPU count: whether another count in the node is determined (asked at 2 GPUs, or 4), where the node
    # holds another count (a described node of 2 GPUs holds no other count of 2 or more)
    other = 4 if 2 in single else 2
    holds = tm.system is None or other <= tm.system.gpus_per_node * tm.hosts_per_node
    if len(single) == 1 and holds and (why := tm.why_undetermined(other, 1)):
        lines.append(f"  note: other GPU counts in one node: {why}")
    return "\n".join(lines)


def _regime_spans(tm, link_class: str) -> dict[str, str]:
    """``regime -> ", fastest from A to B at W ranks"``: where each regime wins at the first fitted
    layout of that link class, so the protocol switches show in ``fit``'s report."""
    layouts = [(w, n) for w, n in tm.fitted if (n > 1) == (link_class == "inter-node")]
    if not layouts:
        return {}
    world, nodes = layouts[0]
    lo, hi = tm.size_range
    sizes = sorted({int(round(x)) for x in np.geomspace(max(lo, 1), max(hi, lo, 1), 241)})
    won: dict[str, list[int]] = {}
    for size in sizes:
        # ``fitted`` counts the model's own nodes (NVLink domains where a node is one), not hosts
        won.setdefault(tm.predict(size, world, nodes, nodes_are_hosts=False).regime, []).append(size)
    where = f"{world} ranks" + (f" on {nodes} nodes" if nodes > 1 else "")
    return {k: f", fastest from {_about(v[0])} to {_about(v[-1])} at {where}" for k, v in won.items() if k}


def _about(size: int) -> str:
    """A size on a grid (not a power of two), to 3 figures: 5793 -> '5.66 KiB'."""
    value, unit = float(size), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{value:.3g} {unit}"


def _topology_for(args, models) -> list:
    """The topology models that answer for ``--world``/``--nodes`` (with ``--link`` and ``--system``), or []
    when the fitted sweeps answer (the layout asked for is a measured one)."""
    from pybench.model.description_checks import both_links_measured, fabric_mismatches
    from pybench.model.link_presets import get_preset
    from pybench.model.system import GPU_BACKENDS

    presets = [get_preset(name) for name in args.link]
    system = _system(args.system)
    if args.nodes is not None and args.nodes < 1:
        raise UsageError(f"--nodes {args.nodes} must be a positive number of nodes")
    if args.world is None:
        if args.nodes is not None or presets or system:
            ranks = ", ".join(f"{w} ranks" for w in sorted({m.world_size or 0 for m in models}))
            raise UsageError(f"--nodes, --link and --system need --world (the rank count to predict for): they price "
                             f"layouts no sweep measured; the measured ones ({ranks}) answer without them")
        return []
    if args.world < 2 and not any(m.world_size == args.world for m in models):
        raise UsageError(f"--world {args.world}: a collective over one rank moves nothing between ranks; give "
                         f"--world 2 or more")
    measured = [m for m in models if m.world_size == args.world
                and (args.nodes is None or m._fitted_nodes() == args.nodes)]
    if measured:  # a measured layout: its sweeps answer, as load_model(..., system=).predict does
        nodes = args.nodes or measured[0]._fitted_nodes()
        answered = {(m.collective, m.dtype) for m in measured}
        for collective, dtype in dict.fromkeys((m.collective, m.dtype) for m in models):
            if (collective, dtype) not in answered:  # the table holds the measured ones alone: say who is missing
                _say(f"{collective} ({dtype}) was not measured at {args.world} ranks"
                     f"{f' on {nodes} node(s)' if nodes else ''} and is not in the table: `--collective {collective}` "
                     f"predicts it there, or says why it cannot")
        if system is not None and nodes and measured[0].backend in GPU_BACKENDS:
            system.check_layout(args.world, nodes)
        for flag in [f"--link {p.name}" for p in presets] + ([f"--system {system.name}"] if system else []):
            _say(f"{flag}: {args.world} ranks{f' on {nodes} node(s)' if nodes else ''} were measured, and their "
                 f"sweeps answer; it prices only layouts no sweep measured" + (
                     ", and keeps sizes above theirs no faster than its NICs carry" if flag.startswith("--system")
                     and nodes and nodes > 1 else ""))
        return []
    unknown = [m for m in models if m.world_size == args.world and args.nodes and m._fitted_nodes() is None]
    if unknown and all(m.topology is None for m in models):
        raise UsageError(f"the {args.world}-rank {unknown[0].collective} sweep does not record how many nodes it ran "
                         f"on, so --nodes {args.nodes} cannot be told from it; refit it with --nodes N, or leave "
                         f"--nodes out to have the sweep answer")
    topology = list({id(m.topology): m.topology for m in models if m.topology is not None}.values())
    if not topology:
        which = f" for {args.collective}" if args.collective else ""
        collective = models[0].collective
        if collective.startswith("p2p"):
            raise UsageError(f"{args.model} holds a point-to-point model ({collective}): it was measured between two "
                             f"ranks and answers at --world 2 only, not {args.world}; for {args.world} ranks measure "
                             f"a collective ({measure_command('alltoall', args.world)}, say)")
        layouts = sorted({m.world_size for m in models if m.world_size})
        at = (f"predict at its measured {'world' if len(layouts) == 1 else 'worlds'} "
              f"(--world {', '.join(map(str, layouts))})" if layouts else "predict without --world")
        raise UsageError(f"{args.model} holds no topology model{which} ({models[0].why_no_topology()}), so "
                         f"{args.world} ranks are not determined by it: {at}, or measure them with "
                         f"{measure_command(collective, args.world)}")
    if args.nodes and args.nodes > args.world:
        raise UsageError(f"--world {args.world} ranks cannot fill --nodes {args.nodes}: give one rank per node or more")
    if args.world % (args.nodes or 1):
        raise UsageError(f"--world {args.world} is not divisible by --nodes {args.nodes}; give ranks per node x nodes")
    out = []
    for tm in topology:
        for preset in presets:
            held = tm.intra if preset.link_class == "intra-node" else tm.inter
            if held is not None:
                _say(f"--link {preset.name}: the {tm.collective} model already holds an {preset.link_class} link "
                     f"({held.label}); the preset is not used")
            elif preset.link_class == "intra-node" and (args.nodes or 1) > 1 and _crossing_measured(tm):
                _say(f"--link {preset.name}: the {tm.collective} model's crossing was measured end to end, the legs "
                     f"inside each node included; the preset prices one-node layouts only, none of these")
            tm = tm.with_preset(preset)
        if system is not None:
            if (args.nodes or 1) > 1 and _crossing_measured(tm):
                _say(f"--system {system.name}: the {tm.collective} model's crossing was measured end to end, the legs "
                     f"inside each node included; the description's intra-node rate prices one-node layouts only")
            if both_links_measured(tm):
                _say(f"--system {system.name}: the {tm.collective} model measured both link classes; the description "
                     f"only bounds the layouts and says which are not determined")
            for line in fabric_mismatches(tm, tm.system_per_node(system)):
                _say(f"--system {system.name}: {line}")
            tm = tm.with_system(system)
        out.append(tm)
    return out


def _crossing_measured(tm) -> bool:
    """Whether the inter-node link was fitted to multi-node times, the legs inside each node included (the
    model holds no intra-node link to price them apart)."""
    return tm.intra is None and tm.inter is not None and not (tm.inter.is_preset or tm.inter.is_described)


def _nodes_asked(args, models) -> int:
    """``--nodes``, or the nodes the Python API takes for ``--world`` ranks without it: one for a
    single-node model, else as many as the fitted multi-node sweeps' ranks per node give."""
    if args.nodes is not None:
        return args.nodes
    if getattr(args, "system", None):  # the described node's GPUs, where the ranks fill whole nodes
        from pybench.model.system import load_system
        per_node = load_system(args.system).gpus_per_node
        if args.world > per_node and args.world % per_node == 0:
            return args.world // per_node
    counts = set()
    for m in models:
        try:
            counts.add(m._nodes_for(args.world))
        except UsageError:
            counts.add(0)
    if len(counts) == 1 and 0 not in counts:
        return counts.pop()
    raise UsageError(f"--world {args.world}: give --nodes (how many nodes the ranks run on); the models' fitted "
                     f"layouts do not say")


# What predict has to say about its inputs, held until its table is ready: a refusal is then its one line alone.
_SAID: list[str] = []


def _say(line: str) -> None:
    _SAID.append(f"pybench: predict: note: {line}")  # exit 0: the table follows; an error says "error:"


def run_predict(args) -> int:
    """Body of ``pybench predict``; returns the exit status."""
    from pybench.collectives import dtype_name
    from pybench.model.model_files import load_models

    if args.json:
        refuse_existing(Path(args.json), args.force, [args.model, *([args.system] if args.system else [])])
    def matching(ms: list) -> list:
        return [m for m in ms if (args.collective is None or m.collective == args.collective)
                and (args.link_class is None or m.link_class == args.link_class)
                and (args.dtype is None or dtype_name(m.dtype) == dtype_name(args.dtype))]

    models = load_models(args.model)
    held = sorted({f"{m.collective}/{m.dtype}" for m in models})
    models = matching(models)
    if not models:
        raise UsageError(f"{args.model}: no model matches --collective/--link-class/--dtype; it holds "
                         f"{', '.join(held)}")
    if args.world is not None and args.world < 1:
        raise UsageError(f"--world {args.world} must be a positive number of ranks")
    sizes = parse_sizes(args.sizes)
    for m in models:  # as measuring refuses them; where another type's model takes them, say which
        takes = sorted({x.dtype for x in models if not any(v % DTYPES.get(x.dtype, 1) for v in sizes)})
        refuse_partial_elements(sizes, m.dtype, f"the {m.dtype} {m.collective} model" + (
            f" (--dtype {' or --dtype '.join(takes)} takes them)" if takes else ""))
    _SAID.clear()
    topology = _topology_for(args, models)
    if topology:
        if args.band == "confidence":  # no mean is measured at another layout to put a confidence band around
            _say("--band confidence: another layout has no confidence band; its rows carry the prediction interval")
        records = topology_records(topology, sizes, args.world, _nodes_asked(args, models))
    else:
        if args.world is not None:  # a measured layout: its own sweeps answer, one table each
            if args.system:  # on the description (as load_model(..., system=)): above their sizes, its NICs bound them
                models = matching(load_models(args.model, system=args.system))
            models = [m for m in models if m.world_size == args.world]
        records = prediction_records(models, sizes, band=args.band)
    for line in dict.fromkeys(_SAID):
        print(line, file=sys.stderr)
    _SAID.clear()
    print(format_prediction_table(records))
    if args.json:
        write_json(Path(args.json), stamp(PREDICTION, {"model_file": str(args.model), "records": records}),
                   args.force)
    return 0


def _sizes_said(m) -> str:
    """``3 size(s)``, or ``1 distinct size(s) in 4 rows`` where rows repeat a size."""
    distinct = len(set(m.size_bytes.tolist()))
    return f"{distinct} size(s)" if distinct == len(m) else f"{distinct} distinct size(s) in {len(m)} rows"
