"""`assay simulate testset` as a user runs it (in-process): the estimate calls nothing, the set
it writes is scored by `assay eval --metrics document_recall,correctness` as it is."""

from __future__ import annotations

import json

import pytest

from assay.cli.main import run
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.testset_brain import EXAMPLE_DOCS, Brain, handbook_app


@pytest.fixture
def server():
    srv = FakeOpenAI().start()
    srv.default = Brain()
    yield srv
    srv.stop()


def test_estimate_makes_no_call(server, capsys):
    code = run(["simulate", "testset", "--docs", str(EXAMPLE_DOCS), "--n", "50", "--estimate",
                "--model", f"{server.base_url}#fake-judge", "--price", "0.5,1.5", "--seconds-per-call", "3"])
    text = capsys.readouterr().out
    assert code == 0 and server.requests == []
    assert "estimate for 50 item(s) (30 single_hop, 15 multi_hop, 5 unanswerable)" in text and "no call made" in text
    assert "if every try is kept: 180 calls" in text           # 30*3 + 15*5 + 5*3
    assert "at most (200 tries, --max-tries): 720 calls" in text
    assert "0.5 / 1.5 USD per 1M input / output tokens (--price)" in text and "3 s a call, 4 at once" in text


def test_estimate_prices_a_listed_model_without_a_key(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = run(["simulate", "testset", "--docs", str(EXAMPLE_DOCS), "--n", "10", "--estimate",
                "--model", "openai:gpt-4o-mini"])
    text = capsys.readouterr().out
    assert code == 0 and "(price table)" in text and "cost $0.0" in text


def _make_set(server, tmp_path, capsys, n=12):
    out = tmp_path / "testset.jsonl"
    code = run(["simulate", "testset", "--docs", str(EXAMPLE_DOCS), "--n", str(n), "--model",
                f"{server.base_url}#fake-judge", "--embedder", "words", "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert f"{n} item(s) written to" in text and "next: assay eval" in text
    return out, [json.loads(x) for x in out.read_text().splitlines()]


def _scores(run_dir, metric):
    rows = [json.loads(x) for x in (run_dir / "rows.jsonl").read_text().splitlines()]
    return rows, [r[f"outputs.{metric}.{metric}"] for r in rows if r.get(f"outputs.{metric}.{metric}") is not None]


def test_the_set_with_an_apps_answers_is_scored_by_assay_eval(server, tmp_path, capsys):
    """The app's answer and retrieved chunks added as Databricks columns; every column of the set as written."""
    _, items = _make_set(server, tmp_path, capsys)
    answered = tmp_path / "answered.jsonl"
    with answered.open("w") as fh:
        for item in items:
            got = handbook_app(item["request"])
            fh.write(json.dumps({**item, "response": got["response"], "retrieved_context": got["contexts"]}) + "\n")
    code = run(["eval", str(answered), "--metrics", "document_recall,correctness", "--judge",
                f"{server.base_url}#fake-judge", "--out", str(tmp_path / "run"), "--quiet"])
    assert code == 0, capsys.readouterr()
    rows, recall = _scores(tmp_path / "run", "document_recall")
    _, correct = _scores(tmp_path / "run", "correctness")
    answerable = [i for i in items if "expected_retrieved_context" in i]
    assert len(rows) == 12 and len(recall) == len(answerable) > 0 and len(correct) == 12
    assert all(0.0 <= v <= 1.0 for v in recall) and max(recall) == 1.0


def test_the_set_against_a_target_is_scored_for_correctness(server, tmp_path, capsys):
    out, items = _make_set(server, tmp_path, capsys)
    code = run(["eval", str(out), "--target", "tests.helpers.testset_brain:handbook_app", "--metrics", "correctness",
                "--judge", f"{server.base_url}#fake-judge", "--out", str(tmp_path / "run"), "--quiet"])
    assert code == 0, capsys.readouterr()
    rows, correct = _scores(tmp_path / "run", "correctness")
    assert len(rows) == len(correct) == 12


def test_the_set_against_a_target_is_scored_for_document_recall(server, tmp_path, capsys):
    out, items = _make_set(server, tmp_path, capsys)
    code = run(["eval", str(out), "--target", "tests.helpers.testset_brain:handbook_app", "--metrics",
                "document_recall", "--out", str(tmp_path / "run"), "--quiet"])
    assert code == 0, capsys.readouterr()
    _, recall = _scores(tmp_path / "run", "document_recall")
    assert len(recall) == sum(1 for i in items if "expected_retrieved_context" in i)


def test_fewer_than_asked_exits_3_with_the_reason(server, tmp_path, capsys):
    server.default = Brain(leak_every=1)
    code = run(["simulate", "testset", "--docs", str(EXAMPLE_DOCS), "--n", "3", "--mix", "unanswerable=1",
                "--model", f"{server.base_url}#fake-judge", "--embedder", "words", "--max-tries", "4",
                "--out", str(tmp_path / "t.jsonl"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 3
    assert "only 0 of 3 items: 3 unanswerable missing after 4 tries (the limit, --max-tries)" in " ".join(err.split())


@pytest.mark.parametrize("args,expect", [
    (["--n", "0", "--out", "t.jsonl"], "--n must be at least 1"),
    (["--mix", "two_hop=1", "--out", "t.jsonl"], "unknown question type 'two_hop'"),
    (["--styles", "shouty", "--out", "t.jsonl"], "unknown style 'shouty'"),
    (["--shape", "csv", "--out", "t.jsonl"], "--shape 'csv'"),
    ([], "give --out FILE"),
])
def test_bad_input_is_one_line_exit_2(server, capsys, args, expect):
    code = run(["simulate", "testset", "--docs", str(EXAMPLE_DOCS), "--model", f"{server.base_url}#fake-judge",
                "--embedder", "words", *args])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and expect in err and "Traceback" not in err and server.chat_requests == []
