"""One set of model limits for a whole run on Ray: a named actor that every worker asks.

Each worker process has its own :class:`~assay.models.limiter.Limiter` (retries, timeout,
circuit breaker, a per-process concurrency window). Given :class:`ClusterLimits`, every request
of every worker also takes a *lease* from one actor, which holds for the whole cluster:

* the global concurrency (leases out at once), lowered on a 429 and regrown as calls succeed;
* requests and tokens per minute, as token buckets that lend: a lease granted while the bucket is
  short says how long to wait before sending, so waiting callers are spaced in the order they
  asked, with no polling; the tokens a request really used are settled when it is given back;
* the pause after a 429: the server's ``Retry-After`` (or, without one, the limiter's own
  backoff) holds back every worker, not only the one that was told, and the rates are halved
  and recover slowly (the same :class:`~assay.models.rate.AdaptiveRate` as the local limiter). A lease
  granted with a wait is checked once more after that wait, so a 429 that arrived meanwhile
  holds it back too.

Ray's own HTTP stage spaces requests per actor and does not read ``Retry-After``; here the limit
is the run's, whatever the number of workers.

Cost: leases travel in blocks. Every lease a worker process asks for while its previous ask is
on its way to the actor goes with the next call (``acquire_block``), and the leases it gives back
in one turn of its event loop go in one call (``release_block``, not awaited); a lease that had
to wait for the rate costs one more call (``recheck``). The actor still grants each lease itself,
in order, from one book, so the guarantees are those of one call per lease; under load a call
carries tens of leases, alone it costs one round trip (well under a millisecond on one machine,
a network round trip across machines). A lease not given back (a killed worker) is taken back
after the request's timeout plus a margin (``hold``), or after ``lease_ttl`` seconds.

What saturates: the actor serves the whole cluster on one core. ``benchmarks/bench_cluster_limiter.py``
measures the leases per second one actor serves, in blocks and one per call (the figures are in
``benchmarks/RESULTS.md``, "Cluster limiter"); a run whose endpoints allow more requests per
second than that is limited by the actor, not by the endpoint (docs/scale.md, "Throughput").

Use (the Ray engine does this for a run)::

    handle = start_cluster_limiter("assay-judge", concurrency=32, rpm=3000, tpm=2_000_000)
    limiter = Limiter(16, shared=ClusterLimits(handle))     # on each worker
    # or: judge.limiter.share(ClusterLimits("assay-judge"))  # by name, resolved on the worker

The bookkeeping is :class:`LimitBook`, plain asyncio without Ray (the actor holds one).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assay.errors import AssayError
from assay.models.base import ModelCallError
from assay.models.rate import AdaptiveRate, RateField

log = logging.getLogger("assay.scale")

#: set to ``0``: cluster limiter clients made in this process take one lease per actor call
BLOCKS_ENV = "ASSAY_LIMITER_BLOCKS"
#: seconds added to a request's timeout before its lease is taken back from a silent holder
HOLD_MARGIN = 30.0


@dataclass
class _Lease:
    start: float      # when its request may be sent
    expires: float    # when it is taken back if never given back
    tokens: int       # tokens taken from the tpm bucket


class LimitBook:
    """The cluster-wide limits' bookkeeping: leases, global concurrency, request and token
    buckets, the pause after a 429 and the adaptive backoff. Plain asyncio, one event loop
    (the actor's); every method is called with a lease id chosen by the caller.

    ``concurrency``: leases out at once. ``rpm`` / ``tpm``: requests and tokens per minute
    (None: not limited). ``lease_ttl``: seconds after which a lease whose holder gave no
    ``hold`` is taken back. ``adaptive``: on a 429, halve the rates (and the concurrency window)
    and recover slowly while requests succeed. ``clock``: seconds, monotonic (tests pass their
    own). ``sweep_every``: seconds between sweeps for leases never given back (None: only when
    a lease is asked for). The buckets, the window and the pause are :attr:`rate`, an
    :class:`~assay.models.rate.AdaptiveRate` on ``clock``."""

    def __init__(self, concurrency: int, *, rpm: float | None = None, tpm: float | None = None,
                 lease_ttl: float = 600.0, adaptive: bool = True, recover_every: float = 5.0,
                 min_factor: float = 0.02, clock: Callable[[], float] = time.monotonic,
                 sweep_every: float | None = 1.0):
        if int(concurrency) < 1:
            raise AssayError(f"the cluster limiter's concurrency must be at least 1, got {concurrency}")
        for name, v in (("rpm", rpm), ("tpm", tpm)):
            if v is not None and not v > 0:
                raise AssayError(f"the cluster limiter's {name} must be more than 0 (or None), got {v}")
        self.clock = clock
        self.concurrency = int(concurrency)
        self.rpm, self.tpm = rpm, tpm
        self.lease_ttl = float(lease_ttl)
        self.rate = AdaptiveRate(self.concurrency, rpm=rpm, tpm=tpm, adaptive=adaptive,
                                 recover_every=recover_every, min_factor=min_factor, clock=clock)
        self._leases: dict[str, _Lease] = {}
        self._waiting: OrderedDict[str, asyncio.Future[bool]] = OrderedDict()
        self._abandoned: dict[str, float] = {}     # given back before it was asked for: id -> when
        self._gone: deque[str] = deque(maxlen=4096)  # taken back: a late return is ignored
        self.sweep_every = sweep_every
        self._sweeper: asyncio.Task[None] | None = None
        self.peak_in_flight = 0
        self.counts = {"granted": 0, "waited": 0, "ok": 0, "failed": 0, "unsent": 0, "rate_limited": 0,
                       "expired": 0}

    # -- introspection ------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return len(self._leases)

    #: leases out at once now: the concurrency, or less after a 429
    limit = RateField()
    #: the fraction of the configured rates in force
    factor = RateField()
    #: the clock time before which no lease's request is sent (after a 429)
    pause_until = RateField()

    def settings(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "rpm": self.rpm, "tpm": self.tpm}

    def snapshot(self) -> dict[str, Any]:
        """Counts and state: leases in flight, the peak, waiting, granted / given back per
        outcome, 429s reported, the rate factor, the window and the pause left (seconds)."""
        now = self.clock()
        return {**self.counts, "in_flight": self.in_flight, "peak_in_flight": self.peak_in_flight,
                "waiting": len(self._waiting), "factor": self.factor, "window": self.limit,
                "pause_left": max(0.0, self.pause_until - now)}

    # -- leases -------------------------------------------------------------------------------
    def try_acquire(self, lease: str, tokens: int = 0, hold: float | None = None) -> float | None:
        """Grant ``lease`` at once if a concurrency slot is free and nobody waits before it:
        the seconds its holder waits before sending, as :meth:`acquire`; None when it would have
        to queue (nothing is recorded then: ask :meth:`acquire`). The caller sweeps first
        (:meth:`reclaim`), once for a block of asks."""
        if self._abandoned.pop(lease, None) is not None:
            return 0.0   # its holder gave up before asking reached us
        if lease in self._leases or lease in self._waiting:
            raise AssayError(f"lease {lease!r} asked for twice")
        if len(self._leases) >= self.limit or self._waiting:
            return None
        return self._grant(lease, tokens, hold)

    async def acquire(self, lease: str, tokens: int = 0, hold: float | None = None) -> float:
        """Grant ``lease`` once a concurrency slot is free; return the seconds its holder waits
        before sending (the pause after a 429, the rate's deficit)."""
        self._start_sweeper()
        self.reclaim()
        if self._abandoned.pop(lease, None) is not None:
            return 0.0   # its holder gave up before asking reached us
        if lease in self._leases or lease in self._waiting:
            raise AssayError(f"lease {lease!r} asked for twice")
        if len(self._leases) >= self.limit or self._waiting:
            fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            self._waiting[lease] = fut
            self.counts["waited"] += 1
            try:
                granted = await fut
            except asyncio.CancelledError:
                self._waiting.pop(lease, None)
                if fut.done() and not fut.cancelled() and fut.result():
                    self._leases.pop(lease, None)   # woken and cancelled at once: give it back
                    self._wake()
                raise
            if not granted or lease not in self._leases:
                return 0.0   # given back while it waited
        return self._grant(lease, tokens, hold)

    def _grant(self, lease: str, tokens: int, hold: float | None) -> float:
        now = self.clock()
        wait = max(self.rate.paused_for(), self.rate.take(tokens))
        ttl = self.lease_ttl if hold is None else float(hold) + HOLD_MARGIN
        self._leases[lease] = _Lease(now + wait, now + wait + ttl, int(tokens or 0))
        self.peak_in_flight = max(self.peak_in_flight, len(self._leases))
        self.counts["granted"] += 1
        return wait

    def recheck(self, lease: str) -> float:
        """Seconds ``lease`` still waits: a pause that began after it was granted."""
        if lease not in self._leases:
            return 0.0
        return self.rate.paused_for()

    def release(self, lease: str, outcome: str = "ok", tokens: int | None = None,
                pause: float | None = None) -> None:
        """Give ``lease`` back (see :meth:`assay.models.limiter.SharedLimits.release`)."""
        if outcome not in ("ok", "failed", "unsent"):
            raise AssayError(f"a lease's outcome is 'ok', 'failed' or 'unsent', not {outcome!r}")
        now = self.clock()
        if pause is not None:
            self._rate_limited(float(pause))
        held = self._leases.pop(lease, None)
        if held is None:
            fut = self._waiting.pop(lease, None)
            if fut is not None:
                if not fut.done():
                    fut.set_result(False)
            elif lease not in self._gone:
                self._abandoned[lease] = now   # its acquire has not reached us yet
            return
        self.counts[outcome] += 1
        if outcome == "unsent":
            self.rate.give_back(held.tokens)
        elif tokens is not None:
            self.rate.settle(held.tokens, int(tokens))   # a debt when it used more than estimated
        if outcome == "ok":
            self.rate.succeeded()
        self._wake()

    def reclaim(self) -> int:
        """Take back the leases whose holders never gave them back (past their ``hold``); return
        how many."""
        now = self.clock()
        dead = [k for k, v in self._leases.items() if v.expires <= now]
        for k in dead:
            del self._leases[k]
            self._gone.append(k)
        if dead:
            self.counts["expired"] += len(dead)
            log.warning("cluster limiter: took back %d lease(s) never given back", len(dead))
            self._wake()
        for k in [k for k, t in self._abandoned.items() if now - t > self.lease_ttl]:
            del self._abandoned[k]
        return len(dead)

    def _wake(self) -> None:
        while self._waiting and len(self._leases) < self.limit:
            lease, fut = self._waiting.popitem(last=False)
            if fut.done():
                continue
            # held from now: the grant completes in acquire (its wait, tokens and expiry)
            self._leases[lease] = _Lease(0.0, float("inf"), 0)
            fut.set_result(True)

    def _start_sweeper(self) -> None:
        if self.sweep_every is None or (self._sweeper is not None and not self._sweeper.done()):
            return
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep(self.sweep_every))

    async def _sweep(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            self.reclaim()

    # -- backoff ------------------------------------------------------------------------------
    def _rate_limited(self, pause: float) -> None:
        self.counts["rate_limited"] += 1
        if self.rate.rate_limited(pause, len(self._leases)):
            log.warning("cluster limiter: rate limited; %.0f%% of the configured rate, %d in flight at most, "
                        "every worker paused %.2f s", 100 * self.factor, self.limit, pause)


# -- the Ray actor ------------------------------------------------------------------------------

class LimitActor:
    """The body of the named actor (made a Ray actor by :func:`start_cluster_limiter`): one
    :class:`LimitBook`, every method async so that all run on the actor's one event loop."""

    def __init__(self, concurrency: int, rpm: float | None, tpm: float | None, lease_ttl: float):
        self.book = LimitBook(concurrency, rpm=rpm, tpm=tpm, lease_ttl=lease_ttl)
        self._queued: dict[str, asyncio.Task[float]] = {}   # block asks that had to wait
        self.calls = 0

    async def acquire(self, lease: str, tokens: int, hold: float | None) -> float:
        self.calls += 1
        return await self.book.acquire(lease, tokens, hold)

    async def acquire_block(self, asks: list[tuple[str, int, float | None]],
                            queued: list[str]) -> dict[str, float]:
        """Leases for a block of asks in one round trip: ``{lease: seconds to wait}`` for every
        ask granted, new (``asks``: ``(lease, tokens, hold)``) or asked before and still queued
        here (``queued``). Returns at once when any is granted, else when the first queued one
        is; each lease is granted by the same book, in the same order, as one by one."""
        self.calls += 1
        book = self.book
        book._start_sweeper()
        book.reclaim()
        out: dict[str, float] = {}
        mine = [lease for lease in queued if lease in self._queued]
        for lease, tokens, hold in asks:
            wait = book.try_acquire(lease, tokens, hold)
            if wait is None:
                self._queued[lease] = asyncio.ensure_future(book.acquire(lease, tokens, hold))
                mine.append(lease)
            else:
                out[lease] = wait
        if not out and mine:
            await asyncio.wait([self._queued[lease] for lease in mine], return_when=asyncio.FIRST_COMPLETED)
            await asyncio.sleep(0)   # others woken by the same release finish too
        for lease in mine:
            task = self._queued[lease]
            if task.done():
                del self._queued[lease]
                if not task.cancelled() and task.exception() is None:
                    out[lease] = task.result()
        return out

    async def release_block(self, returns: list[tuple[str, str, int | None, float | None]]) -> None:
        """Several :meth:`release` in one call (``(lease, outcome, tokens, pause)`` each)."""
        self.calls += 1
        for lease, outcome, tokens, pause in returns:
            self.book.release(lease, outcome, tokens, pause)

    async def recheck(self, lease: str) -> float:
        return self.book.recheck(lease)

    async def release(self, lease: str, outcome: str, tokens: int | None, pause: float | None) -> None:
        self.calls += 1
        self.book.release(lease, outcome, tokens, pause)

    async def settings(self) -> dict[str, Any]:
        return self.book.settings()

    async def snapshot(self) -> dict[str, Any]:
        return {**self.book.snapshot(), "actor_calls": self.calls}

    async def ping(self) -> None:
        return None


#: concurrent calls one actor accepts (each waiting lease is one)
ACTOR_MAX_CONCURRENCY = 10_000


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise AssayError("the cluster limiter runs on Ray, which is not installed: pip install 'assay[ray]'") from None
    return ray


def start_cluster_limiter(name: str, *, concurrency: int, rpm: float | None = None, tpm: float | None = None,
                          lease_ttl: float = 600.0, detached: bool = False,
                          namespace: str | None = None) -> Any:
    """The named cluster limiter actor ``name``: started with these limits, or the one already
    running under that name (its limits stay as first set; a warning says when they differ).

    ``concurrency``: requests in flight in the whole cluster; ``rpm`` / ``tpm``: requests and
    tokens per minute (None: not limited until a 429 says so). ``detached``: the actor outlives
    the driver (for several jobs sharing one endpoint's quota; kill it with ``ray.kill``);
    otherwise Ray ends it once no handle to it is left, so the caller keeps the one returned
    while the run lasts.
    The actor takes no CPU. Connects to Ray (``ray.init()``) when not yet connected. Returns
    the actor handle, to give to :class:`ClusterLimits`."""
    ray = _ray()
    LimitBook(concurrency, rpm=rpm, tpm=tpm)   # the same checks, here rather than in the actor
    opts: dict[str, Any] = {"name": name, "get_if_exists": True, "num_cpus": 0,
                            "max_concurrency": ACTOR_MAX_CONCURRENCY, "max_restarts": 0}
    if detached:
        opts["lifetime"] = "detached"
    if namespace is not None:
        opts["namespace"] = namespace
    handle = ray.remote(LimitActor).options(**opts).remote(int(concurrency), rpm, tpm, float(lease_ttl))
    have = ray.get(handle.settings.remote())
    want = {"concurrency": int(concurrency), "rpm": rpm, "tpm": tpm}
    if have != want:
        log.warning("cluster limiter %r already runs with %s (asked for %s); its limits are kept", name, have, want)
    return handle


class _Blocks:
    """One process's asks and returns to the actor, gathered into blocks (one event loop).

    Every ask made while a block is on its way goes with the next one: at most one
    ``acquire_block`` call is out at a time, so under load a call carries as many leases as the
    process asked for meanwhile, and alone it costs what one ``acquire`` does. Returns made in
    one turn of the loop go in one ``release_block`` call, not awaited."""

    def __init__(self, limits: ClusterLimits, loop: asyncio.AbstractEventLoop):
        self.limits, self.loop = limits, loop
        self.asks: list[tuple[str, int, float | None]] = []    # not sent yet
        self.queued: set[str] = set()                         # sent, not granted yet
        self.futures: dict[str, asyncio.Future[float]] = {}
        self.returns: list[tuple[str, str, int | None, float | None]] = []
        self.pump: asyncio.Task[None] | None = None
        self.calls = 0

    async def acquire(self, tokens: int, hold: float | None) -> tuple[str, float]:
        lease = uuid.uuid4().hex
        fut: asyncio.Future[float] = self.loop.create_future()
        self.futures[lease] = fut
        self.asks.append((lease, tokens, hold))
        if self.pump is None or self.pump.done():
            self.pump = self.loop.create_task(self._pump())
        try:
            return lease, await fut
        except asyncio.CancelledError:
            self.futures.pop(lease, None)
            unsent = [a for a in self.asks if a[0] != lease]
            if len(unsent) < len(self.asks):
                self.asks = unsent      # never left this process: nothing to give back
            else:
                self.release(lease, "unsent")   # queued at the actor (it drops it) or granted
            raise

    async def _pump(self) -> None:
        actor = self.limits.actor
        while self.asks or self.queued:
            asks, self.asks = self.asks, []
            queued = list(self.queued)
            self.queued.update(a[0] for a in asks)
            self.calls += 1
            try:
                granted = await actor.acquire_block.remote(asks, queued)
            except Exception as exc:   # the actor is gone: every ask fails, none goes out uncounted
                err = ModelCallError(f"the cluster limiter is unreachable: {type(exc).__name__}: {exc}",
                                     kind="connection", retryable=False)
                for lease in list(self.queued) + [a[0] for a in self.asks]:
                    fut = self.futures.pop(lease, None)
                    if fut is not None and not fut.done():
                        fut.set_exception(err)
                self.queued.clear()
                self.asks.clear()
                return
            for lease, wait in granted.items():
                self.queued.discard(lease)
                fut = self.futures.pop(lease, None)
                if fut is not None and not fut.done():   # else given up: its return is on its way
                    fut.set_result(float(wait))

    def release(self, lease: str, outcome: str, tokens: int | None = None, pause: float | None = None) -> None:
        self.returns.append((lease, outcome, tokens, pause))
        if len(self.returns) == 1:
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        returns, self.returns = self.returns, []
        if returns:
            self.calls += 1
            self.limits.actor.release_block.remote(returns)   # not awaited: no round trip


class ClusterLimits:
    """The client of a cluster limiter: a :class:`~assay.models.limiter.SharedLimits` to give to
    each worker's :class:`~assay.models.limiter.Limiter` (``Limiter(..., shared=ClusterLimits(h))``
    or ``limiter.share(ClusterLimits(h))``).

    ``actor``: the handle :func:`start_cluster_limiter` returned, the actor's name (looked up
    on first use, in ``namespace``), or a :class:`LimitBook` (in-process: tests, threads of one
    loop). Picklable: it travels to Ray workers with the handle or the name.

    ``blocks`` (default): the leases a process asks for while its last ask is on its way to
    the actor go together in one call, and its returns in one call per turn of its event loop
    (:class:`_Blocks`): the actor still grants every lease itself, so the global concurrency,
    the rates and a 429's pause hold exactly as one lease per call, at a fraction of the round
    trips (``benchmarks/bench_cluster_limiter.py``). ``blocks=False``: one call per lease; the
    default where ``$ASSAY_LIMITER_BLOCKS`` is ``0`` when the client is made."""

    def __init__(self, actor: Any, *, namespace: str | None = None, blocks: bool | None = None):
        self._actor = actor
        self.namespace = namespace
        self.blocks = os.environ.get(BLOCKS_ENV, "1") != "0" if blocks is None else bool(blocks)
        self._blocks: _Blocks | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_actor": self._actor, "namespace": self.namespace, "blocks": self.blocks}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"blocks": True, **state})
        self._blocks = None

    def _block_client(self) -> _Blocks | None:
        """This event loop's block client (None: one call per lease, or in-process)."""
        if not self.blocks or isinstance(self._actor, LimitBook):
            return None
        loop = asyncio.get_running_loop()
        if self._blocks is None or self._blocks.loop is not loop:
            self._blocks = _Blocks(self, loop)
        return self._blocks

    def __repr__(self) -> str:
        return f"ClusterLimits({self._actor!r})"

    @property
    def actor(self) -> Any:
        if isinstance(self._actor, str):
            ray = _ray()
            try:
                self._actor = ray.get_actor(self._actor, namespace=self.namespace)
            except ValueError:
                raise AssayError(f"no cluster limiter named {self._actor!r} is running "
                                 f"(start it with start_cluster_limiter)") from None
        return self._actor

    async def _ask(self, method: str, *args: Any) -> Any:
        actor = self.actor
        if isinstance(actor, LimitBook):
            out = getattr(actor, method)(*args)
            return await out if asyncio.iscoroutine(out) else out
        try:
            return await getattr(actor, method).remote(*args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:   # the actor is gone: no request may go out uncounted
            raise ModelCallError(f"the cluster limiter is unreachable: {type(exc).__name__}: {exc}",
                                 kind="connection", retryable=False) from None

    async def acquire(self, tokens: int, hold: float | None) -> tuple[str, float]:
        blocks = self._block_client()
        if blocks is not None:
            _ = self.actor   # resolved by name here, so that a missing actor fails as one call does
            return await blocks.acquire(int(tokens or 0), hold)
        lease = uuid.uuid4().hex
        if isinstance(self._actor, LimitBook):   # in-process: a cancelled acquire cleans up itself
            return lease, float(await self._actor.acquire(lease, int(tokens or 0), hold))
        try:
            wait = await self._ask("acquire", lease, int(tokens or 0), hold)
        except asyncio.CancelledError:
            self.release(lease, "unsent")   # given up while waiting: the actor drops it
            raise
        return lease, float(wait)

    async def recheck(self, lease: str) -> float:
        return float(await self._ask("recheck", lease))

    def release(self, lease: str, outcome: str, *, tokens: int | None = None, pause: float | None = None) -> None:
        actor = self.actor
        if isinstance(actor, LimitBook):
            actor.release(lease, outcome, tokens, pause)
            return
        blocks = self._blocks
        if self.blocks and blocks is not None:
            try:
                same_loop = asyncio.get_running_loop() is blocks.loop
            except RuntimeError:
                same_loop = False
            if same_loop:
                blocks.release(lease, outcome, tokens, pause)
                return
        actor.release.remote(lease, outcome, tokens, pause)   # not awaited: no round trip

    async def snapshot(self) -> dict[str, Any]:
        """The actor's counts and state (see :meth:`LimitBook.snapshot`)."""
        return await self._ask("snapshot")
