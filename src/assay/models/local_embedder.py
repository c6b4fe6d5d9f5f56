"""A GGUF embedding model run in-process by llama.cpp (``local:/x.gguf`` under the embedder role).

:class:`LlamaCppEmbedder` loads the file with ``Llama(embedding=True)`` and embeds with the
pooling the file declares (mean for BERT-family encoders, last-token for some decoders;
the mean of its token vectors when it declares none, as a chat model does), then scales each
vector to unit length, as sentence-transformers' normalising models do.
Models trained with instruction prefixes (``search_query: `` / ``search_document: `` for
nomic-embed, ``query: `` / ``passage: `` for E5) get them from ``query_prefix`` and
``document_prefix``; with neither set, ``input_type`` changes nothing.

llama.cpp is not thread-safe: every call on a loaded file runs on that file's one worker thread,
and the file is loaded once per process, on first use. Texts longer than the context are cut.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import hashlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from assay.errors import AssayError
from assay.models.base import EmbeddingBatch, ModelCallError, TokenUsage, as_vectors, check_input_type, check_texts
from assay.models.local import default_threads, gguf_path, require_llama_cpp

EMBED_BATCH_SIZE = 32

_engines: dict[tuple[str, int, int], tuple[Any, concurrent.futures.ThreadPoolExecutor]] = {}
_engines_lock = threading.Lock()


def _fingerprint(path: Path) -> str:
    """The file's size and a hash of its first and last MiB: names its content cheaply."""
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        h.update(f.read(1 << 20))
        if size > (2 << 20):
            f.seek(-(1 << 20), os.SEEK_END)
            h.update(f.read(1 << 20))
    return h.hexdigest()[:16]


def _close(slot: list[Any]) -> None:
    """Free a loaded model while llama_cpp is still importable (at exit, before modules are torn down)."""
    llm, slot[0] = slot[0], None
    if llm is not None:
        try:
            llm.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass


class LlamaCppEmbedder:
    """Any GGUF file as an :class:`~assay.models.base.EmbeddingModel` (llama-cpp-python).

    ``n_ctx``: tokens per text at most (longer texts are cut); ``n_threads``: CPU threads
    (default: the cores this process may use); ``query_prefix`` / ``document_prefix``: put
    before texts embedded as queries / documents (None input type: ``query_prefix``, as E5
    does for symmetric tasks); ``normalize``: unit-length vectors (default True).
    """

    gives_embeddings = True
    embed_batch_size = EMBED_BATCH_SIZE
    default_concurrency = 2
    price = (0.0, 0.0)

    def __init__(self, path: str | os.PathLike[str], *, n_ctx: int = 512, n_threads: int | None = None,
                 query_prefix: str = "", document_prefix: str = "", normalize: bool = True,
                 name: str | None = None, note: str | None = None):
        p = gguf_path(path, "local embedding model")
        self.path = str(p.resolve())
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or default_threads())
        self.query_prefix = str(query_prefix or "")
        self.document_prefix = str(document_prefix or "")
        self.normalize = bool(normalize)
        self.name = name or f"local:{p.name}"
        self.note = note
        self._fingerprint: str | None = None

    def __repr__(self) -> str:
        return f"LlamaCppEmbedder({self.path!r}, n_ctx={self.n_ctx})"

    @property
    def embed_input_types(self) -> bool:
        return self.query_prefix != self.document_prefix

    @property
    def cache_identity(self) -> str:
        """The file's content (not its path), the context (texts are cut to it), the prefixes and
        the normalisation: all that changes a vector."""
        if self._fingerprint is None:
            self._fingerprint = _fingerprint(Path(self.path))
        extra = hashlib.sha256(f"{self.query_prefix}\0{self.document_prefix}".encode()).hexdigest()[:8]
        return (f"llama.cpp-embed:{Path(self.path).name}:{self._fingerprint}:ctx={self.n_ctx}:{extra}"
                f":norm={int(self.normalize)}")

    def _engine(self) -> tuple[Any, concurrent.futures.ThreadPoolExecutor]:
        key = (self.path, self.n_ctx, self.n_threads)
        with _engines_lock:
            got = _engines.get(key)
            if got is None:
                got = _engines[key] = ([None], concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="assay-embed"))
            return got

    def _load(self, slot: list[Any]) -> Any:
        if slot[0] is None:
            llama_cpp = require_llama_cpp()
            try:
                slot[0] = llama_cpp.Llama(model_path=self.path, embedding=True, n_ctx=self.n_ctx, n_batch=self.n_ctx,
                                          n_ubatch=self.n_ctx, n_threads=self.n_threads,
                                          n_threads_batch=self.n_threads, n_gpu_layers=0, verbose=False)
            except Exception as exc:
                raise AssayError(f"could not load GGUF model {self.path!r} for embeddings: {exc}") from exc
            atexit.register(_close, slot)
        return slot[0]

    def load(self) -> float:
        """Load the model now (it loads on first use otherwise); the seconds it took."""
        slot, executor = self._engine()
        t0 = time.perf_counter()
        executor.submit(self._load, slot).result()
        return time.perf_counter() - t0

    def _encode(self, slot: list[Any], texts: list[str]) -> tuple[list[Any], int, float]:
        llm = self._load(slot)
        t0 = time.perf_counter()
        try:
            vectors, tokens = llm.embed(texts, normalize=self.normalize, truncate=True, return_count=True)
        except Exception as exc:
            raise ModelCallError(f"{self.name}: llama.cpp failed to embed: {exc}", kind="server") from exc
        if vectors and vectors[0] and isinstance(vectors[0][0], list):
            # a file that declares no pooling (a chat model) gives one vector per token: mean-pool
            pooled = np.array([np.mean(np.asarray(v, dtype=np.float32), axis=0) for v in vectors], dtype=np.float32)
            if self.normalize:
                pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            vectors = pooled
        return vectors, int(tokens), time.perf_counter() - t0

    async def embed(self, texts: Sequence[str], *, input_type: str | None = None) -> np.ndarray:
        """Float32 vectors, ``(len(texts), dim)``, in the order given."""
        return (await self.embed_batch(texts, input_type=input_type)).vectors

    async def embed_batch(self, texts: Sequence[str], *, input_type: str | None = None) -> EmbeddingBatch:
        """:meth:`embed` with the tokens llama.cpp read."""
        items = check_texts(texts)
        prefix = self.document_prefix if check_input_type(input_type) == "document" else self.query_prefix
        if not items:
            return EmbeddingBatch(np.zeros((0, 0), dtype=np.float32), model=self.name)
        slot, executor = self._engine()
        loop = asyncio.get_running_loop()
        vectors, tokens, latency = await loop.run_in_executor(executor, self._encode, slot,
                                                              [prefix + t for t in items])
        return EmbeddingBatch(as_vectors(self.name, vectors, len(items)), TokenUsage(tokens, 0), latency, self.name)


def local_embedder(path: str | os.PathLike[str], **kw: Any) -> LlamaCppEmbedder:
    """A :class:`LlamaCppEmbedder` for a GGUF file (what ``local:PATH`` builds under the embedder
    role); needs llama-cpp-python."""
    model = LlamaCppEmbedder(path, **kw)   # a missing or non-GGUF file is the first thing to report
    require_llama_cpp()
    return model
