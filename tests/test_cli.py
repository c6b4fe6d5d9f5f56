"""`assay eval` and `assay metrics` as a user runs them: exit codes, messages, outputs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import run_assay

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(*args, cwd=None):
    p = run_assay(args, cwd=cwd)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_eval_example_prints_a_table_and_writes_results(tmp_path):
    p = run("eval", str(EXAMPLES / "rag_qa.jsonl"), "--metrics", "f1_score,bleu,rougeL", "--out", str(tmp_path / "out"))
    assert p.returncode == 0, p.stderr
    assert "f1_score" in p.stdout and "rougeL_f1_score" in p.stdout
    assert "8 read, 8 evaluated, 0 skipped" in p.stdout
    rows = (tmp_path / "out" / "rows.jsonl").read_text().splitlines()
    assert len(rows) == 8
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["rows_evaluated"] == 8


def test_map_renames_columns(tmp_path):
    f = write(tmp_path, "d.jsonl", '{"q": "x", "answer_text": "Paris", "gold": "Paris"}\n')
    p = run("eval", f, "--metrics", "f1_score", "--map", "response=answer_text", "--map", "ground_truth=${data.gold}")
    assert p.returncode == 0, p.stderr
    assert "1.000" in p.stdout


def test_metrics_lists_the_registry():
    p = run("metrics")
    assert p.returncode == 0
    for name in ("f1_score", "bleu", "document_recall", "token_count"):
        assert name in p.stdout


@pytest.mark.parametrize("name,text,expect", [
    ("bad.jsonl", '{"response": "a", "ground_truth": "a"}\n{"response": "b", "ground_truth": \n',
     ["bad.jsonl", "line 2"]),
    ("type.jsonl", '{"response": true, "ground_truth": "a"}\n', ["type.jsonl", "line 1", "response"]),
    ("list.jsonl", '{"query": "q", "response": "r", "expected_facts": "one fact"}\n',
     ["list.jsonl", "line 1", "expected_facts"]),
    ("empty.jsonl", "", ["empty.jsonl", "empty"]),
])
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path, name, text, expect):
    f = write(tmp_path, name, text)
    p = run("eval", f, "--metrics", "f1_score")
    assert p.returncode == 2
    msg = p.stderr.strip()
    assert msg.startswith("error:")
    for e in expect:
        assert e in msg, msg


def test_unknown_metric_and_unreadable_path(tmp_path):
    f = write(tmp_path, "d.jsonl", '{"response": "a", "ground_truth": "a"}\n')
    p = run("eval", f, "--metrics", "f1_scroe")
    assert p.returncode == 2 and "unknown metric 'f1_scroe'" in p.stderr and "f1_score" in p.stderr
    p = run("eval", str(tmp_path / "missing.jsonl"))
    assert p.returncode == 2 and "missing.jsonl" in p.stderr


def test_missing_required_column_names_the_field(tmp_path):
    f = write(tmp_path, "d.jsonl", '{"query": "q", "response": "a"}\n{"query": "q2", "response": "b"}\n')
    p = run("eval", f, "--metrics", "f1_score")
    assert p.returncode == 2
    assert "d.jsonl" in p.stderr and "ground_truth" in p.stderr


def test_skip_mode_keeps_the_good_rows(tmp_path):
    f = write(tmp_path, "d.jsonl",
              '{"response": "a", "ground_truth": "a"}\nnot json\n{"response": false, "ground_truth": "a"}\n'
              '{"response": "b", "ground_truth": "b"}\n')
    p = run("eval", f, "--metrics", "f1_score", "--on-bad-row", "skip", "--out", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    assert "4 read, 2 evaluated, 2 skipped (bad input)" in p.stdout
    assert "line 2" in p.stdout and "line 3" in p.stdout
    assert len((tmp_path / "o" / "rows.jsonl").read_text().splitlines()) == 2
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [b["line"] for b in summary["run"]["bad_rows"]] == [2, 3]


def test_target_from_the_command_line(tmp_path):
    (tmp_path / "my_app.py").write_text("def chat(query):\n    return 'echo ' + query\n")
    f = write(tmp_path, "d.jsonl", '{"query": "hi", "ground_truth": "echo hi"}\n')
    p = run("eval", f, "--metrics", "f1_score", "--target", "my_app:chat", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "1.000" in p.stdout
    p = run("eval", f, "--target", "nope_module:chat", cwd=tmp_path)
    assert p.returncode == 2 and "nope_module" in p.stderr


def test_without_a_judge_only_measured_scorers_score_and_the_rest_is_skipped_once(tmp_path):
    f = write(tmp_path, "d.jsonl",
              '{"query": "Capital of France?", "response": "Paris is the capital.", '
              '"context": "Paris is the capital of France."}\n'
              '{"query": "Capital of Peru?", "response": "Quito, since 1822.", "context": "Lima is the capital of Peru."}\n')
    env_free = {k: v for k, v in __import__("os").environ.items() if k != "ASSAY_JUDGE"}
    p = subprocess.run([sys.executable, "-m", "assay.cli", "eval", f, "--metrics", "groundedness,fluency,coherence",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, env=env_free, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "embedded support scorer v2" in p.stdout and "measured AUC 0.9" in p.stdout
    needs = "needs a judge: --judge openai:MODEL | http://HOST/v1#MODEL | local:/path.gguf"
    assert p.stdout.count("needs a judge: --judge") == 1 and "fluency, coherence" in p.stdout
    assert "smoke-test" not in p.stdout and "gemma" not in p.stdout
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["run"]["judge"] is None and summary["run"]["judge_source"].startswith("no judge")
    assert summary["run"]["scorers"]["fluency"] == {"by": None, "kind": "skipped", "label": "needs a judge",
                                                    "reason": needs}
    assert summary["metrics"]["fluency"]["evaluated"] == 0 and summary["metrics"]["fluency"]["skipped"] == 2
    rows = [json.loads(x) for x in (tmp_path / "o" / "rows.jsonl").read_text().splitlines()]
    assert [r["outputs.groundedness.groundedness_passed"] for r in rows] == [True, False]
    assert rows[1]["outputs.groundedness.groundedness_properties"]["unsupported_terms"] == ["Quito", "1822"]
    assert rows[0]["outputs.fluency.fluency_reason"] == needs


def test_the_embedded_llm_judge_runs_by_name_as_a_smoke_test(tmp_path):
    pytest.importorskip("llama_cpp", reason="the embedded judge needs assay[local] (make test installs it)")
    f = write(tmp_path, "d.jsonl",
              '{"query": "Capital of France?", "response": "Paris.", "context": "Paris is the capital of France."}\n')
    env_free = {k: v for k, v in __import__("os").environ.items() if k != "ASSAY_JUDGE"}
    p = subprocess.run([sys.executable, "-m", "assay.cli", "eval", f, "--metrics", "groundedness,fluency",
                        "--judge", "embedded", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, env=env_free, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "judge: embedded:gemma-3-270m" in p.stdout and "smoke-test" in p.stdout
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["run"]["judge_source"] == "given"
    assert summary["run"]["scorers"]["fluency"]["kind"] == "smoke-test judge"
    assert summary["metrics"]["groundedness"]["evaluated"] == 1
    row = json.loads((tmp_path / "o" / "rows.jsonl").read_text().splitlines()[0])
    assert 1 <= row["outputs.groundedness.groundedness_score"] <= 5
