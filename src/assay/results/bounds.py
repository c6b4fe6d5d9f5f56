"""What a run's figures mean when a one-sided scorer scored some rows: *not flagged* rows, and
the figures that are bounds because of them, in words every view shares (the ``assay eval``
table, the CI reports, the gates, the dashboard).

The embedded safety classifier (the safety metrics with no judge) can find harm but cannot clear
a text: a row it does not flag is ``not_flagged`` (:data:`assay.scores.NOT_FLAGGED`), neither a
pass nor a fail. The run's aggregate of such an output (:mod:`assay.engine.aggregate`) carries
``not_flagged`` (a count), ``not_flagged_by`` (the scorer), ``mean_bound`` and, with a defect
rate, ``defect_rate_bound`` = ``"lower"``: the true defect rate is at least the one shown. The
pass rate counts only the rows passed or failed; :func:`pass_rate_range` is the range the pass
rate over every scored row lies in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

NO_JUDGE = "rules, no judge"


def not_flagged(agg: Mapping[str, Any] | None) -> int:
    """How many rows of the output a one-sided scorer left not flagged (0 for most outputs)."""
    return int((agg or {}).get("not_flagged") or 0)


def by(agg: Mapping[str, Any]) -> str:
    """Who left the rows not flagged, in a few words: ``rules, no judge`` for the embedded
    safety classifier, else the scorer's name."""
    who = str(agg.get("not_flagged_by") or "")
    return NO_JUDGE if (not who or "rules" in who) else who


def _num(v: float, digits: int) -> str:
    return f"{v:.{digits}f}"


def _pct(v: float, digits: int) -> str:
    return f"{100 * v:.{max(0, digits - 2)}f}%"


def bounded_rate(agg: Mapping[str, Any], key: str = "defect_rate", *, digits: int = 3,
                 percent: bool = False) -> str | None:
    """A defect rate as shown: ``0.125``, or ``≥ 0.125 (lower bound: rules, no judge)`` when
    rows were not flagged; None without the figure."""
    v = agg.get(key)
    if v is None:
        return None
    text = (_pct if percent else _num)(float(v), digits)
    if not_flagged(agg) and agg.get("defect_rate_bound") == "lower":
        return f"≥ {text} (lower bound: {by(agg)})"
    return text


def bounded_mean(agg: Mapping[str, Any], fmt: Callable[[Any], str], key: str = "mean") -> str:
    """The mean (or ``key``: ``median``, ``p90``) as shown: ``fmt(value)``, with ``≥`` or ``≤``
    before it when it is a bound (``mean_bound``: the rows not flagged carry the scorer's best
    reading, so every statistic of the scores is on the same side)."""
    text = fmt(agg.get(key))
    side = agg.get("mean_bound") if not_flagged(agg) else None
    if agg.get(key) is None or side is None:
        return text
    return ("≥ " if side == "lower" else "≤ ") + text


def pass_rate_text(agg: Mapping[str, Any], fmt: Callable[[Any], str]) -> str:
    """The pass rate as shown: ``fmt(pass_rate)``, with the rows not flagged beside it (they are
    not in it): ``— (24 not flagged)``, ``0.000 (1 judged; 5 not flagged)``."""
    text = fmt(agg.get("pass_rate"))
    nf = not_flagged(agg)
    if not nf:
        return text
    judged = int(agg.get("passed") or 0) + int(agg.get("failed") or 0)
    return f"{text} ({judged} judged; {nf} not flagged)" if judged else f"{text} ({nf} not flagged)"


def pass_rate_range(agg: Mapping[str, Any]) -> tuple[float, float] | None:
    """The range the pass rate over every row judged or not flagged lies in, ``(passed / n,
    (passed + not flagged) / n)``; None when no row was not flagged (the pass rate is exact)."""
    nf = not_flagged(agg)
    if not nf:
        return None
    passed, failed = int(agg.get("passed") or 0), int(agg.get("failed") or 0)
    n = passed + failed + nf
    return passed / n, (passed + nf) / n


def note(agg: Mapping[str, Any], output: str | None = None) -> str | None:
    """One line for an output with rows not flagged, or None: ``violence: 24 of 24 rows not
    flagged (rules, no judge): neither passes nor fails, not in the pass rate; the defect rate is a
    lower bound``."""
    nf = not_flagged(agg)
    if not nf:
        return None
    total = int(agg.get("passed") or 0) + int(agg.get("failed") or 0) + nf
    name = output or str(agg.get("metric") or "")
    line = (f"{name}: {nf} of {total} rows not flagged ({by(agg)}): neither passes nor fails, not in the pass "
            "rate")
    if agg.get("defect_rate_bound") == "lower":
        line += "; the defect rate is a lower bound"
    return line + " (the embedded rules cannot clear a response; --judge scores every row)"


def notes_line(metrics: Mapping[str, Mapping[str, Any]]) -> str | None:
    """One line for every output of a run with rows not flagged, or None: ``not flagged (rules,
    no judge) ...: violence 24 of 24, safety 23 of 24``."""
    counts = []
    who = set()
    for o, agg in metrics.items():
        nf = not_flagged(agg)
        if nf:
            total = int(agg.get("passed") or 0) + int(agg.get("failed") or 0) + nf
            counts.append(f"{o} {nf} of {total}")
            who.add(by(agg))
    if not counts:
        return None
    return (f"not flagged ({', '.join(sorted(who))}): {', '.join(counts)} rows; neither passes nor fails, not in the "
            "pass rate, and the defect rates are lower bounds (the embedded rules cannot clear a response; --judge "
            "scores every row)")


__all__ = ["NO_JUDGE", "bounded_mean", "bounded_rate", "by", "not_flagged", "note", "notes_line", "pass_rate_range",
           "pass_rate_text"]


# The aggregate keys the bound wording reads: a view that copies part of an aggregate (a compare
# cell, a trend point) copies these too, so it can show the same words.
BOUND_KEYS = ("not_flagged", "not_flagged_by", "mean_bound", "defect_rate_bound", "passed", "failed")


def bound_fields(agg: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``agg`` that say how its figures are bounds (empty when no row was not flagged)."""
    return {k: agg.get(k) for k in BOUND_KEYS} if not_flagged(agg) else {}

