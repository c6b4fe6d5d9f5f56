"""Goal-driven simulated users (`assay simulate users --goals`), against a scripted loopback model
(tests/helpers/convo_brain.py) and planted apps: a goal the app serves ends `met`, one it cannot
serve ends `abandoned` (not after max turns), tool results are simulated from a description,
and goal-file errors are one line naming the file, line and field."""

from __future__ import annotations

import json

import pytest

from assay.cli.main import run
from assay.errors import AssayError
from assay.simulate.goals import parse_goals
from assay.simulate.users import parse_verdict, simulate_goals
from tests.helpers.convo_brain import Brain, async_shipping_app, remembering_app, shipping_app, unhelpful_app
from tests.helpers.fake_openai_server import FakeOpenAI

REFUND = """\
goals:
  - id: refund
    persona: A customer whose order arrived broken.
    goal: Get a refund for my broken order.
    facts:
      order number: "4417"
      name: Ada
    done: The assistant says "refund started for order 4417".
    max_turns: 8
"""


@pytest.fixture
def server():
    srv = FakeOpenAI().start()
    srv.default = Brain()
    yield srv
    srv.stop()


def _model(server: FakeOpenAI) -> str:
    return f"{server.base_url}#fake-judge"


def test_a_goal_the_app_serves_ends_met_with_the_goal_attached(server, tmp_path):
    res = simulate_goals(remembering_app, parse_goals(REFUND), max_turns=12, model=_model(server),
                         out=tmp_path / "conv.jsonl")
    row = json.loads((tmp_path / "conv.jsonl").read_text())
    assert row["stop_reason"] == "met" and res.extra["stops"]["met"] == 1
    msgs = row["conversation"]["messages"]
    assert msgs[0] == {"role": "user", "content": "My order number is 4417."}
    assert "refund started for order 4417" in msgs[-1]["content"]
    assert row["user_turns"] == 4 and row["conversation_turns"] == 4 == sum(m["role"] == "assistant" for m in msgs)
    assert row["goal"]["goal"] == "Get a refund for my broken order." and row["goal"]["facts"] == [
        "order number: 4417", "name: Ada"]
    assert row["conversation_id"] == "refund" and row["stop_detail"]


def test_a_goal_the_app_cannot_serve_ends_abandoned_not_after_max_turns(server, tmp_path):
    res = simulate_goals(unhelpful_app, parse_goals(REFUND), max_turns=12, model=_model(server))
    row = res.rows[0]
    assert row["stop_reason"] == "abandoned" and row["user_turns"] == 1
    assert "cannot help" in row["stop_detail"]
    assert server.default.calls["verdict"] == 1


def test_an_open_goal_stops_at_the_goals_own_max_turns(server):
    goals = parse_goals(REFUND.replace('"refund started for order 4417"', '"a voucher was sent"')
                        .replace("max_turns: 8", "max_turns: 5"))
    row = simulate_goals(remembering_app, goals, max_turns=12, model=_model(server)).rows[0]
    assert row["stop_reason"] == "max_turns" and row["user_turns"] == 5
    assert sum(m["role"] == "user" for m in row["conversation"]["messages"]) == 5


@pytest.mark.parametrize("app, parcel", [(shipping_app, "P-77"), (async_shipping_app, "P-78")])
def test_a_tool_result_is_simulated_from_its_description(server, app, parcel):
    goals = parse_goals("""\
- goal: Find out where my parcel is.
  done: The assistant says "parcel is shipped".
  tools:
    - name: track_parcel
      description: Returns the parcel's status as JSON.
""")
    row = simulate_goals(app, goals, model=_model(server)).rows[0]
    msgs = row["conversation"]["messages"]
    call = next(m for m in msgs if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "track_parcel"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"parcel": parcel}
    assert "Returns the parcel's status as JSON." in next(
        r for r in server.chat_requests if "You play the tool" in r["body"]["messages"][0]["content"]
    )["body"]["messages"][0]["content"]
    result = next(m for m in msgs if m["role"] == "tool")
    assert json.loads(result["content"])["status"] == "shipped"
    assert row["stop_reason"] == "met" and msgs[-1]["content"] == "Your parcel is shipped."


def test_the_verdict_must_be_strict_json_with_a_known_status():
    assert parse_verdict('{"status": "met", "reason": "done"}') == ("met", "done")
    assert parse_verdict('```json\n{"status": "Abandoned", "reason": "x"}\n```') == ("abandoned", "x")
    assert parse_verdict("met") is None
    assert parse_verdict('{"status": "finished"}') is None


def test_the_cli_writes_the_conversations_and_says_why_each_stopped(server, tmp_path, capsys):
    goals = tmp_path / "goals.yaml"
    goals.write_text(REFUND)
    out = tmp_path / "conv.jsonl"
    code = run(["simulate", "users", "--target", "tests.helpers.convo_brain:unhelpful_app", "--goals", str(goals),
                "--max-turns", "12", "--model", _model(server), "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "stopped: 1 abandoned" in text and "--metrics conversation" in text
    assert json.loads(out.read_text())["stop_reason"] == "abandoned"


@pytest.mark.parametrize("body, expect", [
    ("goals:\n  - goal: x\n", "g.yaml:2: goals[0].done: missing"),
    ("- goal: x\n  done: y\n  max_turns: 0\n", "g.yaml:3: goals[0].max_turns: must be a whole number of at least 1, got '0'"),
    ("- goal: x\n  done: y\n  colour: red\n", "g.yaml:3: goals[0].colour: unknown field"),
    ("- goal: x\n  done: y\n  tools:\n    - name: t\n", "g.yaml:4: goals[0].tools[0].description: missing"),
    ("- goal: x\n  done: y\n- goal: [a, b]\n  done: y\n", "g.yaml:3: goals[1].goal: must be a text"),
    ("goals: []\n", "g.yaml:1: goals: the list is empty"),
    ("- goal: x\n  done: y\n  facts: {a: [1]}\n", "g.yaml:3: goals[0].facts.a: must be a text"),
    ("- goal: x\n   done: y\n", "g.yaml:2: not YAML"),
])
def test_goal_file_errors_are_one_line_naming_file_line_and_field(body, expect):
    with pytest.raises(AssayError) as exc:
        parse_goals(body, "g.yaml")
    assert str(exc.value).startswith(expect) and "\n" not in str(exc.value)


def test_the_cli_reports_a_bad_goal_file_in_one_line(tmp_path, capsys):
    goals = tmp_path / "goals.yaml"
    goals.write_text("- goal: x\n  done: y\n  max_turns: many\n")
    code = run(["simulate", "users", "--target", "tests.helpers.convo_brain:unhelpful_app", "--goals", str(goals),
                "--out", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err
    assert code == 2 and f"{goals}:3: goals[0].max_turns: must be a whole number" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
