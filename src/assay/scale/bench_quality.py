"""``assay bench quality --engine ray``: a quality run's items scored in chunks on Ray actors.

The quality runner (``assay.bench.quality``, a sibling layer this module does not import) keeps
everything but the scoring in the driver: the tasks and their prompts, the store, the items
written in order, resume and the summary. It hands this module a description of its items
(``RemoteItems``: a picklable ``build()`` that makes the item scorer on a worker, the driver's
models by role, the store and the run id) and sends chunks of item positions to
:class:`RayItemScorer`, which gives them to a pool of :class:`ItemWorker` actors in turn.

Each actor builds the item scorer once: the model under benchmark is resolved once per actor (a
GGUF loaded once, however many chunks), and the judge too when a task needs one. The limits of
the subject's model and of the judge (concurrency, requests and tokens per minute, a 429's
pause) hold for the whole cluster: one cluster limiter actor each (:mod:`assay.scale.limiter`),
shared by every actor's model. Each chunk comes back with its rows, the modes its items were
scored by, and the calls each model made for it, which are added to the driver's models, so the
run's ``calls`` are the cluster's. A killed actor is restarted and its chunk tried again, as in
:mod:`assay.scale.ray_engine`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from assay.errors import AssayError
from assay.scale.ray_engine import (
    MAX_RESTARTS,
    MAX_TASK_RETRIES,
    STAT_FIELDS,
    connect,
    import_ray,
    share_cluster_limits,
    start_cluster_limits,
    worker_settings,
)

log = logging.getLogger("assay.scale")


def make_ray_item_scorer(*, address: str | None = None, actors: int | None = None) -> Callable[[Any], RayItemScorer]:
    """The item scorer factory for ``engine="ray"``, checked before the run starts: Ray is
    installed (else the install hint ``assay eval --engine ray`` gives) and ``actors`` is sane."""
    ray = import_ray()
    if actors is not None and actors < 1:
        raise AssayError(f"actors must be at least 1, got {actors}")

    def factory(items: Any) -> RayItemScorer:
        return RayItemScorer(items, ray, address=address, actors=actors)

    return factory


def _counts(model: Any) -> dict[str, int]:
    stats = getattr(model, "stats", None)
    return {k: int(getattr(stats, k, 0) or 0) for k in STAT_FIELDS} if stats is not None else {}


# -- on a worker ----------------------------------------------------------------------------------

class ItemWorker:
    """One Ray actor of the pool (made remote by :class:`RayItemScorer`): the run's item scorer,
    built once here, its models' limits shared through the cluster limiters."""

    def __init__(self, build: Callable[[], Any], env: dict[str, str], limits: dict[str, str]):
        for k, v in env.items():
            os.environ[k] = v
        self.scorer = build()
        self.models = {role: m for role, m in self.scorer.models.items() if m is not None}
        for role, model in self.models.items():
            if limits.get(role):
                # the limiter actor by name: a handle given as an argument would keep the actor's
                # constructor arguments in the object store, which Ray warns about for restartable actors
                import ray

                share_cluster_limits(model, ray.get_actor(limits[role]))
        self.seen = {role: _counts(m) for role, m in self.models.items()}
        self.chunks = 0

    def loads(self) -> dict[str, int]:
        """This actor's process id, the chunks it has scored and the GGUF models it has loaded
        (a ``local:`` or embedded subject: once per actor, however many chunks)."""
        import sys

        local = sys.modules.get("assay.models.local")     # never imported: nothing was loaded
        return {"pid": os.getpid(), "chunks": self.chunks,
                "models_loaded": local.models_loaded() if local is not None else 0}

    async def score(self, ks: list[int]) -> dict[str, Any]:
        """The chunk's result (rows, modes, log-likelihood state) and ``counts``: each model's
        calls, cache hits and tokens since the last chunk, by role."""
        self.chunks += 1
        got = await self.scorer.score(ks)
        counts = {}
        for role, model in self.models.items():
            now = _counts(model)
            counts[role] = {k: v - self.seen[role].get(k, 0) for k, v in now.items()}
            self.seen[role] = now
        return {**got, "counts": counts}


# -- in the driver --------------------------------------------------------------------------------

class RayItemScorer:
    """A quality run's item scorer on Ray: a pool of :class:`ItemWorker` actors, chunks sent to
    them in turn, ``2 * actors`` chunks in flight (``depth``). Starts Ray on this machine (every
    core) unless it is started already or ``address`` names a cluster; a Ray started here is shut
    down at the end."""

    def __init__(self, items: Any, ray: Any, *, address: str | None, actors: int | None):
        self.items, self.ray, self.address, self.n = items, ray, address, actors
        self.actors: list[Any] = []
        self.limits: dict[str, Any] = {}
        self.started_ray = False
        self.turn = 0
        self.depth = 2 * (actors or 1)

    def worker_env(self) -> dict[str, str]:
        """The driver's ``ASSAY_*`` settings, with the call cache the workers share
        (:func:`assay.scale.ray_engine.worker_cache`, for the subject's model or else the judge)."""
        models = self.items.models
        model = models.get("subject") if models.get("subject") is not None else models.get("judge")
        env, note = worker_settings(model, self.items.store, self.address)
        if note:
            log.warning(note)
        return env

    def start(self) -> None:
        ray = self.ray
        self.started_ray = connect(ray, self.address)
        if self.n is None:
            self.n = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.depth = 2 * self.n
        run = self.items.run_id or os.getpid()
        # kept while the run lasts: Ray ends a named actor once no handle to it is left
        names = {}
        for role, model in self.items.models.items():
            name = f"assay-limits-{run}-{role}"
            handle = start_cluster_limits(model, name) if model is not None else None
            if handle is not None:
                self.limits[role], names[role] = handle, name
        worker = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=MAX_TASK_RETRIES)(ItemWorker)
        env = self.worker_env()
        self.actors = [worker.remote(self.items.build, env, names) for _ in range(self.n)]

    async def score(self, ks: list[int]) -> dict[str, Any]:
        actor = self.actors[self.turn % len(self.actors)]
        self.turn += 1
        got = await actor.score.remote(ks)
        for role, delta in (got.get("counts") or {}).items():
            add_counts(self.items.models.get(role), delta)
        return got

    def close(self) -> None:
        ray = self.ray
        for a in [*self.actors, *self.limits.values()]:
            try:
                ray.kill(a)
            except Exception:   # gone already
                pass
        self.actors, self.limits = [], {}
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False


def add_counts(model: Any, delta: dict[str, int]) -> None:
    """A worker's counts for one model, added to the driver's model of that role."""
    stats = getattr(model, "stats", None)
    if stats is None:
        return
    for k, v in delta.items():
        if hasattr(stats, k):
            setattr(stats, k, getattr(stats, k) + v)
