#!/usr/bin/env python3
"""How faithfully `assay bench perf` keeps a production-shaped workload, against
benchmarks/stream_endpoint.py (--tokenize: o200k counts; it logs each request's kernel-stamped
arrival, prompt tokens, and for chat the message count and a hash of the first message).

1. ``--part replay`` (default): a seeded Mooncake-layout trace (Poisson arrivals, lognormal input
   lengths, shared first blocks) replayed by ``--replay``.
2. ``--part sessions``: ``--sessions N --turns T --think-time S`` (closed loop, IN-token user
   messages, OUT-token answers) beside aiperf's multi-turn mode on the same sessions and turns
   (``--num-sessions N --session-turns-mean T --session-turn-delay-mean S`` with no spread,
   ``--concurrency N``; aiperf in its own venv, made by ``bench_perf_wire.py --setup``), each against
   a fresh endpoint. From the endpoint's log alone (requests grouped into conversations by their
   first message, in order of arrival): the turns it saw per conversation and their message counts,
   the context per turn in its own o200k count (against the expected k·IN + (k-1)·OUT, answers carried
   as the server gave them), the think gap (a turn's arrival less the previous answer's last write,
   less S) and the spread of the conversations' first arrivals.

    python benchmarks/bench_perf_replay.py [--requests 600] [--rate 50] [--speed 1]
    python benchmarks/bench_perf_replay.py --part sessions [--sessions 8 --turns 4 --think-time 0.5]

Printed: the arrival error, |(arrival_i - scheduled_i) - their median| by the endpoint's own
stamps (p50 / p99 / max ms; the median is when the schedule started on the endpoint's clock), beside the schedule lag the run states for itself and
the verdict's budget (anchor: max(10 ms, 5% of median TTFT)); the prompts whose length the endpoint
counted exactly as traced (anchor: all); the client's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from bench_perf_accuracy import TOKENIZER, Endpoint, peer_bin, run_child  # noqa: E402

from assay.bench.perf.run import PerfConfig, run_perf  # noqa: E402


def make_trace(path: Path, n: int, rate: float, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    at = np.cumsum(rng.exponential(1 / rate, n))
    at -= at[0]
    rows, next_id = [], 8                      # ids 0-7: eight shared system prompts of one block
    for k in range(n):
        length = int(np.clip(rng.lognormal(6.5, 0.6), 520, 3000))
        blocks = -(-length // 512)
        ids = [int(rng.integers(0, 8))] + list(range(next_id, next_id + blocks - 1))
        next_id += blocks - 1
        rows.append({"timestamp": int(round(at[k] * 1000)), "input_length": length,
                     "output_length": int(rng.integers(8, 40)), "hash_ids": ids})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def replay_part(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = make_trace(Path(tmp) / "trace.jsonl", args.requests, args.rate, args.seed)
        ep = Endpoint(Path(tmp) / "log.jsonl", 1)
        try:
            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            run = asyncio.run(run_perf(PerfConfig(endpoint=ep.url, model="scripted", replay=str(Path(tmp) / "trace.jsonl"),
                                                  speed=args.speed, warmup=0)))
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        finally:
            served, _ = ep.stop()
    served.sort(key=lambda r: r["arrival"])
    arrivals = np.array([r["arrival"] for r in served])
    sched = np.sort(np.array([r["timestamp"] for r in rows]) / 1000 / args.speed)
    off = arrivals - sched                      # each arrival less its scheduled time, on the endpoint's clock
    err = np.abs(off - np.median(off)) * 1e3    # the common offset (when the schedule started) taken out
    want = sorted(r["input_length"] for r in rows)
    got = sorted(r["prompt_tokens"] for r in served)
    pt = run.summary["points"][0]
    lag = pt["replay"]["schedule_lag_ms"]
    ttft50 = pt["metrics"]["ttft"]["p50"]
    print(f"trace: {args.requests} requests, Poisson {args.rate:g} req/s, x{args.speed:g}; endpoint TTFT 100 ms, "
          f"ITL 20 ms; {pt['replay']['reusable_share']:.1%} of input in shared blocks")
    print(f"arrival error by the endpoint's kernel stamps: p50 {np.percentile(err, 50):.2f} ms, "
          f"p99 {np.percentile(err, 99):.2f} ms, max {err.max():.2f} ms")
    print(f"schedule lag the run states: p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, max {lag['max']:.2f} ms; "
          f"budget max(10 ms, 5% of TTFT p50 {ttft50 * 1e3:.0f} ms) = {max(10, 0.05 * ttft50 * 1e3):.1f} ms; "
          f"verdict {'valid' if pt['validity']['valid'] else 'NOT VALID: ' + '; '.join(pt['validity']['reasons'])}")
    print(f"lengths: {sum(a == b for a, b in zip(want, got))} of {len(want)} prompts exactly as traced by the "
          f"endpoint's o200k count (anchor: all); {pt['replay']['output_as_traced']} answers at the traced length")
    print(f"client CPU {cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime:.1f} s (prompt building included)")


# --- sessions beside aiperf's multi-turn mode ---

def sessions_assay(url: str, args: argparse.Namespace) -> str:
    run = asyncio.run(run_perf(PerfConfig(endpoint=url, model="scripted", sessions=args.sessions, turns=args.turns,
                                          think_time=args.think_time, input_tokens=args.input_tokens,
                                          output_tokens=args.output_tokens, warmup=0)))
    pt = run.summary["points"][0]
    return "valid" if pt["validity"]["valid"] else "NOT VALID: " + "; ".join(pt["validity"]["reasons"])


def sessions_aiperf(url: str, args: argparse.Namespace) -> str:
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    try:
        run_child([str(peer_bin("aiperf")), "profile", "--model", "scripted", "--url", url.removesuffix("/v1"),
                   "--endpoint-type", "chat", "--streaming", "--tokenizer", TOKENIZER,
                   "--num-sessions", str(args.sessions), "--session-turns-mean", str(args.turns),
                   "--session-turns-stddev", "0", "--session-turn-delay-mean", str(args.think_time * 1e3),
                   "--session-turn-delay-stddev", "0", "--concurrency", str(args.sessions),
                   "--prompt-input-tokens-mean", str(args.input_tokens), "--prompt-input-tokens-stddev", "0",
                   "--output-tokens-mean", str(args.output_tokens), "--osl-stddev", "0", "--random-seed", "1",
                   "--artifact-dir", str(out), "--ui-type", "none",
                   "--no-server-metrics", "--no-gpu-telemetry"], out / "stdout.log")
        return ""
    finally:
        shutil.rmtree(out, ignore_errors=True)


def conversations(served: list[dict]) -> list[list[dict]]:
    """The endpoint's chat requests grouped by their first message, each in order of arrival."""
    by: dict[str, list[dict]] = {}
    for r in served:
        if r.get("first") is not None and r.get("outcome") == "ok":
            by.setdefault(r["first"], []).append(r)
    return [sorted(v, key=lambda r: r["arrival"]) for v in sorted(by.values(), key=lambda v: min(r["arrival"] for r in v))]


def session_figures(convs: list[list[dict]], args: argparse.Namespace) -> dict:
    """What the endpoint saw of the sessions (see the module doc)."""
    turns = args.turns
    ctx = [[c[k]["prompt_tokens"] for c in convs if len(c) > k] for k in range(turns)]
    want = [k * args.input_tokens + (k - 1) * args.output_tokens for k in range(1, turns + 1)]
    msgs = {tuple(r.get("messages") for r in c) for c in convs}
    gaps = [(c[k]["arrival"] - c[k - 1]["last_write"] - args.think_time) * 1e3
            for c in convs for k in range(1, len(c)) if c[k - 1].get("last_write") is not None]
    starts = np.array([c[0]["arrival"] for c in convs])
    return {"conversations": len(convs), "turns": sorted({len(c) for c in convs}), "messages": sorted(msgs),
            "context": [float(np.mean(x)) if x else None for x in ctx], "expected": want,
            "gap": np.percentile(gaps, [50, 99]).tolist() + [float(np.max(gaps))] if gaps else None,
            "start_spread": float((starts.max() - starts.min()) * 1e3) if len(starts) else None}


def sessions_part(args: argparse.Namespace) -> None:
    print(f"sessions: {args.sessions} at once (closed loop), {args.turns} turns, think {args.think_time:g} s, "
          f"{args.input_tokens}-token user messages, {args.output_tokens}-token answers; endpoint TTFT 100 ms, "
          "ITL 20 ms; figures from the endpoint's log only")
    for name, fn in (("assay", sessions_assay), ("aiperf", sessions_aiperf)):
        if name not in args.clients.split(","):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            ep = Endpoint(Path(tmp) / "log.jsonl", 1)
            try:
                note = fn(ep.url, args)
            except (Exception, SystemExit) as exc:
                print(f"{name}: FAILED: {str(exc)[-600:]}", flush=True)
                continue
            finally:
                served, _ = ep.stop()
        f = session_figures(conversations(served), args)
        print(f"{name}: {f['conversations']} conversations, turns each {f['turns']}, messages per turn "
              f"{' / '.join(str(m) for m in f['messages'])}; first arrivals spread over {f['start_spread']:.1f} ms "
              f"{note}".rstrip())
        print("  context per turn, endpoint's o200k (expected k*IN + (k-1)*OUT): "
              + ", ".join(f"{k + 1}: {c:.0f} ({w})" for k, (c, w) in enumerate(zip(f["context"], f["expected"]))
                          if c is not None))
        if f["gap"]:
            print(f"  think gap less {args.think_time:g} s (arrival - previous answer's last write): p50 "
                  f"{f['gap'][0]:+.2f} ms, p99 {f['gap'][1]:+.2f} ms, max {f['gap'][2]:+.2f} ms", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("replay", "sessions"), default="replay")
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--think-time", type=float, default=0.5)
    ap.add_argument("--input-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=16)
    ap.add_argument("--clients", default="assay,aiperf")
    args = ap.parse_args()
    if args.part == "replay":
        replay_part(args)
    else:
        sessions_part(args)


if __name__ == "__main__":
    main()
