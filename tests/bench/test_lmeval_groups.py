"""Task folders, groups and tags, as lm-evaluation-harness's ``--include_path`` reads them: ``--task-dir`` indexes
every YAML under it, ``--tasks NAME`` runs a task, a tag's tasks or a group's (sub-groups flattened), and a group's
figure is the mean of its tasks' figures weighted by their sizes (``weight_by_size: true``) or not, with the
harness's pooled standard error. A folder of three tiny tasks (2, 3 and 5 items) written for this test; the
figures checked by hand."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.bench.quality.catalog import build_catalog
from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.bench.quality.tasks import TaskError
from tests.helpers.lmeval_models import ScriptedLM

TEMPLATE = """output_type: multiple_choice
test_split: test
doc_to_text: "Q: {{q}}\\nA:"
doc_to_choice: ["yes", "no"]
doc_to_target: gold
metric_list:
  - metric: acc
"""
# per task: (items, how many the model gets right)
SIZES = {"alpha": (2, 1), "beta": (3, 3), "gamma": (5, 1)}


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    (root / "sub").mkdir(parents=True)
    (root / "_template_yaml").write_text(TEMPLATE)
    (root / "sub" / "_template_yaml").write_text(TEMPLATE)
    for name, (n, right) in SIZES.items():
        folder = root / "sub" if name == "gamma" else root
        rows = [{"q": f"{name} question {j}", "gold": 0, "right": j < right} for j in range(n)]
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        tag = "tag: [tiny_even]\n" if name != "gamma" else "tag: tiny_odd\n"
        (folder / f"{name}.yaml").write_text(f"include: _template_yaml\ntask: tiny_{name}\n{tag}"
                                             f"dataset_kwargs:\n  data_files:\n    test: {name}.jsonl\n")
    (root / "_tiny_weighted.yaml").write_text(
        "group: tiny_weighted\ntask:\n  - tiny_alpha\n  - tiny_beta\n  - tiny_gamma\naggregate_metric_list:\n"
        "  - metric: acc\n    weight_by_size: true\n")
    (root / "_tiny_plain.yaml").write_text(
        "group: tiny_plain\ntask:\n  - tiny_even\n  - tiny_gamma\naggregate_metric_list:\n"
        "  - metric: acc\n    weight_by_size: false\n")
    (root / "_tiny_all.yaml").write_text("group: tiny_all\ntask:\n  - tiny_plain\n")
    return root


def _model() -> ScriptedLM:
    answers = {}
    for name, (n, right) in SIZES.items():
        for j in range(n):
            answers[f"Q: {name} question {j}\nA:"] = " yes" if j < right else " no"
    return ScriptedLM(lambda ctx: answers.get(ctx))


def _run(root: Path, tasks: str) -> dict:
    model = _model()
    cfg = QualityConfig(model=model, tasks=tasks, task_dirs=[str(root)])
    return asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None)).summary


def test_the_catalog_indexes_tasks_groups_and_tags(tmp_path: Path) -> None:
    cat = build_catalog([_folder(tmp_path)])
    assert sorted(cat.tasks) == ["tiny_alpha", "tiny_beta", "tiny_gamma"]
    assert sorted(cat.groups) == ["tiny_all", "tiny_plain", "tiny_weighted"]
    assert cat.tags == {"tiny_even": ["tiny_alpha", "tiny_beta"], "tiny_odd": ["tiny_gamma"]}
    assert cat.leaves("tiny_all") == ["tiny_alpha", "tiny_beta", "tiny_gamma"]


def test_a_weighted_group_is_the_size_weighted_mean_with_the_pooled_stderr(tmp_path: Path) -> None:
    s = _run(_folder(tmp_path), "tiny_weighted")
    assert sorted(s["tasks"]) == ["tiny_alpha", "tiny_beta", "tiny_gamma"]
    assert [s["tasks"][t]["metrics"]["acc"]["mean"] for t in ("tiny_alpha", "tiny_beta", "tiny_gamma")] == \
        [0.5, 1.0, 0.2]
    g = s["groups"]["tiny_weighted"]["metrics"]["acc,none"]
    assert g["mean"] == pytest.approx((1 + 3 + 1) / 10)             # 0.5, not the plain mean 0.5667
    # stderrs: sqrt(p(1-p)/(n-1)): 0.5, 0, 0.2 -> sqrt(((1*0.25*2) + 0 + (4*0.04*5)) / (10-3) / 10)
    assert g["stderr"] == pytest.approx(math.sqrt((0.5 + 0.8) / 7 / 10))
    assert g["weight_by_size"] is True and g["evaluated"] == 10


def test_a_plain_group_is_the_mean_of_its_tasks_and_groups_nest(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    s = _run(root, "tiny_plain")
    g = s["groups"]["tiny_plain"]["metrics"]["acc,none"]
    assert g["mean"] == pytest.approx((0.5 + 1.0 + 0.2) / 3)
    assert g["weight_by_size"] is False
    # lm-eval 0.4.13's unweighted_mean_stderr, sqrt(sum se^2) / k, not the pooled one of a weighted mean
    assert g["stderr"] == pytest.approx(math.sqrt(0.5 ** 2 + 0.0 + 0.2 ** 2) / 3)
    s = _run(root, "tiny_all")        # a group of a group: its own figure is none (no aggregate_metric_list)
    assert s["groups"]["tiny_all"]["metrics"] == {}
    assert s["groups"]["tiny_plain"]["metrics"]["acc,none"]["mean"] == pytest.approx(1.7 / 3)


def test_a_tag_runs_its_tasks_without_a_figure_and_unknown_names_say_so(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    s = _run(root, "tiny_even")
    assert sorted(s["tasks"]) == ["tiny_alpha", "tiny_beta"] and "groups" not in s
    with pytest.raises(TaskError, match="did you mean tiny_alpha"):
        _run(root, "tiny_alpah")


def test_list_tasks_prints_tasks_groups_and_tags(tmp_path: Path) -> None:
    from assay.cli.main import app

    root = _folder(tmp_path)
    res = CliRunner().invoke(app, ["bench", "quality", "--list-tasks", "--task-dir", str(root)])
    assert res.exit_code == 0, res.output
    for name in ("tiny_alpha", "tiny_gamma", "tiny_weighted", "tiny_plain", "tiny_even", "tiny_odd"):
        assert name in res.output
    assert "weighted by size" in res.output


def test_list_tasks_as_json(tmp_path: Path) -> None:
    from assay.cli.main import app

    root = _folder(tmp_path)
    res = CliRunner().invoke(app, ["bench", "quality", "--list-tasks", "--task-dir", str(root), "--json"])
    assert res.exit_code == 0, res.output
    listed: dict[str, Any] = json.loads(res.output)
    assert listed["groups"]["tiny_weighted"]["tasks"] == ["tiny_alpha", "tiny_beta", "tiny_gamma"]
    assert listed["tags"]["tiny_odd"] == ["tiny_gamma"]


def test_a_group_entry_sets_fields_on_its_tasks(tmp_path: Path) -> None:
    # lm-eval's {task: NAME, num_fewshot: N} in a group: the fields apply to the task (or every task of a tag)
    root = _folder(tmp_path)
    (root / "_tiny_shots.yaml").write_text(
        "group: tiny_shots\ntask:\n  - task: tiny_even\n    num_fewshot: 1\n  - tiny_gamma\n"
        "aggregate_metric_list:\n  - metric: acc\n")
    model = _model()
    model.gold = lambda ctx, inner=model.gold: inner(ctx.rpartition("\n\n")[2])     # score the last question
    cfg = QualityConfig(model=model, tasks="tiny_shots", task_dirs=[str(root)])
    s = asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None)).summary
    assert {t: s["tasks"][t]["num_fewshot"] for t in s["tasks"]} == {"tiny_alpha": 1, "tiny_beta": 1,
                                                                      "tiny_gamma": 0}
    alpha = [ctx for ctx, _ in model.requests if ctx.endswith("alpha question 0\nA:")]
    assert alpha and all(ctx.count("Q: ") == 2 for ctx in alpha)      # one example, then the question
    assert s["groups"]["tiny_shots"]["metrics"]["acc,none"]["mean"] == pytest.approx(0.5)


def test_include_may_be_a_list_merged_in_order(tmp_path: Path) -> None:
    # lm-eval merges a list of includes in order (a later one over an earlier one), the file's own keys over all
    from assay.bench.quality.tasks import read_config

    (tmp_path / "_a_yaml").write_text("output_type: multiple_choice\ndescription: from a\ntest_split: a\n")
    (tmp_path / "_b_yaml").write_text("description: from b\ntest_split: b\n")
    (tmp_path / "t.yaml").write_text("include:\n  - _a_yaml\n  - _b_yaml\ntask: t\ntest_split: own\n")
    cfg = read_config(tmp_path / "t.yaml")
    assert cfg["output_type"] == "multiple_choice" and cfg["description"] == "from b" and cfg["test_split"] == "own"
