"""The run page and the report say who scored each judge metric and how good it was measured to be."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

import assay  # noqa: E402
from assay.store import Store  # noqa: E402
from assay.ui.server import create_app  # noqa: E402

ROWS = [{"query": "Who designed the bridge?", "response": "Marta Lind designed it in 1968.",
         "context": "The bridge was designed by Marta Lind and opened in 1968."}]


def test_run_page_lists_the_scorers_with_their_figures_and_the_skipped_metrics(tmp_path, monkeypatch):
    monkeypatch.delenv("ASSAY_JUDGE", raising=False)
    st = Store(str(tmp_path / "s.db"))
    res = assay.evaluate(ROWS, metrics=["groundedness", "fluency"], store=st, workers=1)
    html = TestClient(create_app(st), base_url="http://127.0.0.1").get(f"/runs/{res.run['run_id']}").text
    facts = html.split("scored by")[1]
    assert "groundedness</span>: embedded support scorer v2, AUC 0.95" in facts
    assert "measured AUC 0.95 [0.93–0.97], context swap control 0.97" in facts
    assert "fluency</span>: needs a judge" in facts and "skipped on every row: needs a judge: --judge" in facts
    st.close()
