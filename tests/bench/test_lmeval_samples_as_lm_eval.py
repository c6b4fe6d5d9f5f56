"""The per-sample file of ``--output-lm-eval`` holds what lm-evaluation-harness 0.4 logs for the same item (found
by ``benchmarks/bench_lmeval_tasks16.py`` on lm-eval's own humaneval file): the filtered response of HumanEval's
``build_predictions`` filter is the program it builds (prompt + completion, a list per request), not the
completion alone. The task, its code and its data are written here for the project."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from tests.helpers.lmeval_models import ScriptedLM


def _samples(out: Path, task: str) -> list[dict]:
    (f,) = sorted(out.glob(f"*/samples_{task}_*.jsonl"))
    return [json.loads(x) for x in f.read_text().splitlines() if x.strip()]


def _run(path: Path, answer, out: Path) -> None:
    model = ScriptedLM(lambda c: None, answer)
    cfg = QualityConfig(model=model, tasks=str(path), trust_task_code=True)
    asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None, lm_eval_out=out))


CODE_YAML = """task: prompt_code_demo
output_type: generate_until
dataset_kwargs:
  data_files:
    test: problems.jsonl
test_split: test
doc_to_text: "{{prompt}}"
doc_to_target: "{{test}}\\ncheck({{entry_point}})"
metric_list:
  - metric: !function code_demo.pass_at_k
    aggregation: mean
    higher_is_better: true
    k: [1]
generation_kwargs:
  until:
    - "\\ndef"
  do_sample: false
repeats: 1
num_fewshot: 0
filter_list:
  - name: "create_test"
    filter:
      - function: "custom"
        filter_fn: !function code_demo.build_predictions
"""

CODE = '''
def build_predictions(resps, docs):
    return [[doc["prompt"] + r for r in resp] for resp, doc in zip(resps, docs)]


def pass_at_k(references, predictions, k=None):
    raise RuntimeError("not called: assay runs the programs itself")
'''

PROBLEMS = [{"prompt": "def double(x):\n    \"\"\"Twice x.\"\"\"\n", "entry_point": "double",
             "test": "def check(f):\n    assert f(2) == 4", "body": "    return 2 * x\n"},
            {"prompt": "def last(xs):\n    \"\"\"The last element.\"\"\"\n", "entry_point": "last",
             "test": "def check(f):\n    assert f([1, 2]) == 2", "body": "    return xs[-1]\n"}]


def test_the_build_predictions_filter_is_logged_as_the_program_it_builds(tmp_path: Path) -> None:
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    (tmp_path / "code_demo.py").write_text(CODE)
    path = tmp_path / "prompt_code.yaml"
    path.write_text(CODE_YAML)
    _run(path, lambda prompt: next(p["body"] for p in PROBLEMS if p["prompt"] == prompt), tmp_path / "lm")
    rows = _samples(tmp_path / "lm", "prompt_code_demo")
    assert [r["filter"] for r in rows] == ["create_test", "create_test"]
    for r, p in zip(rows, PROBLEMS):
        assert r["resps"] == [[p["body"]]]
        assert r["filtered_resps"] == [[p["prompt"] + p["body"]]]
        assert r["pass@1"] == 1.0
