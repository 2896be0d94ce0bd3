"""Stragglers: a synchronous step waits for the slowest of N ranks.

Per-rank compute ~ Normal(mu, (cv mu)^2); the step takes mu (1 + cv E[max of N
standard normals]).
"""

from __future__ import annotations

import functools
import math

from pybench.errors import UsageError

__all__ = ["expected_max_normal", "straggler_factor"]


@functools.lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals], by numerical integration.

    E = integral of x n phi(x) Phi(x)^(n-1) dx over the real line, evaluated
    with the trapezoid rule on [-12, 12] with step 1e-3; the integrand is smooth
    and negligible beyond that range for n up to 10^7, so the error is below 1e-9.
    n = 1 gives 0, n = 2 gives 1/sqrt(pi).
    """
    import numpy as np
    if n < 1:
        raise UsageError(f"number of ranks must be at least 1, got {n}")
    if n == 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 24001)
    phi = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    cdf = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    integrand = x * n * phi * cdf ** (n - 1)
    dx = x[1] - x[0]
    return float(dx * (integrand.sum() - 0.5 * (integrand[0] + integrand[-1])))


def straggler_factor(cv: float, n: int) -> float:
    """Slowest-of-n compute time over the mean: 1 + cv x E[max of n standard normals].

    Per-rank compute times are modelled as independent normals with mean mu and
    standard deviation cv x mu; a synchronous step waits for the slowest.

    Raises
    ------
    UsageError
        When ``cv`` (the parameter ``straggler_cv`` of the step model) is negative.
    """
    if cv < 0:
        raise UsageError(f"straggler_cv must be 0 or more, got {cv}")
    return 1.0 + cv * expected_max_normal(n) if cv else 1.0
