"""A target may return the documents it retrieved: a metric on them (named by the user) runs on the
rows where the target returned some, and is not applicable (never passed) on the others."""

from __future__ import annotations

import pytest

import assay
from assay.errors import InputError

DATA = [{"query": "q1", "expected_retrieved_context": [{"doc_uri": "a.md"}]},
        {"query": "q2", "expected_retrieved_context": [{"doc_uri": "b.md"}]},
        {"query": "q3", "expected_retrieved_context": [{"doc_uri": "c.md"}]}]


def app(query):
    found = {"q1": [{"doc_uri": "a.md", "content": "alpha"}], "q2": [{"doc_uri": "x.md", "content": "other"}]}
    return {"response": f"answer to {query}", "contexts": found.get(query, [])}


def test_a_named_metric_on_a_targets_contexts_runs_where_it_returned_them():
    res = assay.evaluate(DATA, target=app, metrics="document_recall")
    values = [r.get("outputs.document_recall.document_recall") for r in res.rows]
    assert values[:2] == [1.0, 0.0]
    assert values[2] is None                       # no documents returned: not scored, not passed
    agg = res.metrics["document_recall"]
    assert agg["evaluated"] == 2


def test_without_a_target_the_missing_contexts_are_still_refused():
    with pytest.raises(InputError, match="contexts"):
        assay.evaluate(DATA, metrics="document_recall")
