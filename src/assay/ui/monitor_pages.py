"""The dashboard's ``/monitor`` pages: what ``assay monitor`` received, scored and alerted on.

- ``/monitor?since=24h&window=5m``: per metric the store has scores for, each output's aggregate
  per window over time with its 95% interval as a band and the alert rules' firings and clearings
  as marks (the windows are :func:`assay.monitor.alerts.windows`, the ones ``assay monitor check``
  decides on); below, per window, the traces' latency (median and p95), tokens and model cost
  (:meth:`assay.store.spans.SpanLog.usage`) and the scoring's own cost. A point opens its window;
- ``/monitor/traces?start=NS&end=NS``: the traces that started in a window: id, start, service,
  root span, latency, tokens and every metric's scores;
- ``/monitor/traces/{trace_id}``: a trace as a span tree (parent and child from the spans table,
  each span's children by start time) with every score and reason of that trace.

It needs no ``monitor.yaml``: the metrics are those with scores in the store, and a metric's window
is the one its recorded alerts used (else ``window=``, default 5m). The same data is JSON under
``/api/monitor``. Text from spans is untrusted and shown escaped, as everywhere in the dashboard.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse, Response

from assay.errors import AssayError
from assay.store import Store

DEFAULT_SINCE = "24h"
DEFAULT_WINDOW = "5m"
MAX_TRACES = 1000          # traces listed for one window
MAX_DEPTH_CLASS = 24       # indentation steps of the span tree (deeper spans share the last)


def _seconds(text: str | None, what: str, default: str) -> float:
    from assay.monitor.config import duration

    try:
        return duration(text or default)
    except ValueError as e:
        raise AssayError(f"{what}: {e}") from None


def window_text(seconds: float) -> str:
    """``300`` -> ``5m``: the largest unit that divides it."""
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n and seconds % n == 0:
            return f"{int(seconds // n)}{unit}"
    return f"{seconds:g}s"


def _window_of(metric: str, alerts: list[dict[str, Any]], given: float | None) -> tuple[float, str]:
    if given is not None:
        return given, "as asked"
    mine = [a for a in alerts if a["metric"] == metric and a.get("window_end_ns") and a.get("window_start_ns")]
    if mine:
        return (mine[-1]["window_end_ns"] - mine[-1]["window_start_ns"]) / 1e9, "the window of its alerts"
    return _seconds(DEFAULT_WINDOW, "window", DEFAULT_WINDOW), "the default"


def _traces_href(start: int, end: int, metric: str | None = None) -> str:
    q = {"start": start, "end": end, **({"metric": metric} if metric else {})}
    return "/monitor/traces?" + urlencode(q)


def _metric_view(log: Any, name: str, since_ns: int, now_ns: int, alerts: list[dict[str, Any]],
                 given: float | None) -> dict[str, Any]:
    """One metric's windows (as ``assay monitor check`` computes them) as chart series."""
    from assay.metrics.base import REGISTRY, load_builtin_metrics
    from assay.monitor.alerts import windows
    from assay.monitor.config import MetricConfig

    load_builtin_metrics()
    w_s, why = _window_of(name, alerts, given)
    view: dict[str, Any] = {"name": name, "window": window_text(w_s), "window_from": why, "outputs": [],
                            "alerts": [a for a in alerts if a["metric"] == name and a["window_start_ns"] >= since_ns],
                            "note": None}
    if name not in REGISTRY:
        view["note"] = f"the metric {name!r} is not known to this process (a plugin not loaded?): no windows"
        return view
    mc = MetricConfig(name=name, window=view["window"], window_s=w_s)
    wins = windows(log, mc, since_ns, now_ns, now_ns)
    outputs = sorted({o for w in wins for o in w.aggregates}, key=lambda o: (o != name, o))
    for output in outputs:
        points = []
        for w in wins:
            a = w.aggregates.get(output) or {}
            points.append({"t0": w.start_ns, "t1": w.end_ns, "y": a.get("mean"), "lo": a.get("ci95_low"),
                           "hi": a.get("ci95_high"), "n": len(w.trace_ids), "closed": w.closed,
                           "pass_rate": a.get("pass_rate"), "defect_rate": a.get("defect_rate"),
                           "href": _traces_href(w.start_ns, w.end_ns, name)})
        marks = [{"t": a["window_start_ns"], "state": a["state"], "rule": a["rule"], "figure": a.get("figure"),
                  "ci_low": a.get("ci_low"), "ci_high": a.get("ci_high"), "bound": a.get("bound"),
                  "n": a.get("n")} for a in view["alerts"] if a["output"] in (output, "")]
        view["outputs"].append({"output": output, "points": points, "marks": marks})
    return view


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def usage_windows(store: Store, since_ns: int, now_ns: int, w_s: float) -> list[dict[str, Any]]:
    """Per window (of ``w_s`` seconds) with traces: traces, latency p50 / p95 (s), tokens, the
    model calls' cost (USD, None when no call's model has a price) and the scoring's cost."""
    from assay.store.monitor import MonitorLog
    from assay.store.spans import SpanLog

    w = max(1, int(w_s * 1e9))
    first = since_ns // w * w
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in SpanLog(store).usage(since_ns=first, until_ns=now_ns):
        groups.setdefault(row["start_ns"] // w * w, []).append(row)
    scoring: dict[int, float] = {}
    log = MonitorLog(store)
    for metric in log.metrics():
        for s in log.scores(metric, first, now_ns):
            if s.get("cost") is not None and s["start_ns"] is not None:
                k = s["start_ns"] // w * w
                scoring[k] = scoring.get(k, 0.0) + s["cost"]
    out = []
    for start in sorted(set(groups) | set(scoring)):
        rows = groups.get(start, [])
        lat = [r["latency_s"] for r in rows if r["latency_s"] is not None]
        costs = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
        out.append({"start_ns": start, "end_ns": start + w, "traces": len(rows), "latency_p50_s": _pct(lat, 0.5),
                    "latency_p95_s": _pct(lat, 0.95), "input_tokens": sum(r["input_tokens"] for r in rows),
                    "output_tokens": sum(r["output_tokens"] for r in rows),
                    "cost_usd": sum(costs) if costs else None, "scoring_cost_usd": scoring.get(start),
                    "href": _traces_href(start, start + w)})
    return out


def overview(store: Store, *, since: str | None = None, window: str | None = None,
             now_ns: int | None = None) -> dict[str, Any]:
    """Everything ``/monitor`` shows, as data."""
    from assay.store.monitor import MonitorLog
    from assay.store.spans import SpanLog

    now_ns = time.time_ns() if now_ns is None else now_ns
    since_s = _seconds(since, "since", DEFAULT_SINCE)
    given = _seconds(window, "window", DEFAULT_WINDOW) if window else None
    since_ns = now_ns - int(since_s * 1e9)
    log = MonitorLog(store)
    alerts = log.alerts()
    metrics = [_metric_view(log, name, since_ns, now_ns, alerts, given) for name in log.metrics()]
    w_s = given or min((_seconds(m["window"], "window", DEFAULT_WINDOW) for m in metrics), default=300.0)
    status = SpanLog(store).status()
    status.update(log.status())
    status["servers"] = _servers(log)
    return {"since": since or DEFAULT_SINCE, "window": window, "since_ns": since_ns, "now_ns": now_ns,
            "status": status, "metrics": metrics, "usage_window": window_text(w_s),
            "usage": usage_windows(store, since_ns, now_ns, w_s),
            "open_alerts": status.get("open_alerts") or []}


def _servers(log: Any) -> list[dict[str, Any]]:
    """The servers' heartbeats (:mod:`assay.monitor.heartbeat`) with ``running``: live ones first;
    of the stale ones only the latest (when none runs, it says when the last one stopped)."""
    from assay.monitor.heartbeat import running

    now = time.time()
    beats = [{**b, "running": running(b, now)} for b in log.servers()]
    live = [b for b in beats if b["running"]]
    return live or beats[:1]


def window_traces(store: Store, start: int, end: int, limit: int = MAX_TRACES) -> dict[str, Any]:
    """The traces that started in ``[start, end)`` (ns) with their usage and every metric's scores."""
    from assay.store.monitor import MonitorLog
    from assay.store.spans import SpanLog

    if end <= start:
        raise AssayError(f"end ({end}) must be after start ({start})")
    spans = SpanLog(store)
    traces = spans.traces(since_ns=start, until_ns=end, limit=limit)
    usage = {u["trace_id"]: u for u in spans.usage(since_ns=start, until_ns=end, limit=limit)}
    scores = MonitorLog(store).trace_scores([t["trace_id"] for t in traces])
    for t in traces:
        t["usage"] = usage.get(t["trace_id"]) or {}
        t["scores"] = scores.get(t["trace_id"]) or {}
    return {"start_ns": start, "end_ns": end, "traces": traces, "limit": limit}


def span_tree(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans in tree order (depth first, children by start time), each with its ``depth``.
    A span whose parent is not in the trace is a root; spans caught in a parent cycle come last,
    as roots, so none is lost."""
    by_id = {s["span_id"]: s for s in spans}
    kids: dict[str | None, list[dict[str, Any]]] = {}
    for s in spans:
        parent = s["parent_id"] if s["parent_id"] in by_id and s["parent_id"] != s["span_id"] else None
        kids.setdefault(parent, []).append(s)
    for group in kids.values():
        group.sort(key=lambda s: (s["start_ns"] or 0, s["span_id"]))
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    # the roots first, then every span by start time: those a cycle kept from any root become roots
    starts = list(kids.get(None, [])) + sorted(spans, key=lambda s: (s["start_ns"] or 0, s["span_id"]))
    for root in starts:
        if root["span_id"] in seen:
            continue
        stack = [(root, 0)]
        while stack:
            s, depth = stack.pop()
            if s["span_id"] in seen:
                continue
            seen.add(s["span_id"])
            out.append({**s, "depth": depth, "depth_class": min(depth, MAX_DEPTH_CLASS)})
            stack.extend((c, depth + 1) for c in reversed(kids.get(s["span_id"], [])))
    return out


def trace_view(store: Store, trace_id: str) -> dict[str, Any] | None:
    """A trace's span tree and every score of it; None when the store has no span of it."""
    from assay.store.monitor import MonitorLog
    from assay.store.spans import SpanLog

    spans = SpanLog(store).spans(trace_id)
    if not spans:
        return None
    t0 = min(s["start_ns"] for s in spans if s["start_ns"] is not None) if any(
        s["start_ns"] is not None for s in spans) else None
    t1 = max((s["end_ns"] for s in spans if s["end_ns"] is not None), default=None)
    tree = span_tree(spans)
    for s in tree:
        s["offset_ms"] = None if t0 is None or s["start_ns"] is None else (s["start_ns"] - t0) / 1e6
        s["duration_ms"] = None if s["start_ns"] is None or s["end_ns"] is None else (s["end_ns"] - s["start_ns"]) / 1e6
    root = tree[0]
    return {"trace_id": trace_id, "service": root.get("service"), "root": root.get("name"), "start_ns": t0,
            "latency_s": None if t0 is None or t1 is None else (t1 - t0) / 1e9, "spans": tree,
            "scores": MonitorLog(store).trace_scores([trace_id]).get(trace_id) or {}}


def register(app: FastAPI, store: Store, page: Callable[..., HTMLResponse], not_found: type[Exception]) -> None:
    """Add the ``/monitor`` pages and their ``/api/monitor`` JSON to the dashboard ``app``;
    ``page(template, **context)`` renders, ``not_found`` is the error that answers 404."""
    from assay.ui import charts

    @app.get("/monitor", response_class=HTMLResponse)
    def monitor_page(since: str | None = None, window: str | None = None) -> Response:
        data = overview(store, since=since, window=window)
        for m in data["metrics"]:
            for o in m["outputs"]:
                pts = [{**p, "tip": _point_tip(o["output"], p)} for p in o["points"]]
                o["chart"] = charts.time_series(pts, label=o["output"], marks=[
                    {"t": k["t"], "state": k["state"], "tip": _mark_tip(k)} for k in o["marks"]])
        u = data["usage"]
        usage_charts = [
            ("latency p95 (s)", charts.time_series(_series(u, "latency_p95_s"), label="latency p95")),
            ("tokens", charts.time_series(_series(u, "tokens"), label="tokens")),
            ("model cost (USD)", charts.time_series(_series(u, "cost_usd"), label="model cost")),
        ]
        return page("monitor.html.j2", title="monitor", d=data, usage_charts=usage_charts, when_ns=when_ns,
                    window_text=window_text)

    @app.get("/api/monitor")
    def api_monitor(since: str | None = None, window: str | None = None) -> dict[str, Any]:
        return overview(store, since=since, window=window)

    @app.get("/monitor/traces", response_class=HTMLResponse)
    def monitor_traces_page(start: int = Query(..., ge=0, le=2**63 - 1), end: int = Query(..., ge=0, le=2**63 - 1),
                            metric: str | None = None) -> Response:
        data = window_traces(store, start, end)
        metrics = sorted({m for t in data["traces"] for m in t["scores"]}, key=lambda m: (m != metric, m))
        return page("monitor_traces.html.j2", title="monitor: traces", d=data, metric=metric, metrics=metrics,
                    when_ns=when_ns)

    @app.get("/api/monitor/traces")
    def api_monitor_traces(start: int = Query(..., ge=0, le=2**63 - 1),
                           end: int = Query(..., ge=0, le=2**63 - 1)) -> dict[str, Any]:
        return window_traces(store, start, end)

    def _trace(trace_id: str) -> dict[str, Any]:
        got = trace_view(store, trace_id)
        if got is None:
            raise not_found(f"the store has no span of trace {trace_id!r}")
        return got

    @app.get("/monitor/traces/{trace_id}", response_class=HTMLResponse)
    def monitor_trace_page(trace_id: str) -> Response:
        t = _trace(trace_id)
        return page("monitor_trace.html.j2", title=f"trace {trace_id}", t=t, when_ns=when_ns)

    @app.get("/api/monitor/traces/{trace_id}")
    def api_monitor_trace(trace_id: str) -> dict[str, Any]:
        return _trace(trace_id)


def _series(usage: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    out = []
    for u in usage:
        v = u["input_tokens"] + u["output_tokens"] if key == "tokens" else u[key]
        out.append({"t0": u["start_ns"], "t1": u["end_ns"], "y": v, "href": u["href"],
                    "tip": f"{when_ns(u['start_ns'])}: {v if v is not None else '—'} ({u['traces']} traces)"})
    return out


def _fig(x: Any) -> str:
    return "—" if x is None else f"{x:.4g}"


def _point_tip(output: str, p: dict[str, Any]) -> str:
    return (f"{when_ns(p['t0'])}: {output} mean {_fig(p['y'])} [{_fig(p['lo'])}, {_fig(p['hi'])}] over "
            f"{p['n']} traces{'' if p['closed'] else ' (open)'}")


def _mark_tip(k: dict[str, Any]) -> str:
    return (f"{k['state']}: {k['rule']} in the window from {when_ns(k['t'])}: {_fig(k.get('figure'))} "
            f"[{_fig(k.get('ci_low'))}, {_fig(k.get('ci_high'))}] {k.get('bound') or ''}")


def when_ns(ns: Any) -> str:
    """``2026-11-27 12:00:00 UTC`` of nanoseconds since the epoch (``—`` for None)."""
    if ns is None:
        return "—"
    import datetime as dt

    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
