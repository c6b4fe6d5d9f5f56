"""How many lease round trips a second one cluster limiter actor serves.

Each lease is what one model request costs the actor: an ``acquire`` awaited by the caller and a
``release`` sent without waiting. Callers are Ray actors (``--workers``), each with
``--tasks`` asyncio tasks taking and returning leases as fast as they can for ``--seconds``; the
actor's limits are set high so that nothing waits for the rate. The figure is the ceiling on the
requests per second of a whole run through one limiter, whatever its endpoints allow.

Two client modes, run one after the other against one actor, ``--repeat`` times alternated (best
of each kept): ``blocks`` (the default: every ask a process makes while its last block is on its
way goes in the next actor call, returns batched per loop turn) and ``one per call`` (an
``acquire`` call and a ``release`` call per lease, as before block leases).

    PYTHONPATH=src python benchmarks/bench_cluster_limiter.py --workers 2 --tasks 32 --seconds 5 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from typing import Any

import ray

from assay.scale.limiter import ClusterLimits, start_cluster_limiter

MODES = ("blocks", "one per call")


@ray.remote(num_cpus=0)
class Caller:
    def __init__(self, actor: Any):
        self.modes = {"blocks": ClusterLimits(actor, blocks=True), "one per call": ClusterLimits(actor, blocks=False)}

    async def run(self, mode: str, tasks: int, seconds: float) -> list[float]:
        limits = self.modes[mode]
        end = time.monotonic() + seconds
        latencies: list[float] = []

        async def loop() -> None:
            while time.monotonic() < end:
                t = time.perf_counter()
                lease, _ = await limits.acquire(100, 60.0)
                latencies.append(time.perf_counter() - t)
                limits.release(lease, "ok", tokens=100)

        await asyncio.gather(*(loop() for _ in range(tasks)))
        return latencies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=32, help="concurrent requests per worker")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of both modes, alternated; the best is kept")
    a = ap.parse_args()
    ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False)
    try:
        actor = start_cluster_limiter("bench-limiter", concurrency=1_000_000, rpm=1e12, tpm=1e15)
        callers = [Caller.remote(actor) for _ in range(a.workers)]
        best: dict[str, dict[str, Any]] = {}
        for mode in MODES:
            ray.get([c.run.remote(mode, 1, 0.5) for c in callers])          # warm up
        for _ in range(a.repeat):
            for mode in MODES:
                before = ray.get(actor.snapshot.remote())
                t0 = time.perf_counter()
                lat = sorted(x for part in ray.get([c.run.remote(mode, a.tasks, a.seconds) for c in callers])
                             for x in part)
                elapsed = time.perf_counter() - t0
                time.sleep(0.2)                    # the last returns reach the actor
                snap = ray.get(actor.snapshot.remote())
                r = {"leases": len(lat), "leases_per_s": round(len(lat) / elapsed),
                     "acquire_p50_ms": round(1000 * lat[len(lat) // 2], 2),
                     "acquire_p99_ms": round(1000 * lat[int(len(lat) * 0.99)], 2),
                     "granted_by_actor": snap["granted"] - before["granted"],
                     "actor_calls": snap["actor_calls"] - before["actor_calls"] - 1}
                if mode not in best or r["leases_per_s"] > best[mode]["leases_per_s"]:
                    best[mode] = r
        print(f"{a.workers} Ray actors x {a.tasks} tasks, {a.seconds} s a round, best of {a.repeat}; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, ray {ray.__version__}, "
              f"load {os.getloadavg()[0]:.1f}")
        print(f"{'mode':<14} {'leases/s':>9} {'acquire p50 ms':>15} {'p99 ms':>8} {'leases per actor call':>22}")
        for mode, r in best.items():
            print(f"{mode:<14} {r['leases_per_s']:>9,} {r['acquire_p50_ms']:>15} {r['acquire_p99_ms']:>8} "
                  f"{r['granted_by_actor'] / max(1, r['actor_calls']):>22.1f}")
        if len(best) == 2:
            print(f"blocks / one per call: {best['blocks']['leases_per_s'] / best['one per call']['leases_per_s']:.1f}x")
        print(json.dumps(best))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
