#!/usr/bin/env python3
"""How faithfully `assay bench perf --replay` keeps a trace: a seeded Mooncake-layout trace (Poisson
arrivals, lognormal input lengths, shared first blocks) replayed against benchmarks/stream_endpoint.py
(--tokenize: o200k counts; it logs each request's kernel-stamped arrival and prompt tokens).

    python benchmarks/bench_perf_replay.py [--requests 600] [--rate 50] [--speed 1]

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
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from bench_perf_accuracy import Endpoint  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
