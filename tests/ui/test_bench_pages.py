"""The benchmark pages of the dashboard: through FastAPI's TestClient (every page and its JSON
twin), and in a real headless Chromium (benchmarks → run → compare → track), over a store of
perf runs whose names, model, track, failure causes and validity reasons carry script-injection
payloads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from fastapi.testclient import TestClient

from assay.bench.kinds import store_benchmark
from assay.store import Store
from assay.ui.bench_charts import latency_cdf, metric_vs_load, perf_charts
from assay.ui.server import create_app
from tests.helpers.perfdata import HOSTILE, make_run
from tests.helpers.uihelpers import XSS_ATTR, XSS_IMG, XSS_SCRIPT, XSS_SVG, assert_escaped, serve_ui

TRACK = f"nightly {XSS_ATTR}"


def _poison(summary: dict[str, Any]) -> dict[str, Any]:
    """Payloads wherever a perf result carries text."""
    p = summary["points"][-1]
    p["requests"]["failures"][f"http 500 {XSS_SVG}"] = 1
    p["requests"]["failed"] += 1
    p["requests"]["sent"] += 1
    p["validity"]["reasons"] = [f"client CPU saturated {XSS_IMG}"]
    p["validity"]["valid"] = False
    summary["tokenizer"]["source"] = f"server {XSS_SCRIPT}"
    return summary


@pytest.fixture(scope="module")
def bench_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    path = str(tmp_path_factory.mktemp("bench-ui") / "bench.db")
    st = Store(path)
    a, xa = make_run(name=f"before {XSS_SCRIPT}", model=HOSTILE, levels=(1, 4, 16), n=60, seed=1, track=TRACK,
                     created_at=1_700_000_000.0)
    b, xb = make_run(name="after", model=HOSTILE, levels=(1, 4, 16), n=60, seed=2, speed=1.6, track=TRACK,
                     created_at=1_700_003_600.0)
    c, xc = make_run(name="same-server", model="qwen2.5-7b", levels=(1, 4, 16), n=60, seed=3,
                     created_at=1_700_007_200.0)
    info = {"path": path, "store": st, "a": store_benchmark(st, "perf", _poison(a), xa), "b": store_benchmark(st, "perf", b, xb),
            "c": store_benchmark(st, "perf", c, xc)}
    yield info
    st.close()


@pytest.fixture(scope="module")
def client(bench_store: dict[str, Any]) -> TestClient:
    return TestClient(create_app(bench_store["store"]), base_url="http://127.0.0.1")


# -- pages and their JSON -----------------------------------------------------------------------
def test_the_list_shows_every_run_escaped_and_filters(client: TestClient, bench_store: dict[str, Any]) -> None:
    r = client.get("/bench")
    assert r.status_code == 200 and "default-src 'none'" in r.headers["content-security-policy"]
    html = r.text
    assert_escaped(html)
    assert '<a href="/bench">benchmarks</a>' in html                      # in the nav
    for k in ("a", "b", "c"):
        assert f'href="/bench/{bench_store[k]}"' in html
    assert "before &lt;script&gt;" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "c=1,4,16" in html and "no (1 of 3)" in html
    only = client.get("/bench", params={"model": "qwen2.5-7b"}).text
    assert bench_store["c"] in only and bench_store["a"] not in only
    api = client.get("/api/bench", params={"track": TRACK}).json()
    assert [x["ref"] for x in api["runs"]] == [bench_store["b"], bench_store["a"]]
    assert api["runs"][1]["valid"] == "no (1 of 3)" and api["runs"][1]["model"] == HOSTILE


def test_a_run_page_has_its_tables_and_charts(client: TestClient, bench_store: dict[str, Any]) -> None:
    st = bench_store["store"]
    r = client.get(f"/bench/{bench_store['a'][:6]}")
    assert r.status_code == 200
    html = r.text
    assert_escaped(html)
    assert html.count('<section class="point"') == 3 and html.count('class="perf-metrics"') == 3
    assert html.count("<svg") == 5                                  # two CDFs, three against the load
    for name in ("latency_cdf.svg", "e2e_cdf.svg", "ttft_vs_load.svg", "itl_vs_load.svg", "throughput_vs_load.svg"):
        assert f'data-chart="{name}"' in html
    p0 = st.get_benchmark(bench_store["a"])["details"]["points"][0]["metrics"]["ttft"]
    assert f"{p0['p99'] * 1000:,.1f}" in html
    assert "client CPU saturated &lt;img" in html and "http 500 &lt;svg onload" in html
    assert "server &lt;script&gt;" in html
    api = client.get(f"/api/bench/{bench_store['a']}").json()
    assert api["ref"] == bench_store["a"] and api["summary"]["points"][2]["validity"]["valid"] is False
    assert api["sample_counts"]["0"]["ttft"] == 60


def test_the_compare_page_shows_differences_and_verdicts(client: TestClient, bench_store: dict[str, Any]) -> None:
    r = client.get("/bench/compare", params={"a": bench_store["a"], "b": "after"})
    assert r.status_code == 200
    html = r.text
    assert_escaped(html)
    assert html.count('class="compare-point"') == 3
    assert 'data-metric="ttft" data-stat="mean"' in html and "B − A [95% CI]" in html
    assert html.count('class="badge verdict faster"') >= 18            # every metric's mean, at every point
    assert "run A at concurrency 16 is not a valid measurement: client CPU saturated &lt;img" in html
    assert html.count("<svg") == 6                                   # a forest and a CDF per point
    api = client.get("/api/bench/compare", params={"a": bench_store["a"], "b": bench_store["b"]}).json()
    assert {e["verdict"] for p in api["points"] for e in p["metrics"].values()} == {"faster"}
    same = client.get("/api/bench/compare", params={"a": bench_store["a"], "b": bench_store["c"]}).json()
    assert {e["verdict"] for p in same["points"] for e in p["metrics"].values()} == {"no clear difference"}
    picker = client.get("/bench/compare").text                      # no runs named: a form to pick them
    assert 'name="a"' in picker and 'name="b"' in picker and bench_store["c"] in picker


def test_the_track_page_aggregates_the_repeats(client: TestClient, bench_store: dict[str, Any]) -> None:
    html = client.get("/bench/track", params={"track": TRACK}).text
    assert_escaped(html)
    assert html.count('class="track-point"') == 3 and "2 repeat(s), 1 valid" in html
    api = client.get("/api/bench/track", params={"track": TRACK}).json()
    assert [r["ref"] for r in api["runs"]] == [bench_store["a"], bench_store["b"]]


@pytest.mark.parametrize("url,status,message", [
    ("/bench/nope", 404, "no perf benchmark"),
    ("/api/bench/nope", 404, "no perf benchmark"),
    ("/bench/compare?a=nope&b=after", 404, "no perf benchmark"),
    ("/api/bench/compare?a=after", 400, "needs two benchmark runs"),
    ("/api/bench/compare?a=after&b=after", 400, "same run"),
    ("/bench/track?track=nope", 404, "no perf run has the track"),
    (f"/bench/{XSS_IMG}", 404, "no perf benchmark"),
])
def test_bad_refs_are_clear_errors(client: TestClient, url: str, status: int, message: str) -> None:
    r = client.get(url)
    assert r.status_code == status and message in r.text
    assert_escaped(r.text)


# -- the charts on their own --------------------------------------------------------------------
def test_charts_escape_the_text_they_draw_and_are_valid_svg(bench_store: dict[str, Any]) -> None:
    rec = bench_store["store"].get_benchmark(bench_store["a"])
    samples = bench_store["store"].benchmark_samples(rec["id"])
    charts = perf_charts(rec["details"], samples)
    assert sorted(charts) == ["e2e_cdf.svg", "itl_vs_load.svg", "latency_cdf.svg", "throughput_vs_load.svg",
                              "ttft_vs_load.svg"]
    for name, svg in charts.items():
        assert HOSTILE not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg, name
        root = ElementTree.fromstring(svg)                            # well-formed, standalone SVG
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert not [e for e in root.iter() if e.tag.endswith("script") or any(a.startswith("on") for a in e.attrib)]
    cdf = latency_cdf([(XSS_IMG, samples[0]["ttft"]), ("plain", samples[1]["ttft"])], title=XSS_ATTR)
    load = metric_vs_load([1, 4, 16], [(XSS_SVG, [0.1, 0.2, None])], title=XSS_SCRIPT, ylabel=XSS_ATTR)
    for svg in (str(cdf), str(load)):
        assert_escaped(svg)
        ElementTree.fromstring(svg)
    # a one-point run: TTFT and E2E on one CDF, nothing against the load; no samples: no CDF
    seq, xs = make_run(mode="sequential", n=30)
    assert sorted(perf_charts(seq, xs)) == ["latency_cdf.svg"] and "TTFT" in perf_charts(seq, xs)["latency_cdf.svg"]
    assert sorted(perf_charts(rec["details"])) == ["itl_vs_load.svg", "throughput_vs_load.svg", "ttft_vs_load.svg"]
    rate, xr = make_run(mode="rate", levels=(1, 2, 4), n=30)
    assert "request rate (req/s)" in perf_charts(rate, xr)["ttft_vs_load.svg"]
    assert "from the scheduled send" in perf_charts(rate, xr)["ttft_vs_load.svg"]


# -- in the browser ------------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def bench_server(bench_store: dict[str, Any]) -> Iterator[str]:
    yield from serve_ui(bench_store["path"])


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed: run `make test`")
def test_click_through_benchmarks_in_a_browser(bench_server: str, bench_store: dict[str, Any], artifacts: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: run `make test`")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        dialogs: list[str] = []
        errors: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: errors.append(str(e)))

        def no_xss() -> None:
            assert page.evaluate("typeof window.__xss") == "undefined"
            assert dialogs == []

        page.goto(bench_server + "/")
        page.get_by_role("link", name="benchmarks").click()
        page.wait_for_url("**/bench")
        assert page.locator("#bench-runs tr").count() == 4                  # header + three runs
        assert page.get_by_text(f"before {XSS_SCRIPT}", exact=True).is_visible()   # text, not markup
        no_xss()

        page.get_by_role("link", name=f"before {XSS_SCRIPT}").click()
        page.wait_for_url(f"**/bench/{bench_store['a']}")
        assert page.locator("#bench-charts svg").count() == 5
        assert page.locator("section.point").count() == 3
        assert "client CPU saturated <img" in page.locator("#point-2").inner_text()
        no_xss()
        page.screenshot(path=str(artifacts / "bench_run.png"), full_page=True)

        page.goto(bench_server + "/bench")
        page.select_option("select[name=a]", bench_store["a"])
        page.select_option("select[name=b]", bench_store["b"])
        page.click("#bench-compare-btn")
        page.wait_for_url("**/bench/compare?*")
        assert page.locator("section.compare-point").count() == 3
        row = page.locator("#cmp-0 tr[data-metric=ttft][data-stat=mean]")
        assert "faster" in row.inner_text()
        assert page.locator(".note.warning").count() == 1
        no_xss()
        page.screenshot(path=str(artifacts / "bench_compare.png"), full_page=True)

        page.goto(bench_server + "/bench/" + bench_store["a"])
        page.get_by_role("link", name=TRACK).click()
        page.wait_for_url("**/bench/track?*")
        assert page.locator("section.track-point").count() == 3
        no_xss()
        assert errors == []
        browser.close()
