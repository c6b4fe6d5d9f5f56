"""Any provider LiteLLM speaks, as a chat backend: ``litellm:MODEL`` (e.g. ``litellm:mistral/mistral-small``,
``litellm:cohere/command-r``), an optional extra (``pip install 'assay[litellm]'``).

``litellm`` is imported on the first call, not before; when it is missing the spec fails with one
line saying how to install it. Each call is one ``litellm.acompletion`` with LiteLLM's own retries
off (``num_retries=0``: the limiter retries) and ``drop_params=True`` (a provider without
log-probabilities or JSON mode gets the call without them). The answer is OpenAI-shaped and read by
:func:`~assay.models.openai_wire.read_generation`; LiteLLM's errors carry the provider's status,
mapped by :func:`~assay.models.provider_http.provider_error` (429 and overload to the limiter as
rate limits, with any ``retry-after`` the provider sent). Keys and base URLs are LiteLLM's own
environment variables (``MISTRAL_API_KEY``, ``COHERE_API_KEY`` ...). Prices: the price table's row
for the model's name without its provider prefix, if any.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from assay.errors import AssayError
from assay.models.base import Generation, Messages, ModelCallError
from assay.models.openai_wire import read_generation
from assay.models.provider_http import NativeModel, provider_error

INSTALL = "litellm is not installed: pip install 'assay[litellm]' (or pip install litellm)"


def load_litellm() -> Any:
    """The ``litellm`` module, imported now; :class:`AssayError` with the install line when missing."""
    try:
        import litellm
    except ImportError:
        raise AssayError(f"litellm: judge needs an optional extra: {INSTALL}") from None
    return litellm


def _as_dict(resp: Any) -> Any:
    """LiteLLM's ``ModelResponse`` (a pydantic model) as the plain dict it dumps to."""
    dump = getattr(resp, "model_dump", None)
    return dump() if callable(dump) else resp


class LiteLLMModel(NativeModel):
    """A model behind ``litellm.acompletion`` (see the module doc)."""

    provider = "LiteLLM"
    kind = "litellm"

    def __init__(self, model: str, *, timeout: float = 120.0, extra_body: Mapping[str, Any] | None = None,
                 **litellm_kwargs: Any):
        if not model:
            raise AssayError("litellm: no model named (e.g. litellm:mistral/mistral-small)")
        self._litellm = load_litellm()
        self.model, self.timeout = model, float(timeout)
        self.extra = {**dict(extra_body or {}), **litellm_kwargs}
        self.default_concurrency = 8

    @property
    def price_model(self) -> str:
        return self.model.rsplit("/", 1)[-1]

    def build_body(self, messages: Messages, *, max_tokens: int | None = None, temperature: float | None = 0.0,
                   response_format: Mapping[str, Any] | None = None, logprobs: bool = False,
                   top_logprobs: int | None = None) -> dict[str, Any]:
        """The keyword arguments of one ``litellm.acompletion`` call."""
        kw: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages], "num_retries": 0,
                              "drop_params": True, "timeout": self.timeout}
        if max_tokens is not None:
            kw["max_tokens"] = int(max_tokens)
        if temperature is not None:
            kw["temperature"] = float(temperature)
        if response_format:
            kw["response_format"] = dict(response_format)
        if logprobs:
            kw["logprobs"] = True
            kw["top_logprobs"] = int(top_logprobs or 5)
        kw.update(self.extra)
        return kw

    async def send(self, body: Mapping[str, Any]) -> tuple[Any, float]:
        """One ``litellm.acompletion(**body)``: ``(answer as a dict, seconds)``."""
        t0 = time.perf_counter()
        try:
            resp = await self._litellm.acompletion(**body)
        except (asyncio.TimeoutError, TimeoutError):
            raise ModelCallError(f"{self.name}: no answer within {self.timeout:g} s", kind="timeout",
                                 retryable=True) from None
        except Exception as exc:
            raise self.error(exc) from None
        return _as_dict(resp), time.perf_counter() - t0

    def error(self, exc: Exception) -> ModelCallError:
        """LiteLLM's exception as the :class:`ModelCallError` the limiter acts on."""
        status = getattr(exc, "status_code", None)
        text = " ".join(str(exc).split())[:500]
        if isinstance(status, int) and status >= 400:
            resp = getattr(exc, "response", None)
            headers = {str(k).lower(): str(v) for k, v in (getattr(resp, "headers", None) or {}).items()}
            return provider_error(self.name, status, None, text, headers)
        kind = type(exc).__name__
        if "Timeout" in kind:
            return ModelCallError(f"{self.name}: {text}", kind="timeout", retryable=True)
        if "Connection" in kind:
            return ModelCallError(f"{self.name}: connection failed: {text}", kind="connection", retryable=True)
        return ModelCallError(f"{self.name}: {kind}: {text}", kind="bad_request")

    def read(self, data: Any, latency: float) -> Generation:
        return read_generation(self.name, data, latency, self.model)

    async def aclose(self) -> None:
        return None

    def __del__(self) -> None:
        return None
