"""Hostile values in dashboard addresses (numbers past 64 bits, negative rows, text where a
number goes): a 404 or a 400 with one line, never a 500, never a traceback in the server log."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from assay.ui.server import create_app
from tests.helpers.uihelpers import serve_ui

HUGE = "9" * 40
VALUES = [HUGE, "-" + HUGE, "9223372036854775808", "-9223372036854775809", "9223372036854775807", "-1", "0",
          "1e309", "nan", "inf", "²", "abc", "%00", "x" * 3000]

# every route that takes a value from the address; {run} is a stored run, {v} the hostile value
ROUTES = ["/?page={v}", "/?per={v}", "/?since={v}", "/api/runs?page={v}", "/api/runs?per_page={v}",
          "/api/runs?until={v}", "/runs/{run}?page={v}", "/runs/{run}?per={v}", "/runs/{run}?sort={v}",
          "/runs/{run}?fo={v}", "/runs/{run}?fr={v}", "/runs/{run}?q={v}", "/runs/{run}?dir={v}",
          "/api/runs/{run}/rows?page={v}", "/api/runs/{run}/rows?per_page={v}", "/runs/{run}/rows/{v}",
          "/api/runs/{run}/rows/{v}", "/runs/{v}", "/api/runs/{v}", "/api/runs/{v}/rows", "/api/runs/{v}/histograms",
          "/compare?runs={run}&runs={v}", "/compare?runs={run}&runs={run}&output={v}", "/api/compare?runs={v}&runs={v}",
          "/api/compare/worse?base={run}&other={run}&output=f1_score&limit={v}",
          "/api/compare/worse?base={v}&other={run}&output=f1_score", "/trend?output={v}", "/api/trend?output={v}",
          "/bench?limit={v}", "/api/bench?limit={v}", "/bench/compare?a={v}&b={v}", "/api/bench/compare?a={v}&b={v}",
          "/bench/track?track=t&limit={v}", "/api/bench/track?track={v}&limit={v}", "/bench/leaderboard?sort={v}",
          "/api/bench/leaderboard?runs={v}", "/api/bench/leaderboard?kind={v}", "/bench/{v}", "/api/bench/{v}"]


@pytest.fixture(scope="module")
def client(ui_store: dict[str, Any]) -> TestClient:
    return TestClient(create_app(ui_store["store"]), base_url="http://127.0.0.1", raise_server_exceptions=False)


def _url(route: str, run: str, value: str) -> str:
    return route.replace("{run}", run).replace("{v}", quote(value, safe=""))


def test_no_address_value_gives_a_server_error(client: TestClient, ui_store: dict[str, Any]) -> None:
    failed = []
    for route in ROUTES:
        for v in VALUES:
            r = client.get(_url(route, ui_store["base"], v))
            if r.status_code >= 500:
                failed.append((r.status_code, route, v[:20]))
    assert not failed, failed


def test_huge_and_negative_numbers_are_not_found_or_bad_requests(client: TestClient, ui_store: dict[str, Any]) -> None:
    run = ui_store["base"]
    for v in (HUGE, "-" + HUGE, "9223372036854775808", "-1"):
        r = client.get(f"/api/runs/{run}/rows/{v}")
        assert r.status_code == 404 and f"has no row {v}" in r.json()["error"], (v, r.text)
        r = client.get(f"/runs/{run}/rows/{v}")
        assert r.status_code == 404 and "has no row" in r.text, v
        assert client.get(f"/api/bench/{v}").status_code == 404
    for url in (f"/api/runs?page={HUGE}", f"/api/runs/{run}/rows?page={HUGE}", "/api/runs?page=abc",
                f"/api/bench/track?track=t&limit={HUGE}"):
        r = client.get(url)
        assert r.status_code == 400, (url, r.status_code, r.text)
        error = r.json()["error"]
        assert error.startswith("bad value for ") and "\n" not in error, error
    r = client.get(f"/?page={HUGE}")
    assert r.status_code == 400 and "bad value for page" in r.text and "text/html" in r.headers["content-type"]
    # the largest page allowed still answers, with no rows
    assert client.get("/api/runs", params={"page": 1_000_000}).json()["runs"] == []


@pytest.fixture(scope="module")
def served(ui_store: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    log = tmp_path_factory.mktemp("ui-log") / "server.log"
    for base in serve_ui(ui_store["path"], log=log):
        yield base, log


def test_the_server_log_has_no_traceback(served: Any, ui_store: dict[str, Any]) -> None:
    base, log = served
    run = ui_store["base"]
    codes = {}
    for path in (f"/runs/{run}/rows/{HUGE}", f"/api/runs/{run}/rows/-{HUGE}", f"/?page={HUGE}",
                 f"/api/runs/{run}/rows?page=9223372036854775808", f"/bench/{HUGE}", "/api/bench/track?track=t&limit=1e309",
                 f"/api/bench/compare?a={HUGE}&b={HUGE}"):
        try:
            with urllib.request.urlopen(base + path, timeout=30) as r:
                codes[path] = r.status
        except urllib.error.HTTPError as exc:
            codes[path] = exc.code
    assert all(c in (400, 404) for c in codes.values()), codes
    text = Path(log).read_text()
    assert "Traceback" not in text and "Exception" not in text, text[-3000:]
