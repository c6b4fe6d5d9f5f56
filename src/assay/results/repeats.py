"""Repeats: a judged metric asked ``N`` times on one row, and what the row's answers say together.

A run with ``repeats=N`` (``assay eval --repeats N``) asks each judged metric ``N`` times per row
(the engine: :mod:`assay.engine.run`). :func:`combine` makes the ``N`` scores of one output one
:class:`~assay.scores.Score` for the row:

* ``score`` (and ``value``, for numbers) is the mean of the repeats' scores, so the run's mean,
  its interval and a regression gate's per-row pairing use the row's mean: the row is the unit;
* ``passed`` is the majority of the repeats judged pass or fail (a tie fails);
* ``properties`` keep every repeat (``repeats``: index, value, score, passed, result, status,
  reason, cached), the share of passing repeats (``pass_share``), the spread of the scores
  (``score_stdev``, ``score_min``, ``score_max``) and the row's ``verdict``: ``stable_pass``
  (every judged repeat passed), ``stable_fail`` (every one failed) or ``flaky`` (some of each).

Repeats that errored are left out of the row's figures (and counted in ``repeats_errored``);
when every repeat errored, the row's score is the error. The run's aggregate of such an output
(:mod:`assay.engine.aggregate`) counts the repeats in the pass rate and takes the row as the
unit of its intervals; :func:`verdict_counts` and :data:`VERDICTS` name its flaky figures.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from assay.scores import Score

STABLE_PASS, STABLE_FAIL, FLAKY = "stable_pass", "stable_fail", "flaky"
VERDICTS = (STABLE_PASS, STABLE_FAIL, FLAKY)
#: the properties of a score that are the repeats' summary (the rest are repeat 0's own)
SUMMARY_KEYS = ("repeats", "pass_share", "score_stdev", "score_min", "score_max", "verdict", "repeats_errored")


def verdict_of(passes: int, fails: int) -> str | None:
    """A row's verdict from its judged repeats; None when none was judged pass or fail."""
    if passes and fails:
        return FLAKY
    if passes:
        return STABLE_PASS
    if fails:
        return STABLE_FAIL
    return None


def _entry(k: int, s: Score) -> dict[str, Any]:
    props = s.properties or {}
    return {"repeat": k, "value": s.value, "score": s.score, "passed": s.passed, "result": s.result,
            "status": s.status, "reason": s.reason, "cached": props.get("cached")}


def _summed(scores: Sequence[Score]) -> dict[str, Any]:
    """The judge's tokens, calls and latency over every repeat."""
    out: dict[str, Any] = {}
    for key in ("input_tokens", "output_tokens", "judge_calls", "latency_s"):
        vals = [(s.properties or {}).get(key) for s in scores]
        nums = [v for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if nums:
            out[key] = round(sum(nums), 6) if key == "latency_s" else sum(nums)
    cached = [(s.properties or {}).get("cached") for s in scores]
    if any(c is not None for c in cached):
        out["cached"] = all(bool(c) for c in cached)
    return out


def _spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"score_stdev": None, "score_min": None, "score_max": None}
    mean = sum(values) / len(values)
    var = sum((x - mean) ** 2 for x in values) / (len(values) - 1) if len(values) > 1 else 0.0
    return {"score_stdev": round(math.sqrt(var), 6), "score_min": min(values), "score_max": max(values)}


def combine(scores: Sequence[Score]) -> Score:
    """The row's score of one output from its repeats' scores (in repeat order); see the module
    docstring. One score comes back as it is; so does a skipped one (every repeat is skipped
    alike)."""
    if len(scores) == 1 or scores[0].status == "skipped":
        return scores[0]
    entries = [_entry(k, s) for k, s in enumerate(scores)]
    done = [s for s in scores if s.status == "completed"]
    errored = len(scores) - len(done)
    base = {**(scores[0].properties or {}), **_summed(scores), "repeats": entries, "repeats_errored": errored}
    if not done:
        first = scores[0]
        return Score.error(f"every one of {len(scores)} repeats errored; the first: {first.reason}", **base)
    passes = sum(s.passed is True for s in done)
    fails = sum(s.passed is False for s in done)
    values = [float(s.score) for s in done if s.score is not None and not math.isnan(float(s.score))]
    verdict = verdict_of(passes, fails)
    judged = passes + fails
    props = {**(done[0].properties or {}), **base, "pass_share": passes / judged if judged else None,
             **_spread(values), "verdict": verdict}
    mean = sum(values) / len(values) if values else None
    passed = (passes > fails) if judged else None
    result = "pass" if passed is True else "fail" if passed is False else done[0].result
    return Score(value=mean if mean is not None else done[0].value, score=mean, passed=passed,
                 result=result, reason=_reason(verdict, passes, judged, len(scores), values, done[0].reason),
                 status="completed", threshold=done[0].threshold, properties=props)


def _reason(verdict: str | None, passes: int, judged: int, n: int, values: Sequence[float],
            first: str | None) -> str:
    what = (verdict or "not judged").replace("_", " ")
    text = f"{what}: {passes} of {judged} judged repeats passed" if judged else f"{what}: {n} repeats"
    if values:
        text += f" (scores {min(values):g}–{max(values):g})"
    return f"{text}; repeat 0: {first}" if first else text


def is_repeated(score: Any) -> bool:
    """True for a row's score made of several repeats (:func:`combine`)."""
    props = getattr(score, "properties", None) if not isinstance(score, Mapping) else score
    return isinstance(props, Mapping) and isinstance(props.get("repeats"), list)


def repeat_counts(props: Mapping[str, Any]) -> tuple[int, int]:
    """``(passes, fails)`` of a combined score's completed repeats."""
    reps = [e for e in props.get("repeats") or () if isinstance(e, Mapping) and e.get("status") == "completed"]
    return sum(e.get("passed") is True for e in reps), sum(e.get("passed") is False for e in reps)


def verdict_counts(agg: Mapping[str, Any]) -> dict[str, int]:
    """``{verdict: rows}`` of an output's aggregate (empty for an output that was not repeated)."""
    return {v: int(agg.get(f"rows_{v}") or 0) for v in VERDICTS} if agg.get("repeats") else {}


def repeats_line(output: str, agg: Mapping[str, Any]) -> str | None:
    """One line on how steady a repeated output's judge was (None for an output not repeated):
    ``groundedness: 5 repeats a row; 3 of 12 rows flaky (25%), 9 stable pass, 0 stable fail;
    pass rate 0.875, 95% interval over rows 0.760–0.979``."""
    counts = verdict_counts(agg)
    if not counts:
        return None
    rows = sum(counts.values())
    share = agg.get("flaky_share")
    text = (f"{output}: {agg['repeats']} repeats a row; {counts[FLAKY]} of {rows} rows flaky"
            + (f" ({share:.0%})" if share is not None else "")
            + f", {counts[STABLE_PASS]} stable pass, {counts[STABLE_FAIL]} stable fail")
    lo, hi, rate = agg.get("pass_rate_ci95_low"), agg.get("pass_rate_ci95_high"), agg.get("pass_rate")
    if rate is not None and lo is not None and hi is not None:
        text += f"; pass rate {rate:.3f}, 95% interval over rows {lo:.3f}–{hi:.3f}"
    return text


def iter_flaky(rows: Any) -> Iterator[dict[str, Any]]:
    """The rows whose verdict changed across repeats, in row order: per flaky row and output,
    ``{"idx", "row_id", "output", "metric", "pass_share", "score", "repeats"}`` (each repeat's
    score, result and reason). ``rows``: stored rows (``Store.iter_scored``) with ``idx``,
    ``row_id`` and ``scores`` (``{metric: {output: Score}}``)."""
    for row in rows:
        for metric, outs in (row.scores or {}).items():
            for output, s in outs.items():
                props = s.properties or {}
                if props.get("verdict") == FLAKY:
                    yield {"idx": row.idx, "row_id": row.row_id, "metric": metric, "output": output,
                           "pass_share": props.get("pass_share"), "score": s.score,
                           "repeats": list(props.get("repeats") or ())}
