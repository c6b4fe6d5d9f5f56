"""A task whose data is a hub dataset, run where the hub cannot be read, says in one line every step that runs it
offline (save each split it reads beside the YAML, name them in ``data_files``, and the trust flag when its
``!function`` hooks must run on those files); task code that imports a module assay's environment lacks (lm-eval's
own task code imports ``lm_eval``, ``datasets``, ``evaluate``) gives one line naming the file, the module and the
package that installs it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from assay.bench.quality.tasks import TaskError, load_tasks

HUB_TASK = """task: hub_story
dataset_path: some_org/stories
dataset_name: cloze
dataset_kwargs:
  revision: abc123
output_type: multiple_choice
test_split: validation
fewshot_split: train
num_fewshot: 2
process_docs: !function utils.process_docs
doc_to_text: "{{ctx}}"
doc_to_target: label
doc_to_choice: "{{endings}}"
"""


def test_a_hub_task_offline_lists_every_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    (tmp_path / "utils.py").write_text("def process_docs(ds):\n    return ds\n")
    (tmp_path / "story.yaml").write_text(HUB_TASK)
    with pytest.raises(TaskError) as exc:
        load_tasks(tmp_path / "story.yaml", trust_code=True)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(str(tmp_path / "story.yaml"))
    assert "some_org/stories (cloze) and HF_DATASETS_OFFLINE is set" in msg
    # (1) the download of both splits it reads, with the subset and the revision, saved beside the YAML
    assert "datasets.load_dataset('some_org/stories', 'cloze', revision='abc123')" in msg
    assert f"to_json(f'{tmp_path}/some_org_stories_cloze_{{s}}.jsonl') for s in ['validation', 'train']" in msg
    # (2) the files named in the YAML
    assert ("dataset_kwargs: {data_files: {validation: some_org_stories_cloze_validation.jsonl, "
            "train: some_org_stories_cloze_train.jsonl}}") in msg
    # (3) the hook that must run on them
    assert "(3) run with --trust-task-code: its process_docs is task code" in msg


def test_without_hooks_there_is_no_trust_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    (tmp_path / "story.yaml").write_text(HUB_TASK.replace("process_docs: !function utils.process_docs\n", "")
                                         .replace("num_fewshot: 2", "num_fewshot: 0"))
    with pytest.raises(TaskError) as exc:
        load_tasks(tmp_path / "story.yaml")
    msg = str(exc.value)
    assert "for s in ['validation']" in msg and "(3)" not in msg and "--trust-task-code" not in msg


def test_without_the_datasets_package_the_extra_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "datasets" else real(name, *a))
    (tmp_path / "story.yaml").write_text(HUB_TASK.replace("process_docs: !function utils.process_docs\n", ""))
    with pytest.raises(TaskError, match=r"not installed \(with network: pip install 'assay\[datasets\]'\)"):
        load_tasks(tmp_path / "story.yaml")


@pytest.mark.parametrize("line, module, pip", [
    ("from lm_eval.api.registry import register_filter", "lm_eval", "pip install lm-eval"),
    ("import evaluate", "evaluate", "pip install evaluate"),
    ("import datasets", "datasets", "pip install datasets"),
])
def test_task_code_importing_a_missing_module_says_which(tmp_path: Path, line: str, module: str, pip: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if line.startswith("import "):      # missing here even where the dev extra installs it (datasets)
        monkeypatch.setitem(sys.modules, module, None)
    (tmp_path / "utils.py").write_text(f"{line}\n\ndef process_docs(ds):\n    return ds\n")
    (tmp_path / "t.yaml").write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\n"
                                     "process_docs: !function utils.process_docs\n"
                                     "doc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n")
    (tmp_path / "d.jsonl").write_text('{"q": "x", "a": "y"}\n')
    with pytest.raises(TaskError) as exc:
        load_tasks(tmp_path / "t.yaml", trust_code=True)
    msg = str(exc.value)
    assert "\n" not in msg
    assert f"{tmp_path / 'utils.py'} imports {module}, which is not installed here" in msg
    assert pip in msg
