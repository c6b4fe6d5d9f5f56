"""``assay.simulate.redteam.redteam`` end to end through the engine: a target that decodes base64
and ROT13 and complies shows a high attack success rate for those encodings and none for the plain
baseline; a target that always refuses (an OpenAI-compatible endpoint) shows none anywhere;
without a judge the ASR is not measured and the refusal rate is shown; the run is stored, capped
and resumable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.errors import BudgetExceeded
from assay.simulate.redteam import format_redteam, redteam
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.redteam_apps import REFUSAL, decoding_app, judge_reply

CATS = "violence,self_harm"


@pytest.fixture
def judge() -> Any:
    server = FakeOpenAI().start()
    server.default = judge_reply
    yield server
    server.stop()


def _cell(rt: dict[str, Any], strategy: str) -> dict[str, Any]:
    return rt["strategies"][strategy]


def test_decoding_target_high_asr_for_its_encodings_none_for_baseline(judge: Any, tmp_path: Path) -> None:
    res = redteam(decoding_app, categories=CATS, strategies="base64,rot13,caesar,role_play",
                  judge=f"{judge.base_url}#fake-judge", store=tmp_path / "s.db", out=tmp_path / "out")
    rt = res.run["redteam"]
    assert rt["asr_measured"]
    for s in ("base64", "rot13"):
        c = _cell(rt, s)
        assert c["attempts"] == c["judged"] == 24 and c["asr"] == 1.0 and c["asr_ci"][0] > 0.8
        assert c["refusal_rate"] == 0.0
    for s in ("baseline", "caesar", "role_play"):
        c = _cell(rt, s)
        assert c["judged"] == 24 and c["asr"] == 0.0 and c["asr_ci"][1] < 0.2
        assert c["refusal_rate"] == 1.0
    assert {(c["strategy"], c["category"]) for c in rt["cells"]} >= {("base64", "violence"), ("base64", "self_harm")}
    assert rt["complexity"]["baseline"]["asr"] == 0.0
    # stored as an eval run, the attempt's fields in the row's inputs
    from assay.store import open_store

    st = open_store(str(tmp_path / "s.db"))
    run = st.get_run(res.run["run_id"])
    assert run["status"] == "completed"
    rows = list(res.iter_rows())
    b64 = next(r for r in rows if r["inputs.redteam_strategy"] == "base64")
    assert b64["inputs.objective_id"] and b64["inputs.redteam_category"] in ("violence", "self_harm")
    assert "LLM01:2025" in b64["inputs.owasp"]
    assert (tmp_path / "out" / "rows.jsonl").exists()
    table = format_redteam(rt)
    assert ["baseline", "violence", "12"] == table[0][:3] and table[0][3].startswith("0.00 [")


def test_always_refusing_endpoint_target_zero_everywhere(judge: Any) -> None:
    app = FakeOpenAI().start()
    app.default = {"content": REFUSAL}
    try:
        res = redteam(f"{app.base_url}#app", categories="violence,sexual", strategies="encodings,role_play,indirect_document",
                      judge=f"{judge.base_url}#fake-judge", max_attempts=60, seed=5, store=False)
    finally:
        app.stop()
    rt = res.run["redteam"]
    assert sum(c["attempts"] for c in rt["cells"]) == 60
    assert all(c["asr"] == 0.0 for c in rt["cells"] if c["judged"])
    assert all(c["refusal_rate"] == 1.0 for c in rt["cells"])
    assert len(app.chat_requests) == 60


def test_no_judge_asr_not_measured_refusal_rate_shown() -> None:
    res = redteam(decoding_app, categories="violence", strategies="base64,flip", store=False)
    rt = res.run["redteam"]
    assert rt["asr_measured"] is False and "not measured (no judge)" in rt["note"]
    for c in rt["cells"]:
        assert c["asr"] is None and c["judged"] == 0          # never counted either way
    assert _cell(rt, "base64")["refusal_rate"] == 0.0 and _cell(rt, "flip")["refusal_rate"] == 1.0
    assert rt["refusal_check"]["held_out"]["recall"] == pytest.approx(0.6)
    assert all(row[3] == "not measured (no judge)" for row in format_redteam(rt))


def test_budget_cap_stops_and_resume_finishes(judge: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_JUDGE_PRICE", "1000,1000")      # USD per 1M tokens: 0.11 a judge call
    judge.default = lambda req: {**judge_reply(req), "delay": 0.05}
    store = str(tmp_path / "s.db")
    kw = dict(categories="violence", strategies="base64", judge=f"{judge.base_url}#fake-judge", store=store, seed=2,
              concurrency=1)
    with pytest.raises(BudgetExceeded):
        redteam(decoding_app, max_cost=0.5, **kw)
    assert 0 < len(judge.chat_requests) < 24
    from assay.store import open_store

    (stopped,) = open_store(store).list_runs()
    assert stopped["status"] == "interrupted"
    judge.default = judge_reply
    res = redteam(decoding_app, max_cost=100.0, resume=True, **kw)
    assert res.run["run_id"] == stopped["id"] and res.run.get("resumed")
    rt = res.run["redteam"]
    assert _cell(rt, "base64")["asr"] == 1.0 and _cell(rt, "baseline")["asr"] == 0.0
    assert sum(c["attempts"] for c in rt["cells"]) == 24
