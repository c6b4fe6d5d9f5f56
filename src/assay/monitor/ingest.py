"""From received span batches to committed spans: a bounded queue and one writer thread.

The receiver hands each request's spans to :meth:`Ingest.submit`, which queues them and returns a
future; the writer thread takes what is queued (several batches at once, up to
``max_commit`` spans), writes it in one transaction (:meth:`assay.store.spans.SpanLog.write`) and
only then resolves the batches' futures: the receiver answers a batch after its transaction has
committed, so an acknowledged span survives a ``kill -9``. A batch whose transaction fails is
answered as unavailable (the exporter sends it again), never acknowledged.

The queue is bounded by ``max_pending`` spans (queued or being written): a batch that would go
over it is refused at once (:class:`Full`; the receiver answers 429 with ``Retry-After``), never
dropped. A batch larger than the bound is taken when nothing else waits.

The same thread marks complete, every ``tick`` seconds, the traces that received no span for
``quiet_period`` seconds (:meth:`SpanLog.complete_quiet`); a trace whose root span arrives is
complete at once (in the transaction that stores it).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from assay.store.spans import SpanLog

MAX_PENDING = 100_000     # spans queued or being written
MAX_COMMIT = 20_000       # spans per transaction
QUIET_PERIOD = 30.0       # seconds without a span after which an open trace is complete


class Full(Exception):
    """The queue cannot take the batch now: ask again later."""


class Unavailable(Exception):
    """The batch was not stored (the store failed, or the receiver is stopping): ask again later."""


class _Batch:
    __slots__ = ("rows", "events", "future")

    def __init__(self, rows: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]] = ()):
        self.rows, self.events = rows, events
        self.future: Future[int] = Future()
        # running: a caller that gives up (a client gone) cannot cancel it, so the writer's
        # answer always lands
        self.future.set_running_or_notify_cancel()


def _size(b: _Batch) -> int:
    return len(b.rows) + len(b.events)


class Ingest:
    """The queue of span batches and the writer thread over ``log``."""

    def __init__(self, log: SpanLog, *, max_pending: int = MAX_PENDING, max_commit: int = MAX_COMMIT,
                 quiet_period: float = QUIET_PERIOD):
        self.log = log
        self.max_pending, self.max_commit, self.quiet_period = max_pending, max_commit, quiet_period
        self.tick = min(1.0, max(0.05, quiet_period / 10))
        self._cond = threading.Condition()
        self._queue: deque[_Batch] = deque()
        self.pending = 0            # spans queued or being written
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.stored = self.duplicates = self.commits = self.refused = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="assay-monitor-writer", daemon=True)
        self._thread.start()

    def submit(self, rows: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]] = ()) -> Future[int]:
        """Queue a batch of span rows (and of ``span_events`` rows: log records on spans); its
        future gives the batch's size once it is committed, or raises :class:`Unavailable`.
        Raises :class:`Full` when the queue cannot take it."""
        batch = _Batch(rows, events)
        size = len(rows) + len(events)
        with self._cond:
            if self._stopping:
                raise Unavailable("the receiver is stopping")
            if self.pending and self.pending + size > self.max_pending:
                self.refused += 1
                raise Full(f"{self.pending:,} spans are waiting to be stored (the bound is {self.max_pending:,})")
            self.pending += size
            self._queue.append(batch)
            self._cond.notify()
        return batch.future

    def close(self) -> None:
        """Store what is queued, then stop the writer."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()

    # -- the writer thread ---------------------------------------------------------------------
    def _take(self) -> list[_Batch]:
        with self._cond:
            if not self._queue and not self._stopping:
                self._cond.wait(self.tick)
            taken: list[_Batch] = []
            n = 0
            while self._queue and (not taken or n + _size(self._queue[0]) <= self.max_commit):
                b = self._queue.popleft()
                taken.append(b)
                n += _size(b)
            return taken

    def _run(self) -> None:
        last_scan = 0.0
        while True:
            taken = self._take()
            if taken:
                self._commit(taken)
            now = time.monotonic()
            if now - last_scan >= self.tick:
                last_scan = now
                self._complete_quiet()
            with self._cond:
                if self._stopping and not self._queue:
                    return

    def _commit(self, taken: list[_Batch]) -> None:
        rows = [r for b in taken for r in b.rows]
        events = [e for b in taken for e in b.events]
        size = len(rows) + len(events)
        try:
            new = self.log.write(rows, time.time(), events=events)
        except Exception as exc:   # the store failed: nothing of these batches is acknowledged
            print(f"assay monitor: could not store {len(rows):,} spans: {' '.join(str(exc).split())[:300]}",
                  file=sys.stderr, flush=True)
            self._release(size)
            for b in taken:
                b.future.set_exception(Unavailable("the spans could not be stored; send them again"))
            return
        self.stored += new
        self.duplicates += len(rows) - new
        self.commits += 1
        self._release(size)
        for b in taken:
            b.future.set_result(len(b.rows))

    def _release(self, n: int) -> None:
        with self._cond:
            self.pending -= n

    def depth(self) -> int:
        """Spans (and log records) received and not yet committed."""
        with self._cond:
            return self.pending

    def _complete_quiet(self) -> None:
        try:
            self.log.complete_quiet(self.quiet_period, time.time())
        except Exception as exc:   # tried again at the next tick
            print(f"assay monitor: could not mark quiet traces complete: {' '.join(str(exc).split())[:300]}",
                  file=sys.stderr, flush=True)
