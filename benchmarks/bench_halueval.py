"""How well the groundedness judge tells supported from unsupported answers: HaluEval QA.

Each HaluEval QA item has a question, the knowledge passage, a supported ("right") answer and
an unsupported ("hallucinated") one. Every answer becomes one row (query = question, contexts =
[knowledge], response = answer, label 1 = supported, 0 = unsupported) scored by the ``groundedness``
metric (1–5, threshold 3) two ways, each in a pass of its own:

* **probability** scoring (``judge_scoring="probability"``): on a local model, the expected score
  over the next-token distribution of "1".."5" after the prefilled ``{"score": `` (one forward
  pass, no text); on an endpoint, the logprob-weighted score of the generated answer;
* **parsed** scoring (``judge_scoring="parsed"``): the judge writes its JSON answer and the parser
  reads the score (re-asking once when unreadable); an answer that stays unreadable is an error.

For each: ROC AUC (rank-based, ties get average ranks; errors left out, and the count shown),
accuracy at the metric's threshold (``score >= 3`` means "supported"; errors count as wrong), the
share of rows that errored, the mean score of each class, and judgments per second (wall clock,
the judge's own concurrency; nothing cached).

    python benchmarks/bench_halueval.py [--limit 100] [--parsed-limit N] [--judge SPEC]
                                        [--modes probability,parsed] [--max-tokens 160] [--json OUT]

``--parsed-limit`` runs the parsed pass (which generates text: ~5x slower on the embedded judge)
on the first N questions only, and then also reports probability scoring on those same N.

With no ``--judge`` it uses the embedded judge (Gemma 3 270M, in-process). No network.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "halueval-qa" / "dev.jsonl"
METRIC = "groundedness"


def roc_auc(scores: Sequence[float], labels: Sequence[int]) -> float | None:
    """ROC AUC by the rank-sum (Mann-Whitney U) formula, tied scores sharing their average rank:
    ``(R1 - n1(n1+1)/2) / (n1·n0)`` with ``R1`` the rank sum of the positives. None when a class
    is empty."""
    n1 = sum(1 for y in labels if y == 1)
    n0 = len(labels) - n1
    if n1 == 0 or n0 == 0:
        return None
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        avg = (i + j) / 2 + 1          # ranks are 1-based
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        i = j + 1
    r1 = sum(r for r, y in zip(ranks, labels) if y == 1)
    return (r1 - n1 * (n1 + 1) / 2) / (n1 * n0)


def load_rows(path: Path, limit: int | None) -> list[tuple[dict[str, Any], int]]:
    rows: list[tuple[dict[str, Any], int]] = []
    with path.open(encoding="utf-8") as f:
        items = [json.loads(line) for line in f if line.strip()]
    for it in items[:limit] if limit else items:
        base = {"query": it["question"], "contexts": [{"content": it["knowledge"]}]}
        rows.append(({**base, "response": it["right_answer"]}, 1))
        rows.append(({**base, "response": it["hallucinated_answer"]}, 0))
    return rows


async def score_all(judge: Any, rows: list[tuple[dict[str, Any], int]], mode: str, max_tokens: int,
                    concurrency: int) -> tuple[list[Any], float]:
    from assay.metrics.base import REGISTRY, EvalContext, load_builtin_metrics
    from assay.records import Record

    load_builtin_metrics()
    metric = REGISTRY[METRIC]
    ctx = EvalContext(judge=judge, options={"judge_scoring": mode, "judge_max_tokens": max_tokens})
    sem = asyncio.Semaphore(concurrency)
    done = [0]

    async def one(row: dict[str, Any]) -> Any:
        async with sem:
            out = await metric.score(Record(**row), ctx, None)
            done[0] += 1
            if done[0] % 20 == 0:
                print(f"  {mode}: {done[0]}/{len(rows)}", file=sys.stderr, flush=True)
            return out[METRIC]

    t0 = time.perf_counter()
    scores = await asyncio.gather(*(one(r) for r, _ in rows))
    return list(scores), time.perf_counter() - t0


def summarize(scores: list[Any], labels: list[int], threshold: float, wall: float) -> dict[str, Any]:
    ok = [(s.score, y) for s, y in zip(scores, labels) if s.status == "completed" and s.score is not None]
    auc = roc_auc([s for s, _ in ok], [y for _, y in ok])
    correct = sum(1 for s, y in zip(scores, labels)
                  if s.status == "completed" and s.score is not None and (s.score >= threshold) == (y == 1))

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    distinct = sorted({round(float(s), 4) for s, _ in ok})
    return {
        "rows": len(scores), "completed": len(ok), "errors": len(scores) - len(ok),
        "roc_auc": auc, "accuracy": correct / len(scores) if scores else None,
        "mean_score_supported": mean([s for s, y in ok if y == 1]),
        "mean_score_unsupported": mean([s for s, y in ok if y == 0]),
        "distinct_scores": len(distinct),
        "predicted_supported": sum(1 for s, _ in ok if s >= threshold),
        "seconds": wall, "judgments_per_s": len(scores) / wall if wall > 0 else None,
    }


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if math.isfinite(v) else str(v)
    return str(v)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from assay.metrics.base import REGISTRY, load_builtin_metrics
    from assay.models import build_judge, embedded_judge

    load_builtin_metrics()
    threshold = float(REGISTRY[METRIC].threshold)
    rows = load_rows(Path(args.data), args.limit)
    labels = [y for _, y in rows]
    model = embedded_judge() if not args.judge else args.judge
    judge = build_judge(model, cache=None)
    conc = args.concurrency or judge.default_concurrency
    print(f"judge: {judge.name}; {len(rows) // 2} questions, {len(rows)} answers ({sum(labels)} supported); "
          f"metric {METRIC}, threshold {threshold:g}; concurrency {conc}", flush=True)
    report: dict[str, Any] = {"judge": judge.name, "questions": len(rows) // 2, "answers": len(rows),
                              "metric": METRIC, "threshold": threshold, "modes": {}}
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    sub = 2 * args.parsed_limit if args.parsed_limit else len(rows)
    kept: dict[str, list[Any]] = {}
    for mode in modes:
        use = rows if mode != "parsed" else rows[:sub]
        before = judge.stats.snapshot()
        scores, wall = await score_all(judge, use, mode, args.max_tokens, conc)
        kept[mode] = scores
        s = summarize(scores, labels[:len(use)], threshold, wall)
        s["judge_calls"] = judge.stats.since(before)
        errs: dict[str, int] = {}
        for sc in scores:
            if sc.status != "completed":
                errs[str(sc.reason)[:80]] = errs.get(str(sc.reason)[:80], 0) + 1
        s["error_reasons"] = errs
        report["modes"][mode] = s
    if "parsed" in kept and "probability" in kept and sub < len(rows):
        # probability scoring on the parsed pass's questions, for a like-for-like comparison
        part = kept["probability"][:sub]
        whole = report["modes"]["probability"]
        s = summarize(part, labels[:sub], threshold, whole["seconds"] * sub / len(rows))
        s["judge_calls"], s["error_reasons"] = None, {}
        report["modes"][f"probability (first {sub // 2} questions)"] = s
    await judge.aclose()
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=100, help="questions to use (2 answers each); 0 = all 250")
    ap.add_argument("--judge", default=None, help="judge spec (default: the embedded judge)")
    ap.add_argument("--modes", default="probability,parsed", help="comma-separated: probability, parsed")
    ap.add_argument("--parsed-limit", type=int, default=None,
                    help="questions for the (slower) parsed pass; default: --limit")
    ap.add_argument("--max-tokens", type=int, default=160, help="generation budget of a parsed judgment")
    ap.add_argument("--concurrency", type=int, default=None, help="judgments in flight (default: the backend's)")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()
    os.environ.setdefault("ASSAY_CACHE", "off")
    report = asyncio.run(main_async(args))
    print()
    print(f"| scoring | answers | errors | ROC AUC | accuracy @ {report['threshold']:g} | mean supported | "
          f"mean unsupported | distinct scores | judgments/s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode, s in report["modes"].items():
        print(f"| {mode} | {s['rows']} | {s['errors']} | {fmt(s['roc_auc'])} | {fmt(s['accuracy'])} | "
              f"{fmt(s['mean_score_supported'], 2)} | {fmt(s['mean_score_unsupported'], 2)} | "
              f"{s['distinct_scores']} | {fmt(s['judgments_per_s'], 2)} |")
    for mode, s in report["modes"].items():
        c = s["judge_calls"]
        if c is None:
            continue
        print(f"{mode}: {s['seconds']:.0f} s; {c['calls']} judge calls, {c['prompt_tokens']:,} prompt + "
              f"{c['completion_tokens']:,} completion tokens; {s['predicted_supported']} of {s['completed']} "
              f"scored as supported" + (f"; errors: {s['error_reasons']}" if s["error_reasons"] else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
