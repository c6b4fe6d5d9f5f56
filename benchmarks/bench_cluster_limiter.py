"""How many lease round trips a second one cluster limiter actor serves.

Each lease is what one model request costs the actor: an ``acquire`` awaited by the caller and a
``release`` sent without waiting. Callers are Ray actors (``--workers``), each with
``--tasks`` asyncio tasks taking and returning leases as fast as they can for ``--seconds``; the
actor's limits are set high so that nothing waits for the rate. The figure is the ceiling on the
requests per second of a whole run through one limiter, whatever its endpoints allow.

    PYTHONPATH=src python benchmarks/bench_cluster_limiter.py --workers 2 --tasks 32 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time

import ray

from assay.scale.limiter import ClusterLimits, start_cluster_limiter


@ray.remote(num_cpus=0)
class Caller:
    def __init__(self, limits: ClusterLimits):
        self.limits = limits

    async def run(self, tasks: int, seconds: float) -> list[float]:
        end = time.monotonic() + seconds
        latencies: list[float] = []

        async def loop() -> None:
            while time.monotonic() < end:
                t = time.perf_counter()
                lease, _ = await self.limits.acquire(100, 60.0)
                latencies.append(time.perf_counter() - t)
                self.limits.release(lease, "ok", tokens=100)

        await asyncio.gather(*(loop() for _ in range(tasks)))
        return latencies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=32, help="concurrent requests per worker")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--cpus", type=int, default=2)
    a = ap.parse_args()
    ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False)
    try:
        limits = ClusterLimits(start_cluster_limiter("bench-limiter", concurrency=1_000_000, rpm=1e12, tpm=1e15))
        callers = [Caller.remote(limits) for _ in range(a.workers)]
        ray.get([c.run.remote(1, 0.5) for c in callers])          # warm up
        t0 = time.perf_counter()
        lat = sorted(x for part in ray.get([c.run.remote(a.tasks, a.seconds) for c in callers]) for x in part)
        elapsed = time.perf_counter() - t0
        snap = ray.get(limits.actor.snapshot.remote())
        print(json.dumps({
            "workers": a.workers, "tasks_per_worker": a.tasks, "seconds": round(elapsed, 2),
            "leases": len(lat), "leases_per_s": round(len(lat) / elapsed),
            "acquire_p50_ms": round(1000 * lat[len(lat) // 2], 2),
            "acquire_p99_ms": round(1000 * lat[int(len(lat) * 0.99)], 2),
            "granted_by_actor": snap["granted"], "machine": f"{platform.processor() or platform.machine()}, "
                                                            f"{os.cpu_count()} cores, ray {ray.__version__}",
        }, indent=1))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
