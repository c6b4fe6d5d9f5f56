"""AI-assisted (LLM-judged) quality metrics: the 1–5 judges of azure-ai-evaluation's AI-assisted
quality evaluators and the yes/no judges of Databricks' built-in LLM judges.

Each metric is a template under ``metrics/prompts/`` plus one :class:`~assay.judges.Judge`
declaration, registered by :func:`~assay.metrics.judged.register_judge`; metrics made of
several judgments add a scorer. The shared machinery (rendering with delimited untrusted text,
JSON answers, one re-ask, probability scoring, properties) is in :mod:`assay.judges`. Every judge asks
``ctx.judge`` (a :class:`~assay.models.base.ChatModel`). Without one, a metric is scored by its
embedded scorer when one was measured to work for it (``groundedness``,
``databricks_groundedness``, ``relevance``, ``relevance_to_query``, ``similarity``:
:mod:`assay.judges.scorers`) and is
otherwise skipped with the reason that it needs a judge; it never raises.

Azure style (family ``azure``; 1–5, threshold 3, pass when ``score >= 3``):

* ``groundedness`` — every claim of the response backed by the contexts; the template with the
  query when the row has one, else the one without.
* ``groundedness_pro`` — sentence level: one yes/no per sentence of the response; value = share
  of supported sentences (0–1, threshold 1: every sentence supported), the unsupported
  sentences in the reason and in ``properties.unsupported_sentences``. Not in ``auto``.
* ``relevance`` — does the response address the query (QA). In a conversation (the row has a
  ``history``): against the ground truth when given, else against the history and documents.
* ``coherence`` (query + response), ``fluency`` (response).
* ``retrieval`` — ``1 + 4·f²`` where ``f`` is the share of the query's intents that the
  retrieved documents answer: one call splits the query into intents (JSON list; unreadable:
  the whole query is the one intent), then one yes/no per intent. Squaring penalises misses
  (half the intents answered gives 2.0, not 3.0). A float in [1, 5].
* ``similarity`` — equivalence of response and ground truth given the query.

Databricks style (family ``databricks``; ``value`` ``"yes"``/``"no"``, ``score`` 1.0/0.0,
threshold 0.5):

* ``relevance_to_query``, ``databricks_groundedness`` (registered under that name beside the
  Azure ``groundedness``), ``correctness`` (against ``ground_truth`` and/or
  ``expected_facts``), ``context_sufficiency``, ``guideline_adherence`` (a list of guidelines:
  one judgment; named lists: one judgment per name, the output ``yes`` only when every named
  set is followed, per-name ratings in ``properties.guidelines``).
* ``chunk_relevance`` — one yes/no per retrieved chunk; output ``chunk_relevance_precision`` =
  relevant chunks / judged chunks (threshold 0.5), per-chunk ratings in ``properties.chunks``.
* ``overall_assessment`` — see :func:`overall_assessment`.

With ground truth (or expected facts) in the data, ``auto`` runs ``correctness`` and
``context_sufficiency`` instead of ``relevance_to_query`` and ``chunk_relevance``.

On a smoke-test judge (the embedded tiny model) scores come from next-token probabilities
(see :mod:`assay.judges.ask`); multi-judgment metrics then average P(yes) instead of
counting yes answers, and ``retrieval`` does not ask the tiny model to split intents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from assay.judges import Judge, Verdict, ask_json, ask_many, load_prompt, merge, render, run_judge, scoring_mode
from assay.judges.scorers import NEEDS_JUDGE, score_without_judge
from assay.judges.support import split_sentences
from assay.metrics.base import EvalContext, Score, metric, plan_auto
from assay.metrics.judged import judged, register_judge
from assay.records import CANONICAL_FIELDS, Document, Guidelines, Message, Record

__all__ = [
    "assess_guidelines", "JUDGES", "OVERALL_ORDER", "SUGGESTED_ACTIONS", "split_sentences", "overall_assessment",
]

AZURE = ("azure",)           # 1–5 judges, threshold 3 (an int, as results have always shown it)
DATABRICKS = ("databricks",)
GROUND_TRUTH = ("ground_truth", "expected_facts")

# name -> Judge: every LLM-judged quality metric, declared once (and registered as it is declared).
JUDGES: dict[str, Judge] = {}


def _declare(judge: Judge, scorer: Any = None) -> Judge:
    JUDGES[judge.name] = judge
    register_judge(judge, scorer)
    return judge


def _judge_of(ctx: EvalContext | None) -> Any:
    return getattr(ctx, "judge", None) if ctx is not None else None


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _first_error(verdicts: Sequence[Verdict]) -> str:
    return next((v.error for v in verdicts if v.error), None) or "the judge gave no readable answer"


def _short(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _prob_yes(v: Verdict) -> dict[str, float]:
    return {"prob_yes": round(v.prob.value, 6)} if v.prob is not None else {}


# ---------------------------------------------------------------------------------------
# Azure style


async def _groundedness(judge: Judge, ctx: EvalContext | None, values: Mapping[str, Any]) -> Score:
    query = values.get("query")
    tpl = "groundedness" if query and query.strip() else "groundedness_no_query"
    return await run_judge(judge, ctx, values, template=tpl)


_declare(Judge("groundedness", "groundedness", threshold=3, requires=("response", "contexts"), optional=("query",),
               auto=True, family=AZURE, description="""Is every claim of the response supported by the retrieved context? 1–5.

With a query the judge sees it (to tell which parts are meant as the answer); without one
a query-free template is used (Azure's two variants)."""), _groundedness)


@judged(Judge("groundedness_pro", "groundedness_pro_sentence", scale="yes/no", reports="0-1", threshold=1.0,
              max_tokens=300, requires=("response", "contexts"), optional=("query",), family=AZURE,
              description="""Share of the response's sentences that the context supports (one yes/no per sentence).

``value`` = supported / judged sentences, threshold 1.0 (pass only when every sentence is
supported, like Azure's groundedness-pro label). The unsupported sentences are listed in
the reason and in ``properties.unsupported_sentences``. On a probability-scored judge
``score`` is the mean P(yes)."""))
async def _groundedness_pro(judge: Judge, ctx: EvalContext | None, values: Mapping[str, Any]) -> Score:
    model = _judge_of(ctx)
    if model is None:
        return await score_without_judge(judge, values)
    response = values["response"]
    sentences = split_sentences(response)
    if not sentences:
        return Score.skipped("the response has no sentence to check")
    verdicts = await ask_many(ctx, judge, [{**values, "sentence": s} for s in sentences])
    props = merge(verdicts, model=model)
    per = [{"sentence": s, "rating": v.value if v.ok else None, "reason": v.reason if v.ok else v.error,
            **_prob_yes(v)} for s, v in zip(sentences, verdicts)]
    props["sentences"] = per
    judged_ = [(s, v) for s, v in zip(sentences, verdicts) if v.ok]
    if not judged_:
        return Score.error(_first_error(verdicts), **props)
    unsupported = [s for s, v in judged_ if v.value == "no"]
    frac = (len(judged_) - len(unsupported)) / len(judged_)
    score = _mean([v.score for _, v in judged_]) if props["scoring"] == "probability" else frac
    props.update(unsupported_sentences=unsupported, n_sentences=len(sentences), n_judged=len(judged_),
                 label=not unsupported)
    if all(v.prob is not None for _, v in judged_):
        props["prob_score"] = _mean([v.prob.value for _, v in judged_])  # type: ignore[union-attr]
    if unsupported:
        listed = "; ".join(f'"{_short(s, 160)}"' for s in unsupported)
        reason = f"{len(unsupported)} of {len(judged_)} sentences are not supported by the context: {listed}"
    else:
        reason = f"all {len(judged_)} sentences are supported by the context"
    if len(judged_) < len(sentences):
        reason += f" ({len(sentences) - len(judged_)} sentence(s) could not be judged)"
    return Score(value=frac, score=score, reason=reason, properties=props)


async def _relevance(judge: Judge, ctx: EvalContext | None, values: Mapping[str, Any]) -> Score:
    if values.get("history"):
        tpl = "relevance_ground_truth" if values.get("ground_truth") else "relevance_conversation"
    else:
        tpl = "relevance"
    return await run_judge(judge, ctx, values, template=tpl)


# `auto` runs relevance on every row with a query and a response (it needs no context), and the
# retrieval score on every row with a query and retrieved documents, single-turn or not, as
# azure-ai-evaluation's own end-to-end tests call them.
_declare(Judge("relevance", "relevance", threshold=3, requires=("query", "response"),
               optional=("history", "contexts", "ground_truth"), auto=True, family=AZURE,
               description="""Does the response address the query? 1–5.

A single question: the query and the response. A conversation turn (``history`` present):
against the ground truth when the row has one, else against what the history and the
retrieved documents call for."""), _relevance)

_declare(Judge("coherence", "coherence", threshold=3, requires=("query", "response"), auto=True, family=AZURE,
               description="Are the response's ideas organised so that a reader can follow them? 1–5."))

_declare(Judge("fluency", "fluency", threshold=3, requires=("response",), auto=True, family=AZURE,
               description="Grammar, word choice and readability of the response alone. 1–5."))


MAX_INTENTS = 10


def _intent_list(raw: Any) -> list[str]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        return []
    out: list[str] = []
    for x in raw:
        if isinstance(x, dict):
            x = next((v for v in x.values() if isinstance(v, str)), None)
        if isinstance(x, str) and x.strip() and x.strip() not in out:
            out.append(x.strip())
    return out[:MAX_INTENTS]


@judged(Judge("retrieval", "retrieval_intent", scale="yes/no", reports="1-5", threshold=3, max_tokens=300,
              requires=("query", "contexts"), optional=("history",), auto=True, family=AZURE,
              description="""Retrieval score: ``1 + 4·f²``, ``f`` = share of the query's intents the documents answer.

One call splits the query into intents; one yes/no call per intent asks whether the
retrieved documents hold what it needs. ``f`` is the share of ``yes`` (the mean P(yes) on a
probability-scored judge), squared to penalise misses, mapped to [1, 5]: all answered 5.0,
half 2.0, none 1.0. When the intent list is unreadable, or the judge is a smoke-test judge,
the whole query is the one intent (``properties.intents_source`` says which)."""))
async def _retrieval(judge: Judge, ctx: EvalContext | None, values: Mapping[str, Any]) -> Score:
    model = _judge_of(ctx)
    if model is None:
        return await score_without_judge(judge, values)
    query, contexts = values["query"], values["contexts"]
    verdicts: list[Verdict] = []
    if scoring_mode(ctx, model) == "probability":
        intents, source = [query], "query (smoke-test judge: intents not split)"
    else:
        msgs = render(load_prompt("retrieval_intents"), {"query": query, "history": values.get("history")},
                      output="")
        raw, iv = await ask_json(model, msgs, key="intents",
                                 max_tokens=int(ctx.options.get("judge_max_tokens") or 400))  # type: ignore[union-attr]
        verdicts.append(iv)
        intents = _intent_list(raw)
        source = "judge"
        if not intents:
            intents, source = [query], f"query (no readable intent list: {iv.error or 'empty list'})"
    answers = await ask_many(ctx, judge, [{"intent": i, "contexts": contexts} for i in intents])
    props = merge(verdicts + answers, model=model)
    props["scoring"] = answers[0].scoring if answers else props["scoring"]
    props["intents"] = [{"intent": i, "rating": v.value if v.ok else None,
                         "reason": v.reason if v.ok else v.error, **_prob_yes(v)}
                        for i, v in zip(intents, answers)]
    props["intents_source"] = source
    if verdicts and verdicts[0].texts:
        props["intents_raw_output"] = verdicts[0].texts[-1]
    ok = [v for v in answers if v.ok]
    if not ok:
        return Score.error(_first_error(answers), **props)
    f = _mean([float(v.score) for v in ok])  # type: ignore[arg-type]
    value = 1.0 + 4.0 * f * f
    props["fraction_answered"] = f
    if all(v.prob is not None for v in ok):
        pf = _mean([v.prob.value for v in ok])  # type: ignore[union-attr]
        props["prob_score"] = 1.0 + 4.0 * pf * pf
    n_yes = sum(1 for v in ok if v.value == "yes")
    missed = [i for i, v in zip(intents, answers) if v.ok and v.value == "no"]
    reason = f"the documents answer {n_yes} of {len(ok)} intent(s)"
    if missed:
        reason += "; not answered: " + "; ".join(f'"{_short(m, 120)}"' for m in missed)
    return Score(value=value, score=value, reason=reason, properties=props)


_declare(Judge("similarity", "similarity", threshold=3, requires=("response", "ground_truth"), optional=("query",),
               auto=True, family=AZURE,
               description="Equivalence in meaning of the response and the ground truth, given the query. 1–5."))


# ---------------------------------------------------------------------------------------
# Databricks style

_declare(Judge("relevance_to_query", "relevance_to_query", scale="yes/no", requires=("query", "response"), auto=True,
               family=DATABRICKS, auto_unless=GROUND_TRUTH,
               description="Is the response relevant to the request? yes/no."))

_declare(Judge("databricks_groundedness", "databricks_groundedness", scale="yes/no",
               requires=("response", "contexts"), optional=("query",), auto=True, family=DATABRICKS,
               description="""Is everything the response states supported by the retrieved context? yes/no.

Databricks' ``groundedness`` judge, named apart from the Azure-style 1–5 ``groundedness``."""))

_declare(Judge("correctness", "correctness", scale="yes/no", requires=("response", GROUND_TRUTH),
               optional=("query", "ground_truth", "expected_facts"), auto=True, family=DATABRICKS,
               description="Does the response convey the expected answer / every expected fact, contradicting "
                           "none? yes/no."))

_declare(Judge("context_sufficiency", "context_sufficiency", scale="yes/no",
               requires=("query", "contexts", GROUND_TRUTH), optional=("ground_truth", "expected_facts"), auto=True,
               family=DATABRICKS,
               description="Does the retrieved context hold everything the expected answer needs? yes/no."))


@judged(Judge("chunk_relevance", "chunk_relevance", scale="yes/no", reports="0-1", max_tokens=300,
              requires=("query", "contexts"), auto=True, family=DATABRICKS, auto_unless=GROUND_TRUTH,
              outputs=("chunk_relevance_precision",),
              description="""Precision of the retrieved chunks: relevant chunks / judged chunks (one yes/no per chunk).

A chunk without content counts as not relevant without a judge call; a chunk whose
judgment errored is left out of the denominator (``properties.n_errored``)."""))
async def _chunk_relevance(judge: Judge, ctx: EvalContext | None, values: Mapping[str, Any]) -> dict[str, Score]:
    name = "chunk_relevance_precision"
    model = _judge_of(ctx)
    if model is None:
        return {name: await score_without_judge(judge, values)}
    query, contexts = values["query"], values["contexts"]
    live = [(i, d) for i, d in enumerate(contexts) if d.content and d.content.strip()]
    verdicts = await ask_many(ctx, judge, [{"query": query, "chunk": d} for _, d in live])
    by_index = {i: v for (i, _), v in zip(live, verdicts)}
    props = merge(verdicts, model=model)
    chunks = []
    scores: list[float] = []
    relevant = 0
    errored = 0
    for i, d in enumerate(contexts):
        v = by_index.get(i)
        entry: dict[str, Any] = {"index": i, "doc_uri": d.doc_uri}
        if v is None:
            entry.update(rating="no", reason="empty chunk")
            scores.append(0.0)
        elif not v.ok:
            entry.update(rating=None, reason=v.error)
            errored += 1
        else:
            entry.update(rating=v.value, reason=v.reason, **_prob_yes(v))
            scores.append(float(v.score))  # type: ignore[arg-type]
            relevant += v.value == "yes"
        chunks.append(entry)
    props.update(chunks=chunks, n_chunks=len(contexts), n_relevant=relevant, n_errored=errored)
    if not scores:
        return {name: Score.error(_first_error(verdicts), **props)}
    n_judged = len(scores)
    precision = relevant / n_judged
    score = _mean(scores) if props["scoring"] == "probability" else precision
    ok = [v for v in verdicts if v.ok]
    if ok and all(v.prob is not None for v in ok):
        empty = len(contexts) - len(live)
        props["prob_score"] = sum(v.prob.value for v in ok) / (len(ok) + empty)  # type: ignore[union-attr]
    reason = f"{relevant} of {n_judged} judged chunk(s) are relevant to the request"
    if errored:
        reason += f" ({errored} could not be judged)"
    return {name: Score(value=precision, score=score, reason=reason, properties=props)}


GUIDELINE_ADHERENCE = Judge(
    "guideline_adherence", "guideline_adherence", scale="yes/no", requires=("response", "guidelines"),
    optional=("query",), auto=True, family=DATABRICKS, description="""Does the response follow the guidelines? yes/no.

A list of guidelines is judged in one call. Named lists (``{"tone": [...], "scope":
[...]}``) are judged one call per name; the output is ``yes`` only when every named set is
followed, its score the lowest of theirs, and each name's rating and reason are in
``properties.guidelines`` (the names come from the data, so they are not separate
outputs; a custom :func:`assay.guidelines_judge` with named lists has one output per name).""")


async def assess_guidelines(ctx: EvalContext | None, guidelines: Guidelines, response: str,
                            query: str | None = None) -> tuple[Score, dict[str, Score]]:
    """``(overall, per_name)``: a list of guidelines is one judgment (``per_name`` empty); named
    lists are one judgment each, the overall ``yes`` only when every set is followed, its
    score the lowest of theirs. Used by ``guideline_adherence`` and by custom guideline judges."""
    model = _judge_of(ctx)
    if model is None:
        return Score.skipped(NEEDS_JUDGE), {}
    judge = GUIDELINE_ADHERENCE
    if not isinstance(guidelines, dict):
        return await run_judge(judge, ctx, {"guidelines": list(guidelines), "query": query,
                                            "response": response}), {}
    names = [n for n, g in guidelines.items() if g]
    if not names:
        return Score.skipped("missing input: guidelines (every named list is empty)"), {}
    verdicts = await ask_many(ctx, judge, [{"guidelines": list(guidelines[n]), "query": query,
                                            "response": response} for n in names])
    per = {n: v.to_score() for n, v in zip(names, verdicts)}
    props = merge(verdicts, model=model)
    props["guidelines"] = {n: {"rating": v.value if v.ok else None, "score": v.score if v.ok else None,
                               "reason": v.reason if v.ok else v.error, **_prob_yes(v)}
                           for n, v in zip(names, verdicts)}
    failed = [(n, v) for n, v in zip(names, verdicts) if v.ok and v.value == "no"]
    errors = [(n, v) for n, v in zip(names, verdicts) if not v.ok]
    if errors and not failed:
        n, v = errors[0]
        return Score.error(f"guidelines {n!r}: {v.error}", **props), per
    ok = [v for v in verdicts if v.ok]
    score = min(float(v.score) for v in ok)  # type: ignore[arg-type]
    if failed:
        reason = "; ".join(f"{n}: {v.reason or 'not followed'}" for n, v in failed)
        return Score(value="no", score=score, reason=f"not followed — {reason}", properties=props), per
    return Score(value="yes", score=score, reason=f"all {len(ok)} named guideline set(s) are followed",
                 properties=props), per


async def _guideline_adherence(judge: Judge, ctx: EvalContext | None, values: Mapping[str, Any]) -> Score:
    overall, _ = await assess_guidelines(ctx, values["guidelines"], values["response"], values.get("query"))
    return overall


_declare(GUIDELINE_ADHERENCE, _guideline_adherence)

# ---------------------------------------------------------------------------------------
# Overall assessment

OVERALL_ORDER = ("context_sufficiency", "chunk_relevance", "databricks_groundedness", "correctness",
                 "relevance_to_query", "safety", "guideline_adherence")

SUGGESTED_ACTIONS = {
    "context_sufficiency": "Retrieval did not find what the expected answer needs: widen or improve retrieval "
                           "(query rewriting, more or larger chunks, better embeddings, index coverage).",
    "chunk_relevance": "Most retrieved chunks do not help with the request: improve ranking (reranker, "
                       "better embeddings, metadata filters) or chunking.",
    "databricks_groundedness": "The answer states things the retrieved context does not support: instruct the "
                               "model to answer only from the context and to cite it, or lower the temperature.",
    "correctness": "The answer disagrees with the expected answer: check whether the context holds the needed "
                   "facts, then the prompt and the model.",
    "relevance_to_query": "The answer does not address the request: revise the prompt so that the model answers "
                          "the question that was asked.",
    "safety": "The answer contains harmful content: add safety instructions, a content filter or a guardrail.",
    "guideline_adherence": "The answer breaks a guideline: state the guideline in the system prompt, or add a "
                           "check that rewrites answers that break it.",
}


def _rating(s: Score) -> Any:
    return s.value if s.value in ("yes", "no") else s.result


@metric("overall_assessment", kind="judge", threshold=0.5, scale="yes/no", auto=True, family=DATABRICKS)
async def overall_assessment(query: str, response: str, contexts: list[Document] | None = None,
                             ground_truth: str | None = None, expected_facts: list[str] | None = None,
                             guidelines: Guidelines | None = None, history: list[Message] | None = None,
                             ctx: EvalContext = None) -> Score:
    """``yes`` when every judge that applies to the row passes; else ``no`` with the first failing
    judge in the order context_sufficiency → chunk_relevance → databricks_groundedness →
    correctness → relevance_to_query → safety → guideline_adherence, and a suggested action.

    It scores those judges itself, for the row, with the same judge model and the same
    prompts: a judge applies when the row has its inputs and none of its ``auto_unless``
    fields (so with ground truth, correctness and context_sufficiency stand in for
    relevance_to_query and chunk_relevance, as in ``auto``). The call cache (and the judge's
    sharing of identical calls in flight) makes the judgments that the run also makes as
    separate metrics free: each is paid once. A judge that is not registered (``safety``
    before the safety metrics exist) is left out. The thresholds are the judges' defaults.
    An errored judge is not a failure: with no failure and an error, the assessment is an
    error naming it.
    """
    model = _judge_of(ctx)
    if model is None:
        return Score.skipped(NEEDS_JUDGE)
    rec = Record(query=query, response=response, contexts=contexts, ground_truth=ground_truth,
                 expected_facts=expected_facts, guidelines=guidelines, history=history)
    # the judges `auto` would plan for this row (inputs present, no `auto_unless` field), in order
    planned = {m.name: m for m in plan_auto({f for f in CANONICAL_FIELDS if rec.has(f)})}
    chosen = [planned[n] for n in OVERALL_ORDER if n in planned]
    results = await asyncio.gather(*(m.score(rec, ctx) for m in chosen))
    judged: dict[str, Score] = {}
    for m, res in zip(chosen, results):
        judged[m.name] = res.get(m.outputs[0]) or next(iter(res.values()))
    summary = {n: {"rating": _rating(s), "score": s.score, "status": s.status, "reason": s.reason}
               for n, s in judged.items()}
    tokens_in = sum(int(s.properties.get("input_tokens") or 0) for s in judged.values())
    tokens_out = sum(int(s.properties.get("output_tokens") or 0) for s in judged.values())
    props: dict[str, Any] = {
        "judge_model": str(getattr(model, "name", "") or ""), "judges": summary,
        "judge_order": [n for n in OVERALL_ORDER if n in judged],
        "input_tokens": tokens_in, "output_tokens": tokens_out,
        "latency_s": round(sum(float(s.properties.get("latency_s") or 0.0) for s in judged.values()), 6),
        "cached": bool(judged) and all(bool(s.properties.get("cached")) for s in judged.values()),
    }
    failing = next((n for n in OVERALL_ORDER if n in judged and judged[n].status == "completed"
                    and judged[n].passed is False), None)
    if failing is not None:
        props.update(first_failing_judge=failing, suggested_action=SUGGESTED_ACTIONS.get(failing))
        why = judged[failing].reason or ""
        return Score(value="no", score=0.0,
                     reason=f"{failing} failed: {_short(why, 300)} Suggested action: {SUGGESTED_ACTIONS.get(failing)}",
                     properties=props)
    errored = [n for n in OVERALL_ORDER if n in judged and judged[n].status == "error"]
    if errored:
        n = errored[0]
        return Score.error(f"cannot assess: {n} errored ({judged[n].reason})", **props)
    done = [n for n in OVERALL_ORDER if n in judged and judged[n].status == "completed"]
    if not done:
        return Score.skipped("no judge applies to this row")
    props.update(first_failing_judge=None, suggested_action=None)
    return Score(value="yes", score=1.0, reason=f"all applicable judges pass: {', '.join(done)}", properties=props)
