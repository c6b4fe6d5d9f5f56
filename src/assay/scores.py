"""What one metric gives for one row (:class:`Score`) and what it may use besides the row
(:class:`EvalContext`).

The bottom layer, beside :mod:`assay.records`: the judges (:mod:`assay.judges`) and the metrics
(:mod:`assay.metrics`) both build scores. :mod:`assay.metrics.base` re-exports both names.

Pass/fail always compares floats: ``score >= threshold`` when higher is better, ``score <=
threshold`` otherwise, never the integer part of the score.

A *one-sided* scorer (the embedded safety rules, which can find harm but cannot clear a text)
returns its score with ``result="not_flagged"``: :meth:`Score.judged` makes it a ``fail`` when
the score is on the failing side of the threshold, and otherwise leaves it ``not_flagged`` with
``passed`` None, so that it counts neither as a pass nor as a fail (``docs/results.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["completed", "skipped", "error"]
Result = Literal["pass", "fail", "unknown", "not_applicable", "not_flagged"]
NOT_FLAGGED = "not_flagged"   # what a one-sided scorer did not flag: neither a pass nor a fail

SCORE_KEYS = ("value", "score", "passed", "result", "reason", "status", "threshold", "properties")


@dataclass(slots=True)
class Score:
    """One metric output for one row: ``value``, ``score``, ``passed``, ``result``, ``reason``,
    ``status``, ``threshold``, ``properties`` (the keys of :data:`SCORE_KEYS`)."""

    value: Any = None
    score: float | None = None
    passed: bool | None = None
    result: Result = "unknown"
    reason: str | None = None
    status: Status = "completed"
    threshold: float | None = None
    properties: dict[str, Any] = field(default_factory=dict)

    def __reduce__(self):
        # Positional and flat: scores cross process boundaries by the thousand.
        return (Score, (self.value, self.score, self.passed, self.result, self.reason, self.status,
                        self.threshold, self.properties))

    @classmethod
    def skipped(cls, reason: str) -> Score:
        return cls(result="not_applicable", reason=reason, status="skipped")

    @classmethod
    def error(cls, reason: str, **properties: Any) -> Score:
        return cls(result="unknown", reason=reason, status="error", properties=properties)

    def judged(self, threshold: float | None, higher_is_better: bool) -> Score:
        """Fill ``score``, ``threshold``, ``passed`` and ``result`` from ``value``."""
        if self.status != "completed":
            return self
        if self.score is None and isinstance(self.value, (int, float)) and not isinstance(self.value, bool):
            self.score = float(self.value)
        if self.threshold is None:
            self.threshold = threshold
        if self.passed is None and self.score is not None and self.threshold is not None:
            if math.isnan(self.score):
                self.passed = None
            elif higher_is_better:
                self.passed = self.score >= float(self.threshold)
            else:
                self.passed = self.score <= float(self.threshold)
        if self.result == NOT_FLAGGED:
            return self._one_sided()
        if self.result == "unknown":
            if self.passed is True:
                self.result = "pass"
            elif self.passed is False:
                self.result = "fail"
            elif self.threshold is None:
                self.result = "not_applicable"
        return self

    def _one_sided(self) -> Score:
        # a one-sided scorer: a score on the failing side is a fail; anything else is not a pass
        if self.passed is False:
            self.result = "fail"
        else:
            self.passed = None
        return self


@dataclass(frozen=True)
class EvalContext:
    """What a metric may use besides the record: the judge model and run options."""

    judge: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
