"""Online evaluation: the complete traces a metric's sample picks, scored as ``assay eval`` scores.

:class:`OnlineScorer` finds, per metric of the config, the complete traces not scored yet
(:meth:`assay.store.monitor.MonitorLog.due`), keeps those the hash sample picks
(:func:`assay.monitor.config.sampled`) and the filters let through, turns each into records with
the OTLP reader's :func:`~assay.formats.genai_spans.trace_records` (the record id is the trace id,
or ``TRACE-SPAN`` per model call), and scores them with :func:`assay.engine.evaluate.evaluate`:
the same plan, judges, limiter, call cache, budget cap and circuit breaker as ``assay eval``, each
batch a run in the store. It then records per trace (:meth:`~assay.store.monitor.MonitorLog.record`)
the run, the scores and the lag from completion to score. A trace whose scores errored (a judge
outage, the circuit breaker, the hourly budget reached) stays due and is tried again after
``retry_after`` seconds: nothing is lost, only delayed.

:meth:`OnlineScorer.run_pass` is one pass (``assay monitor serve`` starts one every ``interval``
seconds on threads beside the receiver, **overlapping**: a trace completed while an earlier pass
waits on the judge is picked up by the next one, not after it; ``assay monitor backfill`` runs
passes over a time window until nothing is due). Passes may run at once on one scorer: a trace a
pass has taken is claimed (in flight) until its outcome is stored, so no other pass takes it, and
a metric's watermark never moves past a trace still in flight. The passes share one
:class:`ProcessLimits` per judge (its limiters' leases: one concurrency limit and one pause after
a 429 for the whole process), and a pass running beside another of the same metric spends at most
half of what is left of the hourly budget, so the cap holds for them together. Between
processes (two ``monitor serve`` on one store), a pass also takes a **lease** on each trace in the
store (:meth:`~assay.store.monitor.MonitorLog.claim`, one transaction; ``lease`` seconds, renewed
every third of that while it is scored) and releases it once the outcome is stored: a trace another
process holds, or scored since it was found due, is left alone, and the lease of a process that
crashed expires (at once when it ran on this host), so the trace is scored by the other one, once.
With ``export`` in the config, each score recorded is also queued as an OpenTelemetry ``gen_ai.evaluation.result`` event (:mod:`assay.monitor.export`) after it is stored;
:meth:`OnlineScorer.close` sends what is queued. Each such score is marked in the store
(``pending``, then ``sent`` or ``failed`` as the export went); :meth:`OnlineScorer.resend_exports`
(every ``interval`` in ``monitor serve``) queues the failed ones again after ``retry_after``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from assay.errors import AssayError, BudgetExceeded, RunIncomplete
from assay.formats.otlp import Event, Span, Trace
from assay.monitor.config import MetricConfig, MonitorConfig, sampled
from assay.store.monitor import ERROR, SCORED, SKIPPED, MonitorLog
from assay.store.sessions import pid_alive, this_host
from assay.store.spans import NO_CONTENT, SpanLog

HOUR = 3600.0
UNTRIED = "untried"        # a trace a budget stop never reached: not recorded, due again


def trace_of(trace_id: str, rows: list[dict[str, Any]]) -> Trace:
    """A stored trace's spans (:meth:`SpanLog.spans` rows) as the OTLP reader's :class:`Trace`."""
    spans = [Span(r["trace_id"], r["span_id"], r["parent_id"], r["name"], r["kind"] or "UNSPECIFIED",
                  r["start_ns"], r["end_ns"], r["status"], r["status_message"] or "", r["attributes"] or {},
                  [Event(e.get("name", ""), e.get("time"), e.get("attributes") or {}) for e in r["events"] or []],
                  r["resource"] or {}, r["scope"]) for r in rows]
    return Trace(trace_id, spans)


def passes_filters(mc: MetricConfig, trace: dict[str, Any], spans: list[dict[str, Any]]) -> bool:
    """Whether the trace is one the metric looks at (its filters; none: every trace)."""
    f = mc.filters
    if f.service is not None and trace.get("service") != f.service:
        return False
    if not f.on_spans:
        return True
    for s in spans:
        if f.span_name is not None and s["name"] != f.span_name:
            continue
        attrs = s["attributes"] or {}
        if all(attrs.get(k) == v for k, v in f.attributes.items()):
            return True
    return False


CONTENT_FIELDS = ("query", "response", "history", "tool_calls", "contexts", "steps")


def _has_content(record: dict[str, Any]) -> bool:
    """Whether a trace's record holds any message content (an instrumentation with content capture
    off gives only the model, the tokens and the latency)."""
    return any(record.get(k) not in (None, "", [], {}) for k in CONTENT_FIELDS)


def _missing(metric: str, record: dict[str, Any]) -> str | None:
    """The first field ``metric`` requires that ``record`` lacks (``a or b`` for a choice), or None."""
    from assay.metrics.base import REGISTRY

    m = REGISTRY.get(metric)
    for req in getattr(m, "requires", ()):
        names = req if isinstance(req, tuple) else (req,)
        if not any(record.get(n) not in (None, "", [], {}) for n in names):
            return " or ".join(names)
    return None


def _has_events(metric: str, outcome: dict[str, Any]) -> bool:
    """Whether a scored trace gives any evaluation event (a finished score)."""
    from assay.monitor.export import events

    return next(iter(events(metric, outcome)), None) is not None


def _score_dict(sc: Any) -> dict[str, Any]:
    return {"value": sc.value if isinstance(sc.value, (int, float, str, bool, type(None))) else str(sc.value),
            "score": sc.score, "passed": sc.passed, "result": sc.result, "reason": sc.reason, "status": sc.status,
            "threshold": sc.threshold}


class ProcessLimits:
    """Limits shared by the limiters of the passes of one process (an
    :class:`assay.models.limiter.SharedLimits`): one concurrency limit for the judge's requests in
    flight, and one pause after a 429 (the server's ``Retry-After``) for every pass at once. The
    passes' limiters each run in their own event loop, so this is guarded by a thread lock."""

    def __init__(self, concurrency: int):
        self.concurrency = max(1, int(concurrency))
        self.in_flight = self.peak = 0
        self.pause_until = 0.0
        self._lock = threading.Lock()

    def _wait(self) -> float:
        return max(0.0, self.pause_until - time.monotonic())

    async def acquire(self, tokens: int, hold: float | None) -> tuple[Any, float]:
        while True:
            with self._lock:
                if self.in_flight < self.concurrency:
                    self.in_flight += 1
                    self.peak = max(self.peak, self.in_flight)
                    return object(), self._wait()
            await asyncio.sleep(0.005)

    async def recheck(self, lease: Any) -> float:
        with self._lock:
            return self._wait()

    def release(self, lease: Any, outcome: str, *, tokens: int | None = None, pause: float | None = None) -> None:
        with self._lock:
            self.in_flight = max(0, self.in_flight - 1)
            if pause:
                self.pause_until = max(self.pause_until, time.monotonic() + pause)


class OnlineScorer:
    """The scoring passes of a :class:`MonitorConfig` over a store. ``say``: a line to log."""

    def __init__(self, store: Any, cfg: MonitorConfig, *, say: Callable[[str], None] | None = None,
                 now: float | None = None):
        self.store, self.cfg = store, cfg
        self.spans, self.log = SpanLog(store), MonitorLog(store)
        self.say = say or (lambda line: None)
        start = time.time() if now is None else now
        self.watermark = {name: start - cfg.lookback for name in cfg.metrics}
        self.paused: dict[str, str] = {}
        self.export: Any = None
        self._lock = threading.Lock()
        self.in_flight: dict[str, dict[str, float]] = {name: {} for name in cfg.metrics}   # claimed traces
        self.reserved: dict[str, float] = {name: 0.0 for name in cfg.metrics}              # budget held by passes
        self.limits: dict[str, ProcessLimits] = {}                                          # per judge spec
        # this scorer's name on the leases it takes in the store: host, pid, and its own id
        self.holder = f"{this_host()}|{os.getpid()}|{uuid.uuid4().hex[:12]}"
        if cfg.export is not None:
            from assay.monitor.export import EvaluationExporter

            self.export = EvaluationExporter(cfg.export, say=self.say, on_result=self._exported)

    def backlog(self, now: float | None = None) -> dict[str, dict[str, Any]]:
        """Per metric, the traces waiting to be scored: complete, picked by the sample, not scored
        yet (or errored and due again; those in flight included), ``waiting``, and the current
        evaluation lag, ``lag_s``: how long the oldest of them has been complete (0 when none
        waits). Counts at most 10,000 traces per metric."""
        now = time.time() if now is None else now
        out: dict[str, dict[str, Any]] = {}
        for name, mc in self.cfg.metrics.items():
            due = self.log.due(name, completed_since=self.watermark[name], limit=10_000)
            picked = [t for t in due if sampled(t["trace_id"], name, mc.sample)]
            oldest = min((t["completed_at"] for t in picked), default=None)
            out[name] = {"waiting": len(picked), "lag_s": 0.0 if oldest is None else max(0.0, now - oldest)}
        return out

    def close(self) -> None:
        """Send the evaluation events still queued (bounded by the export's timeout)."""
        if self.export is not None:
            self.export.close()
            self.export = None

    def run_pass(self, *, since_ns: int | None = None, until_ns: int | None = None,
                 everything: bool = False) -> dict[str, dict[str, int]]:
        """Score what is due for every metric; ``since_ns`` / ``until_ns``: only traces that started
        then; ``everything``: every complete trace however old (backfill), not only those completed
        since the lookback. Returns ``{metric: {"scored", "skipped", "errored", "sampled_out"}}``."""
        return {name: self._metric(mc, since_ns, until_ns, everything) for name, mc in self.cfg.metrics.items()}

    def _metric(self, mc: MetricConfig, since_ns: int | None, until_ns: int | None,
                everything: bool) -> dict[str, int]:
        counts = {SCORED: 0, SKIPPED: 0, "errored": 0, "sampled_out": 0}
        due, picked = self._claim(mc, since_ns, until_ns, everything)
        counts["sampled_out"] = len(due) - len(picked)
        untried: list[dict[str, Any]] = []       # left for a later pass: the watermark stays before them
        try:
            picked = self._lease(mc, picked, untried)
            self._batches(mc, picked, counts, untried)
        finally:
            with self._lock:
                for t in picked:
                    self.in_flight[mc.name].pop(t["trace_id"], None)
                if not everything:
                    self._advance(mc.name, due, untried)
            self._release(mc, picked)
        return counts

    def _lease(self, mc: MetricConfig, picked: list[dict[str, Any]],
               untried: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The picked traces whose lease in the store this scorer took; the others (another
        process scores them, or has scored them since they were found due) are given up here and
        left for a later pass (so the watermark stays before them, should their holder crash)."""
        if not picked:
            return picked
        try:
            self._drop_dead_holders(mc)
            got = set(self.log.claim(mc.name, {t["trace_id"]: t["attempts"] for t in picked}, self.holder,
                                     self.cfg.lease, time.time()))
        except Exception:
            self._unclaim(mc, picked)
            raise
        mine = [t for t in picked if t["trace_id"] in got]
        others = [t for t in picked if t["trace_id"] not in got]
        if others:
            self._unclaim(mc, others)
            untried.extend(others)
        return mine

    def _drop_dead_holders(self, mc: MetricConfig) -> None:
        """Remove the leases of scorers on this host whose process is gone (killed, then restarted
        here): their traces need not wait for the leases to expire."""
        host = this_host()
        for h in self.log.holders(mc.name):
            where, _, rest = h.partition("|")
            pid = rest.partition("|")[0]
            if h != self.holder and where == host and pid.isdigit() and pid_alive(int(pid)) is False:
                self.log.drop_holder(mc.name, h)

    @contextlib.contextmanager
    def _leased(self, mc: MetricConfig, trace_ids: list[str]) -> Any:
        """Renew the leases on ``trace_ids`` every third of the lease while the block runs (a batch
        waiting on the judge), so they never expire under a live scorer."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.cfg.lease / 3):
                try:
                    self.log.renew(mc.name, trace_ids, self.holder, self.cfg.lease, time.time())
                except Exception as exc:   # tried again a third of a lease later
                    self.say(f"assay monitor: {mc.name}: could not renew {len(trace_ids)} lease(s): {exc}")

        t = threading.Thread(target=renew, name="assay-monitor-leases", daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()

    def _unclaim(self, mc: MetricConfig, traces: list[dict[str, Any]]) -> None:
        with self._lock:
            for t in traces:
                self.in_flight[mc.name].pop(t["trace_id"], None)

    def _release(self, mc: MetricConfig, traces: list[dict[str, Any]]) -> None:
        """Give up the store's leases on ``traces`` (their outcome is stored, or they wait for a
        later pass); if that fails, the leases expire."""
        if not traces:
            return
        try:
            self.log.release(mc.name, [t["trace_id"] for t in traces], self.holder)
        except Exception as exc:
            self.say(f"assay monitor: {mc.name}: could not release {len(traces)} lease(s) ({exc}); they expire "
                     f"in {self.cfg.lease:g} s")

    def _claim(self, mc: MetricConfig, since_ns: int | None, until_ns: int | None,
               everything: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The due traces no other pass has in flight, and those of them the sample picks, claimed."""
        limit = 100_000 if everything else max(self.cfg.batch * 20, 1000)
        with self._lock:
            mine = self.in_flight[mc.name]
            due = self.log.due(mc.name, completed_since=None if everything else self.watermark[mc.name],
                               start_since_ns=since_ns, start_until_ns=until_ns,
                               retry_before=time.time() - self.cfg.retry_after, limit=limit)
            due = [t for t in due if t["trace_id"] not in mine]
            picked = [t for t in due if sampled(t["trace_id"], mc.name, mc.sample)]
            for t in picked:
                mine[t["trace_id"]] = t["completed_at"]
        return due, picked

    def _batches(self, mc: MetricConfig, picked: list[dict[str, Any]], counts: dict[str, int],
                 untried: list[dict[str, Any]]) -> None:
        step = self.cfg.batch
        for i in range(0, len(picked), step):
            if i:   # the traces still to score keep their leases while the earlier batches ran
                self.log.renew(mc.name, [t["trace_id"] for t in picked[i:]], self.holder, self.cfg.lease, time.time())
            left = self._hold_budget(mc)
            if left is not None and left <= 0:
                with self._lock:
                    self.reserved[mc.name] -= left
                self._pause(mc, f"the budget of ${mc.max_cost_per_hour:g} an hour is spent")
                untried.extend(picked[i:])
                break
            try:
                with self._leased(mc, [t["trace_id"] for t in picked[i:]]):
                    got = self.score(mc, picked[i:i + step], max_cost=left)
            finally:
                if left is not None:
                    with self._lock:
                        self.reserved[mc.name] -= left
            untried.extend(got.pop("untried_traces"))
            for k in (SCORED, SKIPPED):
                counts[k] += got[k]
            counts["errored"] += got[ERROR]
            if got[UNTRIED] or (got[ERROR] and not got[SCORED]):
                if got[UNTRIED]:
                    self._pause(mc, f"the budget of ${mc.max_cost_per_hour:g} an hour is spent")
                untried.extend(picked[i + step:])   # the judge is down, the budget spent: the rest waits
                break

    def _advance(self, metric: str, due: list[dict[str, Any]], untried: list[dict[str, Any]]) -> None:
        """Move the metric's watermark past the new traces this pass looked at, but not past one
        it left untried (the budget, an outage) nor past one another pass has in flight, so a later
        pass finds it again. Called under the lock."""
        waiting = [t["completed_at"] for t in untried if t["attempts"] == 0]
        waiting += [c for c in self.in_flight[metric].values() if c is not None]
        fresh = [t["completed_at"] for t in due if t["attempts"] == 0]
        if waiting:
            self.watermark[metric] = max(self.watermark[metric], min(waiting))
        elif fresh:
            self.watermark[metric] = max(self.watermark[metric], max(fresh))

    def _budget_left(self, mc: MetricConfig) -> float | None:
        if mc.max_cost_per_hour is None:
            return None
        return mc.max_cost_per_hour - self.log.spent(mc.name, time.time() - HOUR)

    def _hold_budget(self, mc: MetricConfig) -> float | None:
        """The cost cap of the next batch, held until it is stored: what is left of the hour's
        budget less what the passes running beside it hold; half of that while they run, so
        passes side by side never spend more than the budget together."""
        if mc.max_cost_per_hour is None:
            return None
        spent = self.log.spent(mc.name, time.time() - HOUR)
        with self._lock:
            free = mc.max_cost_per_hour - spent - self.reserved[mc.name]
            cap = free / 2 if self.reserved[mc.name] > 0 else free
            self.reserved[mc.name] += cap
        return cap

    def _pause(self, mc: MetricConfig, why: str) -> None:
        if self.paused.get(mc.name) != why:
            self.say(f"assay monitor: {mc.name}: scoring paused: {why}; the traces wait and are scored later")
        self.paused[mc.name] = why

    def score(self, mc: MetricConfig, traces: list[dict[str, Any]], *, max_cost: float | None = None) -> dict[str, int]:
        """Score ``traces`` (rows of :meth:`MonitorLog.due`) with the metric in one run and record
        the outcome of each; counts by outcome."""
        from assay.formats.genai_spans import trace_records

        records: list[dict[str, Any]] = []
        outcomes: dict[str, dict[str, Any]] = {}
        for t in traces:
            spans = self.spans.spans(t["trace_id"])
            root = next((s["span_id"] for s in spans if s["parent_id"] is None), spans[0]["span_id"] if spans else None)
            base = {"trace_id": t["trace_id"], "start_ns": t["start_ns"], "completed_at": t["completed_at"],
                    "root_span_id": root}
            if not passes_filters(mc, t, spans):
                outcomes[t["trace_id"]] = {**base, "status": SKIPPED, "reason": "filtered out"}
                continue
            recs = trace_records(trace_of(t["trace_id"], spans), mc.per)
            lacking = [_missing(mc.name, r) for r in recs]
            if not recs or all(lacking):
                why = next((m for m in lacking if m), None) if any(map(_has_content, recs)) else None
                outcomes[t["trace_id"]] = {**base, "status": SKIPPED,
                                           "reason": f"the trace has no {why} ({mc.name} needs it)" if why
                                           else NO_CONTENT}
                continue
            recs = [r for r, m in zip(recs, lacking) if not m]
            records.extend(recs)
            outcomes[t["trace_id"]] = {**base, "status": ERROR, "reason": "not scored", "scores": None}
        if records:
            self._evaluate(mc, records, outcomes, max_cost)
        now = time.time()
        for o in outcomes.values():
            o["scored_at"] = now
            if self.export is not None and o["status"] == SCORED and _has_events(mc.name, o):
                o["export"] = "pending"
        self.log.record(mc.name, [o for o in outcomes.values() if o["status"] != UNTRIED])
        self._send(mc, [o for o in outcomes.values() if o["status"] == SCORED])
        counts: dict[str, Any] = {SCORED: 0, SKIPPED: 0, ERROR: 0, UNTRIED: 0}
        for o in outcomes.values():
            counts[o["status"]] += 1
        counts["untried_traces"] = [t for t in traces if outcomes[t["trace_id"]]["status"] == UNTRIED]
        if counts[ERROR]:
            why = next(o["reason"] for o in outcomes.values() if o["status"] == ERROR)
            self._pause(mc, f"{counts[ERROR]} trace(s) errored ({why}); retried in {self.cfg.retry_after:g} s")
        elif counts[SCORED]:
            if self.paused.pop(mc.name, None):
                self.say(f"assay monitor: {mc.name}: scoring resumed")
        return counts

    def _exported(self, pairs: list[tuple[str, str]], ok: bool) -> None:
        """The export's word on a batch of events: their scores marked ``sent`` or ``failed``."""
        if pairs:
            self.log.mark_export(pairs, ok, time.time())

    def resend_exports(self, now: float | None = None, limit: int = 500) -> int:
        """Queue again the evaluation events of the scores whose export failed ``retry_after``
        seconds ago or more, or that stayed ``pending`` long after being queued (a process that
        stopped before sending them); how many scores. Nothing without ``export``."""
        if self.export is None:
            return 0
        now = time.time() if now is None else now
        rows = self.log.export_due(now - self.cfg.retry_after, now - max(60.0, 3 * self.export.timeout), limit)
        if not rows:
            return 0
        self.log.requeue_export([(r["metric"], r["trace_id"]) for r in rows], now)
        by_metric: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            by_metric.setdefault(r["metric"], []).append(r)
        for metric, outcomes in by_metric.items():
            try:
                self.export.send(metric, outcomes)
            except Exception as e:  # marked pending: tried again once that is old
                self.say(f"assay monitor: {metric}: queueing evaluation events failed: {type(e).__name__}: {e}")
        return len(rows)

    def _send(self, mc: MetricConfig, scored: list[dict[str, Any]]) -> None:
        """The stored scores as evaluation events (queued; a failure is a line, never an error)."""
        if self.export is None or not scored:
            return
        try:
            self.export.send(mc.name, scored)
        except Exception as e:  # the scores are stored: the events are a copy
            self.say(f"assay monitor: {mc.name}: queueing evaluation events failed: {type(e).__name__}: {e}")

    def _evaluate(self, mc: MetricConfig, records: list[dict[str, Any]], outcomes: dict[str, dict[str, Any]],
                  max_cost: float | None) -> None:
        from assay.engine.evaluate import evaluate

        name = f"monitor:{mc.name}:{uuid.uuid4().hex[:12]}"
        untried = False
        run_id: str | None = None
        failure: str | None = None
        judge, timeout, attempts = self._judge(mc)
        try:
            res = evaluate(records, metrics=[mc.name], judge=judge, store=self.store, name=name,
                           options=mc.options or None, timeout=timeout, max_attempts=attempts,
                           max_consecutive_failures=mc.max_consecutive_failures, max_cost=max_cost, workers=1)
            run_id = res.run.get("run_id")
        except BudgetExceeded as e:      # the rows scored are stored; the others were never tried
            failure = " ".join(str(e).split())[:300]
            untried = True
        except RunIncomplete as e:       # the breaker, every row errored: what was scored is stored
            failure = " ".join(str(e).split())[:300]
            found = self.store.list_runs(name=name, limit=1)
            run_id = found[0]["id"] if found else None
        except AssayError as e:
            failure = " ".join(str(e).split())[:300]
        for o in outcomes.values():
            if o["status"] == ERROR and failure:
                o["reason"] = failure
                if untried:
                    o["status"] = UNTRIED
        if run_id is None:
            return
        self._collect(mc, run_id, outcomes, self._run_cost(run_id))

    def _judge(self, mc: MetricConfig) -> tuple[Any, float | None, int | None]:
        """The judge of a batch, with the limits every pass of this process shares: a model of
        its own (each pass runs its own event loop) whose limiter takes its leases from the
        judge's :class:`ProcessLimits`. Returns the judge and the timeout / attempts still to
        give :func:`~assay.engine.evaluate.evaluate` (None once they are the limiter's)."""
        if not isinstance(mc.judge, str) or not mc.judge:
            return mc.judge, mc.timeout, mc.max_attempts
        from assay.engine.evaluate import resolve_judge

        model, _ = resolve_judge(mc.judge, [], None, timeout=mc.timeout, max_attempts=mc.max_attempts)
        limiter = getattr(model, "limiter", None)
        if limiter is None or not hasattr(limiter, "share"):
            return mc.judge, mc.timeout, mc.max_attempts
        with self._lock:
            shared = self.limits.setdefault(mc.judge, ProcessLimits(getattr(limiter, "concurrency", 16)))
        limiter.share(shared)
        return model, None, None

    def _run_cost(self, run_id: str) -> float | None:
        """What the run's judge calls cost (USD; every session's, also of a run the budget stopped)."""
        costs = [(s.get("usage") or {}).get("cost_usd") for s in self.store.sessions(run_id)]
        known = [float(c) for c in costs if c is not None]
        return sum(known) if known else None

    def _collect(self, mc: MetricConfig, run_id: str, outcomes: dict[str, dict[str, Any]], cost: float | None) -> None:
        per_trace: dict[str, list[dict[str, Any]]] = {}
        span_ids: dict[str, list[str | None]] = {}
        for row in self.store.iter_scored(run_id):
            tid, _, sid = str(row.row_id or "").partition("-")
            if tid in outcomes:
                per_trace.setdefault(tid, []).append(
                    {o: _score_dict(sc) for o, sc in (row.scores.get(mc.name) or {}).items()})
                span_ids.setdefault(tid, []).append(sid or None)
        share = (cost / len(per_trace)) if cost and per_trace else None
        for tid, recs in per_trace.items():
            o = outcomes[tid]
            statuses = [s["status"] for r in recs for s in r.values()]
            o.update(run_id=run_id, scores=recs, cost=share, span_ids=span_ids[tid])
            if not statuses or any(s == "error" for s in statuses):
                err = next((s["reason"] for r in recs for s in r.values() if s["status"] == "error"), None)
                o.update(status=ERROR, reason=err or o.get("reason") or "no score")
            elif all(s == "skipped" for s in statuses):
                reason = next((s["reason"] for r in recs for s in r.values()), None)
                o.update(status=SKIPPED, reason=reason)
            else:
                o.update(status=SCORED, reason=None)
