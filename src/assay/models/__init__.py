"""Models: the ChatModel contract, the backends and their table, limits, cache, resolve.

Every model a run calls (a judge, an endpoint target, a simulating model) is built with
:func:`resolve`, which parses a spec string (:func:`parse_model_spec`), builds the backend and
wraps it in one :class:`LimitedModel` (shared limiter + cache) with the defaults of its role::

    judge = resolve("openai:gpt-4o-mini", role="judge", concurrency=32)
    gen = await judge.generate([{"role": "user", "content": "..."}], max_tokens=50)

Embedding models are resolved the same way under the ``embedder`` role::

    embedder = resolve("embedded", role="embedder")      # multilingual-e5-small, in-process
    vectors = await embedder.embed(["how much protein per day"], input_type="query")
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# public name -> the module that defines it: loaded on first use (PEP 562), so importing one
# module of this package (``assay.models.limited``) does not load every backend.
_PUBLIC: dict[str, str] = {
    "Backend": "assay.models.backends",
    "INPUT_TYPES": "assay.models.base",
    "ChatModel": "assay.models.base",
    "EmbeddingBatch": "assay.models.base",
    "EmbeddingModel": "assay.models.base",
    "Generation": "assay.models.base",
    "ModelCallError": "assay.models.base",
    "TokenUsage": "assay.models.base",
    "distribution_generation": "assay.models.base",
    "gives_distributions": "assay.models.base",
    "gives_embeddings": "assay.models.base",
    "read_distribution": "assay.models.base",
    "CallCache": "assay.models.cache",
    "PgCallCache": "assay.models.cache",
    "call_key": "assay.models.cache",
    "default_cache_path": "assay.models.cache",
    "embed_key": "assay.models.cache",
    "open_cache": "assay.models.cache",
    "EMBEDDED_NAME": "assay.models.embedded",
    "embedded_judge": "assay.models.embedded",
    "embedded_model_path": "assay.models.embedded",
    "EMBEDDED_EMBEDDER_NAME": "assay.models.embedded_embedder",
    "EmbeddedEmbedder": "assay.models.embedded_embedder",
    "embedded_embedder": "assay.models.embedded_embedder",
    "embedder_available": "assay.models.embedded_embedder",
    "CallStats": "assay.models.limited",
    "LimitedModel": "assay.models.limited",
    "CircuitOpen": "assay.models.limiter",
    "Limiter": "assay.models.limiter",
    "RetryPolicy": "assay.models.limiter",
    "SharedLimits": "assay.models.limiter",
    "LlamaCppModel": "assay.models.local",
    "LlamaCppEmbedder": "assay.models.local_embedder",
    "OpenAICompat": "assay.models.openai_compat",
    "judge_usage": "assay.models.pricing",
    "lookup_price": "assay.models.pricing",
    "parse_price": "assay.models.pricing",
    "ROLES": "assay.models.roles",
    "Role": "assay.models.roles",
    "resolve": "assay.models.roles",
    "resolve_spec": "assay.models.roles",
    "ACCEPTED_FORMS": "assay.models.spec",
    "JudgeSpec": "assay.models.spec",
    "JudgeSpecError": "assay.models.spec",
    "ModelSpec": "assay.models.spec",
    "ModelSpecError": "assay.models.spec",
    "parse_judge_spec": "assay.models.spec",
    "parse_model_spec": "assay.models.spec",
}

if TYPE_CHECKING:   # what type checkers see; at run time __getattr__ loads these on first use
    from assay.models.backends import Backend
    from assay.models.base import (
        INPUT_TYPES,
        ChatModel,
        EmbeddingBatch,
        EmbeddingModel,
        Generation,
        ModelCallError,
        TokenUsage,
        distribution_generation,
        gives_distributions,
        gives_embeddings,
        read_distribution,
    )
    from assay.models.cache import CallCache, PgCallCache, call_key, default_cache_path, embed_key, open_cache
    from assay.models.embedded import EMBEDDED_NAME, embedded_judge, embedded_model_path
    from assay.models.embedded_embedder import (
        EMBEDDED_EMBEDDER_NAME,
        EmbeddedEmbedder,
        embedded_embedder,
        embedder_available,
    )
    from assay.models.limited import CallStats, LimitedModel
    from assay.models.limiter import CircuitOpen, Limiter, RetryPolicy, SharedLimits
    from assay.models.local import LlamaCppModel
    from assay.models.local_embedder import LlamaCppEmbedder
    from assay.models.openai_compat import OpenAICompat
    from assay.models.pricing import judge_usage, lookup_price, parse_price
    from assay.models.roles import ROLES, Role, resolve, resolve_spec
    from assay.models.spec import (
        ACCEPTED_FORMS,
        JudgeSpec,
        JudgeSpecError,
        ModelSpec,
        ModelSpecError,
        parse_judge_spec,
        parse_model_spec,
    )


def __getattr__(name: str) -> Any:
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'assay.models' has no attribute {name!r}") from None
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


def build_judge(spec: Any, **kw: Any) -> LimitedModel:
    """A judge ready for a run: ``resolve(spec, role="judge", **kw)`` (see :func:`resolve`)."""
    from assay.models.roles import resolve

    return resolve(spec, role="judge", **kw)


__all__ = [
    "ACCEPTED_FORMS", "Backend", "CallCache", "PgCallCache", "ChatModel", "EmbeddingModel", "Generation", "JudgeSpec", "JudgeSpecError",
    "LimitedModel", "Limiter", "SharedLimits", "ModelCallError", "RetryPolicy", "TokenUsage", "build_judge", "ModelSpec",
    "ModelSpecError", "parse_model_spec", "resolve", "resolve_spec", "Role", "ROLES", "call_key", "default_cache_path",
    "open_cache", "parse_judge_spec", "OpenAICompat",
    "judge_usage", "lookup_price", "parse_price", "LlamaCppModel", "EMBEDDED_NAME", "embedded_judge", "embedded_model_path",
    "distribution_generation", "gives_distributions", "read_distribution",
    "INPUT_TYPES", "EmbeddingBatch", "gives_embeddings", "embed_key", "CallStats", "EMBEDDED_EMBEDDER_NAME",
    "EmbeddedEmbedder", "embedded_embedder", "embedder_available", "LlamaCppEmbedder", "CircuitOpen",
]

