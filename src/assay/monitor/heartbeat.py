"""The running server's heartbeat in the store, for ``assay monitor status``.

``assay monitor serve`` holds figures no table shows: the spans it has received and not yet
committed (the ingest queue), and, with a ``monitor.yaml``, the traces waiting to be scored and
the current evaluation lag (how long the oldest of them has been complete). :class:`Heartbeat`
writes them, with the server's pid, host and address, every ``period`` seconds on a thread of its
own (:meth:`assay.store.monitor.MonitorLog.beat`), and removes them when the server stops cleanly;
a server killed leaves its last heartbeat, which goes stale. :func:`running` tells which
heartbeats are of a server still running: one written within three periods.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from typing import Any

from assay.store.monitor import MonitorLog

PERIOD = 2.0          # seconds between heartbeats
STALE = 3             # periods after which a heartbeat is of a server no longer running


def running(server: dict[str, Any], now: float | None = None) -> bool:
    """Whether a heartbeat (:meth:`MonitorLog.servers`) is of a server still running."""
    now = time.time() if now is None else now
    return now - server["beat_at"] <= STALE * server["period"]


class Heartbeat:
    """The heartbeat of one server: ``ingest`` (its queue: :meth:`~assay.monitor.ingest.Ingest.depth`),
    ``scorer`` (an :class:`~assay.monitor.scoring.OnlineScorer`, or None without a config)."""

    def __init__(self, store: Any, ingest: Any, url: str, scorer: Any = None, period: float = PERIOD):
        self.log = MonitorLog(store)
        self.ingest, self.scorer, self.period = ingest, scorer, period
        self.id = uuid.uuid4().hex
        self.base = {"id": self.id, "pid": os.getpid(), "host": socket.gethostname(), "url": url,
                     "started_at": time.time(), "period": period}
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._run, name="assay-monitor-heartbeat", daemon=True)
        self._warned = False

    def state(self) -> dict[str, Any]:
        """What the heartbeat says now."""
        st: dict[str, Any] = {"spans_pending": self.ingest.depth(), "stored": self.ingest.stored,
                              "refused": self.ingest.refused}
        if self.scorer is not None:
            st["scoring"] = self.scorer.backlog()
        return st

    def beat(self) -> None:
        self.log.beat({**self.base, "beat_at": time.time(), "state": self.state()})

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.halt.set()
        if self.thread.is_alive():
            self.thread.join(30)
        try:
            self.log.stopped(self.id)
        except Exception:   # the store is gone: the heartbeat goes stale instead
            pass

    def _run(self) -> None:
        while not self.halt.is_set():
            try:
                self.beat()
                self._warned = False
            except Exception as exc:   # tried again at the next period; said once
                if not self._warned:
                    print(f"assay monitor: could not write the heartbeat: {' '.join(str(exc).split())[:300]}",
                          file=sys.stderr, flush=True)
                    self._warned = True
            self.halt.wait(self.period)
