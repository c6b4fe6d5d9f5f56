"""Conversations given one turn a line (`conversation_id` and `turn` columns) are judged as the same
conversations given whole: the conversation-level judges score each conversation once, on its last
turn, with the same scores; the per-turn metrics score every turn alike. The conversations are
made by the goal-driven simulator with planted apps (one forgets what it was told after three
turns, one remembers) and judged by the scripted loopback judge that reads the transcript
(tests/helpers/convo_brain.py)."""

from __future__ import annotations

import csv
import json
import random

import pytest

from assay.cli.main import run
from assay.simulate.goals import parse_goals
from assay.simulate.users import simulate_goals
from tests.helpers.convo_brain import Brain, forgetful_app, remembering_app
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.metrics.test_conversation_judges import GOALS, METRICS

SYSTEM = "You are the support assistant of a shop."


@pytest.fixture(scope="module")
def conversations(tmp_path_factory):
    """The two simulated conversations, given whole (one Azure conversation row each), a system
    message put first."""
    d = tmp_path_factory.mktemp("convrows")
    srv = FakeOpenAI().start()
    srv.default = Brain()
    rows = []
    try:
        for cid, app in (("forgets", forgetful_app), ("remembers", remembering_app)):
            out = d / f"{cid}.jsonl"
            simulate_goals(app, parse_goals(GOALS), model=f"{srv.base_url}#fake-judge", out=out)
            row = json.loads(out.read_text())
            row["conversation_id"] = cid
            row["conversation"]["messages"].insert(0, {"role": "system", "content": SYSTEM})
            rows.append(row)
    finally:
        srv.stop()
    return rows


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")     # every run asks the judge itself
    srv = FakeOpenAI().start()
    srv.default = Brain()
    yield srv
    srv.stop()


def turn_rows(whole: list[dict]) -> list[dict]:
    """The same conversations, one turn a line: the system message on the first turn only (as
    ``history``), the goal on the first turn only, every other conversation column on every turn."""
    out = []
    for row in whole:
        msgs = row["conversation"]["messages"]
        shared = {k: v for k, v in row.items() if k not in ("conversation", "goal")}
        pairs = [(msgs[i]["content"], msgs[i + 1]["content"]) for i in range(1, len(msgs) - 1, 2)]
        assert all(msgs[i]["role"] == "user" for i in range(1, len(msgs), 2))
        for t, (q, a) in enumerate(pairs):
            r = {**shared, "turn": t, "query": q, "response": a}
            if t == 0:
                r["history"] = [msgs[0]]
                r["goal"] = row["goal"]
            out.append(r)
    return out


def last_turn_ids(lines: list[dict]) -> dict[str, str]:
    """Each conversation's last row id (``<conversation_id>#<turn>``)."""
    n: dict[str, int] = {}
    for r in lines:
        n[r["conversation_id"]] = max(n.get(r["conversation_id"], 0), r["turn"])
    return {cid: f"{cid}#{t}" for cid, t in n.items()}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def evaluate(server, tmp_path, data, name, capsys, metrics="conversation,relevance"):
    out = tmp_path / f"run-{name}"
    code = run(["eval", str(data), "--metrics", metrics, "--judge", f"{server.base_url}#fake-judge",
                "--out", str(out), "--store", str(tmp_path / "s.db"), "--name", name, "--quiet"])
    captured = capsys.readouterr()
    text = captured.out
    assert code in (0, 1), text + captured.err
    rows = [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]
    return rows, json.loads((out / "summary.json").read_text()), text


def scores(rows):
    """Per row id, every output (score, result, reason) of every metric, and the turn as it was judged."""
    judged = tuple(f"inputs.{k}" for k in ("conversation_id", "turn", "turns", "history", "query", "response", "goal"))
    return {r["inputs.id"]: {k: v for k, v in r.items() if (k.startswith("outputs.") and not k.endswith("_properties"))
                             or k in judged} for r in rows}


def test_turn_rows_score_as_the_same_conversations_given_whole(conversations, server, tmp_path, capsys):
    whole_rows, whole, _ = evaluate(server, tmp_path, write_jsonl(tmp_path / "whole.jsonl", conversations),
                                    "whole", capsys)
    asked_whole = dict(server.default.calls)
    lines = turn_rows(conversations)
    random.Random(7).shuffle(lines)     # the turns of the two conversations interleaved and out of order
    per_rows, per_line, _ = evaluate(server, tmp_path, write_jsonl(tmp_path / "turns.jsonl", lines), "turns", capsys)

    assert len(per_rows) == len(whole_rows) == len(lines) > 6
    assert scores(per_rows) == scores(whole_rows)          # identical scores, reasons and verdicts, row by row
    ends = last_turn_ids(lines)
    last = {r["inputs.id"]: r for r in per_rows}
    forgets, remembers = last[ends["forgets"]], last[ends["remembers"]]
    assert forgets["outputs.knowledge_retention.knowledge_retention"] <= 2
    assert "order number again" in forgets["outputs.knowledge_retention.knowledge_retention_reason"]
    assert remembers["outputs.knowledge_retention.knowledge_retention"] == 5
    assert remembers["outputs.goal_met.goal_met"] == "yes"    # the goal, given on turn 0 only, reaches the last
    for r in per_rows:
        assert r["outputs.relevance.relevance"] is not None            # every turn scored per turn
        if r["inputs.id"] not in ends.values():
            for m in METRICS:
                assert r[f"outputs.{m}.{m}_result"] == "not_applicable"
    # each conversation judged once per conversation-level metric, as when given whole
    kr = "kept what it had been told"
    assert server.default.calls[kr] - asked_whole[kr] == asked_whole[kr] == 2
    assert per_line["metrics"] == whole["metrics"]        # the run's figures, per row and per conversation
    kr = per_line["metrics"]["knowledge_retention"]
    assert (kr["evaluated"], kr["conversations"], kr["passed"], kr["failed"]) == (2, 2, 1, 1)


def test_turn_rows_show_per_conversation_in_show_and_the_results(conversations, server, tmp_path, capsys):
    """`assay show` and summary.json give the conversation-level figure once per conversation, as for
    conversations given whole (two conversations, not twelve rows)."""
    data = tmp_path / "turns.csv"
    lines = turn_rows(conversations)
    cols = ["conversation_id", "turn", "query", "response", "goal"]
    with data.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, cols, extrasaction="ignore")
        w.writeheader()
        for r in lines:
            w.writerow({**r, "goal": r["goal"]["goal"] if "goal" in r else ""})    # a text goal, on turn 0
    rows, summary, _ = evaluate(server, tmp_path, data, "csv", capsys, metrics="knowledge_retention,goal_met")
    kr = summary["metrics"]["knowledge_retention"]
    assert kr["evaluated"] == 2 and kr["conversations"] == 2 and kr["conversation_mean"] == kr["mean"]
    ends = last_turn_ids(lines)
    assert [r["inputs.id"] for r in rows if r["outputs.goal_met.goal_met"] is not None] == [ends["forgets"], ends["remembers"]]
    assert run(["show", "csv", "--store", str(tmp_path / "s.db")]) == 0
    shown = capsys.readouterr().out
    assert "per conversation (2):" in shown
    assert "per conversation (2): conversation-level (the whole transcript): knowledge_retention 3.000, goal_met" \
        in " ".join(shown.split())


def test_the_dashboard_shows_turn_rows_as_one_conversation(conversations, server, tmp_path, capsys):
    """The dashboard's conversation view puts the turns given one a line back together: the system
    message, six turns in order, the knowledge_retention judgment once with its reason."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from assay.store import Store
    from assay.ui.server import create_app

    lines = turn_rows(conversations)
    lines.reverse()
    evaluate(server, tmp_path, write_jsonl(tmp_path / "turns.jsonl", lines), "view", capsys,
             metrics="knowledge_retention,relevance")
    st = Store(str(tmp_path / "s.db"))
    try:
        rid = st.get_run("view")["id"]
        view = TestClient(create_app(st), base_url="http://127.0.0.1").get(
            f"/api/runs/{rid}/conversations/forgets").json()["conversation"]
    finally:
        st.close()
    assert view["system"] == [{"role": "system", "text": SYSTEM}]
    assert [t["turn"] for t in view["turns"]] == [0, 1, 2, 3, 4, 5]
    assert view["turns"][0]["query"] == "My order number is 4417."
    assert [j["metric"] for j in view["judgments"]] == ["knowledge_retention"]
    assert view["judgments"][0]["value"] <= 2 and "order number again" in view["judgments"][0]["reason"]


def test_bad_turn_indexes_exit_2_with_one_line_and_no_traceback(server, tmp_path, capsys):
    data = tmp_path / "bad.jsonl"
    write_jsonl(data, [{"conversation_id": "c1", "turn": 0, "query": "My name is Ada.", "response": "Noted."},
                       {"conversation_id": "c1", "turn": 2, "query": "What is my name?", "response": "Ada."}])
    code = run(["eval", str(data), "--metrics", "knowledge_retention", "--judge", f"{server.base_url}#fake-judge",
                "--store", str(tmp_path / "s.db"), "--quiet"])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code == 2, text
    assert "Traceback" not in text
    line = next(x for x in text.splitlines() if "conversation 'c1'" in x)
    assert f"{data}, line 2, field 'turn': conversation 'c1' has no turn 1" in line
    assert server.default.calls == {}           # nothing was judged
