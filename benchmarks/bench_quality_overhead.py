"""What ``assay bench quality`` costs beyond the model's own time, and what the sandbox costs.

1. **Overhead per item** (in process, and as a CLI process so that it compares with the peer): a GSM8K-shaped task of N items (the shipped arithmetic items, repeated
   with fresh ids; written to a temporary folder) answered by a Python pipeline that returns at
   once, so everything measured is assay's own work: loading the task and building every prompt,
   the call, the filters and exact match, and the store's writes (SQLite, committed as items
   finish). Printed per item, with the share spent loading and prompting, and beside it
   lm-evaluation-harness's ``--model dummy`` (which answers at once too) on the same YAML and
   data, when its venv exists (``benchmarks/.venvs/lm-eval``, made by
   ``benchmarks/bench_quality_conformance.py --setup``).
2. **Sandbox cost per code sample**: each shipped code item's canonical solution with its tests,
   run in :class:`assay.bench.quality.sandbox.Sandbox` (the isolation this machine allows), beside the same
   programs run as a bare ``python -I`` subprocess (no isolation, no limits): median and p90 per
   sample, and the ratio.

    .venv/bin/python benchmarks/bench_quality_overhead.py                  # 2,000 items, 5 rounds of 12 programs
    .venv/bin/python benchmarks/bench_quality_overhead.py --items 500 --rounds 2 --no-lm-eval
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
TASKS = ROOT / "examples" / "tasks"
LM_EVAL_VENV = ROOT / "benchmarks" / ".venvs" / "lm-eval"

PIPELINE = '''
def answer(prompt: str) -> str:
    return "#### 12"
'''


def make_task(folder: Path, n: int) -> Path:
    rows = [json.loads(x) for x in (TASKS / "arithmetic.jsonl").read_text().splitlines() if x.strip()]
    with (folder / "arithmetic.jsonl").open("w") as f:
        for i in range(n):
            r = dict(rows[i % len(rows)])
            r["id"] = f"ar-{i:06d}"
            r["question"] = f"[{i}] " + r["question"]
            f.write(json.dumps(r) + "\n")
    shutil.copy(TASKS / "arithmetic_fewshot.jsonl", folder / "arithmetic_fewshot.jsonl")
    shutil.copy(TASKS / "arithmetic.yaml", folder / "arithmetic.yaml")
    (folder / "qpipe_overhead.py").write_text(PIPELINE)
    return folder / "arithmetic.yaml"


def assay_overhead(task: Path, n: int, shots: int) -> dict:
    from assay.bench.quality.run import QualityConfig, run_quality
    from assay.bench.quality.tasks import load_tasks

    os.chdir(task.parent)
    sys.path.insert(0, str(task.parent))
    t0 = time.perf_counter()
    tasks = load_tasks(str(task), shots=shots)
    tasks[0].contexts()
    prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    cfg = QualityConfig(model="python:qpipe_overhead:answer", tasks=str(task), shots=shots, concurrency=8)
    run = asyncio.run(run_quality(cfg, store=str(task.parent / "store.db")))
    total = time.perf_counter() - t0
    assert run.summary["tasks"]["arithmetic"]["scored_items"] == n
    return {"total_s": total, "per_item_ms": 1000 * total / n, "prepare_s": prep}


def assay_cli_overhead(task: Path, n: int, shots: int) -> dict:
    """The same run as a user starts it, so that it compares with lm-eval's (process start included)."""
    exe = Path(sys.executable).parent / "assay"
    cmd = [str(exe), "bench", "quality", "--model", "python:qpipe_overhead:answer", "--tasks", str(task),
           "--shots", str(shots), "--store", str(task.parent / "cli-store.db"), "--quiet", "--json"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=task.parent)
    total = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"assay bench quality failed: {p.stderr.strip()[-300:]}")
    return {"total_s": total, "per_item_ms": 1000 * total / n}


def lm_eval_overhead(task: Path, n: int, shots: int) -> dict | None:
    exe = LM_EVAL_VENV / "bin" / "lm_eval"
    if not exe.exists():
        return None
    out = task.parent / "lm-eval-out"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    cmd = [str(exe), "--model", "dummy", "--tasks", "arithmetic", "--include_path", str(task.parent),
           "--num_fewshot", str(shots), "--output_path", str(out), "--log_samples"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=task.parent)
    total = time.perf_counter() - t0
    if p.returncode != 0:
        print(f"lm-eval --model dummy failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
        return None
    return {"total_s": total, "per_item_ms": 1000 * total / n}


def sandbox_cost(rounds: int) -> dict:
    from assay.bench.quality.sandbox import Sandbox

    rows = [json.loads(x) for x in (TASKS / "code.jsonl").read_text().splitlines() if x.strip()]
    programs = [r["prompt"] + r["canonical_solution"] + "\n" + r["test"] + f"\ncheck({r['entry_point']})\n"
                for r in rows]
    box = Sandbox()
    sand, bare = [], []
    for _ in range(rounds):
        for prog in programs:
            t0 = time.perf_counter()
            res = box.run(prog)
            sand.append(time.perf_counter() - t0)
            assert res.status == "passed", res.reason
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                p = subprocess.run([sys.executable, "-I", "-c", prog], cwd=d, capture_output=True)
                bare.append(time.perf_counter() - t0)
                assert p.returncode == 0
    q = lambda v, f: statistics.quantiles(v, n=10)[8] if f == "p90" else statistics.median(v)  # noqa: E731
    return {"isolation": box.isolation, "samples": len(sand), "sandbox_median_ms": 1000 * q(sand, "m"),
            "sandbox_p90_ms": 1000 * q(sand, "p90"), "bare_median_ms": 1000 * q(bare, "m"),
            "bare_p90_ms": 1000 * q(bare, "p90")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--shots", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5, help="Rounds over the 12 code programs.")
    ap.add_argument("--no-lm-eval", action="store_true")
    a = ap.parse_args()
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        task = make_task(Path(d), a.items)
        mine = assay_overhead(task, a.items, a.shots)
        cli = assay_cli_overhead(task, a.items, a.shots)
        os.chdir(here)
        peer = None if a.no_lm_eval else lm_eval_overhead(task, a.items, a.shots)
    print(f"overhead per item, {a.items} items, {a.shots}-shot, a pipeline that answers at once (store: SQLite)")
    print(f"  assay bench quality     {mine['per_item_ms']:8.3f} ms/item   total {mine['total_s']:.2f} s "
          f"(load + build prompts {mine['prepare_s']:.2f} s)")
    print(f"  assay (CLI process)     {cli['per_item_ms']:8.3f} ms/item   total {cli['total_s']:.2f} s "
          "(process start included)")
    if peer:
        print(f"  lm-eval --model dummy   {peer['per_item_ms']:8.3f} ms/item   total {peer['total_s']:.2f} s "
              f"(process start included)   ratio lm-eval/assay CLI {peer['total_s'] / cli['total_s']:.2f}")
    else:
        print("  lm-eval --model dummy   (not run: no venv at benchmarks/.venvs/lm-eval, or --no-lm-eval)")
    s = sandbox_cost(a.rounds)
    print(f"sandbox cost per code sample ({s['samples']} runs of the shipped canonical solutions; "
          f"isolation: {s['isolation']})")
    print(f"  sandbox                 median {s['sandbox_median_ms']:7.1f} ms   p90 {s['sandbox_p90_ms']:7.1f} ms")
    print(f"  bare python -I          median {s['bare_median_ms']:7.1f} ms   p90 {s['bare_p90_ms']:7.1f} ms   "
          f"ratio {s['sandbox_median_ms'] / s['bare_median_ms']:.2f}")


if __name__ == "__main__":
    main()
