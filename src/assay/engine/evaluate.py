"""The evaluation flow: records -> (target) -> plan -> score -> aggregate -> result.

Three stages: :mod:`assay.engine.plan` reads the data's first rows and picks and checks the
metrics; :mod:`assay.engine.run` scores the rows chunk by chunk (worker processes, one
concurrency limit, store writes and resume); this module resolves the judge, ties the stages
together, adds the run-level aggregations the metrics register
(:mod:`assay.metrics.aggregations`) and writes the run summary.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from assay.engine.budget import Budget, check_caps, prior_cost, target_price, with_other
from assay.engine.plan import PLAN_WINDOW, Plan, make_plan, plan
from assay.engine.run import (
    MAX_CONSECUTIVE_FAILURES,
    ChunkRunner,
    StoreRun,
    accumulators,
    judge_stats,
    judge_usage,
    open_run,
    run_config,
)
from assay.errors import AssayError
from assay.metrics.aggregations import apply_run_aggregations
from assay.metrics.base import EvalContext, Metric
from assay.results import EvalResult
from assay.results.summary import RunSummary
from assay.version import __version__

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["ENGINES", "JUDGE_ENV", "NO_JUDGE_SOURCE", "PLAN_WINDOW", "call_limits", "evaluate", "evaluate_async", "plan",
           "register_engine", "resolve_judge", "run_sync", "scorers_of"]


PARAMETERS = """
Parameters (every one but ``data`` by keyword):

* ``data``: the rows: a path (JSONL, JSON, CSV, Parquet, or a folder of them), a pandas
  DataFrame, or a list of dicts or Records.
* ``target``: the application under test, called for each row to fill in its response
  (a callable, sync or async, or an endpoint URL); None scores the responses in ``data``.
* ``metrics``: metric names, a list or a comma-separated string; ``"auto"`` (the default)
  runs every metric that at least one row has the fields for (the whole data set is read
  once to see), each on the rows whose own fields call for it: a row with ground truth gets
  correctness, one without it relevance_to_query. A metric named runs on every row that has
  its inputs.
* ``thresholds``: ``{metric: pass threshold}``, overriding the metrics' defaults.
* ``mapping``: ``{record field: column}`` for data whose columns have other names; a
  column that no row has is an error.
* ``format``: ``"jsonl"``, ``"json"``, ``"csv"`` or ``"parquet"`` when ``data`` is a path
  whose name does not say (``"-"`` for standard input, ``/dev/stdin``, a FIFO); a stream is
  read once, into a temporary copy, and fingerprinted as it is read.
* ``out``: a folder for ``rows.jsonl`` (rows streamed as scored) and ``summary.json``;
  None keeps the rows in memory.
* ``on_bad_row``: ``"fail"`` (stop at the first row that cannot be read) or ``"skip"``
  (leave it out; it is listed in ``run["bad_rows"]``).
* ``concurrency``: the limit on target and judge calls in flight (default: the judge
  backend's, and at least 16 for targets).
* ``family``: ``"azure"`` or ``"databricks"``: the metric family ``auto`` picks from.
* ``options``: run options passed to the metrics (``defect_threshold``, prices ...).
* ``judge``: the judge model: a spec string, a ChatModel, or None (``$ASSAY_JUDGE``, else
  no judge model: judge metrics with a measured embedded scorer use it, the others are
  skipped with the reason; ``"embedded"`` is the small embedded LLM, a smoke test).
* ``workers``: processes for the CPU-bound synchronous metrics (BLEU, ROUGE ...). The
  default uses every core for runs of at least ``PLAN_WINDOW`` rows where ``fork`` is
  available and the metrics cost enough a row to be worth sending to another process (the
  first 64 rows, scored inline, tell), and scores inline otherwise; ``workers=1`` always
  scores inline, a number given always uses that many.
* ``progress``: called with the number of rows just finished.
* ``on_plan``: called once, before any row is scored, with the plan (``run["plan"]``: the
  rows each metric will run on, and why it will not run on the others;
  :func:`assay.engine.plan.describe_plan` puts it in lines of text).
* ``name``: a name for the run in the store.
* ``store``: where the run is saved: a path or SQLAlchemy URL, a Store, or None for the
  default of :func:`assay.store.open_store`; False saves nothing.
* ``resume``: True continues the latest unfinished run over the same data with the same
  configuration, ``"RUN"`` (an id or name) that run: its stored rows are kept, not scored
  again.
* ``timeout``: seconds to wait for one judge call before it counts as timed out (default:
  ``$ASSAY_JUDGE_TIMEOUT``, else 120). A call that times out is tried at most twice.
* ``max_attempts``: tries per judge call in all, on 429, 5xx and connection errors (default:
  ``$ASSAY_JUDGE_MAX_ATTEMPTS``, else 6; timeouts stop at 2, or at ``max_attempts`` if lower).
* ``max_consecutive_failures``: the circuit breaker. After this many judge (or endpoint
  target) requests in a row timed out or could not connect, with no answer in between, the run
  stops: the chunks already scored stay stored, the run is left ``interrupted`` with the reason
  (resume it with ``resume=True``), and :class:`~assay.errors.RunIncomplete` is raised
  (default 5; 0 turns the breaker off).
* ``max_cost``: a cap in USD on what the run spends: the judge's calls (at the judge's price;
  an unknown price is an error) and the target's tokens where the target's price is known
  (``options={"target_price": "IN,OUT"}``, ``$ASSAY_TARGET_PRICE``, or an endpoint target's
  model in the price table). Once reached, the run stops as the circuit breaker stops it: the
  rows scored are saved, the run is left ``interrupted`` with the reason, and
  :class:`~assay.errors.BudgetExceeded` (a :class:`~assay.errors.RunIncomplete`) is raised;
  ``resume=True`` with a higher cap goes on (the cap counts every session of the run).
* ``other_spend``: what else the run pays for, counted against ``max_cost`` (a red team's
  attacker model): an object with ``usage()`` (this session's usage, with ``cost_usd``) and a
  ``prior_cost`` attribute, which a resumed run sets to the earlier sessions' spending; its usage
  is recorded with each session's (``usage["other"]``), so a resumed run adds it back.
* ``max_errors``: the same for errored rows (a target error, or any metric output in error):
  the run stops once this many rows have errored. With ``out``, the errored rows, with their
  reasons and inputs, are also written to ``errors.jsonl`` (:mod:`assay.engine.budget`).
* ``engine``: where the chunks are scored: ``"local"`` (the default: this process, with worker
  processes for the synchronous metrics) or ``"ray"`` (a pool of Ray actors, each with the
  metrics and its own judge; needs ``pip install 'assay[ray]'``; see docs/scale.md). The rows,
  the aggregates, the store and resume are the same whichever scores them.
* ``ray_address``: with ``engine="ray"``, the cluster to join (``ray://HOST:10001``, ``auto``);
  default: the Ray already started in this process, else a local one on every core.

* ``repeats``: asks per row of each metric a judge model scores (default 1). With ``N > 1``
  each row's judged scores are the mean of ``N`` answers, with the share of passing repeats,
  their spread and a verdict (``stable_pass``, ``stable_fail``, ``flaky``) in the score's
  properties (:mod:`assay.results.repeats`); the aggregates count every repeat in the pass rate,
  take the row as the unit of their intervals and give the flaky share. Every repeat is its own
  judge call, kept in the call cache under its repeat (repeat 0 under the key a run without
  repeats uses), so a rerun costs nothing. Metrics that no judge model scores run once.
* ``batch``: True (or ``{"poll": seconds, "progress": fn(status, done, total), "state_dir": path}``)
  sends the judge's calls through its provider's batch API first (OpenAI, Anthropic; half price),
  then scores as usual from the call cache (:mod:`assay.engine.batch_run`); the batch's cost, at the
  batch price, is in the judge usage under ``other``.

Returns an :class:`~assay.results.EvalResult`: rows, per-output aggregates, and
``run``, the run's summary (:class:`~assay.results.summary.RunSummary`) as a dict.
"""


def documented(fn: F) -> F:
    """Append the parameters of :func:`evaluate` to ``fn``'s docstring."""
    fn.__doc__ = inspect.cleandoc(fn.__doc__ or "").rstrip() + "\n\n" + PARAMETERS.strip() + "\n"
    return fn


@documented
def evaluate(
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
    timeout: float | None = None,
    max_attempts: int | None = None,
    max_consecutive_failures: int | None = None,
    format: str | None = None,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    max_cost: float | None = None,
    max_errors: int | None = None,
    repeats: int = 1,
    other_spend: Any = None,
    batch: Any = None,
) -> EvalResult:
    """Evaluate ``data`` (a path, DataFrame, list of dicts) and/or a ``target``.

    Synchronous wrapper over :func:`evaluate_async`; works inside a running event loop
    (a notebook) by running in a worker thread."""
    return run_sync(lambda: evaluate_async(
        data, target=target, metrics=metrics, thresholds=thresholds, mapping=mapping, out=out,
        on_bad_row=on_bad_row, concurrency=concurrency, family=family, options=options, judge=judge,
        workers=workers, progress=progress, name=name, store=store, resume=resume, timeout=timeout,
        max_attempts=max_attempts, max_consecutive_failures=max_consecutive_failures, format=format,
        on_plan=on_plan, engine=engine, ray_address=ray_address, max_cost=max_cost, max_errors=max_errors,
        repeats=repeats, other_spend=other_spend, batch=batch))


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


# Engines other than the local one, by name: each a function of the run's settings (``address``,
# ``judge`` as given, ``concurrency``, ``timeout``, ``max_attempts``) that checks them and gives the
# chunk scorer factory for :class:`~assay.engine.run.ChunkRunner`. A layer above the engine
# registers them (``assay.scale`` registers ``"ray"`` when it is imported); the modules that register
# the engines assay ships are imported by name on first use (``BUILTIN_ENGINES``), as plugins are.
ENGINES: dict[str, Callable[..., Callable[[ChunkRunner], Any]]] = {}
BUILTIN_ENGINES = {"ray": "assay.scale"}


def register_engine(name: str, make: Callable[..., Callable[[ChunkRunner], Any]]) -> None:
    """Make ``engine=name`` score chunks with the scorer factory ``make(**settings)`` gives."""
    ENGINES[name] = make


def engine_scorer(engine: str, **settings: Any) -> Callable[[ChunkRunner], Any] | None:
    """The chunk scorer factory of ``engine`` (None for the local engine's own), or an
    :class:`AssayError` naming the engines there are; checked before the run is opened."""
    name = str(engine or "local").strip().lower()
    if name == "local":
        if settings.get("address"):
            raise AssayError("ray_address (--ray-address) needs engine='ray' (--engine ray)")
        return None
    if name not in ENGINES and name in BUILTIN_ENGINES:
        import importlib

        importlib.import_module(BUILTIN_ENGINES[name])      # registers it
    if name not in ENGINES:
        raise AssayError(f"unknown engine {engine!r}: use one of {', '.join(['local', *sorted({*ENGINES, *BUILTIN_ENGINES})])}")
    return ENGINES[name](**settings)


JUDGE_ENV = "ASSAY_JUDGE"
TIMEOUT_ENV = "ASSAY_JUDGE_TIMEOUT"
MAX_ATTEMPTS_ENV = "ASSAY_JUDGE_MAX_ATTEMPTS"


def call_limits(timeout: Any = None, max_attempts: Any = None,
                max_consecutive_failures: Any = None) -> tuple[float | None, int | None, int]:
    """The judge's call limits, checked: those given, else ``$ASSAY_JUDGE_TIMEOUT`` and
    ``$ASSAY_JUDGE_MAX_ATTEMPTS``, else None (the judge role's defaults); the breaker's count,
    else :data:`~assay.engine.run.MAX_CONSECUTIVE_FAILURES`. A bad value raises
    :class:`AssayError` naming the option or the variable."""
    def given(value: Any, env: str, what: str) -> tuple[Any, str]:
        if value is None and os.environ.get(env, "").strip():
            return os.environ[env].strip(), f"${env}"
        return value, what

    value, what = given(timeout, TIMEOUT_ENV, "timeout")
    seconds = None
    if value is not None:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = math.nan
        if isinstance(value, bool) or not math.isfinite(seconds) or seconds <= 0:
            raise AssayError(f"{what} must be a number of seconds above 0, got {value!r}")
    value, what = given(max_attempts, MAX_ATTEMPTS_ENV, "max_attempts")
    attempts = None if value is None else _whole(value, what, 1)
    breaker = (MAX_CONSECUTIVE_FAILURES if max_consecutive_failures is None
               else _whole(max_consecutive_failures, "max_consecutive_failures", 0))
    return seconds, attempts, breaker


def _whole(value: Any, what: str, least: int) -> int:
    try:
        n = int(str(value).strip())
    except (TypeError, ValueError):
        n = least - 1
    if isinstance(value, bool) or n < least:
        raise AssayError(f"{what} must be a whole number of at least {least}, got {value!r}")
    return n


def resolve_judge(judge: Any, chosen: list[Metric], concurrency: int | None = None, *,
                  timeout: float | None = None, max_attempts: int | None = None) -> tuple[Any, str | None]:
    """The judge model for a run, and where it came from.

    ``judge`` may be a spec string (``openai:gpt-4o-mini``, ``azure:DEPLOYMENT``,
    ``http://HOST:PORT/v1#MODEL``, ``local:/path/model.gguf``, ``embedded`` for the small
    embedded LLM, a smoke test, an aligned judge's ``.yaml`` file), a ChatModel, or None. With None, a run that has model-judged
    metrics uses ``$ASSAY_JUDGE`` when it names a spec; otherwise there is no judge model: the
    judge metrics with a measured embedded scorer use it and the others are skipped
    (:mod:`assay.judges.scorers`), and safety metrics use the embedded safety classifier.
    ``concurrency``: the
    judge's limit on calls in flight (default: its backend's); ``timeout`` / ``max_attempts``:
    seconds per call and tries per call (None: the judge role's). A judge given as a
    ``LimitedModel`` keeps its own limiter.
    """
    needed = any(m.kind in ("judge", "safety") for m in chosen)
    if judge is None and not needed:
        return None, None
    from assay.models import resolve

    kw: dict[str, Any] = {"concurrency": concurrency}
    if timeout is not None:
        kw["timeout"] = timeout
    if max_attempts is not None:
        kw["max_attempts"] = max_attempts
    from assay.engine.align import is_aligned_file, resolve_aligned

    if is_aligned_file(judge):  # an aligned judge (assay judge align): its base judge with examples
        return resolve_aligned(judge, **kw), "given"
    if judge is not None:  # a LimitedModel comes back as it is
        return resolve(judge, role="judge", **kw), "given"
    spec = os.environ.get(JUDGE_ENV, "").strip()
    if spec:
        return resolve(spec, role="judge", **kw), f"${JUDGE_ENV}"
    if not any(m.kind == "judge" for m in chosen):
        # safety metrics alone: without a judge they score on the embedded safety classifier
        return None, "embedded safety classifier"
    return None, NO_JUDGE_SOURCE


NO_JUDGE_SOURCE = "no judge: embedded scorers where measured"


def scorers_of(metrics: Sequence[Metric], judge_model: Any, options: Mapping[str, Any] | None = None
               ) -> dict[str, dict[str, Any]]:
    """Who scores each metric of a run, and how good it was measured to be: ``{metric: {"by":
    name or None, "kind": "formula" | "judge" | "smoke-test judge" | "embedded scorer" |
    "embedded classifier" | "skipped", "label": a short label, "fidelity": one line of measured
    figures (embedded scorers), "reason": why it is skipped}}``."""
    if judge_model is None and all(m.kind not in ("judge", "safety") for m in metrics):
        # formulas only (classic metrics): the judges' modules stay unloaded
        return {m.name: {"by": None, "kind": "formula", "label": "formula"} for m in metrics}
    from assay.judges import is_smoke_test, scoring_mode
    from assay.judges.scorers import NEEDS_JUDGE, embedded_scorer, fidelity_line

    out: dict[str, dict[str, Any]] = {}
    judge_name = str(getattr(judge_model, "name", "") or "") or None
    smoke = is_smoke_test(judge_model)
    by_prob = (judge_model is not None
               and scoring_mode(EvalContext(options=dict(options or {})), judge_model) == "probability")
    safety_choice = str((options or {}).get("safety_scorer", "auto") or "auto").lower()
    for m in metrics:
        if m.kind == "safety":
            embedded = safety_choice in ("embedded", "rules") or (safety_choice != "judge" and (judge_model is None or smoke))
            if embedded:
                from assay.metrics.safety.harms import scorer_info

                out[m.name] = scorer_info(m.name, options)
                continue
        if m.kind not in ("judge", "safety"):
            out[m.name] = {"by": None, "kind": "formula", "label": "formula"}
        elif judge_model is not None:
            label = f"{judge_name} (smoke test)" if smoke else str(judge_name)
            if by_prob:
                # the value, pass/fail and the mean are all this one number (not the nearest scale point)
                label += "; score: expected value from token probabilities"
            out[m.name] = {"by": judge_name, "kind": "smoke-test judge" if smoke else "judge", "label": label,
                           "scoring": "probability" if by_prob else "parsed"}
        else:
            s = embedded_scorer(m.name)
            missing = s.needs() if s is not None else None
            if s is None or missing:
                out[m.name] = {"by": None, "kind": "skipped", "label": "needs a judge",
                               "reason": NEEDS_JUDGE + (f" ({s.name}: {missing})" if missing else "")}
            else:
                fig = s.fidelity(m.name)
                auc = f", AUC {fig['auc']:.2f}" if fig.get("auc") is not None else ""
                out[m.name] = {"by": s.label, "kind": "embedded scorer", "label": f"{s.label}{auc}",
                               "fidelity": fidelity_line(fig)}
    return out


@documented
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
    timeout: float | None = None,
    max_attempts: int | None = None,
    max_consecutive_failures: int | None = None,
    format: str | None = None,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    max_cost: float | None = None,
    max_errors: int | None = None,
    repeats: int = 1,
    other_spend: Any = None,
    batch: Any = None,
) -> EvalResult:
    """Evaluate ``data`` and/or a ``target``: the coroutine behind :func:`evaluate`."""
    started = time.time()
    scorer = engine_scorer(engine, address=ray_address, judge=judge, concurrency=concurrency, timeout=timeout,
                           max_attempts=max_attempts)
    if judge is not None and (timeout is not None or max_attempts is not None) and limited(judge):
        raise AssayError("timeout and max_attempts set up the judge's limiter, but this judge is a LimitedModel "
                         "with a limiter of its own: set them there (Limiter(timeout=..., max_attempts=...))")
    timeout, max_attempts, breaker = call_limits(timeout, max_attempts, max_consecutive_failures)
    check_caps(max_cost, max_errors)
    repeats = _whole(repeats, "repeats", 1)
    p = make_plan(data, target=target, metrics=metrics, thresholds=thresholds, mapping=mapping,
                  on_bad_row=on_bad_row, family=family, format=format, upfront=on_plan is not None)
    if concurrency is not None and concurrency < 1:
        raise AssayError(f"concurrency must be at least 1, got {concurrency}")
    if out is not None:
        make_out_folder(out)       # before the run is opened in the store
    judge_model, judge_source = resolve_judge(judge, p.metrics, concurrency, timeout=timeout,
                                              max_attempts=max_attempts)
    set_repeats(p, repeats, judge_model, options)
    judge_before = judge_stats(judge_model)
    usage_now = judge_usage(judge_model, judge_before, options)   # a malformed judge price fails now, not after the run
    def session_usage() -> dict[str, Any] | None:
        return with_other(judge_usage(judge_model, judge_before, options), other_spend)

    budget = Budget(max_cost, max_errors, judge_usage=session_usage,
                    target_price=target_price(p.target, options) if max_cost is not None else None)
    budget.check_price(judge_model, usage_now)
    ctx = EvalContext(judge=judge_model, options=dict(options or {}))
    accs = accumulators(p.metrics, ctx.options)       # a malformed defect threshold fails before the run starts
    if on_plan is not None:
        on_plan(p.summary())
    if batch:
        other_spend = await by_batch(p, ctx, judge_model, batch, options, other_spend)
    saved = open_run(store, resume, name, p.dataset, p.dataset.source, run_config(p, judge_model, options), judge_model)
    try:
        if saved.resumed and max_cost is not None:
            budget.prior_cost = prior_cost(saved.store, saved.run_id)
            if other_spend is not None:
                other_spend.prior_cost = budget.prior_cost
        runner = ChunkRunner(p, ctx, accs, saved, out=out, concurrency=concurrency, workers=workers,
                             max_consecutive_failures=breaker, usage=session_usage,
                             scorer=scorer, budget=budget)
        await runner.run(progress)

        run = run_summary(p, runner, saved, judge_model, judge_source, judge_before, options, name,
                          started).as_dict()
        if batch:
            run["batch"] = other_spend.usage()      # what the batch answered and cost, at the batch price
        aggregates = runner.aggregates()
        apply_run_aggregations(run, aggregates, runner.sink.iter_rows, options)   # run["jailbreak"] ...
    except BaseException as exc:
        saved.stopped(exc)   # never left "running" by a process that goes on (a notebook)
        raise
    if saved.store is not None:
        saved.store.finish_run(saved.run_id, "completed", aggregates=aggregates, summary=run,
                               usage=run.get("judge_usage"))
    return runner.result(aggregates, run)


async def by_batch(p: Plan, ctx: EvalContext, judge_model: Any, batch: Any, options: Any, other_spend: Any) -> Any:
    """``batch``: the judge's calls answered first through its provider's batch API
    (:mod:`assay.engine.batch_run`; ``batch`` is True or ``{"poll", "progress", "state_dir"}``); the
    batch's spend, at the batch price, counted as the run's other spending."""
    from assay.engine.batch_run import prefill

    if other_spend is not None:
        raise AssayError("batch mode cannot be combined with another spending (a red-team attacker)")
    opts = batch if isinstance(batch, Mapping) else {}
    return await prefill(p, ctx, judge_model, options=options, **opts)


def set_repeats(p: Plan, repeats: int, judge_model: Any, options: Mapping[str, Any] | None) -> None:
    """Mark the plan's metrics that a judge model scores as asked ``repeats`` times per row; an
    :class:`AssayError` when more than one is asked of a run that no judge model scores."""
    p.repeats = repeats
    if repeats == 1:
        return
    who = scorers_of(p.metrics, judge_model, options)
    p.repeated = frozenset(m.name for m in p.metrics if who[m.name]["kind"] in ("judge", "smoke-test judge"))
    if not p.repeated:
        raise AssayError(f"repeats={repeats} asks the judged metrics several times, but no metric of this run is "
                         "scored by a judge model (name one with --judge / judge=...); rules and text metrics "
                         "give the same score every time")


def limited(judge: Any) -> bool:
    """True for a :class:`~assay.models.limited.LimitedModel` (the limiters' module, with NumPy, is
    loaded only when there is a judge to look at)."""
    from assay.models.limited import LimitedModel

    return isinstance(judge, LimitedModel)


def make_out_folder(out: str | Path) -> None:
    """Make the folder for ``rows.jsonl`` and ``summary.json`` (``out``, ``--out``), or say in one
    line why it cannot be: a file of that name exists, a parent is a file, no permission."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise AssayError(f"--out {path}: a file of that name exists; --out names a folder "
                         "(for rows.jsonl and summary.json): pick another name or move the file")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AssayError(f"--out {path}: cannot make the folder: {exc.strerror or exc}") from None


def run_summary(p: Plan, runner: ChunkRunner, saved: StoreRun, judge_model: Any, judge_source: str | None,
                judge_before: Any, options: Mapping[str, Any] | None, name: str | None,
                started: float) -> RunSummary:
    """The summary of a finished run. A resumed run's judge usage and calls are every session's
    added up (each session's own is kept in the store: ``Store.sessions``)."""
    ds, counts = p.dataset, runner.counts
    usage = saved.total_usage(judge_usage(judge_model, judge_before, options))
    calls = judge_stats(judge_model, judge_before)
    if calls is not None and usage is not None:
        calls = {k: usage.get(k, v) for k, v in calls.items()}
    return RunSummary(
        assay_version=__version__,
        source=ds.source,
        format=ds.format,
        metrics=[m.name for m in p.metrics],
        thresholds={m.name: p.thresholds.get(m.name, m.threshold) for m in p.metrics},
        target=p.target.name if p.target else None,
        judge=getattr(judge_model, "name", None),
        judge_source=judge_source,
        judge_note=getattr(getattr(judge_model, "model", judge_model), "note", None),
        judge_calls=calls,
        judge_usage=usage,
        rows_read=ds.rows_read,
        rows_evaluated=counts["evaluated"],
        rows_skipped=len(ds.bad_rows),
        rows_errored=counts["errored"],
        target_errors=counts["target_errors"],
        bad_rows=[{"source": e.source, "line": e.line, "field": e.field, "error": str(e)} for e in ds.bad_rows],
        started_at=started,
        duration_s=time.time() - started,
        run_id=saved.run_id,
        name=name,
        store=saved.store.display_url if saved.store is not None else None,
        resumed=saved.resumed,
        resumed_rows=saved.done,
        scorers=scorers_of(p.metrics, judge_model, options),
        repeats=p.repeats,
        repeated=sorted(p.repeated),
        plan=p.summary(),
    )
