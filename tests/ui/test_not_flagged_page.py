"""The dashboard's run page and the HTML report of a safety run scored with no judge (issue 28,
item 5): the metric card counts the rows not flagged, gives the defect rate as a lower bound and
no pass rate, and each row's badge reads "not flagged", never "pass"."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

import assay  # noqa: E402
from assay.store import Store  # noqa: E402
from assay.ui.report import render_report  # noqa: E402
from assay.ui.server import create_app  # noqa: E402
from tests.helpers.harmful_answers import FLAGGED_THREAT, harmful_rows  # noqa: E402


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    st = Store(str(tmp_path_factory.mktemp("nf") / "s.db"))
    rows = harmful_rows()[:6] + [{"id": "t", "query": "q", "response": FLAGGED_THREAT}]
    res = assay.evaluate(rows, metrics=["violence"], store=st, workers=1, name="no judge")
    yield st, res.run["run_id"]
    st.close()


def card(html: str) -> str:
    return html.split('id="card-violence"', 1)[1].split("</dl>", 1)[0]


def test_run_page_card_and_badges(stored, monkeypatch):
    st, run_id = stored
    html = TestClient(create_app(st), base_url="http://127.0.0.1").get(f"/runs/{run_id}").text
    c = card(html)
    assert "<dt>not flagged</dt><dd>6 of 7 rows" in c
    assert "≥ 14.3% (lower bound: rules, no judge)" in c        # 1 of 7 flagged: at least that
    assert "<dt>pass rate</dt><dd>0.0% (1 judged; 6 not flagged)</dd>" in c
    assert '<span class="badge not-flagged">not flagged</span>' in html
    assert '<span class="badge pass">' not in html


def test_report_card_too(stored):
    st, run_id = stored
    c = card(render_report(st, run_id))
    assert "<dt>not flagged</dt><dd>6 of 7 rows" in c and "lower bound: rules, no judge" in c


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    st = Store(str(tmp_path_factory.mktemp("nf2") / "s.db"))
    rows = harmful_rows()[:6] + [{"id": "t", "query": "q", "response": FLAGGED_THREAT}]
    a = assay.evaluate(rows, metrics=["violence"], store=st, workers=1, name="no judge")
    b = assay.evaluate(rows, metrics=["violence"], store=st, workers=1, name="no judge")
    yield st, a.run["run_id"], b.run["run_id"]
    st.close()


def test_compare_and_trend_pages_mark_the_bounds(two_runs):
    """The compare and trend pages show the rule-scored defect rate as a lower bound with the rows
    not flagged, as the run page does (before: a bare "defects 14.3%")."""
    st, a, b = two_runs
    c = TestClient(create_app(st), base_url="http://127.0.0.1")
    html = c.get("/compare", params=[("runs", a), ("runs", b)]).text
    assert html.count("≥ 14.3% (lower bound: rules, no judge)") == 2, html
    assert "6 not flagged" in html
    trend = c.get("/trend", params={"output": "violence"}).text
    assert trend.count("≥ 14.3% (lower bound: rules, no judge)") == 2
    assert trend.count("6 not flagged") == 2


def test_the_cli_compare_marks_the_bounds(two_runs):
    from typer.testing import CliRunner

    from assay.cli.main import app

    st, a, b = two_runs
    res = CliRunner().invoke(app, ["compare", a, b, "--store", st.url, "--worst", "0"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "not flagged" in res.output and "lower bound" in res.output
