"""The OpenAI wire format as pure functions: request bodies in, answers and errors out.

Nothing here sends a byte, keeps state or reads the environment:
:class:`~assay.models.openai_compat.OpenAICompat` (the transport and the backend) builds every
body with these functions, posts it, and hands the parsed JSON back to them.

Bodies: :func:`chat_body` (``max_tokens``, or ``max_completion_tokens`` and no temperature or
logprobs for a reasoning model; ``logprobs`` / ``top_logprobs``; ``response_format`` only where a
message says "json", as OpenAI demands), :func:`completions_body` and :func:`echo_body` (raw text
over ``/completions``: a completion, and the echoed prompt's log-probabilities), and
:func:`embeddings_body` (base64 vectors from OpenAI and Azure). :func:`drop_rejected` takes out of
a body the feature a server's 400 refused.

Answers: :func:`read_generation` (text, usage, first-token and per-token log-probabilities),
:func:`read_completion`, :func:`read_echo` (a continuation's summed log-probability and whether
it was greedy), :func:`read_embeddings` (rows put back by ``index``, float lists or base64) and
:func:`read_embedding_batch`. A malformed answer raises :class:`~assay.models.base.ModelCallError`
(``bad_response``, retryable).

Errors: :func:`http_error` turns an error status and body into the
:class:`~assay.models.base.ModelCallError` the limiter acts on (``rate_limit`` with the
``Retry-After`` of :func:`parse_retry_after`, ``quota``, ``server``, ``auth``, ``not_found``,
``bad_request``).
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from assay.models.base import NO_LOGLIKS, EmbeddingBatch, Generation, Messages, ModelCallError, TokenUsage, as_vectors

# o1, o3-mini, o4-mini, gpt-5, gpt-5-mini ... optionally behind a vendor prefix ("openai/o3").
_REASONING_RE = re.compile(r"(?:^|/)(?:o\d+|gpt-5)(?:$|[-.:_])", re.I)
# Reasoning tokens count against max_completion_tokens: a judge asking for 10 tokens would
# get an empty answer, so the cap never goes below this.
REASONING_MIN_COMPLETION_TOKENS = 4096
#: top log-probabilities asked for when logprobs are wanted and no number is given
DEFAULT_TOP_LOGPROBS = 5


class NoPromptLogprobs(ModelCallError):
    """An echoed ``/completions`` answer without the prompt's log-probabilities: the server
    cannot score continuations (``bad_request``)."""


def is_reasoning_model(model: str | None) -> bool:
    """Whether ``model`` is a reasoning model by its name (o1/o3/o4, gpt-5 families)."""
    return bool(model) and bool(_REASONING_RE.search(model or ""))


def mentions_json(messages: Messages) -> bool:
    """Whether a message says "json" (OpenAI rejects ``json_object`` output otherwise)."""
    for m in messages:
        c = m.get("content")
        if isinstance(c, str) and "json" in c.lower():
            return True
        if isinstance(c, list) and "json" in str(c).lower():
            return True
    return False


# -- request bodies -------------------------------------------------------------------------------

def chat_body(model: str | None, messages: Messages, *, max_tokens: int | None = None,
              temperature: float | None = 0.0, response_format: Mapping[str, Any] | None = None,
              logprobs: bool = False, top_logprobs: int | None = None, seed: int | None = None,
              reasoning: bool = False, send_logprobs: bool = True, send_json_mode: bool = True,
              extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one chat-completions request. ``send_logprobs`` / ``send_json_mode``:
    False where the server is known to reject them; ``extra_body`` is merged in last."""
    body: dict[str, Any] = {"model": model or "", "messages": list(messages)}
    if seed is not None:
        body["seed"] = int(seed)
    if reasoning:
        if max_tokens is not None:
            body["max_completion_tokens"] = max(int(max_tokens), REASONING_MIN_COMPLETION_TOKENS)
    else:
        if max_tokens is not None:
            body["max_tokens"] = int(max_tokens)
        if temperature is not None:
            body["temperature"] = temperature
        if logprobs and send_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = int(top_logprobs if top_logprobs is not None else DEFAULT_TOP_LOGPROBS)
    if response_format and send_json_mode:
        # OpenAI rejects json_object unless a message says "json"; don't send it then.
        if response_format.get("type") != "json_object" or mentions_json(messages):
            body["response_format"] = dict(response_format)
    if extra_body:
        body.update(extra_body)
    return body


def completions_body(model: str | None, prompt: str, *, max_tokens: int, temperature: float = 0.0,
                     stop: Sequence[str] = (), seed: int | None = None,
                     extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one raw-text ``/completions`` request (empty ``stop`` strings dropped)."""
    body = _raw_body(model, prompt, extra_body, max_tokens=int(max_tokens), temperature=float(temperature or 0.0))
    stops = [str(x) for x in stop or () if x]
    if stops:
        body["stop"] = stops
    if seed is not None:
        body["seed"] = int(seed)
    return body


def echo_body(model: str | None, text: str, extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``/completions`` body that echoes ``text`` with its tokens' log-probabilities. One token
    is generated, not 0: llama-cpp-python reads 0 as "until the context is full"."""
    return _raw_body(model, text, extra_body, max_tokens=1, temperature=0.0, echo=True, logprobs=1)


def _raw_body(model: str | None, prompt: str, extra_body: Mapping[str, Any] | None, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = dict(extra_body or {})
    body.update(model=model or "", prompt=prompt, **fields)
    return body


def embeddings_body(model: str | None, texts: Sequence[str], *, base64_vectors: bool = False,
                    input_type_field: str | None = None, input_type: str | None = None,
                    extra_body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one embeddings request: vectors asked as base64 when ``base64_vectors``;
    ``input_type`` sent in the field ``input_type_field`` names, if any."""
    body: dict[str, Any] = dict(extra_body or {})
    body.update(model=model or "", input=list(texts))
    if base64_vectors:
        body["encoding_format"] = "base64"
    if input_type_field and input_type is not None:
        body[input_type_field] = input_type
    return body


def drop_rejected(body: dict[str, Any], exc: ModelCallError, *, logprobs_supported: bool | None,
                  json_mode_supported: bool | None) -> list[str]:
    """Take out of ``body`` the feature a 400 (``exc``) refused, unless the server took it before:
    ``logprobs`` when the error speaks of them, else ``response_format``. Returns the features
    dropped (``"logprobs"``, ``"json_mode"``); none: the 400 was about something else."""
    text = f"{exc} {exc.body or ''}".lower()
    dropped = []
    if "logprobs" in body and logprobs_supported is not True and "logprob" in text:
        body.pop("logprobs")
        body.pop("top_logprobs", None)
        dropped.append("logprobs")
    if not dropped and "response_format" in body and json_mode_supported is not True:
        body.pop("response_format")
        dropped.append("json_mode")
    return dropped


# -- answers ---------------------------------------------------------------------------------------

def read_generation(name: str, data: Any, latency: float, model: str | None = None) -> Generation:
    """A chat-completions answer as a :class:`Generation`: the first choice's text (content parts
    joined; else its refusal or ``text``), usage, finish reason and log-probabilities. ``model``:
    the name kept when the answer names none."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise ModelCallError(f"{name}: response has no choices: {str(data)[:200]}",
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
    first, seq = read_logprobs(choice.get("logprobs"))
    return Generation(text=text, usage=usage, latency_s=latency, logprobs=first,
                      model=data.get("model") or model or "", raw=data,
                      finish_reason=choice.get("finish_reason"), token_logprobs=seq)


def read_logprobs(lp: Any) -> tuple[dict[str, float] | None, list[tuple[str, dict[str, float]]] | None]:
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


def first_choice(name: str, data: Any) -> Mapping[str, Any]:
    """The first of an answer's ``choices`` (a :class:`ModelCallError` when there is none)."""
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        choice = None
    if not isinstance(choice, Mapping):
        raise ModelCallError(f"{name}: response has no choices: {str(data)[:200]}",
                             kind="bad_response", retryable=True)
    return choice


def read_completion(name: str, data: Any, latency: float, stop: Sequence[str] = (),
                    model: str | None = None) -> Generation:
    """A raw ``/completions`` answer as a :class:`Generation`, cut before the first of ``stop``
    (for a server that leaves the stop string in)."""
    choice = first_choice(name, data)
    text = str(choice.get("text") or "")
    finish = choice.get("finish_reason")
    cut = min((text.find(x) for x in stop if x and x in text), default=-1)
    if cut >= 0:
        text, finish = text[:cut], "stop"
    u = data.get("usage") or {}
    usage = TokenUsage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))
    return Generation(text=text, usage=usage, latency_s=latency, model=data.get("model") or model or "",
                      raw=data, finish_reason=finish)


def read_echo(name: str, data: Any, text: str, boundary: int) -> tuple[float, bool, int]:
    """(summed log-probability, all greedy, prompt tokens) of the tokens of ``text`` that end
    past ``boundary`` (characters), from an echoed ``/completions`` answer. An answer without the
    prompt's log-probabilities raises :class:`NoPromptLogprobs`."""
    choice = first_choice(name, data)
    lp = choice.get("logprobs")
    offsets = lp.get("text_offset") if isinstance(lp, Mapping) else None
    values = lp.get("token_logprobs") if isinstance(lp, Mapping) else None
    tops = (lp.get("top_logprobs") if isinstance(lp, Mapping) else None) or []
    u = data.get("usage") or {}
    generated = int(u.get("completion_tokens") or 0)
    n = len(offsets or ()) - generated
    if not offsets or not values or len(values) != len(offsets) or n < 1 \
            or not any(v is not None for v in values[:n]):
        raise NoPromptLogprobs(f"{name} {NO_LOGLIKS} (the /completions answer has no log-probabilities "
                               "for the prompt's tokens; llama-cpp-python's server needs --logits_all True)",
                               kind="bad_request")
    start = next((i for i in range(n) if (offsets[i + 1] if i + 1 < n else len(text)) > boundary), None)
    if start is None:
        raise ModelCallError(f"{name}: cannot find where the continuation starts in the echoed prompt",
                             kind="bad_response")
    total, all_greedy = 0.0, True
    for i in range(start, n):
        v = values[i]
        if v is None:
            raise ModelCallError(f"{name}: the server gives no log-probability for the first token; "
                                 "score with a non-empty context", kind="bad_request")
        total += float(v)
        top = tops[i] if i < len(tops) else None
        if isinstance(top, Mapping) and top:
            all_greedy = all_greedy and float(v) >= max(float(x) for x in top.values()) - 1e-6
        else:
            all_greedy = False
    return total, all_greedy, int(u.get("prompt_tokens") or n)


def read_echo_tail(name: str, data: Any, n: int) -> tuple[float, int, bool]:
    """(summed log-probability, tokens summed, first token missing) of the last ``n`` prompt tokens of an
    echoed ``/completions`` answer (the generated token left out), for scoring a window of token ids sent as
    text. A server that gives the prompt's first token no log-probability (llama-cpp-python) leaves it out of
    the sum when it is one of the ``n``, and says so; any other missing value raises."""
    choice = first_choice(name, data)
    lp = choice.get("logprobs")
    values = lp.get("token_logprobs") if isinstance(lp, Mapping) else None
    generated = int((data.get("usage") or {}).get("completion_tokens") or 0)
    if not values:
        raise NoPromptLogprobs(f"{name} {NO_LOGLIKS} (the /completions answer has no log-probabilities "
                               "for the prompt's tokens; llama-cpp-python's server needs --logits_all True)",
                               kind="bad_request")
    prompt = values[:len(values) - generated]
    if len(prompt) < n:
        raise ModelCallError(f"{name}: asked for the last {n} tokens of the echoed prompt, it has "
                             f"{len(prompt)}", kind="bad_response")
    tail = prompt[len(prompt) - n:]
    first_missing = len(prompt) == n and tail[0] is None
    if any(v is None for v in tail[1 if first_missing else 0:]):
        raise ModelCallError(f"{name}: the echoed prompt has a token without a log-probability",
                             kind="bad_response")
    kept = tail[1:] if first_missing else tail
    return float(sum(kept)), len(kept), first_missing


def read_embeddings(name: str, data: Any, n: int) -> np.ndarray:
    """The ``data`` of an embeddings answer as an ``(n, dim)`` float32 array, rows by ``index``:
    float lists, or base64 little-endian float32 strings."""
    items = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(items, list) or len(items) != n:
        got = f"{len(items)} embeddings" if isinstance(items, list) else f"no data list: {str(data)[:200]}"
        raise ModelCallError(f"{name}: asked for {n} embeddings, got {got}", kind="bad_response",
                             retryable=True)
    rows: list[Any] = [None] * n
    for pos, item in enumerate(items):  # answers parsed from JSON: plain dicts (no typing.Mapping check per item)
        index = item.get("index", pos) if isinstance(item, dict) else None
        emb = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < n or rows[index] is not None or emb is None:
            raise ModelCallError(f"{name}: embeddings answer item {pos} has a missing or repeated index "
                                 f"or no embedding", kind="bad_response", retryable=True)
        rows[index] = emb
    if isinstance(rows[0], str):  # encoding_format "base64": little-endian float32 bytes
        return as_vectors(name, decode_base64(name, rows), n)
    try:
        arr = np.array(rows, dtype=np.float32)
    except (TypeError, ValueError):
        raise ModelCallError(f"{name}: the embeddings are not equal-length lists of numbers",
                             kind="bad_response", retryable=True) from None
    return as_vectors(name, arr, n)


def decode_base64(name: str, rows: list[Any]) -> np.ndarray:
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
        raise ModelCallError(f"{name}: the embeddings are not base64 float32 vectors of one length",
                             kind="bad_response", retryable=True) from None


def read_embedding_batch(name: str, data: Any, n: int, latency: float, model: str | None = None) -> EmbeddingBatch:
    """An embeddings answer as an :class:`EmbeddingBatch`: the vectors (:func:`read_embeddings`),
    the tokens the server counted and the model it names (else ``model``)."""
    vectors = read_embeddings(name, data, n)
    u = data.get("usage") if isinstance(data, Mapping) else None
    u = u if isinstance(u, Mapping) else {}
    tokens = int(u.get("prompt_tokens") or u.get("total_tokens") or u.get("input_tokens") or 0)
    return EmbeddingBatch(vectors, TokenUsage(tokens, 0), latency, str(data.get("model") or model or ""))


# -- errors ----------------------------------------------------------------------------------------

def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date; ``now``:
    the Unix time it is counted from, default the current time)."""
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
                return max(0.0, dt.timestamp() - (time.time() if now is None else now))
            except (TypeError, ValueError, IndexError):
                return None
    return None


def error_message(payload: Any, fallback: str) -> str:
    """The message of an error body (``error.message``, ``error.msg``, a string ``error``,
    ``detail``), else ``fallback``."""
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


def error_code(payload: Any) -> str:
    """An error body's ``error.code`` (else ``error.type``; ``""`` when none)."""
    err = payload.get("error") if isinstance(payload, Mapping) else None
    if isinstance(err, Mapping):
        return str(err.get("code") or err.get("type") or "")
    return ""


def http_error(name: str, status: int, payload: Any, text: str, headers: Mapping[str, str] | None,
               scrub: Callable[[str], str] = str) -> ModelCallError:
    """The :class:`ModelCallError` for an answer with error ``status``: ``payload`` its parsed
    JSON (None when not JSON), ``text`` its body, ``headers`` its headers (for ``Retry-After``).
    ``scrub`` takes secrets out of what the error quotes."""
    msg = scrub(error_message(payload, text[:300] or f"HTTP {status}"))
    body = scrub(text[:2000])
    where = f"{name}: HTTP {status}"
    if status == 429 and error_code(payload) == "insufficient_quota":  # billing: waiting won't help
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


def not_json_error(name: str, raw: bytes) -> ModelCallError:
    """The error for a successful answer whose body is not JSON."""
    return ModelCallError(f"{name}: the response is not JSON: {raw[:200]!r}", kind="bad_response", retryable=True)
