"""Fixtures for the simulator tests: a scripted simulating model, small targets, the fake
OpenAI-compatible endpoint of tests/models, and the embedded model when it is installed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.simhelpers import ScriptedModel


@pytest.fixture
def scripted() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No real key, and a private call cache for every test."""
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
              "ASSAY_JUDGE_API_KEY", "ASSAY_TARGET_API_KEY", "ASSAY_JUDGE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("ASSAY_STORE", "off")
