"""What the run caps and the dead-letter cost: the same classic evaluation (F1 over N pairs,
``--out``, saved in a fresh SQLite store) with and without ``max_cost`` and ``max_errors``,
run back to back, best of ``--repeat``. Prints both wall times and their ratio.

    PYTHONPATH=src python benchmarks/bench_budget_overhead.py --rows 20000 --repeat 3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_pairs import write_jsonl  # noqa: E402

import assay  # noqa: E402


def once(data: Path, work: Path, tag: str, capped: bool) -> float:
    kw = {"max_cost": 1e9, "max_errors": 10**9} if capped else {}
    t0 = time.perf_counter()
    assay.evaluate(str(data), metrics="f1_score", out=work / f"out-{tag}", store=str(work / f"{tag}.db"),
                   workers=1, **kw)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = write_jsonl(work / "pairs.jsonl", args.rows)
        plain, capped = [], []
        for i in range(args.repeat):        # alternated, so that the machine's load falls on both
            plain.append(once(data, work, f"plain{i}", False))
            capped.append(once(data, work, f"capped{i}", True))
    p, c = min(plain), min(capped)
    print(f"{args.rows} rows, F1, --out, SQLite store, workers=1, best of {args.repeat}")
    print(f"  without caps            {p:7.2f} s")
    print(f"  --max-cost --max-errors {c:7.2f} s   ratio {c / p:.3f}")


if __name__ == "__main__":
    main()
