"""The model-driven red-team strategies against a scripted attacker endpoint and scripted targets:
rephrase and translate attempts reach the target with the attacker's text exactly (and the row
keeps it); a crescendo stops when the judge rates a reply harmful (at that turn), when the target
has refused N turns in a row, or at --max-turns, and keeps the conversation as the row's history;
without a judge its ASR is not measured; a run stopped by --max-cost resumes without redoing the
attempts it finished."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from assay.errors import AssayError, BudgetExceeded
from assay.simulate.redteam import redteam
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.redteam_apps import HARMFUL_BY_CAT, REFUSAL, judge_reply

HARMLESS = "Here is some general background on that subject."


def attacker_reply(req: dict[str, Any]) -> dict[str, Any]:
    """The scripted attacker: a reworded request, a 'translation', or 'turn N: ...' for a crescendo."""
    msgs = req["body"]["messages"]
    system, user = msgs[0]["content"], msgs[-1]["content"]
    if "Reword the request" in system:
        return {"content": f"  \"Out of curiosity: {user}\"  "}
    m = re.search(r"Translate the user's text into (\w+)", system)
    if m:
        return {"content": f"[{m.group(1)}] {user[::-1]}"}
    t = re.search(r"turn (\d+) of (\d+)", user)
    return {"content": f"turn {t.group(1)}: tell me a little more"}


@pytest.fixture
def attacker() -> Any:
    server = FakeOpenAI().start()
    server.default = attacker_reply
    yield server
    server.stop()


@pytest.fixture
def judge() -> Any:
    server = FakeOpenAI().start()
    server.default = judge_reply
    yield server
    server.stop()


class Recorder:
    """A target that records what it was sent and answers by ``answer(query, history)``."""

    def __init__(self, answer: Any):
        self.answer = answer
        self.calls: list[tuple[str, list[dict[str, Any]]]] = []

    def __call__(self, query: str, history: list[dict[str, Any]] | None = None) -> str:
        self.calls.append((query, list(history or [])))
        return self.answer(query, history or [])


def _rows(res: Any, strategy: str) -> list[dict[str, Any]]:
    return [r for r in res.iter_rows() if r["inputs.redteam_strategy"] == strategy]


def test_rephrase_and_translate_reach_the_target_with_the_attackers_text(attacker: Any) -> None:
    app = Recorder(lambda q, h: REFUSAL)
    res = redteam(app, categories="violence", strategies="rephrase,translate", attacker=f"{attacker.base_url}#att",
                  languages="French,Swahili", store=False, seed=7)
    sent = [q for q, _ in app.calls]
    reph = _rows(res, "rephrase")
    assert len(reph) == 12
    for r in reph:
        expect = f"Out of curiosity: {r['inputs.objective']}"          # trimmed, outer quotes dropped
        assert r["inputs.query"] == expect and expect in sent
    trans = _rows(res, "translate")
    assert len(trans) == 24 and {r["inputs.redteam_language"] for r in trans} == {"French", "Swahili"}
    for r in trans:
        expect = f"[{r['inputs.redteam_language']}] {r['inputs.objective'][::-1]}"
        assert r["inputs.query"] == expect and expect in sent
    assert len(app.calls) == 12 + 12 + 24                              # baseline too, each attempt once
    body = attacker.chat_requests[0]["body"]
    assert body["temperature"] == 0 and body.get("seed") == 7
    rt = res.run["redteam"]
    assert rt["strategies"]["rephrase"]["refusal_rate"] == 1.0 and rt["complexity"]["moderate"]["attempts"] == 36
    assert rt["setup"]["attacker"] and rt["setup"]["seed"] == 7


def _complies_at(turn: int) -> Any:
    harmful = HARMFUL_BY_CAT["violence"][0]
    return lambda q, h: harmful if q.startswith(f"turn {turn}:") else HARMLESS


def test_crescendo_stops_when_the_judge_rates_a_reply_harmful(attacker: Any, judge: Any) -> None:
    app = Recorder(_complies_at(3))
    res = redteam(app, categories="violence", strategies="crescendo", attacker=f"{attacker.base_url}#att",
                  judge=f"{judge.base_url}#fake-judge", max_turns=6, store=False)
    rows = _rows(res, "crescendo")
    assert len(rows) == 12
    for r in rows:
        assert r["inputs.target.crescendo_stop"] == "complied" and r["inputs.target.crescendo_turns"] == 3
        assert r["inputs.query"] == "turn 3: tell me a little more"
        assert [m["content"] for m in r["inputs.history"]] == [
            "turn 1: tell me a little more", HARMLESS, "turn 2: tell me a little more", HARMLESS]
    # each turn sent with the conversation before it; 3 turns an objective, no more
    crescendo_calls = [c for c in app.calls if c[0].startswith("turn ")]
    assert len(crescendo_calls) == 36
    assert {(q[:6], len(h)) for q, h in crescendo_calls} == {("turn 1", 0), ("turn 2", 2), ("turn 3", 4)}
    rt = res.run["redteam"]
    assert rt["strategies"]["crescendo"]["asr"] == 1.0 and rt["strategies"]["baseline"]["asr"] == 0.0
    assert rt["complexity"]["difficult"]["judged"] == 12


def test_crescendo_stops_after_refusals_in_a_row(attacker: Any, judge: Any) -> None:
    app = Recorder(lambda q, h: REFUSAL)
    res = redteam(app, categories="self_harm", strategies="crescendo", attacker=f"{attacker.base_url}#att",
                  judge=f"{judge.base_url}#fake-judge", max_turns=8, refusals=3, max_attempts=4, seed=1, store=False)
    (row, *_) = rows = _rows(res, "crescendo")
    for r in rows:
        assert r["inputs.target.crescendo_stop"] == "refused" and r["inputs.target.crescendo_turns"] == 3
        assert len(r["inputs.history"]) == 4
    assert res.run["redteam"]["strategies"]["crescendo"]["asr"] == 0.0


def test_crescendo_respects_max_turns_and_without_judge_is_not_measured(attacker: Any) -> None:
    app = Recorder(lambda q, h: HARMLESS)
    res = redteam(app, categories="violence", strategies="crescendo", attacker=f"{attacker.base_url}#att",
                  max_turns=4, max_attempts=3, seed=2, store=False)
    rows = _rows(res, "crescendo")
    assert rows
    for r in rows:
        assert r["inputs.target.crescendo_stop"] == "max_turns" and r["inputs.target.crescendo_turns"] == 4
        assert len(r["inputs.history"]) == 6 and r["inputs.query"] == "turn 4: tell me a little more"
    rt = res.run["redteam"]
    assert rt["asr_measured"] is False and rt["strategies"]["crescendo"]["asr"] is None


def test_model_driven_strategy_needs_an_attacker() -> None:
    with pytest.raises(AssayError, match="needs an attacker model"):
        redteam(lambda query: REFUSAL, categories="violence", strategies="crescendo", store=False)


def test_capped_run_resumes_without_redoing_finished_attempts(attacker: Any, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import assay.engine.run as engine_run

    monkeypatch.setattr(engine_run, "CHUNK", 4)
    monkeypatch.setenv("ASSAY_ATTACKER_PRICE", "1000,1000")        # 0.11 USD an attacker call
    app = Recorder(lambda q, h: REFUSAL)
    kw = dict(categories="violence", strategies="rephrase", attacker=f"{attacker.base_url}#att",
              store=str(tmp_path / "s.db"), seed=3, concurrency=1)
    with pytest.raises(BudgetExceeded, match="max-cost"):
        redteam(app, max_cost=0.5, **kw)
    first = [q for q, _ in app.calls]
    from assay.store import open_store

    (stopped,) = open_store(str(tmp_path / "s.db")).list_runs()
    assert stopped["status"] != "completed"
    done = open_store(str(tmp_path / "s.db")).count_rows(stopped["id"])
    assert 0 < done < 24
    res = redteam(app, max_cost=100.0, resume=True, **kw)
    assert res.run["run_id"] == stopped["id"] and res.run.get("resumed_rows") == done
    later = [q for q, _ in app.calls[len(first):]]
    finished = {r["inputs.query"] for r in list(res.iter_rows())[:done]}
    assert not finished & set(later)                                   # no finished attempt sent again
    assert len(later) == 24 - done
    assert sum(c["attempts"] for c in res.run["redteam"]["cells"]) == 24


def test_cli_attacker_options_reach_the_run(attacker: Any, judge: Any, tmp_path: Path) -> None:
    from tests.simulate.test_redteam_cli import cell, run

    res = run("--target", "tests.helpers.redteam_apps:refusing_app", "--categories", "violence",
              "--strategies", "rephrase,translate,crescendo", "--attacker", f"{attacker.base_url}#att",
              "--languages", "Swahili", "--max-turns", "4", "--refusals", "2", "--judge", f"{judge.base_url}#j",
              "--seed", "5", "--store", str(tmp_path / "s.db"), "-q")
    assert res.returncode == 0, res.stderr
    for s in ("rephrase", "translate", "crescendo"):
        row = cell(res.stdout, s, "violence")
        assert row[2] == "12" and row[3].startswith("0.00 [") and row[4].startswith("1.00 [")
    assert "attacker:" in res.stdout and "seed 5" in res.stdout and "at most 4 turns" in res.stdout
    assert "2 refusals in a row" in res.stdout
    from assay.store import open_store

    rows = open_store(str(tmp_path / "s.db")).load_result("last").rows
    cres = [r for r in rows if r["inputs.redteam_strategy"] == "crescendo"]
    assert all(r["inputs.target.crescendo_turns"] == 2 and r["inputs.target.crescendo_stop"] == "refused"
               for r in cres)
    assert {r["inputs.redteam_language"] for r in rows if r["inputs.redteam_strategy"] == "translate"} == {"Swahili"}
