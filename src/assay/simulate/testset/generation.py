"""Generating a test set from documents: plan, write, check, keep.

The set has exactly ``n`` items split over the question types by ``mix`` (largest remainder:
``n=50``, ``single_hop=0.6,multi_hop=0.3,unanswerable=0.1`` -> 30, 15, 5). Each *try* writes one
item of one type (a model call) from seeded choices: its passage (the chunks in a seeded order,
taken in turn), for multi-hop a second passage among the five most similar chunks of another
section, a style and a persona. Every item is checked before it is kept, cheapest refusal first:

1. the answer is readable (strict JSON, :func:`~assay.simulate.testset.prompts.parse_answer`);
2. *answerable from its sources*: a model call with the item's passages says they answer it (for
   multi-hop, also that neither passage alone does: two more calls); for an unanswerable item,
   the same call over its passage and the three chunks most similar to the question must say
   they do **not** answer it;
3. *not answerable from the question alone*: a model call without any passage says general
   knowledge would not give the answer;
4. *not a near-duplicate* of an item already kept (cosine similarity of the questions'
   embeddings, :mod:`~assay.simulate.testset.similarity`).

Tries run in rounds (``concurrency`` at once); a round tries as many items as are still missing,
and kept items are taken in try order, so the set does not depend on timing. It stops when every
type has its count, or after ``max_tries`` tries: then the result says how many are missing and
why the tries were refused. Every call goes through the call cache with a seed of its own, so a
second run with the same documents, seed and model makes no call.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from assay.errors import AssayError
from assay.simulate.testset import prompts
from assay.simulate.testset.chunking import Chunk
from assay.simulate.testset.similarity import Similarity, top_k

TYPES = ("single_hop", "multi_hop", "unanswerable")
DEFAULT_MIX = {"single_hop": 0.6, "multi_hop": 0.3, "unanswerable": 0.1}
MIN_CHUNK_CHARS = 80          # shorter chunks (a lone link, a caption) are not used as sources
PARTNERS = 5                  # a multi-hop item's second passage: one of the 5 most similar other sections
NEIGHBOURS = 3                # an unanswerable item is checked against its passage and 3 nearest chunks
GEN_TOKENS, CHECK_TOKENS = 400, 120
GEN_TEMPERATURE = 0.7

REASONS = {
    "model_error": "the model call failed",
    "unreadable": "the answer was not the JSON asked for",
    "not_grounded": "its sources did not answer it",
    "one_source_enough": "multi-hop, but one passage alone answered it",
    "answered_by_documents": "meant to be unanswerable, but the documents answered it",
    "answerable_without_documents": "answerable from the question alone",
    "near_duplicate": "a near-duplicate of a kept item",
}


def parse_mix(text: str | dict[str, float] | None) -> dict[str, float]:
    """``single_hop=0.6,multi_hop=0.3,unanswerable=0.1`` -> shares that add up to 1."""
    if text is None:
        return dict(DEFAULT_MIX)
    raw: dict[str, float] = {}
    if isinstance(text, dict):
        raw = {str(k): float(v) for k, v in text.items()}
    else:
        for part in (p.strip() for p in text.split(",") if p.strip()):
            name, eq, value = part.partition("=")
            try:
                raw[name.strip()] = float(value) if eq else float("nan")
            except ValueError:
                raw[name.strip()] = float("nan")
    for name, share in raw.items():
        if name not in TYPES:
            raise AssayError(f"--mix: unknown question type {name!r}; types: {', '.join(TYPES)}")
        if not share >= 0:
            raise AssayError(f"--mix {name}: expected a share >= 0 such as {name}=0.3")
    total = sum(raw.values())
    if total <= 0:
        raise AssayError("--mix: the shares add up to 0; give at least one type a share, e.g. single_hop=1")
    return {t: raw.get(t, 0.0) / total for t in TYPES}


def default_max_tries(n: int) -> int:
    """Tries allowed by default: four per item asked, and at least 20."""
    return max(4 * n, 20)


def quotas(n: int, mix: dict[str, float]) -> dict[str, int]:
    """Items per type: ``n`` split by ``mix``, largest remainder (ties in :data:`TYPES` order)."""
    exact = {t: n * mix.get(t, 0.0) for t in TYPES}
    out = {t: int(exact[t]) for t in TYPES}
    left = n - sum(out.values())
    for t in sorted(TYPES, key=lambda t: -(exact[t] - out[t]))[:left]:
        out[t] += 1
    return out


@dataclass(frozen=True)
class Attempt:
    """One try: its type, its number among the tries of that type, its passages and voice."""

    kind: str
    number: int
    chunks: tuple[Chunk, ...]
    style: str
    persona: str
    seed: int                  # the seed of its model calls (part of their cache key)


@dataclass
class Item:
    """A checked item."""

    attempt: Attempt
    question: str
    answer: str
    facts: list[str]
    missing: str | None = None
    vector: np.ndarray | None = None


@dataclass
class TestsetResult:
    """What the generator made and what it cost."""

    __test__ = False           # not a pytest class

    rows: list[dict[str, Any]]
    asked: int
    quotas: dict[str, int]
    kept: dict[str, int]
    tries: int
    rejected: Counter = field(default_factory=Counter)
    model: str = ""
    model_calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    chunks: int = 0
    documents: int = 0
    skipped_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    path: Path | None = None

    @property
    def short(self) -> int:
        return self.asked - len(self.rows)

    def shortfall(self) -> str | None:
        """The line saying why fewer items than asked, or None."""
        if not self.short:
            return None
        why = ", ".join(f"{k} {REASONS.get(r, r)}" for r, k in self.rejected.most_common()) or "no try was refused"
        missing = ", ".join(f"{self.quotas[t] - self.kept.get(t, 0)} {t}" for t in TYPES
                            if self.quotas[t] > self.kept.get(t, 0))
        return (f"only {len(self.rows)} of {self.asked} items: {missing} missing after {self.tries} tries "
                f"(the limit, --max-tries); refused: {why}")

    def summary(self) -> str:
        where = str(self.path) if self.path else "(not written)"
        kinds = ", ".join(f"{self.kept.get(t, 0)} {t}" for t in TYPES if self.quotas.get(t))
        return (f"{len(self.rows)} item(s) written to {where} ({kinds}) from {self.chunks} chunk(s) of "
                f"{self.documents} document(s); {self.tries} tries, {sum(self.rejected.values())} refused; "
                f"model {self.model}: {self.model_calls} call(s) ({self.cached_calls} from the cache), "
                f"{self.prompt_tokens} prompt + {self.completion_tokens} completion tokens")


class Planner:
    """The seeded choices of every try: passages, partner passages, styles, personas."""

    def __init__(self, chunks: Sequence[Chunk], vectors: np.ndarray, *, seed: int, styles: Sequence[str],
                 personas: Sequence[str], language: str):
        self.chunks = list(chunks)
        self.vectors = vectors
        self.seed = seed
        self.styles = list(styles)
        self.personas = list(personas)
        self.language = language
        self.order = {t: self._order(t) for t in TYPES}
        self.next_number = dict.fromkeys(TYPES, 0)

    def _order(self, kind: str) -> list[int]:
        order = list(range(len(self.chunks)))
        random.Random(f"{self.seed}|testset|{kind}|order").shuffle(order)
        return order

    def _section(self, c: Chunk) -> tuple[str, tuple[str, ...]]:
        return c.doc_uri, c.headings

    def _partner(self, i: int, rng: random.Random) -> int:
        mine = self._section(self.chunks[i])
        same = [j for j, c in enumerate(self.chunks) if self._section(c) == mine]
        near = top_k(self.vectors[i], self.vectors, PARTNERS, exclude=same)
        return rng.choice(near) if near else i

    def next(self, kind: str) -> Attempt:
        number = self.next_number[kind]
        self.next_number[kind] = number + 1
        rng = random.Random(f"{self.seed}|testset|{kind}|{number}")
        order = self.order[kind]
        i = order[number % len(order)]
        picked = (i, self._partner(i, rng)) if kind == "multi_hop" else (i,)
        style = rng.choice(self.styles)
        persona = rng.choice(self.personas)
        return Attempt(kind, number, tuple(self.chunks[j] for j in picked), style, persona, rng.randrange(2**31))

    def style_text(self, style: str) -> str:
        return prompts.STYLES[style].format(language=self.language)


class Checker:
    """Writes one try's item and checks it (model calls through one LimitedModel)."""

    def __init__(self, model: Any, planner: Planner, similarity: Similarity, chunk_vectors: np.ndarray):
        self.model = model
        self.planner = planner
        self.similarity = similarity
        self.chunk_vectors = chunk_vectors

    async def _ask(self, messages: list[dict[str, str]], schema: dict[str, type], max_tokens: int,
                   temperature: float, seed: int) -> dict[str, Any]:
        gen = await self.model.generate(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                        response_format=prompts.response_format(schema))
        return prompts.parse_answer(gen.text, schema)

    def write_prompt(self, a: Attempt) -> list[dict[str, str]]:
        style = self.planner.style_text(a.style)
        if a.kind == "multi_hop":
            return prompts.multi_hop(a.chunks[0], a.chunks[-1], a.persona, style)
        if a.kind == "unanswerable":
            return prompts.unanswerable(a.chunks[0], a.persona, style)
        return prompts.single_hop(a.chunks[0], a.persona, style)

    async def _grounded(self, item: Item, chunks: Sequence[Chunk], with_answer: bool) -> bool:
        got = await self._ask(prompts.grounded_check(item.question, item.answer if with_answer else None, chunks),
                              prompts.GROUNDED_SCHEMA, CHECK_TOKENS, 0.0, item.attempt.seed)
        return bool(got["answerable"])

    async def _write(self, a: Attempt) -> Item:
        if a.kind == "unanswerable":
            got = await self._ask(self.write_prompt(a), prompts.UNANSWERABLE_SCHEMA, GEN_TOKENS, GEN_TEMPERATURE,
                                  a.seed)
            return Item(a, got["question"], prompts.UNANSWERABLE_ANSWER, [prompts.UNANSWERABLE_FACT],
                        missing=got["missing"])
        got = await self._ask(self.write_prompt(a), prompts.ITEM_SCHEMA, GEN_TOKENS, GEN_TEMPERATURE, a.seed)
        return Item(a, got["question"], got["answer"], got["facts"])

    async def _sources_verdict(self, item: Item) -> str | None:
        a = item.attempt
        if a.kind == "unanswerable":
            vec = (await self.similarity.vectors([item.question], "query"))[0]
            own = self.planner.chunks.index(a.chunks[0])
            near = top_k(vec, self.chunk_vectors, NEIGHBOURS, exclude=[own])
            chunks = [a.chunks[0]] + [self.planner.chunks[j] for j in near]
            return "answered_by_documents" if await self._grounded(item, chunks, False) else None
        if not await self._grounded(item, a.chunks, True):
            return "not_grounded"
        if a.kind == "multi_hop" and len({c.id for c in a.chunks}) == 2:
            for c in a.chunks:
                if await self._grounded(item, [c], True):
                    return "one_source_enough"
        return None

    async def run(self, a: Attempt) -> tuple[Item | None, str | None]:
        """``(item, None)`` when every model check passes, else ``(None, reason)``."""
        from assay.models.base import ModelCallError

        try:
            item = await self._write(a)
            why = await self._sources_verdict(item)
            if why:
                return None, why
            ref = None if a.kind == "unanswerable" else item.answer
            got = await self._ask(prompts.closed_book_check(item.question, ref), prompts.CLOSED_BOOK_SCHEMA,
                                  CHECK_TOKENS, 0.0, a.seed)
            if got["answerable_without_documents"]:
                return None, "answerable_without_documents"
            return item, None
        except prompts.Unreadable:
            return None, "unreadable"
        except ModelCallError:
            return None, "model_error"


def row_of(item: Item, index: int, *, seed: int, shape: str, model: str) -> dict[str, Any]:
    """One evaluation-set row: Databricks' columns (``request``, ``expected_response``, ...) or
    Azure's (``query``, ``ground_truth``, ...), with ``expected_facts``,
    ``expected_retrieved_context`` (answerable items) and the item's provenance."""
    a = item.attempt
    row: dict[str, Any] = ({"request_id": f"testset-{seed}-{index}", "request": item.question,
                            "expected_response": item.answer} if shape == "databricks" else
                           {"id": f"testset-{seed}-{index}", "query": item.question, "ground_truth": item.answer})
    row["expected_facts"] = item.facts
    if a.kind != "unanswerable":
        row["expected_retrieved_context"] = [{"doc_uri": c.doc_uri, "content": c.text} for c in a.chunks]
    row.update({"question_type": a.kind, "style": a.style, "persona": a.persona,
                "source_chunk_ids": [c.id for c in a.chunks], "seed": seed, "generator_model": model})
    if item.missing:
        row["unanswerable_because"] = item.missing
    return row


@dataclass
class _Progress:
    kept: dict[str, int]
    rejected: Counter
    tries: int = 0
    items: list[Item] = field(default_factory=list)


def _need(quota: dict[str, int], state: _Progress) -> dict[str, int]:
    return {t: quota[t] - state.kept[t] for t in TYPES if quota[t] > state.kept[t]}


async def _keep(results: Sequence[tuple[Item | None, str | None]], quota: dict[str, int], state: _Progress,
                similarity: Similarity) -> int:
    """Take a round's passing items in try order, refusing near-duplicates; returns how many were kept."""
    passed = [it for it, _ in results if it is not None]
    state.rejected.update(why for it, why in results if it is None and why)
    vecs = await similarity.vectors([it.question for it in passed], "query")
    kept = 0
    for it, vec in zip(passed, vecs):
        if state.kept[it.attempt.kind] >= quota[it.attempt.kind]:
            continue
        if any(float(vec @ other.vector) >= similarity.threshold for other in state.items):  # type: ignore[operator]
            state.rejected["near_duplicate"] += 1
            continue
        it.vector = vec
        state.items.append(it)
        state.kept[it.attempt.kind] += 1
        kept += 1
    return kept


async def run_tries(checker: Checker, quota: dict[str, int], *, max_tries: int, concurrency: int,
                    progress: Callable[[int], None] | None = None) -> _Progress:
    """Rounds of tries until every type has its quota or ``max_tries`` tries were made."""
    from assay.simulate.conversation import run_all

    state = _Progress(kept=dict.fromkeys(TYPES, 0), rejected=Counter())
    while (need := _need(quota, state)) and state.tries < max_tries:
        attempts: list[Attempt] = []
        for kind, k in need.items():
            attempts.extend(checker.planner.next(kind) for _ in range(k))
        attempts = attempts[:max_tries - state.tries]
        state.tries += len(attempts)
        results = await run_all([lambda a=a: checker.run(a) for a in attempts], concurrency)
        kept = await _keep(results, quota, state, checker.similarity)
        if progress is not None and kept:
            progress(kept)
    return state
