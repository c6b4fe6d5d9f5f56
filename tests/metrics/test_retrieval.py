"""document_recall, precision@k and NDCG@k against worked examples."""

import math

from assay.metrics.base import EvalContext, get_metric
from assay.records import Document, Record


def rec(retrieved, expected):
    return Record(contexts=[Document(doc_uri=u, content="x") for u in retrieved], expected_doc_uris=expected)


def score(name, r, **options):
    m = get_metric(name)
    return m.score_sync(r, EvalContext(options=options))[m.outputs[0]]


def test_document_recall():
    assert score("document_recall", rec(["a", "c"], ["a", "b"])).value == 0.5
    assert score("document_recall", rec(["b", "a"], ["a", "b"])).value == 1.0
    assert score("document_recall", rec(["c"], ["a", "b"])).value == 0.0
    # a document retrieved twice counts once
    assert score("document_recall", rec(["a", "a"], ["a", "b"])).value == 0.5


def test_document_recall_without_uris_is_skipped_with_reason():
    r = Record(contexts=[Document(content="text only")], expected_doc_uris=["a"])
    s = score("document_recall", r)
    assert s.status == "skipped" and "doc_uri" in s.reason


def test_precision_at_k():
    r = rec(["a", "x", "b", "y"], ["a", "b"])
    assert score("precision_at_k", r).value == 0.5
    assert score("precision_at_k", r, k=1).value == 1.0
    assert score("precision_at_k", r, k=2).value == 0.5
    assert score("precision_at_k", r, k=3).value == 2 / 3


def test_ndcg_at_k():
    assert math.isclose(score("ndcg_at_k", rec(["b", "a"], ["a"])).value, 1 / math.log2(3))
    assert score("ndcg_at_k", rec(["a", "b"], ["a", "b"])).value == 1.0
    # expected {a, b}, retrieved [a, x, b]: DCG = 1 + 1/2, IDCG = 1 + 1/log2(3)
    assert math.isclose(score("ndcg_at_k", rec(["a", "x", "b"], ["a", "b"])).value,
                        1.5 / (1 + 1 / math.log2(3)))
    assert score("ndcg_at_k", rec(["x", "a"], ["a"]), k=1).value == 0.0
