"""End-to-end speed and memory of `assay eval`, side by side with azure-ai-evaluation.

    python benchmarks/bench_eval_speed.py [--rows 10000] [--big-rows 1000000] [--no-azure] [--no-big]

1. Writes ``--rows`` deterministic (response, ground_truth) pairs of about 50 words
   (``gen_pairs.py``) to a JSONL file.
2. Times ``assay eval FILE --metrics f1_score,bleu,rougeL --out DIR`` as a user runs it:
   a fresh process, from start-up to the written results.
3. Times azure-ai-evaluation's ``evaluate()`` with F1ScoreEvaluator, BleuScoreEvaluator and
   RougeScoreEvaluator(ROUGE_L) on the same file, in its own venv (made by
   ``conformance_azure.py``; NLTK data written there from PyPI packages, ``nltk.download``
   disabled, since azure calls it on every row and the machine is offline). Prints both
   wall times, the ratio, and the largest per-row difference of each metric's values.
4. Streams ``--big-rows`` rows through ``assay eval`` with ``--out`` and prints the peak
   resident memory of that process (``wait4`` rusage) and its rows/s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from gen_pairs import write_jsonl  # noqa: E402

METRICS = "f1_score,bleu,rougeL"
ASSAY_COLS = {"f1": "outputs.f1_score.f1_score", "bleu": "outputs.bleu.bleu",
              "rougeL": "outputs.rougeL.rougeL_f1_score"}
AZURE_COLS = {"f1": "outputs.f1.f1_score", "bleu": "outputs.bleu.bleu_score",
              "rougeL": "outputs.rouge.rouge"}

AZURE_EVAL = textwrap.dedent(r'''
    import json, sys, time, warnings
    warnings.filterwarnings("ignore")
    import nltk
    nltk.download = lambda *a, **k: False   # offline: the data is already in NLTK_DATA
    t0 = time.perf_counter()
    from azure.ai.evaluation import (BleuScoreEvaluator, F1ScoreEvaluator, RougeScoreEvaluator,
                                     RougeType, evaluate)
    t1 = time.perf_counter()
    result = evaluate(data=sys.argv[1], evaluators={
        "f1": F1ScoreEvaluator(), "bleu": BleuScoreEvaluator(),
        "rouge": RougeScoreEvaluator(rouge_type=RougeType.ROUGE_L)})
    t2 = time.perf_counter()
    with open(sys.argv[2], "w") as fh:
        for row in result["rows"]:
            fh.write(json.dumps(row) + "\n")
    print(json.dumps({"import_s": t1 - t0, "evaluate_s": t2 - t1}))
''')


def run_measured(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Run ``cmd``; return (wall seconds, peak RSS in KiB, stdout)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"command failed: {' '.join(cmd)}\n{err[-2000:]}")
    return wall, usage.ru_maxrss, out


def assay_cmd(data: Path, out: Path) -> list[str]:
    exe = Path(sys.executable).with_name("assay")
    return [str(exe), "eval", str(data), "--metrics", METRICS, "--out", str(out), "--quiet"]


def read_rows(path: Path, cols: dict[str, str], key: str) -> dict[str, dict]:
    rows = {}
    with open(path) as fh:
        for line in fh:
            r = json.loads(line)
            rows[str(r[key])] = {k: r.get(c) for k, c in cols.items()}
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--big-rows", type=int, default=1_000_000)
    ap.add_argument("--no-azure", action="store_true")
    ap.add_argument("--no-big", action="store_true")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="assay-bench-"))
    data = write_jsonl(tmp / "pairs.jsonl", args.rows)
    print(f"data: {args.rows} pairs of ~50 words -> {data}")

    wall, rss, _ = run_measured(assay_cmd(data, tmp / "assay-out"))
    print(f"assay eval ({METRICS}), end to end incl. start-up: {wall:.2f} s, "
          f"{args.rows / wall:,.0f} rows/s, peak RSS {rss / 1024:.0f} MiB")
    assay_wall = wall

    if not args.no_azure:
        import conformance_azure as ca

        ca.ensure_azure_venv()
        ca.ensure_nltk_data()
        runner = tmp / "azure_eval.py"
        runner.write_text(AZURE_EVAL)
        azure_rows = tmp / "azure-rows.jsonl"
        env = dict(os.environ, NLTK_DATA=str(ca.NLTK_DATA), PYTHONWARNINGS="ignore")
        wall, rss, out = run_measured([str(ca.venv_python()), str(runner), str(data), str(azure_rows)], env)
        t = json.loads(out.strip().splitlines()[-1])
        print(f"azure-ai-evaluation evaluate(): {t['evaluate_s']:.2f} s in evaluate(), {wall:.2f} s end to end, "
              f"{args.rows / t['evaluate_s']:,.0f} rows/s")
        print(f"ratio (azure evaluate() / assay end to end): {t['evaluate_s'] / assay_wall:.1f}x; "
              f"end to end vs end to end: {wall / assay_wall:.1f}x")
        ours = read_rows(tmp / "assay-out" / "rows.jsonl", ASSAY_COLS, "inputs.id")
        theirs = read_rows(azure_rows, AZURE_COLS, "inputs.id")
        for k in ASSAY_COLS:
            diffs = [abs(ours[i][k] - theirs[i][k]) for i in ours
                     if i in theirs and ours[i][k] is not None and theirs[i][k] is not None]
            print(f"  {k}: {len(diffs)} rows compared, max |assay - azure| = {max(diffs) if diffs else float('nan'):.3g}")

    if not args.no_big:
        t0 = time.perf_counter()
        big = write_jsonl(tmp / "big.jsonl", args.big_rows, seed=11)
        print(f"big data: {args.big_rows:,} rows, {big.stat().st_size / 2**20:.0f} MiB "
              f"(written in {time.perf_counter() - t0:.0f} s)")
        wall, rss, _ = run_measured(assay_cmd(big, tmp / "big-out"))
        print(f"assay eval streaming {args.big_rows:,} rows: {wall:.1f} s, {args.big_rows / wall:,.0f} rows/s, "
              f"peak RSS {rss / 1024:.0f} MiB (goal < 1024 MiB)")
    subprocess.run(["rm", "-rf", str(tmp)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
