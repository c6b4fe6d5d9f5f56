"""The question-typed support scorer against the support scorer v1 (issue 32 item 6, second attempt).

The rule for keeping it was fixed before it was designed: ``benchmarks/typed_support_rule.md``.
Three sets of (question, context, right answer, wrong answer) pairs:

* **context words**: wrong answers made of the context's own words. Fit: w01–w30
  (``calibration/groundedness_context_words.jsonl``); held out: w31–w60
  (``calibration/groundedness_context_words_held.jsonl``, written before the design);
* **written**: ``calibration/groundedness.jsonl`` (odd groups fit, even groups held out);
* **HaluEval QA dev** (read from the file named by ``--data``, as ``bench_halueval.py`` reads it;
  questions 1–100 fit, 101–250 held out).

Each answer gets v1's support share (``support``; no content word counts as 1.0) and the typed
score (the share, multiplied by ``MISMATCH_FACTOR`` when the answer gives nothing of what the
question asks and by ``DISPLACED_FACTOR`` when another candidate of that kind sits nearer the
question's words). Each scorer's cut (0.05 steps) is fitted on the fit halves of the written set and
HaluEval (v1's rule). Per set: ROC AUC of right vs wrong, agreement at the cut, answer length alone
(the shorter answer ranked higher), and the paired differences with 95% bootstrap intervals (2,000
resamples of pairs, seed 0).

    python benchmarks/bench_typed_support.py fit  [--data dev.jsonl]   # design figures (fit rows only)
    python benchmarks/bench_typed_support.py held [--data dev.jsonl]   # the held-out measurement
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_halueval import roc_auc  # noqa: E402
from bench_judge_fidelity import best_cut  # noqa: E402

CAL = ROOT / "src" / "assay" / "judges" / "calibration"
CANDIDATES = [ROOT.parent / "shared" / "data" / "halueval-qa" / "dev.jsonl",
              ROOT.parents[1] / "shared" / "data" / "halueval-qa" / "dev.jsonl"]
RESAMPLES = 2000


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def load_sets(split: str, data: Path) -> dict[str, list[dict[str, Any]]]:
    """The pairs of each set in ``split`` (fit / held): dicts with query, context, good, bad."""
    cw = _jsonl(CAL / ("groundedness_context_words.jsonl" if split == "fit" else
                       "groundedness_context_words_held.jsonl"))
    written = [p for i, p in enumerate(_jsonl(CAL / "groundedness.jsonl")) if (i % 2 == 0) == (split == "fit")]
    halu = []
    for i, it in enumerate(_jsonl(data)):
        if (i < 100) == (split == "fit"):
            halu.append({"query": it["question"], "context": it["knowledge"], "good": it["right_answer"],
                         "bad": it["hallucinated_answer"]})
    return {"context words": cw, "written": written, "HaluEval": halu}


def v1(query: str, answer: str, context: str) -> float:
    from assay.judges.support import support

    share = support(answer, [context]).share
    return 1.0 if share is None else share


def typed(query: str, answer: str, context: str) -> float:
    from assay.judges.typed import typed_support

    share = typed_support(query, answer, [context]).share
    return 1.0 if share is None else share


def fit_cut(score: Callable[[str, str, str], float], sets: Sequence[list[dict[str, Any]]]) -> float:
    """v1's rule: of 0.50, 0.55 … 1.00 the cut with the best mean agreement over ``sets``."""
    scored = [[(score(p["query"], p[k], p["context"]), k == "good") for p in s for k in ("good", "bad")]
              for s in sets]
    return best_cut(scored)[0]


def _auc(pairs: Sequence[tuple[float, float]]) -> float:
    return roc_auc([g for g, _ in pairs] + [b for _, b in pairs], [1] * len(pairs) + [0] * len(pairs)) or 0.0


def _agree(pairs: Sequence[tuple[float, float]], cut: float) -> float:
    return sum((g >= cut) + (b < cut) for g, b in pairs) / (2 * len(pairs))


def compare(pairs: list[dict[str, Any]], cuts: dict[str, float]) -> dict[str, Any]:
    """AUC and agreement of v1, the typed scorer and answer length alone, with paired intervals."""
    a = [(v1(p["query"], p["good"], p["context"]), v1(p["query"], p["bad"], p["context"])) for p in pairs]
    b = [(typed(p["query"], p["good"], p["context"]), typed(p["query"], p["bad"], p["context"])) for p in pairs]
    ln = [(-len(p["good"].split()), -len(p["bad"].split())) for p in pairs]
    stats = {"auc_v1": _auc(a), "auc_typed": _auc(b), "auc_length": _auc(ln),
             "agree_v1": _agree(a, cuts["v1"]), "agree_typed": _agree(b, cuts["typed"])}
    rng = random.Random(0)
    diffs: dict[str, list[float]] = {"auc_typed-v1": [], "auc_typed-length": [], "agree_typed-v1": []}
    n = len(pairs)
    for _ in range(RESAMPLES):
        idx = [rng.randrange(n) for _ in range(n)]
        ra, rb, rl = [a[i] for i in idx], [b[i] for i in idx], [ln[i] for i in idx]
        diffs["auc_typed-v1"].append(_auc(rb) - _auc(ra))
        diffs["auc_typed-length"].append(_auc(rb) - _auc(rl))
        diffs["agree_typed-v1"].append(_agree(rb, cuts["typed"]) - _agree(ra, cuts["v1"]))
    for key, xs in diffs.items():
        xs.sort()
        stats[key] = [round(xs[int(0.025 * RESAMPLES)], 3), round(xs[int(0.975 * RESAMPLES) - 1], 3)]
    stats["pairs"] = n
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in stats.items()}


def verdict(res: dict[str, dict[str, Any]]) -> list[str]:
    """The rule of benchmarks/typed_support_rule.md; the list of the conditions that fail."""
    fails = []
    cw = res["context words"]
    if cw["auc_typed-v1"][0] <= 0:
        fails.append("context-words AUC over v1: interval not above 0")
    if cw["auc_typed-length"][0] <= 0:
        fails.append("context-words AUC over length alone: interval not above 0")
    for name in ("written", "HaluEval"):
        if res[name]["agree_typed-v1"][0] < 0:
            fails.append(f"{name}: agreement difference interval below 0")
        if res[name]["auc_typed"] < res[name]["auc_v1"] - 0.01:
            fails.append(f"{name}: AUC fell by more than 0.01")
    return fails


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("split", choices=("fit", "held"))
    ap.add_argument("--data", default=None, help="HaluEval QA dev.jsonl (default: shared/data/halueval-qa/)")
    args = ap.parse_args()
    data = Path(args.data) if args.data else next((p for p in CANDIDATES if p.is_file()), None)
    if data is None or not data.is_file():
        raise SystemExit(f"HaluEval QA dev not found (tried {', '.join(map(str, CANDIDATES))}); pass --data")
    fit = load_sets("fit", data)
    cuts = {"v1": fit_cut(v1, [fit["written"], fit["HaluEval"]]),
            "typed": fit_cut(typed, [fit["written"], fit["HaluEval"]])}
    print(f"cuts (fitted on the fit halves of the written set and HaluEval): {cuts}")
    res = {name: compare(pairs, cuts) for name, pairs in load_sets(args.split, data).items()}
    print(f"\n{args.split} rows\n")
    print("| set | pairs | AUC v1 | AUC typed | typed − v1 [95%] | length alone | typed − length [95%] | "
          "agreement v1 | agreement typed | typed − v1 [95%] |")
    print("|---|---:|---:|---:|---|---:|---|---:|---:|---|")
    for name, r in res.items():
        print(f"| {name} | {r['pairs']} | {r['auc_v1']:.3f} | {r['auc_typed']:.3f} | {r['auc_typed-v1']} | "
              f"{r['auc_length']:.3f} | {r['auc_typed-length']} | {r['agree_v1']:.3f} | {r['agree_typed']:.3f} | "
              f"{r['agree_typed-v1']} |")
    fails = verdict(res)
    print("\nrule (benchmarks/typed_support_rule.md): " + ("KEPT" if not fails else "NOT KEPT: " + "; ".join(fails)))


if __name__ == "__main__":
    main()
