"""Who is running a run, whether it is still alive, and what each of its sessions used.

A *session* is one process working on a run: the one that started it, then one per resume.
While it works, the session *owns* the run: the run's row names the session (``owner``), its
process id and host, and a ``heartbeat_at`` time the session renews after every chunk it
writes and every :data:`HEARTBEAT_S` seconds from a background thread (:class:`Heartbeat`).
Every write of the session checks that it still owns the run.

A run whose status says ``running`` is *live* when:

- it was started on this host and its process is still there (and has beaten within
  :data:`PID_GRACE_S`, the guard against a process id used again by another program), or
- it runs on another host (or its pid is unknown) and its heartbeat is younger than
  :data:`STALE_AFTER_S`.

Otherwise it is *stale*: its process was killed (``kill -9``, a crash, a lost machine)
before it could mark the run. Reading a run reports a stale run's status as ``stale``;
``--resume`` takes it over, and refuses a live one.

Accounting: each session keeps its own judge usage (written with its heartbeats, so a
killed session's calls count up to its last beat); the run's usage is their sum
(:func:`sum_usage`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

HEARTBEAT_S = 10.0       # a running session beats at least this often
STALE_AFTER_S = 60.0     # a run on another host is stale after this long without a beat
PID_GRACE_S = 600.0      # ... and one on this host whose pid exists, after this long
MIN_GAP_S = 1.0          # beats asked for after each chunk are at most this frequent

# Usage fields added up over sessions (the rest are taken from the latest session).
_SUMMED = ("calls", "cache_hits", "shared", "errors", "prompt_tokens", "completion_tokens", "distributions")


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int | None) -> bool | None:
    """Whether process ``pid`` exists on this host; None when that cannot be told."""
    if not pid or pid < 0 or os.name != "posix":   # os.kill(pid, 0) terminates the process on Windows
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:      # it exists, under another user
        return True
    except OSError:
        return None
    return True


def last_beat(run: Mapping[str, Any]) -> float | None:
    """The run's last heartbeat: ``heartbeat_at``, else (a run written before heartbeats) its last update."""
    return run.get("heartbeat_at") or run.get("updated_at")


def is_stale(run: Mapping[str, Any], now: float | None = None) -> bool:
    """True for a run stored as ``running`` whose process is gone (see the module's rules)."""
    if run.get("status") != "running":
        return False
    now = time.time() if now is None else now
    beat = last_beat(run)
    age = now - beat if beat is not None else float("inf")
    if run.get("owner_host") == this_host():
        alive = pid_alive(run.get("owner_pid"))
        if alive is not None:
            return not alive or age > PID_GRACE_S
    return age > STALE_AFTER_S


def shown_status(run: Mapping[str, Any], now: float | None = None) -> str:
    """The status to show: the stored one, or ``stale`` for a run whose process is gone."""
    return "stale" if is_stale(run, now) else run["status"]


def describe_owner(run: Mapping[str, Any], now: float | None = None) -> str:
    """``pid 4242 on host h, last heartbeat 3 s ago`` (what is known of it)."""
    now = time.time() if now is None else now
    parts = []
    if run.get("owner_pid"):
        parts.append(f"pid {run['owner_pid']}" + (f" on host {run['owner_host']}" if run.get("owner_host") else ""))
    beat = last_beat(run)
    if beat is not None:
        parts.append(f"last heartbeat {max(0.0, now - beat):.0f} s ago")
    return ", ".join(parts) or "no owner recorded"


def sum_usage(sessions: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """A run's judge usage: its sessions' usages (oldest first) added up.

    Counts and tokens are summed; ``cost_usd`` is the sum of the sessions' costs (None when a
    session paid for tokens at an unknown price); the price and its source are the latest
    session's. ``sessions`` says how many sessions ran, ``sessions_unrecorded`` how many left
    no usage (killed before their first heartbeat, or run by an assay that kept none). None
    when no session recorded any usage (a run without a judge)."""
    known = [dict(s) for s in sessions if s]
    if not known:
        return None
    total: dict[str, Any] = dict(known[-1])
    for k in _SUMMED:
        if any(k in s for s in known):
            total[k] = sum(int(s.get(k) or 0) for s in known)
    costs = [s.get("cost_usd") for s in known]
    paid_unknown = any(c is None and (s.get("prompt_tokens") or s.get("completion_tokens"))
                       for c, s in zip(costs, known))
    total["cost_usd"] = None if paid_unknown or all(c is None for c in costs) else \
        round(sum(c for c in costs if c is not None), 8)
    total["sessions"] = len(sessions)
    if len(known) < len(sessions):
        total["sessions_unrecorded"] = len(sessions) - len(known)
    else:
        total.pop("sessions_unrecorded", None)
    return total


class Heartbeat:
    """Renews a run's heartbeat from a background thread: every ``every`` seconds, and soon
    after :meth:`poke` (at most every :data:`MIN_GAP_S`), writing ``usage()`` (the session's
    judge usage so far) with it. A failed beat is kept in :attr:`error` and does not stop
    the run; the session's next chunk write reports a store that cannot be written."""

    def __init__(self, store: Any, run_id: str, usage: Callable[[], Any] | None = None, *,
                 every: float = HEARTBEAT_S):
        self.store, self.run_id, self.usage, self.every = store, run_id, usage, every
        self.error: BaseException | None = None
        self.owned = True
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="assay-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def poke(self) -> None:
        """Beat soon (after a chunk was committed)."""
        self._wake.set()

    def beat(self) -> None:
        try:
            self.owned = self.store.heartbeat(self.run_id, usage=self.usage() if self.usage else None)
        except Exception as exc:   # the store is unreachable for now: the next write says so
            self.error = exc

    def _loop(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(self.every)
            self._wake.clear()
            gap = MIN_GAP_S - (time.monotonic() - last)
            if gap > 0 and self._stop.wait(gap):
                return
            if self._stop.is_set():
                return
            self.beat()
            last = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)   # a beat waits at most the store's busy timeout


__all__ = ["HEARTBEAT_S", "Heartbeat", "PID_GRACE_S", "STALE_AFTER_S", "describe_owner", "is_stale", "last_beat",
           "pid_alive", "shown_status", "sum_usage", "this_host"]
