"""The context-words controls of ``assay judge check`` (issue 32, item 6): wrong answers made of the
context's own words. The embedded support scorer v1 was at chance on them; v2 reads the question's
type and separates the held-out pairs the check scores (its card says so); a judge that reads the
question separates them; the pairs are what they claim to be."""

from __future__ import annotations

import asyncio
import json
import re
from importlib import resources
from typing import Any

import pytest

from assay.engine.judge_check import CONTROL_SETS, SETS, check_judge
from assay.judges.check import MAX_WORD_GAP, words
from assay.judges.scorers import SCORERS, fidelity_line
from assay.judges.support import terms


def _pairs(name: str) -> list[dict[str, Any]]:
    text = resources.files("assay.judges").joinpath("calibration", CONTROL_SETS[name].file).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


PAIRS = _pairs("context_words")


@pytest.mark.parametrize("name", ["context_words", "context_words_fit"])
def test_the_pairs_are_wrong_answers_in_the_contexts_own_words(name: str) -> None:
    pairs = _pairs(name)
    assert len(pairs) == 30 and SETS["groundedness"].controls == ("context_words",)
    for p in pairs:
        assert abs(words(p["good"]) - words(p["bad"])) <= MAX_WORD_GAP, p["group"]
        assert p["good"] != p["bad"]
        missing = {t.key for t in terms(p["bad"])} - {t.key for t in terms(p["context"])}
        assert not missing, (p["group"], missing)      # every content word of the wrong answer is the context's


def test_the_check_shows_the_support_scorer_v2_on_held_out_pairs_as_its_card_does(monkeypatch: Any) -> None:
    monkeypatch.setenv("ASSAY_CACHE", "off")
    fit = {p["group"] for p in _pairs("context_words_fit")}
    assert fit and not fit & {p["group"] for p in PAIRS}       # the check's pairs are not the design pairs
    report = asyncio.run(check_judge(None, ["groundedness"]))["groundedness"]
    cw = report["controls"]["context_words"]
    assert cw["pairs"] == 30 and cw["errors"] == 0
    assert cw["auc"]["auc"] > 0.75 and cw["agreement"] > 0.6          # v1: 0.50 and 0.50
    assert report["auc"]["auc"] > 0.8                                 # the main set still separates
    card = SCORERS["groundedness"].fidelity("groundedness")
    assert card["context_words"]["auc"] == pytest.approx(round(cw["auc"]["auc"], 3))
    assert card["context_words"]["agreement"] == pytest.approx(round(cw["agreement"], 3))
    assert "held out" in card["context_words"]["data"] and card["context_words_fit"]["auc"] > 0.75
    assert (f"wrong answers in the context's own words: AUC {card['context_words']['auc']:.2f}, "
            f"agreement {card['context_words']['agreement']:.2f}") in fidelity_line(card)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


class _ReadsTheQuestion:
    """A judge that scores 5 when the answer is the right one for the question, else 1 (it looks
    the question up among the pairs: the control's ceiling)."""

    name = "reads-the-question"
    gives_distributions = False
    right = {_norm(p["query"]): (_norm(p["good"]), _norm(p["context"])) for p in PAIRS}

    async def generate(self, messages: Any, **kw: Any) -> Any:
        from assay.models.base import Generation

        text = _norm("\n".join(m["content"] for m in messages))
        # the right answer is in the prompt once more than its context holds it: it is the response
        ok = any(q in text and text.count(good) > ctx.count(good) for q, (good, ctx) in self.right.items())
        return Generation(json.dumps({"score": 5 if ok else 1, "reason": "answers it" if ok else "does not"}))

    async def distribution(self, messages: Any, candidates: Any, **kw: Any) -> Any:
        raise NotImplementedError


def test_a_judge_that_reads_the_question_separates_them(monkeypatch: Any) -> None:
    monkeypatch.setenv("ASSAY_CACHE", "off")
    from assay.models import resolve

    judge = resolve(_ReadsTheQuestion(), role="judge")
    cw = asyncio.run(check_judge(judge, ["groundedness"]))["groundedness"]["controls"]["context_words"]
    assert cw["auc"]["auc"] == pytest.approx(1.0) and cw["agreement"] == pytest.approx(1.0)
