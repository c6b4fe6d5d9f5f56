"""Rolling log-likelihood and the perplexity family as lm-evaluation-harness 0.4.x computes them: a
``loglikelihood_rolling`` task sends each whole document (``doc_to_target``, no prompt) and reports
``word_perplexity`` and ``byte_perplexity`` (exp of minus the summed logliks over the summed words / bytes) and
``bits_per_byte`` (minus that weighted mean over ln 2); a ``loglikelihood`` task's ``perplexity`` is exp of minus
the mean loglik of its targets. Values checked by hand against a scripted model."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from assay.bench.quality.lmeval import count_bytes, count_words, pooled_sample_stderr
from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.bench.quality.tasks import TaskError, load_tasks
from assay.models.base import Generation, loglik_generation
from tests.helpers.lmeval_models import ScriptedLM

DOCS = ["The river rose after three days of rain .", "Héllo wörld", "  a  b\nc  "]
LOGLIKS = {DOCS[0]: -31.5, DOCS[1]: -12.25, DOCS[2]: -7.0}

ROLLING = """task: tiny_wiki
output_type: loglikelihood_rolling
dataset_kwargs:
  data_files:
    test: pages.jsonl
test_split: test
doc_to_text: ""
doc_to_target: page
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
"""


class DocLM:
    """Gives each whole document a fixed log-likelihood (``oracle``: 0, every token certain); records
    ``(context, continuations)`` as sent."""

    name = "doc-lm"

    def __init__(self, logliks: dict[str, float] | None = None, *, oracle: bool = False):
        self.logliks, self.oracle = logliks or {}, oracle
        self.requests: list[tuple[str, list[str]]] = []

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        conts = list(continuations)
        self.requests.append((context, conts))
        lls = [0.0 if self.oracle else self.logliks[c] for c in conts]
        return loglik_generation(lls, [self.oracle] * len(conts), model=self.name)

    async def complete(self, prompt: str, **_: Any) -> Generation:
        return Generation(text="", model=self.name)

    async def generate(self, messages: list[dict], **_: Any) -> Generation:
        return Generation(text="", model=self.name)


def _write(tmp_path: Path, text: str = ROLLING) -> Path:
    (tmp_path / "pages.jsonl").write_text("".join(json.dumps({"page": d}) + "\n" for d in DOCS))
    path = tmp_path / "tiny_wiki.yaml"
    path.write_text(text)
    return path


def _run(path: Path, model: Any, **kw: Any) -> dict:
    cfg = QualityConfig(model=model, tasks=str(path), **kw)
    store = str(path.parent / f"store-{id(model)}.db")
    return asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=store)).summary


def test_word_and_byte_counts_are_the_harness_s() -> None:
    assert count_words("The river rose") == 3
    assert count_words("  a  b\nc  ") == 5          # re.split on whitespace: the empty ends count
    assert count_bytes("Héllo wörld") == 13


def test_rolling_sends_each_whole_document_and_weights_by_words_and_bytes(tmp_path: Path) -> None:
    model = DocLM(LOGLIKS)
    summary = _run(_write(tmp_path), model)
    # one request per document: the document alone after an empty context (no prompt, no delimiter)
    assert sorted(model.requests) == sorted(("", [d]) for d in DOCS)
    m = summary["tasks"]["tiny_wiki"]["metrics"]
    total = -31.5 - 12.25 - 7.0
    words = 9 + 2 + 5
    nbytes = len(DOCS[0]) + 13 + len(DOCS[2])
    assert m["word_perplexity"]["mean"] == pytest.approx(math.exp(-total / words))
    assert m["byte_perplexity"]["mean"] == pytest.approx(math.exp(-total / nbytes))
    assert m["bits_per_byte"]["mean"] == pytest.approx(-total / nbytes / math.log(2))
    # weighted over the whole run, not a mean of per-document perplexities
    per_doc = sum(math.exp(-LOGLIKS[d] / count_words(d)) for d in DOCS) / 3
    assert m["word_perplexity"]["mean"] != pytest.approx(per_doc)
    assert m["word_perplexity"]["aggregation"] == "weighted_perplexity"
    assert m["bits_per_byte"]["aggregation"] == "bits_per_byte"
    assert m["word_perplexity"]["lm_eval"] == "word_perplexity,none"
    assert m["word_perplexity"]["stderr"] is None          # the harness gives these none
    t = summary["tasks"]["tiny_wiki"]
    assert t["primary"] == "word_perplexity" and "not in the quality index" in t["primary_scale"]
    assert summary["index"]["value"] is None                # a perplexity is no 0-1 score


def test_rolling_oracle_has_perplexity_one(tmp_path: Path) -> None:
    m = _run(_write(tmp_path), DocLM(oracle=True))["tasks"]["tiny_wiki"]["metrics"]
    assert m["word_perplexity"]["mean"] == 1.0
    assert m["byte_perplexity"]["mean"] == 1.0
    assert m["bits_per_byte"]["mean"] == 0.0


def test_rolling_defaults_to_the_three_metrics_and_refuses_few_shot(tmp_path: Path) -> None:
    path = _write(tmp_path, ROLLING.split("metric_list:")[0])
    t = load_tasks(str(path))[0]
    assert [m["metric"] for m in t.metrics] == ["word_perplexity", "byte_perplexity", "bits_per_byte"]
    path = _write(tmp_path, ROLLING + "num_fewshot: 2\n")
    with pytest.raises(TaskError, match="num_fewshot must be 0"):
        load_tasks(str(path))


LAMBADA = """task: tiny_lambada
output_type: loglikelihood
dataset_kwargs:
  data_files:
    test: pages.jsonl
test_split: test
doc_to_text: "{{page.split(' ')[:-1]|join(' ')}}"
doc_to_target: "{{' '+page.split(' ')[-1]}}"
metric_list:
  - metric: perplexity
    aggregation: perplexity
    higher_is_better: false
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""


def _last(context: str) -> str | None:
    for d in DOCS:
        head, _, last = d.rpartition(" ")
        if context == head:
            return " " + last
    return None


def test_lambada_perplexity_is_exp_of_minus_the_mean_target_loglik(tmp_path: Path) -> None:
    path = _write(tmp_path, LAMBADA)
    right = _run(path, ScriptedLM(_last))["tasks"]["tiny_lambada"]
    # the scripted model gives the gold target -0.5, so perplexity = exp(0.5); acc 1.0
    assert right["metrics"]["perplexity"]["mean"] == pytest.approx(math.exp(0.5))
    assert right["metrics"]["perplexity"]["lm_eval"] == "perplexity,none"
    assert right["metrics"]["acc"]["mean"] == 1.0
    assert right["primary"] == "acc"
    wrong = _run(path, ScriptedLM(_last, wrong=True))["tasks"]["tiny_lambada"]
    assert wrong["metrics"]["perplexity"]["mean"] == pytest.approx(math.exp(20.0))
    assert wrong["metrics"]["acc"]["mean"] == 0.0


HOOKED = ROLLING.replace("doc_to_target: page", "doc_to_target: page\nprocess_results: !function wikiutils.process_results")
WIKIUTILS = '''
import re


def process_results(doc, results):
    (loglikelihood,) = results
    words = len(re.split(r"\\s+", doc["page"]))
    nbytes = len(doc["page"].encode("utf-8"))
    return {"word_perplexity": (loglikelihood, words), "byte_perplexity": (loglikelihood, nbytes),
            "bits_per_byte": (loglikelihood, nbytes)}
'''


def test_a_process_results_hook_gets_the_rolling_loglik_and_its_pairs_are_weighted(tmp_path: Path) -> None:
    path = _write(tmp_path, HOOKED)
    (tmp_path / "wikiutils.py").write_text(WIKIUTILS)
    m = _run(path, DocLM(LOGLIKS), trust_task_code=True)["tasks"]["tiny_wiki"]["metrics"]
    total, words = -50.75, 16
    assert m["word_perplexity"]["mean"] == pytest.approx(math.exp(-total / words))
    assert m["bits_per_byte"]["mean"] == pytest.approx(-total / sum(count_bytes(d) for d in DOCS) / math.log(2))


def test_pooled_sample_stderr_by_hand() -> None:
    # two tasks: n=4, se=0.1 and n=6, se=0.2 -> sqrt(((3*0.01*4)+(5*0.04*6))/(10-2)/10)
    want = math.sqrt((3 * 0.01 * 4 + 5 * 0.04 * 6) / 8 / 10)
    assert pooled_sample_stderr([0.1, 0.2], [4, 6]) == pytest.approx(want)
