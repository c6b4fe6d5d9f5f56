"""Suite-wide: runs are saved to a store in a temporary folder, never the working directory's;
the scripted fake OpenAI endpoint of tests/models (``fake``) for fault injection anywhere."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

# appended, not prepended: each test folder's own conftest must stay first for `from conftest import`
sys.path.append(str(Path(__file__).resolve().parent / "models"))

from fake_openai_server import FakeOpenAI  # noqa: E402


@pytest.fixture
def fake() -> Any:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True, scope="session")
def _session_store():
    with tempfile.TemporaryDirectory(prefix="assay-store-") as d:
        old = os.environ.get("ASSAY_STORE")
        os.environ["ASSAY_STORE"] = os.path.join(d, "assay.db")
        yield
        if old is None:
            os.environ.pop("ASSAY_STORE", None)
        else:
            os.environ["ASSAY_STORE"] = old


@pytest.fixture(autouse=True, scope="session")
def _shipped_prices():
    """Prices come from the table shipped with assay, not a developer's $ASSAY_PRICES."""
    old = os.environ.pop("ASSAY_PRICES", None)
    yield
    if old is not None:
        os.environ["ASSAY_PRICES"] = old
