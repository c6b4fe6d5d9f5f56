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


QUANTILE_RESAMPLES = 1_000
QUANTILE_BUDGET = 20_000_000   # values drawn over all resamples, at most


def quantile_intervals(v: np.ndarray, qs: list[float], *, groups: np.ndarray | None = None,
                       seed: int = 0) -> tuple[np.ndarray, str]:
    """95% percentile-bootstrap intervals of the ``qs`` percentiles (0-100) of ``v``: an array of
    shape ``(len(qs), 2)`` and the method.

    With ``groups`` (one label per value, e.g. the request each inter-token gap came from) the
    resampling draws whole groups (a cluster bootstrap), since values within a group are not
    independent. The number of resamples shrinks (to no fewer than 100) so that no more than
    ``QUANTILE_BUDGET`` values are drawn; the method names how many were used.
    """
    v = np.asarray(v, dtype=np.float64)
    n = len(v)
    if n == 0:
        return np.full((len(qs), 2), np.nan), "no values"
    if n == 1:
        return np.full((len(qs), 2), v[0]), "single value"
    rng = np.random.default_rng(seed)
    if groups is None:
        b = int(min(QUANTILE_RESAMPLES, max(100, QUANTILE_BUDGET // n)))
        stats = np.empty((b, len(qs)))
        step = max(1, 2_000_000 // n)
        for start in range(0, b, step):
            k = min(step, b - start)
            stats[start:start + k] = np.percentile(v[rng.integers(0, n, size=(k, n))], qs, axis=1).T
        return np.percentile(stats, [2.5, 97.5], axis=0).T, f"bootstrap ({b} resamples)"
    order = np.argsort(groups, kind="stable")
    v, groups = v[order], np.asarray(groups)[order]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    ends = np.r_[starts[1:], n]
    g = len(starts)
    b = int(min(QUANTILE_RESAMPLES, max(100, QUANTILE_BUDGET // n)))
    stats = np.empty((b, len(qs)))
    for r in range(b):
        pick = rng.integers(0, g, size=g)
        idx = np.concatenate([np.arange(starts[j], ends[j]) for j in pick]) if g < 64 else \
            _ranges(starts[pick], ends[pick])
        stats[r] = np.percentile(v[idx], qs)
    return np.percentile(stats, [2.5, 97.5], axis=0).T, f"cluster bootstrap ({b} resamples of {g} groups)"


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, e)`` for each pair, vectorised."""
    lens = ends - starts
    total = int(lens.sum())
    offsets = np.repeat(starts - np.r_[0, np.cumsum(lens)[:-1]], lens)
    return np.arange(total) + offsets
