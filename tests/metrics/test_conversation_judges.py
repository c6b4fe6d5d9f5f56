"""Conversation-level judges (`assay eval conv.jsonl --metrics conversation`) on conversations the
goal-driven simulator made with planted apps, against a scripted loopback judge that reads the
transcript (tests/helpers/convo_brain.py): an app that forgets facts after three turns scores low
on knowledge_retention, one that remembers scores high; each conversation is judged once."""

from __future__ import annotations

import json

import pytest

from assay.cli.main import run
from assay.simulate.goals import parse_goals
from assay.simulate.users import simulate_goals
from tests.helpers.convo_brain import Brain, forgetful_app, remembering_app
from tests.helpers.fake_openai_server import FakeOpenAI

GOALS = """\
- id: refund
  persona: A customer whose order arrived broken.
  goal: Get a refund for my broken order.
  facts:
    order number: "4417"
    name: Ada
    city: Oslo
  done: The assistant says "refund started for order 4417".
  max_turns: 6
"""
METRICS = ("conversation_completeness", "knowledge_retention", "role_adherence", "goal_met", "user_frustration")


@pytest.fixture
def server():
    srv = FakeOpenAI().start()
    srv.default = Brain()
    yield srv
    srv.stop()


def _evaluate(server, tmp_path, app, capsys, name, metrics="conversation", *extra):
    conv = tmp_path / f"{name}.jsonl"
    simulate_goals(app, parse_goals(GOALS), model=f"{server.base_url}#fake-judge", out=conv)
    out = tmp_path / f"run-{name}"
    code = run(["eval", str(conv), "--metrics", metrics, "--judge", f"{server.base_url}#fake-judge",
                "--out", str(out), "--quiet", *extra])
    text = capsys.readouterr().out
    assert code in (0, 1), text
    return [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()], text


def _last(rows):
    return rows[-1]


def test_a_forgetful_app_scores_low_on_knowledge_retention_and_a_remembering_one_high(server, tmp_path, capsys):
    good, _ = _evaluate(server, tmp_path, remembering_app, capsys, "remembers")
    bad, _ = _evaluate(server, tmp_path, forgetful_app, capsys, "forgets")
    assert _last(good)["outputs.knowledge_retention.knowledge_retention"] == 5
    assert _last(good)["outputs.goal_met.goal_met"] == "yes"
    low = _last(bad)
    assert low["outputs.knowledge_retention.knowledge_retention"] <= 2
    assert "order number again" in low["outputs.knowledge_retention.knowledge_retention_reason"]
    assert low["outputs.goal_met.goal_met"] == "no"


def test_each_conversation_is_judged_once_on_its_last_turn(server, tmp_path, capsys):
    md = tmp_path / "summary.md"
    rows, text = _evaluate(server, tmp_path, remembering_app, capsys, "once", "conversation,relevance",
                           "--summary-md", str(md))
    summary = md.read_text()
    assert "### Per conversation" in summary
    assert "| relevance | turn (mean of turns) | 3.000 | 1 |" in summary
    assert "| knowledge\\_retention | conversation (whole transcript) | 5.000 | 1 |" in summary
    assert len(rows) == 5 and all(r["outputs.relevance.relevance"] is not None for r in rows)
    side_by_side = next(line for line in text.splitlines() if line.startswith("per conversation (1):"))
    assert "turn-level (mean of its turns): relevance " in side_by_side
    assert "conversation-level (the whole transcript): conversation_completeness" in side_by_side
    assert "knowledge_retention 5.000" in side_by_side
    for m in METRICS:
        assert rows[-1][f"outputs.{m}.{m}"] is not None
        for r in rows[:-1]:
            assert r[f"outputs.{m}.{m}_result"] == "not_applicable"
    assert server.default.calls["kept what it had been told"] == 1


def test_the_judge_reads_the_whole_transcript(server, tmp_path, capsys):
    """The verdict follows the content: the same conversation with the fact changed in the last answer fails."""
    conv = tmp_path / "c.jsonl"
    msgs = [{"role": "system", "content": "You are a support assistant."},
            {"role": "user", "content": "My order number is 4417."},
            {"role": "assistant", "content": "Noted: your order number is 4417."},
            {"role": "user", "content": "What is my order number?"},
            {"role": "assistant", "content": "Your order number is 4471."}]
    conv.write_text(json.dumps({"conversation": {"messages": msgs}}) + "\n"     # any Azure conversation:
                    + json.dumps({"conversation": {"messages": [*msgs[:-1], {**msgs[-1], "content":   # the reader
                                  "Your order number is 4417."}]}}) + "\n")                        # counts its turns
    out = tmp_path / "run"
    run(["eval", str(conv), "--metrics", "knowledge_retention", "--judge", f"{server.base_url}#fake-judge",
         "--out", str(out), "--quiet"])
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    scores = [r["outputs.knowledge_retention.knowledge_retention"] for r in rows]
    assert scores == [None, 2, None, 5]


def test_a_turn_given_alone_is_a_conversation_of_one_turn(server, tmp_path, capsys):
    """Rows given one turn a line (conversation_id and turn columns) are grouped into conversations
    (tests/metrics/test_conversation_turn_rows.py): a conversation of one row is judged on that row."""
    conv = tmp_path / "c.jsonl"
    conv.write_text(json.dumps({"conversation_id": "c1", "turn": 0, "query": "Hi", "response": "Hello"}) + "\n")
    out = tmp_path / "run"
    run(["eval", str(conv), "--metrics", "knowledge_retention", "--judge", f"{server.base_url}#fake-judge",
         "--out", str(out), "--quiet"])
    row = json.loads((out / "rows.jsonl").read_text())
    assert (row["inputs.turn"], row["inputs.turns"]) == (0, 1)
    assert row["outputs.knowledge_retention.knowledge_retention_reason"] == "the user stated no facts"


def test_judge_check_measures_every_conversation_judge_on_its_calibration_set(server, capsys):
    code = run(["judge", "check", "--judge", f"{server.base_url}#fake-judge", "--metrics", "conversation",
                "--json", "--quiet", "--no-save"])
    text = capsys.readouterr().out
    assert code == 0, text
    reports = json.loads(text)["metrics"]
    for m in METRICS:
        rep = reports[m]
        assert rep["cases"] in (24, 36) and rep["errors"] == 0 and rep["auc"]["groups"] == 12, rep
        assert rep["source"] == f"assay/judges/calibration/conversation_{m.replace('conversation_', '')}.jsonl"
    assert reports["knowledge_retention"]["swap_label"] == "history swap"
