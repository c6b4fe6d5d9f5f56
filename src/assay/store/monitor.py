"""The online evaluation of ``assay monitor``, kept in the store: which traces each monitor metric
scored, and the alerts its rules fired and cleared.

:class:`MonitorLog` reads the traces due for scoring (:meth:`MonitorLog.due`: complete traces not
scored yet for a metric, and those whose last try errored), records each try's outcome per trace
(:meth:`MonitorLog.record`: ``scored`` with the scores and the run whose rows hold them,
``skipped`` with the reason, or ``error``, which leaves the trace due again), reads the scores of a
time window (:meth:`MonitorLog.scores`), the metrics scored so far (:meth:`MonitorLog.metrics`),
every metric's outcome for some traces (:meth:`MonitorLog.trace_scores`), what was spent in the last hour (:meth:`MonitorLog.spent`),
the leases scoring passes hold on traces so that two processes never score one twice
(:meth:`MonitorLog.claim`, :meth:`MonitorLog.renew`, :meth:`MonitorLog.release`), the running servers' heartbeats
and the counts ``assay monitor status`` shows (:meth:`MonitorLog.status`). Alerts are events
(:meth:`MonitorLog.add_alert`): a rule's state is its latest event (:meth:`MonitorLog.last_alert`,
:meth:`MonitorLog.open_alerts`).

Scores are JSON: per record of the trace (one for a trace, one per model call), ``{output: {value,
score, passed, result, reason, status, threshold}}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from sqlalchemy import and_, delete, func, insert, or_, select, update

from assay.store import schema as S
from assay.store.store import Store

SCORED, SKIPPED, ERROR = "scored", "skipped", "error"
FIRING, CLEARED = "firing", "cleared"


class MonitorLog:
    """The monitor's scores and alerts in a :class:`~assay.store.Store`."""

    def __init__(self, store: Store):
        self.store = store
        self.engine = store.engine

    # -- scoring ---------------------------------------------------------------------------
    def due(self, metric: str, *, completed_since: float | None = None, start_since_ns: int | None = None,
            start_until_ns: int | None = None, retry_before: float | None = None,
            limit: int = 5000) -> list[dict[str, Any]]:
        """Complete traces not yet tried for ``metric`` (completed at or after ``completed_since``)
        and those whose last try errored before ``retry_before`` (any time when None), started in
        ``[start_since_ns, start_until_ns)``; earliest completed first. Each a
        dict of the ``traces`` row and ``attempts`` (tries so far)."""
        tr, ms = S.traces, S.monitor_scores
        j = tr.outerjoin(ms, and_(ms.c.trace_id == tr.c.trace_id, ms.c.metric == metric))
        retry = ms.c.status == ERROR
        if retry_before is not None:
            retry = and_(retry, ms.c.scored_at < retry_before)
        new = ms.c.status.is_(None)
        if completed_since is not None:     # the errored ones are retried however old
            new = and_(new, tr.c.completed_at >= completed_since)
        q = (select(tr.c.trace_id, tr.c.service, tr.c.root_name, tr.c.start_ns, tr.c.completed_at,
                    func.coalesce(ms.c.attempts, 0).label("attempts"))
             .select_from(j).where(tr.c.completed_at.is_not(None), or_(new, retry))
             .order_by(tr.c.completed_at, tr.c.trace_id).limit(limit))
        if start_since_ns is not None:
            q = q.where(tr.c.start_ns >= start_since_ns)
        if start_until_ns is not None:
            q = q.where(tr.c.start_ns < start_until_ns)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(q).mappings()]

    def claim(self, metric: str, attempts: Mapping[str, int], holder: str, lease_s: float,
              now: float) -> list[str]:
        """Take the lease on the traces of ``attempts`` (``{trace_id: tries seen when it was
        found due}``) for ``holder`` until ``now + lease_s``, in one transaction: a trace free, or
        whose lease has expired (its holder crashed), is taken; one another holder leases is not;
        one whose tries changed since it was found due (another process scored it meanwhile) is
        not. Returns the trace ids taken, in the order given."""
        cl, ms = S.monitor_claims, S.monitor_scores
        ids = list(attempts)
        if not ids:
            return []
        until = now + lease_s
        taken: set[str] = set()
        with self.engine.begin() as conn:
            for i in range(0, len(ids), 500):
                part = ids[i:i + 500]
                conn.execute(update(cl).where(cl.c.metric == metric, cl.c.trace_id.in_(part), cl.c.expires_at < now)
                             .values(holder=holder, expires_at=until))
                conn.execute(_insert_new(conn, cl), [{"metric": metric, "trace_id": t, "holder": holder,
                                                      "expires_at": until} for t in part])
                mine = {r[0] for r in conn.execute(select(cl.c.trace_id).where(
                    cl.c.metric == metric, cl.c.trace_id.in_(part), cl.c.holder == holder))}
                tries = dict(conn.execute(select(ms.c.trace_id, ms.c.attempts).where(
                    ms.c.metric == metric, ms.c.trace_id.in_(list(mine)))).all()) if mine else {}
                stale = [t for t in mine if tries.get(t, 0) != attempts[t]]
                if stale:
                    conn.execute(delete(cl).where(cl.c.metric == metric, cl.c.trace_id.in_(stale),
                                                  cl.c.holder == holder))
                taken |= mine - set(stale)
        return [t for t in ids if t in taken]

    def renew(self, metric: str, trace_ids: Sequence[str], holder: str, lease_s: float, now: float) -> None:
        """Extend ``holder``'s leases on ``trace_ids`` to ``now + lease_s``."""
        cl = S.monitor_claims
        with self.engine.begin() as conn:
            for i in range(0, len(trace_ids), 500):
                conn.execute(update(cl).where(cl.c.metric == metric, cl.c.trace_id.in_(list(trace_ids[i:i + 500])),
                                              cl.c.holder == holder).values(expires_at=now + lease_s))

    def release(self, metric: str, trace_ids: Sequence[str], holder: str) -> None:
        """Give up ``holder``'s leases on ``trace_ids`` (their outcome is stored, or they wait)."""
        cl = S.monitor_claims
        ids = list(trace_ids)
        with self.engine.begin() as conn:
            for i in range(0, len(ids), 500):
                conn.execute(delete(cl).where(cl.c.metric == metric, cl.c.trace_id.in_(ids[i:i + 500]),
                                              cl.c.holder == holder))

    def holders(self, metric: str) -> list[str]:
        """The holders of leases on ``metric``'s traces (live or expired)."""
        cl = S.monitor_claims
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(select(cl.c.holder).where(cl.c.metric == metric).distinct())]

    def drop_holder(self, metric: str, holder: str) -> int:
        """Remove every lease of ``holder`` on ``metric`` (a process known to be gone); how many."""
        cl = S.monitor_claims
        with self.engine.begin() as conn:
            res = conn.execute(delete(cl).where(cl.c.metric == metric, cl.c.holder == holder))
            return int(res.rowcount or 0)

    def record(self, metric: str, outcomes: Sequence[Mapping[str, Any]]) -> None:
        """Store one try per trace in one transaction: each outcome has ``trace_id``, ``status``,
        ``start_ns``, ``completed_at``, ``scored_at`` and optionally ``run_id``, ``scores`` (a
        list), ``reason``, ``cost`` (added to the cost of the earlier tries). The lag is
        ``scored_at - completed_at`` for a scored trace."""
        if not outcomes:
            return
        ms = S.monitor_scores
        tids = [o["trace_id"] for o in outcomes]
        with self.engine.begin() as conn:
            before = {r.trace_id: (r.attempts, r.cost) for r in conn.execute(
                select(ms.c.trace_id, ms.c.attempts, ms.c.cost).where(ms.c.metric == metric, ms.c.trace_id.in_(tids)))}
            conn.execute(delete(ms).where(ms.c.metric == metric, ms.c.trace_id.in_(tids)))
            rows = []
            for o in outcomes:
                done = o["status"] == SCORED and o.get("completed_at") is not None
                tries, spent = before.get(o["trace_id"], (0, None))
                cost = None if spent is None and o.get("cost") is None else (spent or 0.0) + (o.get("cost") or 0.0)
                rows.append({"metric": metric, "trace_id": o["trace_id"], "status": o["status"],
                             "run_id": o.get("run_id"), "reason": o.get("reason"),
                             "scores": None if o.get("scores") is None else orjson.dumps(o["scores"]).decode(),
                             "start_ns": o.get("start_ns"), "completed_at": o.get("completed_at"),
                             "scored_at": o["scored_at"], "attempts": tries + 1,
                             "lag_s": max(0.0, o["scored_at"] - o["completed_at"]) if done else None,
                             "cost": cost, "export": o.get("export"),
                             "export_at": o["scored_at"] if o.get("export") else None,
                             "span_ids": orjson.dumps(o["span_ids"]).decode() if o.get("span_ids") else None})
            conn.execute(insert(ms), rows)

    def scores(self, metric: str, since_ns: int | None = None, until_ns: int | None = None) -> list[dict[str, Any]]:
        """The traces scored for ``metric`` that started in ``[since_ns, until_ns)``, earliest
        first: ``trace_id``, ``start_ns``, ``scores`` (read), ``lag_s``, ``run_id``, ``cost``."""
        ms = S.monitor_scores
        q = (select(ms.c.trace_id, ms.c.start_ns, ms.c.scores, ms.c.lag_s, ms.c.run_id, ms.c.cost)
             .where(ms.c.metric == metric, ms.c.status == SCORED).order_by(ms.c.start_ns, ms.c.trace_id))
        if since_ns is not None:
            q = q.where(ms.c.start_ns >= since_ns)
        if until_ns is not None:
            q = q.where(ms.c.start_ns < until_ns)
        with self.engine.connect() as conn:
            out = [dict(r) for r in conn.execute(q).mappings()]
        for d in out:
            d["scores"] = orjson.loads(d["scores"]) if d["scores"] else []
        return out

    # -- evaluation events ---------------------------------------------------------------
    def mark_export(self, pairs: Sequence[tuple[str, str]], ok: bool, now: float) -> None:
        """Record how sending the events of ``(metric, trace_id)`` went: a success turns a
        ``pending`` score ``sent``; a failure makes it ``failed`` (due to be sent again)."""
        ms = S.monitor_scores
        by_metric: dict[str, list[str]] = {}
        for metric, tid in dict.fromkeys(pairs):
            by_metric.setdefault(metric, []).append(tid)
        with self.engine.begin() as conn:
            for metric, tids in by_metric.items():
                for i in range(0, len(tids), 500):
                    q = update(ms).where(ms.c.metric == metric, ms.c.trace_id.in_(tids[i:i + 500]),
                                         ms.c.export.is_not(None))
                    if ok:
                        q = q.where(ms.c.export == "pending")
                    conn.execute(q.values(export="sent" if ok else "failed", export_at=now))

    def export_due(self, failed_before: float, pending_before: float, limit: int = 500) -> list[dict[str, Any]]:
        """Scores whose events are to be sent again: ``failed`` before ``failed_before``, or
        ``pending`` since before ``pending_before`` (queued by a process that died before sending
        them); oldest first. Each: ``metric``, ``trace_id``, ``run_id``, ``scores`` and ``span_ids``
        (read), ``scored_at``, ``root_span_id``."""
        ms, tr = S.monitor_scores, S.traces
        q = (select(ms.c.metric, ms.c.trace_id, ms.c.run_id, ms.c.scores, ms.c.span_ids, ms.c.scored_at,
                    tr.c.root_span_id)
             .select_from(ms.outerjoin(tr, tr.c.trace_id == ms.c.trace_id))
             .where(ms.c.status == SCORED, or_(and_(ms.c.export == "failed", ms.c.export_at < failed_before),
                                               and_(ms.c.export == "pending", ms.c.export_at < pending_before)))
             .order_by(ms.c.export_at).limit(limit))
        with self.engine.connect() as conn:
            out = [dict(r) for r in conn.execute(q).mappings()]
        for d in out:
            d["scores"] = orjson.loads(d["scores"]) if d["scores"] else []
            d["span_ids"] = orjson.loads(d["span_ids"]) if d["span_ids"] else []
        return out

    def requeue_export(self, pairs: Sequence[tuple[str, str]], now: float) -> None:
        """Mark the scores of ``(metric, trace_id)`` ``pending`` again (their events queued anew)."""
        ms = S.monitor_scores
        with self.engine.begin() as conn:
            for metric, tid in dict.fromkeys(pairs):
                conn.execute(update(ms).where(ms.c.metric == metric, ms.c.trace_id == tid)
                             .values(export="pending", export_at=now))

    def export_counts(self) -> dict[str, int]:
        """Scores per export state (``pending``, ``sent``, ``failed``)."""
        ms = S.monitor_scores
        with self.engine.connect() as conn:
            return {state: int(n) for state, n in conn.execute(
                select(ms.c.export, func.count()).where(ms.c.export.is_not(None)).group_by(ms.c.export))}

    def metrics(self) -> list[str]:
        """The metrics with a try recorded for some trace, by name."""
        ms = S.monitor_scores
        with self.engine.connect() as conn:
            return [r[0] for r in conn.execute(select(ms.c.metric).distinct().order_by(ms.c.metric))]

    def trace_scores(self, trace_ids: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
        """``{trace_id: {metric: {status, scores (read), reason, run_id, lag_s, cost, attempts,
        scored_at}}}`` for the traces given (those never tried are left out)."""
        ms = S.monitor_scores
        out: dict[str, dict[str, dict[str, Any]]] = {}
        ids = list(dict.fromkeys(trace_ids))
        with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                q = (select(ms.c.trace_id, ms.c.metric, ms.c.status, ms.c.scores, ms.c.reason, ms.c.run_id,
                            ms.c.lag_s, ms.c.cost, ms.c.attempts, ms.c.scored_at)
                     .where(ms.c.trace_id.in_(ids[i:i + 500])).order_by(ms.c.trace_id, ms.c.metric))
                for r in conn.execute(q).mappings():
                    d = dict(r)
                    d["scores"] = orjson.loads(d["scores"]) if d["scores"] else []
                    out.setdefault(d.pop("trace_id"), {})[d.pop("metric")] = d
        return out

    def spent(self, metric: str, since: float) -> float:
        """USD spent scoring ``metric`` on tries recorded at or after ``since``."""
        ms = S.monitor_scores
        with self.engine.connect() as conn:
            got = conn.execute(select(func.sum(ms.c.cost)).where(ms.c.metric == metric, ms.c.scored_at >= since))
            return float(got.scalar_one() or 0.0)

    def status(self) -> dict[str, Any]:
        """Per metric: traces scored, skipped and errored (awaiting a retry), the evaluation lag
        (median, p95 and the latest, seconds) and the last score; the open alerts."""
        ms = S.monitor_scores
        per: dict[str, dict[str, Any]] = {}
        with self.engine.connect() as conn:
            for metric, status, n in conn.execute(select(ms.c.metric, ms.c.status, func.count())
                                                  .group_by(ms.c.metric, ms.c.status)):
                per.setdefault(metric, {SCORED: 0, SKIPPED: 0, ERROR: 0})[status] = int(n)
            for metric, d in per.items():
                lags = [r[0] for r in conn.execute(
                    select(ms.c.lag_s).where(ms.c.metric == metric, ms.c.status == SCORED, ms.c.lag_s.is_not(None))
                    .order_by(ms.c.scored_at.desc()).limit(1000))]
                d["lag_latest_s"] = lags[0] if lags else None
                lags.sort()
                d["lag_p50_s"] = lags[len(lags) // 2] if lags else None
                d["lag_p95_s"] = lags[min(len(lags) - 1, int(0.95 * len(lags)))] if lags else None
                d["last_scored"] = conn.execute(select(func.max(ms.c.scored_at)).where(
                    ms.c.metric == metric, ms.c.status == SCORED)).scalar_one()
        return {"metrics": per, "open_alerts": self.open_alerts()}

    # -- the running servers ---------------------------------------------------------------
    def beat(self, server: Mapping[str, Any]) -> None:
        """Write a server's heartbeat (``id``, ``pid``, ``host``, ``url``, ``started_at``,
        ``beat_at``, ``period``, ``state``: a dict), replacing its previous one."""
        sv = S.monitor_servers
        row = {c.name: server.get(c.name) for c in sv.columns}
        row["state"] = orjson.dumps(server.get("state") or {}).decode()
        with self.engine.begin() as conn:
            conn.execute(delete(sv).where(sv.c.id == row["id"]))
            conn.execute(insert(sv), [row])

    def stopped(self, server_id: str) -> None:
        """Remove a server's heartbeat (it stopped cleanly)."""
        sv = S.monitor_servers
        with self.engine.begin() as conn:
            conn.execute(delete(sv).where(sv.c.id == server_id))

    def servers(self) -> list[dict[str, Any]]:
        """The heartbeats kept, latest first, their ``state`` read (a server killed keeps its last
        one: a heartbeat older than a few periods is of a server no longer running)."""
        sv = S.monitor_servers
        with self.engine.connect() as conn:
            out = [dict(r) for r in conn.execute(select(sv).order_by(sv.c.beat_at.desc())).mappings()]
        for d in out:
            d["state"] = orjson.loads(d["state"]) if d["state"] else {}
        return out

    # -- alerts ----------------------------------------------------------------------------
    def add_alert(self, event: Mapping[str, Any]) -> None:
        """Record a firing or clearing: ``metric``, ``rule``, ``output``, ``state``,
        ``window_start_ns``, ``window_end_ns``, ``at``, ``figure``, ``ci_low``, ``ci_high``,
        ``bound``, ``n``, ``reason``, ``trace_ids`` (a list)."""
        row = {c.name: event.get(c.name) for c in S.monitor_alerts.columns if c.name != "id"}
        row["trace_ids"] = orjson.dumps(list(event.get("trace_ids") or [])).decode()
        with self.engine.begin() as conn:
            conn.execute(insert(S.monitor_alerts), [row])

    def last_alert(self, metric: str, rule: str, output: str, before_ns: int | None = None) -> dict[str, Any] | None:
        """The latest event of a rule on an output (of a window that started before ``before_ns``)."""
        al = S.monitor_alerts
        q = (select(al).where(al.c.metric == metric, al.c.rule == rule, al.c.output == output)
             .order_by(al.c.window_start_ns.desc(), al.c.id.desc()).limit(1))
        if before_ns is not None:
            q = q.where(al.c.window_start_ns < before_ns)
        with self.engine.connect() as conn:
            r = conn.execute(q).mappings().first()
        return _alert(r) if r is not None else None

    def alerts(self, since_ns: int | None = None) -> list[dict[str, Any]]:
        """The events of windows that started at or after ``since_ns``, in order."""
        al = S.monitor_alerts
        q = select(al).order_by(al.c.window_start_ns, al.c.id)
        if since_ns is not None:
            q = q.where(al.c.window_start_ns >= since_ns)
        with self.engine.connect() as conn:
            return [_alert(r) for r in conn.execute(q).mappings()]

    def open_alerts(self) -> list[dict[str, Any]]:
        """The rules whose latest event is a firing."""
        latest: dict[tuple[str, str, str], dict[str, Any]] = {}
        for a in self.alerts():
            latest[(a["metric"], a["rule"], a["output"])] = a
        return [a for a in latest.values() if a["state"] == FIRING]


def _insert_new(conn: Any, table: Any) -> Any:
    """``INSERT`` that leaves a row whose key is taken alone (``ON CONFLICT DO NOTHING``)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing()


def _alert(r: Any) -> dict[str, Any]:
    d = dict(r)
    d["trace_ids"] = orjson.loads(d["trace_ids"]) if d.get("trace_ids") else []
    return d
