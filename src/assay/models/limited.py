"""The model wrapper: any backend behind a :class:`~assay.models.limiter.Limiter` and the call cache.

:class:`LimitedModel` applies a limiter and a :class:`~assay.models.cache.CallCache` to
any :class:`~assay.models.base.ChatModel`, to its generated answers and its next-token
distributions alike (the only wrapper that does): a cache hit returns at once with
``cached=True``; identical calls in flight at the same time are made once. It does the same
for an :class:`~assay.models.base.EmbeddingModel`, per text (:meth:`LimitedModel.embed`).
Every call it answers is counted in one :class:`CallStats`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from assay.errors import AssayError
from assay.models.base import (
    NO_DISTRIBUTIONS,
    NO_LOGLIKS,
    ChatModel,
    EmbeddingBatch,
    Generation,
    Messages,
    ModelCallError,
    as_vectors,
    cache_identity,
    check_input_type,
    check_texts,
    estimate_tokens,
    gives_distributions,
    gives_embeddings,
    gives_logliks,
)
from assay.models.cache import CACHE_ERRORS, embed_key
from assay.models.limiter import Limiter

log = logging.getLogger("assay.models")

def _cancelling(task: asyncio.Task[Any]) -> bool:
    fn = getattr(task, "cancelling", None)
    return bool(fn()) if fn is not None else False


@dataclass
class CallStats:
    """Every judge call a :class:`LimitedModel` answered, counted once, in one place.

    A *call* is one question to the judge: a generated answer (a re-ask is a call of its own)
    or a next-token distribution read for probability scoring. ``cache_hits`` and ``shared``
    (answered by an identical call already in flight) are calls too, but cost nothing:
    ``prompt_tokens`` / ``completion_tokens`` count only the tokens of calls actually made.
    ``errors`` are calls that gave up (after the limiter's retries).

    Embeddings are counted per text, apart (:attr:`EMBED_FIELDS`, not in the default
    :meth:`snapshot`): ``embed_texts`` asked for, of which ``texts_cached`` came from the call
    cache, ``texts_shared`` were answered by the same text earlier in the call or in flight in
    another, and ``texts_embedded`` were sent to the model, in ``embed_batches`` requests (their
    tokens count in ``prompt_tokens``; a request that gave up counts in ``errors``)."""

    calls: int = 0             # calls answered or failed (cache hits included)
    cache_hits: int = 0
    shared: int = 0            # answered by an identical call already in flight
    errors: int = 0
    prompt_tokens: int = 0     # paid input tokens (calls made, not cache hits or shared)
    completion_tokens: int = 0  # paid output tokens
    distributions: int = 0     # of ``calls``, next-token distributions (probability scoring)
    embed_texts: int = 0       # texts asked to embed (repeats included)
    texts_cached: int = 0      # of those, answered from the call cache
    texts_shared: int = 0      # answered by the same text earlier in the call, or in flight in another
    texts_embedded: int = 0    # sent to the model
    embed_batches: int = 0     # embedding requests made (each under the limiter)

    FIELDS = ("calls", "cache_hits", "shared", "errors", "prompt_tokens", "completion_tokens", "distributions")
    EMBED_FIELDS = ("embed_texts", "texts_cached", "texts_shared", "texts_embedded", "embed_batches",
                    "prompt_tokens", "errors")

    def snapshot(self, fields: Sequence[str] | None = None) -> dict[str, int]:
        """The counts named in ``fields`` (default :attr:`FIELDS`; :attr:`EMBED_FIELDS` for embeddings)."""
        return {k: getattr(self, k) for k in (fields or self.FIELDS)}

    def since(self, earlier: Mapping[str, int] | CallStats | None,
              fields: Sequence[str] | None = None) -> dict[str, int]:
        """The counts accumulated after ``earlier`` (a :meth:`snapshot`): one run's share of a
        judge reused across runs."""
        now = self.snapshot(fields)
        if earlier is None:
            return now
        base = earlier.snapshot(fields) if isinstance(earlier, CallStats) else earlier
        return {k: now[k] - int(base.get(k, 0) or 0) for k in now}


_Params = Mapping[str, Any]


class LimitedModel:
    """Any :class:`ChatModel` behind a shared :class:`Limiter` and an optional call cache.

    It is itself a ``ChatModel``: hand it to judge metrics (``EvalContext.judge``). Every
    call it answers, generated (:meth:`generate`) or probability-scored (:meth:`distribution`),
    cached or not, is counted in :attr:`stats` (:class:`CallStats`). ``price``: USD per 1M
    input and output tokens, ``(in, out)``, overriding what :mod:`assay.models.pricing` knows
    about the backend.
    """

    def __init__(self, model: ChatModel, limiter: Limiter | None = None, cache: Any = None, *,
                 price: tuple[float, float] | None = None):
        self.model = model
        self.limiter = limiter if limiter is not None else Limiter.for_model(model)
        self.cache = cache
        self.name = model.name
        self.cache_identity = cache_identity(model)
        self.stats = CallStats()
        self.price = price
        # what the judges read about the model: a smoke-test judge and its note (the embedded model)
        self.smoke_test = getattr(model, "smoke_test", False) is True
        self.note = getattr(model, "note", None)
        self._pending: dict[str, asyncio.Future[Generation]] = {}
        self._pending_vectors: dict[str, tuple[asyncio.Future[np.ndarray], int]] = {}
        # batch mode (:mod:`assay.models.batch`): given a generated call the cache cannot answer,
        # ``collect(key, request)`` records it and returns the exception to raise instead of calling
        self.collect: Callable[[str, Mapping[str, Any]], BaseException] | None = None

    def __repr__(self) -> str:
        return f"LimitedModel({self.model!r}, concurrency={self.limiter.concurrency}, cache={self.cache!r})"

    @property
    def default_concurrency(self) -> int:
        return self.limiter.concurrency

    async def generate(self, messages: Messages, *, max_tokens: int | None = None,
                       temperature: float | None = 0.0, response_format: Mapping[str, Any] | None = None,
                       logprobs: bool = False, top_logprobs: int | None = None,
                       seed: int | None = None, repeat: int = 0) -> Generation:
        """The backend's answer; ``seed`` (passed on only when given, and then part of the cache
        key) tells several samples of one prompt apart. ``repeat``: which ask of a repeated
        judgment this is (a run's ``repeats``); part of the cache key from 1 on, so that repeat 0
        keeps the key of a call made without repeats; never sent to the backend."""
        model = self.model
        more = {} if seed is None else {"seed": int(seed)}
        if not callable(getattr(model, "generate", None)):
            raise ModelCallError(f"{self.name} is an embedding model; it does not generate text", kind="bad_request")

        def call() -> Awaitable[Generation]:
            return model.generate(messages, max_tokens=max_tokens, temperature=temperature,
                                  response_format=response_format, logprobs=logprobs, top_logprobs=top_logprobs,
                                  **more)

        params = {"max_tokens": max_tokens, "temperature": temperature, "response_format": response_format,
                  "logprobs": logprobs, "top_logprobs": top_logprobs, **more}
        request = {"messages": messages, "params": dict(params)} if self.collect is not None else None
        if repeat:
            params["repeat"] = int(repeat)
        return await self._answer(messages, params, call, estimate_tokens(messages) + (max_tokens or 256),
                                  request=request)

    @property
    def gives_distributions(self) -> bool:
        """True when the backend can give its next-token distribution (a local model)."""
        return gives_distributions(self.model)

    async def distribution(self, messages: Messages, candidates: Sequence[str], *,
                           assistant_prefix: str | None = None) -> Generation:
        """The backend's :meth:`~assay.models.base.ChatModel.distribution` over ``candidates``
        after ``messages`` (and ``assistant_prefix``), under the same limiter, cache and counts
        as :meth:`generate`: a :func:`~assay.models.base.distribution_generation` whose usage is
        the prompt tokens evaluated (0 output tokens: nothing is generated)."""
        backend = self.model
        cands = [str(c) for c in candidates]
        if not self.gives_distributions:
            raise ModelCallError(f"{self.name} {NO_DISTRIBUTIONS}", kind="bad_request")

        def call() -> Awaitable[Generation]:
            return backend.distribution(messages, cands, assistant_prefix=assistant_prefix)

        # The parameters are those the judge metrics have always keyed these calls with, so that
        # distributions cached by an earlier version still answer.
        params = {"next_token_distribution": cands, "assistant_prefix": assistant_prefix}
        return await self._answer(messages, params, call, estimate_tokens(messages) + 1, distribution=True)

    @property
    def gives_logliks(self) -> bool:
        """True when the backend can score continuations and complete raw text (see
        :func:`~assay.models.base.gives_logliks`)."""
        return gives_logliks(self.model)

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        """The backend's ``loglikelihood`` of each continuation after the raw ``context``, under the
        same limiter, cache and counts as :meth:`generate`: a
        :func:`~assay.models.base.loglik_generation` (read it with
        :func:`~assay.models.base.read_logliks`)."""
        backend = self.model
        conts = [str(c) for c in continuations]
        if not self.gives_logliks:
            raise ModelCallError(f"{self.name} {NO_LOGLIKS}", kind="bad_request")

        def call() -> Awaitable[Generation]:
            return backend.loglikelihood(context, conts)  # type: ignore[attr-defined]

        messages = [{"role": "raw", "content": str(context)}]
        params = {"loglikelihood": conts}
        tokens = (len(context) // 4 + 1) * len(conts) + sum(len(c) for c in conts) // 4
        return await self._answer(messages, params, call, tokens)

    @property
    def gives_token_logliks(self) -> bool:
        """True when the backend has the token-level calls of a rolling log-likelihood (``encode``,
        ``decode``, ``tail_loglikelihood``: an OpenAI-compatible server; whether it has a tokenizer endpoint is
        known only by asking)."""
        return all(callable(getattr(self.model, m, None)) for m in ("encode", "decode", "tail_loglikelihood"))

    @property
    def gives_id_logliks(self) -> bool:
        """True when the backend scores windows of its own token ids (``encode``, ``tail_loglikelihood_ids``:
        the in-process model, whose tokenizer is at hand)."""
        return all(callable(getattr(self.model, m, None)) for m in ("encode", "tail_loglikelihood_ids"))

    async def tail_loglikelihood_ids(self, ids: Sequence[int], n_tokens: int) -> Generation:
        """The backend's ``tail_loglikelihood_ids`` (the last ``n_tokens`` of the token ids ``ids``), under the
        same limiter, cache and counts as :meth:`loglikelihood`."""
        backend = self.model
        toks = [int(t) for t in ids]

        def call() -> Awaitable[Generation]:
            return backend.tail_loglikelihood_ids(toks, n_tokens)  # type: ignore[attr-defined]

        return await self._answer([{"role": "raw", "content": orjson.dumps(toks).decode()}],
                                  {"loglikelihood_tail_ids": int(n_tokens)}, call, len(toks))

    async def encode(self, text: str) -> list[int]:
        """The backend's token ids of ``text`` (no start token)."""
        return await self.model.encode(text)  # type: ignore[attr-defined]

    async def decode(self, ids: Sequence[int]) -> str:
        """The backend's text of token ids ``ids``."""
        return await self.model.decode(ids)  # type: ignore[attr-defined]

    async def tail_loglikelihood(self, text: str, n_tokens: int) -> Generation:
        """The backend's ``tail_loglikelihood`` (the last ``n_tokens`` tokens of ``text``), under the same
        limiter, cache and counts as :meth:`loglikelihood`."""
        backend = self.model

        def call() -> Awaitable[Generation]:
            return backend.tail_loglikelihood(text, n_tokens)  # type: ignore[attr-defined]

        return await self._answer([{"role": "raw", "content": str(text)}], {"loglikelihood_tail": int(n_tokens)},
                                  call, len(text) // 4 + 1)

    async def complete(self, prompt: str, *, max_tokens: int, temperature: float = 0.0,
                       stop: Sequence[str] = (), seed: int | None = None) -> Generation:
        """The backend's raw-text ``complete`` of ``prompt`` (no chat template), under the same
        limiter, cache and counts as :meth:`generate` (``seed`` as there)."""
        backend = self.model
        stops = [str(x) for x in stop or ()]
        more = {} if seed is None else {"seed": int(seed)}
        if not callable(getattr(backend, "complete", None)):
            raise ModelCallError(f"{self.name} cannot complete raw text (it has no complete method)",
                                 kind="bad_request")

        def call() -> Awaitable[Generation]:
            return backend.complete(prompt, max_tokens=max_tokens, temperature=temperature,  # type: ignore[attr-defined]
                                    stop=stops, **more)

        messages = [{"role": "raw", "content": str(prompt)}]
        params = {"complete": True, "max_tokens": int(max_tokens), "temperature": temperature, "stop": stops, **more}
        return await self._answer(messages, params, call, len(prompt) // 4 + 1 + int(max_tokens))

    async def _answer(self, messages: Messages, params: _Params, make_call: Callable[[], Awaitable[Generation]],  # noqa: C901
                      tokens: int, *, distribution: bool = False,
                      request: Mapping[str, Any] | None = None) -> Generation:
        """The one path of every call: count it, answer from the cache or from an identical call in
        flight, else make it under the limiter and store the answer."""
        st = self.stats
        st.calls += 1
        st.distributions += distribution
        cache = self.cache
        key = None
        if cache is not None:
            key = cache.key(self.cache_identity, messages, dict(params))
            try:
                hit = cache.get(key)
            except CACHE_ERRORS as exc:
                log.warning("call cache read failed: %s", exc)
                hit = None
            if hit is not None:
                st.cache_hits += 1
                return hit
            if self.collect is not None and request is not None:
                st.errors += 1
                raise self.collect(key, request)
            pending = self._pending.get(key)
            if pending is not None:
                try:
                    gen = await asyncio.shield(pending)
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if pending.cancelled() and not (task is not None and _cancelling(task)):
                        # the call we shared was cancelled, not us: make it (counted once)
                        st.calls -= 1
                        st.distributions -= distribution
                        return await self._answer(messages, params, make_call, tokens, distribution=distribution)
                    raise
                except BaseException:
                    st.errors += 1
                    raise
                st.shared += 1
                return dataclasses.replace(gen, cached=True)
            fut: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
            self._pending[key] = fut
        try:
            gen = await self.limiter.call(make_call, tokens=tokens)
        except BaseException as exc:
            st.errors += 1
            if key is not None:
                fut = self._pending.pop(key)
                if not fut.done():
                    if isinstance(exc, Exception):
                        fut.set_exception(exc)
                        fut.exception()  # retrieved: no "never retrieved" warning when nobody waits
                    else:
                        fut.cancel()
            raise
        st.prompt_tokens += gen.usage.input_tokens
        st.completion_tokens += gen.usage.output_tokens
        if key is not None:
            try:
                cache.put(key, gen, model=self.name)
            except CACHE_ERRORS as exc:  # a full disk or a locked file costs the cache, not the run
                log.warning("call cache write failed: %s", exc)
            fut = self._pending.pop(key)
            if not fut.done():
                fut.set_result(gen)
        return gen

    # -- embeddings ----------------------------------------------------------------------------
    @property
    def gives_embeddings(self) -> bool:
        """True when the backend can embed texts (see :func:`~assay.models.base.gives_embeddings`)."""
        return gives_embeddings(self.model)

    @property
    def embed_batch_size(self) -> int:
        """Texts per request by default: the backend's ``embed_batch_size`` (else 32)."""
        return max(1, int(getattr(self.model, "embed_batch_size", 32) or 32))

    async def embed(self, texts: Sequence[str], *, input_type: str | None = None,
                    batch_size: int | None = None) -> np.ndarray:
        """The vectors of ``texts``, float32 ``(len(texts), dim)``, in input order.

        Every text is looked up in the call cache first (one query per 500 texts; key: the
        model's identity, ``input_type`` and the text). Each distinct text that is neither cached
        nor in flight in another call is sent once, in requests of ``batch_size`` texts (default:
        the backend's :attr:`embed_batch_size`), each under the limiter (concurrency, rate,
        retries), all of them at once up to its window; each request's vectors are stored as it
        completes, so a failed or interrupted call keeps what it paid for. ``input_type``:
        ``"query"``, ``"document"`` or None (see :class:`~assay.models.base.EmbeddingModel`).
        """
        items = check_texts(texts)
        check_input_type(input_type)
        if not self.gives_embeddings:
            raise ModelCallError(f"{self.name} is not an embedding model (it has no embed method)",
                                 kind="bad_request")
        size = self.embed_batch_size if batch_size is None else int(batch_size)
        if size < 1:
            raise AssayError(f"batch_size must be at least 1, got {batch_size!r}")
        st = self.stats
        st.embed_texts += len(items)
        # a backend whose vectors do not depend on the input type: one cached vector for all
        kind = input_type if getattr(self.model, "embed_input_types", True) is not False else None
        unique = list(dict.fromkeys(items))
        st.texts_shared += len(items) - len(unique)
        ident = self.cache_identity
        keys = [embed_key(ident, kind, t) for t in unique]
        found: dict[str, np.ndarray] = {}
        cache = self.cache
        if cache is not None and keys:
            try:
                found = cache.get_vectors(keys)
            except CACHE_ERRORS as exc:
                log.warning("call cache read failed: %s", exc)
            st.texts_cached += len(found)
        missing = [(k, t) for k, t in zip(keys, unique) if k not in found]
        if missing:
            await self._fill(missing, input_type, size, found)
        return _assemble(self.name, items, dict(zip(unique, keys)), found)

    async def _fill(self, missing: list[tuple[str, str]], input_type: str | None, size: int,  # noqa: C901
                    found: dict[str, np.ndarray]) -> None:
        """Put the vectors of ``missing`` (key, text) into ``found``: those in flight in another
        call from there, the rest from requests of ``size`` texts made here. A request in flight
        is one future (its vectors) and a row per text, not a future per text."""
        loop = asyncio.get_running_loop()
        pending = self._pending_vectors
        others: list[tuple[str, str, asyncio.Future[np.ndarray], int]] = []
        mine: list[tuple[str, str]] = []
        for k, t in missing:
            other = pending.get(k)
            if other is not None:
                others.append((k, t, *other))
            else:
                mine.append((k, t))
        self.stats.texts_shared += len(others)
        batches = [mine[i:i + size] for i in range(0, len(mine), size)]
        futures: list[asyncio.Future[np.ndarray]] = []
        for batch in batches:
            fut = loop.create_future()
            futures.append(fut)
            for row, (k, _) in enumerate(batch):
                pending[k] = (fut, row)
        tasks = [asyncio.ensure_future(self._embed_batch(b, input_type, f)) for b, f in zip(batches, futures)]
        try:
            if tasks:
                await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            for k, _ in mine:  # a failed or cancelled call releases the texts it held
                pending.pop(k, None)
            for fut in futures:
                if not fut.done():
                    fut.cancel()
        for batch, fut in zip(batches, futures):
            vectors = fut.result()
            for row, (k, _) in enumerate(batch):
                found[k] = vectors[row]
        redo: list[tuple[str, str]] = []
        for k, t, fut, row in others:
            try:
                found[k] = (await asyncio.shield(fut))[row]
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if fut.cancelled() and not (task is not None and _cancelling(task)):
                    redo.append((k, t))  # the call we waited on was cancelled, not us: embed it here
                    continue
                raise
        if redo:
            self.stats.texts_shared -= len(redo)
            await self._fill(redo, input_type, size, found)

    async def _embed_batch(self, batch: list[tuple[str, str]], input_type: str | None,
                           fut: asyncio.Future[np.ndarray]) -> None:
        """One request under the limiter; its vectors go to the cache and to ``fut`` (whoever waits)."""
        backend = self.model
        texts = [t for _, t in batch]
        has_batch = callable(getattr(backend, "embed_batch", None))

        async def call() -> EmbeddingBatch:
            if has_batch:
                return await backend.embed_batch(texts, input_type=input_type)  # type: ignore[attr-defined]
            return EmbeddingBatch(await backend.embed(texts, input_type=input_type))  # type: ignore[attr-defined]

        st = self.stats
        try:
            res = await self.limiter.call(call, tokens=sum(len(t) for t in texts) // 4 + len(texts))
            vectors = _finite(self.name, as_vectors(self.name, res.vectors, len(texts)), texts)
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                st.errors += 1
            if not fut.done():
                if isinstance(exc, Exception):
                    fut.set_exception(exc)
                    fut.exception()  # retrieved: no warning when nobody else waits
                else:
                    fut.cancel()
            raise
        st.embed_batches += 1
        st.texts_embedded += len(texts)
        st.prompt_tokens += res.usage.input_tokens
        if self.cache is not None:
            try:
                self.cache.put_vectors(((k, v) for (k, _), v in zip(batch, vectors)), model=self.name)
            except CACHE_ERRORS as exc:
                log.warning("call cache write failed: %s", exc)
        if not fut.done():
            fut.set_result(vectors)

    async def aclose(self) -> None:
        close = getattr(self.model, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> LimitedModel:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _finite(name: str, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """``vectors`` when every value is a finite number (as float32); else :class:`ModelCallError` naming the
    model and the first text whose vector holds NaN or an infinity, so such a vector is never cached or scored."""
    ok = np.isfinite(vectors).all(axis=1)
    if not ok.all():
        i = int(np.argmin(ok))
        text = texts[i] if len(texts[i]) <= 60 else texts[i][:57] + "..."
        raise ModelCallError(f"{name} returned a vector with NaN or infinite values for the text {text!r} "
                             f"(text {i + 1} of the {len(texts)} in one request; {int((~ok).sum())} bad in all)",
                             kind="bad_response")
    return vectors


def _assemble(name: str, texts: list[str], key_of: Mapping[str, str], vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    """One ``(len(texts), dim)`` float32 array in the order of ``texts``; vectors of different
    lengths (a cache shared by two settings of one model) raise :class:`ModelCallError`."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    rows = [vectors[key_of[t]] for t in texts]
    dims = {int(r.shape[-1]) for r in rows}
    if len(dims) != 1:
        raise ModelCallError(f"{name}: embeddings of different lengths ({sorted(dims)}) for one call",
                             kind="bad_response")
    return np.stack(rows).astype(np.float32, copy=False)
