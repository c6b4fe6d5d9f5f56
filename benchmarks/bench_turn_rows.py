"""Reading conversations given one turn a line: time and peak memory, against the same rows read flat.

    python benchmarks/bench_turn_rows.py [--rows 100000] [--turns 10] [--window 100]

Writes ``--rows`` JSONL rows of about 40 words each (a query and a response), as conversations
of ``--turns`` turns, in four layouts, and reads each with ``assay.formats.open_dataset`` to the
end in a fresh process (the records dropped as they come, as the engine's chunks do); the peak
resident memory is that process's ``wait4`` rusage:

* ``flat``: no ``conversation_id`` / ``turn`` columns (the baseline: no grouping, no extra pass);
* ``contiguous``: each conversation's rows next to each other, in turn order;
* ``windowed``: the conversations interleaved ``--window`` at a time (rows in time order across
  that many live sessions), each conversation's turns in order;
* ``interleaved``: every conversation open until the end (turn 0 of all, then turn 1 of all, ...):
  the worst case, every record held until its conversation's last row.

Prints, per layout: wall seconds, rows/s and peak RSS, the records and the turns of the last
record read back to check the grouping. Results: ``benchmarks/RESULTS.md``, "Conversations one
turn a line".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("order refund parcel broken arrived city name number please help thanks shipping "
         "account address delivery invoice payment status today week store item").split()

READER = """
import sys
from assay.formats import open_dataset
n, last = 0, None
for rec in open_dataset(sys.argv[1]):
    n += 1
    last = rec
print(n, last.turns if last is not None else None, len(last.history or ()) if last is not None else 0)
"""


def text(i: int, n: int = 20) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n))


def order(layout: str, convs: int, turns: int, window: int) -> list[tuple[int, int]]:
    if layout in ("flat", "contiguous"):
        return [(c, t) for c in range(convs) for t in range(turns)]
    if layout == "interleaved":
        return [(c, t) for t in range(turns) for c in range(convs)]
    out = []
    for start in range(0, convs, window):
        group = range(start, min(start + window, convs))
        out += [(c, t) for t in range(turns) for c in group]
    return out


def write(path: Path, layout: str, convs: int, turns: int, window: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for c, t in order(layout, convs, turns, window):
            row = {"query": text(c + t), "response": text(c * 3 + t, 20)}
            if layout != "flat":
                row = {"conversation_id": f"c{c}", "turn": t, **row}
            f.write(json.dumps(row) + "\n")


def measure(path: Path) -> tuple[float, int, str]:
    """Read ``path`` in a fresh process: (wall seconds, peak RSS in KiB from ``wait4``, what it printed)."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", READER, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"reading {path} failed:\n{err.decode()[-2000:]}")
    return wall, usage.ru_maxrss, out.decode().strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--window", type=int, default=100)
    a = ap.parse_args()
    convs = a.rows // a.turns
    print(f"{convs * a.turns:,} rows: {convs:,} conversations of {a.turns} turns; python {sys.version.split()[0]}")
    print(f"{'layout':<12} {'wall s':>8} {'rows/s':>10} {'peak RSS MiB':>13}  records, last turns, last history")
    with tempfile.TemporaryDirectory(prefix="bench-turn-rows-") as d:
        for layout in ("flat", "contiguous", "windowed", "interleaved"):
            path = Path(d) / f"{layout}.jsonl"
            write(path, layout, convs, a.turns, a.window)
            wall, rss, got = measure(path)
            print(f"{layout:<12} {wall:>8.2f} {convs * a.turns / wall:>10,.0f} {rss / 1024:>13.1f}  {got}")
            path.unlink()


if __name__ == "__main__":
    main()
