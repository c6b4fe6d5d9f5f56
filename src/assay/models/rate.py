"""The adaptive rate: token buckets for requests and tokens per minute, halved on a 429 and
recovered slowly while calls succeed, with the pause a server's ``Retry-After`` asks for.

One bookkeeping for both limiters: the local one (:class:`assay.models.limiter.Limiter`, one
process) and the cluster one (:class:`assay.scale.limiter.LimitBook`, one Ray actor for every
worker). It never sleeps and never looks at the wall: it reads the time from the ``clock`` it is
given (monotonic seconds; tests pass their own) and answers how long to wait, so the callers do
the waiting, each in its own way.

* :class:`TokenBucket` lends: a taker may overdraw and is told how long to wait the deficit out;
  at most one second's worth is taken in a burst.
* :class:`AdaptiveRate` holds the two buckets, the concurrency window and the pause. On a 429
  (:meth:`~AdaptiveRate.rate_limited`) every bucket's rate is halved (not below ``min_factor``
  of the configured one) and the window halved from what was in flight; 429s within a second of
  the last cut answer requests sent before it and cut nothing more. While calls succeed
  (:meth:`~AdaptiveRate.succeeded`) the window grows by about one per window of successes, and
  the rate by 10% of the configured one every ``recover_every`` seconds without a 429.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Clock = Callable[[], float]

#: before any event: far enough back that "seconds since" is always large
_LONG_AGO = -1e18


class TokenBucket:
    """A token bucket that lends: :meth:`take` may overdraw, and says how long to wait the
    deficit out. ``per_minute``: the configured rate; :meth:`scale` sets a fraction of it."""

    __slots__ = ("per_min", "rate", "capacity", "level", "stamp", "clock")

    def __init__(self, per_minute: float, clock: Clock = time.monotonic):
        self.clock = clock
        self.per_min = float(per_minute)
        self.rate = self.per_min / 60.0
        self.capacity = max(1.0, self.rate)      # a burst of at most one second's worth
        self.level = self.capacity
        self.stamp = clock()

    def scale(self, factor: float) -> None:
        """Run at ``factor`` of the configured rate from now on."""
        self._refill()
        self.rate = max(self.per_min * factor / 60.0, 1e-6)
        self.capacity = max(1.0, self.rate)

    def _refill(self) -> None:
        now = self.clock()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, n: float) -> float:
        """Take ``n`` now; return the seconds to wait before using them (0: at once)."""
        self._refill()
        self.level -= n
        return 0.0 if self.level >= 0 else -self.level / self.rate

    def give(self, n: float) -> None:
        """Put ``n`` back (a negative ``n`` is a debt the next takers pay)."""
        self._refill()
        self.level = min(self.capacity, self.level + n)


class RateField:
    """An attribute of a limiter that is its :class:`AdaptiveRate`'s (the instance's ``rate``):
    ``factor = RateField()`` reads and writes ``self.rate.factor``; ``RateField("factor")`` names
    another attribute of the rate."""

    def __init__(self, name: str | None = None):
        self.name = name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = self.name or name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else getattr(obj.rate, self.name or "")

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj.rate, self.name or "", value)


class AdaptiveRate:
    """Requests and tokens per minute, a concurrency window and the pause after a 429, adapted
    to what the server says.

    ``concurrency``: the window's ceiling. ``rpm`` / ``tpm``: requests and tokens per minute
    (None: no bucket; only the window adapts). ``adaptive``: False keeps the rates and window as
    configured (a 429 still pauses). ``recover_every``: seconds between the rate's steps back up.
    ``min_factor``: the lowest fraction of the configured rate a run of 429s cuts to.

    :attr:`limit` is the window as a whole number of calls in flight; :attr:`factor` the
    fraction of the configured rate in force; :attr:`pause_until` the clock time before which
    nothing is sent."""

    def __init__(self, concurrency: int, *, rpm: float | None = None, tpm: float | None = None,
                 adaptive: bool = True, recover_every: float = 5.0, min_factor: float = 0.02,
                 clock: Clock = time.monotonic):
        self.clock = clock
        self.concurrency = int(concurrency)
        self.adaptive = adaptive
        self.recover_every = recover_every
        self.min_factor = min_factor
        self.requests = TokenBucket(rpm, clock) if rpm else None
        self.tokens = TokenBucket(tpm, clock) if tpm else None
        self.window = float(self.concurrency)
        self.limit = self.concurrency
        self.factor = 1.0
        self.pause_until = _LONG_AGO
        self.last_cut = self.last_429 = self.last_recover = _LONG_AGO

    # -- before a request -------------------------------------------------------------------------
    def paused_for(self) -> float:
        """Seconds left of the pause after a 429 (0: none)."""
        return max(0.0, self.pause_until - self.clock())

    def take(self, tokens: int = 0) -> float:
        """Take one request and ``tokens`` tokens (0: not counted) from the buckets; return the
        seconds to wait before sending (0: at once). The pause is not included: see
        :meth:`paused_for`."""
        wait = 0.0
        if self.requests is not None:
            wait = self.requests.take(1)
        if self.tokens is not None and tokens:
            wait = max(wait, self.tokens.take(tokens))
        return wait

    # -- after it -----------------------------------------------------------------------------------
    def give_back(self, tokens: int = 0) -> None:
        """A request taken but never sent: its request and ``tokens`` go back to the buckets."""
        if self.requests is not None:
            self.requests.give(1)
        if self.tokens is not None and tokens:
            self.tokens.give(tokens)

    def settle(self, estimated: int, used: int) -> None:
        """A request took ``estimated`` tokens and used ``used``: the difference goes back to the
        token bucket (a debt when it used more)."""
        if self.tokens is not None:
            self.tokens.give(estimated - used)

    def rate_limited(self, pause: float | None, in_flight: int) -> bool:
        """A 429: pause everyone ``pause`` seconds (None: no pause) and, unless the last cut was
        under a second ago or the rate is not adaptive, halve the rates and the window (from
        ``in_flight``, the calls out counting the one answered 429). True when it cut."""
        now = self.clock()
        self.last_429 = now
        if pause is not None:
            self.pause_until = max(self.pause_until, now + max(0.0, pause))
        if not self.adaptive or now - self.last_cut < 1.0:
            return False   # answers to requests sent before the last cut say nothing new
        self.last_cut = now
        self._scale(max(self.min_factor, self.factor / 2))
        self.window = max(1.0, min(self.window, in_flight) / 2)
        self.limit = int(self.window)
        return True

    def succeeded(self) -> None:
        """An answer: the window grows by about one per window of successes; the rate by 10% of
        the configured one when ``recover_every`` seconds have passed since the last 429 and the
        last step."""
        if self.limit < self.concurrency:
            self.window = min(float(self.concurrency), self.window + 1.0 / self.window)
            self.limit = int(self.window)
        now = self.clock()
        if (self.factor < 1.0 and now - self.last_429 >= self.recover_every
                and now - self.last_recover >= self.recover_every):
            self.last_recover = now
            self._scale(min(1.0, self.factor + 0.1))

    def _scale(self, factor: float) -> None:
        self.factor = factor
        for bucket in (self.requests, self.tokens):
            if bucket is not None:
                bucket.scale(factor)
