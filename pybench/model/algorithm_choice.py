"""Which algorithm formula (ring, tree, ...) explains sweeps measured at several world sizes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AlgorithmChoice:
    """Outcome of :func:`select_algorithm`.

    Attributes
    ----------
    name : str
        Chosen algorithm (key of :data:`pybench.model.algorithms.ALGORITHMS`).
    basis : str
        How it was chosen, in words (``assumed`` when the data cannot discriminate).
    scores : tuple of (name, float)
        Weighted relative RSS of each candidate's joint fit (lower is better); empty
        when not compared.
    """

    name: str
    basis: str
    scores: tuple[tuple[str, float], ...] = ()


def select_algorithm(collective: str, worlds, sizes, times, *, min_size: int = 0,
                     candidates=None) -> AlgorithmChoice:
    """Pick the algorithm formula that best explains sweeps at several world sizes.

    For each candidate, per-link (alpha, 1/B) are fitted jointly to every point with
    ``T_i = a(p_i) alpha + b(p_i) n_i / B`` (relative-error least squares, sizes at or
    above ``min_size``); candidates have the same number of parameters, so the smallest
    residual wins. With a single world size every candidate fits equally well (the
    coefficients are constants absorbed by alpha and B), so the collective's default
    (ring) is returned with ``basis`` saying it was assumed.

    Parameters
    ----------
    collective : str
    worlds : sequence of int
        World size of each measurement set.
    sizes, times : sequence of array_like
        One array per set.
    min_size : int
        Ignore smaller sizes (e.g. to compare in the bandwidth regime only).
    candidates : sequence of str, optional
        Algorithm names (default: every formula for the collective).

    Returns
    -------
    AlgorithmChoice
    """
    from pybench.model.algorithms import candidates_for, default_algorithm, get_algorithm

    worlds = [int(w) for w in worlds]
    if len(set(worlds)) < 2:
        return AlgorithmChoice(default_algorithm(collective),
                               "assumed: data at one world size cannot tell algorithms apart")
    algos = [get_algorithm(c) for c in candidates] if candidates else candidates_for(collective)
    if not algos:
        return AlgorithmChoice(default_algorithm(collective), "assumed: no candidate formulas")
    scores = []
    for algo in algos:
        x1, x2 = [], []
        for w, s, t in zip(worlds, sizes, times):
            s = np.asarray(s, dtype=float)
            t = np.asarray(t, dtype=float)
            keep = s >= min_size
            x1.append(algo.latency_coef(w) / t[keep])
            x2.append(algo.bandwidth_coef(w) * s[keep] / t[keep])
        a = np.column_stack([np.concatenate(x1), np.concatenate(x2)])
        y = np.ones(a.shape[0])
        coef, *_ = np.linalg.lstsq(a, y, rcond=None)
        rss = float(np.sum((y - a @ coef) ** 2))
        scores.append((algo.name, rss))
    best = min(scores, key=lambda kv: kv[1])
    text = ", ".join(f"{n} {v:.4g}" for n, v in sorted(scores, key=lambda kv: kv[1]))
    return AlgorithmChoice(best[0], f"best joint fit over world sizes {sorted(set(worlds))} "
                                    f"(relative RSS: {text})", tuple(scores))
