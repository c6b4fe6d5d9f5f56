"""The Ray engine: a run's chunks scored on a pool of Ray actors.

Everything but the scoring stays where the local engine has it (:class:`~assay.engine.run.ChunkRunner`
in the driver): the plan, the rows read in order, the store's transactions, the aggregates,
resume and the run summary. Only where a chunk is scored changes: each chunk goes to one of
``n`` actors (:class:`ChunkWorker`), which holds the metrics, resolves the judge once from its
spec (an embedded or local model is loaded once per actor, not per chunk) and scores the chunk
with the local engine's own :class:`~assay.engine.run.ChunkScorer`. The driver keeps ``2 * n``
chunks in flight and consumes them in input order, so the rows, the aggregates and the store are
the same as the local engine's on the same input.

A killed actor is restarted by Ray and its chunks are tried again (``max_restarts`` /
``max_task_retries``); a chunk is written only when its result comes back, so nothing is lost
or written twice, and the judge's call cache (:mod:`assay.models.cache`, on this machine's disk)
answers the calls the killed actor had already made. A metric that raises on a row is an
errored row, as locally; it never stops the run.

Each actor reports its judge's counts (calls, cache hits, tokens) with every chunk; they are
added to the driver's judge, so the run's usage and cost are the whole cluster's (less the
calls of a chunk whose actor was killed before it answered).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from assay.engine.evaluate import JUDGE_ENV, resolve_judge
from assay.engine.run import ChunkRunner, ChunkScorer, Scoring, breaker_limiters
from assay.errors import AssayError
from assay.metrics.base import EvalContext
from assay.models.cache import is_db_url
from assay.models.limited import CallStats
from assay.models.limiter import CircuitOpen
from assay.records import Record
from assay.scale.limiter import ClusterLimits, start_cluster_limiter

log = logging.getLogger("assay.scale")
RAY_MISSING = "engine 'ray' needs Ray, which is not installed: pip install 'assay[ray]'"
MAX_RESTARTS = 4        # times Ray restarts a killed actor
MAX_TASK_RETRIES = 4    # times a chunk is tried again on a restarted actor
STAT_FIELDS = tuple(dict.fromkeys(CallStats.FIELDS + CallStats.EMBED_FIELDS))


def import_ray() -> Any:
    """The ``ray`` module, or an :class:`AssayError` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise AssayError(RAY_MISSING) from None
    return ray


def judge_for_workers(judge: Any) -> Any:
    """What each actor resolves its judge from: a spec string as given; None (each actor then
    resolves as the driver did, from the driver's ``$ASSAY_JUDGE``, which :meth:`RayScorer.worker_env`
    passes on, whatever the worker's own environment says); a ChatModel object that can be pickled. A :class:`LimitedModel` (a judge
    with a limiter of its own) cannot be shared out: an :class:`AssayError` says what to pass."""
    from assay.models.limited import LimitedModel

    if judge is None or isinstance(judge, str):
        return judge
    if isinstance(judge, LimitedModel):
        raise AssayError("engine 'ray' resolves the judge on every worker from its spec, but this judge is a "
                         "LimitedModel with a limiter of its own: pass the spec string (openai:MODEL, "
                         "http://HOST:PORT/v1#MODEL, local:/path.gguf, embedded) and concurrency=, timeout=, "
                         "max_attempts=")
    from ray import cloudpickle

    try:
        cloudpickle.dumps(judge)
    except Exception as exc:
        raise AssayError(f"engine 'ray' sends the judge to every worker, but {type(judge).__name__} cannot be "
                         f"pickled ({exc}): pass its spec string instead") from None
    return judge


def make_ray_scorer(*, address: str | None = None, judge: Any = None, concurrency: int | None = None,
                    timeout: float | None = None, max_attempts: int | None = None,
                    actors: int | None = None) -> Callable[[ChunkRunner], RayScorer]:
    """The chunk scorer factory for ``engine="ray"``, checked before the run starts: Ray is
    installed and the judge can be sent to the workers. ``actors``: how many (default: one per
    CPU of the cluster)."""
    ray = import_ray()
    spec = judge_for_workers(judge)
    if actors is not None and actors < 1:
        raise AssayError(f"actors must be at least 1, got {actors}")

    def factory(runner: ChunkRunner) -> RayScorer:
        return RayScorer(runner, ray, address=address, judge=spec, concurrency=concurrency, timeout=timeout,
                         max_attempts=max_attempts, actors=actors)

    return factory


# -- on a worker ----------------------------------------------------------------------------------

class ChunkWorker:
    """One Ray actor of the pool (made remote by :class:`RayScorer`): the run's metrics, its
    judge (resolved once here), and the local engine's :class:`ChunkScorer`."""

    def __init__(self, scoring: Scoring, options: dict[str, Any], judge: Any, concurrency: int | None,
                 timeout: float | None, max_attempts: int | None, breaker: int | None,
                 env: dict[str, str], limits: Any = None):
        for k, v in env.items():
            os.environ[k] = v
        from assay.metrics.base import load_builtin_metrics

        load_builtin_metrics()
        self.judge, _ = resolve_judge(judge, scoring.metrics, concurrency, timeout=timeout, max_attempts=max_attempts)
        share_cluster_limits(self.judge, limits)
        self.breakers = breaker_limiters(self.judge, scoring.target)
        for _, lim in self.breakers:
            lim.arm_breaker(breaker)
        self.scorer = ChunkScorer(scoring, EvalContext(judge=self.judge, options=options),
                                  concurrency=concurrency, n_workers=1)
        self.seen = self.counts()
        self.chunks = 0

    def counts(self) -> dict[str, int]:
        stats = getattr(self.judge, "stats", None)
        return {k: int(getattr(stats, k, 0) or 0) for k in STAT_FIELDS} if stats is not None else {}

    def pid(self) -> int:
        return os.getpid()

    def loads(self) -> dict[str, int]:
        """This actor's process id, the chunks it has scored and the GGUF models it has loaded
        (an embedded or ``local:`` judge: once per actor, however many chunks)."""
        import sys

        local = sys.modules.get("assay.models.local")     # never imported: nothing was loaded
        return {"pid": os.getpid(), "chunks": self.chunks,
                "models_loaded": local.models_loaded() if local is not None else 0}

    async def score(self, chunk: list[Record]) -> tuple[Any, Any, dict[str, int], Any]:
        """``(filled, per_row, judge counts since the last chunk, circuit)``: ``circuit`` is
        ``(failures, last error, its kind, "judge" or "target")`` when the circuit breaker of
        the judge's or the target's limiter opened (then there are no rows)."""
        filled = per_row = circuit = None
        self.chunks += 1
        try:
            filled, per_row = await self.scorer.score(chunk)
        except CircuitOpen as exc:       # a BaseException: it would take the worker down with it
            who = next((what.split()[0] for what, lim in self.breakers if lim.tripped is not None), "judge")
            circuit = (exc.failures, str(exc.last), getattr(exc.last, "kind", "connection"), who)
        now = self.counts()
        delta = {k: v - self.seen.get(k, 0) for k, v in now.items()}
        self.seen = now
        return filled, per_row, delta, circuit


def share_cluster_limits(judge: Any, limits: Any) -> None:
    """Attach the cluster limiter (its actor handle ``limits``) to this worker's judge limiter,
    so that concurrency, requests and tokens per minute and a 429's pause hold for the whole
    cluster (:mod:`assay.scale.limiter`). Nothing to do without a judge or a handle."""
    limiter = getattr(judge, "limiter", None)
    if limits is not None and limiter is not None:
        limiter.share(ClusterLimits(limits))


def start_cluster_limits(judge: Any, name: str) -> Any:
    """Start the cluster limiter for the driver's judge, with that judge limiter's limits, and
    give the handle every worker shares (:func:`share_cluster_limits`); None without a judge."""
    limiter = getattr(judge, "limiter", None)
    if limiter is None:
        return None
    return start_cluster_limiter(name, concurrency=limiter.concurrency, rpm=limiter.rpm, tpm=limiter.tpm)


# -- in the driver --------------------------------------------------------------------------------

PER_WORKER_CACHE = ("the call cache is per worker on this cluster (SQLite does not span machines): a call one "
                    "worker made may be made again by another; with --store postgresql://... every worker "
                    "shares the store's database (or set ASSAY_CACHE=postgresql://...)")


def store_url(store: Any) -> str | None:
    """The URL of ``store`` (password included: the workers connect with it) when it is PostgreSQL."""
    engine = getattr(store, "engine", None)
    if engine is None or engine.dialect.name != "postgresql":
        return None
    return engine.url.render_as_string(hide_password=False)


def worker_cache(judge: Any, store: Any, address: str | None) -> tuple[str | None, str | None]:
    """Where the workers keep the judge's call cache, as ``(ASSAY_CACHE for them, a note for the
    user or None)``; None for ASSAY_CACHE leaves each worker its own default.

    - No judge: the driver's ``$ASSAY_CACHE`` as it is (on a remote cluster, only a database URL).
    - The driver's judge has no cache (``ASSAY_CACHE=off``, or a judge given as an object without
      one): ``off``.
    - The driver's cache is in PostgreSQL (``ASSAY_CACHE=postgresql://...``): that database.
    - The run's store is PostgreSQL: the store's database (tables beside the store's), so that
      workers on every machine of a cluster share one cache.
    - Ray on this machine: the driver's SQLite file (its absolute path).
    - A remote cluster and SQLite: each worker's own default file, and a note saying so.
    """
    if judge is None:       # no judge: the driver's setting as it is (a path only means something here)
        env = os.environ.get("ASSAY_CACHE")
        return (env if env is not None and (address is None or is_db_url(env)) else None), None
    cache = getattr(judge, "cache", None)
    if cache is None:
        return "off", None
    url = getattr(cache, "url", None)
    if url:
        return url, None
    url = store_url(store)
    if url:
        return url, None
    if address is None:
        path = getattr(cache, "path", None)
        return (str(os.path.abspath(path)), None) if path is not None else ("off", None)
    return None, PER_WORKER_CACHE


def worker_settings(model: Any, store: Any, address: str | None) -> tuple[dict[str, str], str | None]:
    """The driver's ``ASSAY_*`` settings for the workers, with ``ASSAY_CACHE`` where they keep
    ``model``'s call cache (:func:`worker_cache`), and the note for the user or None."""
    env = {k: v for k, v in os.environ.items() if k.startswith("ASSAY_")}
    cache, note = worker_cache(model, store, address)
    if cache is None:
        env.pop("ASSAY_CACHE", None)
    else:
        env["ASSAY_CACHE"] = cache
    return env, note


def connect(ray: Any, address: str | None) -> bool:
    """Start Ray on this machine (every core), or join the cluster at ``address``, unless Ray is
    running already; True when this call started it (the caller shuts it down at the end)."""
    if ray.is_initialized():
        return False
    if address is None:
        ray.init(include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    else:
        ray.init(address=address, log_to_driver=False, logging_level="WARNING")
    return True


class RayScorer:
    """The :class:`~assay.engine.run.ChunkRunner`'s scorer on Ray: a pool of :class:`ChunkWorker`
    actors, chunks sent to them in turn, ``2 * actors`` chunks in flight. Starts Ray on this
    machine (every core) unless it is started already or ``address`` names a cluster; a Ray
    started here is shut down at the end."""

    def __init__(self, runner: ChunkRunner, ray: Any, *, address: str | None, judge: Any,
                 concurrency: int | None, timeout: float | None, max_attempts: int | None,
                 actors: int | None):
        self.runner, self.ray, self.address = runner, ray, address
        self.judge, self.concurrency, self.timeout, self.max_attempts = judge, concurrency, timeout, max_attempts
        self.n = actors
        self.actors: list[Any] = []
        self.started_ray = False
        self.limits: Any = None
        self.turn = 0
        self.depth = 2 * (actors or 1)
        self.cache_note: str | None = None

    def worker_env(self) -> dict[str, str]:
        """The driver's ``ASSAY_*`` settings for the workers, with the call cache every worker
        uses (``ASSAY_CACHE``, :func:`worker_cache`)."""
        env, self.cache_note = worker_settings(self.runner.ctx.judge, getattr(self.runner.saved, "store", None),
                                               self.address)
        env[JUDGE_ENV] = os.environ.get(JUDGE_ENV, "")
        return env

    def start(self) -> None:
        ray = self.ray
        self.started_ray = connect(ray, self.address)
        cpus = float(ray.cluster_resources().get("CPU", 1))
        # a ray.data.Dataset's pipeline runs on the cluster while the actors score: one CPU is left
        # to it, or its tasks would wait for the actors' CPUs and the run for its rows
        reserve = 1.0 if getattr(self.runner.plan.dataset, "format", None) == "ray_dataset" else 0.0
        if self.n is None:
            self.n = max(1, int(cpus - reserve))
        actor_cpus = min(1.0, max(0.0, cpus - reserve) / self.n) if reserve else 1.0
        self.depth = 2 * self.n
        runner = self.runner
        # kept while the run lasts: Ray ends a named actor once no handle to it is left
        self.limits = limits = start_cluster_limits(runner.ctx.judge,
                                                    f"assay-limits-{runner.saved.run_id or os.getpid()}")
        worker = ray.remote(num_cpus=actor_cpus, max_restarts=MAX_RESTARTS, max_task_retries=MAX_TASK_RETRIES)(ChunkWorker)
        scoring = Scoring.of(runner.plan)
        env = self.worker_env()
        if self.cache_note:
            log.warning(self.cache_note)
        self.actors = [worker.remote(scoring, dict(runner.ctx.options), self.judge, self.concurrency, self.timeout,
                                     self.max_attempts, runner.max_consecutive_failures, env, limits)
                       for _ in range(self.n)]

    async def score(self, chunk: list[Record]) -> tuple[list, list]:
        actor = self.actors[self.turn % len(self.actors)]
        self.turn += 1
        filled, per_row, delta, circuit = await actor.score.remote(chunk)
        self.add_counts(delta)
        if circuit is not None:
            from assay.models.base import ModelCallError

            failures, last, kind, who = circuit
            exc = CircuitOpen(failures, ModelCallError(last, kind=kind))
            for what, lim in breaker_limiters(self.runner.ctx.judge, self.runner.plan.target):
                if what.split()[0] == who:
                    lim.tripped = exc          # so that the run's message names it, as locally
            raise exc
        return filled, per_row

    def add_counts(self, delta: dict[str, int]) -> None:
        """A worker's judge counts, added to the driver's judge: the run's usage is the cluster's."""
        stats = getattr(self.runner.ctx.judge, "stats", None)
        if stats is None:
            return
        for k, v in delta.items():
            if hasattr(stats, k):
                setattr(stats, k, getattr(stats, k) + v)

    def close(self) -> None:
        ray = self.ray
        for a in self.actors:
            try:
                ray.kill(a)
            except Exception:   # gone already
                pass
        self.actors = []
        if self.limits is not None:
            try:
                ray.kill(self.limits)
            except Exception:   # gone already
                pass
            self.limits = None
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False
