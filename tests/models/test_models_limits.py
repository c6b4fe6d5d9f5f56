"""Retries, Retry-After, timeouts, connection errors, the concurrency cap and adaptive rates."""

from __future__ import annotations

import asyncio
import time

import pytest

from assay.models import Generation, LimitedModel, Limiter, ModelCallError, OpenAICompat, RetryPolicy
from assay.models.rate import TokenBucket

MSG = [{"role": "user", "content": "Rate this answer in JSON."}]
FAST = RetryPolicy(base_delay=0.01, max_delay=0.05)


def limited(fake, *, concurrency=4, timeout=10.0, attempts=4, **kw):
    model = OpenAICompat.endpoint(fake.base_url, "m")
    return LimitedModel(model, Limiter(concurrency, timeout=timeout, retry=FAST, max_attempts=attempts, **kw))


@pytest.mark.parametrize("header,value,delay", [("Retry-After", "1", 1.0), ("retry-after-ms", "600", 0.6)])
async def test_429_retry_after_is_honoured_then_succeeds(fake, header, value, delay):
    fake.push({"status": 429, "headers": {header: value}, "json": {"error": {"message": "rate limited"}}})
    lm = limited(fake)
    g = await lm.generate(MSG)
    assert g.text
    first, second = fake.chat_requests
    assert second["t"] - first["t"] >= 0.9 * delay
    st = lm.limiter.stats
    assert (st.rate_limited, st.retries, st.succeeded, st.failed) == (1, 1, 1, 0)
    await lm.aclose()


async def test_retry_after_pauses_every_caller(fake):
    """A 429 with Retry-After holds back calls that start while the pause lasts."""
    fake.push({"status": 429, "headers": {"Retry-After": "0.8"}, "json": {}})
    lm = limited(fake, concurrency=8)
    await lm.generate(MSG)             # 429, waits ~0.8 s, succeeds
    t0 = time.monotonic()
    fake.push({"status": 429, "headers": {"Retry-After": "0.8"}, "json": {}})
    a = asyncio.create_task(lm.generate(MSG + [{"role": "user", "content": "a"}]))
    await asyncio.sleep(0.2)           # the 429 has arrived: the pause is on
    await lm.generate(MSG + [{"role": "user", "content": "b"}])
    await a
    starts = [r["t"] for r in fake.chat_requests[2:]]
    assert len(starts) == 3
    assert max(starts) - min(starts) >= 0.9 * 0.8 - 0.2 - 0.05   # "b" started after the pause
    assert time.monotonic() - t0 >= 0.7
    await lm.aclose()


async def test_500_then_success(fake):
    fake.push({"status": 500, "json": {"error": {"message": "boom"}}},
              {"status": 502, "raw": "bad gateway"})
    lm = limited(fake)
    g = await lm.generate(MSG)
    assert g.text and len(fake.chat_requests) == 3
    assert lm.limiter.stats.retries == 2
    await lm.aclose()


async def test_timeout_is_retried_once_then_an_error(fake):
    fake.default = {"delay": 3.0, "content": "late"}
    lm = limited(fake, timeout=0.3, attempts=3)
    with pytest.raises(ModelCallError) as ei:
        await lm.generate(MSG)
    # timeouts get two tries (RetryPolicy.timeout_attempts), fewer than the three allowed
    assert ei.value.kind == "timeout" and ei.value.attempts == 2
    assert len(fake.chat_requests) == 2
    assert lm.limiter.stats.timeouts == 2 and lm.limiter.in_flight == 0
    await lm.aclose()


async def test_timeout_then_success(fake):
    fake.push({"delay": 3.0, "content": "late"})
    lm = limited(fake, timeout=0.3)
    assert (await lm.generate(MSG)).text
    assert len(fake.chat_requests) == 2
    await lm.aclose()


async def test_connection_refused_is_retried_then_an_error(free_port):
    model = OpenAICompat.endpoint(f"http://127.0.0.1:{free_port}/v1", "m")
    lm = LimitedModel(model, Limiter(2, retry=FAST, max_attempts=3))
    with pytest.raises(ModelCallError) as ei:
        await lm.generate(MSG)
    assert ei.value.kind == "connection" and ei.value.attempts == 3
    assert lm.limiter.stats.requests == 3
    await lm.aclose()


async def test_dropped_connection_is_retried(fake):
    fake.push({"close": True})
    lm = limited(fake)
    assert (await lm.generate(MSG)).text
    assert len(fake.chat_requests) == 2
    await lm.aclose()


async def test_client_errors_are_not_retried(fake):
    fake.push({"status": 401, "json": {"error": {"message": "bad key"}}})
    lm = limited(fake)
    with pytest.raises(ModelCallError) as ei:
        await lm.generate(MSG)
    assert ei.value.kind == "auth" and ei.value.attempts == 1 and len(fake.chat_requests) == 1
    await lm.aclose()


async def test_a_retry_after_beyond_the_cap_fails_fast(fake):
    fake.push({"status": 429, "headers": {"Retry-After": "3600"}, "json": {}})
    model = OpenAICompat.endpoint(fake.base_url, "m")
    lm = LimitedModel(model, Limiter(2, retry=RetryPolicy(max_retry_after=5)))
    with pytest.raises(ModelCallError, match="3600"):
        await lm.generate(MSG)
    assert len(fake.chat_requests) == 1
    await lm.aclose()


async def test_never_more_than_n_requests_in_flight(fake):
    fake.default = {"delay": 0.05, "content": "4"}
    lm = limited(fake, concurrency=5)
    msgs = [[{"role": "user", "content": f"row {i}"}] for i in range(60)]
    out = await asyncio.gather(*(lm.generate(m) for m in msgs))
    assert len(out) == 60 and len(fake.chat_requests) == 60
    assert fake.peak_in_flight == 5          # reached, never exceeded
    assert lm.limiter.peak_in_flight == 5 and lm.limiter.in_flight == 0
    await lm.aclose()


async def test_one_limiter_caps_several_models_together(fake):
    fake.default = {"delay": 0.05, "content": "4"}
    limiter = Limiter(3, retry=FAST)
    a = LimitedModel(OpenAICompat.endpoint(fake.base_url, "a"), limiter)
    b = LimitedModel(OpenAICompat.endpoint(fake.base_url, "b"), limiter)
    await asyncio.gather(*(m.generate([{"role": "user", "content": str(i)}]) for i in range(20) for m in (a, b)))
    assert fake.peak_in_flight == 3
    await a.aclose(), await b.aclose()


async def test_429_burst_lowers_the_window_and_rate_then_recovers(fake):
    limiter = Limiter(16, rpm=6000, retry=FAST, recover_every=60.0)
    lm = LimitedModel(OpenAICompat.endpoint(fake.base_url, "m"), limiter)
    fake.push(*[{"status": 429, "json": {}} for _ in range(4)])
    fake.default = {"delay": 0.02, "content": "4"}
    await asyncio.gather(*(lm.generate([{"role": "user", "content": str(i)}]) for i in range(8)))
    assert limiter.stats.rate_limited == 4
    assert limiter.rate_factor == 0.5        # a burst of 429s is one cut, not four
    assert limiter.window < 16
    limiter.recover_every = 0.0          # recover at once from here on (normally 5 s a step)
    for i in range(200):
        await lm.generate([{"role": "user", "content": f"more {i}"}])
    assert limiter.window == 16 and limiter.rate_factor == 1.0
    await lm.aclose()


def test_token_bucket_waits_out_a_deficit():
    b = TokenBucket(60)                      # one a second, burst of one
    assert b.take(1) == 0.0
    w = b.take(1)
    assert 0.9 <= w <= 1.0
    b2 = TokenBucket(6000)                   # tokens per minute
    assert b2.take(50) == 0.0            # within the one-second burst
    assert b2.take(200) > 0              # overdrawn: wait
    b2.scale(0.5)
    assert b2.rate == pytest.approx(50.0)


async def test_rpm_limit_spaces_requests(fake):
    lm = limited(fake, concurrency=16, rpm=600)      # 10 a second, burst of 10
    await asyncio.gather(*(lm.generate([{"role": "user", "content": str(i)}]) for i in range(15)))
    ts = sorted(r["t"] for r in fake.chat_requests)
    assert ts[-1] - ts[0] >= 0.4                      # 5 beyond the burst at 10/s
    await lm.aclose()


async def test_cancelled_calls_free_their_slot(fake):
    fake.default = {"delay": 5.0, "content": "late"}
    lm = limited(fake, concurrency=2)
    tasks = [asyncio.create_task(lm.generate([{"role": "user", "content": str(i)}])) for i in range(4)]
    await asyncio.sleep(0.2)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert lm.limiter.in_flight == 0
    fake.default = {"content": "4"}
    assert (await lm.generate(MSG)).text == "4"
    await lm.aclose()


class _Flaky:
    """A non-HTTP ChatModel: LimitedModel applies the same policy to any backend."""

    name = "flaky"

    def __init__(self, failures):
        self.failures = list(failures)
        self.calls = 0

    async def generate(self, messages, **kw):
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return Generation(text="ok")


async def test_limited_model_wraps_any_chat_model():
    m = _Flaky([ConnectionResetError("reset"), TimeoutError(), ModelCallError("x", kind="server", retryable=True)])
    lm = LimitedModel(m, Limiter(2, retry=FAST))
    assert (await lm.generate(MSG)).text == "ok" and m.calls == 4
    bug = _Flaky([ValueError("a bug, not a model failure")])
    with pytest.raises(ValueError):
        await LimitedModel(bug, Limiter(2, retry=FAST)).generate(MSG)
    assert bug.calls == 1
