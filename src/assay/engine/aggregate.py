"""Per-output aggregates (the figures azure-ai-evaluation and Databricks Agent Evaluation report
per metric), accumulated row by row so a run can stream.

For each metric output: mean, median, p90, pass rate (passes / (passes + fails); errors
and skips never count as fails), defect rate for harms (share of scored rows at or above
the defect threshold), the counts of evaluated / skipped / errored rows, and a 95%
confidence interval of the mean. Rows that are turns of a conversation are also rolled up
per conversation (mean of the turns for quality metrics, the worst turn for harms and for
every ``safety``-kind metric: the highest severity, or the lowest yes/no safety rating), with
the conversation-level defect rate beside the row-level one.

Repeats (a judged metric asked several times per row, :mod:`assay.results.repeats`): the row's
score is the mean of its repeats, so the mean and its interval take the row as the unit; the
pass rate counts every repeat, and its interval (``pass_rate_ci95_low``/``_high``) resamples
rows, each with its share of passing repeats; ``repeats``, ``rows_stable_pass``,
``rows_stable_fail``, ``rows_flaky`` and ``flaky_share`` (flaky rows / rows judged) say how
steady the judge was.

Defect rates: a row is a defect when its score is at or above ``defect_threshold`` (below it
when ``defect_below``, for ratings where 1.0 is safe). ``defect_levels`` adds
``defect_rates``: ``{level: share of rows at or above level}`` for each level ("at and above
each threshold level"). :func:`defect_settings` reads them for a metric from the run options.

Not flagged: a one-sided scorer (the embedded safety rules, used when there is no judge) marks
the rows it did not flag ``not_flagged`` (neither a pass nor a fail). They are counted apart
(``not_flagged``, with ``not_flagged_by`` the scorer), kept out of the pass rate, and make the
run's figures bounds: ``defect_rate_bound`` is ``"lower"`` (every defect rate of the output,
row and conversation) and ``mean_bound`` says which side the mean is on (the rows not flagged
carry the scorer's best reading: ``"lower"`` when lower is better, else ``"upper"``).

The interval is :func:`assay.stats.confidence_interval`; ``ci_method`` in the aggregate
says which method it used.

NumPy is imported when the aggregates are computed, at the end of a run, not when the run
starts: its import costs the start, and on a machine with few cores its BLAS threads spin for
a while after it, taking a core from the scoring.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assay.errors import AssayError
from assay.metrics.base import Metric, Score
from assay.scores import NOT_FLAGGED

if TYPE_CHECKING:
    import numpy as np



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
    not_flagged: int = 0
    not_flagged_by: str | None = None
    skip_reasons: dict[str, int] = field(default_factory=dict)
    error_reasons: dict[str, int] = field(default_factory=dict)
    threshold: float | None = None
    conversations: dict[str, list[float]] = field(default_factory=dict)
    defect_levels: tuple[float, ...] = ()
    defect_below: bool = False
    rollup: str | None = None     # "mean" | "worst"; None: mean when higher is better, else worst
    repeats: int = 0              # the most repeats a row of this output had (0: not repeated)
    shares: array = field(default_factory=lambda: array("d"))   # per row: the share of passing repeats
    verdicts: dict[str, int] = field(default_factory=dict)      # per-row verdicts of repeated rows

    def add(self, s: Score, conversation: str | None = None) -> None:
        status = s.status
        repeated = status == "completed" and bool(s.properties) and isinstance(s.properties.get("repeats"), list)
        if status == "completed":
            self.completed += 1
            if s.score is not None:
                self.values.append(s.score)
                if conversation is not None:
                    self.conversations.setdefault(conversation, []).append(s.score)
            if repeated:
                self._add_repeated(s)     # its passes and fails are its repeats'
            elif s.passed is True:
                self.passed += 1
            elif s.passed is False:
                self.failed += 1
            elif s.result == NOT_FLAGGED:
                self.not_flagged += 1
                if self.not_flagged_by is None:
                    self.not_flagged_by = str((s.properties or {}).get("scorer") or "a one-sided scorer")
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

    def _add_repeated(self, s: Score) -> None:
        """A row scored several times (:func:`assay.results.repeats.combine`): its repeats count
        in the pass rate, its share of passing repeats is the row's unit for the interval."""
        from assay.results.repeats import repeat_counts

        props = s.properties
        self.repeats = max(self.repeats, len(props["repeats"]))
        passes, fails = repeat_counts(props)
        self.passed += passes
        self.failed += fails
        if passes + fails:
            self.shares.append(passes / (passes + fails))
        verdict = props.get("verdict")
        if verdict:
            self.verdicts[verdict] = self.verdicts.get(verdict, 0) + 1

    def _repeated(self, out: dict[str, Any]) -> None:
        """The figures of a repeated output (none for others): rows per verdict, the flaky share, and the pass
        rate's interval with the row (its share of passing repeats) as the unit."""
        if not self.repeats:
            return
        from assay.results.repeats import FLAKY, VERDICTS

        out["repeats"] = self.repeats
        for v in VERDICTS:
            out[f"rows_{v}"] = self.verdicts.get(v, 0)
        judged_rows = sum(self.verdicts.values())
        out["flaky_share"] = self.verdicts.get(FLAKY, 0) / judged_rows if judged_rows else None
        out["interval_unit"] = "row"
        if self.shares:
            import numpy as np

            from assay.stats import confidence_interval

            lo, hi, _ = confidence_interval(np.frombuffer(self.shares, dtype=np.float64))
            out["pass_rate_ci95_low"], out["pass_rate_ci95_high"] = lo, hi

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
        if n or self.conversations:
            import numpy as np
        if n:
            from assay.stats import confidence_interval

            v = np.frombuffer(self.values, dtype=np.float64)
            out["mean"] = float(v.mean())
            out["median"] = float(np.median(v))
            out["p90"] = float(np.percentile(v, 90))
            lo, hi, method = confidence_interval(v)
            out["ci95_low"], out["ci95_high"], out["ci_method"] = lo, hi, method
            if self.defect_threshold is not None:
                out["defect_threshold"] = self.defect_threshold
                out["defect_rate"] = self._defect_share(v, self.defect_threshold)
            if self.defect_levels:
                out["defect_rates"] = {_level_key(t): self._defect_share(v, t) for t in self.defect_levels}
        else:
            out["mean"] = None
        if self.conversations:
            # A conversation scores the mean of its turns for quality, the worst turn for harms.
            per_conv = [self._pick(xs) for xs in self.conversations.values()]
            out["conversations"] = len(per_conv)
            out["conversation_mean"] = sum(per_conv) / len(per_conv)
            out["conversation_rollup"] = self._rollup()
            pc = np.asarray(per_conv, dtype=np.float64)
            if self.defect_threshold is not None:
                out["conversation_defect_rate"] = self._defect_share(pc, self.defect_threshold)
            if self.defect_levels:
                out["conversation_defect_rates"] = {_level_key(t): self._defect_share(pc, t)
                                                    for t in self.defect_levels}
        judged = self.passed + self.failed
        out["pass_rate"] = self.passed / judged if judged else None
        out["passed"], out["failed"] = self.passed, self.failed
        self._repeated(out)
        if self.not_flagged:
            out["not_flagged"], out["not_flagged_by"] = self.not_flagged, self.not_flagged_by
            out["mean_bound"] = "upper" if self.higher_is_better else "lower"
            if self.defect_threshold is not None:
                out["defect_rate_bound"] = "lower"
        if self.skip_reasons:
            out["skip_reasons"] = dict(self.skip_reasons)
        if self.error_reasons:
            out["error_reasons"] = dict(self.error_reasons)
        return out

    def _defect_share(self, v: np.ndarray, t: float) -> float:
        return float((v < t).mean()) if self.defect_below else float((v >= t).mean())

    def _rollup(self) -> str:
        return self.rollup or ("mean" if self.higher_is_better else "worst")

    def _pick(self, xs: list[float]) -> float:
        if self._rollup() == "mean":
            return sum(xs) / len(xs)
        return max(xs) if not self.higher_is_better else min(xs)


def all_errored(aggregates: dict[str, dict[str, Any]]) -> list[str]:
    """The outputs that errored on every row they applied to: some rows errored and none was
    scored (rows skipped for a missing input do not count). A run with one of these finished,
    but that metric says nothing."""
    return [name for name, agg in aggregates.items() if agg.get("errored") and not agg.get("evaluated")]


def _level_key(t: float) -> str:
    return str(int(t)) if float(t).is_integer() else str(t)


def run_defect_threshold(raw: Any) -> float | str | None:
    """A run's ``defect_threshold`` option: None (not given), ``"all"`` (the rate at every
    level), or a severity from 0 to 7 (a finite number)."""
    if raw is None or str(raw).strip() == "":
        return None
    if isinstance(raw, str) and raw.strip().lower() in ("all", "each", "every"):
        return "all"
    try:
        val = float(str(raw).strip())
    except ValueError:
        val = math.nan
    if not 0 <= val <= 7:          # nan, inf and -1e309 too
        raise AssayError(f"defect threshold must be a severity from 0 to 7 or 'all', got {raw!r}")
    return val


def defect_settings(m: Metric, options: Any = None) -> dict[str, Any]:
    """The Accumulator settings of metric ``m`` for a run: its defect threshold (the run's
    ``options["defect_threshold"]`` overrides it for 0–7 severity metrics), the per-level rates
    when that option is ``"all"`` (or ``options["defect_levels"]`` is true), and the worst-turn
    roll-up for ``safety``-kind metrics.

    Raises :class:`AssayError` for a defect threshold that is not ``all`` or a number in 0..7
    (whether or not ``m`` has a defect rate: a bad option is never silently ignored).
    """
    opts = options or {}
    out: dict[str, Any] = {}
    if m.kind == "safety":
        out["rollup"] = "worst"
    level = run_defect_threshold(opts.get("defect_threshold"))
    if m.defect_threshold is None:
        return out
    thr: float = m.defect_threshold
    want_levels = bool(opts.get("defect_levels")) or level == "all"
    if isinstance(level, float) and m.scale == "0-7":
        thr = level
    out.update(defect_threshold=thr, defect_below=m.defect_below)
    if want_levels and m.defect_levels:
        out["defect_levels"] = tuple(m.defect_levels)
    return out
