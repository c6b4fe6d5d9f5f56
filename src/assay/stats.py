"""Confidence intervals of a mean, and of a difference between two independent samples: the
statistics under every aggregate and comparison.

:func:`confidence_interval` is a 95% percentile bootstrap of the mean (1,000 resamples, fixed
seed; Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13). Resampling n values
with replacement is the same as drawing multinomial counts over the distinct values, so when
there are at most ``HISTOGRAM_MAX_DISTINCT`` distinct values (judge scales, pass/fail, most
real metrics) it is computed exactly that way at any n, in time independent of n. With more
distinct values it resamples indices up to ``BOOTSTRAP_MAX_N`` values, and above that uses the
normal approximation ``mean ± 1.96·s/√n``, which the bootstrap of a mean converges to. The
method used is returned beside the interval.

:func:`bootstrap_diff` compares a statistic (mean, a percentile, or any vectorised function) of
two *independent* samples, such as the latencies of two benchmark runs: each sample is
resampled on its own, the statistic of every resample pair gives a draw of ``B - A`` and of
``B / A``, and the 2.5th and 97.5th percentiles of those draws are the 95% interval. A
percentile's bootstrap distribution is drawn exactly, at any n, from order statistics: the k-th
smallest of n values resampled from sorted ``x`` is ``x[floor(n·U)]`` with ``U ~ Beta(k, n+1-k)``
(the k-th smallest of n uniforms), and the next one up is ``U + (1-U)·Beta(1, n-k)``, so the
interpolated percentile of every resample costs two Beta draws instead of a resample.

:func:`wilson_interval` is the 95% Wilson score interval of a proportion (right at 0 and 1, where
a bootstrap of all-equal values has no width); :func:`mean_stderr` the standard error of a mean as
lm-evaluation-harness reports it (sample standard deviation over √n).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

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


Stat = str | Callable[..., Any]
_PERCENTILE = re.compile(r"^p(\d+(?:\.\d+)?)$")


def statistic(v: np.ndarray, stat: Stat) -> float:
    """``stat`` of ``v``: ``"mean"``, ``"median"``, ``"pNN"`` (``"p99"``, ``"p99.9"``: numpy's
    linear percentile) or a function called as ``f(v, axis=0)``."""
    if callable(stat):
        return float(stat(v, axis=0))
    if stat == "mean":
        return float(np.mean(v))
    return float(np.percentile(v, 100 * _quantile(stat)))


def _quantile(stat: str) -> float:
    if stat == "median":
        return 0.5
    m = _PERCENTILE.match(stat)
    if not m or not 0 <= float(m.group(1)) <= 100:
        raise ValueError(f"unknown statistic {stat!r}: use 'mean', 'median', 'pNN' or a function")
    return float(m.group(1)) / 100


def bootstrap_draws(v: np.ndarray, stat: Stat, rng: np.random.Generator,
                    resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[np.ndarray, str]:
    """``resamples`` draws of ``stat`` over resamples of ``v`` (with replacement), and the method:
    ``"bootstrap"`` (resampled indices, or the exact order-statistic draw for a percentile) or
    ``"normal"`` (a mean over more than ``BOOTSTRAP_MAX_N`` values: ``N(mean, s²/n)``)."""
    v = np.asarray(v, dtype=np.float64)
    n = len(v)
    if n == 0:
        raise ValueError("no values to resample")
    if n == 1:
        return np.full(resamples, statistic(v, stat)), "single value"
    if isinstance(stat, str) and stat != "mean":
        return _quantile_draws(np.sort(v), _quantile(stat), rng, resamples), "bootstrap"
    if stat == "mean" and n > BOOTSTRAP_MAX_N:
        return rng.normal(float(v.mean()), float(v.std(ddof=1)) / np.sqrt(n), resamples), "normal"
    f = (lambda m: m.mean(axis=1)) if stat == "mean" else (lambda m: np.asarray(stat(m, axis=1)))
    draws = np.empty(resamples)
    step = max(1, 2_000_000 // n)  # resamples per block, bounding memory
    for start in range(0, resamples, step):
        b = min(step, resamples - start)
        draws[start:start + b] = f(v[rng.integers(0, n, size=(b, n))])
    return draws, "bootstrap"


def _quantile_draws(x: np.ndarray, q: float, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """The ``q`` quantile (linear interpolation, as ``np.percentile``) of resamples of sorted ``x``."""
    n = len(x)
    h = (n - 1) * q
    k = min(int(np.floor(h)), n - 1)           # 0-based: the (k+1)-th smallest ...
    frac = h - k
    u = rng.beta(k + 1, n - k, size=resamples)  # ... of n uniforms
    low = x[np.minimum((u * n).astype(np.int64), n - 1)]
    if frac == 0 or k + 1 >= n:
        return low
    u_next = u + (1 - u) * rng.beta(1, n - k - 1, size=resamples)
    high = x[np.minimum((u_next * n).astype(np.int64), n - 1)]
    return low + frac * (high - low)


def bootstrap_diff(a: np.ndarray, b: np.ndarray, stat: Stat = "mean", *, resamples: int = BOOTSTRAP_RESAMPLES,
                   seed: int = 0, level: float = 0.95) -> dict[str, Any]:
    """``stat`` of two independent samples ``a`` and ``b``, their difference ``b - a`` and
    ratio ``b / a``, each with a percentile-bootstrap interval at ``level`` (each sample
    resampled on its own; fixed seed). Returns ``{a, b, diff, diff_low, diff_high, ratio,
    ratio_low, ratio_high, n_a, n_b, method}`` (the ratio is None when ``a``'s statistic is 0)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    da, method_a = bootstrap_draws(a, stat, rng, resamples)
    db, method_b = bootstrap_draws(b, stat, rng, resamples)
    sa, sb = statistic(a, stat), statistic(b, stat)
    tail = 100 * (1 - level) / 2
    d_lo, d_hi = np.percentile(db - da, [tail, 100 - tail])
    out: dict[str, Any] = {"a": sa, "b": sb, "diff": sb - sa, "diff_low": float(d_lo), "diff_high": float(d_hi),
                           "ratio": None, "ratio_low": None, "ratio_high": None, "n_a": len(a), "n_b": len(b),
                           "method": method_a if method_a == method_b else f"{method_a} / {method_b}"}
    if sa != 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = db / da
        r = r[np.isfinite(r)]
        out["ratio"] = sb / sa
        if len(r):
            r_lo, r_hi = np.percentile(r, [tail, 100 - tail])
            out["ratio_low"], out["ratio_high"] = float(r_lo), float(r_hi)
    return out


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided p-value of McNemar's exact test for paired binary outcomes: ``b`` pairs where
    only the first is right, ``c`` where only the second is. Under the null hypothesis (both
    equally often right) the discordant pairs split as Binomial(b + c, 1/2), so
    ``p = min(1, 2 · P[X ≤ min(b, c)])`` (McNemar, *Psychometrika* 12, 1947; the exact form as in
    Fagerland, Lydersen & Laake, *BMC Med. Res. Methodol.* 13:91, 2013). 1.0 when no pair
    differs. Summed in log space, so any number of items is exact to rounding."""
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ValueError("McNemar counts must not be negative")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    # log C(n, i) - n log 2 for i = 0..k, summed with the log-sum-exp trick
    logs = np.array([math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                     for j in range(k + 1)]) - n * math.log(2.0)
    top = float(logs.max())
    tail = float(np.exp(top) * np.exp(logs - top).sum())
    return min(1.0, 2.0 * tail)


Z95 = 1.959963984540054     # the standard normal's 97.5th percentile


def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of a proportion, ``k`` successes of ``n`` (Wilson, *JASA* 22,
    1927; recommended over the normal approximation by Brown, Cai & DasGupta, *Statistical
    Science* 16, 2001): the proportions ``p`` whose score test ``|k/n - p| / sqrt(p(1-p)/n)``
    stays under ``z``. Unlike the bootstrap or ``p ± z·se``, it is not of zero width when every
    item is right or every one wrong: 6 of 6 gives [0.610, 1]."""
    k, n = int(k), int(n)
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"a proportion needs 0 <= k <= n and n >= 1 (k={k}, n={n})")
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def mean_stderr(v: np.ndarray) -> float | None:
    """The standard error of the mean as lm-evaluation-harness reports it (``acc_stderr``): the
    sample standard deviation (``n - 1`` in the denominator) over ``sqrt(n)``; for right/wrong
    scores ``sqrt(p(1-p)/(n-1))``. None for fewer than two values."""
    n = len(v)
    if n < 2:
        return None
    return float(np.std(np.asarray(v, dtype=np.float64), ddof=1) / math.sqrt(n))
