"""lm-evaluation-harness's metric names (``acc,none``, ``exact_match,strict-match``, ``pass@1,create_test``,
``pass_at_1,none``) in the summary, beside assay's own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from assay.bench.quality.report import lm_eval_name
from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.bench.quality.tasks import load_tasks
from tests.helpers.lmeval_models import ScriptedLM

DATA = [{"q": "two plus two", "a": "four", "opts": ["four", "five"]},
        {"q": "three plus one", "a": "four", "opts": ["three", "four"]}]

MC = """task: mc_names
output_type: multiple_choice
dataset_kwargs: {data_files: {test: d.jsonl}}
test_split: test
doc_to_text: "Q: {{q}}\\nA:"
doc_to_target: "{{a}}"
doc_to_choice: "{{opts}}"
"""

GEN = """task: gen_names
output_type: generate_until
dataset_kwargs: {data_files: {test: d.jsonl}}
test_split: test
doc_to_text: "Q: {{q}}\\nA:"
doc_to_target: "{{a}}"
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\w+)"
      - function: take_first
"""

CODE = """task: code_names
output_type: generate_until
dataset_kwargs: {data_files: {test: d.jsonl}}
test_split: test
doc_to_text: "{{q}}"
doc_to_target: "{{a}}"
metric_list:
  - metric: !function utils.pass_at_k
    k: [1]
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DATA))
    (tmp_path / name).write_text(text)
    return tmp_path / name


def _gold(context: str) -> str | None:
    return " four"


def test_summary_names_each_score_as_lm_eval_does(tmp_path: Path) -> None:
    mc = _write(tmp_path, "mc.yaml", MC)
    gen = _write(tmp_path, "gen.yaml", GEN)
    model = ScriptedLM(_gold, lambda p: "#### four")
    cfg = QualityConfig(model="x", tasks=f"{mc},{gen}")
    s = asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=str(tmp_path / "s.db"))).summary
    assert s["tasks"]["mc_names"]["metrics"]["acc"]["lm_eval"] == "acc,none"
    assert s["tasks"]["mc_names"]["metrics"]["acc_norm"]["lm_eval"] == "acc_norm,none"
    assert s["tasks"]["mc_names"]["metrics"]["acc"]["mean"] == 1.0
    assert s["tasks"]["gen_names"]["metrics"]["exact_match,strict-match"]["lm_eval"] == "exact_match,strict-match"
    assert s["tasks"]["gen_names"]["metrics"]["exact_match,strict-match"]["mean"] == 1.0


def test_code_tasks_are_named_by_their_filter_and_metric_function(tmp_path: Path) -> None:
    humaneval = CODE + ("filter_list:\n  - name: create_test\n    filter:\n      - function: custom\n"
                        "        filter_fn: !function utils.build_predictions\n")
    (t,) = load_tasks(str(_write(tmp_path, "he.yaml", humaneval)))
    assert lm_eval_name(t, "pass@1") == "pass@1,create_test"
    mbpp = CODE.replace("utils.pass_at_k\n    k: [1]", "utils.pass_at_1")
    (t,) = load_tasks(str(_write(tmp_path, "mbpp.yaml", mbpp)))
    assert lm_eval_name(t, "pass@1") == "pass_at_1,none"
    (t,) = load_tasks(str(_write(tmp_path, "mc.yaml", MC)))
    assert lm_eval_name(t, "acc") == "acc,none"
    assert lm_eval_name(t, "similarity") is None       # assay's judge metrics have no lm-eval name
