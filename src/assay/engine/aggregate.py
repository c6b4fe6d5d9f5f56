"""Per-output aggregates (SPEC §4), accumulated row by row so a run can stream.

For each metric output: mean, median, p90, pass rate (passes / (passes + fails); errors
and skips never count as fails), defect rate for harms (share of scored rows at or above
the defect threshold), the counts of evaluated / skipped / errored rows, and a 95%
confidence interval of the mean. Rows that are turns of a conversation are also rolled up
per conversation (mean of the turns for quality metrics, the worst turn for harms).

The interval is a percentile bootstrap of the mean (1,000 resamples, fixed seed).
Resampling n values with replacement is the same as drawing multinomial counts over the
distinct values, so when there are at most ``HISTOGRAM_MAX_DISTINCT`` distinct values
(judge scales, pass/fail, most real metrics) it is computed exactly that way at any n, in
time independent of n. With more distinct values it resamples indices up to
``BOOTSTRAP_MAX_N`` values, and above that uses the normal approximation
``mean ± 1.96·s/√n``, which the bootstrap of a mean converges to. ``ci_method`` in the
aggregate says which one was used.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from assay.metrics.base import Score

BOOTSTRAP_MAX_N = 5_000
BOOTSTRAP_RESAMPLES = 1_000
HISTOGRAM_MAX_DISTINCT = 256


@dataclass
class Accumulator:
    metric: str
    output: str
    higher_is_better: bool = True
    defect_threshold: float | None = None
    values: array = field(default_factory=lambda: array("d"))
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errored: int = 0
    completed: int = 0
    skip_reasons: dict[str, int] = field(default_factory=dict)
    error_reasons: dict[str, int] = field(default_factory=dict)
    threshold: float | None = None
    conversations: dict[str, list[float]] = field(default_factory=dict)

    def add(self, s: Score, conversation: str | None = None) -> None:
        status = s.status
        if status == "completed":
            self.completed += 1
            if s.score is not None:
                self.values.append(s.score)
                if conversation is not None:
                    self.conversations.setdefault(conversation, []).append(s.score)
            if s.passed is True:
                self.passed += 1
            elif s.passed is False:
                self.failed += 1
            if self.threshold is None:
                self.threshold = s.threshold
        elif status == "skipped":
            self.skipped += 1
            key = s.reason or "skipped"
            self.skip_reasons[key] = self.skip_reasons.get(key, 0) + 1
        else:
            self.errored += 1
            key = (s.reason or "error")[:200]
            self.error_reasons[key] = self.error_reasons.get(key, 0) + 1

    def result(self) -> dict[str, Any]:
        n = len(self.values)
        out: dict[str, Any] = {
            "metric": self.metric,
            "evaluated": self.completed,
            "skipped": self.skipped,
            "errored": self.errored,
            "threshold": self.threshold,
            "higher_is_better": self.higher_is_better,
        }
        if n:
            v = np.frombuffer(self.values, dtype=np.float64)
            out["mean"] = float(v.mean())
            out["median"] = float(np.median(v))
            out["p90"] = float(np.percentile(v, 90))
            lo, hi, method = confidence_interval(v)
            out["ci95_low"], out["ci95_high"], out["ci_method"] = lo, hi, method
            if self.defect_threshold is not None:
                out["defect_rate"] = float((v >= self.defect_threshold).mean())
        else:
            out["mean"] = None
        if self.conversations:
            # A conversation scores the mean of its turns for quality, the worst turn for harms.
            pick = (lambda xs: sum(xs) / len(xs)) if self.higher_is_better else max
            per_conv = [pick(xs) for xs in self.conversations.values()]
            out["conversations"] = len(per_conv)
            out["conversation_mean"] = sum(per_conv) / len(per_conv)
        judged = self.passed + self.failed
        out["pass_rate"] = self.passed / judged if judged else None
        out["passed"], out["failed"] = self.passed, self.failed
        if self.skip_reasons:
            out["skip_reasons"] = dict(self.skip_reasons)
        if self.error_reasons:
            out["error_reasons"] = dict(self.error_reasons)
        return out


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
