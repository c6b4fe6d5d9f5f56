"""Suite-wide: runs are saved to a store in a temporary folder, never the working directory's."""

from __future__ import annotations

import os
import tempfile

import pytest


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
