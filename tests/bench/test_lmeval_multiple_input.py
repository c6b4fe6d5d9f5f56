"""Partial evaluation for multiple-input tasks, as lm-evaluation-harness 0.4.x runs Winogrande: ``doc_to_text``
gives the index of the right context, ``doc_to_choice`` the contexts (the sentence up to the blank, filled with each
option), ``doc_to_target`` the shared rest of the sentence; each context is sent with the same continuation
(``target_delimiter`` + target) and the contexts compared by those log-likelihoods. A few-shot example is the right
context, the delimiter and the target. Without ``--trust-task-code`` the load names the hooks' own file."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.bench.quality.tasks import TaskError, load_tasks
from assay.models.base import Generation, loglik_generation

# a Winogrande-style task, our own sentences: the blank is "_", answer "1" or "2"
DOCS = [
    {"sentence": "The trophy did not fit in the case because the _ was too big.", "option1": "trophy",
     "option2": "case", "answer": "1"},
    {"sentence": "Anna lent her umbrella to Maria because _ was going out in the rain.", "option1": "Anna",
     "option2": "Maria", "answer": "2"},
    {"sentence": "The kettle boiled before the pot because the _ held less water.", "option1": "kettle",
     "option2": "pot", "answer": "1"},
]
SHOTS = [{"sentence": "The bird flew over the fence because the _ had wings.", "option1": "bird",
          "option2": "fence", "answer": "1"}]

TASK = """task: tiny_wino
dataset_kwargs:
  data_files:
    validation: dev.jsonl
    train: train.jsonl
output_type: multiple_choice
training_split: train
validation_split: validation
doc_to_text: !function preprocess_wino.doc_to_text
doc_to_target: !function preprocess_wino.doc_to_target
doc_to_choice: !function preprocess_wino.doc_to_choice
should_decontaminate: true
doc_to_decontamination_query: sentence
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

# our own hooks, written for this test: the index of the right option, the rest after the blank, the contexts
HOOKS = '''
def doc_to_text(doc):
    return {"1": 0, "2": 1}[doc["answer"]]


def doc_to_target(doc):
    return doc["sentence"].split("_", 1)[1].strip()


def doc_to_choice(doc):
    head = doc["sentence"].split("_", 1)[0]
    return [head + doc["option1"], head + doc["option2"]]
'''


def _write(tmp_path: Path, text: str = TASK) -> Path:
    (tmp_path / "dev.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(d) + "\n" for d in SHOTS))
    (tmp_path / "preprocess_wino.py").write_text(HOOKS)
    path = tmp_path / "tiny_wino.yaml"
    path.write_text(text)
    return path


def _right(doc: dict) -> str:
    head = doc["sentence"].split("_", 1)[0]
    return head + doc["option" + doc["answer"]]


class ContextLM:
    """Log-likelihoods that depend on the context only: -0.5 after a right context (one that ends with a doc's
    right filled-in prefix), -9 after another; ``wrong`` swaps them. Records every request."""

    name = "context-lm"

    def __init__(self, *, wrong: bool = False, logliks: dict[str, float] | None = None):
        self.wrong, self.logliks = wrong, logliks
        self.requests: list[tuple[str, list[str]]] = []

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        self.requests.append((context, list(continuations)))
        if self.logliks is not None:
            ll = next(v for k, v in self.logliks.items() if context.endswith(k))
        else:
            right = any(context.endswith(_right(d)) for d in DOCS)
            ll = -0.5 if right != self.wrong else -9.0
        return loglik_generation([ll] * len(continuations), [False] * len(continuations), model=self.name)

    async def complete(self, prompt: str, **_: Any) -> Generation:
        return Generation(text="", model=self.name)

    async def generate(self, messages: list[dict], **_: Any) -> Generation:
        return Generation(text="", model=self.name)


def _run(path: Path, model: Any, **kw: Any) -> dict:
    cfg = QualityConfig(model=model, tasks=str(path), trust_task_code=True, **kw)
    return asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None)).summary


def test_each_context_is_sent_with_the_same_continuation(tmp_path: Path) -> None:
    model = ContextLM()
    summary = _run(_write(tmp_path), model)
    want = []
    for d in DOCS:
        head, rest = d["sentence"].split("_", 1)
        for opt in (d["option1"], d["option2"]):
            want.append((head + opt, [" " + rest.strip()]))
    assert sorted(model.requests) == sorted(want)
    assert ("The trophy did not fit in the case because the trophy", [" was too big."]) in model.requests
    assert summary["tasks"]["tiny_wino"]["metrics"]["acc"]["mean"] == 1.0
    assert summary["tasks"]["tiny_wino"]["metrics"]["acc"]["lm_eval"] == "acc,none"


def test_the_wrong_model_scores_zero(tmp_path: Path) -> None:
    summary = _run(_write(tmp_path), ContextLM(wrong=True))
    assert summary["tasks"]["tiny_wino"]["metrics"]["acc"]["mean"] == 0.0


def test_few_shot_example_is_the_right_context_then_the_target(tmp_path: Path) -> None:
    model = ContextLM()
    _run(_write(tmp_path), model, shots=1)
    shot = "The bird flew over the fence because the bird had wings.\n\n"
    assert model.requests and all(ctx.startswith(shot) for ctx, _ in model.requests)
    t = load_tasks(str(_write(tmp_path)), shots=1, trust_code=True)[0]
    assert t.choice_contexts(1) == [shot + "Anna lent her umbrella to Maria because Anna",
                                    shot + "Anna lent her umbrella to Maria because Maria"]
    assert t.gold_index(DOCS[1]) == 1


def test_acc_norm_divides_by_the_length_of_each_context(tmp_path: Path) -> None:
    # lm-eval's acc_norm on a multiple-input task divides each loglik by len(choice): here, the context
    text = TASK + "  - metric: acc_norm\n"
    d = DOCS[0]
    head = d["sentence"].split("_", 1)[0]
    short, long_ = head + "trophy", head + "case"     # "case" is the shorter context
    assert len(long_) < len(short)
    lls = {short: -10.0, long_: -9.9}      # raw: the "case" context; per character: the "trophy" one
    # keep the other docs answerable: their right context wins both ways
    for other in DOCS[1:]:
        h = other["sentence"].split("_", 1)[0]
        lls[h + other["option" + other["answer"]]] = -1.0
        lls[h + other["option" + ("2" if other["answer"] == "1" else "1")]] = -50.0
    model = ContextLM(logliks=lls)
    m = _run(_write(tmp_path, text), model)["tasks"]["tiny_wino"]["metrics"]
    assert -10.0 / len(short) > -9.9 / len(long_)
    assert m["acc"]["mean"] == pytest.approx(2 / 3)       # doc 0 wrong by raw loglik
    assert m["acc_norm"]["mean"] == 1.0                   # right per character


def test_without_the_flag_the_error_names_the_hooks_file_and_the_flag(tmp_path: Path) -> None:
    path = _write(tmp_path)
    with pytest.raises(TaskError) as exc:
        load_tasks(str(path))
    msg = str(exc.value)
    assert "preprocess_wino.py" in msg and "--trust-task-code" in msg
    assert "utils.py" not in msg and "Jinja" not in msg and "jinja" not in msg


def test_a_generation_only_model_is_refused_per_item_not_scored(tmp_path: Path) -> None:
    class NoLogliks:
        name = "chat-only"

        async def generate(self, messages: list[dict], **_: Any) -> Generation:
            return Generation(text="A", model=self.name)

    from assay.errors import RunIncomplete

    with pytest.raises(RunIncomplete, match="partial evaluation"):
        _run(_write(tmp_path), NoLogliks())
