"""Where to stop pushing: the saturation rule of ``--rate sweep --stop-at-saturation`` and the error
rule of ``--max-error-rate``.

A sweep that stops at saturation measures one request at a time first, then open-loop rates
growing by :data:`GROWTH` from that throughput (``sweep:N``: at most N rates; default
:data:`MAX_RATES`). After each rate it applies the rule: **saturated** when the achieved request
throughput rose less than :data:`MIN_GAIN` over the previous rate's while the median end-to-end
latency rose more than :data:`MIN_LATENCY_RISE` — more load bought no more work, only waiting. The
run stops there; the summary's ``saturation`` block holds the rule, both points' figures, and the
last rate before the knee (the highest load the server took without saturating).

``--max-error-rate R`` (a share, 0 to 1) stops any run of several points once a point's failed
requests pass R of those sent, with the same kind of evidence.
"""

from __future__ import annotations

from typing import Any

GROWTH = 1.5                # each rate of a stopping sweep is this much the last
MAX_RATES = 10              # the rates a stopping sweep measures at most
MIN_GAIN = 0.10             # throughput gain below this ...
MIN_LATENCY_RISE = 0.25     # ... while the median E2E rises more than this: saturated

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


def knee(points: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last rate point before the stop: the highest load taken without saturating."""
    rated = [p for p in points if p.get("rate") is not None]
    return _facts(rated[-2]) if len(rated) >= 2 else None
