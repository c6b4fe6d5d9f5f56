"""The spans a live app sends to ``assay monitor serve``, kept in the store, and their traces.

:class:`SpanLog` writes batches of spans (:meth:`SpanLog.write`: several batches in one
transaction; a span already stored, same trace and span id, is kept once, the first time), keeps
one ``traces`` row per trace up to date in the same transaction (its span count, first start, last
end, root span, first and last reception), and records when a trace is complete: when its root
span (the span without a parent) is received, or, by :meth:`SpanLog.complete_quiet`, when no span
of it came for a quiet period. It reads back what the monitor's status shows
(:meth:`SpanLog.status`), the traces in a time window (:meth:`SpanLog.traces`), a trace's
spans (:meth:`SpanLog.spans`) and, per trace, its latency, tokens and model cost
(:meth:`SpanLog.usage`, for the dashboard's ``/monitor`` page).

The log records received on a span (``POST /v1/logs``: message content an instrumentation emits
as events) are written beside the spans (``span_events``, each kept once) and read back as the
span's events; a trace the online evaluation skipped for want of content is due again when they
arrive (content exported after the spans).

A span here is a dict of the ``spans`` table's columns (:mod:`assay.store.schema`) without
``received_at``, which :meth:`SpanLog.write` sets; ``attributes``, ``events`` and ``resource`` are
JSON text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
from sqlalchemy import delete, func, insert, select, update

from assay.store import schema as S
from assay.store.store import Store

IN_CHUNK = 500        # trace ids per ``IN (...)`` list
SPAN_COLUMNS = tuple(c.name for c in S.spans.columns if c.name != "received_at")


def _chunks(items: Sequence[str]) -> Iterator[Sequence[str]]:
    for i in range(0, len(items), IN_CHUNK):
        yield items[i:i + IN_CHUNK]


class SpanLog:
    """The spans and traces of a :class:`~assay.store.Store`."""

    def __init__(self, store: Store):
        self.store = store
        self.engine = store.engine

    # -- writing ---------------------------------------------------------------------------
    def write(self, spans: Sequence[Mapping[str, Any]], now: float,
              events: Sequence[Mapping[str, Any]] = ()) -> int:
        """Store ``spans`` (received at ``now``, seconds since the epoch) in one transaction with
        their traces' rows, and ``events`` (``span_events`` rows: log records on a span); returns
        how many spans were new (a span or event already stored, or given twice, is kept once).
        Nothing is written when it raises."""
        fresh: dict[tuple[str, str], Mapping[str, Any]] = {}
        for s in spans:
            fresh.setdefault((s["trace_id"], s["span_id"]), s)
        if not fresh and not events:
            return 0
        t = S.spans
        with self.engine.begin() as conn:
            _write_events(conn, events, now)
            for part in _chunks(sorted({t for t, _ in fresh})):
                for tid, sid in conn.execute(select(t.c.trace_id, t.c.span_id).where(t.c.trace_id.in_(part))):
                    fresh.pop((tid, sid), None)
            if not fresh:
                return 0
            new = [{**{k: s.get(k) for k in SPAN_COLUMNS}, "received_at": now} for s in fresh.values()]
            conn.execute(insert(t), new)
            _update_traces(conn, new, now)
        return len(new)

    def complete_quiet(self, quiet_s: float, now: float) -> int:
        """Mark complete (``quiet``) the open traces that received no span for ``quiet_s``
        seconds before ``now``; returns how many."""
        tr = S.traces
        with self.engine.begin() as conn:
            res = conn.execute(update(tr).where(tr.c.completed_at.is_(None), tr.c.last_received <= now - quiet_s)
                               .values(completed_at=now, completion="quiet"))
            return int(res.rowcount or 0)

    # -- reading ---------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """Counts of spans, traces and complete traces, and when the last span was received
        (None before any)."""
        tr = S.traces
        with self.engine.connect() as conn:
            n_spans = conn.execute(select(func.count()).select_from(S.spans)).scalar_one()
            n_traces = conn.execute(select(func.count()).select_from(tr)).scalar_one()
            complete = conn.execute(select(func.count()).select_from(tr)
                                    .where(tr.c.completed_at.is_not(None))).scalar_one()
            last = conn.execute(select(func.max(S.spans.c.received_at))).scalar_one()
        return {"spans": int(n_spans), "traces": int(n_traces), "complete_traces": int(complete),
                "last_received": last, "store": self.store.display_url}

    def traces(self, *, since_ns: int | None = None, until_ns: int | None = None, complete: bool | None = None,
               limit: int = 1000) -> list[dict[str, Any]]:
        """The traces that started in ``[since_ns, until_ns)`` (ns since the epoch; either end
        open when None), earliest first; ``complete`` keeps only complete (True) or open (False) ones."""
        tr = S.traces
        q = select(tr).order_by(tr.c.start_ns, tr.c.trace_id).limit(limit)
        if since_ns is not None:
            q = q.where(tr.c.start_ns >= since_ns)
        if until_ns is not None:
            q = q.where(tr.c.start_ns < until_ns)
        if complete is not None:
            q = q.where(tr.c.completed_at.is_not(None) if complete else tr.c.completed_at.is_(None))
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def spans(self, trace_id: str) -> list[dict[str, Any]]:
        """A trace's spans, earliest start first, their JSON columns read; the log records
        received on a span (``span_events``) follow its own events, earliest first."""
        t, ev = S.spans, S.span_events
        with self.engine.connect() as conn:
            got = conn.execute(select(t).where(t.c.trace_id == trace_id).order_by(t.c.start_ns, t.c.span_id))
            out = [dict(r) for r in got.mappings()]
            logged = conn.execute(select(ev.c.span_id, ev.c.name, ev.c.time_ns, ev.c.attributes)
                                  .where(ev.c.trace_id == trace_id).order_by(ev.c.time_ns, ev.c.event_key)).all()
        extra: dict[str, list[dict[str, Any]]] = {}
        for sid, name, time_ns, attrs in logged:
            extra.setdefault(sid, []).append({"name": name, "time": time_ns,
                                              "attributes": orjson.loads(attrs) if attrs else {}})
        for d in out:
            for k in ("attributes", "events", "resource"):
                d[k] = None if d[k] is None else orjson.loads(d[k])
            if d["span_id"] in extra:
                d["events"] = (d["events"] or []) + extra[d["span_id"]]
        return out


    def usage(self, *, since_ns: int | None = None, until_ns: int | None = None,
              limit: int = 100_000) -> list[dict[str, Any]]:
        """Per trace that started in ``[since_ns, until_ns)``, earliest first: ``trace_id``,
        ``start_ns``, ``latency_s`` (first start to last end), ``input_tokens`` and
        ``output_tokens`` (the model calls' ``gen_ai.usage.*`` / OpenInference counts, each call
        counted once: a span's counts are left out when a span under it has its own) and
        ``cost_usd`` (those tokens at the price table's price of each call's model; None when no
        call's model has a price)."""
        from assay.models.pricing import cost_usd, lookup_price

        got = self.traces(since_ns=since_ns, until_ns=until_ns, limit=limit)
        out = {t["trace_id"]: {"trace_id": t["trace_id"], "start_ns": t["start_ns"],
                               "latency_s": _latency(t), "input_tokens": 0, "output_tokens": 0, "cost_usd": None}
               for t in got}
        t = S.spans
        prices: dict[str, Any] = {}
        with self.engine.connect() as conn:
            for part in _chunks(list(out)):
                q = select(t.c.trace_id, t.c.span_id, t.c.parent_id, t.c.attributes).where(t.c.trace_id.in_(part))
                per: dict[str, list[tuple[str, str | None, dict[str, Any]]]] = {}
                for tid, sid, parent, attrs in conn.execute(q):
                    per.setdefault(tid, []).append((sid, parent, orjson.loads(attrs) if attrs else {}))
                for tid, spans in per.items():
                    for model, i, o in _calls(spans):
                        row = out[tid]
                        row["input_tokens"] += i
                        row["output_tokens"] += o
                        if model not in prices:
                            prices[model] = lookup_price(model) if model else None
                        c = cost_usd(i, o, prices[model])
                        if c is not None:
                            row["cost_usd"] = (row["cost_usd"] or 0.0) + c
        return list(out.values())


TOKEN_KEYS = (("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
              ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"))
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")


def _latency(trace: Mapping[str, Any]) -> float | None:
    lo, hi = trace.get("start_ns"), trace.get("end_ns")
    return None if lo is None or hi is None else max(0, hi - lo) / 1e9


def _count(attrs: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(v)
    return None


def _calls(spans: list[tuple[str, str | None, dict[str, Any]]]) -> list[tuple[str | None, int, int]]:
    """``(model, input tokens, output tokens)`` of the spans that carry token counts, less
    those with such a span under them (an agent span that sums its calls)."""
    parent = {sid: p for sid, p, _ in spans}
    counted = {sid: (_count(a, TOKEN_KEYS[0]), _count(a, TOKEN_KEYS[1]), a) for sid, _, a in spans}
    counted = {sid: c for sid, c in counted.items() if c[0] is not None or c[1] is not None}
    above: set[str] = set()
    for sid in counted:
        p, seen = parent.get(sid), {sid}
        while p is not None and p not in seen:
            above.add(p)
            seen.add(p)
            p = parent.get(p)
    out = []
    for sid, (i, o, a) in counted.items():
        if sid not in above:
            model = next((str(a[k]) for k in MODEL_KEYS if a.get(k)), None)
            out.append((model, i or 0, o or 0))
    return out


def _write_events(conn: Any, events: Sequence[Mapping[str, Any]], now: float) -> None:
    """Insert the ``span_events`` rows not stored yet (same trace, span and key: kept once)."""
    ev = S.span_events
    fresh: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for e in events:
        fresh.setdefault((e["trace_id"], e["span_id"], e["event_key"]), e)
    if not fresh:
        return
    for part in _chunks(sorted({k[0] for k in fresh})):
        q = select(ev.c.trace_id, ev.c.span_id, ev.c.event_key).where(ev.c.trace_id.in_(part))
        for key in conn.execute(q):
            fresh.pop(tuple(key), None)
    if fresh:
        conn.execute(insert(ev), [{**e, "received_at": now} for e in fresh.values()])
        _reopen(conn, sorted({k[0] for k in fresh}), now)


NO_CONTENT = "no GenAI content in the trace"    # the reason a scorer skips a trace without messages


def _reopen(conn: Any, trace_ids: list[str], now: float) -> None:
    """Traces skipped for want of content that now get log records (the messages, exported
    after the spans): their skips are forgotten and they are complete again now, so the online
    evaluation finds them due once more."""
    ms, tr = S.monitor_scores, S.traces
    for part in _chunks(trace_ids):
        skipped = [r[0] for r in conn.execute(select(ms.c.trace_id).where(
            ms.c.trace_id.in_(part), ms.c.status == "skipped", ms.c.reason == NO_CONTENT).distinct())]
        if skipped:
            conn.execute(delete(ms).where(ms.c.trace_id.in_(skipped), ms.c.status == "skipped",
                                          ms.c.reason == NO_CONTENT))
            conn.execute(update(tr).where(tr.c.trace_id.in_(skipped), tr.c.completed_at.is_not(None))
                         .values(completed_at=now))


def _update_traces(conn: Any, new: list[dict[str, Any]], now: float) -> None:
    """The ``traces`` rows of the traces that got the ``new`` spans: inserted or brought up to date."""
    t, tr = S.spans, S.traces
    first: dict[str, dict[str, Any]] = {}
    roots: dict[str, dict[str, Any]] = {}
    for s in new:
        first.setdefault(s["trace_id"], s)
        if s["parent_id"] is None:
            roots.setdefault(s["trace_id"], s)
    tids = sorted(first)
    agg: dict[str, tuple[int, Any, Any]] = {}
    old: dict[str, Any] = {}
    for part in _chunks(tids):
        q = (select(t.c.trace_id, func.count(), func.min(t.c.start_ns), func.max(t.c.end_ns))
             .where(t.c.trace_id.in_(part)).group_by(t.c.trace_id))
        agg.update({tid: (n, lo, hi) for tid, n, lo, hi in conn.execute(q)})
        old.update({r.trace_id: r for r in conn.execute(
            select(tr.c.trace_id, tr.c.root_span_id, tr.c.completed_at).where(tr.c.trace_id.in_(part)))})
    added = []
    for tid in tids:
        n, lo, hi = agg[tid]
        root = roots.get(tid)
        was = old.get(tid)
        if was is None:
            added.append({"trace_id": tid, "service": (root or first[tid])["service"],
                          "root_span_id": root and root["span_id"], "root_name": root and root["name"],
                          "start_ns": lo, "end_ns": hi, "spans": n, "first_received": now, "last_received": now,
                          "completed_at": now if root else None, "completion": "root" if root else None})
            continue
        values: dict[str, Any] = {"start_ns": lo, "end_ns": hi, "spans": n, "last_received": now}
        if root is not None and was.root_span_id is None:
            values.update(root_span_id=root["span_id"], root_name=root["name"], service=root["service"])
            if was.completed_at is None:
                values.update(completed_at=now, completion="root")
        conn.execute(update(tr).where(tr.c.trace_id == tid).values(**values))
    if added:
        conn.execute(insert(tr), added)
