"""OSU all-reduce on cloud clusters at several node counts: a test set the constants are never chosen on.

The interval constants are chosen on nccl-tests logs (:mod:`pybench.model.validation`). These clusters ran
``osu_allreduce`` through MPI at four node counts each, on CPU nodes (56 or 96 ranks per node) and on GPU
nodes (8 per node): converged-computing/performance-study, whose Azure CycleCloud CPU runs are left out (its
64-node files ran another transport: 52 ms at 1 MiB against 8 ms on 32 nodes and 13 ms on 128; its GPU runs,
with buffers in GPU memory, are in); and ABCI's A100 and V100 clusters, buffers in GPU memory, at four and five
node counts (aistabci/abci2.0benchmark). For every
pair of node counts, a fit at the two predicts every other node count at every size of the sweep (OSU's
end at 1 MiB), scored with the shipped constants; where pybench answers that the pair does not determine
the other node counts, the prediction counts as refused, not scored.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pybench.model.calibration import Calibration
from pybench.model.logs import load_measurements
from pybench.model.topology_fit import Observation, fit_topology, undisturbed_observations


def _logs(pattern: str, counts: Sequence[int], **named: str) -> dict[int, str]:
    """Log names by node count: ``pattern`` with {n}, but for the counts ``named`` gives (as n4="...")."""
    return {n: named.get(f"n{n}", pattern.format(n=n)) for n in counts}


_CPU = (32, 64, 128, 256)
# (dataset, log names by node count, ranks per node); the first all-reduce table of each log
OSU_CLUSTERS = (
    ("osu-aks-gpu", _logs("osu_azaks_gpu_n{n}_ppn8_allreduce.out", (4, 8, 16, 32)), 8),
    ("osu-gke-gpu", _logs("osu_gkegpu_n{n}_ppn8_allreduce.out", (4, 16, 32),
                          n4="osu_gkegpu_flux_n4_ppn8_allreduce.out"), 8),
    ("osu-eks-gpu", _logs("osu_awseks_gpu_n{n}_ppn8_allreduce.out", (4, 8, 16)), 8),
    ("osu-aks-cpu", _logs("osu_azaks_cpu_n{n}_ppn96_allreduce.out", _CPU), 96),
    ("osu-eks-cpu", _logs("osu_awseks_hpc7a_n{n}_ppn96_allreduce.log", _CPU,
                          n256="osu_awseks_hpc7a_n256_ppn96_allreduce.out"), 96),
    ("osu-gce-cpu", _logs("osu_gcpce_cpu_n{n}_ppn56_allreduce.out", _CPU), 56),
    ("osu-gke-cpu", _logs("osu_gkecpu_n{n}_ppn56_allreduce.out", _CPU), 56),
    ("osu-pcluster-cpu", _logs("osu_awspcluster_cpu_n{n}_ppn96_allreduce.out", _CPU), 96),
    ("osu-azcc-gpu-cuda", _logs("osu_azcc_gpu_n{n}_ppn8_dd.out", (4, 8, 16, 32)), 8),
    ("osu-abci-a100-cuda", {n: f"abci_anode_a100_n{n:02d}_ppn8_osu_cuda_allreduce.out" for n in (2, 4, 8, 16)}, 8),
    ("osu-abci-v100-cuda", {n: f"abci_vnode_v100_n{n:02d}_ppn4_osu_cuda_allreduce.out" for n in (2, 4, 8, 16, 32)}, 4),
)


@dataclass(frozen=True)
class ClusterScore:
    """One cluster's node-count predictions: how many were answered and refused, and the answered ones'
    coverage, median half-width and median and largest errors (in % of the predicted time; None: none
    answered)."""

    dataset: str
    answered: int
    refused: int
    coverage: float | None
    median_half_width: float | None
    median_error: float | None
    max_error: float | None


def _sweep(path: Path, nodes: int, per_node: int) -> list[Observation]:
    first = next(ms for ms in load_measurements(path, world_size=nodes * per_node) if ms.collective == "allreduce")
    return undisturbed_observations(first, lambda _: nodes)


@dataclass
class _Answers:
    errors: list[float]
    half_widths: list[float]
    inside: list[bool]
    refused: int = 0

    def score(self, dataset: str) -> ClusterScore:
        if not self.errors:
            return ClusterScore(dataset, 0, self.refused, None, None, None, None)
        return ClusterScore(dataset, len(self.errors), self.refused, float(np.mean(self.inside)),
                            100 * float(np.median(self.half_widths)), 100 * float(np.median(self.errors)),
                            100 * float(np.max(self.errors)))


def _answers(sweeps: dict[int, list[Observation]], calibration: Calibration) -> _Answers:
    """Fit at every pair of node counts, predict every other node count at every size (see the module text)."""
    out = _Answers([], [], [])
    for fitted in itertools.combinations(sorted(sweeps), 2):
        model = fit_topology("allreduce", [o for n in fitted for o in sweeps[n]])
        for nodes, obs in sweeps.items():
            if nodes in fitted:
                continue
            for o in obs:
                p = model.predict(int(o.size_bytes), o.world, o.nodes, calibration=calibration)
                if not math.isfinite(p.time_s):
                    out.refused += 1
                    continue
                out.errors.append(abs(math.expm1(math.log(p.time_s / o.time_s))))
                out.half_widths.append((p.high_s - p.low_s) / 2 / p.time_s)
                out.inside.append(p.low_s <= o.time_s <= p.high_s)
    return out


def osu_scores(public: Path, calibration: Calibration) -> tuple[ClusterScore, ...]:
    """Every cluster of :data:`OSU_CLUSTERS`, then all of them pooled ("all")."""
    answers = [(dataset, _answers({n: _sweep(public / name, n, per_node) for n, name in logs.items()}, calibration))
               for dataset, logs, per_node in OSU_CLUSTERS]
    pooled = _Answers([e for _, a in answers for e in a.errors], [h for _, a in answers for h in a.half_widths],
                      [i for _, a in answers for i in a.inside], sum(a.refused for _, a in answers))
    return (*(a.score(dataset) for dataset, a in answers), pooled.score("all"))


def osu_table(scores: Sequence[ClusterScore]) -> str:
    rows = ["| cluster | answered | refused (not determined) | inside the 95% interval | median half-width | "
            "median error | max error |", "|---|---|---|---|---|---|---|"]

    def pct(x: float | None, scale: float = 1.0) -> str:
        return "-" if x is None else f"{scale * x:.1f}%"

    for s in scores:
        rows.append(f"| {s.dataset} | {s.answered} | {s.refused} | {pct(s.coverage, 100.0)} | "
                    f"{pct(s.median_half_width)} | {pct(s.median_error)} | {pct(s.max_error)} |")
    return "\n".join(rows)
