"""The dashboard's leaderboard (`/bench/leaderboard` and `/api/bench/leaderboard`): through
FastAPI's TestClient, and in a real headless Chromium with a screenshot, over the leaderboard
tests' store plus a model whose name is a script-injection payload."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from fastapi.testclient import TestClient

from assay.ui.server import create_app
from tests.helpers.leaderboard_data import build_board_store
from tests.helpers.uihelpers import XSS_SCRIPT, assert_escaped, serve_ui

HOSTILE = f"evil {XSS_SCRIPT}"
CHROMIUM = "/usr/bin/chromium"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def lb_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    info = build_board_store(tmp_path_factory.mktemp("lb-ui"), hostile=HOSTILE)
    before = os.environ.get("ASSAY_PRICES")
    os.environ["ASSAY_PRICES"] = str(info["prices"])        # the page prices with the table in force
    yield info
    if before is None:
        os.environ.pop("ASSAY_PRICES", None)
    else:
        os.environ["ASSAY_PRICES"] = before
    info["store"].close()
    sys.path.remove(info["syspath"])


@pytest.fixture(scope="module")
def client(lb_store: dict[str, Any]) -> TestClient:
    return TestClient(create_app(lb_store["store"]), base_url="http://127.0.0.1")


def _rows(html: str) -> list[str]:
    """The models of the main table, in order (from each row's data-model attribute)."""
    import html as H
    import re

    table = html.split('<table id="leaderboard">', 1)[1].split("</table>", 1)[0]
    return [H.unescape(m) for m in re.findall(r'<tr data-model="([^"]*)"', table)]


def test_the_page_has_the_table_charts_and_notes_escaped(client: TestClient, lb_store: dict[str, Any]) -> None:
    n = lb_store["names"]
    r = client.get("/bench/leaderboard")
    assert r.status_code == 200 and "default-src 'none'" in r.headers["content-security-policy"]
    html = r.text
    assert_escaped(html)
    assert '<a href="/bench/leaderboard">leaderboard</a>' in html                 # in the nav
    assert "evil &lt;script&gt;" in html and XSS_SCRIPT not in html
    # sorted by the quality index: right (100), then half and the hostile copy of half's result (50, by name)
    assert _rows(html)[:3] == [n["right"], HOSTILE, n["half"]]
    assert "—" in html
    # three charts, valid SVG, one point per model with both figures
    for name in ("quality-cost", "quality-latency", "quality-throughput"):
        svg = html.split(f'<figure data-chart="{name}">', 1)[1].split("</svg>", 1)[0] + "</svg>"
        root = ElementTree.fromstring(svg)
        labels = sorted(t.text for t in root.iter(f"{SVG}text") if t.get("class") == "label")
        assert len(labels) == 3, (name, labels)                                  # right, half, hostile
        assert any(x.startswith("evil <script>") for x in labels)               # text, not markup
    assert "Shown apart" in html and "the metric version differs (2 vs 1)" in html
    assert 'id="leaderboard-tasks"' in html and "quality:arithmetic@2" in html


def test_sort_filter_and_the_json(client: TestClient, lb_store: dict[str, Any]) -> None:
    n = lb_store["names"]
    by_cost = _rows(client.get("/bench/leaderboard", params={"sort": "cost_index"}).text)
    assert by_cost == ["slowpoke", "gpt-4o-mini", n["half"], HOSTILE, n["right"], n["wrong"]]   # missing last
    desc = _rows(client.get("/bench/leaderboard", params={"sort": "cost_index", "dir": "desc"}).text)
    assert desc[:2] == [n["right"], HOSTILE] and desc[-1] == n["wrong"]
    only = _rows(client.get("/bench/leaderboard", params={"filter": "evil"}).text)
    assert only == [HOSTILE]
    api = client.get("/api/bench/leaderboard", params={"sort": "latency_index"}).json()
    rows = [x for x in api["rows"] if x["values"]["latency_index"] is not None]
    assert [x["values"]["latency_index"] for x in rows] == sorted(x["values"]["latency_index"] for x in rows)
    assert api["rows"][-1]["values"]["latency_index"] is None
    assert set(api["tradeoffs"]) == {"quality-cost", "quality-latency", "quality-throughput"}
    assert any(p["model"] == HOSTILE for p in api["tradeoffs"]["quality-cost"]["points"])
    bad = client.get("/api/bench/leaderboard", params={"sort": "nope"})
    assert bad.status_code == 400 and "no column 'nope'" in bad.json()["error"]
    assert client.get("/bench/leaderboard", params={"kind": "speed"}).status_code == 400


def test_an_empty_store_says_so(tmp_path: Path) -> None:
    from assay.store import Store

    st = Store(str(tmp_path / "empty.db"))
    html = TestClient(create_app(st), base_url="http://127.0.0.1").get("/bench/leaderboard").text
    assert 'id="leaderboard-empty"' in html
    st.close()


# -- in the browser ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lb_server(lb_store: dict[str, Any]) -> Iterator[str]:
    yield from serve_ui(lb_store["path"])


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed: run `make test`")
def test_the_leaderboard_in_a_browser(lb_server: str, lb_store: dict[str, Any], artifacts: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: run `make test`")
    n = lb_store["names"]
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(lb_server + "/bench")
        page.get_by_role("link", name="leaderboard").click()
        page.wait_for_url("**/bench/leaderboard")
        cells = page.locator("#leaderboard td.model")
        assert cells.first.inner_text() == n["right"]
        assert page.get_by_text(HOSTILE, exact=True).first.is_visible()         # the name is text
        assert page.locator("#leaderboard-charts svg").count() == 3
        assert page.locator("#leaderboard-charts .pareto-front").count() >= 1
        page.screenshot(path=str(artifacts / "leaderboard.png"), full_page=True)
        # sort by clicking a header: the cost index, cheapest first
        page.locator("#leaderboard th a", has_text="cost index").click()
        page.wait_for_url("**sort=cost_index**")
        assert cells.first.inner_text() == "slowpoke"
        assert page.evaluate("typeof window.__xss") == "undefined" and dialogs == []
        browser.close()


def test_charts_escape_names_use_a_log_scale_for_wide_ranges_and_say_when_empty() -> None:
    from assay.ui.leaderboard_charts import svg_file, tradeoff_chart

    data = {"name": "quality-cost", "x": "cost_index", "y": "quality_index", "x_better": "low",
            "points": [{"model": HOSTILE, "x": 0.05, "y": 0.4, "pareto": True},
                       {"model": "big", "x": 30.0, "y": 0.9, "pareto": True},
                       {"model": "meh", "x": 40.0, "y": 0.5, "pareto": False}]}
    svg = str(tradeoff_chart(data))
    assert XSS_SCRIPT not in svg and "&lt;script&gt;" in svg
    root = ElementTree.fromstring(svg)
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert any("log scale" in t for t in texts)                                  # 0.05 to 40: a factor of 800
    assert len(root.findall(f".//{SVG}polyline[@class='pareto-front']")) == 1
    assert len(root.findall(f".//{SVG}g[@class='point pareto']")) == 2
    narrow = ElementTree.fromstring(str(tradeoff_chart({**data, "points": data["points"][1:]})))
    assert not any("log scale" in (t.text or "") for t in narrow.iter(f"{SVG}text"))   # 30 to 40
    empty = tradeoff_chart({**data, "points": []})
    assert "no model has both a quality index and a cost index" in str(empty)
    ElementTree.fromstring(svg_file(empty).split("?>", 1)[1])                     # still a valid SVG file
