"""MBPP's program assembly as lm-evaluation-harness's mbpp task does it: the prompt is prose, so the program run is
the answer, then the tests (``code_eval``'s ``prediction + "\\n" + reference``); HumanEval's ``build_predictions``
filter is what puts the prompt in front. A task whose every sample is a SyntaxError says so. The task files,
their code and their data are written here for the project."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.bench.quality.tasks import load_tasks
from tests.helpers.lmeval_models import ScriptedLM

PROSE_YAML = """task: prose_code_demo
output_type: generate_until
dataset_kwargs:
  data_files:
    test: problems.jsonl
test_split: test
doc_to_text: "Here is a job: {{text}} It must pass:\\n\\n{{checks[0]}}\\n{{checks[1]}}\\n[START]\\n"
doc_to_target: "{% if shot is defined %}{{solution}}\\n[END]{% else %}{{checks[0]}}\\n{{checks[1]}}{% endif %}"
target_delimiter: ""
metric_list:
  - metric: !function code_demo.pass_at_1
    aggregation: mean
    higher_is_better: true
generation_kwargs:
  until:
    - "[END]"
  do_sample: false
num_fewshot: 0
"""

PROBLEMS = [
    {"text": "Write a function triple that multiplies a number by three.",
     "solution": "def triple(x):\n    return 3 * x\n", "checks": ["assert triple(2) == 6", "assert triple(0) == 0"]},
    {"text": "Write a function initials that gives the first letter of each word.",
     "solution": "def initials(s):\n    return ''.join(w[0] for w in s.split())\n",
     "checks": ["assert initials('big red dog') == 'brd'", "assert initials('') == ''"]},
    {"text": "Write a function evens that keeps the even numbers of a list.",
     "solution": "def evens(xs):\n    return [x for x in xs if x % 2 == 0]\n",
     "checks": ["assert evens([1, 2, 3, 4]) == [2, 4]", "assert evens([]) == []"]},
]


def _write(tmp_path: Path, yaml_text: str = PROSE_YAML) -> Path:
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    path = tmp_path / "prose_code.yaml"
    path.write_text(yaml_text)
    return path


def _right(prompt: str) -> str:
    return next(p["solution"] for p in PROBLEMS if p["text"] in prompt)


def _wrong(prompt: str) -> str:
    return _right(prompt).replace("return ", "return None and ")


def _run(path: Path, answer, tmp_path: Path, name: str, **kw) -> dict:
    cfg = QualityConfig(model="x", tasks=str(path), **kw)
    model = ScriptedLM(lambda c: None, answer)
    return asyncio.run(run_quality(cfg, subject=Subject(model, cache=None),
                                   store=str(tmp_path / f"{name}.db"))).summary["tasks"]["prose_code_demo"]


def test_the_program_is_the_answer_then_the_tests_when_the_prompt_is_prose(tmp_path: Path) -> None:
    (t,) = load_tasks(str(_write(tmp_path)))
    assert t.program(0, "def triple(x):\n    return 3 * x\n") == \
        "def triple(x):\n    return 3 * x\n" + "\n" + "assert triple(2) == 6\nassert triple(0) == 0"


def test_oracle_scores_one_and_wrong_code_zero(tmp_path: Path) -> None:
    path = _write(tmp_path)
    right = _run(path, _right, tmp_path, "right")
    assert right["metrics"]["pass@1"]["mean"] == 1.0
    wrong = _run(path, _wrong, tmp_path, "wrong")
    assert wrong["metrics"]["pass@1"]["mean"] == 0.0
    assert not any("SyntaxError" in n for n in wrong["notes"])


def test_humaneval_style_build_predictions_keeps_the_prompt_in_front(tmp_path: Path) -> None:
    text = PROSE_YAML.replace("num_fewshot: 0\n", "num_fewshot: 0\nfilter_list:\n  - name: create_test\n    filter:\n"
                              "      - function: custom\n        filter_fn: !function code_demo.build_predictions\n")
    (t,) = load_tasks(str(_write(tmp_path, text)))
    assert t.program(0, "X").startswith(t.context(0) + "X\n")


def test_every_sample_a_syntax_error_is_said_in_the_task_note(tmp_path: Path) -> None:
    # a plain pass_at_k metric is assay's own convention (prompt + answer + tests): with a prose prompt every
    # program is a SyntaxError, and the note says so instead of a silent 0
    path = _write(tmp_path, PROSE_YAML.replace("  - metric: !function code_demo.pass_at_1", "  - metric: pass_at_k"))
    got = _run(path, _right, tmp_path, "prose")
    assert got["metrics"]["pass@1"]["mean"] == 0.0
    note = next(n for n in got["notes"] if "SyntaxError" in n)
    assert "every sample" in note and "3" in note


@pytest.mark.parametrize("trusted", [True])
def test_fewshot_samples_from_the_tasks_code_with_trust(tmp_path: Path, trusted: bool) -> None:
    (tmp_path / "code_demo.py").write_text(
        "def samples():\n"
        "    return [{'text': 'Write a function one that returns 1.', 'solution': 'def one():\\n    return 1',\n"
        "             'checks': ['assert one() == 1', 'assert one() + 1 == 2'], 'shot': True}]\n")
    text = PROSE_YAML.replace("num_fewshot: 0\n", "num_fewshot: 1\nfewshot_config:\n  sampler: first_n\n"
                              "  samples: !function code_demo.samples\n")
    path = _write(tmp_path, text)
    (t,) = load_tasks(str(path), trust_code=trusted)
    assert t.context(0).startswith("Here is a job: Write a function one that returns 1. It must pass:\n\n"
                                   "assert one() == 1\nassert one() + 1 == 2\n[START]\ndef one():\n    return 1\n[END]"
                                   "\n\nHere is a job: Write a function triple")
    right = _run(path, _right, tmp_path, "shots", trust_task_code=True)
    assert right["metrics"]["pass@1"]["mean"] == 1.0
