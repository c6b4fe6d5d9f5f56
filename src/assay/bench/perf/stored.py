"""What is kept of a perf run (docs/bench.md, schema ``assay.bench.perf/1``): the schema tag (defined
with the typed summary, :mod:`assay.bench.perf.summary`), the check of a summary (it reads as one), the
headline a list reads per point (the stored ``metrics`` column), and the tokens a stored run spent (for
what it cost)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.bench.cost import count
from assay.bench.perf.summary import SCHEMA, PerfPoint, PerfSummary
from assay.errors import AssayError


def check(summary: Mapping[str, Any]) -> None:
    """A perf summary has a list of points, and reads as a :class:`PerfSummary`."""
    if not isinstance(summary.get("points"), list):
        raise AssayError("not a perf result: 'points' must be a list")
    PerfSummary.load(summary)


def points(summary: Mapping[str, Any]) -> int:
    """How many points a perf run has (its samples are kept per point)."""
    return len(summary["points"])


def task(summary: Mapping[str, Any]) -> str | None:
    """The stored ``task`` of a perf run: its mode."""
    return summary.get("mode")


def headline(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What a list shows of each point of a perf run (the ``metrics`` column of a perf benchmark)."""
    return [point_headline(p) for p in PerfSummary.load(summary).points]


def point_headline(point: PerfPoint | Mapping[str, Any]) -> dict[str, Any]:
    """What a list shows of one perf point (a figure the point lacks is None)."""
    p = point if isinstance(point, PerfPoint) else PerfPoint.read(point)
    req = p.requests
    return {"concurrency": p.concurrency, "rate": p.rate, "ok": req.ok, "failed": req.raw("failed"),
            "request_throughput": p.request_throughput, "output_throughput": p.output_throughput,
            "ttft_p50": p.metric("ttft").p50, "ttft_p99": p.metric("ttft").p99, "itl_p50": p.metric("itl").p50,
            "e2e_p50": p.metric("e2e").p50, "latency_index": p.latency_index,
            "throughput_index": p.throughput_index, "valid": p.validity.valid}


def benchmark_tokens(details: Mapping[str, Any] | None) -> tuple[float | None, float | None, str]:
    """(input tokens, output tokens, how they were found) of a stored perf run: per point
    ``input_total`` / ``output_total`` when the run wrote them, else the ok
    requests × the mean tokens per request (an estimate: failed requests are not counted)."""
    pts = (details or {}).get("points")
    if not isinstance(pts, list) or not pts:
        return None, None, "not recorded"
    tin = tout = 0.0
    how = set()
    for pt in pts:
        if not isinstance(pt, Mapping):
            return None, None, "not recorded"
        tok = pt.get("tokens") if isinstance(pt.get("tokens"), Mapping) else {}
        i_tot, o_tot = count(tok.get("input_total")), count(tok.get("output_total"))
        if i_tot is not None and o_tot is not None:
            tin, tout = tin + i_tot, tout + o_tot
            how.add("totals")
            continue
        req = pt.get("requests") if isinstance(pt.get("requests"), Mapping) else {}
        ok, i_mean, o_mean = count(req.get("ok")), count(tok.get("input_mean")), count(tok.get("output_mean"))
        if ok is None or i_mean is None or o_mean is None:
            return None, None, "not recorded"
        tin, tout = tin + ok * i_mean, tout + ok * o_mean
        how.add("estimate")
    label = ("point totals" if how == {"totals"} else
             "ok requests × mean tokens" if how == {"estimate"} else "point totals and ok requests × mean tokens")
    return _whole(tin), _whole(tout), label


def _whole(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


__all__ = ["SCHEMA", "benchmark_tokens", "check", "headline", "point_headline", "points", "task"]
