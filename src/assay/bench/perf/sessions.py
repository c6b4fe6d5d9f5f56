"""Multi-turn sessions for ``assay bench perf --sessions N --turns T --think-time S``.

A session is a conversation of ``T`` turns. Turn ``k`` sends every earlier user message and the
server's own answer to it (chat messages, in order), then a new user message of
``--input-tokens`` tokens, and asks ``--output-tokens`` back; the next turn goes ``S`` seconds after
this one's answer ended (the think time). Closed loop: ``N`` sessions run at once, each from the
start. Open loop (``--rate R``): ``N`` sessions start at gamma-distributed times ``R`` sessions per
second apart (``--burstiness``), whatever the earlier ones are doing. A turn whose answer failed
ends its session (the context it would carry does not exist).

A turn's *context* is the tokens it sends: the user messages by the run's counter plus the earlier
answers by the server's usage count (else their token chunks), chat template not included.
Figures: per turn (:func:`per_turn`: TTFT and E2E against the mean context, and the cached prompt
tokens where the server's usage reports them: ``prompt_tokens_details.cached_tokens``), the slope of TTFT
against context (least squares over the requests), and per session (:func:`per_session`: the
session's length, its mean TTFT, turns completed). The schedule lag of a turn is its send time
less (the previous answer's end + think time), so a client that kept the think time long shows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from assay.bench.perf.stream import Exchange


@dataclass
class SessionPlan:
    sessions: int
    turns: int
    think: float                        # s between an answer's end and the next turn
    starts: list[float] | None = None   # open loop: each session's start (s from the point's start)


@dataclass
class Turns:
    """What the driver saw: per request index ``s * turns + k``, its session, turn, context tokens."""

    meta: dict[int, dict[str, Any]] = field(default_factory=dict)
    schedule_lag: list[float] = field(default_factory=list)


async def drive(plan: SessionPlan, user_texts: list[str], user_tokens: list[int], *,
                send: Callable[[list[dict[str, str]], int], Awaitable[Exchange]],
                answer: Callable[[Exchange], tuple[str, int] | None],
                record: Callable[[int, float | None, Exchange], None],
                going: Callable[[], bool], t0: float) -> Turns:
    """Run every session of ``plan``. ``send(messages, i)`` sends request ``i``; ``answer(ex)`` is the
    answer's text and token count, or None when the turn failed; ``record(i, scheduled, ex)`` keeps
    the exchange."""
    out = Turns()

    async def one(s: int) -> None:
        if plan.starts is not None:
            at = t0 + plan.starts[s]
            await asyncio.sleep(max(0.0, at - time.monotonic()))
            due: float | None = at
        else:
            due = None
        messages: list[dict[str, str]] = []
        context = 0
        for k in range(plan.turns):
            if not going():
                return
            i = s * plan.turns + k
            messages.append({"role": "user", "content": user_texts[i]})
            context += user_tokens[i]
            ex = await send(list(messages), i)
            if due is not None:
                out.schedule_lag.append(max(0.0, ex.sent - due))
            out.meta[i] = {"session": s, "turn": k + 1, "context": context}
            record(i, due if k == 0 else None, ex)
            got = answer(ex)
            if got is None:
                return
            messages.append({"role": "assistant", "content": got[0]})
            context += got[1]
            end = ex.reads[-1][0] if ex.reads else time.monotonic()
            due = end + plan.think
            if k < plan.turns - 1:
                await asyncio.sleep(max(0.0, due - time.monotonic()))

    await asyncio.gather(*(one(s) for s in range(plan.sessions)))
    return out


def _stat(v: list[float]) -> dict[str, Any] | None:
    if not v:
        return None
    a = np.asarray(v, dtype=np.float64)
    return {"n": len(a), "mean": float(a.mean()), "p50": float(np.percentile(a, 50)),
            "p90": float(np.percentile(a, 90)), "max": float(a.max())}


def per_turn(records: list[dict[str, Any]], turns: int) -> list[dict[str, Any]]:
    """For each turn: the requests sent and completed, the mean context, TTFT and E2E (s)."""
    rows = []
    for k in range(1, turns + 1):
        mine = [r for r in records if r.get("turn") == k]
        ok = [r for r in mine if r["status"] == "ok"]
        rows.append({"turn": k, "sent": len(mine), "ok": len(ok),
                     "context_tokens_mean": float(np.mean([r["context_tokens"] for r in mine])) if mine else None,
                     "cached_tokens_mean": _cached_mean(ok),
                     "ttft": _stat([r["ttft"] for r in ok if r.get("ttft") is not None]),
                     "e2e": _stat([r["e2e"] for r in ok if r.get("e2e") is not None])})
    return rows


def _cached_mean(ok: list[dict[str, Any]]) -> float | None:
    """The mean cached prompt tokens the server's usage reports for these requests (None: it reports none)."""
    got = [c for c in ((r.get("input_tokens") or {}).get("cached") for r in ok) if c is not None]
    return float(np.mean(got)) if got else None


def ttft_slope(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Least-squares TTFT = a + b · context over the completed requests: ``b`` in ms per 1,000
    tokens, ``a`` in ms, and the correlation."""
    pts = [(r["context_tokens"], r["ttft"]) for r in records if r["status"] == "ok" and r.get("ttft") is not None]
    x = np.asarray([p[0] for p in pts], dtype=np.float64)
    if len(pts) < 3 or float(x.std()) == 0.0:
        return None
    y = np.asarray([p[1] for p in pts], dtype=np.float64)
    b, a = np.polyfit(x, y, 1)
    r = float(np.corrcoef(x, y)[0, 1]) if float(y.std()) > 0 else None
    return {"ms_per_1k_tokens": float(b) * 1e6, "intercept_ms": float(a) * 1e3, "r": r, "n": len(pts)}


def per_session(records: list[dict[str, Any]], turns: int) -> dict[str, Any]:
    """Per session: its length (first send to last answer's end, s), its mean TTFT, turns completed."""
    by: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        by.setdefault(r["session"], []).append(r)
    lengths, ttfts, done = [], [], []
    for rs in by.values():
        ok = [r for r in rs if r["status"] == "ok"]
        done.append(len(ok))
        if ok:
            lengths.append(max(r["sent"] + r["e2e"] for r in ok) - min(r["sent"] for r in rs))
            t = [r["ttft"] for r in ok if r.get("ttft") is not None]
            if t:
                ttfts.append(float(np.mean(t)))
    return {"sessions": len(by), "completed": sum(1 for d in done if d == turns),
            "turns_completed": _stat([float(d) for d in done]), "length_s": _stat(lengths), "ttft_mean": _stat(ttfts)}


def fingerprint(turns: int, think: float, open_loop: bool) -> str:
    """The sessions workload as compare and the leaderboard match it."""
    return f"sessions {turns} turns, think {think:g}s, {'open' if open_loop else 'closed'} loop"
