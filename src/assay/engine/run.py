"""The second stage of a run: score a :class:`~assay.engine.plan.Plan` chunk by chunk.

Rows stream through in chunks of ``CHUNK``, so a million-row file is never held in memory
when the result is written to ``out``. Synchronous (classic) metrics run inline, or in worker
processes for large runs; async metrics (judges) and target calls share one concurrency
limit. Each chunk is committed to the store as one transaction once its rows are written, so
an interrupted run resumes from its last whole chunk (:func:`open_run`). While it runs, the
run's heartbeat is renewed after every chunk and every few seconds, with this session's judge
usage (:mod:`assay.store.sessions`), so a killed run shows as stale and its calls still count.

The run arms the circuit breaker of its judge's and endpoint target's limiters
(:meth:`~assay.models.limiter.Limiter.arm_breaker`): when it opens (requests in a row timed out
or could not connect), the chunk being scored is dropped, the whole chunks before it stay
stored, the run is left ``interrupted`` with the reason, and :class:`~assay.errors.RunIncomplete`
says how to resume. A run's caps (:mod:`assay.engine.budget`: ``max_cost``, ``max_errors``) stop it
the same way, with :class:`~assay.errors.BudgetExceeded`; its errored rows go to ``errors.jsonl``.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing as mp
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from assay.engine.aggregate import Accumulator, defect_settings
from assay.engine.budget import POLL_S, Budget, DeadLetter
from assay.engine.plan import PLAN_WINDOW, Plan
from assay.engine.target import TargetError
from assay.errors import AssayError, BudgetExceeded, CapReached, RunIncomplete
from assay.metrics.base import EvalContext, Metric, Score
from assay.records import Record
from assay.results import EvalResult, RowSink, row_inputs

CHUNK = 512          # rows scored together
MAX_WORKERS = 8      # worker processes by default, at most
MAX_CONSECUTIVE_FAILURES = 5   # the circuit breaker's default: requests in a row that timed out or failed to connect
#: CPU seconds per row of the synchronous metrics below which a run with the default number of
#: workers scores inline: sending a row to a worker process and its scores back costs a few µs
#: of CPU on each side, and the processes' start and the waits between chunks more. Measured on
#: 10,000 rows with 2 cores: exact_match (~10 µs a row) and f1_score (~15 µs) ran faster inline,
#: rougeL (~20 µs) about as fast either way, f1_score + rougeL (~35 µs) faster in workers
INLINE_BELOW_S = 20e-6
MEASURE_ROWS = 64     # rows scored inline to decide that (a chunk needs more)


# -- synchronous metrics, inline or in worker processes -------------------------------------------

def score_rows(metrics: Sequence[Metric], thresholds: Mapping[str, float], ctx: EvalContext,
               records: Sequence[Record], by_auto: frozenset[str] = frozenset()) -> list[dict[str, dict[str, Score]]]:
    """Synchronous metrics over some records: ``[{metric: {output: Score}}]`` per record. The
    metrics named in ``by_auto`` were chosen by ``auto``: each row gets them only where its
    fields call for them (:meth:`~assay.metrics.base.Metric.skip_reason`)."""
    if not metrics:
        return [{} for _ in records]
    # metric by metric over the whole chunk (Metric.score_batch), then regrouped by row
    columns = [m.score_batch(records, ctx, thresholds.get(m.name), m.name in by_auto) for m in metrics]
    names = [m.name for m in metrics]
    if len(names) == 1:
        name = names[0]
        return [{name: c} for c in columns[0]]
    return [dict(zip(names, row)) for row in zip(*columns)]


_WORKER: dict[str, Any] = {}


def _init_worker(names: list[str], thresholds: dict[str, float], options: dict[str, Any],
                 by_auto: frozenset[str] = frozenset()) -> None:
    from assay.metrics.base import REGISTRY, load_builtin_metrics

    load_builtin_metrics(names)
    # what the worker inherited from the run's process lives as long as the worker: out of
    # the collector's scans (which otherwise cost scoring ~5-10%)
    gc.freeze()
    gc.set_threshold(max(gc.get_threshold()[0], GC_YOUNG), *gc.get_threshold()[1:])
    _WORKER.update(metrics=[REGISTRY[n] for n in names], thresholds=thresholds,
                   ctx=EvalContext(options=options), by_auto=by_auto)


def _score_in_worker(records: Any) -> list[dict[str, dict[str, Score]]]:
    if isinstance(records, PackedRecords):
        records = records.unpack()
    return score_rows(_WORKER["metrics"], _WORKER["thresholds"], _WORKER["ctx"], records, _WORKER["by_auto"])


_FIELDS = tuple(Record.model_fields)
_new = object.__new__
_set = object.__setattr__


class PackedRecords:
    """Records on their way to a worker process, in less than pickling them one by one costs:
    per record, its field values in field order (the keys are the same for every record) and
    pydantic's other state (the fields set, extra and private attributes). :meth:`unpack` gives
    records equal to the originals, with the same state. Records whose fields are not exactly
    ``Record``'s, in order, are not packed (:meth:`pack` gives None)."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[tuple]):
        self.rows = rows

    def __reduce__(self) -> tuple:
        return (PackedRecords, (self.rows,))

    @classmethod
    def pack(cls, records: Sequence[Record]) -> PackedRecords | None:
        rows = []
        fields = _FIELDS
        for r in records:
            d = r.__dict__
            if r.__class__ is not Record or tuple(d) != fields:
                return None
            rows.append((tuple(d.values()), r.__pydantic_fields_set__, r.__pydantic_extra__, r.__pydantic_private__))
        return cls(rows)

    def unpack(self) -> list[Record]:
        out = []
        fields = _FIELDS
        for values, fields_set, extra, private in self.rows:
            r = _new(Record)
            _set(r, "__dict__", dict(zip(fields, values)))
            _set(r, "__pydantic_fields_set__", fields_set)
            _set(r, "__pydantic_extra__", extra)
            _set(r, "__pydantic_private__", private)
            out.append(r)
        return out


def worker_count(workers: int | None, sync_metrics: list[Metric], head_rows: int) -> int:
    """Processes for the synchronous metrics: ``workers`` when given (1 without ``fork``), else
    every core (up to ``MAX_WORKERS``) for runs of at least ``PLAN_WINDOW`` rows, else 1. (With
    the default, :class:`ChunkScorer` may still score inline: ``measure``.)"""
    if workers is not None:
        if workers < 1:
            raise AssayError(f"workers must be at least 1, got {workers}")
        return workers if sync_metrics and "fork" in mp.get_all_start_methods() else 1
    if not sync_metrics or head_rows < PLAN_WINDOW or "fork" not in mp.get_all_start_methods():
        return 1
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def make_pool(n: int, metrics: list[Metric], thresholds: dict[str, float], ctx: EvalContext,
              by_auto: frozenset[str] = frozenset()) -> ProcessPoolExecutor:
    """``n`` worker processes that score ``metrics`` (forked: they inherit every registered
    metric, the user's own included; ``by_auto``: see :func:`score_rows`)."""
    return ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("fork"), initializer=_init_worker,
                               initargs=([m.name for m in metrics], thresholds, dict(ctx.options), by_auto))


def freeze_heap() -> bool:
    """Move every object alive now out of the garbage collector's scans for the run
    (``gc.freeze``): a run allocates millions of short-lived objects, and each full collection
    would otherwise walk the whole heap of imported modules again (5-10% of a classic-metrics
    run). True when frozen here (the caller unfreezes at the end); False when the process
    already manages frozen objects of its own, which are left as they are."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


#: the collector's first threshold while a run scores (allocations less frees before a young
#: collection; Python's default is 700): a run allocates a few dozen containers a row, nearly
#: all freed with the row, so the default would collect every few dozen rows, for nothing
GC_YOUNG = 50_000


def chunks(it: Iterator[Record], size: int) -> Iterator[list[Record]]:
    """``it`` in lists of ``size`` (the last one shorter)."""
    while True:
        chunk = list(islice(it, size))
        if not chunk:
            return
        yield chunk


# -- the run in the store -------------------------------------------------------------------------

@dataclass
class StoreRun:
    """Where a run is saved: the store (None when saving is off), the run's id, how many rows
    a resumed run already has, and whether one was resumed."""

    store: Any = None
    run_id: str | None = None
    done: int = 0
    resumed: bool = False

    def heartbeat(self, usage: Callable[[], Any] | None = None) -> Any:
        """Start renewing the run's heartbeat (with ``usage()``, this session's judge usage so
        far) from a background thread: a :class:`~assay.store.sessions.Heartbeat` to ``stop()``,
        or None when the run is not saved."""
        if self.store is None:
            return None
        from assay.store.sessions import Heartbeat

        return Heartbeat(self.store, self.run_id, usage).start()

    def stopped(self, exc: BaseException) -> None:
        """The run stopped on ``exc``: marked ``interrupted`` (Ctrl-C, SIGTERM) or ``failed``,
        unless that is done already (:meth:`ChunkRunner.run` marks what stops it)."""
        if self.store is None or not self.store.owns(self.run_id):
            return
        if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError, SystemExit)):
            self.store.finish_run(self.run_id, "interrupted", error="interrupted")
        else:
            self.store.finish_run(self.run_id, "failed", error=f"{type(exc).__name__}: {exc}")

    def total_usage(self, session: dict[str, Any] | None) -> dict[str, Any] | None:
        """The whole run's judge usage: this session's (``session``, recorded now) added to
        every earlier session's of a resumed run."""
        if self.store is None or session is None:
            return session
        from assay.store.sessions import sum_usage

        self.store.heartbeat(self.run_id, usage=session)
        return sum_usage([s["usage"] for s in self.store.sessions(self.run_id)])


def run_config(plan: Plan, judge_model: Any, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The configuration a run is saved with; a resumed run must have the same."""
    return {"metrics": [m.name for m in plan.metrics], "thresholds": plan.thresholds,
            "mapping": dict(plan.mapping or {}), "family": plan.family,
            "target": plan.target.name if plan.target else None, "on_bad_row": plan.on_bad_row,
            "judge": getattr(judge_model, "name", None), "options": dict(options or {}),
            "layout": [[m.name, list(m.outputs)] for m in plan.metrics],
            # only when repeated: a run without repeats keeps the configuration (and hash) it had
            **({"repeats": plan.repeats} if plan.repeats > 1 else {})}


def open_run(store: Any, resume: bool | str, name: str | None, data: Any, source: str,
             config: dict[str, Any], judge_model: Any) -> StoreRun:
    """Start the run in the store, or reopen the unfinished one to resume (``resume=True``: the
    latest over the same data and configuration; ``resume="RUN"``: that one)."""
    from assay.store import open_store
    from assay.store.fingerprint import config_hash, data_fingerprint

    st = open_store(store)
    if st is None:
        if resume:
            raise AssayError("resume needs the store, but saving runs is turned off ($ASSAY_STORE=off)")
        return StoreRun()
    fp = data_fingerprint(data)
    chash = config_hash(config)
    prior = None
    if isinstance(resume, str) and resume:
        prior = st.get_run(resume)
        if prior["status"] == "completed":
            raise AssayError(f"run {prior['id']} is already complete; nothing to resume")
        if prior["data_fingerprint"] != fp or prior["config_hash"] != chash:
            what = "data" if prior["data_fingerprint"] != fp else "configuration (metrics, thresholds, mapping, judge ...)"
            raise AssayError(f"run {prior['id']} was made with different {what}; it can only be resumed "
                             "with the same data and options")
    elif resume:
        if fp is None:
            raise AssayError("resume needs data given as a file, folder, DataFrame or list, so that it can "
                             "check the data is the same")
        prior = st.find_resumable(fp, chash, name)
    if prior is not None:
        st.reopen_run(prior["id"])
        return StoreRun(st, prior["id"], int(prior["rows_done"]), True)
    run_id = st.start_run(name=name, source=source, fingerprint=fp, config=config, config_hash=chash,
                          metrics=config["metrics"], judge=getattr(judge_model, "name", None))
    return StoreRun(st, run_id, 0, False)


# -- judge accounting -----------------------------------------------------------------------------

def judge_stats(model: Any, since: Any = None) -> dict[str, int] | None:
    """The judge's call counts (a snapshot), or with ``since`` (an earlier snapshot) this run's share."""
    stats = getattr(model, "stats", None)
    if stats is None:
        return None
    if hasattr(stats, "since"):
        return stats.since(since)
    return {k: getattr(stats, k) for k in ("calls", "cache_hits", "shared", "errors")}


def judge_usage(model: Any, since: Any, options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """This run's judge usage: calls, cache hits, errors, tokens and cost (``assay.models.pricing``)."""
    if model is None:
        return None
    from assay.models.pricing import judge_usage as usage

    return usage(model, since, options)


# -- the chunk pipeline ---------------------------------------------------------------------------

async def gather_all(aws: Any) -> list[Any]:
    """``asyncio.gather`` that cancels the others (and waits for them) when one raises, so that
    nothing of a stopped chunk goes on calling the judge in the background."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def circuit_open() -> type:
    """:class:`~assay.models.limiter.CircuitOpen`, imported when an exception is matched against it
    (the limiters' module, with NumPy, is not loaded by a run without a judge or target)."""
    from assay.models.limiter import CircuitOpen

    return CircuitOpen


def breaker_limiters(judge: Any, target: Any) -> list[tuple[str, Any]]:
    """``(what, limiter)`` for the judge's and an endpoint target's limiters: those the run arms
    its circuit breaker on."""
    found = []
    for what, model in (("judge", judge), ("target", getattr(target, "fn", None))):
        limiter = getattr(model, "limiter", None)
        if callable(getattr(limiter, "arm_breaker", None)):
            found.append((f"{what} {getattr(model, 'name', None) or getattr(model, 'target_name', '')}".strip(),
                          limiter))
    return found


def accumulators(metrics: list[Metric], options: Mapping[str, Any]) -> dict[tuple[str, str], Accumulator]:
    """One aggregate accumulator per metric output, with the metric's defect settings."""
    return {(m.name, o): Accumulator(metric=m.name, output=o, higher_is_better=m.higher_is_better,
                                     **defect_settings(m, options))
            for m in metrics for o in m.outputs}


@dataclass
class Scoring:
    """What scoring a chunk needs: a :class:`~assay.engine.plan.Plan` without its data (the
    metrics, their thresholds, those chosen by ``auto``, and the target). Picklable, so that
    another engine can send it to its workers (:mod:`assay.scale`)."""

    metrics: list[Metric]
    thresholds: dict[str, float]
    by_auto: frozenset[str] = frozenset()
    target: Any = None
    repeats: int = 1                        # asks per row of each metric in ``repeated``
    repeated: frozenset[str] = frozenset()  # the metrics a judge model scores (the others run once)

    @classmethod
    def of(cls, plan: Plan) -> Scoring:
        return cls(list(plan.metrics), dict(plan.thresholds), frozenset(plan.by_auto), plan.target,
                   plan.repeats, frozenset(plan.repeated))

    def times(self, m: Metric) -> int:
        """How many times ``m`` is asked per row."""
        return self.repeats if m.name in self.repeated else 1

    @property
    def sync_metrics(self) -> list[Metric]:
        return [m for m in self.metrics if not m.is_async]

    @property
    def async_metrics(self) -> list[Metric]:
        return [m for m in self.metrics if m.is_async]


class RepeatedJudge:
    """The run's judge model for repeat ``repeat`` (1 and on) of a repeated judgment: every
    ``generate`` call carries the repeat, which the call cache keys
    (:meth:`~assay.models.limited.LimitedModel.generate`), so each repeat is its own call and a
    rerun answers every repeat from the cache. Everything else is the judge's own (a
    next-token distribution is exact: its repeats are the same call)."""

    def __init__(self, judge: Any, repeat: int):
        # names of their own, so that every attribute of the judge (``model``, ``name`` ...) reads through
        self._judge, self._repeat = judge, repeat

    def __getattr__(self, name: str) -> Any:
        return getattr(self._judge, name)

    async def generate(self, messages: Any, **kw: Any) -> Any:
        return await self._judge.generate(messages, repeat=self._repeat, **kw)


class ChunkScorer:
    """Scores chunks of records where the run is: the target's calls and the async metrics
    (judges) under one limit on calls in flight, the synchronous metrics inline or in ``n_workers``
    worker processes. :meth:`score` gives ``(filled, per_row)``: each record (a target's reply
    filled in, or its :class:`TargetError`) and its ``{metric: {output: Score}}``.

    The same object scores a chunk on a Ray worker (:mod:`assay.scale.ray_engine`), so a chunk
    is scored by the same code whatever the engine. ``depth``: chunks scored ahead of the one
    being consumed. ``measure``: the first ``MEASURE_ROWS`` rows of the first chunk longer than
    that are scored inline, and the worker processes are started only if its synchronous
    metrics took at least ``INLINE_BELOW_S`` of CPU a row; otherwise every chunk is scored
    inline (the scores are the same either way)."""

    def __init__(self, scoring: Scoring, ctx: EvalContext, *, concurrency: int | None = None, n_workers: int = 1,
                 measure: bool = False):
        self.scoring, self.ctx, self.n_workers = scoring, ctx, n_workers
        self.measure = measure and n_workers > 1 and bool(scoring.sync_metrics)
        # One limit on target and judge calls in flight: the one given, else the judge backend's
        # default, and at least 16 for targets.
        judge_limit = getattr(getattr(ctx.judge, "limiter", None), "concurrency", 0)
        self.sem = asyncio.Semaphore(concurrency or max(16, judge_limit))
        self.pool: ProcessPoolExecutor | None = None
        self.depth = max(2, n_workers + 1)
        self._repeat_ctx: dict[int, EvalContext] = {}

    def start(self) -> None:
        """Start the worker processes (when more than one, and not waiting to ``measure``)."""
        if self.n_workers > 1 and self.pool is None and not self.measure:
            s = self.scoring
            self.pool = make_pool(self.n_workers, s.sync_metrics, s.thresholds, self.ctx, s.by_auto)

    def _measured(self, seconds: float, rows: int) -> None:
        """The synchronous metrics took ``seconds`` of CPU for ``rows`` rows: start the worker
        processes, or score inline from now on."""
        self.measure = False
        if seconds / rows >= INLINE_BELOW_S:
            self.start()
        else:
            self.n_workers = 1

    async def _score_sync(self, rows: list[Record]) -> list[dict[str, dict[str, Score]]]:
        """The synchronous metrics' scores of ``rows``: in a worker process, or inline. While
        ``measure`` is on, a chunk of more than ``MEASURE_ROWS`` rows has its first rows scored
        inline (the very first one untimed: a metric's first call may load what it needs),
        their CPU time decides, and its other rows go where that decided."""
        s = self.scoring
        if self.pool is not None:
            packed = PackedRecords.pack(rows)
            return await asyncio.get_running_loop().run_in_executor(self.pool, _score_in_worker,
                                                                    rows if packed is None else packed)
        if not self.measure or len(rows) <= MEASURE_ROWS:
            return score_rows(s.sync_metrics, s.thresholds, self.ctx, rows, s.by_auto)
        first = score_rows(s.sync_metrics, s.thresholds, self.ctx, rows[:1], s.by_auto)
        cpu = time.thread_time()
        first += score_rows(s.sync_metrics, s.thresholds, self.ctx, rows[1:MEASURE_ROWS], s.by_auto)
        self._measured(time.thread_time() - cpu, MEASURE_ROWS - 1)
        return first + await self._score_sync(rows[MEASURE_ROWS:])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None

    async def _call_target(self, r: Record) -> Record | TargetError:
        async with self.sem:
            try:
                return await self.scoring.target.call(r)
            except TargetError as exc:
                return exc

    def _ctx(self, repeat: int) -> EvalContext:
        """The context of repeat ``repeat`` (0: the run's own)."""
        if not repeat or self.ctx.judge is None:
            return self.ctx
        ctx = self._repeat_ctx.get(repeat)
        if ctx is None:
            ctx = self._repeat_ctx[repeat] = EvalContext(judge=RepeatedJudge(self.ctx.judge, repeat),
                                                         options=self.ctx.options)
        return ctx

    async def _score_async(self, m: Metric, r: Record, repeat: int = 0) -> dict[str, Score]:
        async with self.sem:
            return await m.score(r, self._ctx(repeat), self.scoring.thresholds.get(m.name),
                                 m.name in self.scoring.by_auto)

    async def _score_repeated(self, m: Metric, r: Record) -> dict[str, Score]:
        """``m``'s scores of ``r``: once, or, for a repeated metric, each output's repeats
        combined (:func:`assay.results.repeats.combine`)."""
        n = self.scoring.times(m)
        if n == 1:
            return await self._score_async(m, r)
        from assay.results.repeats import combine

        runs = await gather_all(self._score_async(m, r, k) for k in range(n))
        return {o: combine([run[o] for run in runs]) for o in runs[0]}

    async def score(self, chunk: list[Record]) -> tuple[list, list]:
        """The chunk's records (a target's reply filled in, or its TargetError) and their scores."""
        s = self.scoring
        filled: list[Record | TargetError] = list(chunk)
        if s.target is not None:
            filled = await gather_all(self._call_target(r) for r in chunk)
        ok = [r for r in filled if not isinstance(r, TargetError)]
        scored = await self._score_sync(ok)
        it = iter(scored)
        per_row = [{m.name: m.error_all(str(r)) for m in s.metrics} if isinstance(r, TargetError) else next(it)
                   for r in filled]
        if s.async_metrics:
            jobs = [(i, m) for i, r in enumerate(filled) if not isinstance(r, TargetError)
                    for m in s.async_metrics]
            results = await gather_all(self._score_repeated(m, filled[i]) for i, m in jobs)  # type: ignore[arg-type]
            for (i, m), res in zip(jobs, results):
                per_row[i][m.name] = res
        return filled, per_row


def local_scorer(runner: ChunkRunner) -> ChunkScorer:
    """The local engine's chunk scorer: in this process, with worker processes for the
    synchronous metrics of a large run (:func:`worker_count`; with the default number, only
    where the metrics cost enough a row to be worth sending: ``ChunkScorer(measure=True)``)."""
    return ChunkScorer(Scoring.of(runner.plan), runner.ctx, concurrency=runner.concurrency,
                       n_workers=runner.n_workers, measure=runner.workers is None)


class ChunkRunner:
    """Scores a plan's records chunk by chunk and hands every row to the sink and the aggregates.

    Chunks are scored ahead (in worker processes, or while target and judge calls wait) and
    consumed in input order, so rows are written in the order they were read. A row's target
    error or metric error is recorded as such, never as a fail.

    ``scorer``: where chunks are scored, a function of this runner giving an object with
    ``depth`` (chunks scored ahead), ``start()``, ``async score(chunk) -> (filled, per_row)``
    and ``close()``; default :func:`local_scorer`. Whatever scores them, the chunks are written,
    tallied and committed here, in input order, so the rows, the aggregates and resume are the
    same; the run's caps (``budget``, :class:`~assay.engine.budget.Budget`) are checked here too,
    so they hold whatever scores the chunks, and errored rows go to ``errors.jsonl`` (``out``).
    """

    def __init__(self, plan: Plan, ctx: EvalContext, accs: dict[tuple[str, str], Accumulator], saved: StoreRun, *,
                 out: str | Path | None = None, concurrency: int | None = None, workers: int | None = None,
                 max_consecutive_failures: int | None = MAX_CONSECUTIVE_FAILURES,
                 usage: Callable[[], Any] | None = None, scorer: Callable[[ChunkRunner], Any] | None = None,
                 budget: Budget | None = None):
        self.plan, self.ctx, self.accs, self.saved = plan, ctx, accs, saved
        self.budget = budget if budget is not None and budget.active else None   # the run's caps
        self.concurrency = concurrency
        self.max_consecutive_failures = max_consecutive_failures
        self.usage = usage          # this session's judge usage so far (recorded with the heartbeats)
        self.beat: Any = None
        self.sink = RowSink(out, plan.layout, store=saved.store, run_id=saved.run_id)
        self.dead = DeadLetter(out)      # errors.jsonl: the errored rows, with their reasons
        self.counts = {"evaluated": 0, "errored": 0, "target_errors": 0}
        self.workers = workers       # as given (None: the default)
        self.n_workers = worker_count(workers, Scoring.of(plan).sync_metrics, len(plan.head))
        self.scorer = (scorer or local_scorer)(self)

    async def score_chunk(self, chunk: list[Record]) -> tuple[list, list]:
        """The chunk's records (a target's reply filled in, or its TargetError) and their scores."""
        return await self.scorer.score(chunk)

    def tally(self, scores: dict[str, dict[str, Score]], conv: str | None, target_error: bool) -> bool:
        """Count one row into the aggregates; True when it errored (a metric, or the target)."""
        had_error = False
        for mname, outs in scores.items():
            for oname, s in outs.items():
                self.accs[(mname, oname)].add(s, conv)
                if s.status == "error":
                    had_error = True
        self.counts["target_errors"] += target_error
        self.counts["evaluated"] += 1
        self.counts["errored"] += had_error
        return had_error or target_error

    def consume(self, chunk: list[Record], filled: list, per_row: list) -> None:
        """Tally and write one scored chunk, then commit it (one store transaction)."""
        for src, r, scores in zip(chunk, filled, per_row):
            failed = isinstance(r, TargetError)
            if failed:
                r = src
            errored = self.tally(scores, src.conversation_id, failed)
            inputs = row_inputs(r)
            if errored:     # first: the sink may add to ``inputs``
                self.dead.add(self.counts["evaluated"] - 1, inputs, scores, row_id=r.id,
                              conversation_id=r.conversation_id, target_error=failed)
            self.sink.add(inputs, scores, idx=self.counts["evaluated"] - 1, record=r, target_error=failed)
        if self.budget is not None and self.plan.target is not None:
            self.budget.add_target(r for r in filled if not isinstance(r, TargetError))
        self.sink.commit()
        self.dead.flush()
        if self.beat is not None:
            self.beat.poke()

    def replay_stored(self) -> None:
        """A resumed run: its stored rows count as they did, and are not scored again."""
        st, done = self.saved.store, self.saved.done
        for row in st.iter_scored(self.saved.run_id, stop=done):
            if self.tally(row.scores, row.conversation_id, row.target_error):
                self.dead.add(row.idx, row.inputs, row.scores, row_id=row.row_id, conversation_id=row.conversation_id,
                              target_error=row.target_error)
            self.sink.add(row.inputs, row.scores, stored=True)

    async def run(self, progress: Callable[[int], None] | None = None) -> None:  # noqa: C901
        """Score every record not yet stored. The store records an unfinished run's status
        (``interrupted`` or ``failed``, with the error) before the exception goes on."""
        saved = self.saved
        depth = self.scorer.depth
        pending: deque[tuple[list[Record], asyncio.Future]] = deque()
        status, error = "failed", None
        breakers = breaker_limiters(self.ctx.judge, self.plan.target)
        before = [lim.max_consecutive_failures for _, lim in breakers]
        for _, lim in breakers:
            lim.arm_breaker(self.max_consecutive_failures)
        self.beat = saved.heartbeat(self.usage)
        froze = freeze_heap()
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], GC_YOUNG), *thresholds[1:])
        try:
            if saved.done:
                self.replay_stored()
                if progress is not None:
                    progress(saved.done)
            self.scorer.start()
            for chunk in chunks(self.plan.records(saved.done), CHUNK):
                pending.append((chunk, asyncio.ensure_future(self.score_chunk(chunk))))
                if len(pending) >= depth:
                    await self._next(pending, progress)
            while pending:
                await self._next(pending, progress)
            status = "completed"
        except (KeyboardInterrupt, asyncio.CancelledError, SystemExit):   # Ctrl-C, SIGTERM
            status, error = "interrupted", "interrupted"
            raise
        except circuit_open() as exc:
            who = next((what for what, lim in breakers if lim.tripped is not None), "model")
            status = "interrupted"
            error = (f"stopped after {exc.failures} requests in a row to the {who} timed out or could not "
                     f"connect (the last: {exc.last})")
            raise self.incomplete(error) from None
        except (BudgetExceeded, CapReached) as exc:
            status, error = "interrupted", str(exc)
            raise self.incomplete(error, cap=exc.cap) from None
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            for _, fut in pending:
                fut.cancel()
                if fut.done() and not fut.cancelled():
                    fut.exception()   # retrieved: a chunk that failed too is no news
            try:
                self.dead.close(getattr(getattr(self.plan, "dataset", None), "bad_rows", ()))
                self.sink.close()   # the last store write; if it fails, the run stays resumable
            finally:
                gc.set_threshold(*thresholds)
                if froze:
                    gc.unfreeze()
                for (_, lim), n in zip(breakers, before):
                    lim.arm_breaker(n)
                self.scorer.close()
                if self.beat is not None:
                    self.beat.stop()
                if saved.store is not None and status != "completed":
                    try:
                        usage = saved.total_usage(self.usage() if self.usage else None)
                    except Exception:   # the accounting must not keep the run from being marked
                        usage = None
                    saved.store.finish_run(saved.run_id, status, error=error, usage=usage)

    def incomplete(self, why: str, cap: str | None = None) -> RunIncomplete:
        """The error that ends a run the circuit breaker (or, ``cap``, one of its caps) stopped:
        why, what is kept, how to go on."""
        saved, done = self.saved, self.counts["evaluated"]
        if saved.store is None:
            kept = f"{done} rows were scored, but nothing is saved (the store is off), so the run cannot be resumed"
        elif cap is not None:
            flag = "--max-cost" if cap == "max_cost" else "--max-errors"
            kept = (f"{done} rows are saved in run {saved.run_id} (interrupted); run the same command with "
                    f"--resume and a higher {flag} (resume=True, {cap}=...) to score the rest")
        else:
            kept = (f"{done} rows are saved in run {saved.run_id} (interrupted); once it answers, run the same "
                    "command with --resume (resume=True) to score the rest")
        exc: RunIncomplete = RunIncomplete(f"{why}; {kept}") if cap is None else BudgetExceeded(f"{why}; {kept}")
        if cap is not None:
            exc.cap = cap  # type: ignore[attr-defined]
        exc.run_id, exc.rows_done = saved.run_id, done  # type: ignore[attr-defined]
        return exc

    async def _next(self, pending: deque, progress: Callable[[int], None] | None) -> None:
        """Wait for the oldest chunk in flight and consume it."""
        chunk, fut = pending[0]
        if self.budget is not None:
            await self._within_budget(fut)     # a stop leaves the chunk pending: cancelled, its error read
        pending.popleft()
        self.consume(chunk, *(await fut))
        if progress is not None:
            progress(len(chunk))

    async def _within_budget(self, fut: asyncio.Future) -> None:
        """Before a chunk is waited for (so rows are left to score), and every ``POLL_S`` seconds
        while it is scored: :class:`BudgetExceeded` once a cap is reached."""
        budget = self.budget
        assert budget is not None
        while True:
            exc = budget.over(self.counts["errored"])
            if exc is not None:
                raise exc
            if fut.done() or budget.max_cost is None:
                return
            await asyncio.wait({fut}, timeout=POLL_S)

    def aggregates(self) -> dict[str, dict[str, Any]]:
        """``{output: aggregate}`` over every row scored (and replayed)."""
        return {o: a.result() for (_, o), a in self.accs.items()}

    def result(self, aggregates: dict[str, dict[str, Any]], run: dict[str, Any]) -> EvalResult:
        return self.sink.result(aggregates, run)
