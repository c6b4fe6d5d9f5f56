"""Hung and unreachable judges: fewer tries for timeouts than for 429/5xx, the ``timeout`` and
``max_attempts`` a model is resolved with, and the limiter's circuit breaker."""

from __future__ import annotations

import asyncio

import pytest

from assay.errors import AssayError
from assay.models import CircuitOpen, LimitedModel, Limiter, ModelCallError, OpenAICompat, RetryPolicy, resolve

MSG = [{"role": "user", "content": "Rate this answer in JSON."}]
FAST = RetryPolicy(base_delay=0.01, max_delay=0.05)
HANG = {"delay": 30.0, "content": "late"}
OK = {"content": '{"score": 4}'}


def limited(url, *, timeout=0.3, attempts=5, breaker=None, concurrency=4):
    model = OpenAICompat.endpoint(url, "m")
    return LimitedModel(model, Limiter(concurrency, timeout=timeout, retry=FAST, max_attempts=attempts,
                                       max_consecutive_failures=breaker))


def msg(i):
    return [{"role": "user", "content": f"row {i}"}]


async def test_timeouts_get_two_tries_and_server_errors_every_try(fake):
    lm = limited(fake.base_url, attempts=5)
    fake.default = HANG
    with pytest.raises(ModelCallError) as ei:
        await lm.generate(msg(0))
    assert ei.value.kind == "timeout" and ei.value.attempts == 2 and len(fake.chat_requests) == 2

    fake.requests.clear()
    fake.default = {"status": 503, "json": {"error": {"message": "overloaded"}}}
    with pytest.raises(ModelCallError) as ei:
        await lm.generate(msg(1))
    assert ei.value.kind == "server" and ei.value.attempts == 5 and len(fake.chat_requests) == 5
    await lm.aclose()


async def test_timeout_tries_never_exceed_max_attempts(fake):
    fake.default = HANG
    lm = limited(fake.base_url, attempts=1)
    with pytest.raises(ModelCallError) as ei:
        await lm.generate(msg(0))
    assert ei.value.attempts == 1 and len(fake.chat_requests) == 1
    await lm.aclose()


async def test_a_timeout_then_a_server_error_still_gets_the_other_tries(fake):
    fake.push(HANG, {"status": 500, "json": {}}, {"status": 500, "json": {}})
    lm = limited(fake.base_url, attempts=5)
    assert (await lm.generate(msg(0))).text == '{"score": 4, "reason": "fine"}'   # the fake's default answer
    assert len(fake.chat_requests) == 4      # one timeout, two 500s, then the answer
    await lm.aclose()


async def test_breaker_opens_after_n_refused_requests_and_then_calls_fail_at_once(free_port):
    lm = limited(f"http://127.0.0.1:{free_port}/v1", attempts=2, breaker=3)
    with pytest.raises(ModelCallError) as ei:      # two refused requests: the call gives up
        await lm.generate(msg(0))
    assert ei.value.kind == "connection" and lm.limiter.consecutive_failures == 2
    with pytest.raises(CircuitOpen) as co:         # the third request opens the circuit
        await lm.generate(msg(1))
    assert co.value.failures == 3 and co.value.last.kind == "connection"
    assert "3 requests in a row timed out or could not connect" in str(co.value)
    assert lm.limiter.stats.requests == 3
    with pytest.raises(CircuitOpen):               # open: no request is made
        await lm.generate(msg(2))
    assert lm.limiter.stats.requests == 3 and lm.limiter.in_flight == 0
    lm.limiter.arm_breaker(3)                      # arming again closes it
    with pytest.raises(ModelCallError):
        await lm.generate(msg(3))
    assert lm.limiter.stats.requests == 5
    await lm.aclose()


async def test_breaker_is_not_a_model_error_so_metrics_cannot_swallow_it():
    """It must pass the ``except Exception`` of metrics and judges to stop the run."""
    assert not issubclass(CircuitOpen, Exception) and issubclass(CircuitOpen, BaseException)


async def test_hung_server_opens_the_breaker_on_the_first_wave(fake):
    """Calls in flight together: the fifth timeout opens the circuit, every call ends."""
    fake.default = HANG
    lm = limited(fake.base_url, breaker=5, concurrency=8)
    got = await asyncio.gather(*(lm.generate(msg(i)) for i in range(20)), return_exceptions=True)
    assert all(isinstance(g, CircuitOpen) for g in got)
    # the first wave of 8, and at most one more request per slot freed by the first four timeouts
    assert 8 <= len(fake.chat_requests) <= 12
    assert lm.limiter.in_flight == 0
    await lm.aclose()


async def test_any_answer_in_between_resets_the_count(fake):
    lm = limited(fake.base_url, attempts=1, breaker=3)
    fake.push(HANG, HANG, OK, HANG, HANG, {"status": 500, "json": {}}, HANG, HANG,
              {"status": 429, "json": {}}, HANG, HANG)
    for i in range(11):
        try:
            await lm.generate(msg(i))
        except ModelCallError:
            pass
    assert lm.limiter.tripped is None and lm.limiter.consecutive_failures == 2
    fake.default = HANG
    with pytest.raises(CircuitOpen):
        await lm.generate(msg(11))
    await lm.aclose()


async def test_breaker_is_off_unless_armed(free_port):
    lm = limited(f"http://127.0.0.1:{free_port}/v1", attempts=1)
    for i in range(12):
        with pytest.raises(ModelCallError):
            await lm.generate(msg(i))
    assert lm.limiter.consecutive_failures == 12 and lm.limiter.tripped is None
    with pytest.raises(AssayError, match="max_consecutive_failures"):
        lm.limiter.arm_breaker(-1)
    await lm.aclose()


def test_resolve_sets_the_timeout_of_the_limiter_and_of_the_http_backend(fake):
    judge = resolve(f"{fake.base_url}#m", role="judge", timeout=300.0, max_attempts=3, cache=None)
    assert judge.limiter.timeout == 300.0 and judge.model.timeout == 300.0   # not cut at the backend's 120 s
    assert judge.limiter.retry.max_attempts == 3 and judge.limiter.retry.timeout_attempts == 2
    default = resolve(f"{fake.base_url}#m", role="judge", cache=None)
    assert default.limiter.retry.max_attempts == 6 and default.limiter.max_consecutive_failures is None
    one = resolve(f"{fake.base_url}#m", role="judge", timeout_attempts=1, cache=None)
    assert one.limiter.retry.timeout_attempts == 1
