"""Quality on standard tasks: ``assay bench quality``.

Every item of every task (:mod:`assay.bench.quality.tasks`) is asked of the model under benchmark
(:class:`~assay.bench.quality.subject.Subject`) and scored the way its task says:

- ``multiple_choice``: by the log-likelihood of each choice after the prompt (``acc``, and
  ``acc_norm`` with each log-likelihood divided by the choice's length in characters, as
  lm-evaluation-harness does), or, where the model gives no prompt log-probabilities, by
  generating an answer and reading which choice it names (``acc`` only; the item says which).
- ``loglikelihood``: ``acc`` = the target is the model's greedy continuation.
- ``generate_until``: the answer, cut at the task's stop strings, passed through each of the
  task's filters (``filter_list``) and compared with the target (``exact_match,<filter>``); or
  scored by the judge metrics a task names (``similarity``, ``groundedness``, ``coherence``,
  ``fluency``, ``relevance``, with ``--judge``).
- code (a task whose metric is ``pass_at_k``): ``n`` answers per item, each program (prompt +
  answer + the task's tests) run in the :class:`~assay.bench.quality.sandbox.Sandbox`, and pass@k by
  the unbiased estimator for every k asked.

The run is an ordinary stored run (family ``quality``): each item is a row — its prompt, answer,
extracted answers, log-likelihoods or sandbox outcomes — with its scores, committed in order as
items finish, so ``--resume`` continues a stopped run and the dashboard shows every item. When
the run completes, its summary (per-task figures with bootstrap intervals and the quality index,
:mod:`assay.bench.quality.report`) is stored as a ``quality`` benchmark.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from assay.bench.kinds import store_benchmark
from assay.bench.quality import KIND, report
from assay.bench.quality.answers import choice_accuracy, exact_match, extract_choice, pass_at_k
from assay.bench.quality.catalog import Catalog, build_catalog, group_figures
from assay.bench.quality.harness_bootstrap import BOOTSTRAPPED, HARNESS_BOOTSTRAP_ITERS, harness_bootstrap_stderr
from assay.bench.quality.lmeval import AGGREGATIONS as LM_AGGREGATIONS
from assay.bench.quality.lmeval import DEFAULT_MAX_LENGTH, aggregate, count_bytes, count_words
from assay.bench.quality.report import lm_eval_name, primary_output, summarize, task_outputs
from assay.bench.quality.sandbox import VERDICTS, Sandbox, SandboxResult
from assay.bench.quality.subject import Subject
from assay.bench.quality.summary import QualitySummary
from assay.bench.quality.tasks import JUDGED_METRICS as JUDGED
from assay.bench.quality.tasks import Task, load_tasks
from assay.engine.aggregate import Accumulator
from assay.engine.run import StoreRun, open_run
from assay.errors import AssayError, RunIncomplete
from assay.metrics.base import Score, get_metric
from assay.models.base import ModelCallError
from assay.records import Record
from assay.results import StoredRow
from assay.scores import EvalContext
from assay.store import new_ref

SCORINGS = ("auto", "loglik", "generate")
DEFAULT_SAMPLE_TEMPERATURE = 0.8   # sampling several answers per code item needs some randomness
COMMIT_EVERY = 16
# Engines that score items elsewhere, by name: ``module:function`` giving the item scorer factory
# (:class:`RemoteItems` -> scorer) from ``address=`` and ``actors=``; imported by name on first use,
# as the evaluation engines are (``assay.engine.evaluate.BUILTIN_ENGINES``).
ITEM_ENGINES = {"ray": "assay.scale.bench_quality:make_ray_item_scorer"}

Progress = Callable[[str, int, "int | None"], None]


@dataclass
class QualityConfig:
    """What ``assay bench quality`` runs. ``model``: a model spec (see
    :mod:`assay.models.spec`) or ``python:module:function``; ``tasks``: task files, folders, a
    comma list, or ``python:module:function`` tasks."""

    model: Any
    tasks: Any
    limit: int | None = None          # items per task (the first N of the test split)
    shots: int | None = None          # few-shot examples (default: the task's num_fewshot)
    seed: int = 1234                  # few-shot sampling seed (lm-evaluation-harness's default)
    samples: int | None = None        # answers per code item (default: the task's repeats, else max k)
    pass_at: list[int] | None = None  # the k of pass@k (default: the task's, else 1)
    temperature: float | None = None  # overrides the task's generation temperature
    max_tokens: int | None = None     # overrides the task's max_gen_toks
    scoring: str = "auto"             # multiple choice: auto | loglik | generate
    api: str = "auto"                 # auto | chat | completions
    judge: str | None = None          # for judge metrics on generation tasks
    trust_task_code: bool = False     # import and run the tasks' !function hooks (--trust-task-code)
    task_dirs: list[str] = field(default_factory=list)   # folders whose tasks, groups and tags --tasks may name
    concurrency: int = 4
    max_length: int = DEFAULT_MAX_LENGTH   # tokens per request of a rolling log-likelihood window (lm-eval's max_length)
    tokenizer: str | None = None      # the model's GGUF, to cut rolling windows where the server has no tokenizer
    sandbox_timeout: float = 10.0
    sandbox_memory_mb: int = 1024
    name: str | None = None
    model_name: str | None = None     # the model's name on the leaderboard (--model-name; bench.kinds.model_identity)

    def check(self) -> None:
        if self.scoring not in SCORINGS:
            raise AssayError(f"--scoring must be one of {', '.join(SCORINGS)}, not {self.scoring!r}")
        if self.limit is not None and self.limit < 1:
            raise AssayError("--limit must be at least 1")
        if self.shots is not None and self.shots < 0:
            raise AssayError("--shots must not be negative")
        if self.samples is not None and self.samples < 1:
            raise AssayError("--samples must be at least 1")
        if self.pass_at is not None and any(k < 1 for k in self.pass_at):
            raise AssayError("--pass-at values must be at least 1")
        if self.concurrency < 1:
            raise AssayError("--concurrency must be at least 1")
        if self.max_length < 3:
            raise AssayError("--max-length must be at least 3 (a rolling window keeps a start and a generated token)")


@dataclass
class QualityRun:
    """A finished (or stopped) quality run: the summary, every item as written to
    ``items.jsonl``, the store's run id and the benchmark's ref."""

    summary: dict[str, Any]
    items: list[dict[str, Any]] = field(default_factory=list)
    run_id: str | None = None
    ref: str | None = None


@dataclass
class _Plan:
    """One task as this run scores it."""

    task: Task
    contexts: list[str]
    outputs: list[str]
    samples: int = 1
    pass_at: list[int] = field(default_factory=list)
    temperature: float = 0.0
    max_tokens: int = 256
    until: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan_tasks(cfg: QualityConfig, tasks: list[Task]) -> list[_Plan]:
    """Each task's prompts (few-shot contexts are built here, in order, so a resumed run asks
    the same prompts), outputs and generation settings; refuses a pass@k that cannot be
    computed (k greater than the answers sampled) instead of dropping it."""
    plans = []
    for t in tasks:
        gk = t.generation_kwargs or {}
        until = list(gk.get("until") or [])     # the task loader made it a list of strings
        temp = float(cfg.temperature if cfg.temperature is not None else gk.get("temperature") or 0.0)
        p = _Plan(t, t.contexts(), [], until=until, temperature=temp,
                  max_tokens=int(cfg.max_tokens or gk.get("max_gen_toks") or 256))
        if t.is_code:
            task_ks = [k for m in t.metrics for k in m.get("k", [])]   # the loader made k a list
            p.pass_at = sorted(set(cfg.pass_at or task_ks or [1]))
            p.samples = int(cfg.samples or (t.repeats if t.repeats and t.repeats > 1 else 0) or max(p.pass_at))
            too_big = [k for k in p.pass_at if k > p.samples]
            if too_big:
                raise AssayError(f"task {t.name}: pass@{too_big[0]} needs at least {too_big[0]} answers per item, "
                                 f"but {p.samples} are sampled; raise --samples or drop that k")
            if p.samples > 1 and temp == 0.0 and cfg.temperature is None:
                p.temperature = DEFAULT_SAMPLE_TEMPERATURE
                p.notes.append(f"{p.samples} answers per item sampled at temperature {DEFAULT_SAMPLE_TEMPERATURE} "
                               "(the task asks for 0, which would give one answer n times)")
        p.outputs = task_outputs(t, p.pass_at)
        for m in t.metrics or []:
            name = str(m.get("metric"))
            if name in JUDGED and not cfg.judge:
                raise AssayError(f"task {t.name}: metric {name!r} is judged by a model; name one with --judge")
        plans.append(p)
    return plans


class QualityRunner:
    """Scores the items of planned tasks against one subject and writes them in order."""

    def __init__(self, cfg: QualityConfig, subject: Subject, plans: list[_Plan], saved: StoreRun | None,
                 sandbox: Sandbox | None, judge: Any = None, scorer: Callable[[RemoteItems], Any] | None = None):
        self.cfg, self.subject, self.plans, self.saved = cfg, subject, plans, saved or StoreRun()
        self.sandbox, self.judge = sandbox, judge
        self.make_scorer = scorer
        self.items: list[tuple[_Plan, int]] = [(p, i) for p in plans for i in range(len(p.task.docs))]
        self.modes: dict[str, set[str]] = {p.task.name: set() for p in plans}
        self.kept: list[StoredRow] = []      # rows, when the run is not saved

    async def run(self, progress: Progress | None = None) -> None:
        if self.make_scorer is not None:
            await self.run_chunks(progress)
            return
        start = self.saved.done
        total = len(self.items)
        todo: asyncio.Queue[int] = asyncio.Queue()
        for k in range(start, total):
            todo.put_nowait(k)
        done: dict[int, StoredRow] = {}
        state = {"next": start, "scored": start, "flushed": time.monotonic()}
        ready: list[StoredRow] = []
        if progress:
            progress("items", start, total)

        def collect(final: bool = False) -> None:
            # the finished prefix goes to the store in order, so a resumed run continues after it
            while state["next"] in done:
                ready.append(done.pop(state["next"]))
                state["next"] += 1
            if ready and (final or len(ready) >= COMMIT_EVERY or time.monotonic() - state["flushed"] >= 1.0):
                self._write(ready[:])
                ready.clear()
                state["flushed"] = time.monotonic()

        async def worker() -> None:
            while True:
                try:
                    k = todo.get_nowait()
                except asyncio.QueueEmpty:
                    return
                done[k] = await self.score_item(k)
                state["scored"] += 1
                if progress:
                    progress("items", state["scored"], total)
                collect()

        try:
            await asyncio.gather(*(worker() for _ in range(min(self.cfg.concurrency, max(1, total - start)))))
        finally:
            collect(final=True)

    def remote(self) -> RemoteItems:
        """What a scorer elsewhere needs: how to build this run's :class:`ItemScorer` on a worker,
        the driver's models (their limits shared, the workers' counts added to them), the store."""
        return RemoteItems(build=functools.partial(ItemScorer, self.cfg, self.plans),
                           models={"subject": self.subject.model, "judge": self.judge},
                           store=self.saved.store, run_id=self.saved.run_id)

    def chunk_size(self) -> int:
        """Items per chunk sent to a worker: two rounds of the worker's ``concurrency``, at most
        :data:`COMMIT_EVERY` (a chunk is written when it comes back)."""
        return max(1, min(COMMIT_EVERY, 2 * self.cfg.concurrency))

    async def run_chunks(self, progress: Progress | None = None) -> None:
        """The items scored in chunks by the scorer ``make_scorer`` gives (e.g. on Ray actors,
        :mod:`assay.scale.bench_quality`), ``scorer.depth`` chunks in flight, each taken back in
        order and written as the local path writes its finished prefix: the store has the same
        rows in the same order, and a stopped run resumes after the last chunk written."""
        start, total = self.saved.done, len(self.items)
        size = self.chunk_size()
        chunks = iter([list(range(a, min(a + size, total))) for a in range(start, total, size)])
        if progress:
            progress("items", start, total)
        assert self.make_scorer is not None
        scorer = self.make_scorer(self.remote())
        pending: deque[asyncio.Future] = deque()
        try:
            scorer.start()

            def send() -> None:
                ks = next(chunks, None)
                if ks is not None:
                    pending.append(asyncio.ensure_future(scorer.score(ks)))

            for _ in range(max(1, int(getattr(scorer, "depth", 2)))):
                send()
            scored = start
            while pending:
                got = await pending.popleft()
                self.take(got)
                send()
                scored += len(got["rows"])
                if progress:
                    progress("items", scored, total)
        finally:
            for f in pending:
                f.cancel()
            scorer.close()

    def take(self, got: dict[str, Any]) -> None:
        """A chunk scored elsewhere: its rows written, its tasks' modes kept, and what its subject
        found out about log-likelihoods (a refusal switches the run to generation, as locally)."""
        self._write(list(got["rows"]))
        for task, modes in (got.get("modes") or {}).items():
            self.modes.setdefault(task, set()).update(modes)
        loglik, note = got.get("loglik") or (self.subject.loglik, None)
        if not loglik and self.subject.loglik:
            self.subject.loglik, self.subject.loglik_note = False, note

    def _write(self, batch: list[StoredRow]) -> None:
        if not batch:
            return
        if self.saved.store is not None:
            self.saved.store.write_rows(self.saved.run_id, batch)
        else:
            self.kept.extend(batch)

    async def score_item(self, k: int) -> StoredRow:
        p, i = self.items[k]
        t = p.task
        doc = t.docs[i]
        item: dict[str, Any] = {"task": t.name, "doc_id": i, "prompt": p.contexts[i], "target": None,
                                "answer": None, "extracted": None, "logliks": None, "mode": None}
        scores: dict[str, Score] = {}
        failed = False
        sent = self.subject.track_requests()     # the HTTP requests this item's calls send
        try:
            item["target"] = t.target_text(doc)
            if t.process_results is not None:
                scores = await self._hooked(p, i, item)
            elif t.output_type == "multiple_choice":
                scores = await self._multiple_choice(p, i, item)
            elif t.output_type == "loglikelihood":
                scores = await self._loglikelihood(p, i, item)
            elif t.output_type == "loglikelihood_rolling":
                scores = await self._rolling(p, i, item)
            elif t.is_code:
                scores = await self._code(p, i, item)
            else:
                scores = await self._generation(p, i, item)
        except ModelCallError as exc:
            failed = True
            item["error"] = f"model call failed: {exc}"
            scores = {o: Score.error(item["error"]) for o in p.outputs}
        except AssayError as exc:
            failed = True
            item["error"] = str(exc)
            scores = {o: Score.error(str(exc)) for o in p.outputs}
        if self.subject.pipeline is None:
            item["requests"] = sum(sent)
        if item["mode"]:
            self.modes[t.name].add(item["mode"])
        for o in p.outputs:
            scores.setdefault(o, Score.skipped(f"{o} does not apply when scored by {item['mode'] or 'this mode'}"))
        return StoredRow(k, f"{t.name}/{i}", None, failed, item, {report.SCORES: scores})

    # -- the scoring modes --------------------------------------------------------------------
    async def _multiple_choice(self, p: _Plan, i: int, item: dict[str, Any]) -> dict[str, Score]:
        t = p.task
        doc = t.docs[i]
        choices = [str(c) for c in t.doc_to_choice(doc)]
        g = t.gold_index(doc)
        gold = [x for x in (g if isinstance(g, list) else [g]) if x >= 0]   # none: the target names no choice
        item["choices"] = choices
        item["gold"] = gold
        got = None
        if t.multiple_input(doc):
            got = await self._multiple_input(p, i, item)
        elif self.cfg.scoring != "generate":
            got = await self.subject.logliks(p.contexts[i], t.continuations(doc))
            if got is None and self.cfg.scoring == "loglik":
                raise AssayError(f"--scoring loglik: {self.subject.loglik_note}")
        if got is not None:
            lls, greedy = got
            item["logliks"], item["greedy"], item["mode"] = lls, greedy, "loglik"
            acc = choice_accuracy(lls, choices, gold) if gold else {"acc": 0.0, "acc_norm": 0.0}
            picked = max(range(len(lls)), key=lambda j: lls[j])
            item["extracted"] = {"loglik": choices[picked]}
            scores = {name: _binary(acc[name], f"highest log-likelihood{' per character' if name == 'acc_norm' else ''}"
                                    f": {_letter(_argmax(lls, choices, name == 'acc_norm'))}; gold "
                                    f"{', '.join(_letter(g) for g in gold) or 'none (the target names no choice)'}")
                      for name in ("acc", "acc_norm") if name in p.outputs}
            if "acc_mutual_info" in p.outputs:
                scores["acc_mutual_info"] = await self._mutual_info(p, i, item, lls, gold)
            return scores
        prompt = choice_prompt(p.contexts[i], choices)
        item["prompt"], item["mode"] = prompt, "generate"
        answer = await self.subject.generate(prompt, until=[], max_tokens=min(p.max_tokens, 32), temperature=0.0)
        item["answer"] = answer
        picked = extract_choice(answer, choices)
        item["extracted"] = {"choice": None if picked is None else choices[picked]}
        item["unparsed"] = picked is None
        ok = picked is not None and picked in gold
        why = ("unparsed: the answer chose no single choice (an echo of the options, or several named); "
               "scored wrong" if picked is None else f"answered {_letter(picked)}; gold {', '.join(_letter(g) for g in gold)}")
        return {"acc": _binary(1.0 if ok else 0.0, why)}

    async def _mutual_info(self, p: _Plan, i: int, item: dict[str, Any], lls: list[float], gold: list[int]) -> Score:
        """lm-evaluation-harness's ``acc_mutual_info``: each choice's log-likelihood after the prompt less its
        log-likelihood after an empty context (the same continuation, ``target_delimiter`` + choice); right when
        the largest difference is the gold choice's."""
        t = p.task
        doc = t.docs[i]
        if t.multiple_input(doc):
            return Score.skipped("acc_mutual_info is not computed for a multiple-input (partial evaluation) doc")
        got = await self.subject.logliks("", t.continuations(doc))
        if got is None:
            return Score.skipped(f"acc_mutual_info needs unconditional log-likelihoods: {self.subject.loglik_note}")
        item["logliks_unconditional"] = got[0]
        diff = [c - u for c, u in zip(lls, got[0])]
        pred = max(range(len(diff)), key=lambda j: (diff[j], -j))
        return _binary(1.0 if pred in gold else 0.0, f"highest log-likelihood less the unconditional one: "
                       f"{_letter(pred)}; gold {', '.join(_letter(g) for g in gold) or 'none'}")

    async def _multiple_input(self, p: _Plan, i: int, item: dict[str, Any]) -> tuple[list[float], list[bool]]:
        """lm-evaluation-harness's partial evaluation (Winogrande): the same continuation after each choice's
        context, one request per context; the choices compared by those log-likelihoods."""
        t = p.task
        contexts = t.choice_contexts(i)
        cont = t.continuations(t.docs[i])
        if self.cfg.scoring == "generate" or not self.subject.loglik:
            raise AssayError(f"task {t.name} compares one continuation after several contexts (partial "
                             f"evaluation), which needs log-likelihoods: "
                             f"{self.subject.loglik_note or '--scoring generate was asked'}")
        got = await asyncio.gather(*(self.subject.logliks(c, cont) for c in contexts))
        if any(g is None for g in got):
            raise AssayError(f"task {t.name} needs log-likelihoods (partial evaluation): {self.subject.loglik_note}")
        item["contexts"], item["continuation"] = contexts, cont[0]
        return [g[0][0] for g in got if g], [g[1][0] for g in got if g]

    async def _loglikelihood(self, p: _Plan, i: int, item: dict[str, Any]) -> dict[str, Score]:
        t = p.task
        got = await self.subject.logliks(p.contexts[i], t.continuations(t.docs[i]))
        if got is None:
            raise AssayError(f"task {t.name} needs log-likelihoods: {self.subject.loglik_note}")
        lls, greedy = got
        item["logliks"], item["greedy"], item["mode"] = lls, greedy, "loglik"
        scores = {}
        if "acc" in p.outputs:
            scores["acc"] = _binary(1.0 if greedy[0] else 0.0, f"log-likelihood {lls[0]:.3f}; the target is "
                                    f"{'' if greedy[0] else 'not '}the greedy continuation")
        if "perplexity" in p.outputs:     # lm-eval: the item's loglik, aggregated as exp(-mean)
            scores["perplexity"] = _builtin_value(item, t, "perplexity", lls[0], f"log-likelihood {lls[0]:.3f} of "
                                                  f"the target")
        return scores

    async def _rolling(self, p: _Plan, i: int, item: dict[str, Any]) -> dict[str, Score]:
        """The whole document's log-likelihood (``loglikelihood_rolling``) and the perplexity family as
        lm-evaluation-harness gives it per document: ``(loglik, words)``, ``(loglik, bytes)``."""
        t = p.task
        text = t.document(t.docs[i])
        got = await self.subject.rolling(text)
        if got is None:
            raise AssayError(f"task {t.name} needs log-likelihoods: {self.subject.loglik_note}")
        ll = got.loglik
        item["logliks"], item["mode"], item["windows"] = [ll], "loglik_rolling", got.windows
        _note_rolling(p, got)
        words, nbytes = count_words(text), count_bytes(text)
        item["words"], item["bytes"] = words, nbytes
        weight = {"word_perplexity": words, "byte_perplexity": nbytes, "bits_per_byte": nbytes}
        return {o: _builtin_value(item, t, o, (ll, weight[o]), f"log-likelihood {ll:.3f} of the document "
                                  f"({words} words, {nbytes} bytes)") for o in p.outputs if o in weight}

    async def _hooked(self, p: _Plan, i: int, item: dict[str, Any]) -> dict[str, Score]:
        """A task that scores with its own ``process_results(doc, results)`` (trusted code), given what
        lm-evaluation-harness gives it: ``(loglik, is_greedy)`` per continuation for multiple_choice and
        loglikelihood, and for generate_until the answer through each filter (one call per filter, its values
        named ``metric,filter``)."""
        t = p.task
        doc = t.docs[i]
        names = [str(m["metric"]) for m in t.metrics if m.get("hook")]
        if t.output_type == "loglikelihood_rolling":     # the harness gives the hook (loglik,)
            got = await self.subject.rolling(t.document(doc))
            if got is None:
                raise AssayError(f"task {t.name} scores with process_results on log-likelihoods: "
                                 f"{self.subject.loglik_note}")
            ll = got.loglik
            item["logliks"], item["mode"], item["windows"] = [ll], "loglik_rolling", got.windows
            _note_rolling(p, got)
            per = {"": _call_hook(t, doc, [ll])}
        elif t.output_type in ("multiple_choice", "loglikelihood"):
            if t.output_type == "multiple_choice":
                item["choices"] = [str(c) for c in t.doc_to_choice(doc)]
            got = await self._multiple_input(p, i, item) if t.multiple_input(doc) else \
                await self.subject.logliks(p.contexts[i], t.continuations(doc))
            if got is None:
                raise AssayError(f"task {t.name} scores with process_results on log-likelihoods: "
                                 f"{self.subject.loglik_note}")
            lls, greedy = got
            item["logliks"], item["greedy"], item["mode"] = lls, greedy, "loglik"
            per = {"": _call_hook(t, doc, [(ll, g) for ll, g in zip(lls, greedy)])}
        else:
            answer = await self.subject.generate(p.contexts[i], until=p.until, max_tokens=p.max_tokens,
                                                 temperature=p.temperature)
            item["answer"], item["mode"] = answer, "generate"
            extracted = {f.name: f.apply(answer, doc) for f in t.filters}
            item["extracted"] = extracted
            per = {f",{name}": _call_hook(t, doc, [got]) for name, got in extracted.items()}
        scores: dict[str, Score] = {}
        values: dict[str, Any] = {}
        for suffix, res in per.items():
            for n in names:
                out = f"{n}{suffix}"
                if n not in res:
                    scores[out] = Score.error(f"process_results gave no {n!r} (it gave {sorted(res)[:8]})")
                    continue
                values[out] = _jsonable(res[n])
                agg = next((m.get("aggregation") for m in t.metrics if m.get("metric") == n), None)
                scores[out] = _value_score(res[n], f"{n} from the task's process_results",
                                           agg if isinstance(agg, str) else None)
        item["hook_values"] = values
        return scores

    async def _generation(self, p: _Plan, i: int, item: dict[str, Any]) -> dict[str, Score]:
        t = p.task
        answer = await self.subject.generate(p.contexts[i], until=p.until, max_tokens=p.max_tokens,
                                             temperature=p.temperature)
        item["answer"], item["mode"] = answer, "generate"
        golds = t.targets(t.docs[i])
        gold = item["target"]
        scores: dict[str, Score] = {}
        extracted: dict[str, str] = {}
        for m in t.metrics:
            name = str(m.get("metric"))
            if name == "exact_match":
                opts = {k: m[k] for k in ("ignore_case", "ignore_punctuation", "regexes_to_ignore", "ignore_numbers")
                        if k in m}
                for f in t.filters:
                    got = f.apply(answer, t.docs[i])
                    extracted[f.name] = got
                    v = max(exact_match(got, g, **opts) for g in golds)   # several targets: the best
                    scores[f"exact_match,{f.name}"] = _binary(v, f"extracted {got!r} by {f.name}; target {gold!r}")
            elif m.get("fn") is not None:     # the task's own metric function, as the harness calls it
                for f in t.filters:
                    got = extracted[f.name] = f.apply(answer, t.docs[i])
                    try:
                        v = m["fn"](references=[gold], predictions=[got])
                    except Exception as exc:
                        raise AssayError(f"task {t.name}: metric {name} failed: {type(exc).__name__}: {exc}") from None
                    v = v.get(name) if isinstance(v, dict) else v
                    item.setdefault("hook_values", {})[f"{name},{f.name}"] = _jsonable(v)
                    scores[f"{name},{f.name}"] = _value_score(v, f"{name} (the task's metric) on {got!r}")
            elif name in JUDGED and self.judge is not None:
                metric = get_metric(name)
                rec = Record(query=t.doc_to_text(t.docs[i]), response=answer, ground_truth=gold)
                out = await metric.score(rec, EvalContext(judge=self.judge))
                s = out.get(name) or next(iter(out.values()))
                s.properties = {**(s.properties or {}), "judge": getattr(self.judge, "name", None)}
                scores[name] = s
        item["extracted"] = extracted or None
        return scores

    async def _code(self, p: _Plan, i: int, item: dict[str, Any]) -> dict[str, Score]:
        t = p.task
        doc = t.docs[i]
        prompt = p.contexts[i]
        answers = await asyncio.gather(*(
            self.subject.generate(prompt, until=p.until, max_tokens=p.max_tokens, temperature=p.temperature,
                                  seed=None if p.samples == 1 else s)
            for s in range(p.samples)))
        entry = str(doc.get("entry_point") or "") if isinstance(doc, dict) else ""
        programs = [code_program(t, i, a, entry) for a in answers]
        assert self.sandbox is not None
        # judge(): a sample killed from outside runs once more; killed twice, it is counted apart, not scored
        results = await asyncio.gather(*(asyncio.to_thread(self.sandbox.judge, prog) for prog in programs))
        item["mode"] = "sandbox"
        item["answer"] = answers[0]
        item["answers"] = answers if len(answers) > 1 else None
        built = program_filters(t)
        if built:       # what lm-eval's build_predictions filter gives (and logs): the program head, per answer
            item["extracted"] = {name: [t.context(i) + a for a in answers] for name in built}
        item["sandbox"] = [sandbox_entry(r) for r in results]
        item["isolation"] = results[0].isolation if results else self.sandbox.isolation
        judged = [r for r in results if r.judged]
        c, n = sum(r.status == "passed" for r in judged), len(judged)
        item["passed"], item["killed"] = c, len(results) - n
        first_fail = next((r for r in judged if r.status != "passed"), None)
        why = f"{c} of {n} answers passed the tests" + (f"; first failure: {first_fail.status}: {first_fail.reason}"
                                                         if first_fail else "")
        if n < len(results):
            lost = next(r for r in results if not r.judged)
            why += f"; {len(results) - n} killed twice, not judged ({lost.status}: {lost.reason})"
        return {f"pass@{k}": Score(value=pass_at_k(n, c, k), score=pass_at_k(n, c, k), result="not_applicable",
                                   reason=why, properties={"n": n, "c": c, "killed": len(results) - n})
                if n >= k else Score.skipped(f"pass@{k}: only {n} of {len(results)} samples judged; {why}")
                for k in p.pass_at}


@dataclass
class RemoteItems:
    """A run's items as a scorer elsewhere sees them. ``build()`` (picklable) makes the
    :class:`ItemScorer` on a worker; ``models``: the driver's subject model and judge by role
    (None where there is none), whose limiters the workers share and whose counts the workers'
    are added to; ``store`` / ``run_id``: where the run is saved (the call cache may live there)."""

    build: Callable[[], ItemScorer]
    models: dict[str, Any]
    store: Any = None
    run_id: str | None = None


class ItemScorer:
    """Scores chunks of a run's items where it is made (a Ray actor): the subject resolved once
    (a GGUF loaded once, however many chunks), the judge if the tasks need one, the sandbox for
    code tasks, and the local runner's own :meth:`QualityRunner.score_item`, ``concurrency``
    items at a time. :meth:`score` gives each chunk's rows in order, the modes its items were
    scored by, and whether the subject still gives log-likelihoods (and why not)."""

    def __init__(self, cfg: QualityConfig, plans: list[_Plan]):
        self.cfg = cfg
        self.subject = Subject(cfg.model, api=cfg.api, concurrency=cfg.concurrency, max_length=cfg.max_length,
                               tokenizer=cfg.tokenizer)
        sandbox = Sandbox(timeout_s=cfg.sandbox_timeout, memory_mb=cfg.sandbox_memory_mb) \
            if any(p.task.is_code for p in plans) else None
        judge = None
        if cfg.judge:
            from assay.models import resolve

            judge = resolve(cfg.judge, role="judge")
        self.runner = QualityRunner(cfg, self.subject, plans, None, sandbox, judge)
        self.sem: asyncio.Semaphore | None = None

    @property
    def models(self) -> dict[str, Any]:
        """This worker's subject model and judge by role (as :attr:`RemoteItems.models`)."""
        return {"subject": self.subject.model, "judge": self.runner.judge}

    async def score(self, ks: list[int]) -> dict[str, Any]:
        if self.sem is None:        # one for every chunk in flight here: concurrency items at a time in all
            self.sem = asyncio.Semaphore(self.cfg.concurrency)
        sem = self.sem

        async def one(k: int) -> StoredRow:
            async with sem:
                return await self.runner.score_item(k)

        rows = await asyncio.gather(*(one(k) for k in ks))
        return {"rows": rows, "modes": {t: sorted(m) for t, m in self.runner.modes.items() if m},
                "loglik": (self.subject.loglik, self.subject.loglik_note)}


def item_scorer(engine: str | None, *, address: str | None = None,
                actors: int | None = None) -> Callable[[RemoteItems], Any] | None:
    """The item scorer factory of ``engine`` (None for ``local``, the in-process runner), checked
    before the run is opened: an :class:`AssayError` names the engines there are, or says how
    to install what one needs."""
    name = str(engine or "local").strip().lower()
    if name == "local":
        if address:
            raise AssayError("--ray-address needs --engine ray")
        return None
    if name not in ITEM_ENGINES:
        raise AssayError(f"unknown engine {engine!r}: use one of {', '.join(['local', *sorted(ITEM_ENGINES)])}")
    module, _, fn = ITEM_ENGINES[name].partition(":")
    return getattr(importlib.import_module(module), fn)(address=address, actors=actors)


def _call_hook(t: Task, doc: dict, results: list) -> dict[str, Any]:
    """The task's ``process_results(doc, results)``, which must give a mapping of metric -> value."""
    try:
        got = t.process_results(doc, results)
    except Exception as exc:
        raise AssayError(f"task {t.name}: process_results failed: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]}") from None
    if not isinstance(got, dict):
        raise AssayError(f"task {t.name}: process_results must return a dict of metric -> value, "
                         f"got {type(got).__name__}")
    return got


def _jsonable(v: Any) -> Any:
    """A value from the task's code as an item can keep it (numpy scalars and tuples made plain)."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if hasattr(v, "item") and callable(v.item):
        try:
            return v.item()
        except (TypeError, ValueError):
            pass
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


def _builtin_value(item: dict[str, Any], t: Task, name: str, value: Any, reason: str) -> Score:
    """A perplexity-family value of one item: kept on the item (``hook_values``, for the run's aggregation) and
    scored as the aggregation over this item alone (its own perplexity, or bits per byte)."""
    item.setdefault("hook_values", {})[name] = _jsonable(value)
    agg = next((m.get("aggregation") for m in t.metrics if m.get("metric") == name), None)
    return _value_score(value, reason, agg if isinstance(agg, str) else None)


def _value_score(v: Any, reason: str, agg: str | None = None) -> Score:
    """One value of a task's own metric: a number is a score (right/wrong where it is 0 or 1); a value that one
    of lm-evaluation-harness's aggregations takes (a ``(loglik, weight)`` pair, a loglik for ``perplexity``)
    scores as that aggregation over this item alone; anything else (a list, as ifeval's per-instruction
    results) is kept on the item for the task's aggregation."""
    v = _jsonable(v)
    if agg in LM_AGGREGATIONS:
        try:
            f = aggregate(agg, [v])
        except (ValueError, TypeError, OverflowError, ZeroDivisionError) as exc:
            return Score.skipped(f"{reason}: {exc}")
        return Score(value=f, score=f, result="not_applicable", reason=f"{reason}; {agg}: {f:.4g}")
    if isinstance(v, (bool, int, float)):
        f = float(v)
        if f in (0.0, 1.0):
            return _binary(f, reason)
        return Score(value=f, score=f, result="not_applicable", reason=reason)
    return Score.skipped(f"{reason}: not a number; aggregated by the task's aggregation")


def _binary(v: float, reason: str) -> Score:
    v = float(v)
    return Score(value=v, score=v, passed=v == 1.0, result="pass" if v == 1.0 else "fail", reason=reason)


def _letter(j: int) -> str:
    return chr(ord("A") + j) if 0 <= j < 26 else str(j)


def _argmax(lls: Sequence[float], choices: Sequence[str], norm: bool) -> int:
    vals = [ll / max(1, len(c)) for ll, c in zip(lls, choices)] if norm else list(lls)
    return max(range(len(vals)), key=lambda j: vals[j])


def choice_prompt(context: str, choices: Sequence[str]) -> str:
    """The prompt for multiple choice by generation: the task's prompt, the choices lettered
    when the prompt does not show them already, and how to answer (the words of
    :data:`assay.bench.quality.answers.CHOICE_INSTRUCTION`, which the reading of answers strips)."""
    shown = all(c.strip() and c.strip() in context for c in choices)
    listing = "" if shown else "\n\n" + "\n".join(f"{_letter(j)}. {c}" for j, c in enumerate(choices))
    return f"{context.rstrip()}{listing}\n\nReply with the letter of the correct choice only."


_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S | re.I)


def sandbox_entry(r: SandboxResult) -> dict[str, Any]:
    """One sample's outcome as an item keeps it: status and reason, times, the memory limit in force, and
    the retry (``attempts``, the first run's ``retried``) when there was one."""
    entry = {"status": r.status, "reason": r.reason, "wall_s": round(r.wall_s, 4), "cpu_s": round(r.cpu_s, 4),
             "limit": r.limit}
    if r.attempts > 1:
        entry.update(attempts=r.attempts, retried=r.retried)
    return entry


def aggregate_hooks(plans: list[_Plan], rows: list[StoredRow], summary: dict[str, Any]) -> None:
    """The task's own aggregations (a ``!function`` or ``median`` in ``metric_list``) and the harness's
    perplexity family over the values each item gave, in place of the mean; lm-evaluation-harness gives these no
    standard error but for ``perplexity``'s bootstrap, which is reproduced
    (:mod:`assay.bench.quality.harness_bootstrap`). A plain mean keeps the summary's mean, interval and
    standard error."""
    for p in plans:
        t = p.task
        entry = summary["tasks"].get(t.name)
        if entry is None:
            continue
        for m in t.metrics:
            agg = m.get("aggregation", "mean")
            if agg == "mean" or not (m.get("hook") or m.get("fn") is not None or agg in LM_AGGREGATIONS):
                continue
            for o in [o for o in p.outputs if o == m["metric"] or o.startswith(f"{m['metric']},")]:
                vals = [r.inputs["hook_values"][o] for r in rows if r.inputs.get("task") == t.name
                        and o in (r.inputs.get("hook_values") or {})]
                entry["metrics"][o] = _aggregated(t.name, o, agg, vals)
                if o == entry.get("primary"):
                    entry["primary_value"] = entry["metrics"][o]["mean"]


def _aggregated(task: str, output: str, agg: Any, vals: list[Any]) -> dict[str, Any]:
    named = isinstance(agg, str)
    label = agg if named else f"{getattr(agg, '__module__', '')}.{getattr(agg, '__name__', 'agg')}"
    try:
        if agg == "median":
            value = float(np.median([float(v) for v in vals]))
        else:
            value = float(aggregate(agg, vals) if named else agg(vals)) if vals else None
    except Exception as exc:
        raise AssayError(f"task {task}: the aggregation {label} of {output} failed: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]}") from None
    why = "none (lm-evaluation-harness gives this aggregation none)" if named and agg != "median" \
        else "none (the task's own aggregation)"
    stderr = harness_bootstrap_stderr(agg, vals) if named and agg in BOOTSTRAPPED and vals else None
    if stderr is not None:
        why = f"none; stderr: lm-evaluation-harness's bootstrap ({HARNESS_BOOTSTRAP_ITERS:,} draws)"
    return {"mean": value if vals else None, "ci95_low": None, "ci95_high": None, "evaluated": len(vals),
            "ci_method": why, "stderr": stderr, "aggregation": label}


def name_lm_eval(plans: list[_Plan], summary: dict[str, Any]) -> None:
    """Each score's lm-evaluation-harness name (``acc,none``) beside assay's own, for readers of the harness's
    results (:func:`assay.bench.quality.report.lm_eval_name`)."""
    for p in plans:
        entry = summary["tasks"].get(p.task.name)
        for o, stat in (entry or {}).get("metrics", {}).items():
            name = lm_eval_name(p.task, o)
            if name is not None:
                stat["lm_eval"] = name


SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")


def syntax_errors(plans: list[_Plan], rows: list[StoredRow], summary: dict[str, Any]) -> None:
    """A code task whose every judged sample failed as a SyntaxError scores 0 for how its programs are built, not
    for its answers: its note says so, with the assembly used and the first error."""
    for p in plans:
        t = p.task
        entry = summary["tasks"].get(t.name)
        if entry is None or not t.is_code:
            continue
        judged = [e for r in rows if r.inputs.get("task") == t.name for e in (r.inputs.get("sandbox") or [])
                  if e.get("status") in VERDICTS]
        if judged and all(str(e.get("reason") or "").startswith(SYNTAX_ERRORS) for e in judged):
            entry["notes"] = [*entry.get("notes", []), f"every sample ({len(judged)}) was a SyntaxError (first: "
                              f"{judged[0].get('reason')}): the program run is {t.program_assembly}; if the prompt "
                              f"is prose (as MBPP's), the task should score with lm-eval's code_eval metric "
                              f"(!function utils.pass_at_1), which runs answer + tests"]


def killed_samples(rows: list[StoredRow], summary: dict[str, Any]) -> None:
    """Puts in the summary what pass@k left out: per task, the samples killed twice (a count, after the
    errors, and a note)."""
    for name, task in list(summary["tasks"].items()):
        lost = [e for r in rows if r.inputs.get("task") == name for e in (r.inputs.get("sandbox") or [])
                if e.get("status") not in VERDICTS]
        if lost:
            task["notes"] = [*task.get("notes", []), f"{len(lost)} sample(s) killed twice, not judged (first: "
                             f"{lost[0].get('reason')}); pass@k is over the judged samples"]
            at = list(task).index("first_error") + 1 if "first_error" in task else len(task)
            keys = list(task.items())
            summary["tasks"][name] = dict([*keys[:at], ("killed", len(lost)), *keys[at:]])


def program_filters(task: Task) -> list[str]:
    """The filters of a code task that are HumanEval's ``build_predictions`` (the prompt put before each answer);
    assay builds that program itself (:meth:`Task.program`), these name its head for the item's record."""
    if not (task.is_code and task.program_with_prompt):
        return []
    return [str(e.get("name", "none")) for e in (task.config or {}).get("filter_list") or [] if isinstance(e, dict)
            and any("build_predictions" in str(v) for st in e.get("filter") or [] if isinstance(st, dict)
                    for v in st.values())]


def code_program(task: Task, i: int, answer: str, entry_point: str = "") -> str:
    """The program run for one code answer: the task's (prompt, the answer, the tests). A chat
    model that answers with a fenced block holding the whole function has that block run with
    the tests instead."""
    m = _FENCE.search(answer)
    if m:
        code = m.group(1)
        if entry_point and re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.M):
            return f"{code.rstrip()}\n\n{task.target_text(task.docs[i])}\n"
        answer = code
    return task.program(i, answer)


async def run_quality(cfg: QualityConfig, *, resume: bool | str = False, store: Any = None,
                      out: str | Path | None = None, progress: Progress | None = None,
                      subject: Subject | None = None, engine: str = "local", ray_address: str | None = None,
                      actors: int | None = None, notice: Callable[[str], None] | None = None,
                      lm_eval_out: str | Path | None = None) -> QualityRun:
    """Run the benchmark ``cfg`` describes; see the module docstring. ``engine="ray"`` scores the
    items in chunks on Ray actors (``ray_address``: the cluster; default a local Ray on every
    core; ``actors``: how many, default one per CPU): the same rows, store and summary as
    ``"local"`` (docs/scale.md). ``resume``: True continues the latest unfinished run with the
    same tasks, data and options (none: a new run, and ``notice`` is told so), a run id or name
    that one (an :class:`AssayError` when there is no such run). A run in which every item
    failed (errors, not wrong answers) stores no benchmark and raises :class:`RunIncomplete`.
    ``lm_eval_out``: also write lm-evaluation-harness's results JSON and samples JSONL there
    (:mod:`assay.bench.quality.lmeval_results`)."""
    cfg.check()
    make_scorer = item_scorer(engine, address=ray_address, actors=actors)
    if make_scorer is not None and subject is not None:
        raise AssayError("engine 'ray' resolves the model on every worker from its spec: pass the spec "
                         "(QualityConfig.model), not a Subject")
    catalog, groups, wanted = resolve_task_names(cfg)
    tasks = load_tasks(wanted, limit=cfg.limit, shots=cfg.shots, seed=cfg.seed, trust_code=cfg.trust_task_code,
                       include_dirs=cfg.task_dirs)
    if not tasks:
        raise AssayError(f"no task found in {cfg.tasks!r}")
    plans = plan_tasks(cfg, tasks)
    subject = subject or Subject(cfg.model, api=cfg.api, concurrency=cfg.concurrency, max_length=cfg.max_length,
                                 tokenizer=cfg.tokenizer)
    if cfg.scoring == "loglik" and not subject.loglik:
        raise AssayError(f"--scoring loglik: {subject.loglik_note}")
    sandbox = Sandbox(timeout_s=cfg.sandbox_timeout, memory_mb=cfg.sandbox_memory_mb) \
        if any(p.task.is_code for p in plans) else None
    judge = None
    if cfg.judge:
        from assay.models import resolve

        judge = resolve(cfg.judge, role="judge")
    config = quality_config(cfg, subject, plans, judge)
    data = [{"task": p.task.name, "task_hash": p.task.task_hash, "data_hash": p.task.data_hash,
             "items": len(p.task.docs)} for p in plans]
    # the model under test is the run's subject (its config's "model", named in its source); the
    # run's judge is the judge of judged metrics, or none
    saved = open_run(store, resume, cfg.name, data,
                     f"quality of {subject.name} on tasks: {', '.join(p.task.name for p in plans)}", config, judge)
    if resume is True and not saved.resumed and saved.store is not None and notice is not None:
        notice("nothing to resume: no unfinished quality run with these tasks, data and options in "
               f"{saved.store.display_url}; starting a new run ({saved.run_id})")
    runner = QualityRunner(cfg, subject, plans, saved, sandbox, judge, scorer=make_scorer)
    started = time.time()
    beat = saved.heartbeat()
    try:
        await runner.run(progress)
    except BaseException as exc:
        if saved.store is not None:
            interrupted = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError, SystemExit))
            saved.store.finish_run(saved.run_id, "interrupted" if interrupted else "failed",
                                   error=None if interrupted else f"{type(exc).__name__}: {exc}")
        raise
    finally:
        if beat is not None:
            beat.stop()
    rows = list(saved.store.iter_scored(saved.run_id)) if saved.store is not None else runner.kept
    # modes of items scored before a resume are read back from the rows
    for r in rows:
        if r.inputs.get("mode"):
            runner.modes.setdefault(r.inputs["task"], set()).add(r.inputs["mode"])
    summary = summarize(plans_meta(plans, runner, subject), rows, seed=0)
    summary.update(schema=KIND.schema, name=cfg.name, model=subject.name, model_kind=subject.kind,
                   api=subject.api, config={k: v for k, v in asdict(cfg).items() if k not in ("model", "tasks")},
                   judge=getattr(judge, "name", None), run_id=saved.run_id, created_at=started,
                   duration_s=time.time() - started, resumed=saved.resumed, resumed_at_item=saved.done,
                   isolation=f"{sandbox.isolation}; memory limit: {sandbox.limit} ({sandbox.limit_detail})"
                   if sandbox else None, memory_limit=sandbox.limit if sandbox else None, calls=_calls(subject),
                   engine="local" if make_scorer is None else str(engine).strip().lower(),
                   trust_task_code=cfg.trust_task_code)
    complete_summary(plans, rows, summary, catalog, groups)
    items = [stored_item(r) for r in rows]
    if lm_eval_out is not None:
        from assay.bench.quality.lmeval_results import write_lm_eval

        summary["lm_eval_files"] = [str(f) for f in write_lm_eval(Path(lm_eval_out), summary, items,
                                                                  [p.task for p in plans])]
    return keep_run(saved, summary, rows, items, subject, judged_scorers(plans, judge), out)


def complete_summary(plans: list[_Plan], rows: list[StoredRow], summary: dict[str, Any], catalog: Catalog | None,
                     groups: list[str]) -> None:
    """What the summary adds to the items' means: the tasks' own and lm-eval's aggregations, lm-eval's names,
    the groups' figures, the samples left out and the code tasks that never parsed."""
    aggregate_hooks(plans, rows, summary)
    name_lm_eval(plans, summary)
    if catalog is not None and groups:
        summary["groups"] = group_figures(catalog, groups, summary)
    killed_samples(rows, summary)
    syntax_errors(plans, rows, summary)


def _task_items(spec: Any) -> list[Any]:
    if isinstance(spec, (str, Path)):
        return [s.strip() for s in str(spec).split(",") if s.strip()] if isinstance(spec, str) else [spec]
    return [x for s in spec for x in _task_items(s)]


def resolve_task_names(cfg: QualityConfig) -> tuple[Catalog | None, list[str], Any]:
    """What ``--tasks`` names, with ``--task-dir`` folders: each name that is no file, folder or
    ``python:`` task is looked up in the folders' catalog (a task, a group's tasks, a tag's); the catalog, the
    groups named (their figures go in the summary) and what :func:`load_tasks` is given."""
    if not cfg.task_dirs:
        return None, [], cfg.tasks
    catalog = build_catalog(cfg.task_dirs)
    wanted: list[Any] = []
    groups: list[str] = []
    for item in _task_items(cfg.tasks):
        text = str(item)
        if text.startswith("python:") or Path(text).expanduser().exists() or not catalog.knows(text):
            if not text.startswith("python:") and not Path(text).expanduser().exists():
                raise catalog.unknown(text)
            wanted.append(item)
            continue
        files, named = catalog.resolve([text])
        wanted.extend(f for f in files if f not in wanted)
        groups.extend(g for g in named if g not in groups)
    return catalog, groups, wanted


def keep_run(saved: StoreRun, summary: dict[str, Any], rows: list[StoredRow], items: list[dict[str, Any]],
             subject: Subject, scorers: dict[str, Any], out: str | Path | None) -> QualityRun:
    """A finished run kept: the HTTP requests of the items this session scored and what the model
    under test cost added to its summary; completed in the store with its aggregates, the summary
    stored as a quality benchmark, and ``--out``'s files. A run whose every item failed is kept as
    ``failed`` with no benchmark, and raises :class:`RunIncomplete` (:func:`nothing_scored`)."""
    if summary.get("calls") is not None:
        summary["calls"]["requests"] = sum(int(r.inputs.get("requests") or 0) for r in rows[saved.done:])
    summary["cost"] = subject_cost(subject, summary)
    if rows and all(r.target_error for r in rows):
        if out is not None:
            write_out(Path(out), summary, items)
        raise nothing_scored(rows, saved)
    ref = None
    if saved.store is not None:
        ref = summary["ref"] = new_ref()
        saved.store.finish_run(saved.run_id, "completed", aggregates=run_aggregates(rows, summary),
                               summary={**summary, "scorers": scorers})
        store_benchmark(saved.store, KIND, summary, run_id=saved.run_id)
    if out is not None:
        write_out(Path(out), summary, items)
    return QualityRun(summary, items, saved.run_id, ref)


def nothing_scored(rows: list[StoredRow], saved: StoreRun) -> RunIncomplete:
    """A run whose every item failed: stored as ``failed`` (its items kept, no benchmark), and the
    one line that says so, with the first error."""
    first = next((str(r.inputs["error"]) for r in rows if r.inputs.get("error")), "no error was recorded")
    first = " ".join(first.split())
    if len(first) > 300:
        first = first[:297] + "..."
    msg = f"every item failed ({len(rows)} of {len(rows)}); nothing was scored; first: {first}"
    if saved.store is not None:
        saved.store.finish_run(saved.run_id, "failed", error=msg)
        msg += f"; the items are kept in run {saved.run_id} (assay show {saved.run_id} --errors)"
    return RunIncomplete(msg)


def quality_config(cfg: QualityConfig, subject: Subject, plans: list[_Plan], judge: Any) -> dict[str, Any]:
    """The configuration the run is saved (and resumed) with: what changes the answers."""
    outputs: list[str] = []
    for p in plans:
        outputs += [o for o in p.outputs if o not in outputs]
    # every score is an output of one metric, report.SCORES: export columns read outputs.quality.<score>
    layout = [[report.SCORES, outputs]]
    return {"family": "quality", "model": subject.name, "api": subject.api,
            "tasks": [{"name": p.task.name, "task_hash": p.task.task_hash, "data_hash": p.task.data_hash,
                       "samples": p.samples, "pass_at": p.pass_at, "temperature": p.temperature,
                       "max_tokens": p.max_tokens} for p in plans],
            "limit": cfg.limit, "shots": cfg.shots, "seed": cfg.seed, "scoring": cfg.scoring,
            "judge": getattr(judge, "name", None), "metrics": outputs, "layout": layout,
            **({"trust_task_code": True} if cfg.trust_task_code else {})}


def judged_scorers(plans: list[_Plan], judge: Any) -> dict[str, Any]:
    """Who gave each of the run's scores, as an evaluation run records its scorers
    (:func:`assay.engine.evaluate.scorers_of`): the judge model for the judge metrics of generation
    tasks, a formula for the others (accuracy, exact match and pass@k are nobody's judgement). What
    ``assay show`` and the dashboard name as judged, and whose judge they advise checking."""
    name = getattr(judge, "name", None)
    out: dict[str, Any] = {}
    for p in plans:
        for o in p.outputs:
            out[o] = ({"by": name, "kind": "judge", "label": str(name)} if o in JUDGED and judge is not None
                      else {"by": None, "kind": "formula", "label": "formula"})
    return out


FIRST_TOKEN_NOTE = ("the server gives an echoed prompt's first token no log-probability (llama-cpp-python): "
                    "each document's first token is left out of its log-likelihood, as lm-evaluation-harness "
                    "leaves it out on this server")


def _note_rolling(p: _Plan, got: Any) -> None:
    """A task-level note when a rolling document's first token went unscored."""
    if got.first_token_missing and FIRST_TOKEN_NOTE not in p.notes:
        p.notes.append(FIRST_TOKEN_NOTE)


def plans_meta(plans: list[_Plan], runner: QualityRunner, subject: Subject) -> list[dict[str, Any]]:
    """What the summary says about each task besides its scores."""
    meta = []
    for p in plans:
        t = p.task
        modes = sorted(runner.modes.get(t.name) or [])
        notes = list(p.notes)
        if "generate" in modes and t.output_type == "multiple_choice" and subject.loglik_note:
            notes.append(subject.loglik_note)
        meta.append({"name": t.name, "output_type": t.output_type, "outputs": p.outputs,
                     "primary": primary_output(t, p.pass_at), "modes": modes, "items": len(t.docs),
                     "num_fewshot": t.num_fewshot, "samples": p.samples, "pass_at": p.pass_at,
                     "temperature": p.temperature, "source": t.source, "task_hash": t.task_hash,
                     "data_hash": t.data_hash, "data_files": list(t.data_files), "unsupported": list(t.unsupported),
                     "notes": notes, **({"code_files": dict(t.code_files)} if t.code_files else {})})
    return meta


def subject_cost(subject: Subject, summary: dict[str, Any]) -> dict[str, Any]:
    """What the model under test cost in this run (as a perf run records it): its paid tokens at
    its backend's price — the price table's row for an OpenAI or Azure model, nothing for an
    in-process model — or the table in force by name (:func:`assay.bench.cost.benchmark_cost`)."""
    from assay.bench.cost import benchmark_cost, estimated_cost

    backend = getattr(subject.model, "model", subject.model)
    price = getattr(backend, "price", None) if backend is not None else None
    recorded = {"price_per_1m": list(price), "source": getattr(backend, "price_source", "backend")} \
        if price is not None else {}
    priced = benchmark_cost({"kind": "quality", "model": subject.name, "details": {**summary, "cost": recorded}})
    return {"price_per_1m": priced["price_per_1m"], "source": priced["price_source"],
            "estimated_cost_per_1m": estimated_cost(priced["price_per_1m"]),
            "input_tokens": priced["input_tokens"], "output_tokens": priced["output_tokens"],
            "usd": priced["cost_usd"], "no_price": priced["no_price"]}


def _calls(subject: Subject) -> dict[str, Any] | None:
    """This session's calls of the model under test (cache hits and in-flight sharing included);
    :func:`keep_run` adds the HTTP requests they sent (``requests``: a log-likelihood call sends
    one per choice, a call the cache answered none; retries aside)."""
    st = subject.stats
    if st is None:
        return None
    return st.snapshot()


def run_aggregates(rows: list[StoredRow], summary: dict[str, Any]) -> dict[str, Any]:
    """The stored run's aggregates, as every evaluation run has them (:class:`Accumulator`): one per
    score, named ``<score>:<task>`` when the run has several tasks, and the quality index."""
    s = QualitySummary.load(summary)
    several = len(s.tasks) > 1
    accs: dict[str, Accumulator] = {}
    for r in rows:
        for outs in r.scores.values():
            for o, sc in outs.items():
                key = f"{o}:{r.inputs.get('task')}" if several else o
                accs.setdefault(key, Accumulator(metric=key, output=key)).add(sc)
    agg = {k: a.result() for k, a in accs.items()}
    for tname, t in s.tasks.items():     # the intervals the summary gives (Wilson, "too few"), not a bootstrap's
        for o, st in t.metrics.items():
            key = f"{o}:{tname}" if several else o
            a = agg.get(key)
            if st.aggregation and st.mean is not None:     # the task's own aggregation, not the items' mean
                a = agg[key] = {**(a or {}), "mean": st.mean, "evaluated": st.evaluated, "aggregation": st.aggregation}
            if a is not None and st.ci_method:
                a.update(ci95_low=st.ci95_low, ci95_high=st.ci95_high, ci_method=st.ci_method, stderr=st.stderr)
    idx = s.index
    if idx.value is not None:
        agg["quality_index"] = {"mean": idx.value, "ci95_low": idx.ci95_low, "ci95_high": idx.ci95_high,
                                "ci_method": idx.ci_method, "evaluated": idx.tasks, "skipped": 0, "errored": 0}
    return agg


def stored_item(r: StoredRow) -> dict[str, Any]:
    """One line of ``items.jsonl``: the item as stored, and its scores by output."""
    item = dict(r.inputs)
    item["scores"] = {o: s.score for outs in r.scores.values() for o, s in outs.items() if s.status == "completed"}
    item["errors"] = {o: s.reason for outs in r.scores.values() for o, s in outs.items() if s.status == "error"} or None
    return item


def write_out(path: Path, summary: dict[str, Any], items: list[dict[str, Any]]) -> None:
    """``summary.json`` and ``items.jsonl`` under ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "summary.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    with (path / "items.jsonl").open("wb") as f:
        for it in items:
            f.write(orjson.dumps(it, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")


def export_lm_eval(store: Any, ref: str, out: str | Path, *, trust_task_code: bool = False) -> list[Path]:
    """Write a stored quality run ``ref`` as lm-evaluation-harness writes its results (``--output-lm-eval``
    after the fact): the run's summary and stored items, and its tasks loaded again from their files with the run's
    options (limit, shots, seed, task folders) — each must hash as it did in the run, else an :class:`AssayError`
    names the task file that changed. A run made with ``--trust-task-code`` needs it again (its hooks shape the
    docs). The files written."""
    from assay.bench.quality.lmeval_results import write_lm_eval

    rec = store.get_benchmark(str(ref), kind=KIND.name)
    summary = dict(rec.get("details") or {})
    cfg = summary.get("config") or {}
    run_id = summary.get("run_id") or rec.get("run_id")
    if not run_id:
        raise AssayError(f"benchmark {rec.get('ref')} kept no run id, so its items cannot be read")
    tasks: list[Task] = []
    for name, entry in (summary.get("tasks") or {}).items():
        source = entry.get("source")
        loaded = load_tasks(source, limit=cfg.get("limit"), shots=cfg.get("shots"), seed=cfg.get("seed", 1234),
                            trust_code=trust_task_code, include_dirs=cfg.get("task_dirs") or []) if source else []
        t = next((x for x in loaded if x.name == name), None)
        if t is None:
            raise AssayError(f"task {name} of benchmark {rec.get('ref')}: no task {name!r} in {source or '(no source)'}")
        if entry.get("task_hash") and t.task_hash != entry["task_hash"]:
            raise AssayError(f"task {name} of benchmark {rec.get('ref')}: {source} (or its data) changed since the "
                             f"run; lm-eval's files need the task as it was run")
        tasks.append(t)
    items = [stored_item(r) for r in store.iter_scored(run_id)]
    return write_lm_eval(Path(out), summary, items, tasks)
