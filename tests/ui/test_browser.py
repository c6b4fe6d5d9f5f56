"""The dashboard in a real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright).

``assay ui`` runs in a subprocess on a free loopback port over the session's store (two runs
whose responses, contexts and reasons carry script-injection payloads). The test clicks
runs → run → row → compare, searches, opens the report file, and checks that no payload ran:
no dialog fired and ``window.__xss`` stays undefined. Screenshots: tests/ui/artifacts/.

`make test` installs the browser (scripts/install_test_services.sh, Debian chromium).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.uihelpers import serve_ui

CHROMIUM = "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason="Debian's chromium is not installed: run `make test` (scripts/install_test_services.sh installs it)")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="playwright is not installed: run `make test` (scripts/install_test_services.sh installs it)")


@pytest.fixture(scope="module")
def server(ui_store: dict[str, Any]) -> Iterator[str]:
    yield from serve_ui(ui_store["path"])


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        yield b
        b.close()


def _no_xss(page: Any, dialogs: list[str]) -> None:
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert dialogs == []


def test_click_through_runs_run_row_compare(server: str, browser: Any, ui_store: dict[str, Any],
                                            artifacts: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    # runs
    page.goto(server + "/")
    assert page.locator("#runs tr").count() == 3                      # header + two runs
    assert page.get_by_text("baseline <b>", exact=True).is_visible()  # the name is text, not markup
    _no_xss(page, dialogs)

    # run
    page.get_by_role("link", name="baseline <b>").click()
    page.wait_for_url(f"**/runs/{ui_store['base']}")
    assert page.locator(".card").count() == 2
    assert page.locator("#card-ui_judge .big").inner_text() == f"{ui_store['base_result'].metrics['ui_judge']['mean']:.3f}"
    assert "smoke-test judge <script>" in page.locator(".note").inner_text()
    assert page.locator("#rows-table tr").count() == 41
    _no_xss(page, dialogs)
    page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)

    # sort by a score, then search
    page.get_by_role("link", name="ui_judge").first.click()
    first_scores = page.locator("#rows-table tr:nth-child(2) td").nth(5).inner_text()
    assert first_scores.startswith("5.000")                          # descending: the best first
    page.fill("#search", "question #21 ")
    page.press("#search", "Enter")
    page.wait_for_load_state()
    assert page.locator("#row-count").inner_text().startswith("1 row match")
    _no_xss(page, dialogs)

    # row
    page.locator("a.row-link").first.click()
    page.wait_for_url("**/rows/21")
    body = page.locator("main").inner_text()
    assert "<script>window.__xss=1;alert('xss')</script>" in body      # shown as text
    assert "<img src=x onerror=" in body
    assert page.locator("a[href^='javascript:']").count() == 0
    assert page.locator("a[href='https://docs.example.com/21']").count() == 1
    _no_xss(page, dialogs)

    # compare: tick both runs on the runs page
    page.goto(server + "/")
    boxes = page.locator("#runs input[type=checkbox]")
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.click("#compare-btn")
    page.wait_for_url("**/compare?runs=*")
    assert page.locator("#compare-metrics tr").count() == 3
    page.select_option("select[name=output]", "ui_judge")
    page.get_by_role("button", name="show").click()
    page.wait_for_url("**output=ui_judge*")
    worse = page.locator("table.worse-rows tr")
    assert worse.count() > 1
    assert "reason <img src=x onerror=" in page.locator("table.worse-rows").inner_text()
    _no_xss(page, dialogs)
    page.screenshot(path=str(artifacts / "compare.png"), full_page=True)
    page.locator("a.worse-row-link").first.click()
    page.wait_for_url("**/rows/*")
    _no_xss(page, dialogs)

    # trend
    page.goto(server + "/trend?output=ui_judge")
    assert page.locator("svg polyline").count() == 1
    _no_xss(page, dialogs)
    assert errors == []
    page.close()


def test_report_opens_offline_and_runs_nothing(browser: Any, ui_store: dict[str, Any], tmp_path: Path,
                                               artifacts: Path) -> None:
    from assay.ui.report import write_report

    path = write_report(ui_store["store"], ui_store["base"], tmp_path / "report.html", max_rows=20, worst=3)
    context = browser.new_context(offline=True)
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    assert page.locator(".card").count() == 2
    page.locator("details summary").first.click()                  # open a worst row: inputs and reasons
    assert "<script>window.__xss=1" in page.locator("details").first.inner_text()
    _no_xss(page, dialogs)
    assert requests == [path.as_uri()]                              # nothing else was fetched
    page.screenshot(path=str(artifacts / "report.png"), full_page=False)
    context.close()
