"""Where to stop pushing: the saturation rule of ``--rate sweep --stop-at-saturation`` and the error
rule of ``--max-error-rate``.

A sweep that stops at saturation measures one request at a time first, then open-loop rates
growing by :data:`GROWTH` from that throughput (``sweep:N``: at most N rates; default
:data:`MAX_RATES`). After each rate it applies the rule: **saturated** when the achieved request
throughput rose less than :data:`MIN_GAIN` over the previous rate's while the median end-to-end
latency rose more than :data:`MIN_LATENCY_RISE` — more load bought no more work, only waiting.

The ×1.5 steps leave the knee somewhere in a wide span, so the sweep then narrows it down: a rate
point **kept up** when its median end-to-end latency is within :data:`MIN_LATENCY_RISE` of the
sequential point's (an unloaded answer: a server past its capacity queues requests, and the queue
grows through the point), else it **fell behind**. Between the lowest rate from which every higher
rate fell behind and the highest below it that kept up, the sweep measures their geometric mean, again and again (at
most :data:`MAX_REFINE` points), until the two are within :data:`KNEE_TOLERANCE` of each other.
The run stops there; the summary's ``stop_rule`` holds the rule, the two points' figures that
fired it, the bracket, and the knee: the highest rate that kept up.

``--max-error-rate R`` (a share, 0 to 1) stops any run of several points once a point's failed
requests pass R of those sent, with the same kind of evidence.
"""

from __future__ import annotations

from typing import Any

GROWTH = 1.5                # each rate of a stopping sweep is this much the last
MAX_RATES = 10              # the rates a stopping sweep measures at most
MIN_GAIN = 0.10             # throughput gain below this ...
MIN_LATENCY_RISE = 0.25     # ... while the median E2E rises more than this: saturated
KNEE_TOLERANCE = 0.05       # the knee is narrowed down until the bracket is this narrow
MAX_REFINE = 6              # the points spent narrowing it at most

RULE = (f"saturated when the request throughput gains less than {MIN_GAIN:.0%} over the previous rate "
        f"while the median end-to-end latency rises more than {MIN_LATENCY_RISE:.0%}")


def stopping_rates(sequential_throughput: float, count: int) -> list[float]:
    """The rates a stopping sweep tries in turn: the sequential throughput × GROWTH, × GROWTH² ..."""
    base = max(sequential_throughput, 1e-3)
    return [float(f"{base * GROWTH ** k:.3g}") for k in range(1, count + 1)]


def _e2e_p50(point: dict[str, Any]) -> float | None:
    d = (point.get("metrics") or {}).get("e2e")
    return d.get("p50") if d else None


def _facts(point: dict[str, Any]) -> dict[str, Any]:
    return {"rate": point.get("rate"), "concurrency": point.get("concurrency"),
            "request_throughput": point.get("request_throughput"), "e2e_p50": _e2e_p50(point),
            "failure_rate": (point.get("validity") or {}).get("failure_rate")}


def saturated(prev: dict[str, Any], cur: dict[str, Any]) -> dict[str, Any] | None:
    """The evidence that ``cur`` is past the knee (see :data:`RULE`), or None."""
    t0, t1 = prev.get("request_throughput"), cur.get("request_throughput")
    l0, l1 = _e2e_p50(prev), _e2e_p50(cur)
    if not (t0 and t1 is not None and l0 and l1 is not None):
        return None
    gain, rise = t1 / t0 - 1, l1 / l0 - 1
    if gain < MIN_GAIN and rise > MIN_LATENCY_RISE:
        return {"reason": "saturation", "rule": RULE, "throughput_gain": gain, "e2e_p50_rise": rise,
                "previous": _facts(prev), "at": _facts(cur),
                "message": (f"saturated at {cur.get('rate'):g} req/s: throughput {t1:.3g} req/s, {gain:+.0%} over "
                            f"{prev.get('rate'):g} req/s, while the median E2E rose {rise:+.0%}; the sweep stopped")}
    return None


def too_many_errors(cur: dict[str, Any], max_error_rate: float) -> dict[str, Any] | None:
    """The evidence that ``cur`` failed more than ``max_error_rate`` of its requests, or None."""
    rate = (cur.get("validity") or {}).get("failure_rate")
    if rate is None or rate <= max_error_rate:
        return None
    load = f"{cur['rate']:g} req/s" if cur.get("rate") is not None else f"concurrency {cur.get('concurrency')}"
    return {"reason": "error rate", "max_error_rate": max_error_rate, "at": _facts(cur),
            "message": f"{rate:.0%} of the requests failed at {load}, more than --max-error-rate "
                       f"{max_error_rate:.0%}; no further point was run"}


KEPT_UP = (f"a rate kept up when its median end-to-end latency was within {MIN_LATENCY_RISE:.0%} of one request "
           f"at a time; the knee was narrowed down to within {KNEE_TOLERANCE:.0%}")


def kept_up(point: dict[str, Any], sequential: dict[str, Any]) -> bool | None:
    """Whether a rate point's median E2E stayed within MIN_LATENCY_RISE of the sequential point's."""
    l0, l1 = _e2e_p50(sequential), _e2e_p50(point)
    if not l0 or l1 is None:
        return None
    return l1 / l0 - 1 <= MIN_LATENCY_RISE


def bracket(points: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The lowest rate point from which every higher rate fell behind, and the highest below it that
    kept up; None when there is no such pair (``points[0]`` is the sequential point)."""
    rated = sorted((p for p in points[1:] if p.get("rate") is not None), key=lambda p: p["rate"])
    verdicts = [(p, kept_up(p, points[0])) for p in rated]
    k = len(verdicts)           # the lowest rate from which every rate above fell behind too (a lone
    while k and verdicts[k - 1][1] is False:        # slow point below a faster one is noise, not the knee)
        k -= 1
    if k == len(verdicts):
        return None
    hi = verdicts[k][0]
    below = [p for p, ok in verdicts if ok and p["rate"] < hi["rate"]]
    return (below[-1], hi) if below else None


def next_rate(points: list[dict[str, Any]], refined: int) -> float | None:
    """The next rate to narrow the knee down with (the bracket's geometric mean), or None when it is
    narrow enough, cannot be narrowed, or MAX_REFINE points were spent."""
    got = bracket(points)
    if got is None or refined >= MAX_REFINE:
        return None
    lo, hi = got[0]["rate"], got[1]["rate"]
    if hi / lo - 1 <= KNEE_TOLERANCE:
        return None
    mid = float(f"{(lo * hi) ** 0.5:.4g}")
    return mid if lo < mid < hi else None


def knee(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The stop's knee: the highest rate that kept up and the lowest that fell behind, with the
    bracket's width; else (no such pair) the last rate point before the stop."""
    got = bracket(points)
    if got is None:
        rated = [p for p in points if p.get("rate") is not None]
        return {"rule": KEPT_UP, "knee": _facts(rated[-2]) if len(rated) >= 2 else None, "fell_behind": None,
                "width": None, "narrowed": False}
    lo, hi = got
    width = hi["rate"] / lo["rate"] - 1
    return {"rule": KEPT_UP, "knee": _facts(lo), "fell_behind": _facts(hi), "width": width,
            "narrowed": width <= KNEE_TOLERANCE}


def knee_message(k: dict[str, Any]) -> str:
    """The knee in words, for the run's notes."""
    if k.get("fell_behind") is None:
        return "no rate kept up below one that fell behind: the knee was not narrowed down"
    lo, hi = k["knee"]["rate"], k["fell_behind"]["rate"]
    how = "" if k["narrowed"] else f" (not narrowed to {KNEE_TOLERANCE:.0%}: {MAX_REFINE} points spent)"
    return f"the knee: {lo:g} req/s kept up, {hi:g} req/s fell behind, {k['width']:.1%} apart{how}"
