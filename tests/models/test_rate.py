"""The adaptive rate (:mod:`assay.models.rate`) under a clock of our own: buckets refill at their
rate, a 429 halves it and pauses, successes step it back up to the ceiling, tokens are settled.
Nothing sleeps: the clock is moved by hand."""

from __future__ import annotations

import pytest

from assay.models.rate import AdaptiveRate, TokenBucket


class Clock:
    def __init__(self, t: float = 500.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


# -- the bucket -----------------------------------------------------------------------------------

def test_a_bucket_starts_with_one_seconds_worth_and_refills_at_its_rate(clock):
    b = TokenBucket(600, clock)                  # 10 a second, a burst of 10
    assert (b.rate, b.capacity, b.level) == (10.0, 10.0, 10.0)
    assert [b.take(1) for _ in range(10)] == [0.0] * 10
    assert b.take(1) == pytest.approx(0.1)       # one short: a tenth of a second to wait
    clock.advance(0.1)
    assert b.take(1) == pytest.approx(0.1)       # the debt was paid, the next one is short again
    clock.advance(60.0)
    assert b.take(0) == 0.0 and b.level == 10.0  # refilled, never past its capacity


def test_a_slow_bucket_still_lends_one(clock):
    b = TokenBucket(30, clock)                   # one every two seconds, a burst of one
    assert b.capacity == 1.0 and b.take(1) == 0.0
    assert b.take(1) == pytest.approx(2.0)
    assert b.take(1) == pytest.approx(4.0)       # callers are spaced in the order they asked
    clock.advance(4.0)
    assert b.take(0) == 0.0 and b.level == pytest.approx(0.0)


def test_scaling_a_bucket_refills_first_then_changes_its_rate(clock):
    b = TokenBucket(6000, clock)                 # 100 a second
    b.take(100)
    clock.advance(0.5)                           # 50 back at the old rate
    b.scale(0.5)
    assert (b.rate, b.capacity, b.level) == (50.0, 50.0, 50.0)
    b.scale(0.0)
    assert b.rate == 1e-6 and b.capacity == 1.0  # never stopped outright


def test_giving_back_refills_first_and_a_negative_amount_is_a_debt(clock):
    b = TokenBucket(600, clock)
    b.take(10)
    b.give(4)
    assert b.level == 4.0
    b.give(100)
    assert b.level == 10.0                       # capped
    b.give(-15)
    assert b.take(0) == pytest.approx(0.5)       # 5 owed at 10 a second


# -- the adaptive rate ----------------------------------------------------------------------------

def test_no_buckets_means_no_wait(clock):
    r = AdaptiveRate(8, clock=clock)
    assert r.requests is None and r.tokens is None
    assert [r.take(1000) for _ in range(100)] == [0.0] * 100
    assert (r.limit, r.factor, r.paused_for()) == (8, 1.0, 0.0)


def test_requests_and_tokens_each_bound_the_wait(clock):
    r = AdaptiveRate(8, rpm=60, tpm=600, clock=clock)   # 1 request and 10 tokens a second
    assert r.take(5) == 0.0
    assert r.take(0) == pytest.approx(1.0)      # the request bucket is the short one
    clock.advance(2.0)
    assert r.take(30) == pytest.approx(2.0)     # refilled to its cap of 10: 20 short at 10 a second


def test_a_429_halves_the_rate_and_the_window_and_pauses(clock):
    r = AdaptiveRate(16, rpm=600, tpm=60_000, clock=clock)
    assert r.rate_limited(2.0, in_flight=6) is True
    assert (r.factor, r.window, r.limit) == (0.5, 3.0, 3)            # half of the 6 out
    assert r.requests is not None and r.requests.rate == pytest.approx(5.0)
    assert r.tokens is not None and r.tokens.rate == pytest.approx(500.0)
    assert r.paused_for() == pytest.approx(2.0) and r.last_429 == clock.t
    clock.advance(1.5)
    assert r.paused_for() == pytest.approx(0.5)
    clock.advance(0.5)
    assert r.paused_for() == 0.0


def test_429s_within_a_second_of_a_cut_cut_nothing_more_but_still_pause(clock):
    r = AdaptiveRate(16, rpm=600, clock=clock)
    assert r.rate_limited(None, in_flight=16) is True
    assert r.paused_for() == 0.0                                     # no Retry-After: no pause
    clock.advance(0.5)
    assert r.rate_limited(3.0, in_flight=8) is False                 # an answer to a request sent before
    assert (r.factor, r.limit) == (0.5, 8) and r.paused_for() == pytest.approx(3.0)
    clock.advance(0.6)
    assert r.rate_limited(None, in_flight=8) is True
    assert (r.factor, r.limit) == (0.25, 4)


def test_a_longer_pause_is_never_shortened(clock):
    r = AdaptiveRate(4, clock=clock)
    r.rate_limited(10.0, in_flight=1)
    r.rate_limited(1.0, in_flight=1)
    assert r.paused_for() == pytest.approx(10.0)
    r.rate_limited(-5.0, in_flight=1)                                # a negative pause is none
    assert r.paused_for() == pytest.approx(10.0)


def test_the_rate_is_never_cut_below_its_floor(clock):
    r = AdaptiveRate(4, rpm=600, min_factor=0.1, clock=clock)
    for _ in range(10):
        r.rate_limited(None, in_flight=4)
        clock.advance(1.0)
    assert r.factor == 0.1 and r.limit == 1 and r.window == 1.0
    assert r.requests is not None and r.requests.rate == pytest.approx(1.0)


def test_not_adaptive_pauses_but_keeps_the_rate(clock):
    r = AdaptiveRate(8, rpm=600, adaptive=False, clock=clock)
    assert r.rate_limited(1.0, in_flight=8) is False
    assert (r.factor, r.limit) == (1.0, 8) and r.paused_for() == pytest.approx(1.0)


def test_recovery_steps_the_window_and_the_rate_back_to_the_ceiling(clock):
    r = AdaptiveRate(4, rpm=600, recover_every=5.0, clock=clock)
    r.rate_limited(None, in_flight=4)
    assert (r.limit, r.factor) == (2, 0.5)
    r.succeeded()
    assert r.window == pytest.approx(2.5) and r.limit == 2           # about one per window of successes
    r.succeeded()
    assert r.limit == 2 and r.factor == 0.5                          # 2.9: and the rate waits for its 5 s
    r.succeeded()
    assert r.limit == 3
    clock.advance(4.0)
    r.succeeded()
    assert r.factor == 0.5
    clock.advance(1.0)
    r.succeeded()
    assert r.factor == pytest.approx(0.6) and r.last_recover == clock.t
    assert r.requests is not None and r.requests.rate == pytest.approx(6.0)
    r.succeeded()
    assert r.factor == pytest.approx(0.6)                            # one step per recover_every
    for _ in range(10):
        clock.advance(5.0)
        r.succeeded()
    assert (r.factor, r.limit, r.window) == (1.0, 4, 4.0)            # back to the ceiling, not past it
    assert r.requests is not None and r.requests.rate == pytest.approx(10.0)


def test_a_new_429_restarts_the_wait_before_the_rate_recovers(clock):
    r = AdaptiveRate(4, rpm=600, recover_every=5.0, clock=clock)
    r.rate_limited(None, in_flight=4)
    clock.advance(4.0)
    r.rate_limited(None, in_flight=2)                                # 0.25
    clock.advance(4.0)
    r.succeeded()
    assert r.factor == 0.25                                          # 8 s after the first, 4 after the last
    clock.advance(1.0)
    r.succeeded()
    assert r.factor == pytest.approx(0.35)


def test_a_request_never_sent_gives_its_request_and_tokens_back(clock):
    r = AdaptiveRate(4, rpm=60, tpm=600, clock=clock)
    assert r.take(10) == 0.0
    r.give_back(10)
    assert r.take(10) == 0.0                     # both buckets whole again
    assert r.take(0) == pytest.approx(1.0)


def test_tokens_are_settled_against_the_estimate(clock):
    r = AdaptiveRate(4, tpm=600, clock=clock)    # 10 tokens a second, burst 10
    assert r.take(10) == 0.0
    r.settle(10, 4)                              # used 4 of 10: 6 back
    assert r.tokens is not None and r.tokens.level == pytest.approx(6.0)
    r.settle(2, 12)                              # used 10 more than estimated: a debt
    assert r.tokens.level == pytest.approx(-4.0)
    assert r.take(1) == pytest.approx(0.5)
    AdaptiveRate(4, clock=clock).settle(10, 99)  # no token bucket: nothing to settle
