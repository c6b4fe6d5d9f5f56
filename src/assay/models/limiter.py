"""One policy for every model call of a run: concurrency, rate, retries, timeout, circuit breaker.

:class:`Limiter` is shared by all metrics and rows of a run, so that the calls in flight are
bounded once for the run, not once per metric and worker (no ``evaluators × workers`` blow-up):

* a global concurrency limit (an adjustable semaphore; defaults sized per backend);
* an adaptive rate limit (:class:`assay.models.rate.AdaptiveRate`): token buckets for requests
  and tokens per minute. On a 429 the limiter halves its rate (and its concurrency window), makes
  every caller wait out the server's ``Retry-After`` / ``retry-after-ms``, then recovers slowly
  while calls succeed. With no rpm/tpm configured only the concurrency window adapts;
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

The wrapper that puts a model behind a limiter and the call cache is
:class:`assay.models.limited.LimitedModel`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from assay.errors import AssayError
from assay.models.base import ModelCallError
from assay.models.rate import AdaptiveRate, RateField

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

    def __init__(self, failures: int, last: ModelCallError):
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
    for every process of a run (None: this limiter's own; see :meth:`share`). ``adaptive``,
    ``recover_every``, ``min_factor``: how the rate adapts to 429s (:attr:`rate`, an
    :class:`~assay.models.rate.AdaptiveRate` on the monotonic clock).
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
        self.rpm, self.tpm = rpm or None, tpm or None   # as configured (a cluster limiter is started with them)
        self.rate = AdaptiveRate(self.concurrency, rpm=rpm, tpm=tpm, adaptive=adaptive,
                                 recover_every=recover_every, min_factor=min_factor)
        self._slots = _Slots(self.concurrency)
        self.stats = LimiterStats()
        self.shared: SharedLimits | None = None
        self.share(shared)

    def share(self, shared: SharedLimits | None) -> Limiter:
        """Take every request's lease from ``shared`` from now on (None: back to this limiter's
        own rate limits); returns the limiter. See :class:`SharedLimits`."""
        if shared is not None and not isinstance(shared, SharedLimits):
            raise AssayError(f"shared limits need acquire, recheck and release methods; got {type(shared).__name__}")
        self.shared = shared
        return self

    @classmethod
    def for_model(cls, model: Any, **kw: Any) -> Limiter:
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

    #: the fraction of the configured rate in force (lowered by 429s)
    rate_factor = RateField("factor")

    @property
    def window(self) -> int:
        return self._slots.limit

    #: how the rate adapts (see :class:`~assay.models.rate.AdaptiveRate`); settable
    adaptive = RateField()
    recover_every = RateField()
    min_factor = RateField()

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
            rate = self.rate
            while True:
                paused = rate.paused_for()
                if paused > 0:
                    await asyncio.sleep(paused)
                    continue
                wait = rate.take(tokens)
                if wait > 0:
                    await asyncio.sleep(wait)
                    if rate.paused_for() > 0:  # a 429 arrived meanwhile
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
            if est_tokens and self.shared is None:
                self.rate.settle(est_tokens, usage.input_tokens + usage.output_tokens)
        self.rate.succeeded()
        if self.rate.limit != self._slots.limit:
            self._slots.set_limit(self.rate.limit)

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
        pause = None if err.retry_after is None else min(err.retry_after, self.retry.max_retry_after)
        if self.rate.rate_limited(pause, self._slots.in_flight + 1):
            self._slots.set_limit(self.rate.limit)
            log.warning("rate limited: lowering to %.0f%% of the configured rate and %d calls in flight",
                        100 * self.rate.factor, self._slots.limit)


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
