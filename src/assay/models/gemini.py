"""Google's Gemini API as a chat backend: ``gemini:MODEL`` (e.g. ``gemini:gemini-2.5-flash``).

One ``POST {base}/v1beta/models/MODEL:generateContent`` per call (``:streamGenerateContent?alt=sse``
with ``stream=True``: Server-Sent Events, each a partial ``GenerateContentResponse`` whose text parts
are joined; the last carries the finish reason and usage), the key in ``x-goog-api-key``. The body:
``contents`` (user and ``model`` turns, consecutive ones of a role merged), the system messages as
``systemInstruction``, and ``generationConfig`` with ``temperature``, ``maxOutputTokens``,
``responseMimeType: application/json`` where JSON is asked, and ``responseLogprobs`` / ``logprobs``
(the top alternatives per generated token, 1 to 20) where log-probabilities are asked. The answer's
``logprobsResult`` (``chosenCandidates`` and ``topCandidates`` per decoding step) becomes the
:class:`~assay.models.base.Generation`'s ``logprobs`` and ``token_logprobs``, which the judges read
as OpenAI's. A model that rejects log-probabilities (a 400 that names them) is asked again without
them, once, and the backend stops asking.

:meth:`GeminiModel.distribution` asks for one token constrained to the candidates
(``responseMimeType: text/x.enum`` with an enum ``responseSchema``) with the top 20 log-probabilities,
and reads the candidates' probabilities from that first step; the constraint does the work of an
``assistant_prefix`` (the API cannot continue a prefilled answer), which is not sent. A model that
refuses either raises one line saying it cannot.

Key: ``api_key`` or ``GEMINI_API_KEY`` (else ``GOOGLE_API_KEY``). Base URL: ``base_url`` or
``GEMINI_BASE_URL``, else ``https://generativelanguage.googleapis.com``. 429 ``RESOURCE_EXHAUSTED``
(its ``RetryInfo.retryDelay`` or ``retry-after``) and 503 "overloaded" reach the limiter as rate
limits. Vertex AI speaks the same body at another URL: :mod:`assay.models.vertex`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from assay.errors import AssayError
from assay.models.base import Generation, Messages, ModelCallError, TokenUsage, distribution_generation
from assay.models.http import Secret
from assay.models.provider_http import (
    NativeModel,
    ProviderPost,
    bad_stream,
    finish_reason,
    json_event,
    merge_turns,
    split_system,
    sse_events,
    url_target,
)

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"
#: the most top alternatives per token the API returns
MAX_TOP_LOGPROBS = 20
DEFAULT_CONCURRENCY = 16


def generate_body(messages: Messages, *, max_tokens: int | None = None, temperature: float | None = 0.0,
                  response_format: Mapping[str, Any] | None = None, logprobs: bool = False,
                  top_logprobs: int | None = None, extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one ``generateContent`` request."""
    system, rest = split_system(messages)
    contents = [{"role": t["role"], "parts": [{"text": t["content"]}]} for t in merge_turns(rest, "model")]
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    config: dict[str, Any] = {}
    if temperature is not None:
        config["temperature"] = float(temperature)
    if max_tokens is not None:
        config["maxOutputTokens"] = int(max_tokens)
    if response_format and response_format.get("type") in ("json_object", "json_schema"):
        config["responseMimeType"] = "application/json"
    if logprobs:
        config["responseLogprobs"] = True
        config["logprobs"] = max(1, min(MAX_TOP_LOGPROBS, int(top_logprobs or 5)))
    if config:
        body["generationConfig"] = config
    for k, v in (extra_body or {}).items():
        if k == "generationConfig" and isinstance(v, Mapping):
            body["generationConfig"] = {**body.get("generationConfig", {}), **v}
        else:
            body[k] = v
    return body


def read_logprobs(result: Any) -> tuple[dict[str, float] | None, list[tuple[str, dict[str, float]]] | None]:
    """A candidate's ``logprobsResult`` -> first-token alternatives and the per-token sequence."""
    if not isinstance(result, Mapping):
        return None, None
    chosen = result.get("chosenCandidates") or []
    tops = result.get("topCandidates") or []
    seq: list[tuple[str, dict[str, float]]] = []
    for i, c in enumerate(chosen):
        if not isinstance(c, Mapping):
            continue
        alts: dict[str, float] = {}
        top = tops[i] if i < len(tops) and isinstance(tops[i], Mapping) else {}
        for alt in top.get("candidates") or ():
            tok, val = alt.get("token"), alt.get("logProbability")
            if tok is not None and val is not None and tok not in alts:
                alts[tok] = float(val)
        tok = c.get("token")
        if tok is not None and tok not in alts and c.get("logProbability") is not None:
            alts[tok] = float(c["logProbability"])
        seq.append((tok or "", alts))
    return (seq[0][1] if seq else None), (seq or None)


def read_response(name: str, data: Any, latency: float, model: str = "") -> Generation:
    """A ``GenerateContentResponse`` as a :class:`Generation`: the first candidate's text parts
    (thought parts left out), usage, finish reason and log-probabilities. A prompt blocked by the
    safety filters (no candidate, ``promptFeedback.blockReason``) is a ``bad_request``."""
    cands = data.get("candidates") if isinstance(data, Mapping) else None
    if not cands:
        block = (data.get("promptFeedback") or {}).get("blockReason") if isinstance(data, Mapping) else None
        if block:
            raise ModelCallError(f"{name}: the prompt was blocked ({block})", kind="bad_request")
        raise ModelCallError(f"{name}: the answer has no candidates: {str(data)[:200]}",
                             kind="bad_response", retryable=True)
    cand = cands[0] if isinstance(cands[0], Mapping) else {}
    parts = (cand.get("content") or {}).get("parts") or []
    text = "".join(str(p.get("text") or "") for p in parts if isinstance(p, Mapping) and not p.get("thought"))
    u = data.get("usageMetadata") or {}
    usage = TokenUsage(int(u.get("promptTokenCount") or 0),
                       int(u.get("candidatesTokenCount") or 0) + int(u.get("thoughtsTokenCount") or 0))
    first, seq = read_logprobs(cand.get("logprobsResult"))
    return Generation(text=text, usage=usage, latency_s=latency, logprobs=first, token_logprobs=seq,
                      model=str(data.get("modelVersion") or model), raw=data,
                      finish_reason=finish_reason(cand.get("finishReason")))


def read_stream(name: str, raw: bytes, latency: float, model: str = "") -> Generation:
    """A ``streamGenerateContent?alt=sse`` answer joined into one response, then read as
    :func:`read_response`. A stream whose last chunk has no finish reason was cut short."""
    chunks = [json_event(name, data) for _, data in sse_events(raw) if data]
    if not chunks:
        raise bad_stream(name, "is empty")
    for c in chunks:
        if isinstance(c, Mapping) and c.get("error"):
            err = c["error"]
            raise ModelCallError(f"{name}: error in the stream: {err.get('status', '')} {err.get('message', '')}",
                                 kind="server", retryable=True)
    parts: list[dict[str, Any]] = []
    chosen: list[Any] = []
    tops: list[Any] = []
    last = chunks[-1]
    for c in chunks:
        cand = (c.get("candidates") or [{}])[0]
        parts += [p for p in (cand.get("content") or {}).get("parts") or [] if isinstance(p, Mapping)]
        lp = cand.get("logprobsResult") or {}
        chosen += lp.get("chosenCandidates") or []
        tops += lp.get("topCandidates") or []
    lcand = (last.get("candidates") or [{}])[0]
    if not lcand.get("finishReason"):
        raise bad_stream(name, "ended before a finish reason (cut short)")
    merged_cand = {**lcand, "content": {"role": "model", "parts": parts}}
    if chosen:
        merged_cand["logprobsResult"] = {"chosenCandidates": chosen, "topCandidates": tops}
    merged = {**last, "candidates": [merged_cand]}
    return read_response(name, merged, latency, model)


def rejects_logprobs(exc: ModelCallError) -> bool:
    """Whether a 400 says the model takes no log-probabilities."""
    return exc.status == 400 and "logprob" in f"{exc} {exc.body or ''}".lower()


class GeminiModel(NativeModel):
    """A Gemini model behind ``generateContent`` (see the module doc). ``generate`` makes one
    request (two when rejected log-probabilities are dropped)."""

    provider = "Gemini API"
    kind = "gemini"
    gives_distributions = True
    capabilities = {"max_tokens_param": "generationConfig.maxOutputTokens"}

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 120.0, stream: bool = False, api_version: str = "v1beta",
                 extra_body: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None):
        if not model:
            raise AssayError("gemini: no model named (e.g. gemini:gemini-2.5-flash)")
        key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not key:
            raise AssayError("GEMINI_API_KEY is not set: export it (or GOOGLE_API_KEY), or pass api_key=")
        base = (base_url or os.environ.get("GEMINI_BASE_URL") or GEMINI_BASE_URL).rstrip("/")
        self._key = Secret(key)
        self._setup(model.removeprefix("models/"), base, f"{base}/{api_version}/models/{model.removeprefix('models/')}",
                    {"x-goog-api-key": key, **dict(headers or {})}, timeout, stream, extra_body)

    def _setup(self, model: str, base: str, url: str, headers: Mapping[str, str], timeout: float, stream: bool,
               extra_body: Mapping[str, Any] | None) -> None:
        if not re.match(r"^https?://", base, re.I):
            raise AssayError(f"{self.provider} base URL must start with http:// or https://, got {base!r}")
        self.model, self.base_url, self.stream = model, base, bool(stream)
        self.timeout = float(timeout)
        self.extra_body = dict(extra_body or {})
        self.default_concurrency = DEFAULT_CONCURRENCY
        self.logprobs_supported: bool | None = None
        self._model_url = url
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        self._post = ProviderPost(self.name, base, timeout=self.timeout, scrub=self._key.scrub)

    def build_body(self, messages: Messages, *, max_tokens: int | None = None, temperature: float | None = 0.0,
                   response_format: Mapping[str, Any] | None = None, logprobs: bool = False,
                   top_logprobs: int | None = None) -> dict[str, Any]:
        """The JSON body :meth:`generate` sends (log-probabilities left out once the model refused them)."""
        return generate_body(messages, max_tokens=max_tokens, temperature=temperature,
                             response_format=response_format, logprobs=logprobs and self.logprobs_supported is not False,
                             top_logprobs=top_logprobs, extra_body=self.extra_body)

    async def _headers_now(self) -> Mapping[str, str]:
        return self._headers

    async def send(self, body: Mapping[str, Any], *, stream: bool | None = None) -> tuple[Any, float]:
        """POST ``body`` to ``generateContent`` (``streamGenerateContent?alt=sse`` when streaming):
        ``(answer, seconds)``, the raw event stream when streaming."""
        stream = self.stream if stream is None else stream
        url = f"{self._model_url}:streamGenerateContent?alt=sse" if stream else f"{self._model_url}:generateContent"
        return await self._post.post(url_target(url), await self._headers_now(), orjson.dumps(body), stream=stream)

    def read(self, data: Any, latency: float) -> Generation:
        if isinstance(data, bytes):
            return read_stream(self.name, data, latency, self.model)
        return read_response(self.name, data, latency, self.model)

    async def generate(self, messages: Messages, *, max_tokens: int | None = None,
                       temperature: float | None = 0.0, response_format: Mapping[str, Any] | None = None,
                       logprobs: bool = False, top_logprobs: int | None = None) -> Generation:
        body = self.build_body(messages, max_tokens=max_tokens, temperature=temperature,
                               response_format=response_format, logprobs=logprobs, top_logprobs=top_logprobs)
        asked = "responseLogprobs" in body.get("generationConfig", {})
        try:
            data, latency = await self.send(body)
        except ModelCallError as exc:
            if not (asked and rejects_logprobs(exc)):
                raise
            self.logprobs_supported = False
            for k in ("responseLogprobs", "logprobs"):
                body["generationConfig"].pop(k, None)
            data, latency = await self.send(body)
        else:
            if asked:
                self.logprobs_supported = True
        return self.read(data, latency)

    async def distribution(self, messages: Messages, candidates: Sequence[str], *,
                           assistant_prefix: str | None = None) -> Generation:
        """The next-token probabilities of ``candidates``: one token constrained to them, with the
        top 20 log-probabilities of that step (see the module doc)."""
        cands = [str(c) for c in candidates]
        if not self.gives_distributions:
            return await super().distribution(messages, cands)
        body = generate_body(messages, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=MAX_TOP_LOGPROBS,
                             extra_body=self.extra_body)
        body["generationConfig"].update(responseMimeType="text/x.enum",
                                        responseSchema={"type": "STRING", "enum": cands})
        try:
            data, latency = await self.send(body, stream=False)
        except ModelCallError as exc:
            if exc.status == 400:
                self.gives_distributions = False
                raise ModelCallError(f"{self.name} cannot give next-token distributions: the model refused "
                                     f"constrained log-probabilities ({exc})", kind="bad_request",
                                     status=400, body=exc.body) from None
            raise
        gen = read_response(self.name, data, latency, self.model)
        if not gen.logprobs:
            self.gives_distributions = False
            raise ModelCallError(f"{self.name} cannot give next-token distributions: the answer has no "
                                 "log-probabilities", kind="bad_request")
        probs = {c: 0.0 for c in cands}
        for tok, lp in gen.logprobs.items():
            t = tok.strip()
            if t in probs:
                probs[t] += math.exp(lp)
        mass = sum(probs.values())
        if mass <= 0:
            raise ModelCallError(f"{self.name}: none of {cands} among the first token's alternatives",
                                 kind="bad_response")
        return distribution_generation({c: p / mass for c, p in probs.items()}, mass,
                                       prompt_tokens=gen.usage.input_tokens, latency_s=latency, model=self.model)
