"""Confidence intervals of a mean: the statistics under every aggregate and comparison.

:func:`confidence_interval` is a 95% percentile bootstrap of the mean (1,000 resamples, fixed
seed; Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13). Resampling n values
with replacement is the same as drawing multinomial counts over the distinct values, so when
there are at most ``HISTOGRAM_MAX_DISTINCT`` distinct values (judge scales, pass/fail, most
real metrics) it is computed exactly that way at any n, in time independent of n. With more
distinct values it resamples indices up to ``BOOTSTRAP_MAX_N`` values, and above that uses the
normal approximation ``mean ± 1.96·s/√n``, which the bootstrap of a mean converges to. The
method used is returned beside the interval.
"""

from __future__ import annotations

import numpy as np

BOOTSTRAP_MAX_N = 5_000
BOOTSTRAP_RESAMPLES = 1_000
HISTOGRAM_MAX_DISTINCT = 256


def confidence_interval(v: np.ndarray, seed: int = 0) -> tuple[float, float, str]:
    """95% interval of the mean of ``v`` (see the module docstring)."""
    n = len(v)
    if n == 1:
        return float(v[0]), float(v[0]), "single value"
    rng = np.random.default_rng(seed)
    values, counts = np.unique(v, return_counts=True)
    if len(values) <= HISTOGRAM_MAX_DISTINCT:
        draws = rng.multinomial(n, counts / n, size=BOOTSTRAP_RESAMPLES)
        means = draws @ values / n
        lo, hi = np.percentile(means, [2.5, 97.5])
        return float(lo), float(hi), "bootstrap"
    if n <= BOOTSTRAP_MAX_N:
        means = np.empty(BOOTSTRAP_RESAMPLES)
        step = max(1, 2_000_000 // n)  # resamples per block, bounding memory
        for start in range(0, BOOTSTRAP_RESAMPLES, step):
            b = min(step, BOOTSTRAP_RESAMPLES - start)
            means[start:start + b] = v[rng.integers(0, n, size=(b, n))].mean(axis=1)
        lo, hi = np.percentile(means, [2.5, 97.5])
        return float(lo), float(hi), "bootstrap"
    m = float(v.mean())
    half = 1.96 * float(v.std(ddof=1)) / np.sqrt(n)
    return m - half, m + half, "normal"
