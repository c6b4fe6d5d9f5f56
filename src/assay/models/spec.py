"""Model specs: the one grammar for the strings that name a model (``--judge``, ``--attacker``,
``--model``, an endpoint ``--target``), parsed into data and built into backends.

=====================================  ==============================================
``openai:gpt-4o-mini``                 OpenAI (``OPENAI_API_KEY``; ``OPENAI_BASE_URL``)
``azure:my-deployment``                Azure OpenAI (``AZURE_OPENAI_ENDPOINT``,
                                       ``AZURE_OPENAI_API_KEY``, ``OPENAI_API_VERSION`` or
                                       ``AZURE_OPENAI_API_VERSION``)
``http://127.0.0.1:8000/v1#model``     any OpenAI-compatible server (vLLM, Ollama,
                                       llama.cpp server, LM Studio); key, if any, from
                                       ``ASSAY_JUDGE_API_KEY``; no ``#model``: the first
                                       model the server lists
``local:/path/model.gguf``             a GGUF run in-process (llama.cpp)
``embedded``                           the embedded smoke-test model (Gemma 3 270M, see
                                       :mod:`assay.models.embedded`)
=====================================  ==============================================

:func:`parse_model_spec` only reads the string; which forms a caller accepts and the defaults
it builds them with (limits, cache, keys) are chosen by :func:`assay.models.resolve`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from assay.errors import AssayError

ACCEPTED_FORMS = ("openai:MODEL (e.g. openai:gpt-4o-mini)",
                  "azure:DEPLOYMENT (e.g. azure:my-deployment)",
                  "http(s)://HOST:PORT/v1#MODEL (e.g. http://127.0.0.1:8000/v1#qwen2.5-7b)",
                  "local:/path/to/model.gguf")

KINDS = ("openai", "azure", "http", "local", "embedded")


class ModelSpecError(AssayError):
    """A model spec string that is not one of the accepted forms."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec. ``kind``: openai | azure | http | local | embedded."""

    kind: str
    model: str | None = None       # model name, or the Azure deployment
    base_url: str | None = None    # http kind
    path: str | None = None        # local kind
    spec: str = ""

    def build(self, **kw: Any) -> Any:
        """The bare backend (a :class:`~assay.models.base.ChatModel`, no limits or cache);
        ``kw`` go to its constructor."""
        from assay.models.openai_compat import OpenAICompat

        if self.kind == "openai":
            return OpenAICompat.openai(self.model or "", **kw)
        if self.kind == "azure":
            return OpenAICompat.azure(self.model or "", **kw)
        if self.kind == "http":
            return OpenAICompat.endpoint(self.base_url or "", self.model, **kw)
        if self.kind == "local":
            from assay.models.local import local_model

            return local_model(self.path or "", **kw)
        if self.kind == "embedded":
            from assay.models.embedded import embedded_judge

            return embedded_judge(**kw)
        raise ModelSpecError(f"unknown judge kind {self.kind!r}")  # pragma: no cover

    def build_embedder(self, **kw: Any) -> Any:
        """The bare backend as an embedding model (an :class:`~assay.models.base.EmbeddingModel`):
        ``embedded`` is the embedded embedding model (multilingual-e5-small), ``local`` a GGUF
        loaded for embeddings, the endpoint kinds their ``/embeddings`` API."""
        if self.kind == "embedded":
            from assay.models.embedded_embedder import embedded_embedder

            return embedded_embedder(**kw)
        if self.kind == "local":
            from assay.models.local_embedder import local_embedder

            return local_embedder(self.path or "", **kw)
        return self.build(**kw)

    def __str__(self) -> str:
        return self.spec


def parse_model_spec(spec: str, role: str = "judge") -> ModelSpec:
    """Parse a model spec; unknown forms raise :class:`ModelSpecError` listing the accepted ones.
    ``role`` names the model in messages (judge, target, simulator)."""
    s = (spec or "").strip()
    forms = "; ".join(ACCEPTED_FORMS)
    if not s:
        raise ModelSpecError(f"empty {role} spec; accepted forms: {forms}")
    if s.lower() == "embedded":
        return ModelSpec("embedded", spec="embedded")
    if re.match(r"^https?://", s, re.I):
        url, _, model = s.partition("#")
        url = url.rstrip("/")
        if not re.match(r"^https?://[^/\s#?]+", url, re.I):
            raise ModelSpecError(f"{role} {spec!r}: no host in the URL; accepted forms: {forms}")
        return ModelSpec("http", model=model.strip() or None, base_url=url, spec=s)
    prefix, sep, rest = s.partition(":")
    prefix = prefix.strip().lower()
    rest = rest.strip()
    if sep and prefix in ("openai", "azure"):
        if not rest:
            what = "model" if prefix == "openai" else "deployment"
            raise ModelSpecError(f"{role} {spec!r}: no {what} named; accepted forms: {forms}")
        return ModelSpec(prefix, model=rest, spec=s)
    if sep and prefix == "local":
        if not rest:
            raise ModelSpecError(f"{role} {spec!r}: no model file named; accepted forms: {forms}")
        return ModelSpec("local", path=os.path.expanduser(rest), spec=s)
    raise ModelSpecError(f"unknown {role} {spec!r}; accepted forms: {forms}")


# The names judges used before targets and simulators shared the grammar.
JudgeSpec = ModelSpec
JudgeSpecError = ModelSpecError
parse_judge_spec = parse_model_spec
