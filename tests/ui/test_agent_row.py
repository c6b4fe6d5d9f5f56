"""An agent row on the dashboard's row page: the turn as a transcript, escaped.

The rows of tests/fixtures/agents/azure_agent.jsonl (Azure's agent shape) plus one written here
whose tool result, arguments, definitions and answer carry script-injection payloads, evaluated
with the code agent metrics into a temporary store and served by ``assay ui``. The page is
checked as HTML (always) and in headless Chromium (when Debian's chromium is installed).
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import assay
from assay.store import Store
from assay.ui.render import PREVIEW_CHARS, agent_view
from tests.helpers.uihelpers import XSS_IMG, XSS_SCRIPT, XSS_SVG, assert_escaped, serve_ui, tags

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agents" / "azure_agent.jsonl"
CHROMIUM = "/usr/bin/chromium"
METRICS = ["tool_call_precision", "tool_call_recall", "tool_call_exact_match", "tool_errors", "agent_steps"]
LONG_END = "END-OF-THE-LONG-INVENTORY"

# An agent turn in Azure's shape whose tool result is long and hostile; its second expected
# call (send_invoice) is never made.
HOSTILE = {
    "query": [{"role": "system", "content": [{"type": "text", "text": f"You run the warehouse desk. {XSS_SVG}"}]},
              {"role": "user", "content": [{"type": "text", "text": "How many ladders are left in bay 7?"}]}],
    "response": [
        {"role": "assistant", "content": [{"type": "tool_call", "tool_call_id": "call_inv1", "name": "count_stock",
                                           "arguments": {"bay": 7, "item": f"ladder {XSS_IMG}"}}]},
        {"role": "tool", "tool_call_id": "call_inv1", "content": [{"type": "tool_result", "tool_result":
            f"bay 7: 12 ladders {XSS_SCRIPT} {XSS_IMG} " + "shelf row ok; " * 200 + LONG_END}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"Bay 7 holds 12 ladders. {XSS_SCRIPT}"}]},
    ],
    "tool_definitions": [{"name": "count_stock", "description": f"Units of an item in a bay. {XSS_IMG}",
                          "parameters": {"type": "object", "properties": {"bay": {"type": "integer"},
                                                                          "item": {"type": "string"}}}},
                         {"name": "send_invoice", "description": "Email an invoice.",
                          "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}],
    "expected_tool_calls": [{"name": "count_stock", "arguments": {"bay": 7}},
                            {"name": "send_invoice", "arguments": {"to": "ops@example.com"}}],
}
N_FIXTURE = sum(1 for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip())
BOOKING, HOSTILE_ROW = 1, N_FIXTURE       # the fixture's failed booking; the row written here


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("agent-ui")
    data = d / "agents.jsonl"
    data.write_text(FIXTURE.read_text(encoding="utf-8").rstrip("\n") + "\n" + json.dumps(HOSTILE) + "\n",
                    encoding="utf-8")
    st = Store(str(d / "store.db"))
    res = assay.evaluate(str(data), metrics=METRICS, name="agents", store=st, workers=1)
    yield {"path": str(d / "store.db"), "run": res.run["run_id"], "result": res}
    st.close()


@pytest.fixture(scope="module")
def server(agent_run: dict[str, Any]) -> Iterator[str]:
    yield from serve_ui(agent_run["path"])


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode("utf-8")


def test_rows_in_memory_keep_steps_as_messages_like_the_store(agent_run: dict[str, Any]) -> None:
    rows = agent_run["result"].rows
    steps = rows[BOOKING]["inputs.steps"]
    assert all(isinstance(m, dict) for m in steps)          # not Message objects
    assert [m["role"] for m in steps] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert steps[2]["tool_calls"][0]["name"] == "book_room"


def test_row_page_html_shows_the_turn_escaped(server: str, agent_run: dict[str, Any]) -> None:
    html = _get(f"{server}/runs/{agent_run['run']}/rows/{BOOKING}")
    assert 'id="agent-turn"' in html
    for text in ("search_rooms", "book_room", "Ana Ribeiro", "PRT-311", "payment service unavailable",
                 "the booking failed because the payment service is down"):
        assert text in html, text
    assert html.count('class="tool-error"') == 1              # only the failed call is marked
    assert html.count("badge pass\">met</span>") == 2
    assert "inputs.steps" not in html and "&#34;tool_call_id&#34;" not in html   # no raw JSON blocks of them

    hostile = _get(f"{server}/runs/{agent_run['run']}/rows/{HOSTILE_ROW}")
    assert_escaped(hostile)
    assert "12 ladders &lt;script&gt;window.__xss=1" in hostile
    assert not any(tag in ("script", "img", "svg") for tag, _ in tags(hostile.split('id="agent-turn"')[1]))
    assert hostile.count('badge fail">missed</span>') == 1 and 'badge pass">met</span>' in hostile


def test_report_shows_the_worst_agent_rows_as_transcripts(agent_run: dict[str, Any]) -> None:
    from assay.ui.report import render_report

    st = Store(agent_run["path"])
    try:
        html = render_report(st, agent_run["run"], worst=5)
    finally:
        st.close()
    assert_escaped(html)
    assert 'id="agent-turn"' in html and 'class="tool-error"' in html
    assert "payment service unavailable" in html and "12 ladders &lt;script&gt;" in html


def test_agent_view_pairs_calls_results_errors_and_expectations() -> None:
    """Without steps (Azure's standalone tool_calls column), the calls are the transcript."""
    inputs = {"inputs.query": "Weather in Oslo?", "inputs.response": "Snowing.",
              "inputs.tool_calls": [{"type": "tool_call", "tool_call_id": "c1", "name": "get_forecast",
                                     "arguments": {"city": "Oslo"}, "result": "snow"},
                                    {"type": "tool_call", "name": "get_alerts", "arguments": "region=north",
                                     "error": "timeout after 10 s"}],
              "inputs.expected_tool_calls": [{"name": "get_forecast", "arguments": {"city": "Oslo"}},
                                             {"name": "get_radar"}]}
    v = agent_view(inputs)
    calls = [it for it in v["steps"] if it["kind"] == "call"]
    assert [c["name"] for c in calls] == ["get_forecast", "get_alerts"]
    assert calls[0]["result"] == "snow" and calls[0]["expected"] == [1] and not calls[0]["unexpected"]
    assert calls[1]["error"] == "timeout after 10 s" and calls[1]["arguments"] == "region=north"
    assert calls[1]["unexpected"]
    assert [e["met"] for e in v["expected"]] == [True, False] and v["expected"][0]["by"] == 1
    assert v["extra"] == ["get_alerts(region=north)"]
    assert v["steps"][-1] == {"kind": "final", "text": "Snowing."}
    assert agent_view({"inputs.query": "hi", "inputs.response": "hello"}) is None


def test_agent_view_reads_openai_shaped_calls_in_steps() -> None:
    """Steps whose assistant messages carry OpenAI's tool_calls (JSON text arguments)."""
    steps = [{"role": "assistant", "tool_calls": [{"id": "call_9", "type": "function",
                                                   "function": {"name": "lookup_order",
                                                                "arguments": "{\"order_number\": \"NW-1\"}"}}]},
             {"role": "tool", "tool_call_id": "call_9", "content": "{\"status\": \"lost\"}"},
             {"role": "assistant", "content": "Your order is lost."}]
    v = agent_view({"inputs.query": "Where is NW-1?", "inputs.steps": steps})
    call, final = v["steps"]
    assert call["name"] == "lookup_order" and json.loads(call["arguments"]) == {"order_number": "NW-1"}
    assert json.loads(call["result"]) == {"status": "lost"} and call["id"] == "call_9"
    assert final == {"kind": "final", "text": "Your order is lost."}


# -- in a real browser ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed: run `make test` (scripts/install_test_services.sh installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: run `make test`")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        yield b
        b.close()


def test_row_page_in_the_browser(server: str, browser: Any, agent_run: dict[str, Any], artifacts: Path) -> None:
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

    page.goto(f"{server}/runs/{agent_run['run']}/rows/{BOOKING}")
    steps = page.locator("#agent-steps")
    names = page.locator("#agent-steps .tool-name")
    assert names.all_inner_texts() == ["search_rooms", "book_room"]
    assert page.locator("#call-2 .arguments").is_visible()
    assert '"guest": "Ana Ribeiro"' in page.locator("#call-2 .arguments").inner_text()
    assert '"room_id": "PRT-311"' in page.locator("#call-1 .tool-result").inner_text()
    err = page.locator("#call-2 .tool-error")
    assert err.is_visible() and "error" in err.inner_text() and "payment service unavailable" in err.inner_text()
    assert page.locator("#call-1 .tool-error").count() == 0
    final = page.locator("#agent-steps .final-answer")
    assert final.is_visible() and "the booking failed because the payment service is down" in final.inner_text()
    assert steps.inner_text().index("search_rooms") < steps.inner_text().index("book_room") \
        < steps.inner_text().index("the booking failed")
    defs = page.locator("#tool-definitions")                       # collapsed until opened
    assert not defs.get_by_text("Book a room by its id for a guest.").is_visible()
    defs.locator("summary").click()
    assert defs.get_by_text("Book a room by its id for a guest.").is_visible()
    assert page.locator("#expected-calls tr.met").count() == 2
    page.screenshot(path=str(artifacts / "agent_row.png"), full_page=True)

    page.goto(f"{server}/runs/{agent_run['run']}/rows/{HOSTILE_ROW}")
    result = page.locator("#call-1 details.long")
    preview = result.locator(".preview")
    assert preview.is_visible() and f"bay 7: 12 ladders {XSS_SCRIPT} {XSS_IMG}" in preview.inner_text()
    assert LONG_END not in preview.inner_text() and not result.locator(".full").is_visible()
    result.locator("summary").click()                               # "show all": no script involved
    assert result.locator(".full").is_visible() and result.locator(".full").inner_text().endswith(LONG_END)
    assert len(result.locator(".full").inner_text()) > PREVIEW_CHARS
    assert json.loads(page.locator("#call-1 .arguments").inner_text()) == {"bay": 7, "item": f"ladder {XSS_IMG}"}
    assert f"Bay 7 holds 12 ladders. {XSS_SCRIPT}" in page.locator("#agent-steps .final-answer").inner_text()
    assert f"You run the warehouse desk. {XSS_SVG}" in page.locator("#agent-turn .history").inner_text()
    assert page.locator("#agent-turn script, #agent-turn img, #agent-turn svg, #agent-turn [onerror]").count() == 0
    assert page.locator("#expected-calls tr.missed").count() == 1
    assert "send_invoice" in page.locator("#expected-calls tr.missed").inner_text()
    assert page.evaluate("typeof window.__xss") == "undefined" and dialogs == []
