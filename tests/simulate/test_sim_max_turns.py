"""``assay simulate users``: ``--max-turns`` caps goal-driven conversations (``--goals``), ``--turns``
is the fixed length of --text/--tasks ones. Each given in the other mode used to be ignored without
a word; now it is a one-line error naming the option to use, and the right option still applies."""

from __future__ import annotations

import json

import pytest

from assay.cli.main import run
from tests.helpers.convo_brain import Brain
from tests.helpers.fake_openai_server import FakeOpenAI

REFUND = """\
- persona: A customer whose order arrived broken.
  goal: Get a refund for my broken order.
  facts:
    order number: "4417"
    name: Ada
  done: The assistant says "refund started for order 4417".
"""
GOAL = "- goal: Get a refund for my broken order.\n  done: The assistant starts the refund.\n"


@pytest.fixture
def server():
    srv = FakeOpenAI().start()
    srv.default = Brain()
    yield srv
    srv.stop()


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int) -> str:
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_max_turns_without_goals_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "tasks.txt").write_text("find out when the shop opens\n")
    code = run(["simulate", "users", "--target", "tests.helpers.convo_brain:unhelpful_app", "--tasks",
                str(tmp_path / "tasks.txt"), "--max-turns", "2", "--out", str(tmp_path / "c.jsonl")])
    err = _one_line_error(capsys, code)
    assert "--max-turns caps goal-driven conversations (--goals)" in err and "give --turns N" in err
    assert not (tmp_path / "c.jsonl").exists()


def test_turns_with_goals_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "g.yaml").write_text(GOAL)
    code = run(["simulate", "users", "--target", "tests.helpers.convo_brain:unhelpful_app", "--goals",
                str(tmp_path / "g.yaml"), "--turns", "2", "--out", str(tmp_path / "c.jsonl")])
    err = _one_line_error(capsys, code)
    assert "cap it with --max-turns N" in err
    assert not (tmp_path / "c.jsonl").exists()


def test_turns_sets_the_length_of_task_conversations(server, tmp_path, capsys):
    (tmp_path / "tasks.txt").write_text("find out when the shop opens\n")
    out = tmp_path / "c.jsonl"
    code = run(["simulate", "users", "--target", "tests.helpers.convo_brain:unhelpful_app", "--tasks",
                str(tmp_path / "tasks.txt"), "--turns", "2", "--model", f"{server.base_url}#fake",
                "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    msgs = json.loads(out.read_text().splitlines()[0])["conversation"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 2


def test_max_turns_caps_goal_conversations(server, tmp_path, capsys):
    (tmp_path / "g.yaml").write_text(REFUND)            # met on the 4th turn when not capped
    out = tmp_path / "c.jsonl"
    code = run(["simulate", "users", "--target", "tests.helpers.convo_brain:remembering_app", "--goals",
                str(tmp_path / "g.yaml"), "--max-turns", "2", "--model", f"{server.base_url}#fake",
                "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    row = json.loads(out.read_text())
    assert row["user_turns"] == 2 and row["stop_reason"] == "max_turns"
