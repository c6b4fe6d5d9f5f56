"""Similarity of texts for the test-set generator: picking a second passage for a multi-hop
question, the passages that might answer an "unanswerable" one, and near-duplicate questions.

By default the project's embedded embedding model (multilingual-e5-small, in-process, see
:mod:`assay.models.embedded_embedder`) through :func:`assay.models.resolve` with the ``embedder``
role, so vectors are cached per text in the call cache; any embedder spec works. When the
embedded model is not installed (``assay[embed]``), vectors are hashed word counts instead
(:func:`hashed_vectors`), and the result says so.

Two questions are near-duplicates when the cosine similarity of their embeddings is at least
:data:`DUPLICATE_THRESHOLD` (0.93 with multilingual-e5-small, whose cosines between unrelated
questions on one subject sit around 0.80–0.88 and between rewordings of one question at 0.93 and
above; 0.8 for hashed word counts).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

DUPLICATE_THRESHOLD = 0.93
LEXICAL_THRESHOLD = 0.8
_WORD = re.compile(r"\w+", re.UNICODE)
_DIM = 1024


def hashed_vectors(texts: Sequence[str]) -> np.ndarray:
    """Unit vectors of hashed lower-cased word counts (a lexical stand-in for embeddings)."""
    out = np.zeros((len(texts), _DIM), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in _WORD.findall(t.lower()):
            out[i, int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little") % _DIM] += 1.0
    return _unit(out)


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


class Similarity:
    """Unit vectors of texts from an embedder (or hashed word counts), and its duplicate threshold."""

    def __init__(self, embedder: Any = None, *, threshold: float | None = None):
        self.embedder = embedder
        self.name = str(getattr(embedder, "name", "hashed word counts")) if embedder is not None else \
            "hashed word counts"
        self.threshold = threshold if threshold is not None else (
            DUPLICATE_THRESHOLD if embedder is not None else LEXICAL_THRESHOLD)

    async def vectors(self, texts: Sequence[str], input_type: str | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        if self.embedder is None:
            return hashed_vectors(texts)
        return _unit(np.asarray(await self.embedder.embed(list(texts), input_type=input_type), dtype=np.float32))


def open_similarity(spec: Any = None, *, threshold: float | None = None) -> tuple[Similarity, str | None]:
    """``(similarity, note)``: the embedder for ``spec`` (default the embedded one); when the
    default embedded model is not installed, hashed word counts and a note saying so."""
    from assay.models import embedder_available, resolve

    if spec is None or (isinstance(spec, str) and spec.strip().lower() in ("", "embedded", "default")):
        if not embedder_available():
            return Similarity(None, threshold=threshold), (
                "near-duplicates and neighbours found by word overlap: the embedded embedding model is not "
                "installed (pip install 'assay[embed]')")
        spec = "embedded"
    if isinstance(spec, str) and spec.strip().lower() == "words":
        return Similarity(None, threshold=threshold), None
    return Similarity(resolve(spec, role="embedder"), threshold=threshold), None


def top_k(query: np.ndarray, matrix: np.ndarray, k: int, exclude: Sequence[int] = ()) -> list[int]:
    """Indexes of the ``k`` rows of ``matrix`` most similar to ``query`` (ties: lower index first)."""
    sims = matrix @ query
    order = sorted(range(len(sims)), key=lambda i: (-float(sims[i]), i))
    skip = set(exclude)
    return [i for i in order if i not in skip][:k]
