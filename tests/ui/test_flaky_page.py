"""The dashboard's run page of a run with repeats (issue 32): the metric card gives the repeats, the
flaky rows and the pass rate's interval over rows; the "Flaky rows" section lists exactly the rows
the planted flaky judge answered both ways, each repeat with its score and reason; a run without
repeats has no such section."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

import assay  # noqa: E402
from assay.store import Store  # noqa: E402
from assay.ui.server import create_app  # noqa: E402
from tests.helpers.flaky_judge import FlakyJudge, rag_rows  # noqa: E402


def test_run_page_lists_the_flaky_rows(fake: Any, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache.sqlite"))
    fake.default = FlakyJudge()
    st = Store(str(tmp_path / "s.db"))
    judge = f"{fake.base_url}#fake-judge"
    rep = assay.evaluate(rag_rows(4, 2, 1), metrics="groundedness", judge=judge, store=st, repeats=4)
    plain = assay.evaluate(rag_rows(4, 2, 1), metrics="groundedness", judge=judge, store=st)
    client = TestClient(create_app(st), base_url="http://127.0.0.1")

    html = client.get(f"/runs/{rep.run['run_id']}").text
    card = html.split('id="card-groundedness"', 1)[1].split("</dl>", 1)[0]
    assert "<dt>repeats</dt>" in card and "4 a row" in card and ">2 flaky</a> (28.6%)" in card
    assert "1 stable fail" in card and "pass rate 95% CI over rows" in card
    table = html.split('id="flaky-table"', 1)[1].split("</table>", 1)[0]
    assert table.count('class="row-link"') == 2 and "f0" in table and "f1" in table and "g0" not in table
    assert "#0 " in table and "#3 " in table and "scored 2" in table and "scored 4" in table

    other = client.get(f"/runs/{plain.run['run_id']}").text
    assert 'id="flaky-table"' not in other and "<dt>repeats</dt>" not in other
    st.close()
