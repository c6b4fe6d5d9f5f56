"""Models: the ChatModel contract, the OpenAI-compatible backend, limits, cache, parsing.

A judge for a run is usually built with :func:`build_judge`, which parses a spec string,
builds the backend and wraps it in one :class:`LimitedModel` (shared limiter + cache)::

    judge = build_judge("openai:gpt-4o-mini", concurrency=32)
    gen = await judge.generate([{"role": "user", "content": "..."}], max_tokens=50)
"""

from __future__ import annotations

import os
from typing import Any

from assay.models.base import ChatModel, EmbeddingModel, Generation, ModelCallError, TokenUsage
from assay.models.cache import CallCache, call_key, default_cache_path, open_cache
from assay.models.embedded import EMBEDDED_NAME, embedded_judge, embedded_model_path
from assay.models.limits import LimitedModel, Limiter, RetryPolicy
from assay.models.local import LlamaCppModel
from assay.models.openai_compat import OpenAICompat
from assay.models.pricing import judge_usage, lookup_price, parse_price
from assay.models.parse import (LogprobScore, ParseResult, Scale, parse_score, score_from_logprobs,
                                score_from_token_logprobs)
from assay.models.spec import ACCEPTED_FORMS, JudgeSpec, JudgeSpecError, parse_judge_spec

_DEFAULT = object()


def build_judge(spec: "str | JudgeSpec | ChatModel", *, concurrency: int | None = None,
                rpm: float | None = None, tpm: float | None = None, timeout: float | None = 120.0,
                max_attempts: int = 6, cache: Any = _DEFAULT, price: Any = None,
                **backend: Any) -> LimitedModel:
    """A judge ready for a run: the backend for ``spec`` behind one :class:`Limiter` and the
    call cache (``cache``: a :class:`CallCache`, a path, None for no cache; by default
    ``$ASSAY_CACHE`` or ``./.assay/cache.sqlite``). ``price``: USD per 1M input and output
    tokens, ``(in, out)`` or ``"in,out"``, for the run's judge cost when the price table does not
    know the model (see :mod:`assay.models.pricing`). ``backend`` kwargs go to the backend."""
    if isinstance(spec, (str, JudgeSpec)):
        js = parse_judge_spec(spec) if isinstance(spec, str) else spec
        model = js.build(**backend)
    else:
        model = spec
    limiter = Limiter.for_model(model, rpm=rpm, tpm=tpm, timeout=timeout, max_attempts=max_attempts,
                                **({"concurrency": concurrency} if concurrency else {}))
    if cache is _DEFAULT:
        cache = open_cache()
    elif isinstance(cache, (str, os.PathLike)):
        cache = open_cache(cache)
    return LimitedModel(model, limiter, cache,
                        price=parse_price(price, where="build_judge price") if price is not None else None)


__all__ = [
    "ACCEPTED_FORMS", "CallCache", "ChatModel", "EmbeddingModel", "Generation", "JudgeSpec", "JudgeSpecError",
    "LimitedModel", "Limiter", "LogprobScore", "ModelCallError", "ParseResult", "RetryPolicy", "Scale",
    "TokenUsage", "build_judge", "call_key", "default_cache_path", "open_cache", "parse_judge_spec",
    "parse_score", "score_from_logprobs", "score_from_token_logprobs", "OpenAICompat",
    "judge_usage", "lookup_price", "parse_price", "LlamaCppModel", "EMBEDDED_NAME", "embedded_judge", "embedded_model_path",
]

# next-token distributions (ChatModel.distribution)
from assay.models.base import distribution_generation, gives_distributions, read_distribution  # noqa: E402

__all__ += ["distribution_generation", "gives_distributions", "read_distribution"]
