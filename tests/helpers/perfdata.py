"""Perf results made by hand, as docs/bench.md lays them out (``assay.bench.perf/1``), with the
per-point samples the load generator keeps: lognormal TTFT and inter-token gaps, the rest
derived from them as the generator derives them; and ``perf_postgres_url``, a PostgreSQL server for
the perf store tests (a fixture: import it into the test module that uses it)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from assay.stats import bootstrap_draws, confidence_interval
from tests.helpers.postgres_server import PostgresServer, pg_bin

HOSTILE = "<script>alert(1)</script>"
PCTS = (50, 90, 95, 99)


def distribution(v: np.ndarray) -> dict[str, Any]:
    """One metric's distribution block: n, mean, percentiles, min, max and their 95% intervals."""
    v = np.asarray(v, dtype=np.float64)
    lo, hi, _ = confidence_interval(v)
    d: dict[str, Any] = {"n": int(len(v)), "mean": float(v.mean())}
    ci: dict[str, Any] = {"mean": [lo, hi]}
    for p in PCTS:
        d[f"p{p}"] = float(np.percentile(v, p))
        draws, _ = bootstrap_draws(v, f"p{p}", np.random.default_rng(p))
        ci[f"p{p}"] = [float(x) for x in np.percentile(draws, [2.5, 97.5])]
    d.update(min=float(v.min()), max=float(v.max()), ci=ci)
    return d


def make_point(rng: np.random.Generator, *, concurrency: int | None, rate: float | None, n: int,
               ttft_median: float, itl_median: float, input_tokens: int = 800, output_tokens: int = 200,
               failures: dict[str, int] | None = None, valid: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    ttft = rng.lognormal(np.log(ttft_median), 0.35, n)
    out = rng.integers(int(output_tokens * 0.9), int(output_tokens * 1.1) + 1, n)
    gaps = [rng.lognormal(np.log(itl_median), 0.25, k - 1) for k in out]
    itl = np.concatenate(gaps)
    e2e = ttft + np.array([g.sum() for g in gaps])
    tpot = (e2e - ttft) / (out - 1)
    gtps = out / e2e
    ttps = (input_tokens + out) / e2e
    samples = {"ttft": ttft, "e2e": e2e, "itl": itl, "tpot": tpot, "gtps": gtps, "ttps": ttps}
    if rate is not None:   # open loop: the scheduled-time versions carry a little queueing
        lag = rng.exponential(0.01, n)
        samples["ttft_sched"] = ttft + lag
        samples["e2e_sched"] = e2e + lag
    failures = {"http 500": 0, "http 429": 0, "timeout": 0, "stream cut": 0, "stall": 0, **(failures or {})}
    failed = sum(failures.values())
    duration = float(e2e.sum() / (concurrency or 1) if rate is None else n / rate + e2e.mean())
    point = {
        "concurrency": concurrency, "rate": rate, "duration_s": duration,
        "requests": {"sent": n + failed, "ok": n, "failed": failed, "failures": failures},
        "request_throughput": n / duration, "output_throughput": float(out.sum()) / duration,
        "total_token_throughput": float(out.sum() + input_tokens * n) / duration,
        "metrics": {k: distribution(v) for k, v in samples.items()},
        "latency_index": float(ttft.mean()), "throughput_index": float(gtps.mean()),
        "tokens": {"input_mean": float(input_tokens), "output_mean": float(out.mean()), "usage_from": "server",
                   "disagreements": 0, "examples": []},
        "slo": None,
        "validity": {"valid": valid, "reasons": [] if valid else ["client CPU saturated (97%)"],
                     "schedule_lag_ms": ({"p50": 0.2, "p99": 1.1, "max": 2.0} if rate is not None else None),
                     "loop_lag_ms": {"p50": 0.1, "p99": 0.9, "max": 1.5}, "client_cpu_s": 1.2,
                     "cpu_per_token_us": 4.1},
    }
    return point, samples


def make_run(*, name: str | None = "run", model: str = "qwen2.5-7b", mode: str = "concurrency",
             levels: Sequence[float] = (1, 4), n: int = 120, seed: int = 0, speed: float = 1.0,
             track: str | None = None, created_at: float | None = None, repeat: dict | None = None,
             invalid_at: Sequence[int] = (), output_tokens: int = 200,
             ) -> tuple[dict[str, Any], dict[int, dict[str, np.ndarray]]]:
    """A perf run over ``levels`` (concurrencies, or rates with ``mode="rate"``; ``sequential``
    is one point at concurrency 1). ``speed`` > 1 makes every latency shorter by that factor."""
    rng = np.random.default_rng(seed)
    if mode == "sequential":
        levels = (1,)
    points, samples = [], {}
    for i, lv in enumerate(levels):
        load = float(lv)
        slow = 1 + 0.15 * (load - 1) if mode != "rate" else 1 + 0.1 * load
        p, s = make_point(rng, concurrency=None if mode == "rate" else int(lv), rate=load if mode == "rate" else None,
                          n=n, ttft_median=0.25 * slow / speed, itl_median=0.02 * slow / speed,
                          output_tokens=output_tokens, failures={"http 500": 1, "stream cut": 1} if i == 0 else None,
                          valid=i not in invalid_at)
        points.append(p)
        samples[i] = s
    summary = {
        "schema": "assay.bench.perf/1", "id": uuid.uuid4().hex[:12], "name": name,
        "created_at": time.time() if created_at is None else created_at,
        "endpoint": "http://127.0.0.1:8000/v1", "model": model, "api": "chat", "stream": True, "mode": mode,
        "settings": {"input_tokens": 800, "output_tokens": output_tokens, "requests": n, "duration": None,
                     "warmup": 2, "shared_prefix": 0, "burstiness": 1.0, "seed": seed, "timeout": 600.0,
                     "stall_timeout": 60.0, "slo": None},
        "tokenizer": {"source": "server /tokenize"}, "clock": "kernel",
        "track": track, "repeat": repeat,
        "cost": None, "points": points,
    }
    return summary, samples


# -- a PostgreSQL server for the perf store tests, started once per session (per xdist worker) --
@pytest.fixture(scope="session")
def perf_postgres_url() -> Any:
    if pg_bin() is None:
        pytest.skip("PostgreSQL is not installed: run `make test` (it installs Debian's postgresql)")
    server = PostgresServer().start()
    yield server.url
    server.stop()
