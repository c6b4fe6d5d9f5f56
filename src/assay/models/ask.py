"""Ask a judge for a score: generate, parse, re-ask once on unreadable output.

The one place where SPEC §7's "one retry on unparseable output, then an ``error``
status with the raw text kept" lives, so that every judge metric behaves the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from assay.models.base import ChatModel, Generation, Messages, TokenUsage
from assay.models.parse import (LogprobScore, Scale, parse_score, score_from_logprobs,
                                score_from_token_logprobs)

REASK = ("Your previous answer could not be read. Answer again with only a JSON object of the form "
         '{{"score": <{scale}>, "reason": "<one sentence>"}} and nothing else.')


@dataclass
class ScoredAnswer:
    """What a judge said. ``ok`` false: unreadable twice; ``texts`` keeps every raw answer."""

    value: Any
    reason: str | None
    ok: bool
    method: str
    texts: list[str] = field(default_factory=list)
    logprob: LogprobScore | None = None
    generations: list[Generation] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.texts[-1] if self.texts else ""

    @property
    def cached(self) -> bool:
        return bool(self.generations) and all(g.cached for g in self.generations)

    @property
    def usage(self) -> TokenUsage:
        """Tokens paid for (cache hits cost nothing)."""
        u = TokenUsage()
        for g in self.generations:
            if not g.cached:
                u.input_tokens += g.usage.input_tokens
                u.output_tokens += g.usage.output_tokens
        return u


async def ask_score(model: ChatModel, messages: Messages, scale: "Scale | str" = "1-5", *,
                    max_tokens: int | None = None, temperature: float | None = 0.0, json_mode: bool = True,
                    logprobs: bool = False, top_logprobs: int | None = None, reask: bool = True,
                    response_format: Mapping[str, Any] | None = None) -> ScoredAnswer:
    """Generate, parse with :func:`parse_score`, and re-ask once if the answer is unreadable.

    With ``logprobs``, the probability-weighted score (expected value / P(yes)) of the
    first answer is in ``.logprob``: from the first token, else from the first position
    whose token is a scale value. Model errors propagate (the metric records them).
    """
    sc = Scale.of(scale)
    rf = response_format if response_format is not None else ({"type": "json_object"} if json_mode else None)
    kw = dict(max_tokens=max_tokens, temperature=temperature, response_format=rf,
              logprobs=logprobs, top_logprobs=top_logprobs)
    gen = await model.generate(messages, **kw)
    out = ScoredAnswer(None, None, False, "none", texts=[gen.text], generations=[gen])
    if logprobs:
        out.logprob = score_from_logprobs(gen.logprobs, sc) or score_from_token_logprobs(gen.token_logprobs, sc)
    res = parse_score(gen.text, sc)
    if not res.ok and reask:
        follow = list(messages) + [{"role": "assistant", "content": gen.text},
                                   {"role": "user", "content": REASK.format(scale=_describe(sc))}]
        gen2 = await model.generate(follow, **{**kw, "logprobs": False, "top_logprobs": None})
        out.texts.append(gen2.text)
        out.generations.append(gen2)
        res = parse_score(gen2.text, sc)
    out.value, out.reason, out.ok, out.method = res[0], res[1], res[2], res.method
    return out


def _describe(sc: Scale) -> str:
    if sc.kind == "yesno":
        return '"yes" or "no"'
    if sc.kind == "int":
        return f"an integer from {int(sc.lo)} to {int(sc.hi)}"
    return f"a number from {sc.lo} to {sc.hi}"
