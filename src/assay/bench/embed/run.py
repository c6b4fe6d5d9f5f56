"""``assay bench embed``: an embedding model scored on MTEB-style tasks, with intervals, stored.

The path of a run:

1. the tasks are loaded (:func:`~assay.bench.embed.tasks.load_embed_tasks`: shipped samples by name,
   files and folders by layout, the user's data with ``--data``);
2. the model is resolved as an ``embedder`` (:func:`assay.models.resolve`: the embedded model,
   OpenAI, Azure, any OpenAI-compatible ``/embeddings`` endpoint), behind the one limiter and the call
   cache, so a re-run pays for no text twice;
3. every text a task needs is embedded once per input type (queries and documents apart), in
   batches, under a progress bar; a text shared by several tasks is embedded once;
4. each task is scored (:func:`~assay.bench.embed.metrics.score_task`, in a worker thread) and its
   main score gets a 95% bootstrap interval over its units (:mod:`assay.bench.embed.stats`);
5. the summary (schema ``assay.bench.embed/1``) and the units are stored as an ``embed`` benchmark,
   so ``bench show``, ``bench compare`` (paired, on the same units) and the leaderboard read them.

A task whose texts cannot be embedded (the endpoint fails after its retries) is kept in the summary
with its error and no score; the other tasks are still scored and stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from assay.bench.embed import KIND
from assay.bench.embed.metrics import METRIC_VERSION, score_task
from assay.bench.embed.stats import main_interval
from assay.bench.embed.summary import EmbedSummary
from assay.bench.embed.tasks import EmbedTask, load_embed_tasks
from assay.bench.kinds import store_benchmark
from assay.errors import AssayError
from assay.models import CallStats, LimitedModel, resolve
from assay.models.base import ModelCallError
from assay.store import new_ref

Progress = Callable[[str, int, "int | None"], None]


@dataclass
class EmbedConfig:
    """What ``assay bench embed`` was asked for. ``query_prefix`` / ``document_prefix`` are put
    before query and document texts (a model's retrieval prompts, e.g. ``"query: "``); texts of
    symmetric tasks are sent as they are (the backend may still mark them, see the model's note).
    ``input_type_field``: the request field an endpoint reads "query" / "document" from (e.g.
    ``input_type``; endpoints only, and only servers that read one)."""

    model: str
    tasks: str = "all"
    data: str | None = None
    batch_size: int | None = None
    concurrency: int | None = None
    query_prefix: str = ""
    document_prefix: str = ""
    input_type_field: str | None = None
    seed: int = 42
    name: str | None = None
    model_name: str | None = None     # the model's name on the leaderboard (--model-name; bench.kinds.model_identity)

    def check(self) -> None:
        if self.batch_size is not None and self.batch_size < 1:
            raise AssayError(f"--batch-size must be at least 1, not {self.batch_size}")
        if self.concurrency is not None and self.concurrency < 1:
            raise AssayError(f"--concurrency must be at least 1, not {self.concurrency}")


@dataclass
class EmbedRun:
    summary: dict[str, Any]
    ref: str | None
    units: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)


Key = tuple[str, "str | None"]


class Embedder:
    """Embeds what the tasks need, each (text, input type) once, in chunks that keep the model's
    limiter busy, reporting progress per task."""

    def __init__(self, model: Any, cfg: EmbedConfig, progress: Progress | None):
        self.model = model
        self.cfg = cfg
        self.progress = progress
        self.vectors: dict[Key, np.ndarray] = {}
        self.embed_s = 0.0
        batch = cfg.batch_size or getattr(getattr(model, "model", model), "embed_batch_size", 64)
        window = getattr(getattr(model, "limiter", None), "concurrency", 1) or 1
        self.chunk = max(256, int(batch) * int(window))

    def _prefixed(self, text: str, input_type: str | None) -> str:
        if input_type == "query":
            return self.cfg.query_prefix + text
        if input_type == "document":
            return self.cfg.document_prefix + text
        return text

    async def embed_task(self, task: EmbedTask) -> None:
        wanted = [k for k in dict.fromkeys(task.texts()) if k not in self.vectors]
        stage = f"embedding {task.name}"
        done = 0
        if self.progress:
            self.progress(stage, 0, len(wanted))
        by_type: dict[str | None, list[str]] = {}
        for text, kind in wanted:
            by_type.setdefault(kind, []).append(text)
        for kind, texts in by_type.items():
            for i in range(0, len(texts), self.chunk):
                part = texts[i:i + self.chunk]
                t0 = time.perf_counter()
                got = await self.model.embed([self._prefixed(t, kind) for t in part], input_type=kind,
                                             batch_size=self.cfg.batch_size)
                self.embed_s += time.perf_counter() - t0
                arr = np.asarray(got, dtype=np.float32)
                if arr.ndim != 2 or arr.shape[0] != len(part):
                    raise ModelCallError(f"{self.model.name} returned {arr.shape[0] if arr.ndim else 0} vectors for "
                                         f"{len(part)} texts", kind="bad_response")
                for t, v in zip(part, arr):
                    self.vectors[(t, kind)] = v
                done += len(part)
                if self.progress:
                    self.progress(stage, done, len(wanted))

    @property
    def dim(self) -> int | None:
        for v in self.vectors.values():
            return int(v.shape[0])
        return None


def _finite(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def task_entry(task: EmbedTask) -> dict[str, Any]:
    """What a summary says about a task before it is scored."""
    return {"type": task.type, "main_score": task.main_score, "value": None, "ci95_low": None, "ci95_high": None,
            "scores": {}, "n_units": task.n_units, "task_hash": task.task_hash, "data_hash": task.data_hash,
            "metric_version": METRIC_VERSION, "source": task.source, "split": task.split, "error": None}


def _calls(model: LimitedModel, before: Mapping[str, int]) -> dict[str, int]:
    """This run's embedding counts: texts asked for, from the cache, shared, sent, and requests."""
    return model.stats.since(before, fields=CallStats.EMBED_FIELDS)


async def run_embed(cfg: EmbedConfig, *, store: Any = None, out: str | Path | None = None,
                    progress: Progress | None = None, model: Any = None) -> EmbedRun:
    """Run the embedding benchmark ``cfg`` describes; store it (``store``: a Store, URL or path; None:
    the default store; False: not stored) and write ``summary.json`` under ``out``. ``model``: an
    embedder to use instead of resolving ``cfg.model`` (a :class:`LimitedModel` as it is; a bare
    backend behind a limiter and no cache)."""
    cfg.check()
    tasks = load_embed_tasks(cfg.tasks, data=cfg.data)
    if not tasks:
        raise AssayError(f"no embedding tasks in {cfg.tasks!r}")
    names = [t.name for t in tasks]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise AssayError(f"two tasks are named {', '.join(dup)}; rename one (its task.yaml 'name')")
    model = resolve(cfg.model if model is None else model, role="embedder", concurrency=cfg.concurrency,
                    **({} if model is None else {"cache": None}), **_backend_options(cfg))
    before = model.stats.snapshot(CallStats.EMBED_FIELDS)
    st = _open(store)
    started = time.time()
    embedder = Embedder(model, cfg, progress)
    entries: dict[str, dict[str, Any]] = {}
    units: dict[str, dict[str, np.ndarray]] = {}
    for task in tasks:
        entry = entries[task.name] = task_entry(task)
        try:
            await embedder.embed_task(task)
        except ModelCallError as exc:
            entry["error"] = f"embedding failed: {exc}"
            continue
        scored = await asyncio.to_thread(score_task, task, embedder.vectors, seed=cfg.seed)
        lo, hi = await asyncio.to_thread(main_interval, task.type, scored.units, main_score=scored.main_score,
                                         seed=cfg.seed)
        entry.update(value=_finite(scored.scores.get(scored.main_score)), main_score=scored.main_score,
                     ci95_low=lo, ci95_high=hi, scores={k: _finite(v) for k, v in scored.scores.items()})
        units[task.name] = {k: np.asarray(v, dtype=np.float64) for k, v in scored.units.items()}
    if all(e["error"] for e in entries.values()):
        first = next(iter(entries.values()))["error"]
        raise AssayError(f"no task could be scored: {first}")
    calls = _calls(model, before)
    texts_sent = calls.get("texts_embedded")
    summary: dict[str, Any] = {
        "schema": KIND.schema, "ref": None, "name": cfg.name, "model": model.name, "model_spec": cfg.model,
        "note": getattr(model, "note", None), "dim": embedder.dim, "created_at": started,
        "duration_s": time.time() - started,
        "config": {k: v for k, v in asdict(cfg).items() if k not in ("model", "tasks", "name")},
        "calls": calls, "embed_s": embedder.embed_s,
        "texts_per_s": (texts_sent / embedder.embed_s) if texts_sent and embedder.embed_s > 0 else None,
        "tasks": entries}
    ref = None
    if st is not None:
        ref = summary["ref"] = new_ref()
        order = list(entries)
        store_benchmark(st, KIND, summary, {order.index(t): us for t, us in units.items()})
    if out is not None:
        p = Path(out)
        p.mkdir(parents=True, exist_ok=True)
        (p / "summary.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return EmbedRun(summary, ref, units)


def _backend_options(cfg: EmbedConfig) -> dict[str, Any]:
    if not cfg.input_type_field:
        return {}
    from assay.models.spec import parse_model_spec

    if parse_model_spec(cfg.model, "model").kind not in ("http", "openai", "azure"):
        raise AssayError("--input-type-field is for endpoints (http://..., openai:, azure:), not for "
                         f"{cfg.model!r}")
    return {"input_type_field": cfg.input_type_field}


def _open(store: Any) -> Any:
    if store is False:
        return None
    if store is None or isinstance(store, (str, Path)):
        from assay.store import open_store

        return open_store(str(store) if store is not None else None)
    return store


def stored_units(store: Any, rec: Mapping[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """A stored embed benchmark's units by task name (see :func:`run_embed`)."""
    order = list(EmbedSummary.load(rec.get("details")).tasks)
    got = store.benchmark_samples(rec["id"])
    return {order[i]: arrays for i, arrays in got.items() if 0 <= i < len(order)}
