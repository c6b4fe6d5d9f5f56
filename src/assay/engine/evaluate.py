"""The evaluation flow: records -> (target) -> plan -> score -> aggregate -> result.

Rows stream through in chunks, so a million-row file is never held in memory when the
result is written to ``out``. Synchronous (classic) metrics run inline; async metrics
(judges) and target calls share one concurrency limit.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import threading
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from itertools import chain, islice
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence

from assay.version import __version__
from assay.engine.aggregate import Accumulator, defect_settings
from assay.results import EvalResult, RowSink, row_inputs
from assay.engine.target import Target, TargetError
from assay.errors import AssayError, InputError
from assay.formats import open_dataset
from assay.metrics.base import EvalContext, Metric, Score, plan_auto, resolve
from assay.records import CANONICAL_FIELDS, Record

PLAN_WINDOW = 1000   # rows looked at to decide which metrics `auto` runs
CHUNK = 512          # rows scored together


def score_rows(metrics: Sequence[Metric], thresholds: Mapping[str, float], ctx: EvalContext,
               records: Sequence[Record]) -> list[dict[str, dict[str, Score]]]:
    """Synchronous metrics over some records: ``[{metric: {output: Score}}]`` per record."""
    return [{m.name: m.score_sync(r, ctx, thresholds.get(m.name)) for m in metrics} for r in records]


_WORKER: dict[str, Any] = {}


def _init_worker(names: list[str], thresholds: dict[str, float], options: dict[str, Any]) -> None:
    from assay.metrics.base import REGISTRY, load_builtin_metrics

    load_builtin_metrics()
    _WORKER.update(metrics=[REGISTRY[n] for n in names], thresholds=thresholds,
                   ctx=EvalContext(options=options))


def _score_in_worker(records: list[Record]) -> list[dict[str, dict[str, Score]]]:
    return score_rows(_WORKER["metrics"], _WORKER["thresholds"], _WORKER["ctx"], records)


def _worker_count(workers: int | None, sync_metrics: list[Metric], head_rows: int) -> int:
    if workers is not None:
        if workers < 1:
            raise AssayError(f"workers must be at least 1, got {workers}")
        return workers if sync_metrics and "fork" in mp.get_all_start_methods() else 1
    if not sync_metrics or head_rows < PLAN_WINDOW or "fork" not in mp.get_all_start_methods():
        return 1
    return max(1, min(os.cpu_count() or 1, 8))


def _make_pool(n: int, metrics: list[Metric], thresholds: dict[str, float], ctx: EvalContext) -> ProcessPoolExecutor:
    # fork: workers inherit every registered metric, the user's own included.
    return ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("fork"), initializer=_init_worker,
                               initargs=([m.name for m in metrics], thresholds, dict(ctx.options)))


def evaluate(data: Any = None, **kwargs: Any) -> EvalResult:
    """Evaluate ``data`` (a path, DataFrame, list of dicts) and/or a ``target``.

    Synchronous wrapper over :func:`evaluate_async`; works inside a running event loop
    (a notebook) by running in a worker thread.
    """
    return run_sync(lambda: evaluate_async(data, **kwargs))


def run_sync(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    """Run a coroutine from sync code, also inside a running event loop (a notebook), where
    it runs on a worker thread with a loop of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro_fn())
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = asyncio.run(coro_fn())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def _parse_metric_names(metrics: str | Sequence[str]) -> list[str]:
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",")]
    names = [m for m in metrics if m]
    if not names:
        raise AssayError("no metric named; use 'auto' or a comma-separated list (see `assay metrics`)")
    return names


def plan(names: list[str], present: set[str], family: str | None = None) -> list[Metric]:
    """The metrics to run: ``auto`` expands to those whose inputs are present."""
    chosen: list[Metric] = []
    explicit = [n for n in names if n != "auto"]
    if "auto" in names:
        chosen.extend(plan_auto(present, family))
    for m in resolve(explicit):
        if m not in chosen:
            chosen.append(m)
    if not chosen:
        have = ", ".join(sorted(present)) or "none"
        raise AssayError(f"no metric applies to this data (fields present: {have}); "
                         "name metrics with --metrics, map columns with --map, or pass a target")
    return chosen


def _present(records: Iterable[Record]) -> set[str]:
    out: set[str] = set()
    for r in records:
        for f in CANONICAL_FIELDS:
            if f not in out and r.has(f):
                out.add(f)
    return out


JUDGE_ENV = "ASSAY_JUDGE"


def resolve_judge(judge: Any, chosen: list[Metric], concurrency: int | None = None) -> tuple[Any, str | None]:
    """The judge model for a run, and where it came from.

    ``judge`` may be a spec string (``openai:gpt-4o-mini``, ``azure:DEPLOYMENT``,
    ``http://HOST:PORT/v1#MODEL``, ``local:/path/model.gguf``), a ChatModel, or None. With
    None, a run that has model-judged metrics uses ``$ASSAY_JUDGE`` when it names a spec, and
    otherwise the embedded default (a smoke-test judge, see the README). ``concurrency``: the
    judge's limit on calls in flight (default: its backend's); a judge given as a
    ``LimitedModel`` keeps its own limiter.
    """
    needed = any(m.kind in ("judge", "safety") for m in chosen)
    if judge is None and not needed:
        return None, None
    from assay.models import resolve

    if judge is not None:  # a LimitedModel comes back as it is
        return resolve(judge, role="judge", concurrency=concurrency), "given"
    spec = os.environ.get(JUDGE_ENV, "").strip()
    if spec:
        return resolve(spec, role="judge", concurrency=concurrency), f"${JUDGE_ENV}"
    if not any(m.kind == "judge" for m in chosen):
        # safety metrics alone: without a judge they score on the embedded safety classifier
        return None, "embedded safety classifier"
    return resolve(None, role="judge", concurrency=concurrency), "embedded default"


def _check_columns(chosen: list[Metric], present: set[str], source: str, n: int) -> None:
    """A metric the user named whose input is in no row at all is a mistake, not a skip."""
    for m in chosen:
        for req in m.requires:
            alts = req if isinstance(req, tuple) else (req,)
            if not any(a in present for a in alts):
                field = " or ".join(alts)
                raise InputError(f"no row has this field, which metric {m.name!r} needs "
                                 f"(looked at the first {n} rows); map a column to it with --map {alts[0]}=COLUMN",
                                 source=source, field=field)


def _judge_stats(model: Any, since: Any = None) -> dict[str, int] | None:
    """The judge's call counts (a snapshot), or with ``since`` (an earlier snapshot) this run's share."""
    stats = getattr(model, "stats", None)
    if stats is None:
        return None
    if hasattr(stats, "since"):
        return stats.since(since)
    return {k: getattr(stats, k) for k in ("calls", "cache_hits", "shared", "errors")}


def _judge_usage(model: Any, since: Any, options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """This run's judge usage: calls, cache hits, errors, tokens and cost (``assay.models.pricing``)."""
    if model is None:
        return None
    from assay.models.pricing import judge_usage

    return judge_usage(model, since, options)


def _check_thresholds(thresholds: Mapping[str, float], metrics: list[Metric]) -> dict[str, float]:
    known = {m.name for m in metrics}
    out = {}
    for k, v in thresholds.items():
        if k not in known:
            raise AssayError(f"threshold given for {k!r}, which is not among the metrics run "
                             f"({', '.join(sorted(known))})")
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            raise AssayError(f"threshold for {k!r} must be a number, got {v!r}") from None
    return out


def _open_run(store: Any, resume: bool | str, name: str | None, data: Any, source: str,
              config: dict[str, Any], judge_model: Any) -> tuple[Any, str | None, int, bool]:
    """The store, the run's id, how many rows a resumed run already has, and whether one was."""
    from assay.store import open_store
    from assay.store.fingerprint import config_hash, data_fingerprint

    st = open_store(store)
    if st is None:
        if resume:
            raise AssayError("resume needs the store, but saving runs is turned off ($ASSAY_STORE=off)")
        return None, None, 0, False
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
        return st, prior["id"], int(prior["rows_done"]), True
    run_id = st.start_run(name=name, source=source, fingerprint=fp, config=config, config_hash=chash,
                          metrics=config["metrics"], judge=getattr(judge_model, "name", None))
    return st, run_id, 0, False


def _chunks(it: Iterator[Record], size: int) -> Iterator[list[Record]]:
    while True:
        chunk = list(islice(it, size))
        if not chunk:
            return
        yield chunk


async def evaluate_async(
    data: Any = None,
    *,
    target: Callable[..., Any] | None = None,
    metrics: str | Sequence[str] = "auto",
    thresholds: Mapping[str, float] | None = None,
    mapping: Mapping[str, str] | None = None,
    out: str | Path | None = None,
    on_bad_row: str = "fail",
    concurrency: int | None = None,
    family: str | None = None,
    options: Mapping[str, Any] | None = None,
    judge: Any = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
    name: str | None = None,
    store: Any = None,
    resume: bool | str = False,
) -> EvalResult:
    """See :func:`evaluate`. ``progress`` is called with the number of rows just finished.

    The run is saved in the store (``store``: a path or SQLAlchemy URL, a Store, or None
    for the default of :func:`assay.store.open_store`; False saves nothing) under ``name``.
    ``resume=True`` continues the latest unfinished run over the same data with the same
    configuration (``resume="RUN"``: that run): its stored rows are kept, not scored again.

    ``workers``: processes for the CPU-bound synchronous metrics (BLEU, ROUGE ...). The
    default uses every core for runs of at least ``PLAN_WINDOW`` rows where ``fork`` is
    available, and scores inline otherwise; ``workers=1`` always scores inline.
    """
    if data is None:
        raise AssayError("no data: pass a path, a DataFrame or a list of rows")
    if on_bad_row not in ("fail", "skip"):
        raise AssayError(f"on_bad_row must be 'fail' or 'skip', got {on_bad_row!r}")
    if family not in (None, "azure", "databricks"):
        raise AssayError(f"family must be 'azure' or 'databricks', got {family!r}")
    started = time.time()
    names = _parse_metric_names(metrics)
    ds = open_dataset(data, mapping=mapping, on_bad_row=on_bad_row)
    tgt = Target(target) if target is not None else None
    records = iter(ds)
    head = list(islice(records, PLAN_WINDOW))
    if not head:
        raise InputError("no valid rows to evaluate", source=ds.source)
    present = _present(head)
    if tgt is not None:
        present |= {"response", "usage"}
    chosen = plan(names, present, family)
    _check_columns(chosen, present, ds.source, len(head))
    thr = _check_thresholds(thresholds or {}, chosen)
    if concurrency is not None and concurrency < 1:
        raise AssayError(f"concurrency must be at least 1, got {concurrency}")
    judge_model, judge_source = resolve_judge(judge, chosen, concurrency)
    judge_before = _judge_stats(judge_model)
    _judge_usage(judge_model, judge_before, options)   # a malformed judge price fails now, not after the run
    ctx = EvalContext(judge=judge_model, options=dict(options or {}))
    config = {"metrics": [m.name for m in chosen], "thresholds": thr, "mapping": dict(mapping or {}),
              "family": family, "target": tgt.name if tgt else None, "on_bad_row": on_bad_row,
              "judge": getattr(judge_model, "name", None), "options": dict(options or {}),
              "layout": [[m.name, list(m.outputs)] for m in chosen]}
    st, run_id, done, resumed = _open_run(store, resume, name, data, ds.source, config, judge_model)
    # One limit on target and judge calls in flight: the one given, else the judge backend's
    # default (32 OpenAI, 16 Azure, 8 other endpoints, 2 in-process), and at least 16 for targets.
    judge_limit = getattr(getattr(judge_model, "limiter", None), "concurrency", 0)
    sem = asyncio.Semaphore(concurrency or max(16, judge_limit))

    accs: dict[tuple[str, str], Accumulator] = {}
    for m in chosen:
        for o in m.outputs:
            accs[(m.name, o)] = Accumulator(metric=m.name, output=o, higher_is_better=m.higher_is_better,
                                            **defect_settings(m, ctx.options))
    sink = RowSink(out, [(m.name, m.outputs) for m in chosen], store=st, run_id=run_id)
    counts = {"evaluated": 0, "errored": 0, "target_errors": 0}
    sync_metrics = [m for m in chosen if not m.is_async]
    async_metrics = [m for m in chosen if m.is_async]

    async def call_target(r: Record) -> Record | TargetError:
        async with sem:
            try:
                return await tgt.call(r)  # type: ignore[union-attr]
            except TargetError as exc:
                return exc

    async def score_async(m: Metric, r: Record) -> dict[str, Score]:
        async with sem:
            return await m.score(r, ctx, thr.get(m.name))

    n_workers = _worker_count(workers, sync_metrics, len(head))
    pool = _make_pool(n_workers, sync_metrics, thr, ctx) if n_workers > 1 else None
    loop = asyncio.get_running_loop()

    async def score_chunk(chunk: list[Record]) -> tuple[list, list]:
        filled: list[Record | TargetError] = list(chunk)
        if tgt is not None:
            filled = list(await asyncio.gather(*(call_target(r) for r in chunk)))
        ok = [r for r in filled if not isinstance(r, TargetError)]
        if pool is not None:
            scored = await loop.run_in_executor(pool, _score_in_worker, ok)
        else:
            scored = score_rows(sync_metrics, thr, ctx, ok)
        it = iter(scored)
        per_row = [{m.name: m.error_all(str(r)) for m in chosen} if isinstance(r, TargetError) else next(it)
                   for r in filled]
        if async_metrics:
            jobs = [(i, m) for i, r in enumerate(filled) if not isinstance(r, TargetError)
                    for m in async_metrics]
            results = await asyncio.gather(*(score_async(m, filled[i]) for i, m in jobs))  # type: ignore[arg-type]
            for (i, m), res in zip(jobs, results):
                per_row[i][m.name] = res
        return filled, per_row

    def tally(scores: dict[str, dict[str, Score]], conv: str | None, target_error: bool) -> None:
        had_error = False
        for mname, outs in scores.items():
            for oname, s in outs.items():
                accs[(mname, oname)].add(s, conv)
                if s.status == "error":
                    had_error = True
        counts["target_errors"] += target_error
        counts["evaluated"] += 1
        counts["errored"] += had_error

    def consume(chunk: list[Record], filled: list, per_row: list) -> None:
        for src, r, scores in zip(chunk, filled, per_row):
            failed = isinstance(r, TargetError)
            if failed:
                r = src
            tally(scores, src.conversation_id, failed)
            sink.add(row_inputs(r), scores, idx=counts["evaluated"] - 1, record=r, target_error=failed)
        sink.commit()
        if progress is not None:
            progress(len(chunk))

    # A resumed run: its stored rows count as they did, and are not scored again.
    if done:
        for row in st.iter_scored(run_id, stop=done):
            tally(row.scores, row.conversation_id, row.target_error)
            sink.add(row.inputs, row.scores, stored=True)
        if progress is not None:
            progress(done)

    # Chunks are scored ahead (in worker processes, or while target/judge calls wait) and
    # consumed in input order, so rows are written in the order they were read.
    depth = max(2, n_workers + 1)
    pending: deque[tuple[list[Record], asyncio.Future]] = deque()
    status, error = "failed", None
    try:
        for chunk in _chunks(islice(chain(head, records), done, None), CHUNK):
            pending.append((chunk, asyncio.ensure_future(score_chunk(chunk))))
            if len(pending) >= depth:
                c, fut = pending.popleft()
                consume(c, *(await fut))
        while pending:
            c, fut = pending.popleft()
            consume(c, *(await fut))
        status = "completed"
    except (KeyboardInterrupt, asyncio.CancelledError):
        status, error = "interrupted", "interrupted"
        raise
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        for _, fut in pending:
            fut.cancel()
        try:
            sink.close()   # the last store write; if it fails, the run stays resumable
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            if st is not None and status != "completed":
                st.finish_run(run_id, status, error=error)

    run = {
        "assay_version": __version__,
        "source": ds.source,
        "format": ds.format,
        "metrics": [m.name for m in chosen],
        "thresholds": {m.name: thr.get(m.name, m.threshold) for m in chosen},
        "target": tgt.name if tgt else None,
        "judge": getattr(judge_model, "name", None),
        "judge_source": judge_source,
        "judge_note": getattr(getattr(judge_model, "model", judge_model), "note", None),
        "judge_calls": _judge_stats(judge_model, judge_before),
        "judge_usage": _judge_usage(judge_model, judge_before, options),
        "rows_read": ds.rows_read,
        "rows_evaluated": counts["evaluated"],
        "rows_skipped": len(ds.bad_rows),
        "rows_errored": counts["errored"],
        "target_errors": counts["target_errors"],
        "bad_rows": [{"source": e.source, "line": e.line, "field": e.field, "error": str(e)}
                     for e in ds.bad_rows],
        "started_at": started,
        "duration_s": time.time() - started,
        "run_id": run_id,
        "name": name,
        "store": st.display_url if st is not None else None,
        "resumed": resumed,
        "resumed_rows": done,
    }
    aggregates = {o: a.result() for (_, o), a in accs.items()}
    from assay.simulate.jailbreak import add_jailbreak_figures
    add_jailbreak_figures(run, aggregates, sink, options)  # run["jailbreak"]: paired jailbreak sets
    if st is not None:
        st.finish_run(run_id, "completed", aggregates=aggregates, summary=run, usage=run.get("judge_usage"))
    return sink.result(aggregates, run)
