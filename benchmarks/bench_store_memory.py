"""Peak memory of `assay eval --out` with the store on and off, side by side.

    python benchmarks/bench_store_memory.py [--rows 1000000] [--metrics f1_score,bleu,rougeL] [--rounds 1]

1. Writes ``--rows`` deterministic (response, ground_truth) pairs of about 50 words
   (``gen_pairs.py``) to a JSONL file, each with an ``id``.
2. Runs ``assay eval FILE --metrics M --out DIR --quiet`` as a user does, a fresh process each
   time, alternating: ``ASSAY_STORE=off``, then ``ASSAY_STORE=<a new SQLite file>``
   (``--rounds`` pairs). The peak resident memory is the ``wait4`` rusage of the process: the
   largest single process, main or metric worker.
3. Prints a table: wall time, rows/s and peak RSS of each run, and for the store-on runs the
   rows, score rows and column blobs it saved (read back to check the run completed).

Another version of assay is measured with ``PYTHONPATH=/path/to/its/src`` (the ``assay``
processes inherit it). Results: ``benchmarks/RESULTS.md``, "Memory with the store on".
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_pairs import write_jsonl  # noqa: E402


def run_measured(cmd: list[str], env: dict) -> tuple[float, int]:
    """Run ``cmd``; return (wall seconds, peak RSS in KiB) of the process and its workers."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = p.stderr.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"command failed: {' '.join(cmd)}\n{err[-2000:]}")
    return wall, usage.ru_maxrss


def saved(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        status, done = con.execute("SELECT status, rows_done FROM runs").fetchone()
        scores = con.execute("SELECT count(*) FROM scores").fetchone()[0]
        tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        table = "run_column_parts" if "run_column_parts" in tables else "run_columns"   # before store v5
        blobs = con.execute(f"SELECT count(*), sum(length(data)) FROM {table}").fetchone()
    finally:
        con.close()
    return (f"{status}, {done:,} rows, {scores:,} scores, {blobs[0]} column blobs "
            f"({(blobs[1] or 0) / 2**20:.1f} MiB)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--metrics", default="f1_score,bleu,rougeL")
    ap.add_argument("--rounds", type=int, default=1, help="store off / store on pairs, alternating")
    ap.add_argument("--workers", type=int, default=None, help="passed to assay eval --workers")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="assay-store-mem-"))
    try:
        t0 = time.perf_counter()
        data = write_jsonl(tmp / "pairs.jsonl", args.rows, seed=11)
        print(f"data: {args.rows:,} pairs of ~50 words, {data.stat().st_size / 2**20:.0f} MiB "
              f"(written in {time.perf_counter() - t0:.0f} s); metrics {args.metrics}")
        exe = Path(sys.executable).with_name("assay")
        cmd = [str(exe), "eval", str(data), "--metrics", args.metrics, "--quiet"]
        if args.workers:
            cmd += ["--workers", str(args.workers)]
        print(f"command: {' '.join(cmd[1:])} --out DIR   (ASSAY_STORE=off, then a new SQLite file)")
        print(f"{'store':<6} {'round':>5} {'wall s':>9} {'rows/s':>9} {'peak RSS MiB':>13}  saved")
        for k in range(args.rounds):
            for store_on in (False, True):
                db = tmp / f"store-{k}.db"
                env = dict(os.environ, ASSAY_STORE=str(db) if store_on else "off")
                out = tmp / f"out-{k}-{'on' if store_on else 'off'}"
                wall, rss = run_measured([*cmd, "--out", str(out)], env)
                note = saved(db) if store_on else ""
                print(f"{'on' if store_on else 'off':<6} {k + 1:>5} {wall:>9.1f} {args.rows / wall:>9,.0f} "
                      f"{rss / 1024:>13.0f}  {note}", flush=True)
                subprocess.run(["rm", "-rf", str(out), str(db), f"{db}-wal", f"{db}-shm"])
    finally:
        subprocess.run(["rm", "-rf", str(tmp)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
