"""Fixtures for the model-layer tests: a dead port, no real keys (the scripted fake endpoint,
``fake``, is in tests/conftest.py)."""

from __future__ import annotations

import socket
from typing import Any

import pytest


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on (connection refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No real credential or user cache leaks into these tests."""
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
              "OPENAI_API_VERSION", "AZURE_OPENAI_API_VERSION", "ASSAY_JUDGE_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "default-cache.sqlite"))

