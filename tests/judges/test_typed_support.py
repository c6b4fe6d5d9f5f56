"""The support scorer v2 reads what the question asks (issue 32, item 6): a wrong answer made of the
context's own words fails when it gives nothing of the asked kind, is ranked lower when another
candidate of that kind sits nearer the question's words, and a question it cannot type leaves the
support share as it was. The examples are written for these tests (none is a fit or held-out pair)."""

from __future__ import annotations

import asyncio

import pytest

from assay.judges.support import support
from assay.judges.typed import check_answer, question_type, typed_support
from assay.metrics.base import REGISTRY, EvalContext, load_builtin_metrics
from assay.records import Record

load_builtin_metrics()


def grounded(query: str, response: str, context: str, metric: str = "groundedness"):
    out = asyncio.run(REGISTRY[metric].score(Record(query=query, response=response,
                                                    contexts=[{"content": context}]), EvalContext(), None))
    return out[REGISTRY[metric].outputs[0]]


@pytest.mark.parametrize("question, kind, dimension", [
    ("Who directed the film?", "person", None),
    ("When did the museum open?", "time", None),
    ("In what year was the treaty signed?", "time", None),
    ("Where was the painter born?", "place", None),
    ("How heavy is the suitcase?", "quantity", "mass"),
    ("How much does the course cost?", "quantity", "money"),
    ("How tall is the lighthouse?", "quantity", "length"),
    ("What nationality is the chef?", "nationality", None),
    ("Which language do they speak at home?", "language", None),
    ("Is the museum open on Sundays?", "", None),             # yes/no: not checked
    ("Which is older, the church or the tower?", "", None),   # a choice between the question's words
    ("What does the company make?", "", None),                # not typed
])
def test_the_question_type(question: str, kind: str, dimension: str | None) -> None:
    asked = question_type(question)
    assert (asked.kind, asked.dimension) == (kind, dimension)


def test_how_many_reads_the_counted_noun() -> None:
    asked = question_type("How many rooms does the hotel have?")
    assert asked.kind == "count" and asked.counted == "room"


NATIONALITY = ("What nationality is the chef?",
               "The chef, Piet Vries, is Belgian and runs a restaurant in Ghent.")


def test_an_answer_that_gives_another_fact_of_the_context_fails() -> None:
    q, ctx = NATIONALITY
    right, wrong = "The chef is Belgian.", "The chef is Piet Vries."
    assert support(wrong, [ctx]).share == support(right, [ctx]).share == 1.0     # v1 cannot tell them apart
    assert check_answer(q, right, [ctx]).verdict == "ok"
    bad = check_answer(q, wrong, [ctx])
    assert bad.verdict == "mismatch" and "asks for a nationality" in bad.why
    g, b = grounded(q, right, ctx), grounded(q, wrong, ctx)
    assert g.passed is True and b.passed is False and b.score < g.score
    assert b.properties["scorer_version"] == "2" and b.properties["question_check"] == "mismatch"
    assert b.properties["support"] == 1.0 and b.properties["asked"] == "nationality"
    assert "asks for a nationality; the answer gives none" in b.reason
    assert grounded(q, wrong, ctx, "databricks_groundedness").value == "no"


@pytest.mark.parametrize("question, context, right, wrong", [
    ("When did the museum open?", "The museum opened in 1993 and was designed by Eva Sand.",
     "The museum opened in 1993.", "The museum was designed by Eva Sand."),
    ("How heavy is the suitcase?", "The suitcase weighs 4 kilograms and is 70 centimetres tall.",
     "It weighs 4 kilograms.", "It is 70 centimetres tall."),
    ("How many rooms does the hotel have?", "The hotel has 80 rooms and employs 45 staff.",
     "The hotel has 80 rooms.", "The hotel employs 45 staff."),
    ("Who restored the organ?", "The organ was built in 1731 and restored by Greta Holm.",
     "Greta Holm restored the organ.", "The organ was built in 1731."),
    ("Who signed the letter?", "The letter was signed by the mayor, Ida Berg, in May.",
     "Ida Berg signed the letter.", "The letter was signed."),            # the wrong one only echoes
])
def test_the_asked_kind_missing_or_in_the_wrong_unit_fails(question: str, context: str, right: str,
                                                           wrong: str) -> None:
    assert check_answer(question, right, [context]).verdict == "ok"
    assert check_answer(question, wrong, [context]).verdict == "mismatch"
    assert grounded(question, right, context).passed is True
    assert grounded(question, wrong, context).passed is False


def test_another_candidate_nearer_the_question_ranks_lower_but_still_passes() -> None:
    q = "When does the shop open on Sundays?"
    ctx = "The shop opens at 10 am on Sundays and closes at 4 pm."
    right, wrong = "It opens at 10 am on Sundays.", "It closes at 4 pm on Sundays."
    assert check_answer(q, right, [ctx]).verdict == "ok"
    assert check_answer(q, wrong, [ctx]).verdict == "displaced"
    assert typed_support(q, wrong, [ctx]).share < typed_support(q, right, [ctx]).share
    g, b = grounded(q, right, ctx), grounded(q, wrong, ctx)
    assert b.score < g.score and b.passed is True       # ranked lower, not failed (agreement must not fall)


def test_a_question_it_cannot_type_keeps_the_support_share() -> None:
    q, ctx = "What does the company make?", "The company makes bicycles in Utrecht."
    for answer in ("It makes bicycles.", "It makes cars in Utrecht."):
        got = typed_support(q, answer, [ctx])
        assert got.check.verdict == "unchecked" and got.share == support(answer, [ctx]).share
    assert typed_support("", "It makes bicycles.", [ctx]).check.verdict == "unchecked"   # no query


def test_an_answer_with_no_content_word_is_not_failed_by_the_check() -> None:
    got = typed_support("Is the museum open on Sundays?", "Yes.", ["The museum is open every day."])
    assert got.share is None and got.check.verdict == "unchecked"
