"""Models: the ChatModel contract, the OpenAI-compatible backend, limits, cache, parsing.

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

from typing import Any

from assay.models.base import (INPUT_TYPES, ChatModel, EmbeddingBatch, EmbeddingModel, Generation, ModelCallError,
                               TokenUsage, distribution_generation, gives_distributions, gives_embeddings,
                               read_distribution)
from assay.models.cache import CallCache, PgCallCache, call_key, default_cache_path, embed_key, open_cache
from assay.models.embedded import EMBEDDED_NAME, embedded_judge, embedded_model_path
from assay.models.embedded_embedder import (EMBEDDED_EMBEDDER_NAME, EmbeddedEmbedder, embedded_embedder,
                                            embedder_available)
from assay.models.limits import CallStats, CircuitOpen, LimitedModel, Limiter, RetryPolicy, SharedLimits
from assay.models.local import LlamaCppModel
from assay.models.local_embedder import LlamaCppEmbedder
from assay.models.openai_compat import OpenAICompat
from assay.models.pricing import judge_usage, lookup_price, parse_price
from assay.models.parse import (LogprobScore, ParseResult, Scale, parse_score, score_from_logprobs,
                                score_from_token_logprobs)
from assay.models.roles import ROLES, Role, resolve, resolve_spec
from assay.models.spec import (ACCEPTED_FORMS, JudgeSpec, JudgeSpecError, ModelSpec, ModelSpecError,
                               parse_judge_spec, parse_model_spec)


def build_judge(spec: Any, **kw: Any) -> LimitedModel:
    """A judge ready for a run: ``resolve(spec, role="judge", **kw)`` (see :func:`resolve`)."""
    return resolve(spec, role="judge", **kw)


__all__ = [
    "ACCEPTED_FORMS", "CallCache", "PgCallCache", "ChatModel", "EmbeddingModel", "Generation", "JudgeSpec", "JudgeSpecError",
    "LimitedModel", "Limiter", "SharedLimits", "LogprobScore", "ModelCallError", "ParseResult", "RetryPolicy", "Scale",
    "TokenUsage", "build_judge", "ModelSpec", "ModelSpecError", "parse_model_spec", "resolve",
    "resolve_spec", "Role", "ROLES", "call_key", "default_cache_path", "open_cache", "parse_judge_spec",
    "parse_score", "score_from_logprobs", "score_from_token_logprobs", "OpenAICompat",
    "judge_usage", "lookup_price", "parse_price", "LlamaCppModel", "EMBEDDED_NAME", "embedded_judge", "embedded_model_path",
    "distribution_generation", "gives_distributions", "read_distribution",
    "INPUT_TYPES", "EmbeddingBatch", "gives_embeddings", "embed_key", "CallStats", "EMBEDDED_EMBEDDER_NAME",
    "EmbeddedEmbedder", "embedded_embedder", "embedder_available", "LlamaCppEmbedder", "CircuitOpen",
]

