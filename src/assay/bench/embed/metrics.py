"""Scores of an embedding model on one task, computed from its vectors the way MTEB computes them.

No model is called here: :func:`score_task` takes an :class:`~assay.bench.embed.tasks.EmbedTask` and the
vectors of the texts it needs (``task.texts()``) and returns :class:`TaskScores`. The metric names, the
similarity functions and the statistics are MTEB's, so a figure here reads like the same figure there:

- ``classification``: a logistic regression (``max_iter=100``) trained on the train texts' vectors,
  the train set undersampled to ``samples_per_label`` per label (default 8), ``n_experiments``
  (default 10) experiments, each reshuffling one index list with a generator seeded afresh (as MTEB);
  ``accuracy`` (main), ``f1``, ``precision``, ``recall`` (macro) and their ``_weighted`` forms (and ``ap``,
  ``ap_weighted`` for two labels), averaged over the experiments.
- ``clustering``: mini-batch k-means (k = number of labels, batch size 500, ``n_init="auto"``,
  seeded) on the vectors; ``v_measure`` of the clusters against the labels.
- ``pair``: cosine, dot, euclidean and manhattan scores of each pair; per score the average precision
  (``cosine_ap``, ...), and accuracy / F1 / precision / recall at the threshold that maximises each
  (MTEB's threshold search: sorted scores, a threshold between neighbours that differ, never between
  tied scores); ``max_*`` over the four; ``max_ap`` is the main score.
- ``rerank``: per query, the candidates (positives then negatives) ranked by cosine; ``map`` (main) is
  the mean of sklearn's average precision, ``mrr_at_10`` the mean reciprocal rank of the first
  positive within the top 10. Queries without a positive or without a negative are skipped (as MTEB).
- ``retrieval``: cosine scores of every query against the corpus (a document whose id equals the
  query id left out unless the task says ``ignore_identical_ids: false``), the top 1000 kept;
  ``ndcg_at_k``, ``map_at_k``, ``recall_at_k``, ``precision_at_k``, ``hit_rate_at_k`` (trec_eval's
  ``success``) with trec_eval's semantics (ties broken by document id, descending; graded
  gains for nDCG; relevance <= 0 is not relevant; the ideal ranking from every judged document;
  a query with no relevant document scores 0), and ``mrr_at_k`` as MTEB computes it (the reciprocal
  rank of the first relevant document within the top k: trec_eval's ``recip_rank`` has no cut-off).
  Queries without any qrels line are not scored (trec_eval does the same). ``ndcg_at_10`` is main.
- ``sts``: cosine similarity and negated manhattan / euclidean distances against the gold scores;
  ``cosine_spearman`` (main), ``cosine_pearson``, ``manhattan_*``, ``euclidean_*``.
- ``summarization``: each machine summary scored by its highest cosine with the text's human
  summaries; Spearman and Pearson of those against the human relevance scores, per text, averaged
  (``cosine_spearman`` is main). A text whose human scores, or whose predicted scores, are all equal is
  skipped (as MTEB).

``benchmarks/bench_embed_conformance.py`` checks all of this against MTEB's own code on the same vectors.
``TaskScores.units`` keeps, per unit (query, pair, test item, text), what the main score needs so that
:func:`main_statistic` can recompute it on a resample of the units (bootstrap intervals, paired
comparisons of two models). Changing any of this changes :data:`METRIC_VERSION`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["METRIC_VERSION", "DEFAULT_MAIN_SCORES", "MAIN_SCORE_CHOICES", "RETRIEVAL_K", "TaskScores",
           "score_task", "main_statistic", "unit_count", "retrieval_scores", "pair_scores", "sts_scores"]

METRIC_VERSION = "1"

DEFAULT_MAIN_SCORES = {"classification": "accuracy", "clustering": "v_measure", "pair": "max_ap",
                       "rerank": "map", "retrieval": "ndcg_at_10", "sts": "cosine_spearman",
                       "summarization": "cosine_spearman"}
RETRIEVAL_K = (1, 3, 5, 10, 20, 100, 1000)
_SIMS = ("cosine", "dot", "euclidean", "manhattan")
_RETRIEVAL_METRICS = ("ndcg", "map", "recall", "precision", "mrr", "hit_rate")
# The main scores a task may declare: each one can be recomputed from the units by main_statistic.
MAIN_SCORE_CHOICES = {
    "classification": ("accuracy", "f1", "f1_weighted"),
    "clustering": ("v_measure",),
    "pair": tuple(f"{s}_ap" for s in ("max",) + _SIMS),
    "rerank": ("map", "mrr_at_10"),
    "retrieval": tuple(f"{m}_at_{k}" for m in _RETRIEVAL_METRICS for k in RETRIEVAL_K),
    "sts": tuple(f"{s}_{c}" for s in ("cosine", "euclidean", "manhattan") for c in ("spearman", "pearson")),
    "summarization": ("cosine_spearman", "cosine_pearson"),
}
MAX_RETRIEVED = 1000       # MTEB keeps the top 1000 documents per query
SAMPLES_PER_LABEL = 8      # MTEB's classification defaults
N_EXPERIMENTS = 10
LOGREG_MAX_ITER = 100
KMEANS_BATCH = 500


@dataclass
class TaskScores:
    """Every score of one task (MTEB's names), which one is main, and the per-unit arrays behind it."""

    scores: dict[str, float]
    main_score: str
    units: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def main(self) -> float:
        return self.scores[self.main_score]


# --------------------------------------------------------------------------------------------- helpers
def _stack(vectors: Mapping[tuple[str, str | None], np.ndarray], texts: Sequence[str],
           input_type: str | None) -> np.ndarray:
    if not len(texts):
        return np.zeros((0, 0), dtype=np.float64)
    return np.stack([np.asarray(vectors[(t, input_type)], dtype=np.float64) for t in texts])


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero), so a dot product is the cosine."""
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def _corr(kind: str, a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import pearsonr, spearmanr

    if len(a) < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return float("nan")
    return float((spearmanr if kind == "spearman" else pearsonr)(a, b)[0])


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


# --------------------------------------------------------------------------------------------- STS
def sts_scores(gold: np.ndarray, cosine: np.ndarray, euclidean: np.ndarray, manhattan: np.ndarray,
               **_other: np.ndarray) -> dict[str, float]:
    """Pearson and Spearman of each similarity against the gold scores (distances enter negated)."""
    out = {}
    for name, sim in (("cosine", cosine), ("euclidean", euclidean), ("manhattan", manhattan)):
        for kind in ("pearson", "spearman"):
            out[f"{name}_{kind}"] = _corr(kind, gold, sim)
    return out


def _paired(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """The four similarities of row i of ``a`` with row i of ``b``; distances negated (higher = closer)."""
    return {"cosine": np.sum(_unit(a) * _unit(b), axis=1), "dot": np.sum(a * b, axis=1),
            "euclidean": -np.linalg.norm(a - b, axis=1), "manhattan": -np.sum(np.abs(a - b), axis=1)}


def _score_sts(task: Any, vectors: Mapping) -> TaskScores:
    d = task.data
    sims = _paired(_stack(vectors, d.sentence1, None), _stack(vectors, d.sentence2, None))
    gold = np.asarray(d.score, dtype=np.float64)
    units = {"gold": gold, "cosine": sims["cosine"], "euclidean": sims["euclidean"], "manhattan": sims["manhattan"]}
    return TaskScores(sts_scores(gold, **sims), task.main_score, units)


# --------------------------------------------------------------------------------------------- pair
def _walk(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MTEB's threshold search: pairs sorted from most to least similar (stable); a threshold after pair i
    (not the last, and not between two equal scores) calls pairs 0..i positive. Returns the candidate
    positions, true positives so far and the sorted scores."""
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    cut = np.flatnonzero(s[:-1] != s[1:])
    tp = np.cumsum(y == 1)
    return cut, tp, s


def _best_accuracy(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Best accuracy over the thresholds of :func:`_walk` (the first best; 0 when there is none) and its
    threshold, half-way between the two neighbouring scores."""
    cut, tp, s = _walk(scores, labels)
    if not len(cut):
        return 0.0, -1.0
    n, negatives = len(labels), int((labels == 0).sum())
    tn = negatives - ((cut + 1) - tp[cut])
    acc = (tp[cut] + tn) / n
    j = int(np.argmax(acc))
    return float(acc[j]), float((s[cut[j]] + s[cut[j] + 1]) / 2)


def _best_f1(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float, float, float]:
    """Same walk for F1: (f1, precision, recall, threshold) at the first best F1; zeros when none is > 0."""
    cut, tp, s = _walk(scores, labels)
    positives = int((labels == 1).sum())
    if not len(cut) or positives == 0:
        return 0.0, 0.0, 0.0, 0.0
    hits = tp[cut].astype(np.float64)
    precision, recall = hits / (cut + 1), hits / positives
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(hits > 0, 2 * precision * recall / (precision + recall), 0.0)
    j = int(np.argmax(f1))
    if f1[j] <= 0:
        return 0.0, 0.0, 0.0, 0.0
    return float(f1[j]), float(precision[j]), float(recall[j]), float((s[cut[j]] + s[cut[j] + 1]) / 2)


def pair_scores(sims: Mapping[str, np.ndarray], labels: np.ndarray) -> dict[str, float]:
    """AP, best accuracy and best F1 (with its precision and recall) per similarity, and the max of each
    over the four similarities (distances are passed negated: higher = more similar)."""
    from sklearn.metrics import average_precision_score

    labels = np.asarray(labels)
    out: dict[str, float] = {}
    for name in _SIMS:
        s = np.asarray(sims[name], dtype=np.float64)
        acc, _ = _best_accuracy(s, labels)
        f1, p, r, _ = _best_f1(s, labels)
        ap = float(average_precision_score(labels, s)) if 0 < labels.sum() < len(labels) else float("nan")
        out.update({f"{name}_accuracy": acc, f"{name}_f1": f1, f"{name}_precision": p, f"{name}_recall": r,
                    f"{name}_ap": ap})
    for m in ("accuracy", "f1", "precision", "recall", "ap"):
        out[f"max_{m}"] = max(out[f"{s}_{m}"] for s in _SIMS)
    return out


def _score_pair(task: Any, vectors: Mapping) -> TaskScores:
    d = task.data
    sims = _paired(_stack(vectors, d.sentence1, None), _stack(vectors, d.sentence2, None))
    labels = np.asarray(d.label, dtype=np.float64)
    return TaskScores(pair_scores(sims, labels), task.main_score, {"labels": labels, **sims})


# --------------------------------------------------------------------------------------------- classification
def _classification_round(train_x, train_y, test_x, idxs, samples_per_label: int, seed: int):
    from sklearn.linear_model import LogisticRegression

    # One index array, reshuffled in place every experiment by a generator seeded afresh (as MTEB):
    # the first samples_per_label of each label in the new order are the training set.
    np.random.RandomState(seed).shuffle(idxs)
    counts: dict[Any, int] = {}
    keep = []
    for i in idxs:
        if counts.get(train_y[i], 0) < samples_per_label:
            counts[train_y[i]] = counts.get(train_y[i], 0) + 1
            keep.append(i)
    clf = LogisticRegression(random_state=seed, max_iter=LOGREG_MAX_ITER)
    import warnings

    with warnings.catch_warnings():         # max_iter=100 is MTEB's; lbfgs may not converge: same as there
        warnings.simplefilter("ignore")
        clf.fit(train_x[keep], train_y[keep])
        return clf.predict(test_x)


def _classification_figures(gold: np.ndarray, preds: Sequence[np.ndarray]) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, average_precision_score, f1_score, precision_score, recall_score

    rows = []
    binary = len(np.unique(gold)) == 2
    for p in preds:
        r = {"accuracy": accuracy_score(gold, p)}
        for avg, suffix in (("macro", ""), ("weighted", "_weighted")):
            r["f1" + suffix] = f1_score(gold, p, average=avg)
            r["precision" + suffix] = precision_score(gold, p, average=avg, zero_division=0)
            r["recall" + suffix] = recall_score(gold, p, average=avg, zero_division=0)
        if binary:
            r["ap"] = average_precision_score(gold, p, average="macro")
            r["ap_weighted"] = average_precision_score(gold, p, average="weighted")
        rows.append(r)
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def _score_classification(task: Any, vectors: Mapping, seed: int) -> TaskScores:
    d = task.data
    train_x, test_x = _stack(vectors, d.train_text, None), _stack(vectors, d.test_text, None)
    labels = sorted(set(d.train_label) | set(d.test_label))
    code = {lab: i for i, lab in enumerate(labels)}
    train_y = np.array([code[v] for v in d.train_label])
    test_y = np.array([code[v] for v in d.test_label])
    idxs = list(range(len(train_y)))
    preds = [_classification_round(train_x, train_y, test_x, idxs, d.samples_per_label, seed)
             for _ in range(d.n_experiments)]
    scores = _classification_figures(test_y, preds)
    units = {"gold": test_y.astype(np.float64),
             "correct": np.mean([p == test_y for p in preds], axis=0).astype(np.float64),
             **{f"pred_{e}": p.astype(np.float64) for e, p in enumerate(preds)}}
    return TaskScores(scores, task.main_score, units)


# --------------------------------------------------------------------------------------------- clustering
def _score_clustering(task: Any, vectors: Mapping, seed: int) -> TaskScores:
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.metrics import v_measure_score

    d = task.data
    x = _stack(vectors, d.text, None)
    labels = sorted(set(d.label))
    gold = np.array([labels.index(v) for v in d.label])
    km = MiniBatchKMeans(n_clusters=len(labels), batch_size=KMEANS_BATCH, n_init="auto", random_state=seed)
    pred = km.fit(x).labels_
    scores = {"v_measure": float(v_measure_score(gold, pred))}
    return TaskScores(scores, task.main_score, {"gold": gold.astype(np.float64), "predicted": pred.astype(np.float64)})


# --------------------------------------------------------------------------------------------- rerank
def _score_rerank(task: Any, vectors: Mapping) -> TaskScores:
    from sklearn.metrics import average_precision_score

    d = task.data
    aps, rrs = [], []
    for query, pos, neg in zip(d.query, d.positive, d.negative):
        if not pos or not neg:
            continue
        q = _unit(np.asarray(vectors[(query, "query")], dtype=np.float64))
        docs = _unit(_stack(vectors, list(pos) + list(neg), "document"))
        sims = docs @ q
        relevant = np.array([1] * len(pos) + [0] * len(neg))
        aps.append(float(average_precision_score(relevant, sims)))
        top = relevant[np.argsort(-sims, kind="stable")][:10]
        hit = np.flatnonzero(top)
        rrs.append(1.0 / (hit[0] + 1) if len(hit) else 0.0)
    units = {"map": np.array(aps), "mrr_at_10": np.array(rrs)}
    return TaskScores({"map": _mean(units["map"]), "mrr_at_10": _mean(units["mrr_at_10"])}, task.main_score, units)


# --------------------------------------------------------------------------------------------- retrieval
def retrieval_scores(scores: np.ndarray, doc_ids: Sequence[str], qrels: Sequence[Mapping[str, int]],
                     query_ids: Sequence[str] | None = None, ks: Sequence[int] = RETRIEVAL_K,
                     max_retrieved: int = MAX_RETRIEVED) -> dict[str, np.ndarray]:
    """Per-query ``ndcg_at_k``, ``map_at_k``, ``recall_at_k``, ``precision_at_k``, ``mrr_at_k``, ``hit_rate_at_k``.

    ``scores[q, d]`` is query q's score for ``doc_ids[d]`` (``nan`` = not retrieved); ``qrels[q]`` maps doc id
    to graded relevance. trec_eval's order: score descending, ties by document id descending. A document
    whose id equals ``query_ids[q]`` is left out (as MTEB). Documents judged but absent from ``doc_ids``
    still count as relevant (they are never retrieved)."""
    doc_ids = list(doc_ids)
    n_docs = len(doc_ids)
    # rank of each doc id in descending id order: ties in score go to the larger id first
    tiebreak = np.empty(n_docs, dtype=np.int64)
    tiebreak[np.argsort(np.array(doc_ids, dtype=object), kind="stable")[::-1]] = np.arange(n_docs)
    position = {d: i for i, d in enumerate(doc_ids)}
    ks = tuple(ks)
    out = {f"{m}_at_{k}": np.zeros(len(qrels)) for m in _RETRIEVAL_METRICS for k in ks}
    disc = 1.0 / np.log2(np.arange(2, max_retrieved + 2))
    for q, judged in enumerate(qrels):
        s = np.array(scores[q], dtype=np.float64)
        if query_ids is not None and query_ids[q] in position:
            s[position[query_ids[q]]] = np.nan
        valid = np.flatnonzero(~np.isnan(s))
        if len(valid) > max_retrieved:
            cut = np.partition(s[valid], len(valid) - max_retrieved)[len(valid) - max_retrieved]
            valid = valid[s[valid] >= cut]          # every doc tied at the cut competes by id below
        order = valid[np.lexsort((tiebreak[valid], -s[valid]))][:max_retrieved]
        rel = np.array([judged.get(doc_ids[i], 0) for i in order], dtype=np.float64)
        gains_all = np.sort(np.array([v for v in judged.values() if v > 0], dtype=np.float64))[::-1]
        n_rel = len(gains_all)
        is_rel = rel > 0
        gain = np.where(is_rel, rel, 0.0)
        hits = np.cumsum(is_rel)
        prec_at = hits / np.arange(1, len(rel) + 1) if len(rel) else np.zeros(0)
        first = int(np.argmax(is_rel)) if is_rel.any() else None
        for k in ks:
            top = min(k, len(rel))
            dcg = float(np.sum(gain[:top] * disc[:top]))
            ideal = gains_all[:k]
            idcg = float(np.sum(ideal * disc[:len(ideal)]))
            h = int(hits[top - 1]) if top else 0
            out[f"ndcg_at_{k}"][q] = dcg / idcg if idcg > 0 else 0.0
            out[f"map_at_{k}"][q] = float(np.sum(prec_at[:top][is_rel[:top]])) / n_rel if n_rel else 0.0
            out[f"recall_at_{k}"][q] = h / n_rel if n_rel else 0.0
            out[f"precision_at_{k}"][q] = h / k
            out[f"mrr_at_{k}"][q] = 1.0 / (first + 1) if first is not None and first < k else 0.0
            out[f"hit_rate_at_{k}"][q] = 1.0 if h > 0 else 0.0
    return out


def _score_retrieval(task: Any, vectors: Mapping) -> TaskScores:
    d = task.data
    by_query: dict[str, dict[str, int]] = {}
    for qid, did, rel in d.qrels:
        by_query.setdefault(qid, {})[did] = rel
    qpos = {qid: i for i, qid in enumerate(d.query_ids)}
    scored = [qid for qid in d.query_ids if qid in by_query]
    docs = _unit(_stack(vectors, d.corpus_texts, "document"))
    per_query: dict[str, list[np.ndarray]] = {}
    chunk = 256
    for start in range(0, len(scored), chunk):
        ids = scored[start:start + chunk]
        qv = _unit(_stack(vectors, [d.query_texts[qpos[q]] for q in ids], "query"))
        part = retrieval_scores(qv @ docs.T, d.corpus_ids, [by_query[q] for q in ids],
                                ids if d.ignore_identical_ids else None)
        for name, arr in part.items():
            per_query.setdefault(name, []).append(arr)
    arrays = {name: np.concatenate(parts) for name, parts in per_query.items()}
    scores = {name: _mean(arr) for name, arr in arrays.items()}
    keep = {f"{m}_at_10" for m in ("ndcg", "map", "recall", "precision", "mrr")} | {task.main_score}
    return TaskScores(scores, task.main_score, {k: v for k, v in arrays.items() if k in keep})


# --------------------------------------------------------------------------------------------- summarization
def _score_summarization(task: Any, vectors: Mapping) -> TaskScores:
    d = task.data
    spear, pear = [], []
    for humans, machines, relevance in zip(d.human_summaries, d.machine_summaries, d.relevance):
        gold = np.asarray(relevance, dtype=np.float64)
        if len(set(relevance)) == 1:          # as MTEB: a text whose scores are all equal says nothing
            continue
        h = _unit(_stack(vectors, humans, None))
        m = _unit(_stack(vectors, machines, None))
        pred = (m @ h.T).max(axis=1)
        if np.all(pred == pred[0]):
            continue
        spear.append(_corr("spearman", gold, pred))
        pear.append(_corr("pearson", gold, pred))
    units = {"cosine_spearman": np.array(spear), "cosine_pearson": np.array(pear)}
    scores = {k: float(np.nanmean(v)) if len(v) and not np.all(np.isnan(v)) else float("nan")
              for k, v in units.items()}
    return TaskScores(scores, task.main_score, units)


# --------------------------------------------------------------------------------------------- entry points
def score_task(task: Any, vectors: Mapping[tuple[str, str | None], np.ndarray], *, seed: int = 42) -> TaskScores:
    """All scores of ``task`` from ``vectors`` (keyed by ``(text, input_type)`` as ``task.texts()`` lists them)."""
    kind = task.type
    if kind == "sts":
        return _score_sts(task, vectors)
    if kind == "pair":
        return _score_pair(task, vectors)
    if kind == "classification":
        return _score_classification(task, vectors, seed)
    if kind == "clustering":
        return _score_clustering(task, vectors, seed)
    if kind == "rerank":
        return _score_rerank(task, vectors)
    if kind == "retrieval":
        return _score_retrieval(task, vectors)
    if kind == "summarization":
        return _score_summarization(task, vectors)
    raise ValueError(f"unknown embedding task type {kind!r}")


def main_statistic(task_type: str, units: Mapping[str, np.ndarray], idx: np.ndarray,
                   main_score: str | None = None) -> float:
    """The main score recomputed on the units at ``idx`` (a resample, with repeats allowed).

    ``main_score`` is the task's (``TaskScores.main_score``); left out, the type's default."""
    main = main_score or DEFAULT_MAIN_SCORES[task_type]
    idx = np.asarray(idx, dtype=np.int64)
    if task_type in ("retrieval", "rerank", "summarization"):
        values = np.asarray(units[main])[idx]
        values = values[~np.isnan(values)]
        return _mean(values)
    if task_type == "sts":
        sim, kind = main.rsplit("_", 1)
        return _corr(kind, np.asarray(units["gold"])[idx], np.asarray(units[sim])[idx])
    if task_type == "pair":
        from sklearn.metrics import average_precision_score

        labels = np.asarray(units["labels"])[idx]
        if not 0 < labels.sum() < len(labels):
            return float("nan")
        sims = _SIMS if main == "max_ap" else (main[:-3],)
        return max(float(average_precision_score(labels, np.asarray(units[s])[idx])) for s in sims)
    if task_type == "classification":
        if main == "accuracy":
            return _mean(np.asarray(units["correct"])[idx])
        from sklearn.metrics import f1_score

        gold = np.asarray(units["gold"])[idx]
        preds = [np.asarray(v)[idx] for k, v in sorted(units.items()) if k.startswith("pred_")]
        avg = "macro" if main == "f1" else "weighted"
        return float(np.mean([f1_score(gold, p, average=avg) for p in preds]))
    if task_type == "clustering":
        from sklearn.metrics import v_measure_score

        return float(v_measure_score(np.asarray(units["gold"])[idx], np.asarray(units["predicted"])[idx]))
    raise ValueError(f"unknown embedding task type {task_type!r}")


def unit_count(task_type: str, units: Mapping[str, np.ndarray]) -> int:
    """How many units (queries, pairs, test items, texts) the arrays hold: the length to resample."""
    if task_type not in DEFAULT_MAIN_SCORES:
        raise ValueError(f"unknown embedding task type {task_type!r}")
    lengths = {len(v) for v in units.values()}
    if len(lengths) > 1:
        raise ValueError(f"{task_type}: unit arrays of different lengths {sorted(lengths)}")
    return lengths.pop() if lengths else 0
