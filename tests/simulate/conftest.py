"""Fixtures for the simulator tests: a scripted simulating model, small targets, the fake
OpenAI-compatible endpoint of tests/models, and the embedded model when it is installed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from fake_openai_server import FakeOpenAI  # noqa: E402

from assay.models.base import Generation, TokenUsage  # noqa: E402


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


@pytest.fixture
def scripted() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def fake() -> Any:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No real key, and a private call cache for every test."""
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
              "ASSAY_JUDGE_API_KEY", "ASSAY_TARGET_API_KEY", "ASSAY_JUDGE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("ASSAY_STORE", "off")
