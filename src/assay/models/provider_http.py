"""What the native provider backends share: one JSON POST over :class:`~assay.models.http.LeanHTTP`
with its caps and timeouts, their error bodies and rate-limit headers mapped onto the one
:class:`~assay.models.base.ModelCallError` the limiter acts on, and Server-Sent Events read off a
streamed body.

:class:`ProviderPost` sends a request and hands back the parsed JSON (or the raw body of a stream),
with the latency; an error status becomes :func:`provider_error`:

* 429 ``rate_limit`` with the wait the server asked for: ``retry-after-ms`` / ``retry-after``
  (:func:`~assay.models.openai_wire.parse_retry_after`), else Google's ``RetryInfo.retryDelay`` in
  the error body, else the earliest of Anthropic's ``anthropic-ratelimit-*-reset`` times;
* 529 (Anthropic "overloaded") and a 503 whose body says the model is overloaded: ``rate_limit``
  too, so the limiter slows the whole run down rather than only retrying the one call;
* other 5xx, 408 and 409 ``server`` (retryable), 401/403 ``auth``, 404 ``not_found``, the rest
  ``bad_request``: as :func:`~assay.models.openai_wire.http_error` does for OpenAI.

:class:`NativeModel` is what the backends share (the name ``KIND:MODEL``, the cache identity, the
price from the table, ``generate`` as build body / send / read, the one-line "cannot" of
``distribution``); :func:`split_system`, :func:`merge_turns` and :func:`finish_reason` turn chat
messages and stop reasons into and out of the providers' shapes.

Credentials never reach a message: every text quoted is passed through the backend's ``scrub``.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import orjson

from assay.models.base import NO_DISTRIBUTIONS, Generation, Message, Messages, ModelCallError
from assay.models.http import AnswerTooLarge, LeanHTTP
from assay.models.openai_wire import error_message, http_error, parse_retry_after

if sys.version_info >= (3, 11):
    _timeout = asyncio.timeout
else:  # pragma: no cover
    _timeout = None

#: what an overloaded server's 503 says (Gemini: "The model is overloaded. Please try again later.")
_OVERLOADED = ("overloaded", "overload")


def google_retry_delay(payload: Any) -> float | None:
    """Seconds from a Google error body's ``RetryInfo`` detail (``"retryDelay": "37s"``), if any."""
    err = payload.get("error") if isinstance(payload, Mapping) else None
    for d in (err.get("details") or ()) if isinstance(err, Mapping) else ():
        if isinstance(d, Mapping) and str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
            raw = str(d.get("retryDelay") or "").strip().rstrip("s")
            try:
                return max(0.0, float(raw))
            except ValueError:
                return None
    return None


def anthropic_reset_wait(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds until the earliest ``anthropic-ratelimit-*-reset`` time (RFC 3339) in ``headers``."""
    waits = []
    for k, v in (headers or {}).items():
        if k.startswith("anthropic-ratelimit-") and k.endswith("-reset"):
            try:
                at = datetime.fromisoformat(v.strip().replace("Z", "+00:00"))
            except ValueError:
                continue
            if at.tzinfo is None:
                at = at.replace(tzinfo=timezone.utc)
            waits.append(max(0.0, at.timestamp() - (time.time() if now is None else now)))
    return min(waits) if waits else None


def provider_error(name: str, status: int, payload: Any, text: str, headers: Mapping[str, str] | None,
                   scrub: Callable[[str], str] = str) -> ModelCallError:
    """The :class:`ModelCallError` for an error answer of a native provider (see the module doc)."""
    said = f"{error_message(payload, '')} {text[:300]}".lower()
    overloaded = status == 529 or (status == 503 and any(w in said for w in _OVERLOADED))
    if status == 429 or overloaded:
        wait = parse_retry_after(headers)
        if wait is None:
            wait = google_retry_delay(payload)
        if wait is None:
            wait = anthropic_reset_wait(headers)
        msg = scrub(error_message(payload, text[:300] or f"HTTP {status}"))
        why = "overloaded" if overloaded else "rate limited"
        return ModelCallError(f"{name}: HTTP {status} ({why}): {msg}", kind="rate_limit", status=status,
                              retryable=True, retry_after=wait, body=scrub(text[:2000]))
    return http_error(name, status, payload, text, headers, scrub)


def split_system(messages: Messages) -> tuple[str, list[Message]]:
    """The system messages' text joined (blank line between), and the other messages in order."""
    system, rest = [], []
    for m in messages:
        if m.get("role") == "system":
            system.append(content_text(m.get("content")))
        else:
            rest.append(m)
    return "\n\n".join(s for s in system if s), rest


def merge_turns(messages: Messages, assistant: str = "assistant") -> list[dict[str, Any]]:
    """User and assistant turns (the assistant's role named ``assistant``) with text content,
    consecutive turns of one role joined by a blank line, a leading assistant turn preceded by a
    user turn: what the Messages, Gemini and Converse APIs take (their turns alternate)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = assistant if m.get("role") == "assistant" else "user"
        text = content_text(m.get("content"))
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})
    if out and out[0]["role"] == assistant:
        out.insert(0, {"role": "user", "content": "(continue)"})
    return out


#: the providers' stop reasons in OpenAI's words ("stop", "length"); others kept, lower-cased
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "stop": "stop", "max_tokens": "length",
           "length": "length", "tool_use": "tool_calls"}


def finish_reason(reason: Any) -> str | None:
    """A provider's stop reason (``end_turn``, ``MAX_TOKENS`` ...) as OpenAI names it."""
    if not reason:
        return None
    r = str(reason).lower()
    return _FINISH.get(r, r)


def content_text(content: Any) -> str:
    """A message's content as text: a string, or content parts' ``text`` joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def sse_events(raw: bytes) -> Iterator[tuple[str, str]]:
    """``(event, data)`` for each Server-Sent Event in ``raw`` (``event`` ``""`` when unnamed;
    the lines of a multi-line ``data`` joined by newlines; comments skipped)."""
    text = raw.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        event, data = "", []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)
        if data or event:
            yield event, "\n".join(data)


def url_target(url: str) -> str:
    """The path and query of ``url`` (what a request line names)."""
    parts = urllib.parse.urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class ProviderPost:
    """JSON POSTs to one origin for a named backend: bounded by ``timeout`` (the whole request)
    and the lean client's caps; failures as :class:`ModelCallError`."""

    def __init__(self, name: str, origin: str, *, timeout: float, scrub: Callable[[str], str] = str):
        self.name, self.timeout, self.scrub = name, float(timeout), scrub
        self.origin = origin
        self._http: LeanHTTP | None = None

    @property
    def http(self) -> LeanHTTP:
        if self._http is None:
            self._http = LeanHTTP(self.origin, connect_timeout=min(30.0, self.timeout), timeout=self.timeout)
        return self._http

    async def post(self, target: str, headers: Mapping[str, str], payload: bytes, *,
                   stream: bool = False) -> tuple[Any, float]:
        """POST ``payload`` to ``target`` (a path and query): ``(parsed JSON, seconds)``, or
        ``(raw body bytes, seconds)`` when ``stream`` (an event stream, read whole)."""
        http = self.http
        head = http.head("POST", target, dict(headers))
        t0 = time.perf_counter()
        try:
            if _timeout is not None:
                async with _timeout(self.timeout):
                    resp = await http.request(head, payload)
            else:  # pragma: no cover - Python 3.10
                resp = await asyncio.wait_for(http.request(head, payload), self.timeout)
        except AnswerTooLarge as exc:
            raise ModelCallError(f"{self.name}: {exc}", kind="bad_response") from None
        except (TimeoutError, asyncio.TimeoutError):
            raise ModelCallError(f"{self.name}: no answer within {self.timeout:g} s", kind="timeout",
                                 retryable=True) from None
        except (OSError, ConnectionError) as exc:
            raise ModelCallError(f"{self.name}: connection failed: {self.scrub(str(exc)) or type(exc).__name__}",
                                 kind="connection", retryable=True) from None
        latency = time.perf_counter() - t0
        try:
            data = orjson.loads(resp.body)
        except orjson.JSONDecodeError:
            data = None
        if resp.status >= 400:
            raise provider_error(self.name, resp.status, data, resp.body.decode("utf-8", "replace"),
                                 resp.headers, self.scrub)
        if stream:
            return resp.body, latency
        if not isinstance(data, Mapping):
            raise ModelCallError(f"{self.name}: the response is not a JSON object: {resp.body[:200]!r}",
                                 kind="bad_response", retryable=True)
        return data, latency

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    def abandon(self) -> None:
        if self._http is not None:
            self._http.abandon()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_http": None}


def bad_stream(name: str, why: str) -> ModelCallError:
    """A streamed answer that cannot be read (cut short, an event that is not JSON): retryable."""
    return ModelCallError(f"{name}: the event stream {why}", kind="bad_response", retryable=True)


def json_event(name: str, data: str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise bad_stream(name, f"has an event that is not JSON: {data[:120]!r}") from None


_DATED = re.compile(r"-(?:\d{8}|latest)$")


def listed_price(model: str) -> tuple[float, float] | None:
    """The price table's row for ``model``, or for its name without a ``-YYYYMMDD`` / ``-latest``
    tail (``claude-sonnet-4-5-20250929`` costs what ``claude-sonnet-4-5`` costs)."""
    from assay.models.pricing import lookup_price

    return lookup_price(model) or lookup_price(_DATED.sub("", model))


class NativeModel:
    """What the native backends share: the price from the table, the "cannot" of
    :meth:`distribution` where a provider gives no log-probabilities, and closing the connections.
    A subclass sets ``name``, ``model``, ``_post`` (a :class:`ProviderPost`) and, where it can,
    ``gives_distributions = True`` with its own :meth:`distribution`."""

    gives_distributions = False
    provider = "provider"
    kind = "provider"             # the spec's prefix
    _post: ProviderPost
    model: str
    base_url = ""

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.model}"

    @property
    def cache_identity(self) -> str:
        """Endpoint and model (never a credential): what the cache key says about this model."""
        return f"{self.kind}|{self.base_url}|{self.model}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    def build_body(self, messages: Messages, **kw: Any) -> dict[str, Any]:  # pragma: no cover - per provider
        raise NotImplementedError

    async def send(self, body: Mapping[str, Any]) -> tuple[Any, float]:  # pragma: no cover - per provider
        raise NotImplementedError

    def read(self, data: Any, latency: float) -> Generation:  # pragma: no cover - per provider
        raise NotImplementedError

    async def generate(self, messages: Messages, *, max_tokens: int | None = None,
                       temperature: float | None = 0.0, response_format: Mapping[str, Any] | None = None,
                       logprobs: bool = False, top_logprobs: int | None = None) -> Generation:
        """One request: :meth:`build_body`, :meth:`send`, :meth:`read` (a field the provider has
        no use for is left out by its ``build_body``)."""
        body = self.build_body(messages, max_tokens=max_tokens, temperature=temperature,
                               response_format=response_format, logprobs=logprobs, top_logprobs=top_logprobs)
        data, latency = await self.send(body)
        return self.read(data, latency)

    @property
    def price_model(self) -> str:
        """The model's name as the price table lists it."""
        return self.model

    @property
    def price(self) -> tuple[float, float] | None:
        return listed_price(self.price_model)

    @property
    def price_source(self) -> str:
        from assay.models.price_table import active_table

        return active_table().label

    async def distribution(self, messages: Messages, candidates: Sequence[str], *,
                           assistant_prefix: str | None = None) -> Generation:
        """Not available from this provider: one line saying so (``bad_request``)."""
        raise ModelCallError(f"{self.name} ({self.provider}) {NO_DISTRIBUTIONS}", kind="bad_request")

    async def aclose(self) -> None:
        await self._post.aclose()

    async def __aenter__(self) -> NativeModel:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __del__(self) -> None:
        post = self.__dict__.get("_post")
        if post is not None:
            post.abandon()
