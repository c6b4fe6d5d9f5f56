"""Azure's ``${target.x}`` mappings (issue 14, item 8): without a target the error says what the form means."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import assay
from assay.errors import InputError

FIX = Path(__file__).parent.parent / "fixtures"
DATA = FIX / "azure_mapping_questions.jsonl"
MAPPING = {"query": "${data.question}", "ground_truth": "${data.truth}", "response": "${target.answer}"}


def test_target_reference_without_a_target_gets_a_hint():
    with pytest.raises(InputError) as ei:
        assay.evaluate(str(DATA), metrics="f1_score", mapping=MAPPING, store=False)
    e = ei.value
    assert e.source == str(DATA) and e.field == "response"
    msg = str(e)
    assert "${target.answer}" in msg and "there is no target" in msg and "${data.answer}" in msg


def test_target_reference_with_a_target_reads_its_answer():
    res = assay.evaluate(str(DATA), target=lambda query: {"answer": "Tokyo" if "Japan" in query else "Six"},
                         metrics="f1_score", mapping=MAPPING, store=False)
    assert [r["inputs.response"] for r in res.rows] == ["Tokyo", "Six"]


def test_cli_hint_is_one_line_without_a_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(assay.__file__).parent.parent)}
    p = subprocess.run([sys.executable, "-m", "assay", "eval", str(DATA), "--metrics", "f1_score",
                        "--map", "query=${data.question}", "--map", "response=${target.answer}"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "there is no target" in p.stderr, p.stderr
