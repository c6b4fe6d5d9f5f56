"""Helpers shared by the simulator tests: a scripted simulating model and a small target.

A module of its own (not conftest) so that test files import it by a name no other folder uses."""

from __future__ import annotations

from typing import Any

from assay.models.base import Generation, TokenUsage


class ScriptedModel:
    """A deterministic stand-in for the simulating model: answers from a function of the prompt."""

    def __init__(self, reply: Any = None, name: str = "scripted"):
        self.name = name
        self.reply = reply or (lambda messages: f"follow-up {len(messages[-1]['content']) % 97}")
        self.prompts: list[list[dict[str, Any]]] = []

    async def generate(self, messages: Any, *, max_tokens: int | None = None, temperature: float | None = 0.0,
                       response_format: Any = None, logprobs: bool = False, top_logprobs: int | None = None) -> Generation:
        self.prompts.append([dict(m) for m in messages])
        return Generation(text=self.reply(messages), usage=TokenUsage(10, 5))


def echo_app(query: str, history: list | None = None, contexts: list | None = None) -> dict:
    """A small sync target: refuses, says how many messages came before, and cites a policy page."""
    docs = " | ".join((d.get("content") or "")[:40] for d in contexts or [])
    return {"response": f"[{len(history or [])}] I will not help with: {query[:40]}" + (f" (docs: {docs})" if docs else ""),
            "contexts": [{"content": "Our content policy.", "doc_uri": "kb://policy"}]}
