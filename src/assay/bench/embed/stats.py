"""Intervals and paired differences of embedding main scores, by resampling a task's units.

A unit is what a task's main score is an average or a statistic over: a query (retrieval, reranking),
a sentence pair (STS, pair classification), a test item (classification, clustering), a text
(summarization). :func:`~assay.bench.embed.metrics.main_statistic` recomputes the main score on any
subset of units, so one percentile bootstrap serves every task type:

* :func:`main_interval`: the 95% interval of one model's main score (units drawn with replacement);
* :func:`paired_difference`: two models on the same units (same task definition and data, so unit
  ``i`` is the same query for both), both scored on each resample: the difference B − A, its 95%
  interval and a two-sided bootstrap p-value.

Statistics that are not means (Spearman, V-measure, average precision) are recomputed per resample,
never averaged from per-unit pieces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from assay.bench.embed.metrics import main_statistic, unit_count

RESAMPLES = 1000


def _draws(task_type: str, units: Mapping[str, np.ndarray], idx: np.ndarray, main_score: str | None) -> np.ndarray:
    vals = np.array([main_statistic(task_type, units, row, main_score) for row in idx], dtype=float)
    return vals[np.isfinite(vals)]


def main_interval(task_type: str, units: Mapping[str, np.ndarray], *, main_score: str | None = None, seed: int = 0,
                  resamples: int = RESAMPLES) -> tuple[float | None, float | None]:
    """The 95% percentile-bootstrap interval of the main score (``main_score``: the task's, when it
    is not its type's default); ``(None, None)`` with fewer than two units or no finite resample."""
    n = unit_count(task_type, units)
    if n < 2:
        return None, None
    rng = np.random.default_rng(seed)
    vals = _draws(task_type, units, rng.integers(0, n, size=(resamples, n)), main_score)
    if not len(vals):
        return None, None
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(lo), float(hi)


def paired_difference(task_type: str, units_a: Mapping[str, np.ndarray], units_b: Mapping[str, np.ndarray], *,
                      main_score: str | None = None, seed: int = 0, resamples: int = RESAMPLES) -> dict[str, Any]:
    """B − A on the same units: ``{"a", "b", "diff", "diff_ci95", "p_value", "units", "significant"}``."""
    n = unit_count(task_type, units_a)
    if n != unit_count(task_type, units_b):
        raise ValueError(f"the two runs have {n} and {unit_count(task_type, units_b)} units")
    every = np.arange(n)
    a = main_statistic(task_type, units_a, every, main_score)
    b = main_statistic(task_type, units_b, every, main_score)
    out: dict[str, Any] = {"a": a, "b": b, "diff": b - a, "diff_ci95": None, "p_value": None, "units": n,
                           "significant": None}
    if n < 2:
        return out
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    d = np.array([main_statistic(task_type, units_b, row, main_score) - main_statistic(task_type, units_a, row, main_score)
                  for row in idx])
    d = d[np.isfinite(d)]
    if not len(d):
        return out
    lo, hi = np.percentile(d, [2.5, 97.5])
    # two-sided: how often the resampled difference falls on the other side of 0, doubled
    p = min(1.0, 2.0 * min(float(np.mean(d <= 0)), float(np.mean(d >= 0))))
    out.update(diff_ci95=[float(lo), float(hi)], p_value=p, significant=bool(lo > 0 or hi < 0))
    return out
