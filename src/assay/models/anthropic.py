"""Anthropic's Messages API as a chat backend: ``anthropic:MODEL`` (e.g. ``anthropic:claude-sonnet-4-5``).

One ``POST {base}/v1/messages`` per call, with the key in ``x-api-key`` and ``anthropic-version``
(``2023-06-01``). The body: ``model``, ``max_tokens`` (required by the API: 1024 when the caller
names none), the system messages joined into the top-level ``system`` field, the other messages
as ``messages`` (consecutive turns of one role merged, as the API wants them alternating), and
``temperature``. With ``stream=True`` the answer is read as the documented Server-Sent Events
(``message_start``, ``content_block_start``, ``content_block_delta`` with ``text_delta``,
``content_block_stop``, ``message_delta`` with the stop reason and output tokens, ``message_stop``;
``ping`` ignored, an ``error`` event raised); a stream that ends before ``message_stop`` is a
retryable ``bad_response``.

The Messages API returns no log-probabilities: ``logprobs`` asked for are not returned (the judges
then score the parsed answer), and :meth:`AnthropicModel.distribution` raises one line saying so.
It has no JSON mode either: ``response_format`` is not sent, the prompt asks for JSON and the judge's
parser reads it.

Key: ``api_key`` or ``ANTHROPIC_API_KEY``. Base URL: ``base_url`` or ``ANTHROPIC_BASE_URL``, else
``https://api.anthropic.com``. 429 with ``retry-after`` (or the ``anthropic-ratelimit-*-reset``
times) and 529 "overloaded" reach the limiter as rate limits
(:func:`~assay.models.provider_http.provider_error`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import orjson

from assay.errors import AssayError
from assay.models.base import Generation, Messages, ModelCallError, TokenUsage
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

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
#: ``max_tokens`` is required by the Messages API; this is sent when the caller names none
DEFAULT_MAX_TOKENS = 1024
DEFAULT_CONCURRENCY = 16


def messages_body(model: str, messages: Messages, *, max_tokens: int | None = None,
                  temperature: float | None = 0.0, stream: bool = False,
                  extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one Messages API request."""
    system, rest = split_system(messages)
    body: dict[str, Any] = {"model": model, "max_tokens": int(max_tokens or DEFAULT_MAX_TOKENS),
                            "messages": merge_turns(rest)}
    if system:
        body["system"] = system
    if temperature is not None:
        body["temperature"] = float(temperature)
    if stream:
        body["stream"] = True
    if extra_body:
        body.update(extra_body)
    return body


def read_message(name: str, data: Any, latency: float, model: str = "") -> Generation:
    """A Messages API answer (``type: message``) as a :class:`Generation`: the text blocks joined."""
    content = data.get("content") if isinstance(data, Mapping) else None
    if not isinstance(content, list):
        raise ModelCallError(f"{name}: the answer has no content list: {str(data)[:200]}",
                             kind="bad_response", retryable=True)
    text = "".join(str(b.get("text") or "") for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    u = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
    usage = TokenUsage(int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0))
    return Generation(text=text, usage=usage, latency_s=latency, model=str(data.get("model") or model),
                      raw=data, finish_reason=finish_reason(data.get("stop_reason")))


def read_stream(name: str, raw: bytes, latency: float, model: str = "") -> Generation:
    """A streamed Messages API answer (Server-Sent Events) rebuilt into the message it streams,
    then read as :func:`read_message`. An ``error`` event raises what its status would; a stream
    without ``message_start`` or ``message_stop`` is cut short."""
    msg: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    done = False
    for event, data in sse_events(raw):
        ev = json_event(name, data) if data else {}
        kind = ev.get("type") or event
        if kind == "error":
            _stream_error(name, ev)
        if kind == "message_start":
            msg = dict(ev.get("message") or {})
        elif msg is None and kind != "ping":
            raise bad_stream(name, f"sent {kind!r} before message_start")
        elif kind == "content_block_start":
            blocks[int(ev.get("index", len(blocks)))] = dict(ev.get("content_block") or {})
        elif kind == "content_block_delta":
            block = blocks.setdefault(int(ev.get("index", 0)), {"type": "text", "text": ""})
            delta = ev.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
        elif kind == "message_delta":
            msg.update({k: v for k, v in (ev.get("delta") or {}).items() if v is not None})
            usage = dict(msg.get("usage") or {})
            usage.update(ev.get("usage") or {})
            msg["usage"] = usage
        elif kind == "message_stop":
            done = True
    if msg is None or not done:
        raise bad_stream(name, "ended before message_stop (cut short)")
    msg["content"] = [blocks[i] for i in sorted(blocks)]
    return read_message(name, msg, latency, model)


def _stream_error(name: str, ev: Mapping[str, Any]) -> None:
    err = ev.get("error") or {}
    kind = str(err.get("type") or "")
    msg = f"{name}: error event in the stream: {kind}: {err.get('message') or ''}".rstrip(": ")
    if kind in ("overloaded_error", "rate_limit_error"):
        raise ModelCallError(msg, kind="rate_limit", retryable=True)
    raise ModelCallError(msg, kind="server", retryable=kind == "api_error")


class AnthropicModel(NativeModel):
    """A Claude model behind the Messages API (see the module doc). ``generate`` makes one request;
    wrap it in :class:`~assay.models.limited.LimitedModel` for retries, limits and the cache."""

    provider = "Anthropic Messages API"
    kind = "anthropic"
    #: what the judge probe reports without asking (the API has no such field)
    capabilities = {"json_mode": None, "logprobs": False, "max_tokens_param": "max_tokens"}

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 120.0, stream: bool = False, version: str = ANTHROPIC_VERSION,
                 extra_body: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None):
        if not model:
            raise AssayError("anthropic: no model named (e.g. anthropic:claude-sonnet-4-5)")
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise AssayError("ANTHROPIC_API_KEY is not set: export it, or pass api_key=, or use another judge")
        base = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL).rstrip("/")
        if not re.match(r"^https?://", base, re.I):
            raise AssayError(f"anthropic base URL must start with http:// or https://, got {base!r}")
        self.model, self.base_url, self.stream = model, base, bool(stream)
        self.timeout = float(timeout)
        self.extra_body = dict(extra_body or {})
        self.default_concurrency = DEFAULT_CONCURRENCY
        self._key = Secret(key)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json",
                         "anthropic-version": version, **dict(headers or {}), "x-api-key": key}
        self._url = f"{base}/v1/messages"
        self._post = ProviderPost(self.name, base, timeout=self.timeout, scrub=self._key.scrub)

    def request_headers(self) -> dict[str, str]:
        """The headers every request to this API carries (content type, API version, key): the
        batch API (:mod:`assay.models.batch`) sends the same."""
        return dict(self._headers)

    def build_body(self, messages: Messages, *, max_tokens: int | None = None,
                   temperature: float | None = 0.0, **_: Any) -> dict[str, Any]:
        """The JSON body :meth:`generate` sends (``response_format`` and ``logprobs`` have no field)."""
        return messages_body(self.model, messages, max_tokens=max_tokens, temperature=temperature,
                             stream=self.stream, extra_body=self.extra_body)

    async def send(self, body: Mapping[str, Any]) -> tuple[Any, float]:
        """POST ``body`` to ``/v1/messages``: ``(answer, seconds)``; the raw event stream when it
        asks for one."""
        return await self._post.post(url_target(self._url), self._headers, orjson.dumps(body),
                                     stream=bool(body.get("stream")))

    def read(self, data: Any, latency: float) -> Generation:
        if isinstance(data, bytes):
            return read_stream(self.name, data, latency, self.model)
        return read_message(self.name, data, latency, self.model)
