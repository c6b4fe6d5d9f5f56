"""The model contracts: :class:`Generation`, :class:`ChatModel`, :class:`EmbeddingModel`.

Every backend is one small class that turns chat messages into a :class:`Generation` (or,
for an embedding model, texts into vectors).
The limiter, retries and cache (:mod:`assay.models.limiter`, :mod:`assay.models.limited`, :mod:`assay.models.cache`)
wrap any backend the same way, so a backend only has to translate its transport's
failures into :class:`ModelCallError` (with ``retryable`` and ``retry_after`` set) and
expose a ``cache_identity`` that names the model without naming a secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import orjson

from assay.errors import AssayError

Message = Mapping[str, Any]          # {"role": "system" | "user" | "assistant", "content": str}
Messages = Sequence[Message]
TopLogprobs = dict[str, float]       # token -> natural-log probability


@dataclass(slots=True)
class TokenUsage:
    """Tokens a judge call consumed (as reported by the backend; 0 when it reports none)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass(slots=True)
class Generation:
    """One model answer.

    ``logprobs`` holds, for the *first* generated token, the top alternatives as
    ``token -> logprob`` (the chosen token included); ``token_logprobs`` the same for
    every generated position, ``[(chosen_token, {alternative: logprob})]``, when the
    backend returned them. ``raw`` is the backend's response body (never a credential).
    ``cached`` is true when the answer came from the call cache and no call was made.
    """

    text: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    latency_s: float = 0.0
    logprobs: TopLogprobs | None = None
    model: str = ""
    raw: Any = None
    cached: bool = False
    finish_reason: str | None = None
    token_logprobs: list[tuple[str, TopLogprobs]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "usage": self.usage.to_dict(),
            "latency_s": self.latency_s,
            "logprobs": self.logprobs,
            "model": self.model,
            "raw": self.raw,
            "finish_reason": self.finish_reason,
            "token_logprobs": [[t, alts] for t, alts in self.token_logprobs]
            if self.token_logprobs is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, cached: bool = False) -> Generation:
        u = d.get("usage") or {}
        tl = d.get("token_logprobs")
        return cls(
            text=d.get("text") or "",
            usage=TokenUsage(int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0)),
            latency_s=float(d.get("latency_s") or 0.0),
            logprobs=d.get("logprobs"),
            model=d.get("model") or "",
            raw=d.get("raw"),
            cached=cached,
            finish_reason=d.get("finish_reason"),
            token_logprobs=[(t, alts) for t, alts in tl] if tl is not None else None,
        )


class ModelCallError(AssayError):
    """A model call failed. ``retryable`` tells the limiter whether trying again can help.

    ``kind`` is one of ``rate_limit``, ``server``, ``timeout``, ``connection``,
    ``bad_request``, ``auth``, ``quota``, ``not_found``, ``bad_response``. ``retry_after`` is the
    delay in seconds the server asked for, when it asked. ``body`` keeps (a prefix of)
    the server's error text, with any credential scrubbed.
    """

    def __init__(self, message: str, *, kind: str = "server", status: int | None = None,
                 retryable: bool = False, retry_after: float | None = None, body: str | None = None):
        super().__init__(message)
        self.kind, self.status, self.retryable = kind, status, retryable
        self.retry_after, self.body = retry_after, body
        self.attempts = 1


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers chat messages. ``name`` is shown in results ("openai:gpt-4o-mini").

    :meth:`distribution` reads the next-token probabilities of ``candidates`` after the
    messages (and an ``assistant_prefix`` that starts the answer), without generating: a
    :class:`Generation` made by :func:`distribution_generation` (read it back with
    :func:`read_distribution`). A backend that cannot do this sets ``gives_distributions =
    False`` and raises :class:`ModelCallError`; :func:`gives_distributions` tells callers.

    Backends that can score raw text (a local model, a ``/v1/completions`` server that echoes
    prompt log-probabilities) also have two methods that are *not* protocol members (other
    backends and user objects lack them; :func:`gives_logliks` tells callers):

    ``async loglikelihood(context, continuations) -> Generation``
        For each continuation, the sum of the log-probabilities of its tokens after the raw
        ``context`` (no chat template), and whether each of its tokens is the model's greedy
        choice: a :func:`loglik_generation` (read it back with :func:`read_logliks`). What
        multiple-choice tasks score with (acc, acc_norm), as lm-evaluation-harness does.
    ``async complete(prompt, *, max_tokens, temperature=0.0, stop=()) -> Generation``
        A raw text completion of ``prompt`` (no chat template), cut before the first stop
        string (``finish_reason`` ``"stop"``) or at ``max_tokens`` (``"length"``).

    A backend that may lack them at run time (a server that turns out not to echo prompt
    log-probabilities) raises :class:`ModelCallError` (``bad_request``) and says so.
    """

    name: str

    async def generate(
        self,
        messages: Messages,
        *,
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
        response_format: Mapping[str, Any] | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
    ) -> Generation: ...

    async def distribution(
        self,
        messages: Messages,
        candidates: Sequence[str],
        *,
        assistant_prefix: str | None = None,
    ) -> Generation: ...


NO_DISTRIBUTIONS = "gives no next-token distributions; score parsed answers instead"


def gives_distributions(model: Any) -> bool:
    """True when ``model`` can give next-token distributions (:meth:`ChatModel.distribution`)."""
    return callable(getattr(model, "distribution", None)) and getattr(model, "gives_distributions", True) is not False


def distribution_generation(probs: Mapping[str, float], mass: float, *, prompt_tokens: int = 0,
                            latency_s: float = 0.0, model: str = "") -> Generation:
    """A next-token distribution as a :class:`Generation` (so the limiter, the call cache and the
    usage counts treat it as any other call): ``text`` is the JSON ``{"probs": {candidate: p},
    "mass": m}`` (``probs`` renormalised over the candidates, ``mass`` what they had before),
    ``usage`` the prompt tokens evaluated and no output token."""
    body = orjson.dumps({"probs": {str(k): float(v) for k, v in probs.items()}, "mass": float(mass)}).decode()
    return Generation(text=body, usage=TokenUsage(int(prompt_tokens or 0), 0), latency_s=latency_s, model=model,
                      raw={"kind": "next_token_distribution"})


def read_distribution(gen: Generation) -> tuple[dict[str, float], float]:
    """``(probs, mass)`` of a :func:`distribution_generation`."""
    d = orjson.loads(gen.text)
    return {str(k): float(v) for k, v in d["probs"].items()}, float(d.get("mass", 1.0))


NO_LOGLIKS = ("returns no prompt log-probabilities, so multiple choice cannot be scored by log-likelihood "
              "on it (it falls back to generation and answer extraction)")


def gives_logliks(model: Any) -> bool:
    """True when ``model`` can score continuations (``loglikelihood``) and complete raw text
    (``complete``), and does not say it cannot (``gives_logliks = False``). For a remote
    server this is only a promise: whether it echoes prompt log-probabilities is known by
    trying (its ``loglikelihood`` raises :class:`ModelCallError` when it does not)."""
    return (callable(getattr(model, "loglikelihood", None)) and callable(getattr(model, "complete", None))
            and getattr(model, "gives_logliks", True) is not False)


def loglik_generation(logliks: Sequence[float], greedy: Sequence[bool], *, prompt_tokens: int = 0,
                      latency_s: float = 0.0, model: str = "") -> Generation:
    """Continuation log-likelihoods as a :class:`Generation` (so the limiter, the call cache and
    the usage counts treat them as any other call): ``text`` is the JSON ``{"logliks": [...],
    "greedy": [...]}``, one entry per continuation in the order asked; ``usage`` the prompt
    tokens evaluated and no output token."""
    if len(logliks) != len(greedy):
        raise ValueError(f"{len(logliks)} log-likelihoods but {len(greedy)} greedy flags")
    body = orjson.dumps({"logliks": [float(x) for x in logliks], "greedy": [bool(g) for g in greedy]}).decode()
    return Generation(text=body, usage=TokenUsage(int(prompt_tokens or 0), 0), latency_s=latency_s, model=model,
                      raw={"kind": "loglikelihood"}, finish_reason="stop")


def read_logliks(gen: Generation) -> tuple[list[float], list[bool]]:
    """``(logliks, greedy)`` of a :func:`loglik_generation`."""
    try:
        d = orjson.loads(gen.text)
        return [float(x) for x in d["logliks"]], [bool(g) for g in d["greedy"]]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ModelCallError(f"not a log-likelihood answer: {gen.text[:120]!r}", kind="bad_response") from exc


INPUT_TYPES = ("query", "document")


@runtime_checkable
class EmbeddingModel(Protocol):
    """Anything that turns texts into vectors. ``name`` is shown in results.

    ``embed`` returns a float32 array of shape ``(len(texts), dim)``, one row per text in the
    order given. ``input_type`` says how the texts are used: ``"query"`` (a search query),
    ``"document"`` (a text searched), or None (symmetric use: similarity, clustering,
    classification). Models trained with query and passage prefixes (E5) embed the two
    differently; a backend that makes no such distinction ignores it.

    Backends may also have ``embed_batch(texts, *, input_type=None) -> EmbeddingBatch`` (not a
    protocol member), which adds the tokens used and the latency to the vectors: what
    :class:`~assay.models.limited.LimitedModel` calls when it is there, to count usage. They
    say how many texts one request should carry (``embed_batch_size``) and whether
    ``input_type`` changes their vectors (``embed_input_types``; when False the call cache
    stores one vector per text for all input types).
    """

    name: str

    async def embed(self, texts: Sequence[str], *, input_type: str | None = None) -> np.ndarray: ...


@dataclass(slots=True)
class EmbeddingBatch:
    """The vectors of one embedding request, with the tokens it used and how long it took."""

    vectors: np.ndarray               # float32, (n, dim)
    usage: TokenUsage = field(default_factory=TokenUsage)
    latency_s: float = 0.0
    model: str = ""


def gives_embeddings(model: Any) -> bool:
    """True when ``model`` can embed texts (:meth:`EmbeddingModel.embed`) and does not say it
    cannot (``gives_embeddings = False``)."""
    return callable(getattr(model, "embed", None)) and getattr(model, "gives_embeddings", True) is not False


def check_input_type(input_type: Any) -> str | None:
    """``input_type`` if it is one of :data:`INPUT_TYPES` or None; else :class:`AssayError`."""
    if input_type is None or input_type in INPUT_TYPES:
        return input_type
    raise AssayError(f"input_type must be 'query', 'document' or None, got {input_type!r}")


def check_texts(texts: Any) -> list[str]:
    """``texts`` as a list of strings; a bare string, or an item that is not a string, raises
    :class:`AssayError` naming the item (an embedding of ``str(None)`` would be silently wrong)."""
    if isinstance(texts, (str, bytes)):
        raise AssayError("texts to embed must be a list of strings, not a single "
                         f"{type(texts).__name__} (wrap it in a list)")
    try:
        out = list(texts)
    except TypeError:
        raise AssayError(f"texts to embed must be a list of strings, got {type(texts).__name__}") from None
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise AssayError(f"text {i} to embed is a {type(t).__name__}, not a string: {str(t)[:60]!r}")
    return out


def as_vectors(name: str, vectors: Any, n: int) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 ``(n, dim)`` array, or :class:`ModelCallError`
    (``bad_response``) when a backend returned another count or shape."""
    try:
        arr = np.ascontiguousarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ModelCallError(f"{name}: the embeddings are not numbers ({exc})", kind="bad_response") from None
    if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] < 1:
        raise ModelCallError(f"{name}: expected {n} embeddings, got an array of shape {arr.shape}",
                             kind="bad_response")
    return arr if arr.flags.writeable else arr.copy()


def cache_identity(model: Any) -> str:
    """What the cache key says about the model: its ``cache_identity`` or its ``name``."""
    ident = getattr(model, "cache_identity", None)
    if ident:
        return str(ident)
    return f"{type(model).__module__}.{type(model).__qualname__}:{getattr(model, 'name', '')}"


def estimate_tokens(messages: Messages) -> int:
    """A cheap input-token estimate (4 characters a token) for tokens-per-minute budgeting."""
    n = 0
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            n += len(c)
        elif isinstance(c, list):  # content parts
            for part in c:
                if isinstance(part, Mapping):
                    n += len(str(part.get("text") or ""))
        n += 16
    return n // 4 + 1
