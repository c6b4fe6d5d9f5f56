"""Retrieval metrics over document ids (``doc_uri``), no model needed.

All three compare the retrieved documents (``contexts[].doc_uri``, in rank order) with
the documents the retriever should have found (``expected_doc_uris``). Relevance is
binary, and a document retrieved twice counts once (the first time).
"""

from __future__ import annotations

import math

from assay.metrics.base import EvalContext, Score, metric
from assay.records import Document


def _retrieved_uris(contexts: list[Document]) -> list[str]:
    seen: set[str] = set()
    out = []
    for d in contexts:
        if d.doc_uri is not None and d.doc_uri not in seen:
            seen.add(d.doc_uri)
            out.append(d.doc_uri)
    return out


def _cutoff(ctx: EvalContext | None, n: int) -> int:
    k = (ctx.options.get("k") if ctx is not None else None) or n
    return max(int(k), 0)


@metric(auto=True, family=("databricks",), scale="0-1")
def document_recall(contexts: list[Document], expected_doc_uris: list[str]) -> float | Score:
    """Recall of the expected documents: ``|expected ∩ retrieved| / |expected|``.

    Over ``doc_uri``; as Databricks Agent Evaluation's ``retrieval/ground_truth/document_recall``.
    Example: expected {a, b}, retrieved [a, c] -> 0.5.
    """
    retrieved = _retrieved_uris(contexts)
    if not retrieved:
        return Score.skipped("no retrieved document has a doc_uri")
    expected = set(expected_doc_uris)
    return len(expected.intersection(retrieved)) / len(expected)


@metric(scale="0-1")
def precision_at_k(contexts: list[Document], expected_doc_uris: list[str], ctx: EvalContext = None) -> float | Score:
    """Share of the top-k retrieved documents that are expected: ``|top_k ∩ expected| / k``.

    ``k`` is the run option ``k`` (default: every retrieved document). When fewer than k
    documents were retrieved the denominator is the number retrieved (as Databricks).
    """
    retrieved = _retrieved_uris(contexts)
    if not retrieved:
        return Score.skipped("no retrieved document has a doc_uri")
    top = retrieved[: _cutoff(ctx, len(retrieved))]
    if not top:
        return Score.skipped("k is 0")
    expected = set(expected_doc_uris)
    return sum(1 for u in top if u in expected) / len(top)


@metric(scale="0-1")
def ndcg_at_k(contexts: list[Document], expected_doc_uris: list[str], ctx: EvalContext = None) -> float | Score:
    """Normalised discounted cumulative gain at k with binary relevance.

    ``DCG@k = Σ_{i=1..k} rel_i / log2(i + 1)``; ``IDCG@k`` is the DCG of a ranking that
    puts ``min(k, |expected|)`` expected documents first; ``NDCG@k = DCG@k / IDCG@k``
    (Järvelin & Kekäläinen 2002). Example: expected {a}, retrieved [b, a] -> 1/log2(3) ≈ 0.631.
    """
    retrieved = _retrieved_uris(contexts)
    if not retrieved:
        return Score.skipped("no retrieved document has a doc_uri")
    k = _cutoff(ctx, len(retrieved))
    if k == 0:
        return Score.skipped("k is 0")
    expected = set(expected_doc_uris)
    dcg = sum(1.0 / math.log2(i + 2) for i, u in enumerate(retrieved[:k]) if u in expected)
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(expected))))
    return dcg / idcg
