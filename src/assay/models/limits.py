"""One policy for every model call of a run: concurrency, rate, retries, timeout, cache.

:class:`Limiter` is shared by all metrics and rows of a run, so that the calls in flight are
bounded once for the run, not once per metric and worker (no ``evaluators × workers`` blow-up):

* a global concurrency limit (an adjustable semaphore; defaults sized per backend);
* an adaptive rate limit: token buckets for requests and tokens per minute. On a 429
  the limiter halves its rate (and its concurrency window), makes every caller wait out
  the server's ``Retry-After`` / ``retry-after-ms``, then recovers slowly while calls
  succeed. With no rpm/tpm configured only the concurrency window adapts;
* retries with exponential backoff and jitter on 429, 5xx, 408/409, timeouts and
  connection errors, for a bounded number of attempts (fewer for timeouts: a server that
  did not answer in time once rarely does the next time); a concurrency slot is not held
  while a call waits to retry;
* a per-call timeout;
* optionally, limits shared with other processes or machines (:class:`SharedLimits`, e.g. the
  Ray actor of :mod:`assay.scale.limiter`): each request then also takes a lease from the shared
  coordinator, which holds the run's global concurrency, requests and tokens per minute, and the
  pause after a 429, for every worker at once;
* a circuit breaker, off unless armed (the evaluation engine arms it for a run): after
  ``max_consecutive_failures`` requests in a row timed out or could not connect, with no
  answer of any kind in between, every call of the limiter raises :class:`CircuitOpen`.

:class:`LimitedModel` applies a limiter and a :class:`~assay.models.cache.CallCache` to
any :class:`~assay.models.base.ChatModel`, to its generated answers and its next-token
distributions alike (the only wrapper that does): a cache hit returns at once with
``cached=True``; identical calls in flight at the same time are made once. It does the same
for an :class:`~assay.models.base.EmbeddingModel`, per text (:meth:`LimitedModel.embed`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Literal, Mapping, Protocol, Sequence, TypeVar, runtime_checkable

import numpy as np

from assay.errors import AssayError
from assay.models.base import (NO_DISTRIBUTIONS, NO_LOGLIKS, ChatModel, EmbeddingBatch, Generation, Messages,
                               ModelCallError, as_vectors, cache_identity, check_input_type, check_texts,
                               estimate_tokens, gives_distributions, gives_embeddings, gives_logliks)
from assay.models.cache import CACHE_ERRORS, embed_key

log = logging.getLogger("assay.models")
T = TypeVar("T")

if sys.version_info >= (3, 11):
    _timeout = asyncio.timeout
else:  # pragma: no cover - Python 3.10
    _timeout = None


class CircuitOpen(BaseException):
    """The circuit breaker of a :class:`Limiter` is open: too many requests in a row timed out
    or could not connect, so no further call is made.

    A ``BaseException``, like :class:`KeyboardInterrupt`: it must pass through the ``except
    Exception`` of every metric and judge (which turn a failed call into an errored row) to stop
    the run; the engine catches it and ends the run as ``interrupted`` and resumable
    (:class:`assay.errors.RunIncomplete`). ``failures``: the requests in a row that failed;
    ``last``: the last of their errors.
    """

    def __init__(self, failures: int, last: "ModelCallError"):
        self.failures, self.last = failures, last
        super().__init__(f"{failures} requests in a row timed out or could not connect (the last: {last})")


Outcome = Literal["ok", "failed", "unsent"]


@runtime_checkable
class SharedLimits(Protocol):
    """Limits shared by the limiters of several processes or machines: one global concurrency,
    requests-per-minute and tokens-per-minute budget, and one pause after a 429, for a whole run.

    A :class:`Limiter` given one (``Limiter(..., shared=X)`` or :meth:`Limiter.share`) takes a
    lease for every request it sends (each retry is a request of its own) and gives it back
    when the request is answered. The rate, the pause and the backoff on 429 are then the
    coordinator's; the limiter's own ``rpm`` / ``tpm`` buckets are not used, and its
    concurrency window still caps what this process has in flight.

    The Ray implementation is :class:`assay.scale.limiter.ClusterLimits`.
    """

    async def acquire(self, tokens: int, hold: float | None) -> tuple[Any, float]:
        """A lease for one request of about ``tokens`` tokens (0: not counted) and the seconds to
        wait before sending it (0: at once). The lease counts as in flight from then until it is
        given back. ``hold``: the longest the request may take (the limiter's timeout; None: no
        limit), after which a coordinator may take back a lease its holder never returned (a
        killed worker)."""
        ...

    async def recheck(self, lease: Any) -> float:
        """Seconds still to wait before sending on ``lease`` (0: go now): asked after the wait
        :meth:`acquire` gave, as a 429 elsewhere may have paused everyone meanwhile."""
        ...

    def release(self, lease: Any, outcome: Outcome, *, tokens: int | None = None,
                pause: float | None = None) -> None:
        """Give ``lease`` back, without waiting for the coordinator. ``outcome``: ``"ok"`` (an
        answer), ``"failed"`` (an error, a 429 included) or ``"unsent"`` (the request was never
        sent: its request and tokens are given back). ``tokens``: the tokens the request used
        (None: as estimated). ``pause``: the request was answered 429: every holder waits this
        many seconds (the server's ``Retry-After``, or the limiter's own backoff) and the
        coordinator backs off its rate."""
        ...


@dataclass
class RetryPolicy:
    """Bounded retries: ``max_attempts`` tries in all; exponential backoff with jitter.

    A call whose tries time out gives up after ``timeout_attempts`` of them (at most
    ``max_attempts``): waiting out a hung server six times over is what makes a run stall,
    while a 429 or a 5xx is worth the longer patience. The n-th retry waits ``d/2 + uniform(0, d/2)`` with ``d = min(max_delay,
    base_delay * 2**n)``, or what the server asked for (``Retry-After``) plus up to 10%
    jitter. A server asking for more than ``max_retry_after`` seconds fails the call.
    """

    max_attempts: int = 6
    timeout_attempts: int = 2
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 300.0

    def delay(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after + random.uniform(0.0, 0.1 * retry_after + 0.05)
        d = min(self.max_delay, self.base_delay * (2 ** retry))
        return d / 2 + random.uniform(0.0, d / 2)


class _Bucket:
    """A token bucket that lends: a taker may overdraw and then waits the deficit out."""

    __slots__ = ("per_min", "rate", "capacity", "level", "stamp")

    def __init__(self, per_minute: float):
        self.per_min = float(per_minute)
        self.rate = self.per_min / 60.0
        self.capacity = max(1.0, self.rate)      # a burst of at most one second's worth
        self.level = self.capacity
        self.stamp = time.monotonic()

    def scale(self, factor: float) -> None:
        self._refill(time.monotonic())
        self.rate = max(self.per_min * factor / 60.0, 1e-6)
        self.capacity = max(1.0, self.rate)

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, n: float) -> float:
        """Take ``n`` now; return how long to wait before using them."""
        now = time.monotonic()
        self._refill(now)
        self.level -= n
        return 0.0 if self.level >= 0 else -self.level / self.rate

    def give(self, n: float) -> None:
        self.level = min(self.capacity, self.level + n)


class _Slots:
    """A semaphore whose limit can move (the adaptive concurrency window)."""

    __slots__ = ("limit", "in_flight", "peak", "_waiters")

    def __init__(self, limit: int):
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self.in_flight < self.limit and not self._waiters:
            self.in_flight += 1
            if self.in_flight > self.peak:
                self.peak = self.in_flight
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # woken and cancelled in the same breath: give it back
            else:
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass
            raise

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def set_limit(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            fut = self._waiters.popleft()
            if fut.done():
                continue
            self.in_flight += 1
            if self.in_flight > self.peak:
                self.peak = self.in_flight
            fut.set_result(None)


@dataclass
class LimiterStats:
    requests: int = 0          # backend calls started (retries included)
    succeeded: int = 0
    failed: int = 0            # calls that gave up
    retries: int = 0
    rate_limited: int = 0      # 429 answers
    timeouts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class Limiter:
    """Concurrency, adaptive rate limit, retries, timeout and circuit breaker shared by all
    calls of a run.

    ``concurrency``: calls in flight at once. ``rpm`` / ``tpm``: requests and tokens per
    minute (None: not limited until the server says so). ``timeout``: seconds per call
    (None: none). ``retry``: a :class:`RetryPolicy` (or pass ``max_attempts`` /
    ``timeout_attempts``). ``max_consecutive_failures``: the circuit breaker (None or 0: off;
    see :meth:`arm_breaker`). ``shared``: a :class:`SharedLimits` coordinator whose limits hold
    for every process of a run (None: this limiter's own; see :meth:`share`).
    """

    def __init__(self, concurrency: int = 16, *, rpm: float | None = None, tpm: float | None = None,
                 timeout: float | None = 120.0, retry: RetryPolicy | None = None,
                 max_attempts: int | None = None, timeout_attempts: int | None = None,
                 max_consecutive_failures: int | None = None, adaptive: bool = True,
                 recover_every: float = 5.0, min_factor: float = 0.02, shared: SharedLimits | None = None):
        if concurrency < 1:
            raise AssayError(f"concurrency must be at least 1, got {concurrency}")
        self.concurrency = int(concurrency)
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        if max_attempts is not None:
            self.retry = dataclasses.replace(self.retry, max_attempts=max(1, int(max_attempts)))
        if timeout_attempts is not None:
            self.retry = dataclasses.replace(self.retry, timeout_attempts=max(1, int(timeout_attempts)))
        self.max_consecutive_failures: int | None = None
        self.consecutive_failures = 0     # requests in a row that timed out or could not connect
        self.tripped: CircuitOpen | None = None
        self.arm_breaker(max_consecutive_failures)
        self.adaptive = adaptive
        self.recover_every = recover_every
        self.min_factor = min_factor
        self.rpm, self.tpm = rpm or None, tpm or None   # as configured (a cluster limiter is started with them)
        self._rpm = _Bucket(rpm) if rpm else None
        self._tpm = _Bucket(tpm) if tpm else None
        self._slots = _Slots(self.concurrency)
        self._window = float(self.concurrency)
        self._factor = 1.0
        self._pause_until = 0.0
        self._last_cut = -1e9
        self._last_429 = -1e9
        self._last_recover = -1e9
        self.stats = LimiterStats()
        self.shared: SharedLimits | None = None
        self.share(shared)

    def share(self, shared: SharedLimits | None) -> "Limiter":
        """Take every request's lease from ``shared`` from now on (None: back to this limiter's
        own rate limits); returns the limiter. See :class:`SharedLimits`."""
        if shared is not None and not isinstance(shared, SharedLimits):
            raise AssayError(f"shared limits need acquire, recheck and release methods; got {type(shared).__name__}")
        self.shared = shared
        return self

    @classmethod
    def for_model(cls, model: Any, **kw: Any) -> "Limiter":
        """A limiter with the backend's default concurrency (``model.default_concurrency``)."""
        kw.setdefault("concurrency", int(getattr(model, "default_concurrency", 16) or 16))
        return cls(**kw)

    # -- introspection ---------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return self._slots.in_flight

    @property
    def peak_in_flight(self) -> int:
        return self._slots.peak

    @property
    def rate_factor(self) -> float:
        return self._factor

    @property
    def window(self) -> int:
        return self._slots.limit

    # -- the circuit breaker ----------------------------------------------------------------------
    def arm_breaker(self, max_consecutive_failures: int | None) -> None:
        """Open the circuit after ``max_consecutive_failures`` requests in a row timed out or
        could not connect (None or 0: never); the count starts again from zero, and a breaker
        that was open is closed. Any answer from the server (a success, a 429, a 500) resets
        the count. Once open, every call raises :class:`CircuitOpen` at once."""
        n = int(max_consecutive_failures or 0)
        if n < 0:
            raise AssayError(f"max_consecutive_failures must be 0 (off) or more, got {max_consecutive_failures}")
        self.max_consecutive_failures = n or None
        self.consecutive_failures = 0
        self.tripped = None

    def _check_breaker(self) -> None:
        if self.tripped is not None:
            raise CircuitOpen(self.tripped.failures, self.tripped.last)

    # -- the call ---------------------------------------------------------------------------------
    async def call(self, fn: Callable[[], Awaitable[T]], *, tokens: int = 0) -> T:
        """Run ``fn()`` under the policy; raise :class:`ModelCallError` when it gives up, and
        :class:`CircuitOpen` when the circuit breaker is (or becomes) open."""
        attempts = self.retry.max_attempts
        timeouts = 0
        for attempt in range(attempts):
            self._check_breaker()
            lease = await self._acquire(tokens)
            if self.tripped is not None:
                self._release(lease, "unsent")
                self._check_breaker()
            self.stats.requests += 1
            try:
                if self.timeout is None:
                    result = await fn()
                elif _timeout is not None:
                    async with _timeout(self.timeout):
                        result = await fn()
                else:  # pragma: no cover - Python 3.10
                    result = await asyncio.wait_for(fn(), self.timeout)
            except BaseException as exc:
                err = _classify(exc, self.timeout)
                backoff = pause = None
                if err is not None and err.kind == "rate_limit":
                    backoff = self.retry.delay(attempt, err.retry_after)
                    pause = (backoff if err.retry_after is None
                             else min(err.retry_after, self.retry.max_retry_after))
                self._release(lease, "failed", pause=pause)
                if err is None:
                    raise
                self._on_failure(err)
                self._check_breaker()
                timeouts += err.kind == "timeout"
                retry_after = err.retry_after
                if retry_after is not None and retry_after > self.retry.max_retry_after:
                    err.attempts = attempt + 1
                    self.stats.failed += 1
                    final = ModelCallError(f"{err} (the server asks to wait {retry_after:.0f} s, more than "
                                           f"{self.retry.max_retry_after:.0f} s)", kind=err.kind, status=err.status,
                                           retry_after=retry_after, body=err.body)
                    final.attempts = attempt + 1
                    raise final from None
                if not err.retryable or attempt + 1 >= attempts or timeouts >= self.retry.timeout_attempts:
                    err.attempts = attempt + 1
                    self.stats.failed += 1
                    if err is exc:
                        raise
                    raise err from None
                delay = backoff if backoff is not None else self.retry.delay(attempt, retry_after)
                self.stats.retries += 1
                log.info("model call failed (%s); retry %d/%d in %.2f s", err, attempt + 1, attempts - 1, delay)
                await asyncio.sleep(delay)
                continue
            usage = getattr(result, "usage", None)
            self._release(lease, "ok", tokens=None if usage is None else usage.input_tokens + usage.output_tokens)
            self._on_success(result, tokens)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _acquire(self, tokens: int) -> Any:
        """A concurrency slot, then the rate: this limiter's own, or a lease of the shared
        coordinator (returned with the coordinator; None when not shared)."""
        await self._slots.acquire()
        try:
            if self.shared is not None:
                return await self._lease(self.shared, tokens)
            while True:
                now = time.monotonic()
                if self._pause_until > now:
                    await asyncio.sleep(self._pause_until - now)
                    continue
                wait = 0.0
                if self._rpm is not None:
                    wait = self._rpm.take(1)
                if self._tpm is not None and tokens:
                    wait = max(wait, self._tpm.take(tokens))
                if wait > 0:
                    await asyncio.sleep(wait)
                    if self._pause_until > time.monotonic():  # a 429 arrived meanwhile
                        continue
                return None
        except BaseException:
            self._slots.release()
            raise

    async def _lease(self, shared: SharedLimits, tokens: int) -> Any:
        lease, wait = await shared.acquire(tokens, self.timeout)
        try:
            while wait > 0:
                await asyncio.sleep(wait)
                wait = await shared.recheck(lease)   # a 429 elsewhere may have paused everyone
        except BaseException:
            shared.release(lease, "unsent")
            raise
        return shared, lease

    def _release(self, lease: Any, outcome: Outcome, *, tokens: int | None = None,
                 pause: float | None = None) -> None:
        self._slots.release()
        if lease is None:
            return
        shared, lease = lease
        try:
            shared.release(lease, outcome, tokens=tokens, pause=pause)
        except Exception as exc:  # a lost release costs the coordinator a lease until it expires
            log.warning("could not give a lease back to the shared limits: %s", exc)

    def _on_success(self, result: Any, est_tokens: int) -> None:
        st = self.stats
        st.succeeded += 1
        self.consecutive_failures = 0
        usage = getattr(result, "usage", None)
        if usage is not None:
            st.input_tokens += usage.input_tokens
            st.output_tokens += usage.output_tokens
            if self._tpm is not None and est_tokens and self.shared is None:
                self._tpm.give(est_tokens - (usage.input_tokens + usage.output_tokens))
        if self._factor < 1.0 or self._slots.limit < self.concurrency:
            self._recover()

    def _on_failure(self, err: ModelCallError) -> None:
        if err.kind == "timeout":
            self.stats.timeouts += 1
        if err.kind in ("timeout", "connection"):
            self.consecutive_failures += 1
            n = self.max_consecutive_failures
            if n and self.consecutive_failures >= n and self.tripped is None:
                self.tripped = CircuitOpen(self.consecutive_failures, err)
                log.info("circuit breaker open: %s", self.tripped)
        else:
            self.consecutive_failures = 0   # the server answered: it is there
        if err.kind != "rate_limit":
            return
        self.stats.rate_limited += 1
        now = time.monotonic()
        self._last_429 = now
        if err.retry_after is not None:
            self._pause_until = max(self._pause_until, now + min(err.retry_after, self.retry.max_retry_after))
        if not self.adaptive or now - self._last_cut < 1.0:
            return  # answers to requests sent before the last cut say nothing new
        self._last_cut = now
        self._factor = max(self.min_factor, self._factor / 2)
        for b in (self._rpm, self._tpm):
            if b is not None:
                b.scale(self._factor)
        self._window = max(1.0, min(self._window, self._slots.in_flight + 1) / 2)
        self._slots.set_limit(int(self._window))
        log.warning("rate limited: lowering to %.0f%% of the configured rate and %d calls in flight",
                    100 * self._factor, self._slots.limit)

    def _recover(self) -> None:
        """Additive increase: the window grows by about one per window of successes; the
        rate factor by 10% every ``recover_every`` seconds without a 429."""
        now = time.monotonic()
        if self._slots.limit < self.concurrency:
            self._window = min(float(self.concurrency), self._window + 1.0 / self._window)
            if int(self._window) != self._slots.limit:
                self._slots.set_limit(int(self._window))
        if (self._factor < 1.0 and now - self._last_429 >= self.recover_every
                and now - self._last_recover >= self.recover_every):
            self._last_recover = now
            self._factor = min(1.0, self._factor + 0.1)
            for b in (self._rpm, self._tpm):
                if b is not None:
                    b.scale(self._factor)


def _classify(exc: BaseException, timeout: float | None) -> ModelCallError | None:
    """A retry decision for an exception; None for those that are not the model's (bugs, Ctrl-C)."""
    if isinstance(exc, ModelCallError):
        return exc
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return ModelCallError(f"no answer within {timeout:g} s" if timeout else "timed out",
                              kind="timeout", retryable=True)
    if isinstance(exc, (ConnectionError, OSError)):
        return ModelCallError(f"connection failed: {exc}", kind="connection", retryable=True)
    return None


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

    def since(self, earlier: "Mapping[str, int] | CallStats | None",
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
                 price: "tuple[float, float] | None" = None):
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

    def __repr__(self) -> str:
        return f"LimitedModel({self.model!r}, concurrency={self.limiter.concurrency}, cache={self.cache!r})"

    @property
    def default_concurrency(self) -> int:
        return self.limiter.concurrency

    async def generate(self, messages: Messages, *, max_tokens: int | None = None,
                       temperature: float | None = 0.0, response_format: Mapping[str, Any] | None = None,
                       logprobs: bool = False, top_logprobs: int | None = None,
                       seed: int | None = None) -> Generation:
        """The backend's answer; ``seed`` (passed on only when given, and then part of the cache
        key) tells several samples of one prompt apart."""
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
        return await self._answer(messages, params, call, estimate_tokens(messages) + (max_tokens or 256))

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

    async def _answer(self, messages: Messages, params: _Params, make_call: Callable[[], Awaitable[Generation]],
                      tokens: int, *, distribution: bool = False) -> Generation:
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

    async def _fill(self, missing: list[tuple[str, str]], input_type: str | None, size: int,
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
                           fut: "asyncio.Future[np.ndarray]") -> None:
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
            vectors = as_vectors(self.name, res.vectors, len(texts))
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

    async def __aenter__(self) -> "LimitedModel":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


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
