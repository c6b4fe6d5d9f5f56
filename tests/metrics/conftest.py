"""Fixtures for the judge-metric tests: the scripted fake OpenAI endpoint of tests/models and a
judge on it (the OpenAI-compatible backend behind a LimitedModel, no cache unless a test asks)."""

from __future__ import annotations

from typing import Any

import pytest

from assay.models import LimitedModel, Limiter, OpenAICompat, RetryPolicy
from tests.helpers.fake_openai_server import FakeOpenAI


def make_judge(fake: FakeOpenAI, cache: Any = None) -> LimitedModel:
    model = OpenAICompat.endpoint(fake.base_url, "fake-judge")
    limiter = Limiter(concurrency=8, retry=RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02))
    return LimitedModel(model, limiter, cache)


@pytest.fixture
def judge_factory() -> Any:
    """``judge_factory(fake, cache=None)``: a judge on the fake endpoint."""
    return make_judge


@pytest.fixture
async def judge(fake: FakeOpenAI) -> Any:
    j = make_judge(fake)
    yield j
    await j.aclose()


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
              "ASSAY_JUDGE_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "default-cache.sqlite"))
