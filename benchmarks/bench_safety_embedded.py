"""How well the embedded safety scorer (no judge, no key) does on a hand-labeled set.

    python benchmarks/bench_safety_embedded.py [--data benchmarks/data/safety_labeled.jsonl]
                                               [--rules-only] [--show-errors]

For each harm category a row is a *defect* when its severity is >= 4 (Medium or High). The
true severity of a row for a category is its ``severity`` when ``category`` names it, the
value in ``also`` when it names it there, else 0, so every row counts for every category
(a violent text scored as sexual is a false positive for ``sexual``). Printed per category:
precision, recall, F1 and the counts, then a confusion table of severity bands (true band ×
predicted band) and the exact-band agreement; then precision and recall of the yes/no
checks (indirect_attack, protected_material) on their own rows. ``--rules-only`` turns the
packaged classifiers off (to see what they add); ``--show-errors`` lists every miss.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from assay.metrics.safety import rules as emb  # noqa: E402

BANDS = ("Very low", "Low", "Medium", "High")


def truth(row: dict, cat: str) -> int:
    if row["category"] == cat:
        return int(row["severity"])
    return int((row.get("also") or {}).get(cat, 0))


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else float("nan")
    r = tp / (tp + fn) if tp + fn else float("nan")
    f = 2 * p * r / (p + r) if tp else 0.0
    return p, r, f


def main() -> None:  # noqa: C901
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT / "benchmarks/data/safety_labeled.jsonl"))
    ap.add_argument("--rules-only", action="store_true")
    ap.add_argument("--show-errors", action="store_true")
    args = ap.parse_args()
    rows = [json.loads(line) for line in Path(args.data).read_text(encoding="utf-8").splitlines() if line.strip()]
    t0 = time.perf_counter()
    src = emb.sources()
    load_s = time.perf_counter() - t0
    if args.rules_only:
        emb._SOURCES.profanity = None
        emb._SOURCES.offensive = {}
        src = {"rules": src["rules"], "profanity": "off (--rules-only)", "offensivetext": "off (--rules-only)"}
    harm_rows = [r for r in rows if r["category"] in emb.HARMS]
    t1 = time.perf_counter()
    preds = [emb.assess(r["text"]) for r in harm_rows]
    per_text_ms = (time.perf_counter() - t1) / max(1, len(harm_rows)) * 1000
    print(f"data: {args.data} ({len(rows)} rows: {len(harm_rows)} harm rows)")
    print("sources: " + "; ".join(f"{k}: {v}" for k, v in src.items()))
    print(f"load {load_s:.2f} s; scoring {per_text_ms:.2f} ms per text (four categories)\n")
    print("defect = severity >= 4; 'dev' rows were written together with the rules (optimistic), "
          "'holdout' rows after the rules were frozen")
    errors = []
    for split in ("dev", "holdout", "all"):
        sel = [(r, pr) for r, pr in zip(harm_rows, preds)
               if split == "all" or r.get("split", "dev") == split]
        print(f"\n[{split}: {len(sel)} rows]")
        print(f"{'category':<16}{'positives':>10}{'TP':>5}{'FP':>5}{'FN':>5}{'TN':>6}{'precision':>11}"
              f"{'recall':>8}{'F1':>7}{'band agree':>12}")
        for cat in emb.HARMS:
            tp = fp = fn = tn = agree = 0
            for r, pr in sel:
                t = truth(r, cat)
                p = pr[cat].severity
                agree += emb.severity_label(t) == emb.severity_label(p)
                miss = None
                if t >= 4 and p >= 4:
                    tp += 1
                elif p >= 4:
                    fp += 1
                    miss = "FP"
                elif t >= 4:
                    fn += 1
                    miss = "FN"
                else:
                    tn += 1
                if miss and split != "all":
                    errors.append((cat, f"{miss} {split}", t, p, r["text"], pr[cat].reason()))
            p_, r_, f_ = prf(tp, fp, fn)
            print(f"{cat:<16}{tp + fn:>10}{tp:>5}{fp:>5}{fn:>5}{tn:>6}{p_:>11.2f}{r_:>8.2f}{f_:>7.2f}"
                  f"{agree / max(1, len(sel)):>12.2f}")
    print("\nconfusion, all rows (rows: true band, columns: predicted band; rows of the category only)")
    for cat in emb.HARMS:
        own = [(r, pr) for r, pr in zip(harm_rows, preds) if r["category"] == cat]
        print(f"  {cat}  ({len(own)} rows)")
        print("    " + f"{'true/pred':<12}" + "".join(f"{b:>10}" for b in BANDS))
        for a in BANDS:
            counts = [sum(1 for r, pr in own if emb.severity_label(truth(r, cat)) == a
                          and emb.severity_label(pr[cat].severity) == b) for b in BANDS]
            print("    " + f"{a:<12}" + "".join(f"{c:>10}" for c in counts))
    benign = [(r, pr) for r, pr in zip(harm_rows, preds) if int(r["severity"]) <= 1 and not r.get("also")]
    flagged = [(r, pr) for r, pr in benign if any(pr[c].severity >= 4 for c in emb.HARMS)]
    print(f"\nbenign rows (severity 0-1, many written to look risky): {len(benign)}; "
          f"flagged as a defect in any category: {len(flagged)}")

    print("\nyes/no checks")
    for cat in ("indirect_attack", "protected_material"):
        own = [r for r in rows if r["category"] == cat]
        tp = fp = fn = tn = 0
        for r in own:
            if cat == "indirect_attack":
                got = emb.indirect_attack(r["text"], None, [r.get("context") or ""])["label"]
            else:
                got = emb.protected_material(r["text"])["label"]
            want = bool(r["label"])
            tp += got and want
            fp += got and not want
            fn += want and not got
            tn += not got and not want
            if got != want:
                errors.append((cat, "FP" if got else "FN", want, got, r["text"], ""))
        p_, r_, f_ = prf(tp, fp, fn)
        print(f"  {cat:<20} rows {len(own):>3}  TP {tp} FP {fp} FN {fn} TN {tn}  precision {p_:.2f}  "
              f"recall {r_:.2f}  F1 {f_:.2f}")
    if args.show_errors:
        print("\nerrors")
        for cat, kind, t, p, text, reason in errors:
            print(f"  [{cat} {kind} true={t} pred={p}] {text[:110]}")
            if reason:
                print(f"      {reason[:220]}")


if __name__ == "__main__":
    main()
