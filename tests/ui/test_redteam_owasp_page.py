"""The scorecard by OWASP LLM Top 10 id on the dashboard (/redteam/RUN) and in ``assay report``:
one row per id an attempt exercised (baseline, the control, left out) with its ASR and interval,
and a "not covered" line naming the ids no attempt exercised; the ids from the data escaped."""

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
from tests.helpers.fake_openai_server import FakeOpenAI  # noqa: E402
from tests.helpers.redteam_apps import decoding_app, judge_reply  # noqa: E402
from tests.helpers.uihelpers import XSS_SCRIPT, assert_escaped  # noqa: E402


def _objectives(path: Path) -> Path:
    """The packaged violence objectives, one also tagged with a script payload as an OWASP id."""
    objs = [{"id": o.id, "category": o.category, "text": o.text, "owasp": list(o.owasp), "atlas": list(o.atlas)}
            for o in load_objectives().objectives if o.category == "violence"]
    objs[0]["owasp"].append(XSS_SCRIPT)
    path.write_text(json.dumps({"version": "1", "objectives": objs}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Any:
    d = tmp_path_factory.mktemp("rt-owasp")
    judge = FakeOpenAI().start()
    judge.default = judge_reply
    mp = pytest.MonkeyPatch()
    mp.setenv("ASSAY_CACHE", str(d / "cache.sqlite"))
    mp.delenv("ASSAY_JUDGE", raising=False)
    try:
        res = redteam(decoding_app, preset="owasp-llm-top10", objectives=_objectives(d / "objectives.json"),
                      max_attempts=40, seed=1, judge=f"{judge.base_url}#fake-judge", store=str(d / "s.db"),
                      name="owasp preset")
    finally:
        judge.stop()
        mp.undo()
    st = Store(str(d / "s.db"))
    yield {"store": st, "path": str(d / "s.db"), "run": res.run["run_id"], "rt": res.run["redteam"]}
    st.close()


def _owasp_table(html: str) -> str:
    return html.split('class="redteam-owasp"', 1)[1].split("</table>", 1)[0]


def _not_covered(html: str) -> str:
    return html.split('class="redteam-not-covered"', 1)[1].split("</p>", 1)[0]


def _check(html: str, rt: dict[str, Any]) -> None:
    assert_escaped(html)
    assert "By OWASP LLM Top 10 (2025) id" in html
    table = _owasp_table(html)
    llm01 = rt["owasp"]["LLM01:2025"]
    row = table.split('<td class="mono">LLM01:2025</td>', 1)[1].split("</tr>", 1)[0]
    asr = f"{llm01['asr']:.2f} [{llm01['asr_ci'][0]:.2f}, {llm01['asr_ci'][1]:.2f}]"
    assert "<td>Prompt Injection</td>" in row and f'<td class="num">{llm01["attempts"]}</td>' in row
    assert f'<td class="num">{asr}</td>' in row and llm01["successes"] > 0
    assert "&lt;script&gt;window.__xss" in table                       # the payload id: a row, escaped
    missing = _not_covered(html)
    assert rt["owasp_not_covered"] and "LLM01:2025" not in missing
    for t in rt["owasp_not_covered"]:
        assert f'<span class="mono">{t}</span>' in missing
    assert "System Prompt Leakage" in missing and "Unbounded Consumption" in missing


def test_dashboard_page_has_the_owasp_table_and_not_covered_line(stored: dict[str, Any]) -> None:
    res = TestClient(create_app(stored["store"]), base_url="http://127.0.0.1").get(f"/redteam/{stored['run']}")
    assert res.status_code == 200
    _check(res.text, stored["rt"])


def test_report_has_the_owasp_table_and_not_covered_line(stored: dict[str, Any]) -> None:
    _check(render_report(stored["store"], stored["run"]), stored["rt"])


def test_a_run_without_owasp_figures_shows_no_owasp_table(stored: dict[str, Any]) -> None:
    from assay.ui.redteam_pages import scorecard_view

    rt = {k: v for k, v in stored["rt"].items() if k not in ("owasp", "owasp_not_covered")}
    assert scorecard_view(rt)["owasp"] is None
    assert scorecard_view(stored["rt"])["owasp"]["lines"][0]["name"] == "LLM01:2025"


def test_show_prints_the_owasp_table_with_the_ids_not_covered(stored: dict[str, Any], capsys: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from assay.cli.main import run

    monkeypatch.setenv("COLUMNS", "220")
    code = run(["show", stored["run"], "--store", stored["path"]])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "by OWASP LLM Top 10 (2025) id" in text
    llm01 = next(ln for ln in text.splitlines() if "LLM01:2025" in ln and "Prompt Injection" in ln)
    assert str(stored["rt"]["owasp"]["LLM01:2025"]["attempts"]) in llm01
    for t in stored["rt"]["owasp_not_covered"]:
        assert any(t in ln and "not covered" in ln for ln in text.splitlines())
