"""What a test-set run will cost and take, worked out before any call (``--estimate``).

The first round of tries is planned exactly as the run would plan it (same seed, same passages,
styles and personas; hashed word counts stand in for embeddings to pick multi-hop partners, so no
model of any kind is called) and its prompts are measured (4 characters a token, as the limiter
budgets). Each try costs one call to write the item and then its checks: single-hop and
unanswerable items two calls, multi-hop four (both passages, then each alone). Completions are
taken at :data:`ANSWER_TOKENS` for a written item and :data:`VERDICT_TOKENS` for a check.

Two figures are given: *if every try is kept* (the least the run can cost) and *at most*, when
every one of ``max_tries`` tries reaches its last check. Prices come from ``--price IN,OUT``,
``$ASSAY_JUDGE_PRICE``, the price table (:mod:`assay.models.pricing`) for OpenAI and Azure models,
0 for an in-process model; else the cost is unknown. Time assumes :data:`SECONDS_PER_CALL` a call
(or ``--seconds-per-call``) with ``concurrency`` calls at once. Calls already in the call cache
cost nothing and take no time, so a rerun costs less than estimated.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from assay.models.base import estimate_tokens
from assay.simulate.testset import prompts
from assay.simulate.testset.chunking import Chunk
from assay.simulate.testset.generation import TYPES, Attempt, Checker, Planner, default_max_tries, quotas
from assay.simulate.testset.similarity import Similarity, hashed_vectors

ANSWER_TOKENS = 150
VERDICT_TOKENS = 40
QUESTION_CHARS, ANSWER_CHARS = 120, 240
CHECK_CALLS = {"single_hop": 2, "multi_hop": 4, "unanswerable": 2}
SECONDS_PER_CALL = {"embedded": 4.0, "local": 4.0}
DEFAULT_SECONDS = 2.0


@dataclass
class Estimate:
    """Calls, tokens, cost and time of a run, before it starts."""

    items: int
    quotas: dict[str, int]
    documents: int
    chunks: int
    max_tries: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    model: str
    price: tuple[float, float] | None
    price_source: str
    seconds_per_call: float
    concurrency: int
    notes: list[str] = field(default_factory=list)

    @property
    def scale(self) -> float:
        return self.max_tries / self.items

    def cost(self, scale: float = 1.0) -> float | None:
        if self.price is None:
            return None
        return scale * (self.prompt_tokens * self.price[0] + self.completion_tokens * self.price[1]) / 1e6

    def seconds(self, scale: float = 1.0) -> float:
        return scale * self.calls * self.seconds_per_call / self.concurrency

    def lines(self) -> list[str]:
        def money(v: float | None) -> str:
            return "unknown (no price for this model: --price IN,OUT)" if v is None else f"${v:,.4f}"

        def dur(s: float) -> str:
            return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"

        kinds = ", ".join(f"{self.quotas[t]} {t}" for t in TYPES if self.quotas[t])
        s = self.scale
        price = (f"{self.price[0]:g} / {self.price[1]:g} USD per 1M input / output tokens ({self.price_source})"
                 if self.price is not None else "unknown")
        return [
            f"estimate for {self.items} item(s) ({kinds}) from {self.chunks} chunk(s) of {self.documents} "
            f"document(s), model {self.model}; no call made",
            f"  if every try is kept: {self.calls:,} calls, {self.prompt_tokens:,} prompt + "
            f"{self.completion_tokens:,} completion tokens, cost {money(self.cost())}, about {dur(self.seconds())}",
            f"  at most ({self.max_tries} tries, --max-tries): {round(self.calls * s):,} calls, "
            f"{round(self.prompt_tokens * s):,} prompt + {round(self.completion_tokens * s):,} completion tokens, "
            f"cost {money(self.cost(s))}, about {dur(self.seconds(s))}",
            f"  price: {price}; time: {self.seconds_per_call:g} s a call, {self.concurrency} at once (assumed)",
            *[f"  {n}" for n in self.notes],
        ]


def _price(kind: str, model: str | None, given: Any) -> tuple[tuple[float, float] | None, str]:
    from assay.models.pricing import PRICE_ENV, lookup_price, parse_price

    if given is not None:
        return parse_price(given, where="--price"), "--price"
    env = os.environ.get(PRICE_ENV, "").strip()
    if env:
        return parse_price(env, where=f"${PRICE_ENV}"), f"${PRICE_ENV}"
    if kind in ("embedded", "local"):
        return (0.0, 0.0), "in-process model"
    if kind in ("openai", "azure") and model:
        found = lookup_price(model)
        if found is not None:
            return found, "price table"
    return None, "unknown"


def _check_tokens(a: Attempt) -> int:
    q, ans = "x" * QUESTION_CHARS, "x" * ANSWER_CHARS
    chunks: Sequence[Chunk] = a.chunks
    n = estimate_tokens(prompts.grounded_check(q, ans, chunks))
    if a.kind == "multi_hop":
        n += sum(estimate_tokens(prompts.grounded_check(q, ans, [c])) for c in chunks)
    if a.kind == "unanswerable":
        n += 3 * estimate_tokens([{"content": a.chunks[0].as_passage()}])   # the neighbours, about as long
    return n + estimate_tokens(prompts.closed_book_check(q, ans))


def estimate_testset(chunks: Sequence[Chunk], *, n: int, mix: dict[str, float], model_spec: Any = None,
                     documents: int = 0, seed: int = 0, styles: Sequence[str] = tuple(prompts.STYLES),
                     personas: Sequence[str] = prompts.PERSONAS, language: str = "French",
                     max_tries: int | None = None, concurrency: int = 4, price: Any = None,
                     seconds_per_call: float | None = None) -> Estimate:
    """The :class:`Estimate` of a run over ``chunks``; parses ``model_spec`` and calls nothing."""
    from assay.models.roles import resolve_spec

    ms = resolve_spec(model_spec if isinstance(model_spec, str) or model_spec is None else None, role="simulator")
    name = ms.spec or ms.kind
    quota = quotas(n, mix)
    planner = Planner(chunks, hashed_vectors([c.as_passage() for c in chunks]), seed=seed, styles=styles,
                      personas=personas, language=language)
    writer = Checker(None, planner, Similarity(None), planner.vectors)
    calls = prompt_tokens = completion_tokens = 0
    for kind in TYPES:
        for _ in range(quota[kind]):
            a = planner.next(kind)
            calls += 1 + CHECK_CALLS[kind]
            prompt_tokens += estimate_tokens(writer.write_prompt(a)) + _check_tokens(a)
            completion_tokens += ANSWER_TOKENS + CHECK_CALLS[kind] * VERDICT_TOKENS
    p, source = _price(ms.kind, ms.model, price)
    secs = seconds_per_call if seconds_per_call is not None else SECONDS_PER_CALL.get(ms.kind, DEFAULT_SECONDS)
    notes = ["calls already in the call cache cost nothing: a rerun with the same seed costs no call"]
    return Estimate(n, quota, documents, len(chunks), max_tries or default_max_tries(n), calls, prompt_tokens,
                    completion_tokens, name, p, source, secs, concurrency, notes)
