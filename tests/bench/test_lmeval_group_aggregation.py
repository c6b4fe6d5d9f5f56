"""What a group's ``aggregate_metric_list`` may say, as lm-evaluation-harness 0.4.13 reads it
(``lm_eval/config/group.py`` ``AggMetricConfig``, ``lm_eval/api/group.py``): ``aggregation: mean`` (weighted by size
or not) or a ``!function``, which the harness checks and then does not apply (its group figure is always
``aggregate_subtask_metrics``, the mean); any other name is refused with one line naming the group file. The
stderr of a plain (unweighted) mean is the harness's ``unweighted_mean_stderr`` (tests/bench/test_lmeval_groups.py
checks it on a run)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from assay.bench.quality.catalog import build_catalog
from assay.bench.quality.lmeval import unweighted_mean_stderr
from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.bench.quality.tasks import TaskError
from tests.helpers.lmeval_models import ScriptedLM

TASK = """task: {name}
output_type: multiple_choice
dataset_kwargs:
  data_files:
    test: {name}.jsonl
test_split: test
doc_to_text: "Q: {{{{q}}}}\\nA:"
doc_to_choice: ["yes", "no"]
doc_to_target: 0
metric_list:
  - metric: acc
"""


def _folder(tmp_path: Path, aggregation: str) -> Path:
    root = tmp_path / "tasks"
    root.mkdir()
    for name, n, right in (("agg_a", 2, 1), ("agg_b", 4, 4)):
        rows = [{"q": f"{name} {j}", "right": j < right} for j in range(n)]
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (root / f"{name}.yaml").write_text(TASK.format(name=name))
    (root / "_agg.yaml").write_text("group: agg\ntask: [agg_a, agg_b]\naggregate_metric_list:\n  - metric: acc\n"
                                    f"    aggregation: {aggregation}\n    weight_by_size: true\n")
    return root


def _run(root: Path) -> dict:
    answers = {f"Q: agg_a {j}\nA:": " yes" if j < 1 else " no" for j in range(2)}
    answers.update({f"Q: agg_b {j}\nA:": " yes" for j in range(4)})
    model = ScriptedLM(lambda ctx: answers.get(ctx))
    cfg = QualityConfig(model=model, tasks="agg", task_dirs=[str(root)])
    return asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None)).summary


def test_a_function_aggregation_is_named_and_the_mean_reported_as_the_harness_does(tmp_path: Path) -> None:
    root = _folder(tmp_path, "!function utils.my_median")
    g = _run(root)["groups"]["agg"]["metrics"]["acc,none"]
    assert g["mean"] == pytest.approx((1 + 4) / 6)           # the size-weighted mean; no code imported or run
    assert "my_median" in g["not_applied"]
    assert not (root / "utils.py").exists()


def test_another_aggregation_name_is_refused_naming_the_file(tmp_path: Path) -> None:
    root = _folder(tmp_path, "median")
    cat = build_catalog([root])
    assert "agg" not in cat.groups
    (path, why), = cat.broken.items()
    assert path.endswith("_agg.yaml") and "'median' is not one lm-evaluation-harness allows" in why
    with pytest.raises(TaskError, match="median"):
        _run(root)


def test_unweighted_mean_stderr_is_the_harness_s() -> None:
    assert unweighted_mean_stderr([0.3, 0.4]) == pytest.approx(math.sqrt(0.09 + 0.16) / 2)
    with pytest.raises(ValueError):
        unweighted_mean_stderr([])
