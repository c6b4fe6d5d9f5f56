"""``assay bench quality`` locally and with ``--engine ray``, side by side: items per second.

A GSM8K-shaped task of N items (the shipped arithmetic items repeated with fresh ids, written to a
temporary folder, as ``bench_quality_overhead.py`` makes it) answered by a Python pipeline that
waits ``--latency`` seconds per answer (asyncio, so answers overlap) and returns a fixed answer.
With ``--latency 0`` what is measured is each engine's own cost per item (prompts, the call,
filters, exact match, the store; on Ray also the chunks' trips to the actors and back). With a
latency the model's time dominates: locally ``--concurrency`` items are in flight, on Ray
``--concurrency`` on each actor (a pipeline has no limiter to share; a served model's
``--concurrency`` is held cluster-wide by the cluster limiter instead). Ray's start (the local
cluster and the actors) is included in its time and printed apart. Each figure is the best of
``--repeat`` runs, the two engines taken in turn.

    .venv/bin/python benchmarks/bench_quality_ray.py                         # 2,000 items, latency 0 and 0.05 s
    .venv/bin/python benchmarks/bench_quality_ray.py --items 500 --latency 0 --repeat 2
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_quality_overhead import make_task  # noqa: E402

PIPELINE = '''
import asyncio, os

async def answer(prompt: str) -> str:
    await asyncio.sleep(float(os.environ.get("ASSAY_BENCH_LATENCY", "0")))
    return "#### 12"
'''


def one(task: Path, n: int, engine: str, concurrency: int, actors: int | None) -> tuple[float, float | None]:
    """(seconds for the run, seconds until Ray was up, or None locally)."""
    import ray

    from assay.bench.quality.run import QualityConfig, run_quality

    cfg = QualityConfig(model="python:qpipe_ray:answer", tasks=str(task), concurrency=concurrency)
    t0 = time.perf_counter()
    up = None
    if engine == "ray":
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        up = time.perf_counter() - t0
    try:
        run = asyncio.run(run_quality(cfg, store=str(task.parent / f"store-{engine}.db"), engine=engine,
                                      actors=actors))
    finally:
        if engine == "ray":
            ray.shutdown()
    took = time.perf_counter() - t0
    assert run.summary["tasks"]["arithmetic"]["scored_items"] == n
    return took, up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--latency", type=float, nargs="*", default=[0.0, 0.05], help="Seconds per answer.")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--actors", type=int, default=None, help="Ray actors (default: one per CPU).")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    logging.getLogger("ray").setLevel(logging.ERROR)
    os.environ["ASSAY_CACHE"] = "off"
    with tempfile.TemporaryDirectory() as d:
        task = make_task(Path(d), a.items)
        (Path(d) / "qpipe_ray.py").write_text(PIPELINE)
        os.chdir(d)                       # the pipeline is imported from here, in the driver and the actors
        sys.path.insert(0, d)
        print(f"{a.items} items (arithmetic, 0-shot), concurrency {a.concurrency}, {os.cpu_count()} CPUs, "
              f"best of {a.repeat}; Ray's time includes starting Ray and the actors")
        for lat in a.latency:
            os.environ["ASSAY_BENCH_LATENCY"] = str(lat)
            best: dict[str, tuple[float, float | None]] = {}
            for _ in range(a.repeat):
                for engine in ("local", "ray"):
                    got = one(task, a.items, engine, a.concurrency, a.actors)
                    if engine not in best or got[0] < best[engine][0]:
                        best[engine] = got
            loc, (ray_s, up) = best["local"][0], best["ray"]
            print(f"latency {lat:.3f} s   local {a.items / loc:8.0f} items/s ({loc:6.2f} s)   "
                  f"ray {a.items / ray_s:8.0f} items/s ({ray_s:6.2f} s, of which Ray up {up:.2f} s; "
                  f"{a.items / (ray_s - up):.0f} items/s after)   ray/local {loc / ray_s:.2f}x")


if __name__ == "__main__":
    main()
