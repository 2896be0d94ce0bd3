"""What the advisor returns (:class:`Plan`) and its renderings: the advice records as the
sentences ``pybench plan`` prints, and the ``pybench.plan`` JSON document.

Rendering only: every figure and verdict comes from the records :mod:`pybench.planning.advice` made.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pybench.io.formats import PLAN, stamp
from pybench.planning.bands import Band
from pybench.planning.choice import cost_per_sample, throughput
from pybench.planning.records import (
    AccumulationAdvice,
    Advice,
    BatchAdvice,
    BatchVerdict,
    CheckpointAdvice,
    CostAdvice,
    GlobalBatchAdvice,
    InputPipelineAdvice,
    MemoryAdvice,
    NeedAdvice,
    NeedVerdict,
    NoLayoutAdvice,
    OneDevice,
    PipelineAdvice,
    ScaleOutAdvice,
    ScaleUpAdvice,
    ScaleUpVerdict,
    ScalingAdvice,
    SearchAdvice,
    TensorParallelAdvice,
    UtilisationAdvice,
    Zero3Advice,
    ZeroAdvice,
)
from pybench.planning.result import fmt_gb
from pybench.planning.step import StepEstimate
from pybench.planning.strategies import MemoryEstimate

__all__ = ["Plan", "advice_sentence", "row_figures", "decided_by", "plan_text", "plan_notes", "plan_document"]


@dataclass(frozen=True)
class Plan:
    """Advice for one model on one kind of device, with the figures behind it.

    Attributes
    ----------
    verdict : OneDevice
        ``fits one device``, ``fits only just`` or ``does not fit one device``.
    records : tuple of Advice
        The rules applied, in order, each with its verdict and figures.
    memory_one_device : MemoryEstimate
        Unsharded memory (DDP layout) on one device.
    rows : tuple of StepEstimate
        Configurations evaluated for the advice.
    recommended : StepEstimate or None
        The configuration the advice ends on.
    notes : tuple of str
        What the evaluation noted (derived models, layouts it could not evaluate).
    target_samples_per_s : float, optional
        The throughput asked for; ``target_met`` says whether a row reached it.
    max_world : int
    headroom : float
        Share of device memory a configuration may use to "fit comfortably".
    warnings : tuple of str
        What the user must hear on stderr too (a link preset the models cannot use).
    search : SearchBounds, optional
        What the search weighed (:mod:`pybench.planning.search`).
    comm_bytes_per_value : dict, optional
        Bytes per value of each kind of exchange (gradients, ZeRO's parameter gathers, activations).
    """

    verdict: OneDevice
    records: tuple[Advice, ...]
    memory_one_device: MemoryEstimate
    rows: tuple[StepEstimate, ...]
    recommended: StepEstimate | None
    evaluation_notes: tuple[str, ...] = ()
    target_samples_per_s: float | None = None
    target_met: bool = True
    max_world: int = 64
    headroom: float = 0.8
    warnings: tuple[str, ...] = ()
    search: Any = None
    comm_bytes_per_value: dict[str, int] | None = None

    @property
    def advice(self) -> tuple[str, ...]:
        """The records as sentences, in order (:func:`advice_sentence`)."""
        return tuple(advice_sentence(a) for a in self.records)

    @property
    def notes(self) -> tuple[str, ...]:
        """Evaluation notes, then what the plan itself assumed (:func:`plan_notes`)."""
        return plan_notes(self)

    def to_dict(self) -> dict[str, Any]:
        """The ``pybench.plan`` document (:func:`plan_document`)."""
        return plan_document(self)

    def text(self) -> str:
        """The plan for stdout (:func:`plan_text`)."""
        return plan_text(self)

    def __repr__(self) -> str:
        rec = "none" if self.recommended is None else f"{self.recommended.strategy} x{self.recommended.world}"
        return f"Plan({self.verdict}; recommended {rec}; {len(self.rows)} configurations evaluated)"


def devices(n: int) -> str:
    """``1 device``, ``8 devices``."""
    return f"{n} device" if n == 1 else f"{n} devices"


def micro(r: StepEstimate) -> str:
    """``micro-batch 2``, or ``micro-batch 2 x 4 micro-batches`` when a step accumulates several."""
    many = "" if r.micro_batches == 1 else f" x {r.micro_batches} micro-batches"
    return f"micro-batch {r.batch}{many}"


def wait_share(r: StepEstimate) -> float:
    """The wait for the slowest rank as a share of the step CCR is taken over (so CCR = network + wait)."""
    total = r.comm_s + r.sync_s + r.compute_s
    return r.sync_s / total if total else 0.0


def ccr_figure(r: StepEstimate) -> str:
    """``CCR 0.46 (comm-bound)``, with the wait for the slowest rank shown apart when there is one."""
    if r.sync_s > 0:
        return (f"CCR {r.ccr:.2f} ({r.band}; network {r.ccr - wait_share(r):.2f} + wait for the slowest rank "
                f"{wait_share(r):.2f})")
    return f"CCR {r.ccr:.2f} ({r.band})"


def decided_by(r: StepEstimate) -> tuple[str, str]:
    """What the plan bands a layout by, and the figure itself: the share of the step its communication leaves
    exposed after overlap with backward (its CCR counts the hidden part too, so a CCR may be comm-bound where
    this is not), else, without overlap, its CCR."""
    if r.overlap:
        return ("the communication they leave exposed after overlap with backward",
                f"exposed {r.exposed_fraction:.2f} ({r.band_exposed}); its CCR {r.ccr:.2f} ({r.band}) also counts "
                f"the part overlap hides")
    return "their CCR (no overlap)", f"CCR {r.ccr:.2f} ({r.band})"


def row_figures(r: StepEstimate) -> str:
    """The figures of one configuration in a sentence: CCR, band, samples/s, efficiency, memory."""
    exposed = f", exposed {r.exposed_fraction:.2f} ({r.band_exposed})" if r.overlap else ""
    eff_node = "" if r.efficiency_vs_node is None else f", eff vs node {r.efficiency_vs_node:.2f}"
    cost = "" if r.samples_per_dollar is None else f", {r.samples_per_dollar:.4g} samples/$"
    return (f"{ccr_figure(r)}{exposed}, {r.samples_per_s:.2f} samples/s{cost}, "
            f"eff vs 1 device {r.efficiency_vs_device:.2f}{eff_node}, {fmt_gb(r.memory.needed_bytes)}/device "
            f"({r.memory.fits})")


def _memory_text(one: MemoryEstimate, bytes_per_param: int) -> str:
    return (f"one device needs {fmt_gb(one.total_bytes)} ({fmt_gb(one.states_bytes)} weights+grads+Adam at "
            f"{bytes_per_param} B/param, {fmt_gb(one.activations_bytes)} activations; "
            f"{fmt_gb(one.total_checkpointed_bytes)} with activation checkpointing) of {fmt_gb(one.device_bytes)}")


def _memory(a: MemoryAdvice) -> str:
    text = _memory_text(a.one, a.bytes_per_param)
    if a.verdict == OneDevice.FITS:
        return f"it fits: {text}. Data parallelism (DDP) is enough; no model sharding needed."
    if a.verdict == OneDevice.FITS_ONLY_JUST:
        return f"it fits only just: {text}."
    return f"it does not fit: {text}."


def _utilisation(a: UtilisationAdvice) -> str:
    return (f"low accelerator utilisation: the step's GEMMs reach {a.measured_flops_per_s / 1e12:.3g} TFLOP/s, "
            f"{a.fraction:.0%} of the {a.peak_flops_per_s / 1e12:.3g} TFLOP/s peak you gave: fix the "
            f"input pipeline and the kernels first, not the node count (more nodes multiply the waste)")


def _scale_up(a: ScaleUpAdvice) -> str:
    if a.verdict == ScaleUpVerdict.NO_GAIN:
        r = a.node
        return (f"do not scale up with DDP: one node ({devices(r.world)} over intra-node links) trains "
                f"{r.efficiency_vs_device * r.world:.2f}x one device's samples/s (eff vs 1 device "
                f"{r.efficiency_vs_device:.2f}), no more than one device: the gradient all-reduce costs more than "
                f"the compute it divides; a larger micro-batch or longer sequences amortise it: "
                f"{row_figures(r)}.")
    return (f"scale up first: fill one node ({a.gpus_per_node} devices over intra-node links) with DDP when more "
            f"throughput is needed: {row_figures(a.node)}.")


def _scale_out(a: ScaleOutAdvice) -> str:
    rows = "; ".join(f"{r.world} devices: {ccr_figure(r)}, exposed {r.exposed_fraction:.2f}, eff vs node "
                     + (f"{r.efficiency_vs_node:.2f}" if r.efficiency_vs_node is not None and
                        math.isfinite(r.efficiency_vs_node) else "not known (one node's time is not determined)")
                     for r in a.rows)
    if a.last_good_world is None:
        tail = (". Across nodes the gradient all-reduce is comm-bound: prefer a bigger node, a larger batch per "
                "device, or fewer, faster nodes")
    elif a.last_good_world != a.rows[-1].world:
        tail = f". Beyond {a.last_good_world} devices communication is comm-bound"
    else:
        tail = ""
    return f"then scale out with DDP across nodes: {rows}{tail}"


def _zero(a: ZeroAdvice) -> str:
    return (f"shard the optimizer state with ZeRO at {a.world} devices: "
            + "; ".join(f"{r.strategy} {fmt_gb(r.memory.needed_bytes)}/device ({r.memory.fits}), {ccr_figure(r)}"
                        for r in a.rows) + ".")


def _accumulation(a: AccumulationAdvice) -> str:
    return (f"or keep DDP with gradient accumulation: micro-batch 1 x {a.batch} accumulation steps "
            f"needs {fmt_gb(a.memory.needed_bytes)}/device ({a.memory.fits}) and communicates once per step.")


def _checkpoint(a: CheckpointAdvice) -> str:
    return f"or checkpoint activations: {fmt_gb(a.memory.total_checkpointed_bytes)}/device at 8/6 the compute."


def _zero3(a: Zero3Advice) -> str:
    return f"ZeRO-3/FSDP fits from {devices(a.row.world)} at {micro(a.row)}: {row_figures(a.row)}."


def _tensor_parallel(a: TensorParallelAdvice) -> str:
    return (f"tensor parallel inside the node (tp={a.tp}) fits: {row_figures(a.row)}; "
            f"then data parallel across nodes.")


def _pipeline(a: PipelineAdvice) -> str:
    node = f" ({fmt_gb(a.tp_node.memory.needed_bytes)}/device)" if a.tp_node is not None else ""
    return (f"tensor parallel inside the node (tp={a.tp}) is not enough{node}; add pipeline stages across nodes: "
            f"tp={a.tp} x pp={a.row.layout.pp} fits: {row_figures(a.row)}; then data parallel on top.")


def _no_layout(a: NoLayoutAdvice) -> str:
    return (f"no tp x pp layout within {a.max_world} devices fits; raise max_world or use devices with more "
            f"memory")


def _batch(a: BatchAdvice) -> str:
    r, start = a.row, a.row.decisive_band
    where = f"{r.strategy} on {devices(r.world)}"
    if a.verdict == BatchVerdict.CHANGES_BAND and a.at is not None:
        x = a.at
        what = ("larger batches amortise communication" if x.comm_fraction < r.comm_fraction else
                "larger batches do not amortise communication here (their layout or checkpointing costs more)")
        return (f"{what}: {where} goes from {r.comm_fraction:.2f} ({start}) at "
                f"batch {a.batch} to {x.comm_fraction:.2f} ({x.decisive_band}) from batch {a.tried_batch} per "
                f"device, {x.samples_per_s:.2f} samples/s, {fmt_gb(x.memory.needed_bytes)}/device")
    if a.verdict == BatchVerdict.ADOPTED and a.at is not None:
        x = a.at
        return (f"{micro(x)} per device is recommended, not {micro(r)} (batch={a.batch}, the default unless given): "
                f"{x.strategy} on {devices(x.world)} gives {x.samples_per_s:.2f} samples/s at {x.comm_fraction:.2f} "
                f"({x.decisive_band}), where at {micro(r)} it gives {r.samples_per_s:.2f} at "
                f"{r.comm_fraction:.2f} ({start})" + ("" if x.global_batch == r.global_batch else
                                                      f"; the global batch grows with it, to {x.global_batch} "
                                                      f"sequences (global_batch holds yours)"))
    if a.verdict == BatchVerdict.STOPS_FITTING:
        return (f"a larger batch does not help here: at batch {a.tried_batch} {where} no longer fits in memory, "
                f"and up to batch {a.tried_batch // 2} the band stays {start}")
    if r.sync_s > 0 and wait_share(r) >= r.ccr - wait_share(r):
        # The wait grows with compute, so a larger batch cannot amortise it.
        return (f"larger batches do not change the band of {where} up to batch {a.max_batch} per device: it stays "
                f"{start}; the wait for the slowest rank ({wait_share(r):.2f} of the step: stragglers, a slow "
                f"node), not the network, sets the step")
    return (f"larger batches do not change the band of {where} up to batch {a.max_batch} per device: it stays "
            f"{start}; communication, not the batch, sets the step")


def _input_pipeline(a: InputPipelineAdvice) -> str:
    return (f"fix the input pipeline: the data loader delivers {a.loader_samples_per_s:.4g} samples/s per replica, "
            f"the device could train on {a.compute_samples_per_s:.4g}; more devices multiply the waste, so no "
            f"multi-node layout is recommended until the loader keeps up")


def _scaling(a: ScalingAdvice) -> str:
    shown = [(r.world, f"{devices(r.world)} {r.efficiency_vs_device:.2f} ({r.strategy}, "
                       f"{r.samples_per_s:.2f} samples/s)") for r in a.rows]
    shown += [(w, f"{devices(w)}: " + ("not determined by these inputs (see the notes)" if w in a.undetermined else
                                       "nothing fits")) for w in a.missing]
    return "check scaling efficiency at small counts before larger ones: " + "; ".join(
        text for _, text in sorted(shown))


def _node_best(a: NeedAdvice) -> str:
    if a.node is None:
        return "nothing inside one node that is not comm-bound"
    n = a.node
    said = (f"one node's best is {n.strategy} on {devices(n.world)} at {micro(n)}, "
            f"{n.samples_per_s:.2f} samples/s")
    if a.loader_samples_per_s is not None and throughput(n, a.loader_samples_per_s) < n.samples_per_s:
        said += f" by compute, {throughput(n, a.loader_samples_per_s):.2f} with this data loader"
    return said


def _undetermined(a: NeedAdvice, r: Any) -> str:
    """Where the pick meets the target at its estimate only: its communication's interval, and (for a pick its
    bands allow) the cheapest layout that meets the target at the slow end of its own."""
    if a.met_at_slow_comm is not False:
        return ""
    d, other = a.determined, ""
    if a.verdict == NeedVerdict.TARGET_MET:
        ratio = cost_per_sample(d, a.loader_samples_per_s) / cost_per_sample(r, a.loader_samples_per_s) if d else 0
        other = ("; no layout searched meets it there" if d is None else
                 f"; the cheapest that meets it at the slow end of a calibrated interval is {d.strategy} on "
                 f"{devices(d.world)} [{d.layout}] at {micro(d)}, {d.samples_per_s_slow_comm:.2f} samples/s there, at "
                 f"{ratio:.2f}x the cost per sample")
    measure = f"; measuring its collectives at its layout ({r.world} ranks on {r.layout.nodes} node(s)) would narrow it"
    if not r.comm_interval_calibrated:
        carried = ", ".join(sorted({o.op.collective for o in r.ops if not o.call.calibrated}))
        return (f"; met at the estimate only, which these inputs do not bound: its {carried} ({r.comm_s:.3g} s of "
                f"communication per step in all) rests on a sweep used at a rank count it was not measured at, with "
                f"no topology model for it in the file (carried by the ring formula, or of an unknown rank count), "
                f"so no calibrated interval bounds it: fit it with --nodes N, or give --system{other}{measure}")
    return (f"; met at the estimate only: its communication per step has a 95% interval of "
            f"{r.comm_low_s:.3g}-{r.comm_high_s:.3g} s (estimate {r.comm_s:.3g} s), and at its slow end it may give "
            f"as little as {r.samples_per_s_slow_comm:.3g} samples/s (if overlap hides none of the extra)"
            f"{other}{measure}")


def _need(a: NeedAdvice) -> str:
    r = a.row
    if a.verdict == NeedVerdict.NO_NAMED_NEED:
        pick = "" if r is None else (f"{r.strategy} on {devices(r.world)} at {micro(r)} suffices "
                                     f"({r.samples_per_s:.2f} samples/s, the cheapest per sample); ")
        return (f"no named need for more than one node: {pick}{_node_best(a)}, efficiency "
                f"{a.node.efficiency_vs_device if a.node is not None else float('nan'):.2f}; more devices are "
                f"justified by a throughput or time-to-train target (target_samples_per_s) or by a model that "
                f"does not fit one node")
    if a.verdict == NeedVerdict.MEMORY and r is None:
        return ("the model's memory sets the layout, and no layout searched holds it: give more devices "
                "(max_world), more memory per device, or a layout that shards more (zero3, tp, pp)")
    if a.verdict == NeedVerdict.MEMORY and r is not None:
        by, figure = decided_by(r)
        among = (f"among the layouts that fit and are not comm-bound by {by}, the cheapest per sample"
                 if r.decisive_band != Band.COMM_BOUND else
                 f"every layout that fits is comm-bound by {by}; the cheapest per sample")
        return (f"the model's memory sets the layout: {among} is {r.strategy} on {devices(r.world)} [{r.layout}] "
                f"at {micro(r)}, {r.samples_per_s:.2f} samples/s ({figure}); {_node_best(a)}")
    if a.verdict == NeedVerdict.DEVICE_NOT_WELL_USED:
        said = f"no scale-out until one device is well used: stay on one node ({_node_best(a)})"
        if a.target_samples_per_s is not None and not a.target_met:
            said += (f"; the target of {a.target_samples_per_s:g} samples/s is not met inside one node, and more "
                     f"nodes would only multiply the waste: fix the input pipeline (or the kernels) first")
        elif a.target_samples_per_s is not None and r is not None:
            said += (f"; the target of {a.target_samples_per_s:g} samples/s is met by {r.strategy} on "
                     f"{devices(r.world)}")
        return said
    if a.verdict == NeedVerdict.TARGET_MET and r is not None:
        return (f"the target of {a.target_samples_per_s:g} samples/s is met most cheaply per sample by {r.strategy} "
                f"on {devices(r.world)} [{r.layout}] at {micro(r)}: {r.samples_per_s:.2f} samples/s, "
                f"{r.decisive_band} by its own bands{_undetermined(a, r)}")
    if a.verdict == NeedVerdict.TARGET_MET_ONLY_COMM_BOUND and r is not None:
        best = a.best_allowed
        allowed = ("no layout its bands allow" if best is None else
                   f"the fastest layout its bands allow is {best.strategy} on {devices(best.world)} at "
                   f"{best.samples_per_s:.2f} samples/s")
        by, figure = decided_by(r)
        return (f"only layouts comm-bound by {by} reach the target of {a.target_samples_per_s:g} samples/s: "
                f"{r.strategy} on {devices(r.world)}, {r.samples_per_s:.2f} samples/s ({figure})"
                f"{_undetermined(a, r)}; {allowed}")
    nearest = "" if r is None else (f"; the nearest is {r.strategy} on {devices(r.world)} [{r.layout}] at "
                                    f"{micro(r)}, {r.samples_per_s:.2f} samples/s, the fastest of "
                                    f"every layout searched")
    return f"nothing searched reaches the target of {a.target_samples_per_s:g} samples/s{nearest}"


def _worlds(b: Any) -> str:
    """The worlds searched, in words: every device count, then every whole-node count, then doubling."""
    g, top = b.gpus_per_node, b.worlds[-1]
    every = min(b.max_world, g * b.every_device_count_up_to_nodes)
    said = f"every device count up to {every}"
    if every > g:  # the layout of the largest: whole nodes of g, and the part of one more
        whole, part = divmod(every, g)
        said += (f" (at most {whole} node{'s' if whole > 1 else ''} of {g}"
                 + (f" and {part} device{'s' if part > 1 else ''} of one more" if part else "")
                 + f"; counts that are not a multiple of {g} use part of a node)")
    if top > every:
        nodes = top // g
        said += (f", then every whole-node count up to {nodes} nodes of {g} ({devices(top)})"
                 if nodes <= b.every_node_count_up_to else
                 f", then whole nodes of {g} (every count up to {b.every_node_count_up_to} nodes, then doubling: "
                 f"node counts between the doublings are not searched) up to {nodes} nodes ({devices(top)})")
    return said


def _batches(b: Any) -> str:
    if b.global_batch is not None:
        return (f"micro-batch {b.batches[0]}-{b.batches[-1]} (max_batch) with gradient accumulation to the "
                f"global batch of {b.global_batch} sequences (global_batch; a layout whose data-parallel degree "
                f"does not divide it is not weighed)")
    return (f"micro-batch {b.batches[0]}-{b.batches[-1]} (max_batch) with gradient accumulation to every global "
            f"batch within {b.global_batch_limit} sequences (global_batch_limit; the global batch is free within "
            f"it: give global_batch to hold yours; a layout whose data-parallel replicas times its micro-batch "
            f"exceed it runs one micro-batch per step and exceeds it too)")


def _search(a: SearchAdvice) -> str:
    b = a.bounds
    why = {"default": " (the default; max_world sets it)", "max_world": " (max_world)"}.get(
        b.max_world_reason, f" ({b.max_world_reason})")
    depths = ", ".join(map(str, b.pipeline_depths)) or "none"
    g = b.gpus_per_node
    idle = "".join(f"; across nodes tp {t} runs {g - g % t} ranks per node, {g % t} GPUs idle"
                   for t in b.tp_degrees if g % t)
    said = (f"searched every layout of {', '.join(b.strategies)} (tp degrees {', '.join(map(str, b.tp_degrees))}: "
            f"those dividing the heads{idle}; pipeline depths {depths}: the fewest stages for each size of the "
            f"largest stage) on {_worlds(b)}{why}, {_batches(b)}, activation checkpointing where a layout needs "
            f"it: {b.layouts_tried} combinations of layout, micro-batch and micro-batches per step weighed, "
            f"{b.rows_fitting} fit and could win, {b.rows_priced} priced; the {b.rows_left_out} others cannot be "
            f"chosen (a priced layout on no more nodes beats their best case: compute, bubble, the wait and the "
            f"communication that never overlaps; once a layout meets the target, those that cannot meet it or "
            f"would cost no less on more nodes; or they span nodes and nothing needs more than one)")
    if a.bounded:
        said += f"; the answer is bounded by {devices(b.max_world)}: more may do better"
    return said


def _cost(a: CostAdvice) -> str:
    r = a.row
    node = ("" if a.node is None or a.node.samples_per_dollar is None else
            f"; one node's best ({devices(a.node.world)}) gives {a.node.samples_per_dollar:.4g}")
    price = (f"{a.price_per_device_hour:g} per device-hour (billed for the devices used)"
             if a.price_per_device_hour is not None else f"{a.price_per_node_hour:g} per node-hour")
    return (f"at {price}, {r.strategy} on {devices(r.world)} costs {r.cost_per_hour or 0.0:g} per hour and gives "
            f"{r.samples_per_dollar or 0.0:.4g} samples per dollar{node}")


def _global_batch(a: GlobalBatchAdvice) -> str:
    r = a.row
    return (f"the global batch is {r.global_batch} sequences ({r.global_batch * a.seq} tokens: data parallel "
            f"{r.layout.dp} x micro-batch {r.batch} x {r.micro_batches} micro-batches), above {a.limit}: scale the "
            f"learning rate with it (linear or square-root rule), lengthen the warm-up, and check sample efficiency "
            f"against a smaller-batch run (global_batch_limit sets this threshold)")


_SENTENCES: dict[type, Callable[[Any], str]] = {
    MemoryAdvice: _memory, UtilisationAdvice: _utilisation, ScaleUpAdvice: _scale_up, ScaleOutAdvice: _scale_out,
    ZeroAdvice: _zero, AccumulationAdvice: _accumulation, CheckpointAdvice: _checkpoint, Zero3Advice: _zero3,
    TensorParallelAdvice: _tensor_parallel, PipelineAdvice: _pipeline, NoLayoutAdvice: _no_layout,
    BatchAdvice: _batch, InputPipelineAdvice: _input_pipeline, ScalingAdvice: _scaling, NeedAdvice: _need,
    CostAdvice: _cost, GlobalBatchAdvice: _global_batch, SearchAdvice: _search,
}


def advice_sentence(a: Advice) -> str:
    """One advice record as the sentence ``pybench plan`` prints."""
    return _SENTENCES[type(a)](a)


def plan_notes(p: Plan) -> tuple[str, ...]:
    """The evaluation's notes, a missed target, and the headroom the plan assumed."""
    notes = list(p.evaluation_notes)
    starved = any(isinstance(a, NeedAdvice) and a.verdict == NeedVerdict.DEVICE_NOT_WELL_USED for a in p.records)
    if p.target_samples_per_s is not None and not p.target_met and not starved:
        notes.append(f"no configuration within {devices(p.max_world)} reaches {p.target_samples_per_s:g} "
                     f"samples/s; recommended is the fastest (max_world bounded the search)")
    if not any("of device memory" in n for n in notes):  # the grid's memory note says it already
        notes.append(f"fits comfortably means within {p.headroom:.0%} of device memory (context, fragmentation "
                     f"and buffers are not in the estimate)")
    return tuple(notes)


def plan_text(p: Plan) -> str:
    """The plan for stdout: verdict, numbered advice, the recommendation and notes."""
    lines = [f"verdict: {p.verdict}"]
    lines += [f"{i}. {a}" for i, a in enumerate(p.advice, 1)]
    if p.recommended is not None:
        r = p.recommended
        line = f"recommended: {r.strategy} on {devices(r.world)} [{r.layout}], {micro(r)}: {row_figures(r)}"
        loader = next((a.loader_samples_per_s for a in p.records if isinstance(a, InputPipelineAdvice)), None)
        if loader is not None and loader * r.layout.dp < r.samples_per_s:
            # the figures above are the step's; the loader caps what the job really gets
            line += f"; the data loader caps it at {loader * r.layout.dp:.2f} samples/s"
        if any(isinstance(a, NeedAdvice) and a.met_at_slow_comm is False for a in p.records):
            line += ("; the target is met at the estimate only, not across its communication's interval"
                     if r.comm_interval_calibrated else "; the target is met at the estimate only, which no "
                     "calibrated interval bounds")
        lines.append(line)
    lines += [f"note: {n}" for n in p.notes]
    return "\n".join(lines)


def plan_document(p: Plan) -> dict[str, Any]:
    """The ``pybench.plan`` document: the sentences and the records they come from."""
    return stamp(PLAN, {"verdict": p.verdict, "advice": list(p.advice),
                        "memory_one_device": p.memory_one_device.to_dict(),
                        "rows": [r.to_dict() for r in p.rows],
                        "recommended": None if p.recommended is None else p.recommended.to_dict(),
                        "notes": list(p.notes), "warnings": list(p.warnings),
                        "search": None if p.search is None else p.search.to_dict(),
                        "comm_bytes_per_value": p.comm_bytes_per_value,
                        "records": [a.to_dict() for a in p.records]})
