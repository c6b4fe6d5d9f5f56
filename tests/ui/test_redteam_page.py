"""The red-team scorecard on the dashboard (/redteam, /redteam/RUN), in ``assay report`` and in
``assay show``: the ASR table by strategy x category and by complexity, with intervals and the
OWASP / MITRE ATLAS ids, escaped; "not measured (no judge)" for a run without a judge; a crescendo
attempt's row page shows its conversation as the history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from assay.simulate.redteam import load_objectives, redteam  # noqa: E402
from assay.store import Store  # noqa: E402
from assay.ui.report import render_report  # noqa: E402
from assay.ui.server import create_app  # noqa: E402
from tests.helpers.cli import run_assay  # noqa: E402
from tests.helpers.fake_openai_server import FakeOpenAI  # noqa: E402
from tests.helpers.redteam_apps import decoding_app, judge_reply  # noqa: E402
from tests.helpers.uihelpers import XSS_IMG, XSS_SCRIPT, assert_escaped  # noqa: E402

HARMLESS = "Here is some general background on that subject."


def _objectives(path: Path) -> Path:
    """The packaged violence objectives, tagged with script payloads (shown on the scorecard)."""
    objs = [{"id": o.id, "category": o.category, "text": o.text, "owasp": [*o.owasp, XSS_SCRIPT],
             "atlas": [*o.atlas, XSS_IMG]} for o in load_objectives().objectives if o.category == "violence"]
    path.write_text(json.dumps({"version": "1", "objectives": objs}), encoding="utf-8")
    return path


def _attacker(req: dict[str, Any]) -> dict[str, Any]:
    return {"content": "turn message " + str(len(req["body"]["messages"][-1]["content"]) % 7)}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Any:
    d = tmp_path_factory.mktemp("rt")
    st_path = str(d / "s.db")
    judge, attacker = FakeOpenAI().start(), FakeOpenAI().start()
    judge.default, attacker.default = judge_reply, _attacker
    mp = pytest.MonkeyPatch()
    mp.setenv("ASSAY_CACHE", str(d / "cache.sqlite"))
    mp.delenv("ASSAY_JUDGE", raising=False)
    try:
        objectives = _objectives(d / "objectives.json")
        judged = redteam(decoding_app, strategies="base64,rot13,role_play", objectives=objectives,
                         judge=f"{judge.base_url}#fake-judge", store=st_path, name=f"judged {XSS_SCRIPT}")
        plain = redteam(decoding_app, strategies="base64", objectives=objectives, store=st_path, name="no judge")
        convo = redteam(lambda query, history=None: HARMLESS, strategies="crescendo", objectives=objectives,
                        attacker=f"{attacker.base_url}#att", max_turns=3, max_attempts=2, store=st_path,
                        name="crescendo")
    finally:
        judge.stop()
        attacker.stop()
        mp.undo()
    st = Store(st_path)
    yield {"store": st, "path": st_path, "judged": judged.run["run_id"], "plain": plain.run["run_id"],
           "convo": convo.run["run_id"]}
    st.close()


def client(st: Store) -> TestClient:
    return TestClient(create_app(st), base_url="http://127.0.0.1")


def _cells(html: str) -> str:
    return html.split('class="redteam-cells"', 1)[1].split("</table>", 1)[0]


def test_scorecard_page_shows_asr_by_strategy_and_category_escaped(stored: dict[str, Any]) -> None:
    res = client(stored["store"]).get(f"/redteam/{stored['judged']}")
    assert res.status_code == 200
    html = res.text
    assert_escaped(html)
    cells = _cells(html)
    b64 = cells.split('<td class="mono">base64</td>', 1)[1].split("</tr>", 1)[0]
    assert "<td>violence</td>" in b64 and "<td>easy</td>" in b64 and '<td class="num">1.00 [0.76, 1.00]</td>' in b64
    assert "LLM01:2025" in b64 and "AML.T0051.000" in b64 and "&lt;script&gt;window.__xss" in b64
    base = cells.split('<td class="mono">baseline</td>', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">0.00 [0.00, 0.24]</td>' in base
    by_cx = html.split('class="redteam-complexity"', 1)[1].split("</table>", 1)[0]
    assert '<td class="mono">easy</td>' in by_cx and '<td class="mono">moderate</td>' in by_cx
    assert "not measured (no judge)" not in cells
    api = client(stored["store"]).get(f"/api/redteam/{stored['judged']}").json()
    assert api["redteam"]["strategies"]["base64"]["asr"] == 1.0


def test_no_judge_reads_not_measured_on_page_and_report(stored: dict[str, Any]) -> None:
    html = client(stored["store"]).get(f"/redteam/{stored['plain']}").text
    assert all(c.count("not measured (no judge)") == 1 for c in _cells(html).split("<tr>")[2:])
    assert "1.00 [" not in _cells(html).split("refusal")[0]
    report = render_report(stored["store"], stored["plain"])
    assert_escaped(report)
    assert "Red team: attack success rate" in report and "not measured (no judge)" in _cells(report)


def test_report_of_a_judged_run_has_the_scorecard_escaped(stored: dict[str, Any]) -> None:
    report = render_report(stored["store"], stored["judged"])
    assert_escaped(report)
    assert "1.00 [0.76, 1.00]" in _cells(report) and "&lt;img src=x onerror" in _cells(report)
    assert "judged &lt;script&gt;" in report


def test_redteam_list_and_a_run_that_is_not_one(stored: dict[str, Any], tmp_path: Path) -> None:
    import assay

    c = client(stored["store"])
    html = c.get("/redteam").text
    assert_escaped(html)
    for ref in ("judged", "plain", "convo"):
        assert f'href="/redteam/{stored[ref]}"' in html
    other = assay.evaluate([{"query": "q", "response": "r", "ground_truth": "r"}], metrics=["f1_score"],
                           store=stored["store"], workers=1).run["run_id"]
    assert c.get(f"/redteam/{other}").status_code == 404
    assert "Red team" not in render_report(stored["store"], other)


def test_crescendo_row_page_shows_the_conversation(stored: dict[str, Any]) -> None:
    c = client(stored["store"])
    run = stored["store"].get_run(stored["convo"])
    assert run["summary"]["redteam"]["setup"]["max_turns"] == 3
    rows = [r for r in stored["store"].load_result(stored["convo"]).rows
            if r["inputs.redteam_strategy"] == "crescendo"]
    assert rows and all(len(r["inputs.history"]) == 4 for r in rows)       # 3 turns: 2 before the last
    idx = next(i for i, r in enumerate(stored["store"].load_result(stored["convo"]).rows)
               if r["inputs.redteam_strategy"] == "crescendo")
    html = c.get(f"/runs/{stored['convo']}/rows/{idx}").text
    hist = html.split("<h3>history</h3>", 1)[1]
    assert hist.count('<div class="msg">') == 4 and HARMLESS in hist and "turn message" in hist


def test_show_prints_the_asr_block(stored: dict[str, Any]) -> None:
    res = run_assay(["show", stored["judged"], "--store", stored["path"]])
    assert res.returncode == 0, res.stderr
    assert "attack success rate by strategy x category" in res.stdout
    line = next(ln for ln in res.stdout.splitlines() if "base64" in ln and "violence" in ln)
    assert "1.00 [0.76, 1.00]" in line
