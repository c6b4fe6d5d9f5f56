"""The dashboard's ``/monitor`` pages (issue 29, item 5) over a store filled by the real flow: OTLP
bodies posted to ``assay monitor serve --config`` (a subprocess), which scores them online
(``tool_errors``: no judge) and fires an alert on a planted drop; then the dashboard over that store
through FastAPI's TestClient. Span names, attributes, the service name and tool errors (which reach
the scores' reasons) carry script-injection payloads: every page shows them escaped. Also: the
windows are those ``assay monitor check`` computes, the span tree's order, the page with an empty
store and no config."""

from __future__ import annotations

import os
import re
import time
from html import unescape
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.monitor.alerts import windows
from assay.monitor.config import MetricConfig
from assay.store import Store
from assay.store.monitor import MonitorLog
from assay.ui.server import create_app
from tests.helpers.monitor import Receiver, post
from tests.helpers.otlp import Recorder
from tests.helpers.uihelpers import XSS_ATTR, XSS_IMG, XSS_SCRIPT, XSS_SVG, assert_escaped, serve_ui

CHROMIUM = "/usr/bin/chromium"

WINDOW_S = 2
CONFIG = f"""
interval: 0.2
lookback: 1h
sinks: {{log: true}}
metrics:
  tool_errors:
    window: {WINDOW_S}s
    min_traces: 3
    alerts: ['tool_errors.mean<=0.2']
"""


def _traces(n: int, *, fail: bool) -> tuple[bytes, list[dict[str, Any]]]:
    """``n`` traces: an agent root with a chat call (a tool call under it) and a retrieval after it;
    hostile text in the service, a span name, attributes and (``fail``) the tool's error."""
    rec = Recorder(service=f"shop {XSS_IMG}")
    made = []
    for i in range(n):
        with rec.span("invoke_agent shop", {"gen_ai.operation.name": "invoke_agent", "note": XSS_ATTR}) as root:
            with rec.span(f"chat {XSS_SCRIPT}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                                               "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20,
                                               "user.comment": XSS_SVG}) as chat:
                with rec.span("execute_tool search", {"gen_ai.operation.name": "execute_tool",
                                                      "gen_ai.tool.name": "search"},
                              error=f"backend down {XSS_SVG}" if fail else None) as tool:
                    pass
            with rec.span("retrieve docs", {"retrieval.query": f"order {i}"}) as retr:
                pass
        made.append({"trace_id": format(root.get_span_context().trace_id, "032x"),
                     "order": [format(s.get_span_context().span_id, "016x") for s in (root, chat, tool, retr)]})
    return rec.request().SerializeToString(), made


def _next_window() -> None:
    now = time.time()
    time.sleep((now // WINDOW_S + 1) * WINDOW_S - now + 0.05)


def _wait(pred, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def monitored(tmp_path_factory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("monitor-page")
    store = str(d / "m.db")
    cfg = d / "monitor.yaml"
    cfg.write_text(CONFIG)
    with Receiver(store, "--config", str(cfg)) as rx:
        _next_window()
        body, good = _traces(4, fail=False)
        assert post(rx.url, body)[0] == 200
        _next_window()
        body, bad = _traces(4, fail=True)
        assert post(rx.url, body)[0] == 200
        st = Store(store)
        try:
            log = MonitorLog(st)
            _wait(lambda: len(log.scores("tool_errors")) == 8, "the 8 traces scored")
            _next_window()
            _wait(lambda: log.alerts(), "the alert on the bad window")
        finally:
            st.close()
        assert rx.stop() == 143
    st = Store(store)
    yield {"store": st, "path": store, "good": good, "bad": bad,
           "client": TestClient(create_app(st), base_url="http://127.0.0.1")}
    st.close()


def _links(html: str, prefix: str) -> list[str]:
    return [unescape(h) for h in re.findall(rf'href="({re.escape(prefix)}[^"]*)"', html)]


def test_monitor_page_shows_each_window_with_its_interval_and_the_alert(monitored) -> None:
    c = monitored["client"]
    res = c.get("/monitor")
    assert res.status_code == 200
    html = res.text
    assert_escaped(html)
    assert '<a href="/monitor">monitor</a>' in html                          # in the nav
    assert 'id="metric-tool_errors"' in html and "window 2s (the window of its alerts)" in html
    st = monitored["store"]
    (alert,) = MonitorLog(st).alerts()
    assert alert["state"] == "firing"
    # the windows are assay monitor check's: the same function, the same figures
    data = c.get("/api/monitor").json()
    (m,) = data["metrics"]
    (o,) = m["outputs"]
    mc = MetricConfig(name="tool_errors", window="2s", window_s=2.0)
    wins = windows(MonitorLog(st), mc, data["since_ns"], data["now_ns"], data["now_ns"])
    assert [(p["t0"], p["y"], p["lo"], p["hi"], p["n"]) for p in o["points"]] == [
        (w.start_ns, w.aggregates["tool_errors"]["mean"], w.aggregates["tool_errors"]["ci95_low"],
         w.aggregates["tool_errors"]["ci95_high"], len(w.trace_ids)) for w in wins]
    assert [p["y"] for p in o["points"]] == [0.0, 1.0]
    assert [(k["t"], k["state"], k["rule"]) for k in o["marks"]] == [
        (alert["window_start_ns"], "firing", "tool_errors.mean<=0.2")]
    chart = html.split('<figure class="monitor-chart">')[1].split("</figure>")[0]
    assert '<polygon class="band"' in chart and 'class="mark firing"' in chart
    assert chart.count("<circle") == 2
    # each point opens its window's traces
    hrefs = _links(chart, "/monitor/traces?")
    assert hrefs == [f"/monitor/traces?start={w.start_ns}&end={w.end_ns}&metric=tool_errors" for w in wins]
    assert 'id="open-alerts"' in html and "tool_errors.mean&lt;=0.2" in html
    # latency, tokens, cost per window, from the spans: 4 traces of 120 tokens each per window
    usage = data["usage"]
    assert [(u["traces"], u["input_tokens"], u["output_tokens"]) for u in usage] == [(4, 400, 80), (4, 400, 80)]
    assert all(u["cost_usd"] is not None and u["cost_usd"] > 0 for u in usage)      # gpt-4o-mini has a price
    assert all(u["latency_p95_s"] is not None for u in usage)
    assert 'id="usage-windows"' in html


def test_a_point_opens_its_windows_traces_with_their_scores(monitored) -> None:
    c = monitored["client"]
    chart = c.get("/monitor").text.split('<figure class="monitor-chart">')[1]
    bad_href = _links(chart, "/monitor/traces?")[1]
    html = c.get(bad_href).text
    assert_escaped(html)
    listed = _links(html, "/monitor/traces/")
    assert [h.rsplit("/", 1)[1] for h in listed] == [t["trace_id"] for t in monitored["bad"]]   # by start
    assert html.count('class="trace-row"') == 4
    assert "shop &lt;img src=x onerror=" in html                            # the hostile service, as text
    assert html.count('<span class="badge fail" title="tool_errors">1</span>') == 4
    api = c.get(bad_href.replace("/monitor/traces", "/api/monitor/traces")).json()
    assert {t["trace_id"] for t in api["traces"]} == {t["trace_id"] for t in monitored["bad"]}
    assert all(t["scores"]["tool_errors"]["status"] == "scored" for t in api["traces"])
    bad = c.get("/monitor/traces", params={"start": 10, "end": 5})
    assert bad.status_code == 400 and "must be after start" in bad.text


def test_a_trace_opens_as_its_span_tree_with_every_score_and_reason(monitored) -> None:
    c = monitored["client"]
    t = monitored["bad"][0]
    res = c.get(f"/monitor/traces/{t['trace_id']}")
    assert res.status_code == 200
    html = res.text
    assert_escaped(html)
    tree = html.split('id="span-tree"')[1]
    order = re.findall(r'<li class="span (d\d+)[^"]*" data-span="([0-9a-f]+)"', tree)
    assert [sid for _, sid in order] == t["order"]                  # root, chat, its tool call, retrieval
    assert [d for d, _ in order] == ["d0", "d1", "d2", "d1"]
    assert 'class="span d2 failed"' in tree
    # the hostile texts, escaped: the span name, attributes, the tool error, the score's reason
    assert "chat &lt;script&gt;window.__xss=1" in tree
    assert "backend down &lt;svg onload=" in tree
    assert "&#34; onmouseover=&#34;window.__xss=4&#34;" in tree
    card = html.split('id="score-tool_errors"')[1].split("<h2>")[0]
    assert '<span class="badge fail">fail</span> value 1' in card
    assert "1 of 1 call(s) failed — search(): backend down &lt;svg onload=" in card
    api = c.get(f"/api/monitor/traces/{t['trace_id']}").json()
    assert [s["span_id"] for s in api["spans"]] == t["order"] and [s["depth"] for s in api["spans"]] == [0, 1, 2, 1]
    assert api["scores"]["tool_errors"]["scores"][0]["tool_errors"]["value"] == 1
    missing = c.get("/monitor/traces/" + "0" * 32)
    assert missing.status_code == 404 and "no span of trace" in missing.text


def test_the_span_tree_keeps_orphans_and_cycles() -> None:
    from assay.ui.monitor_pages import span_tree

    def s(sid: str, parent: str | None, start: int) -> dict[str, Any]:
        return {"span_id": sid, "parent_id": parent, "start_ns": start}

    spans = [s("c", "a", 3), s("a", None, 1), s("b", "a", 2), s("o", "gone", 0), s("x", "y", 5), s("y", "x", 6),
             s("b1", "b", 4)]
    got = [(n["span_id"], n["depth"]) for n in span_tree(spans)]
    # roots by start time (a span whose parent is not in the trace is one), children by start time
    assert got == [("o", 0), ("a", 0), ("b", 1), ("b1", 2), ("c", 1), ("x", 0), ("y", 1)]


def test_the_page_works_on_an_empty_store_without_a_config(tmp_path) -> None:
    st = Store(str(tmp_path / "empty.db"))
    try:
        c = TestClient(create_app(st), base_url="http://127.0.0.1")
        html = c.get("/monitor").text
        assert 'id="monitor-empty"' in html and "assay monitor serve --config monitor.yaml" in html
        assert c.get("/api/monitor").json()["metrics"] == []
        assert "No trace started in this window" in c.get("/monitor/traces", params={"start": 0, "end": 10}).text
        bad = c.get("/monitor", params={"since": "yesterday"})
        assert bad.status_code == 400 and "since: a duration such as" in bad.text
    finally:
        st.close()


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed: run `make test`")
def test_in_chromium_a_point_opens_the_window_and_a_trace_its_tree(monitored) -> None:
    """`assay ui` in a subprocess, headless Chromium: click the bad window's point in the SVG
    chart, then a trace; the tree is shown and no payload ran."""
    sync_api = pytest.importorskip("playwright.sync_api")
    server = serve_ui(monitored["path"])
    base = next(server)
    try:
        with sync_api.sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                  args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
            page = b.new_page(viewport={"width": 1200, "height": 900})
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(base + "/monitor")
            page.get_by_role("link", name="monitor", exact=True).first.wait_for()
            assert page.locator("figure.monitor-chart svg circle").count() == 2
            page.locator("figure.monitor-chart svg a").nth(1).click()          # the bad window's point
            page.wait_for_url("**/monitor/traces?start=*")
            assert page.locator("tr.trace-row").count() == 4
            page.locator("tr.trace-row a").first.click()
            page.wait_for_url("**/monitor/traces/*")
            assert page.locator("#span-tree li.span").count() == 4
            assert page.get_by_text(f"chat {XSS_SCRIPT}", exact=True).is_visible()   # text, not markup
            assert page.evaluate("typeof window.__xss") == "undefined" and dialogs == []
            b.close()
    finally:
        next(server, None)
