"""``acc_norm`` and ``acc_mutual_info`` as lm-evaluation-harness 0.4.x computes them for multiple choice:
``acc_norm`` is right when argmax(loglik / len(choice)) is the gold choice, the length in characters of the choice
alone (not of the target delimiter in front of it); ``acc_mutual_info`` asks each continuation again after an empty
context and is right when argmax(loglik − unconditional loglik) is gold. Checked by hand with a scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.models.base import Generation, loglik_generation

TASK = """task: tiny_mc
dataset_kwargs:
  data_files:
    test: items.jsonl
output_type: multiple_choice
test_split: test
doc_to_text: "Question: {{q}}\\nAnswer:"
doc_to_target: "{{gold}}"
doc_to_choice: "{{choices}}"
metric_list:
  - metric: acc
  - metric: acc_norm
"""
DOCS = [{"q": "Which is a colour?", "choices": ["red", "an elephant"], "gold": 1},
        {"q": "Which is a fruit?", "choices": ["a pear", "stone"], "gold": 0}]


class TableLM:
    """Log-likelihoods from a table keyed by (context, continuation); records every request."""

    name = "table-lm"

    def __init__(self, table: dict[tuple[str, str], float]):
        self.table = table
        self.requests: list[tuple[str, list[str]]] = []

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        self.requests.append((context, list(continuations)))
        return loglik_generation([self.table[(context, c)] for c in continuations], [False] * len(continuations),
                                 model=self.name)

    async def complete(self, prompt: str, **_: Any) -> Generation:
        return Generation(text="", model=self.name)

    async def generate(self, messages: list[dict], **_: Any) -> Generation:
        return Generation(text="", model=self.name)


def _run(tmp_path: Path, model: Any, text: str = TASK) -> dict:
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    path = tmp_path / "mc.yaml"
    path.write_text(text)
    cfg = QualityConfig(model=model, tasks=str(path))
    return asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None)).summary["tasks"]["tiny_mc"]


def _ctx(d: dict) -> str:
    return f"Question: {d['q']}\nAnswer:"


def test_acc_norm_is_loglik_over_the_choice_s_characters(tmp_path: Path) -> None:
    c0, c1 = _ctx(DOCS[0]), _ctx(DOCS[1])
    table = {
        # doc 0, gold "an elephant" (11 chars): raw prefers "red" (-4 > -10), per char the gold (-10/11 > -4/3)
        (c0, " red"): -4.0, (c0, " an elephant"): -10.0,
        # doc 1, gold "a pear": raw and per character both pick it (-5.9 > -6, -5.9/6 > -6/5)
        (c1, " a pear"): -5.9, (c1, " stone"): -6.0,
    }
    m = _run(tmp_path, TableLM(table))["metrics"]
    assert m["acc"]["mean"] == pytest.approx(0.5)        # doc 0 wrong, doc 1 right
    assert m["acc_norm"]["mean"] == 1.0                  # both right per character
    assert m["acc_norm"]["lm_eval"] == "acc_norm,none"


def test_acc_norm_counts_the_choice_without_the_delimiter(tmp_path: Path) -> None:
    # "ab" vs "abcd": loglik -2.0 and -3.5. By len(choice): -1.0 vs -0.875 -> "abcd".
    # By len(" " + choice): -0.667 vs -0.7 -> "ab". lm-eval divides by len(choice): "abcd" (the gold) wins.
    docs = [{"q": "Pick", "choices": ["ab", "abcd"], "gold": 1}]
    table = {(_ctx(docs[0]), " ab"): -2.0, (_ctx(docs[0]), " abcd"): -3.5}
    (tmp_path / "items.jsonl").write_text(json.dumps(docs[0]) + "\n")
    path = tmp_path / "mc.yaml"
    path.write_text(TASK)
    model = TableLM(table)
    cfg = QualityConfig(model=model, tasks=str(path))
    m = asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None)).summary["tasks"]["tiny_mc"]
    assert m["metrics"]["acc"]["mean"] == 0.0
    assert m["metrics"]["acc_norm"]["mean"] == 1.0


def test_acc_mutual_info_subtracts_the_unconditional_loglik(tmp_path: Path) -> None:
    c0, c1 = _ctx(DOCS[0]), _ctx(DOCS[1])
    table = {(c0, " red"): -4.0, (c0, " an elephant"): -10.0, ("", " red"): -1.0, ("", " an elephant"): -12.0,
             (c1, " a pear"): -5.0, (c1, " stone"): -6.0, ("", " a pear"): -2.0, ("", " stone"): -2.5}
    model = TableLM(table)
    t = _run(tmp_path, model, TASK + "  - metric: acc_mutual_info\n")
    # doc 0: -4-(-1) = -3 vs -10-(-12) = +2 -> gold; doc 1: -5+2 = -3 vs -6+2.5 = -3.5 -> gold
    assert t["metrics"]["acc_mutual_info"]["mean"] == 1.0
    assert t["metrics"]["acc"]["mean"] == 0.5
    assert ("", [" red", " an elephant"]) in model.requests
    wrong = {k: (-v if k[0] == "" else v) for k, v in table.items()}
    # flip the unconditional signs: doc 0: -4-1 = -5 vs -10-12 = -22 -> "red" (wrong); doc 1: -7 vs -8.5 -> gold
    t = _run(tmp_path, TableLM(wrong), TASK + "  - metric: acc_mutual_info\n")
    assert t["metrics"]["acc_mutual_info"]["mean"] == 0.5
