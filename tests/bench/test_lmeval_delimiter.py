"""The target delimiter exactly as lm-evaluation-harness 0.4.x applies it: a ``loglikelihood`` request is
``(context, doc_to_target)`` with no delimiter added (a lambada-style target already starts with its space),
multiple choice sends ``target_delimiter + choice``, and few-shot examples are ``text + target_delimiter +
target + fewshot_delimiter`` whatever the target starts with."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.bench.quality.tasks import load_tasks
from tests.helpers.lmeval_models import ScriptedLM

LAST_WORD = """task: last_word_demo
output_type: loglikelihood
dataset_kwargs:
  data_files:
    test: passages.jsonl
    train: shots.jsonl
test_split: test
training_split: train
doc_to_text: "{{passage.split(' ')[:-1]|join(' ')}}"
doc_to_target: "{{' '+passage.split(' ')[-1]}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

PASSAGES = ["the ferry left the harbour at dawn", "she poured the tea into a blue cup",
            "our cat sleeps all afternoon on the windowsill"]
SHOTS = ["rain fell on the old tin roof"]


def _write(tmp_path: Path, yaml_text: str = LAST_WORD) -> Path:
    (tmp_path / "passages.jsonl").write_text("".join(json.dumps({"passage": p}) + "\n" for p in PASSAGES))
    (tmp_path / "shots.jsonl").write_text("".join(json.dumps({"passage": p}) + "\n" for p in SHOTS))
    path = tmp_path / "last_word.yaml"
    path.write_text(yaml_text)
    return path


def _gold(context: str) -> str | None:
    for p in PASSAGES:
        head, _, last = p.rpartition(" ")
        if context.endswith(head):
            return " " + last
    return None


def _run(path: Path, model: ScriptedLM, **kw) -> dict:
    cfg = QualityConfig(model=model, tasks=str(path), **kw)
    store = str(path.parent / f"store-{len(model.requests)}-{len(model.prompts)}.db")
    return asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=store)).summary


def test_loglikelihood_sends_the_target_as_it_is_without_a_second_delimiter(tmp_path: Path) -> None:
    path = _write(tmp_path)
    model = ScriptedLM(_gold)
    summary = _run(path, model)
    # lm-eval sends (context, " word"): one space, the one the target starts with
    sent = sorted(model.requests)
    assert sent == sorted((p.rpartition(" ")[0], [" " + p.rpartition(" ")[2]]) for p in PASSAGES)
    assert ("the ferry left the harbour at", [" dawn"]) in sent
    assert all(not c.startswith("  ") for _, conts in sent for c in conts)
    assert summary["tasks"]["last_word_demo"]["metrics"]["acc"]["mean"] == 1.0


def test_loglikelihood_wrong_model_scores_zero(tmp_path: Path) -> None:
    summary = _run(_write(tmp_path), ScriptedLM(_gold, wrong=True))
    assert summary["tasks"]["last_word_demo"]["metrics"]["acc"]["mean"] == 0.0


def test_a_target_without_a_space_is_sent_without_one(tmp_path: Path) -> None:
    # target_delimiter is not part of a loglikelihood request: the target is sent exactly as the task gives it
    path = _write(tmp_path, LAST_WORD.replace("{{' '+passage.split(' ')[-1]}}", "{{passage.split(' ')[-1]}}"))
    t = load_tasks(str(path))[0]
    assert t.continuations(t.docs[0]) == ["dawn"]


def test_multiple_choice_sends_delimiter_plus_choice(tmp_path: Path) -> None:
    yaml_text = LAST_WORD.replace("output_type: loglikelihood", "output_type: multiple_choice") \
        .replace("doc_to_target: \"{{' '+passage.split(' ')[-1]}}\"",
                 "doc_to_target: 0\ndoc_to_choice: \"{{[passage.split(' ')[-1], 'zebra']}}\"")
    t = load_tasks(str(_write(tmp_path, yaml_text)))[0]
    assert t.continuations(t.docs[0]) == [" dawn", " zebra"]


def test_fewshot_examples_join_text_delimiter_and_target_as_lm_eval_does(tmp_path: Path) -> None:
    # lm-eval's sampler adds target_delimiter before every few-shot target (it only warns when the target
    # already starts with a space), then fewshot_delimiter; the doc's own text follows with nothing after it
    path = _write(tmp_path, LAST_WORD + "num_fewshot: 1\n")
    t = load_tasks(str(path))[0]
    assert t.context(0) == "rain fell on the old tin" + " " + " roof" + "\n\n" + "the ferry left the harbour at"
    model = ScriptedLM(_gold)
    _run(path, model)
    assert sorted(c for _, (c,) in model.requests) == sorted(" " + p.rpartition(" ")[2] for p in PASSAGES)
