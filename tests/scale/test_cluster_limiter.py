"""The cluster-wide limiter: one concurrency, rate and 429 pause for every worker of a run.

The bookkeeping (:class:`LimitBook`) and the :class:`Limiter` hook are tested in-process with a
clock of our own; then Ray actors, each with its own limiter sharing one cluster limiter, call
the scripted fake endpoint, and the endpoint's own counters and timestamps show the limits held.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from assay.errors import AssayError
from assay.models import LimitedModel, Limiter, ModelCallError, RetryPolicy
from assay.scale.limiter import HOLD_MARGIN, ClusterLimits, LimitActor, LimitBook, start_cluster_limiter

try:
    import ray
except ImportError:  # pragma: no cover - ray is in the dev extra
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="Ray is not installed (pip install 'assay[ray]')")


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def book(concurrency: int = 2, **kw: Any) -> tuple[LimitBook, Clock]:
    clock = Clock()
    return LimitBook(concurrency, clock=clock, sweep_every=None, **kw), clock


# -- the bookkeeping, without Ray ------------------------------------------------------------------

async def test_concurrency_is_held_and_a_returned_lease_wakes_the_next_in_line():
    b, _ = book(2)
    assert await b.acquire("a") == 0.0 and await b.acquire("b") == 0.0
    third = asyncio.ensure_future(b.acquire("c"))
    fourth = asyncio.ensure_future(b.acquire("d"))
    await asyncio.sleep(0)
    assert not third.done() and b.snapshot()["waiting"] == 2
    b.release("a", "ok")
    assert await third == 0.0
    assert not fourth.done()
    b.release("b", "failed")
    await fourth
    assert b.in_flight == 2 and b.peak_in_flight == 2
    assert {k: b.counts[k] for k in ("granted", "waited", "ok", "failed")} == \
        {"granted": 4, "waited": 2, "ok": 1, "failed": 1}


async def test_the_request_bucket_lends_and_spaces_callers_in_order():
    b, clock = book(10, rpm=60)          # one a second, a burst of one
    waits = [await b.acquire(f"l{i}") for i in range(4)]
    assert waits == pytest.approx([0.0, 1.0, 2.0, 3.0])
    clock.t += 10                        # the debt paid and a second's worth back
    assert await b.acquire("later") == 0.0


async def test_tokens_are_settled_against_the_estimate_when_the_lease_comes_back():
    b, _ = book(10, tpm=600)             # 10 tokens a second, burst 10
    assert await b.acquire("a", 10) == 0.0
    assert await b.acquire("b", 5) == pytest.approx(0.5)     # overdrawn by 5
    b.release("a", "ok", tokens=4)       # used 4 of the 10 taken: 6 back
    b.release("b", "ok", tokens=5)
    assert await b.acquire("c", 1) == 0.0
    b2, _ = book(10, tpm=600)
    await b2.acquire("a", 2)
    b2.release("a", "ok", tokens=12)     # used more than estimated: the debt is paid by the next
    assert await b2.acquire("b", 5) == pytest.approx(0.7)   # 10 - 2 - 10 (the debt) - 5 = -7


async def test_an_unsent_lease_gives_its_request_back():
    b, _ = book(10, rpm=60)
    await b.acquire("a")
    b.release("a", "unsent")
    assert await b.acquire("b") == 0.0
    assert b.counts["unsent"] == 1


async def test_a_429_pauses_every_holder_and_halves_the_rate():
    b, clock = book(8, rpm=600)
    await b.acquire("sent")
    await b.acquire("granted-before")
    b.release("sent", "failed", pause=2.0)
    assert b.limit == 1                  # half of the two that were out
    assert b.recheck("granted-before") == pytest.approx(2.0)   # granted before: held back on recheck
    b.release("granted-before", "ok")
    assert await asyncio.wait_for(b.acquire("after"), 5) == pytest.approx(2.0)
    clock.t += 0.5
    assert b.recheck("after") == pytest.approx(1.5)
    snap = b.snapshot()
    assert snap["rate_limited"] == 1 and snap["factor"] == 0.5 and snap["window"] == 2   # +1 per success
    assert b.rate.requests is not None and b.rate.requests.rate == pytest.approx(5.0)
    clock.t += 2.0
    assert b.recheck("after") == 0.0


async def test_the_rate_and_window_recover_after_the_429s_stop():
    b, clock = book(4, rpm=600, recover_every=5.0)
    await b.acquire("a")
    await b.acquire("b")
    b.release("a", "failed", pause=0.0)
    assert b.limit == 1 and b.factor == 0.5
    b.release("b", "ok")
    for i in range(40):
        clock.t += 1.0
        await b.acquire(f"x{i}")
        b.release(f"x{i}", "ok")
    assert b.limit == 4 and b.factor > 0.5


async def test_a_lease_given_back_before_its_request_arrives_is_never_held():
    b, _ = book(1)
    b.release("early", "unsent")         # the cancel overtook the acquire
    assert await b.acquire("early") == 0.0
    assert b.in_flight == 0 and b.counts["granted"] == 0


async def test_a_lease_given_back_while_it_waits_leaves_the_queue():
    b, _ = book(1)
    await b.acquire("a")
    waiting = asyncio.ensure_future(b.acquire("w"))
    await asyncio.sleep(0)
    b.release("w", "unsent")
    assert await waiting == 0.0
    b.release("a", "ok")
    assert b.in_flight == 0 and b.snapshot()["waiting"] == 0


async def test_a_lease_never_given_back_is_taken_back_after_its_hold():
    b, clock = book(1)
    await b.acquire("dead-worker", 0, 5.0)
    waiting = asyncio.ensure_future(b.acquire("w"))
    await asyncio.sleep(0)
    clock.t += 5.0 + HOLD_MARGIN - 0.1
    assert b.reclaim() == 0 and not waiting.done()
    clock.t += 0.2
    assert b.reclaim() == 1
    assert await waiting == 0.0
    b.release("dead-worker", "ok")       # a late return of a lease taken back changes nothing
    assert b.in_flight == 1 and b.counts["expired"] == 1


def test_bad_limits_say_which():
    with pytest.raises(AssayError, match="concurrency must be at least 1"):
        LimitBook(0)
    with pytest.raises(AssayError, match="rpm must be more than 0"):
        LimitBook(2, rpm=0)
    with pytest.raises(AssayError, match="shared limits need acquire"):
        Limiter(2, shared=object())


# -- the Limiter hook, in-process -----------------------------------------------------------------

class Backend:
    """Counts calls in flight; the first ``fail`` calls answer 429 with ``retry_after``."""

    def __init__(self, fail: int = 0, retry_after: float | None = None) -> None:
        self.now = self.peak = 0
        self.starts: list[float] = []
        self.fail, self.retry_after = fail, retry_after

    async def __call__(self) -> str:
        self.starts.append(time.monotonic())
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(0.002)
            if self.fail:
                self.fail -= 1
                raise ModelCallError("429", kind="rate_limit", status=429, retryable=True,
                                     retry_after=self.retry_after)
            return "ok"
        finally:
            self.now -= 1


FAST = RetryPolicy(base_delay=0.01, max_delay=0.05)


async def test_limiters_sharing_one_book_hold_its_concurrency_not_their_own():
    shared = ClusterLimits(LimitBook(2, sweep_every=None))
    limiters = [Limiter(8, shared=shared) for _ in range(3)]
    backend = Backend()
    await asyncio.gather(*(lim.call(backend) for lim in limiters for _ in range(20)))
    assert backend.peak == 2 and len(backend.starts) == 60
    assert (await shared.snapshot())["ok"] == 60 and shared.actor.in_flight == 0
    alone = Backend()
    await asyncio.gather(*(lim.share(None).call(alone) for lim in limiters for _ in range(20)))
    assert alone.peak > 2                # unshared: each limiter its own window again


async def test_a_429_reported_by_one_limiter_pauses_the_others():
    lb = LimitBook(4, sweep_every=None)
    a, b = Limiter(4, shared=ClusterLimits(lb), retry=FAST), Limiter(4, shared=ClusterLimits(lb), retry=FAST)
    told = Backend(fail=1, retry_after=0.3)
    assert await a.call(told) == "ok"
    pause_end = lb.pause_until
    other = Backend()
    await b.call(other)                  # b was never told: it waits the pause out all the same
    assert other.starts[0] >= pause_end
    assert lb.counts["rate_limited"] == 1 and a.stats.rate_limited == 1 and b.stats.rate_limited == 0


async def test_a_429_without_retry_after_pauses_everyone_for_the_limiters_backoff():
    lb = LimitBook(4, sweep_every=None)
    lim = Limiter(4, shared=ClusterLimits(lb), retry=RetryPolicy(base_delay=0.2, max_delay=0.2))
    await lim.call(Backend(fail=1))
    assert lb.counts["rate_limited"] == 1
    assert lb.rate.last_429 + 0.1 - 1e-3 <= lb.pause_until <= lb.rate.last_429 + 0.2 + 1e-3   # d/2 .. d


async def test_a_cancelled_call_gives_its_lease_back():
    lb = LimitBook(1, sweep_every=None)
    lim = Limiter(4, shared=ClusterLimits(lb))
    gate = asyncio.Event()

    async def slow() -> str:
        await gate.wait()
        return "ok"

    first = asyncio.ensure_future(lim.call(slow))
    queued = asyncio.ensure_future(lim.call(slow))
    await asyncio.sleep(0.01)
    assert lb.in_flight == 1 and lb.snapshot()["waiting"] == 1
    queued.cancel()
    first.cancel()
    await asyncio.gather(first, queued, return_exceptions=True)
    assert lb.in_flight == 0 and lb.snapshot()["waiting"] == 0 and lim.in_flight == 0


async def test_the_tokens_a_request_used_are_reported_back():
    lb, _ = book(4, tpm=60_000)          # a stopped clock: no refill between take and return
    lm = LimitedModel(FakeChat(), Limiter(4, shared=ClusterLimits(lb)))
    await lm.generate([{"role": "user", "content": "x" * 400}], max_tokens=50)
    assert lb.counts["ok"] == 1
    # 105 + 50 estimated and taken, 30 used: 125 came back
    assert lb.rate.tokens is not None and lb.rate.tokens.level == pytest.approx(lb.rate.tokens.capacity - 30)


class FakeChat:
    name = "fake-chat"

    async def generate(self, messages: Any, **kw: Any) -> Any:
        from assay.models import Generation
        from assay.models.base import TokenUsage
        return Generation(text="ok", usage=TokenUsage(input_tokens=20, output_tokens=10))


# -- block leases, against an in-process stand-in for the actor's handle ----------------------------

class _Method:
    def __init__(self, handle: LocalHandle, name: str) -> None:
        self.handle, self.name = handle, name

    def remote(self, *args: Any) -> asyncio.Future[Any]:
        """As a Ray call: scheduled on the loop, answered later, whether awaited or not."""
        self.handle.sent.append(self.name)
        if self.handle.gone:
            async def fail() -> Any:
                raise RuntimeError("actor died")
            return asyncio.ensure_future(fail())
        return asyncio.ensure_future(getattr(self.handle.body, self.name)(*args))


class LocalHandle:
    """Looks like a Ray actor handle of a :class:`LimitActor`; counts the calls sent to it."""

    def __init__(self, concurrency: int, rpm: float | None = None) -> None:
        self.body = LimitActor(concurrency, rpm, None, 600.0)
        self.body.book.sweep_every = None
        self.sent: list[str] = []
        self.gone = False

    def __getattr__(self, name: str) -> _Method:
        return _Method(self, name)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_the_asks_made_while_a_block_is_on_its_way_go_in_one_call():
    h = LocalHandle(100)
    limits = ClusterLimits(h)
    got = await asyncio.gather(*(limits.acquire(10, 30.0) for _ in range(32)))
    assert len({lease for lease, _ in got}) == 32 and all(wait == 0.0 for _, wait in got)
    assert h.sent == ["acquire_block"] and h.body.book.in_flight == 32
    for lease, _ in got:
        limits.release(lease, "ok", tokens=5)
    await _settle()
    assert h.sent == ["acquire_block", "release_block"]
    snap = h.body.book.snapshot()
    assert snap["in_flight"] == 0 and snap["ok"] == 32 and snap["granted"] == 32
    one_by_one = ClusterLimits(h, blocks=False)
    lease, _ = await one_by_one.acquire(0, 30.0)
    one_by_one.release(lease, "ok")
    await _settle()
    assert h.sent[2:] == ["acquire", "release"]


async def test_block_leases_hold_the_cluster_concurrency_across_processes():
    h = LocalHandle(3)
    limiters = [Limiter(8, shared=ClusterLimits(h)) for _ in range(3)]   # three "workers"
    backend = Backend()
    await asyncio.gather(*(lim.call(backend) for lim in limiters for _ in range(20)))
    await _settle()
    assert backend.peak == 3 and len(backend.starts) == 60
    snap = h.body.book.snapshot()
    assert snap["ok"] == 60 and snap["in_flight"] == 0 and snap["peak_in_flight"] == 3
    assert 0 < h.sent.count("acquire_block") < 60 and "acquire" not in h.sent   # several leases a call


async def test_block_leases_keep_the_request_rate():
    h = LocalHandle(100, rpm=600)        # 10 a second, a burst of 10
    limits = ClusterLimits(h)
    got = await asyncio.gather(*(limits.acquire(0, 30.0) for _ in range(15)))
    waits = sorted(w for _, w in got)
    assert waits[:10] == [0.0] * 10      # the burst
    assert waits[10:] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5], abs=0.02)   # the rest spaced
    assert h.sent == ["acquire_block"]


async def test_a_429_through_block_leases_pauses_the_other_processes():
    h = LocalHandle(4)
    a = Limiter(4, shared=ClusterLimits(h), retry=FAST)
    b = Limiter(4, shared=ClusterLimits(h), retry=FAST)
    assert await a.call(Backend(fail=1, retry_after=0.3)) == "ok"
    await _settle()
    pause_end = h.body.book.pause_until
    other = Backend()
    await b.call(other)
    assert other.starts[0] >= pause_end and h.body.book.counts["rate_limited"] == 1
    assert "acquire" not in h.sent and "release" not in h.sent   # blocks only


async def test_an_ask_given_up_while_queued_at_the_actor_is_dropped_there():
    h = LocalHandle(1)
    limits = ClusterLimits(h)
    held, _ = await limits.acquire(0, 30.0)
    queued = asyncio.ensure_future(limits.acquire(0, 30.0))
    await _settle()
    assert h.body.book.snapshot()["waiting"] == 1
    queued.cancel()
    await asyncio.gather(queued, return_exceptions=True)
    await _settle()
    assert h.body.book.snapshot()["waiting"] == 0 and h.body.book.in_flight == 1
    limits.release(held, "ok")
    await _settle()
    nxt, wait = await asyncio.wait_for(limits.acquire(0, 30.0), 2.0)   # the slot is free again
    assert wait == 0.0 and h.body.book.in_flight == 1 and not h.body._queued


async def test_an_ask_given_up_before_its_block_left_costs_the_actor_nothing():
    h = LocalHandle(1)
    limits = ClusterLimits(h)
    held, _ = await limits.acquire(0, 30.0)
    first = asyncio.ensure_future(limits.acquire(0, 30.0))   # its block waits at the actor
    await _settle()
    later = asyncio.ensure_future(limits.acquire(0, 30.0))   # kept here until that block answers
    await _settle()
    later.cancel()
    await asyncio.gather(later, return_exceptions=True)
    limits.release(held, "ok")
    lease, _ = await asyncio.wait_for(first, 2.0)
    limits.release(lease, "ok")
    await _settle()
    snap = h.body.book.snapshot()
    assert snap["granted"] == 2 and snap["unsent"] == 0 and snap["in_flight"] == 0
    assert not h.body.book._abandoned and h.sent.count("acquire_block") == 2


async def test_block_asks_fail_when_the_actor_is_gone():
    h = LocalHandle(2)
    h.gone = True
    lim = Limiter(2, shared=ClusterLimits(h))

    async def never() -> str:
        raise AssertionError("a request went out without a lease")

    with pytest.raises(ModelCallError, match="the cluster limiter is unreachable"):
        await lim.call(never)
    assert lim.in_flight == 0 and h.sent == ["acquire_block"]


# -- on Ray, against the fake endpoint ------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(ray_cluster) -> Any:
    """The folder's Ray cluster (tests/scale/conftest.py)."""
    return ray_cluster


def _workers(ray: Any, n: int, base_url: str, limits: ClusterLimits, concurrency: int = 8) -> list[Any]:
    @ray.remote(num_cpus=0.5)
    class Worker:
        """One Ray worker with its own limiter (concurrency 8) sharing the cluster's limits."""

        def __init__(self) -> None:
            from assay.models import LimitedModel, Limiter, OpenAICompat, RetryPolicy
            self.lm = LimitedModel(OpenAICompat.endpoint(base_url, "m", transport="lean"),
                                   Limiter(concurrency, timeout=30.0, retry=RetryPolicy(base_delay=0.05, max_delay=0.2)),
                                   None)
            self.lm.limiter.share(limits)

        async def run(self, tag: str, n: int) -> list[str]:
            out = await asyncio.gather(*(self.lm.generate([{"role": "user", "content": f"{tag} {i}"}])
                                         for i in range(n)), return_exceptions=True)
            return [type(x).__name__ if isinstance(x, BaseException) else "ok" for x in out]

    return [Worker.remote() for _ in range(n)]


def _run(ray: Any, workers: list[Any], n: int) -> None:
    done = ray.get([w.run.remote(f"worker{i}", n) for i, w in enumerate(workers)])
    assert all(r == ["ok"] * n for r in done), done


def _senders(fake: Any) -> set[str]:
    return {r["body"]["messages"][-1]["content"].split()[0] for r in fake.chat_requests}


async def _settled(limits: ClusterLimits) -> dict[str, Any]:
    """The actor's counts once every lease has come back (returns are not awaited by workers)."""
    for _ in range(200):
        snap = await limits.snapshot()
        if snap["in_flight"] == 0:
            return snap
        await asyncio.sleep(0.02)
    return snap


@needs_ray
@pytest.mark.serial
async def test_workers_never_have_more_in_flight_than_the_cluster_concurrency(cluster, fake):
    fake.default = {"content": '{"score": 4}', "delay": 0.02}
    limits = ClusterLimits(start_cluster_limiter("conc-2", concurrency=2))
    _run(cluster, _workers(cluster, 3, fake.base_url, limits), 30)
    assert len(fake.chat_requests) == 90 and _senders(fake) == {"worker0", "worker1", "worker2"}
    assert fake.peak_in_flight <= 2      # the endpoint's own count, 3 workers × 8 each allowed locally
    snap = await _settled(limits)
    assert (snap["granted"], snap["ok"], snap["peak_in_flight"]) == (90, 90, 2)


@needs_ray
@pytest.mark.serial
async def test_the_request_rate_holds_across_workers(cluster, fake):
    rpm = 1200                           # 20 a second, a burst of 20
    limits = ClusterLimits(start_cluster_limiter("rpm-1200", concurrency=16, rpm=rpm))
    _run(cluster, _workers(cluster, 3, fake.base_url, limits), 20)
    times = sorted(r["t"] for r in fake.chat_requests)
    assert len(times) == 60 and _senders(fake) == {"worker0", "worker1", "worker2"}
    rate, burst = rpm / 60, rpm / 60
    slack = rate * 0.25                  # a quarter second of scheduling jitter on a loaded machine
    worst = max((j - i + 1) - rate * (times[j] - times[i]) for i in range(60) for j in range(i, 60))
    assert worst <= burst + slack, f"{worst:.1f} requests over the rate in some window"
    # 40 requests beyond the burst at 20 a second: the endpoint saw them over at least ~2 s
    assert times[-1] - times[0] >= (60 - burst - slack) / rate


@needs_ray
@pytest.mark.serial
async def test_a_retry_after_stops_every_worker_for_its_length(cluster, fake):
    fake.push({"status": 429, "headers": {"Retry-After": "2"}, "json": {"error": {"message": "slow down"}}})
    limits = ClusterLimits(start_cluster_limiter("429-one", concurrency=1))
    _run(cluster, _workers(cluster, 3, fake.base_url, limits), 5)
    reqs = fake.chat_requests
    assert len(reqs) == 16 and _senders(fake) == {"worker0", "worker1", "worker2"}
    t429 = reqs[0]["t"]
    assert min(r["t"] for r in reqs[1:]) >= t429 + 2.0   # nobody, told or not, sent during the 2 s
    assert (await _settled(limits))["rate_limited"] == 1


@needs_ray
@pytest.mark.serial
async def test_a_retry_after_lets_through_only_leases_granted_before_it(cluster, fake):
    fake.default = {"content": '{"score": 4}', "delay": 0.01}
    fake.push(*[{"content": '{"score": 4}', "delay": 0.01}] * 6,
              {"status": 429, "headers": {"Retry-After": "2"}, "json": {"error": {"message": "slow down"}}})
    limits = ClusterLimits(start_cluster_limiter("429-three", concurrency=3))
    _run(cluster, _workers(cluster, 3, fake.base_url, limits), 8)
    reqs = fake.chat_requests
    assert len(reqs) == 25
    t429 = reqs[6]["t"]
    during = [r for r in reqs[7:] if r["t"] < t429 + 2.0]
    assert len(during) <= 2              # at most the other leases already out (concurrency - 1)
    assert len(reqs) - 7 - len(during) >= 16   # the rest, the retry included, after the pause


@needs_ray
@pytest.mark.serial
def test_the_limiter_is_found_by_name_and_keeps_its_first_limits(cluster, caplog):
    first = start_cluster_limiter("by-name", concurrency=3, rpm=600)
    again = start_cluster_limiter("by-name", concurrency=5)
    assert cluster.get(again.settings.remote()) == {"concurrency": 3, "rpm": 600, "tpm": None}
    assert first._actor_id == again._actor_id
    assert "already runs with" in caplog.text
    limits = ClusterLimits("by-name")

    async def one() -> tuple[str, float]:
        lease, wait = await limits.acquire(0, 10.0)
        limits.release(lease, "ok")
        return lease, wait

    assert asyncio.run(one())[1] == 0.0
    with pytest.raises(AssayError, match="no cluster limiter named 'nobody'"):
        _ = ClusterLimits("nobody").actor


@needs_ray
@pytest.mark.serial
async def test_a_limiter_whose_actor_is_gone_fails_the_call_and_says_why(cluster):
    handle = start_cluster_limiter("short-lived", concurrency=2)
    cluster.kill(handle)
    lim = Limiter(2, shared=ClusterLimits(handle))

    async def never() -> str:
        raise AssertionError("a request went out without a lease")

    with pytest.raises(ModelCallError, match="the cluster limiter is unreachable") as e:
        await lim.call(never)
    assert e.value.kind == "connection" and not e.value.retryable and lim.in_flight == 0
