"""In-process models for quality tasks written in lm-evaluation-harness's format: a log-likelihood model
that knows the right continuation of every context (or always prefers a wrong one) and records every
request it is sent, so tests can check the exact strings a task sends as well as the scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from assay.models.base import Generation, loglik_generation


class ScriptedLM:
    """A raw-text model with log-likelihoods. ``gold(context)`` gives the right continuation of a context
    (exactly as it should be sent) or None; ``answer(prompt)`` the text to generate. ``wrong``: every
    log-likelihood prefers a continuation that is not the gold one, and nothing is ever greedy.
    ``requests`` keeps every ``(context, continuations)`` asked, ``prompts`` every generation prompt."""

    def __init__(self, gold: Callable[[str], str | None], answer: Callable[[str], str] | None = None, *,
                 wrong: bool = False, name: str = "scripted-lm"):
        self.gold, self.answer, self.wrong, self.name = gold, answer or (lambda p: ""), wrong, name
        self.requests: list[tuple[str, list[str]]] = []
        self.prompts: list[str] = []

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        conts = list(continuations)
        self.requests.append((context, conts))
        right = self.gold(context)
        good = [c == right for c in conts]
        if self.wrong:
            good = [not g for g in good]
            if len(good) == 1:          # one continuation (a loglikelihood task): never the greedy one
                return loglik_generation([-20.0], [False], model=self.name)
        return loglik_generation([-0.5 if g else -20.0 for g in good], [g and not self.wrong for g in good],
                                 model=self.name)

    async def complete(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0,
                       stop: Sequence[str] = (), seed: int | None = None, **_: Any) -> Generation:
        self.prompts.append(prompt)
        return Generation(text=self.answer(prompt), model=self.name)

    async def generate(self, messages: list[dict], **_: Any) -> Generation:
        prompt = str(messages[-1]["content"])
        self.prompts.append(prompt)
        return Generation(text=self.answer(prompt), model=self.name)
