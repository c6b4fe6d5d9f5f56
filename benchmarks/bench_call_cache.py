"""What a call cache lookup costs: the SQLite file (one machine) beside PostgreSQL (what the
workers of a Ray cluster share when the store is PostgreSQL, issue 16).

For each back end, best of ``--repeat``: a hit looked up one key at a time (what a judge call
does before it is made), a miss, ``get_many`` of 500 keys (one query), and ``put`` of one
answer (committed before it returns: what each answered call pays). A judge call over HTTP takes
hundreds of milliseconds, so a lookup of a few hundred microseconds costs the run nothing that
matters; the figures say how far from that each back end is.

    PYTHONPATH=src python benchmarks/bench_call_cache.py                      # a throwaway PostgreSQL
    PYTHONPATH=src python benchmarks/bench_call_cache.py --url postgresql://USER@HOST/DB

Without ``--url`` a PostgreSQL server is started in a temporary folder with Debian's binaries
(as the tests do: tests/helpers/postgres_server.py) and stopped at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from assay.models.base import Generation, TokenUsage
from assay.models.cache import CallCache, PgCallCache, call_key

ROOT = Path(__file__).resolve().parents[1]


def answers(n: int) -> list[tuple[str, Generation]]:
    out = []
    for i in range(n):
        msgs = [{"role": "system", "content": "You grade answers from 1 to 5."},
                {"role": "user", "content": f"Question {i}: how do I reset the password of account {i}? ..."}]
        gen = Generation(text=f'{{"score": {i % 5 + 1}, "reason": "the answer names the steps for {i}"}}',
                         usage=TokenUsage(420, 24), model="judge", latency_s=0.4)
        out.append((call_key("http://judge:8000/v1#judge", msgs, {"temperature": 0.0, "max_tokens": 256}), gen))
    return out


def per_call(fn, items, repeat: int) -> float:
    """Best of ``repeat`` of the mean seconds per item of ``fn(item)``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for it in items:
            fn(it)
        best = min(best, (time.perf_counter() - t0) / len(items))
    return best


def measure(cache: CallCache, rows: list[tuple[str, Generation]], repeat: int) -> dict[str, float]:
    cache.clear()
    n_put = min(500, len(rows))
    put = per_call(lambda kv: cache.put(kv[0], kv[1], model="judge"), rows[:n_put], 1)
    cache.put_many(rows[n_put:], model="judge")
    keys = [k for k, _ in rows]
    sample = keys[:: max(1, len(keys) // 1000)][:1000]
    hit = per_call(cache.get, sample, repeat)
    miss = per_call(cache.get, [k[::-1] for k in sample], repeat)
    batches = [keys[i:i + 500] for i in range(0, min(len(keys), 5000), 500)]
    many = per_call(cache.get_many, batches, repeat)
    return {"hit": hit, "miss": miss, "get_many_500": many, "put": put}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a PostgreSQL database to use (default: start a throwaway server)")
    ap.add_argument("--rows", type=int, default=20000, help="answers in the cache (default 20000)")
    ap.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    a = ap.parse_args()
    server = None
    url = a.url
    if url is None:
        sys.path.insert(0, str(ROOT))   # the tests' helper: tests/helpers/postgres_server.py
        from tests.helpers.postgres_server import PostgresServer

        print("starting a throwaway PostgreSQL server ...", flush=True)
        server = PostgresServer().start()
        url = server.url
    rows = answers(a.rows)
    results = {}
    try:
        with tempfile.TemporaryDirectory() as d:
            for name, make in (("sqlite (file)", lambda: CallCache(Path(d) / "cache.sqlite")),
                               ("postgresql", lambda: PgCallCache(url))):
                print(f"measuring {name} with {a.rows} answers ...", flush=True)
                cache = make()
                try:
                    results[name] = measure(cache, rows, a.repeat)
                finally:
                    cache.clear()
                    cache.close()
    finally:
        if server is not None:
            server.stop()
    print()
    print(f"call cache, {a.rows} answers, best of {a.repeat} (microseconds per operation)")
    print(f"{'operation':<22}" + "".join(f"{n:>16}" for n in results) + f"{'ratio':>10}")
    names = list(results)
    for op in ("hit", "miss", "get_many_500", "put"):
        vals = [results[n][op] * 1e6 for n in names]
        ratio = vals[1] / vals[0] if vals[0] else float("nan")
        label = "get_many (500 keys)" if op == "get_many_500" else f"get ({op})" if op != "put" else "put (committed)"
        print(f"{label:<22}" + "".join(f"{v:>16.1f}" for v in vals) + f"{ratio:>9.1f}x")
    med = statistics.median(r["hit"] for r in results.values())
    print("\nper-key within get_many: " + ", ".join(f"{n} {results[n]['get_many_500'] / 500 * 1e6:.1f}"
                                                   for n in names) + f" us (median hit {med * 1e6:.1f} us)")


if __name__ == "__main__":
    main()
