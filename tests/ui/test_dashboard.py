"""The dashboard through FastAPI's TestClient: every page and API call, with real values."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.store import queries as Q
from assay.ui.server import create_app
from tests.helpers.uihelpers import XSS_SCRIPT, N, assert_escaped


@pytest.fixture(scope="module")
def client(ui_store: dict[str, Any]) -> TestClient:
    return TestClient(create_app(ui_store["store"]), base_url="http://127.0.0.1")


def _scores(result: Any, output: str) -> list[tuple[int, Any, str]]:
    """(idx, score, status) of one output for every row of an EvalResult."""
    m = "ui_judge" if output == "ui_judge" else "f1_score"
    return [(i, r[f"outputs.{m}.{output}_score"], r[f"outputs.{m}.{output}_status"]) for i, r in enumerate(result.rows)]


# -- runs ---------------------------------------------------------------------------------------
def test_runs_page_lists_both_runs_and_filters(client: TestClient, ui_store: dict[str, Any]) -> None:
    html = client.get("/").text
    assert ui_store["base"] in html and ui_store["cand"] in html
    assert "baseline &lt;b&gt;" in html and "baseline <b>" not in html
    html = client.get("/", params={"name": "candid"}).text
    assert ui_store["cand"] in html and ui_store["base"] not in html
    html = client.get("/", params={"status": "failed"}).text
    assert ui_store["cand"] not in html and "no runs" in html
    tomorrow = (dt.date.today() + dt.timedelta(days=1)).isoformat()
    assert ui_store["base"] not in client.get("/", params={"since": tomorrow}).text
    assert ui_store["base"] in client.get("/", params={"until": tomorrow}).text


def test_api_runs_filters_and_pages(client: TestClient, ui_store: dict[str, Any]) -> None:
    data = client.get("/api/runs").json()
    assert data["total"] == 2 and [r["id"] for r in data["runs"]] == [ui_store["cand"], ui_store["base"]]
    page2 = client.get("/api/runs", params={"per_page": 1, "page": 2}).json()
    assert page2["total"] == 2 and [r["id"] for r in page2["runs"]] == [ui_store["base"]]
    assert client.get("/api/runs", params={"name": "baseline"}).json()["total"] == 1
    assert client.get("/api/runs", params={"name": "%"}).json()["total"] == 0   # LIKE wildcards are literal
    bad = client.get("/api/runs", params={"since": "yesterday"})
    assert bad.status_code == 400 and "YYYY-MM-DD" in bad.json()["error"]


# -- one run --------------------------------------------------------------------------------------
def test_run_page_shows_metric_cards_judge_and_note(client: TestClient, ui_store: dict[str, Any]) -> None:
    res = ui_store["base_result"]
    html = client.get(f"/runs/{ui_store['base']}").text
    assert_escaped(html)
    for output in ("f1_score", "ui_judge"):
        agg = res.metrics[output]
        card = html.split(f'id="card-{output}"')[1].split('<div class="card"')[0]
        assert f"{agg['mean']:.3f}" in card
        assert f"{agg['ci95_low']:.3f} – {agg['ci95_high']:.3f}" in card
        assert f"{100 * agg['pass_rate']:.1f}%" in card
        assert f"{agg['evaluated']} evaluated · {agg['skipped']} skipped" in card
        assert "<svg" in card and "distribution of" in card
    assert res.metrics["f1_score"]["skipped"] == 4 and res.metrics["ui_judge"]["errored"] == 1
    assert "1 errored" in html.split('id="card-ui_judge"')[1]
    assert "http://127.0.0.1:9/v1#tiny-judge" in html
    assert "judge note:" in html and "smoke-test judge &lt;script&gt;" in html


def test_rows_are_paged_in_the_database(client: TestClient, ui_store: dict[str, Any]) -> None:
    url = f"/api/runs/{ui_store['base']}/rows"
    p1 = client.get(url, params={"per_page": 7}).json()
    assert p1["total"] == N and p1["pages"] == 6 and [r["idx"] for r in p1["rows"]] == list(range(7))
    p6 = client.get(url, params={"per_page": 7, "page": 6}).json()
    assert [r["idx"] for r in p6["rows"]] == list(range(35, 40))
    assert client.get(url, params={"per_page": 7, "page": 99}).json()["rows"] == []
    row = p1["rows"][3]
    assert row["row_id"] == "row-003" and row["inputs"]["inputs.query"].startswith("question #3")
    assert set(row["scores"]) == {"f1_score", "ui_judge"}
    html = client.get(f"/runs/{ui_store['base']}", params={"per": 7, "page": 2}).text
    assert "page 2 of 6" in html and re.search(r'href="/runs/\w+/rows/7"', html)
    assert not re.search(r'href="/runs/\w+/rows/6"', html)


@pytest.mark.parametrize("output", ["f1_score", "ui_judge"])
@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_rows_sort_by_a_metric_output_with_unscored_rows_last(client: TestClient, ui_store: dict[str, Any],
                                                              output: str, direction: str) -> None:
    url = f"/api/runs/{ui_store['base']}/rows"
    got = []
    for page in (1, 2, 3):
        got += client.get(url, params={"sort": output, "dir": direction, "per_page": 15, "page": page}).json()["rows"]
    scored = [(s, i) for i, s, _ in _scores(ui_store["base_result"], output) if s is not None]
    unscored = [i for i, s, _ in _scores(ui_store["base_result"], output) if s is None]
    scored.sort(key=lambda t: (-t[0], -t[1]) if direction == "desc" else t)
    assert [r["idx"] for r in got] == [i for _, i in scored] + unscored
    assert len(unscored) == (4 if output == "f1_score" else 1)


@pytest.mark.parametrize("output,result,key", [("f1_score", "pass", "passed"), ("f1_score", "fail", "failed"),
                                               ("f1_score", "skipped", "skipped"), ("ui_judge", "error", "errored"),
                                               ("ui_judge", "fail", "failed"), ("ui_judge", "pass", "passed")])
def test_rows_filter_by_a_metric_result(client: TestClient, ui_store: dict[str, Any], output: str, result: str,
                                        key: str) -> None:
    agg = ui_store["base_result"].metrics[output]
    data = client.get(f"/api/runs/{ui_store['base']}/rows", params={"fo": output, "fr": result, "per_page": 100}).json()
    assert data["total"] == agg[key] > 0
    status = {"error": "error", "skipped": "skipped"}.get(result, "completed")
    for r in data["rows"]:
        s = r["scores"][output]
        assert s["status"] == status
        if status == "completed":
            assert s["result"] == result
    assert [r["idx"] for r in data["rows"]] == sorted(r["idx"] for r in data["rows"])


def test_filter_and_sort_together(client: TestClient, ui_store: dict[str, Any]) -> None:
    data = client.get(f"/api/runs/{ui_store['base']}/rows",
                      params={"fo": "f1_score", "fr": "pass", "sort": "ui_judge", "dir": "desc", "per_page": 100}).json()
    rows = data["rows"]
    assert data["total"] == ui_store["base_result"].metrics["f1_score"]["passed"] == len(rows)
    scores = [r["scores"]["ui_judge"]["score"] for r in rows]
    assert scores == sorted(scores, key=lambda s: (s is None, -(s or 0)))
    assert all(r["scores"]["f1_score"]["result"] == "pass" for r in rows)


def test_search_inputs_and_reasons(client: TestClient, ui_store: dict[str, Any]) -> None:
    url = f"/api/runs/{ui_store['base']}/rows"
    one = client.get(url, params={"q": "question #21 "}).json()
    assert one["total"] == 1 and one["rows"][0]["idx"] == 21
    by_reason = client.get(url, params={"q": "row 33 reason"}).json()
    assert [r["idx"] for r in by_reason["rows"]] == [33]
    assert client.get(url, params={"q": "judge broke"}).json()["total"] == 1     # an error's reason
    assert [r["idx"] for r in client.get(url, params={"q": "zebra_%word"}).json()["rows"]] == [7]
    assert client.get(url, params={"q": "zebra%"}).json()["total"] == 0            # % is literal
    assert client.get(url, params={"q": "QUESTION #5"}).json()["total"] == 1       # case-insensitive
    combo = client.get(url, params={"q": "question #1", "fo": "f1_score", "fr": "skipped"}).json()
    assert [r["idx"] for r in combo["rows"]] == [19]
    html = client.get(f"/runs/{ui_store['base']}", params={"q": "<script>"}).text
    assert_escaped(html)
    assert 'value="&lt;script&gt;"' in html and f"{N} rows match" in html


def test_bad_row_queries_are_400_not_500(client: TestClient, ui_store: dict[str, Any]) -> None:
    base = ui_store["base"]
    for params in ({"sort": "nope"}, {"fo": "f1_score", "fr": "maybe"}, {"fo": "nope", "fr": "pass"},
                   {"dir": "sideways"}, {"fr": "pass"}):
        r = client.get(f"/api/runs/{base}/rows", params=params)
        assert r.status_code == 400, params
        assert client.get(f"/runs/{base}", params=params).status_code == 400
    assert client.get("/runs/nosuchrun").status_code == 404
    assert client.get(f"/api/runs/{base}/rows/999").status_code == 404


def test_histograms_count_every_scored_row(client: TestClient, ui_store: dict[str, Any]) -> None:
    h = client.get(f"/api/runs/{ui_store['base']}/histograms").json()
    res = ui_store["base_result"]
    judge = h["ui_judge"]
    assert judge["kind"] == "values" and [b["lo"] for b in judge["bars"]] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert judge["n"] == res.metrics["ui_judge"]["evaluated"] and judge["missing"] == 1
    expected = {}
    for _, s, _ in _scores(res, "ui_judge"):
        if s is not None:
            expected[s] = expected.get(s, 0) + 1
    assert {b["lo"]: b["count"] for b in judge["bars"]} == expected
    assert h["f1_score"]["n"] == 36 and h["f1_score"]["missing"] == 4


def test_histograms_bin_many_distinct_values(ui_store: dict[str, Any], tmp_path) -> None:
    import assay
    from assay.store import Store

    st = Store(str(tmp_path / "h.db"))
    rows = [{"response": " ".join(f"w{k}" for k in range(1 + i % 97)), "ground_truth": "w0 w1 w2 w3 w4 w5 w6"}
            for i in range(300)]
    rid = assay.evaluate(rows, metrics="f1_score", store=st, workers=1).run["run_id"]
    h = Q.histograms(st, rid, ["f1_score"], bins=10)["f1_score"]
    assert h["kind"] == "bins" and len(h["bars"]) == 10 and sum(b["count"] for b in h["bars"]) == 300
    assert h["bars"][0]["lo"] == pytest.approx(min(r["outputs.f1_score.f1_score"] for r in st.load_result(rid).rows))
    st.close()


def test_row_page_shows_everything_escaped(client: TestClient, ui_store: dict[str, Any]) -> None:
    html = client.get(f"/runs/{ui_store['base']}/rows/13").text
    assert_escaped(html)
    assert "question #13" in html and "v1 answer 13" in html and "plain context" in html
    assert "judge broke &lt;script&gt;" in html                        # the error's reason
    assert '<span class="badge error">error</span>' in html
    assert 'href="https://docs.example.com/13"' in html                 # http(s) documents are links
    assert "javascript:window.__xss=5" in html and 'href="javascript:' not in html   # others are text
    data = client.get(f"/api/runs/{ui_store['base']}/rows/13").json()
    assert {s["output"]: s["status"] for s in data["scores"]} == {"f1_score": "completed", "ui_judge": "error"}
    assert data["prev"] == 12 and data["next"] == 14
    html = client.get(f"/runs/{ui_store['base']}/rows/5").text
    assert "row 5 reason &lt;img src=x onerror=" in html


# -- compare and trend ----------------------------------------------------------------------------
def test_compare_page_and_api(client: TestClient, ui_store: dict[str, Any]) -> None:
    a, b = ui_store["base"], ui_store["cand"]
    data = client.get("/api/compare", params=[("runs", a), ("runs", b)]).json()
    assert [r["id"] for r in data["runs"]] == [a, b]
    by = {m["output"]: m for m in data["metrics"]}
    for output in ("f1_score", "ui_judge"):
        ma = ui_store["base_result"].metrics[output]["mean"]
        mb = ui_store["cand_result"].metrics[output]["mean"]
        assert by[output]["runs"][0]["mean"] == pytest.approx(ma)
        assert by[output]["runs"][1]["mean"] == pytest.approx(mb)
    d = by["f1_score"]["deltas"][1]
    assert d["delta"] < 0 and d["ci95_low"] <= d["delta"] <= d["ci95_high"]
    html = client.get("/compare", params=[("runs", a), ("runs", b), ("output", "f1_score")]).text
    assert_escaped(html)
    assert f"{d['delta']:+.3f}" in html and "significant" in html
    worse = client.get("/api/compare/worse", params={"base": a, "other": b, "output": "f1_score"}).json()
    assert worse and all(w["other"]["score"] < w["base"]["score"] for w in worse)
    first = worse[0]
    assert f"/runs/{b}/rows/{first['other_idx']}" in html
    assert html.count('class="worse-row-link"') == len(worse)
    judge = client.get("/compare", params=[("runs", a), ("runs", b), ("output", "ui_judge")]).text
    assert "reason &lt;img src=x onerror=" in judge                      # both reasons, escaped
    assert client.get("/compare").status_code == 200
    assert client.get("/api/compare", params=[("runs", a)]).status_code == 400
    assert client.get("/compare", params=[("runs", a), ("runs", "zzz")]).status_code == 404


def test_trend_page_and_api(client: TestClient, ui_store: dict[str, Any]) -> None:
    data = client.get("/api/trend", params={"output": "ui_judge"}).json()
    pts = data["points"]
    assert [p["id"] for p in pts] == [ui_store["base"], ui_store["cand"]]
    assert pts[0]["mean"] == pytest.approx(ui_store["base_result"].metrics["ui_judge"]["mean"])
    assert client.get("/api/trend", params={"output": "ui_judge", "name": "candidate"}).json()["points"][0]["id"] \
        == ui_store["cand"]
    html = client.get("/trend", params={"output": "ui_judge"}).text
    assert "<polyline" in html and "baseline &lt;b&gt;" in html
    assert f"{pts[1]['mean'] - pts[0]['mean']:+.3f}" in html
    assert client.get("/trend").status_code == 200


# -- security -------------------------------------------------------------------------------------
def test_every_page_escapes_and_sends_a_no_script_policy(client: TestClient, ui_store: dict[str, Any]) -> None:
    a, b = ui_store["base"], ui_store["cand"]
    for url in ("/", f"/runs/{a}", f"/runs/{a}?sort=ui_judge&dir=desc", f"/runs/{a}/rows/0", f"/runs/{b}/rows/4",
                f"/compare?runs={a}&runs={b}&output=ui_judge", "/trend?output=ui_judge", "/compare"):
        r = client.get(url)
        assert r.status_code == 200, url
        assert_escaped(r.text)
        csp = r.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert "<script" not in r.text.lower()
    api = client.get(f"/api/runs/{a}/rows/0")
    assert api.headers["content-type"].startswith("application/json")
    assert XSS_SCRIPT in api.json()["inputs"]["inputs.response"]   # JSON keeps the text as it is


def test_without_a_token_only_loopback_host_names_are_answered(ui_store: dict[str, Any]) -> None:
    app = create_app(ui_store["store"])
    assert TestClient(app, base_url="http://127.0.0.1:8765").get("/").status_code == 200
    assert TestClient(app, base_url="http://localhost:8765").get("/").status_code == 200
    assert TestClient(app, base_url="http://[::1]:8765").get("/").status_code == 200
    rebound = TestClient(app, base_url="http://attacker.example:8765").get("/")
    assert rebound.status_code == 400 and "loopback" in rebound.text


def test_with_a_token_every_request_must_carry_it(ui_store: dict[str, Any]) -> None:
    app = create_app(ui_store["store"], token="s3cret-token-value")
    c = TestClient(app, base_url="http://192.0.2.10:8765")
    assert c.get("/").status_code == 401
    assert c.get(f"/api/runs/{ui_store['base']}").status_code == 401
    assert c.get("/static/app.css").status_code == 401
    assert c.get("/", params={"token": "wrong"}).status_code == 401
    assert c.get("/", headers={"Authorization": "Bearer s3cret-token-value"}).status_code == 200
    assert c.get("/api/runs", headers={"X-Assay-Token": "s3cret-token-value"}).status_code == 200
    first = c.get("/runs/" + ui_store["base"], params={"token": "s3cret-token-value", "per": 5},
                  follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == f"/runs/{ui_store['base']}?per=5"
    assert "httponly" in first.headers["set-cookie"].lower() and "samesite=strict" in first.headers["set-cookie"].lower()
    assert c.get("/").status_code == 200             # the cookie now carries it
    c.cookies.clear()
    assert c.get("/").status_code == 401


def test_ui_command_refuses_other_addresses_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer
    from typer.testing import CliRunner

    from assay.cli import ui as commands
    from assay.errors import AssayError

    started: list[Any] = []

    def serve(server: Any, sockets: Any = None) -> None:   # instead of serving forever
        c = server.config
        started.append({"host": c.host, "port": sockets[0].getsockname()[1], "log_level": c.log_level,
                        "server_header": c.server_header})

    monkeypatch.setattr("uvicorn.Server.run", serve)
    # uvicorn.Config points its log handlers at sys.stderr, which is CliRunner's stream here and is
    # closed after each invoke: a later log line (or logging's flush at exit) would write to it
    monkeypatch.setattr("uvicorn.Config.configure_logging", lambda self: None)
    app = typer.Typer()
    app.command()(commands.ui_cmd)
    app.command("x")(lambda: None)
    runner = CliRunner()
    res = runner.invoke(app, ["ui-cmd", "--host", "0.0.0.0"])
    assert isinstance(res.exception, AssayError) and "needs a token" in str(res.exception)
    assert started == []
    res = runner.invoke(app, ["ui-cmd", "--host", "0.0.0.0", "--token", "auto", "--port", "0"])
    assert res.exit_code == 0, res.output
    port = started[0]["port"]     # --port 0: any free port, the one announced
    assert port > 0 and started == [{"host": "0.0.0.0", "port": port, "log_level": "warning", "server_header": False}]
    assert re.search(rf"http://0\.0\.0\.0:{port}/\?token=[\w-]{{20,}}", res.output)
    res = runner.invoke(app, ["ui-cmd", "--port", "0"])
    assert res.exit_code == 0 and "http://127.0.0.1:" in res.output and "token" not in res.output
    assert started[1]["host"] == "127.0.0.1"
    assert commands.is_loopback("127.0.0.5") and commands.is_loopback("::1") and commands.is_loopback("localhost")
    assert not commands.is_loopback("0.0.0.0") and not commands.is_loopback("example.com")


def test_credentials_in_a_judge_url_do_not_reach_the_store(tmp_path) -> None:
    from assay.models import build_judge

    judge = build_judge("http://user:sk-in-url-SECRET@127.0.0.1:9/v1#m")
    assert "sk-in-url-SECRET" not in judge.name
    judge = build_judge("http://127.0.0.1:9/v1?api-key=sk-in-query-SECRET#m")
    assert "sk-in-query-SECRET" not in judge.name and judge.name == "http://127.0.0.1:9/v1?api-key=***#m"
