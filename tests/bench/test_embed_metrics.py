"""embed_metrics: hand-computed examples per metric, agreement with pytrec_eval / sklearn / scipy on random
data, and the bootstrap contract (main_statistic on every unit = the main score)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from assay.bench.embed.metrics import (
    DEFAULT_MAIN_SCORES,
    RETRIEVAL_K,
    main_statistic,
    pair_scores,
    retrieval_scores,
    score_task,
    unit_count,
)
from assay.bench.embed.tasks import (
    ClassificationData,
    ClusteringData,
    PairData,
    RerankData,
    RetrievalData,
    StsData,
    SummarizationData,
)


def task(kind, data, main=None):
    return SimpleNamespace(type=kind, data=data, main_score=main or DEFAULT_MAIN_SCORES[kind])


def vecs(mapping, input_type=None):
    return {(t, input_type): np.asarray(v, dtype=np.float32) for t, v in mapping.items()}


# --------------------------------------------------------------------------------------------- retrieval
def test_retrieval_by_hand():
    # One query; ranking by score: d1 (0.9), d2 (0.8), d3 (0.7), d4 (0.6). Judged: d2=2, d4=1, d3=0, and
    # "gone"=1 which is not in the corpus (relevant, never retrieved). Relevant = rel > 0 -> 3 relevant.
    s = np.array([[0.9, 0.8, 0.7, 0.6]])
    out = retrieval_scores(s, ["d1", "d2", "d3", "d4"], [{"d2": 2, "d4": 1, "d3": 0, "gone": 1}], ks=(1, 3, 5))
    # nDCG@3: DCG = 0/log2(2) + 2/log2(3) + 0/log2(4) = 1.2618595
    #         IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.6309298 + 0.5 = 3.1309298 -> 0.4030268
    assert out["ndcg_at_3"][0] == pytest.approx((2 / math.log2(3)) / (2 + 1 / math.log2(3) + 0.5))
    # nDCG@5: DCG adds 1/log2(5) = 0.4306766; IDCG@5 is the same three gains -> (1.2618595+0.4306766)/3.1309298
    assert out["ndcg_at_5"][0] == pytest.approx((2 / math.log2(3) + 1 / math.log2(5)) / (2 + 1 / math.log2(3) + 0.5))
    # AP@3 = precision at the relevant rank 2 (1/2) over 3 relevant = 1/6; AP@5 adds rank 4 (2/4): (0.5+0.5)/3
    assert out["map_at_3"][0] == pytest.approx(1 / 6)
    assert out["map_at_5"][0] == pytest.approx(1 / 3)
    # recall@1 = 0/3, recall@3 = 1/3, recall@5 = 2/3; P@5 = 2/5 (k, not the 4 retrieved, is the divisor)
    assert out["recall_at_1"][0] == 0 and out["recall_at_3"][0] == pytest.approx(1 / 3)
    assert out["recall_at_5"][0] == pytest.approx(2 / 3) and out["precision_at_5"][0] == pytest.approx(0.4)
    # MRR@1: nothing relevant at rank 1 -> 0; MRR@3: first relevant at rank 2 -> 1/2; hit rate likewise
    assert out["mrr_at_1"][0] == 0 and out["mrr_at_3"][0] == 0.5
    assert out["hit_rate_at_1"][0] == 0 and out["hit_rate_at_3"][0] == 1


def test_retrieval_ties_go_to_the_larger_doc_id_and_identical_ids_are_left_out():
    # "a" and "b" tie at 0.5: trec_eval ranks "b" first (doc id descending). Only "a" is relevant.
    out = retrieval_scores(np.array([[0.5, 0.5]]), ["a", "b"], [{"a": 1}], ks=(1, 2))
    assert out["mrr_at_2"][0] == 0.5 and out["precision_at_1"][0] == 0
    # the query's own id in the corpus ("q", scored highest) is dropped: "a" is then first
    out = retrieval_scores(np.array([[0.9, 0.5]]), ["q", "a"], [{"a": 1}], query_ids=["q"], ks=(1,))
    assert out["mrr_at_1"][0] == 1.0


def test_retrieval_query_without_relevant_docs_scores_zero():
    out = retrieval_scores(np.array([[0.9, 0.1]]), ["a", "b"], [{"a": 0, "b": -1}], ks=(1, 10))
    assert all(out[f"{m}_at_10"][0] == 0 for m in ("ndcg", "map", "recall", "precision", "mrr", "hit_rate"))


def _random_run(rng, n_docs, n_queries=8):
    docs = [f"d{i}" for i in rng.permutation(n_docs)]
    scores = np.round(rng.random((n_queries, n_docs)), 2)          # two decimals: many ties
    qrels = []
    for _ in range(n_queries):
        picks = rng.choice(n_docs, min(int(rng.integers(1, 9)), n_docs), replace=False)
        qrels.append({docs[j]: int(rng.integers(-1, 4)) for j in picks})   # graded, some 0 / negative
    qrels[0]["not-in-corpus"] = 2
    return docs, scores, qrels


@pytest.mark.parametrize("seed", range(12))
def test_retrieval_agrees_with_pytrec_eval(seed):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(seed)
    docs, scores, qrels = _random_run(rng, int(rng.integers(3, 400)))
    ours = retrieval_scores(scores, docs, qrels)
    ks = ",".join(str(k) for k in RETRIEVAL_K)
    ev = pytrec_eval.RelevanceEvaluator({f"q{i}": q for i, q in enumerate(qrels)},
                                        {f"ndcg_cut.{ks}", f"map_cut.{ks}", f"recall.{ks}", f"P.{ks}",
                                         f"success.{ks}", "recip_rank"})
    run = {f"q{i}": {d: float(scores[i, j]) for j, d in enumerate(docs)} for i in range(len(qrels))}
    ref = ev.evaluate(run)
    names = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P", "hit_rate": "success"}
    for i in range(len(qrels)):
        r = ref[f"q{i}"]
        for k in RETRIEVAL_K:
            for ours_name, trec_name in names.items():
                assert ours[f"{ours_name}_at_{k}"][i] == pytest.approx(r[f"{trec_name}_{k}"], abs=1e-12)
        # trec_eval's recip_rank has no cut-off: it equals MRR@k for k >= the number of documents
        assert ours["mrr_at_1000"][i] == pytest.approx(r["recip_rank"], abs=1e-12)
        # MTEB's MRR@k is cut at k: 0 where the first relevant document is below rank k
        rr = r["recip_rank"]
        for k in (1, 3, 5, 10):
            assert ours[f"mrr_at_{k}"][i] == pytest.approx(rr if rr >= 1 / k else 0.0, abs=1e-12)


def test_retrieval_top_1000_cut_agrees_with_pytrec_eval_on_the_cut_run():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(7)
    docs, scores, qrels = _random_run(rng, 1500, n_queries=3)
    ours = retrieval_scores(scores, docs, qrels)
    # the run MTEB hands to pytrec_eval: the top 1000 per query in trec_eval's order
    tb = {d: i for i, d in enumerate(sorted(docs, reverse=True))}
    run = {}
    for i in range(3):
        order = sorted(range(len(docs)), key=lambda j: (-scores[i, j], tb[docs[j]]))[:1000]
        run[f"q{i}"] = {docs[j]: float(scores[i, j]) for j in order}
    ref = pytrec_eval.RelevanceEvaluator({f"q{i}": q for i, q in enumerate(qrels)},
                                         {"recall.1000", "map_cut.1000", "ndcg_cut.1000"}).evaluate(run)
    for i in range(3):
        assert ours["recall_at_1000"][i] == pytest.approx(ref[f"q{i}"]["recall_1000"], abs=1e-12)
        assert ours["map_at_1000"][i] == pytest.approx(ref[f"q{i}"]["map_cut_1000"], abs=1e-12)
        assert ours["ndcg_at_1000"][i] == pytest.approx(ref[f"q{i}"]["ndcg_cut_1000"], abs=1e-12)


def test_retrieval_task_end_to_end_and_units():
    # two queries, three docs on the unit circle; q1 points at d1 (rel 2), q2 between d2 and d3 (d3 rel 1)
    d = RetrievalData(("d1", "d2", "d3"), ("one", "two", "three"), ("q1", "q2", "q3"), ("Q1", "Q2", "Q3"),
                      (("q1", "d1", 2), ("q2", "d3", 1)))
    v = {**vecs({"one": [1, 0], "two": [0, 1], "three": [-1, 0]}, "document"),
         **vecs({"Q1": [1, 0.1], "Q2": [-0.6, 0.8], "Q3": [0, 1]}, "query")}
    ts = score_task(task("retrieval", d), v)
    # q1: d1 first -> nDCG 1; q2: cos(d2)=0.8 > cos(d3)=0.6 > cos(d1) -> d3 at rank 2: nDCG = 1/log2(3)
    assert ts.units["ndcg_at_10"].tolist() == pytest.approx([1.0, 1 / math.log2(3)])
    assert ts.main == pytest.approx((1 + 1 / math.log2(3)) / 2)     # q3 has no qrels: not a unit
    assert unit_count("retrieval", ts.units) == 2
    assert main_statistic("retrieval", ts.units, np.array([1, 1])) == pytest.approx(1 / math.log2(3))


# --------------------------------------------------------------------------------------------- pair
def test_pair_thresholds_by_hand():
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5])
    y = np.array([1, 0, 1, 0, 0])
    out = pair_scores({"cosine": s, "dot": s, "euclidean": s - 2, "manhattan": s - 3}, y)
    # accuracy after pair i (called positive: 0..i): i=0 (1+3)/5=0.8, i=1 0.6, i=2 (2+2)/5=0.8 (not better), i=3 0.6
    assert out["cosine_accuracy"] == pytest.approx(0.8)
    # F1: i=0 p=1 r=1/2 -> 2/3; i=1 p=1/2 r=1/2 -> 1/2; i=2 p=2/3 r=1 -> 0.8; i=3 p=1/2 r=1 -> 2/3
    assert (out["cosine_f1"], out["cosine_precision"], out["cosine_recall"]) == pytest.approx((0.8, 2 / 3, 1.0))
    # AP: positives at ranks 1 and 3 -> (1/1 + 2/3) / 2
    assert out["cosine_ap"] == pytest.approx(5 / 6)
    assert out["max_ap"] == pytest.approx(5 / 6) and out["max_f1"] == pytest.approx(0.8)


def test_pair_threshold_never_splits_tied_scores():
    # 0.5 / 0.5 / 0.1: the only threshold is between 0.5 and 0.1 -> two called positive:
    # accuracy (1 + 1) / 3; precision 1/2, recall 1 -> F1 2/3
    s = np.array([0.5, 0.5, 0.1])
    out = pair_scores({k: s for k in ("cosine", "dot", "euclidean", "manhattan")}, np.array([0, 1, 0]))
    assert out["cosine_accuracy"] == pytest.approx(2 / 3) and out["cosine_f1"] == pytest.approx(2 / 3)


def test_pair_task_agrees_with_sklearn():
    from sklearn.metrics import average_precision_score
    from sklearn.metrics.pairwise import paired_cosine_distances, paired_euclidean_distances, paired_manhattan_distances

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(40, 6)), rng.normal(size=(40, 6))
    y = rng.integers(0, 2, 40)
    s1, s2 = [f"a{i}" for i in range(40)], [f"b{i}" for i in range(40)]
    v = {**vecs(dict(zip(s1, a))), **vecs(dict(zip(s2, b)))}
    ts = score_task(task("pair", PairData(tuple(s1), tuple(s2), tuple(int(x) for x in y))), v)
    a32, b32 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
    assert ts.scores["cosine_ap"] == pytest.approx(average_precision_score(y, 1 - paired_cosine_distances(a32, b32)))
    assert ts.scores["euclidean_ap"] == pytest.approx(average_precision_score(y, -paired_euclidean_distances(a32, b32)))
    assert ts.scores["manhattan_ap"] == pytest.approx(average_precision_score(y, -paired_manhattan_distances(a32, b32)))
    assert ts.scores["dot_ap"] == pytest.approx(average_precision_score(y, np.sum(a32 * b32, axis=1)))
    assert ts.main == max(ts.scores[f"{k}_ap"] for k in ("cosine", "dot", "euclidean", "manhattan"))
    assert main_statistic("pair", ts.units, np.arange(40)) == pytest.approx(ts.main)


# --------------------------------------------------------------------------------------------- STS
def test_sts_by_hand_and_with_scipy():
    from scipy.stats import pearsonr, spearmanr

    # cosines of (x, y_i) with x = [1, 0]: y1 = [1, 0] -> 1, y2 = [1, 1] -> 0.7071, y3 = [0, 1] -> 0,
    # y4 = [-1, 1] -> -0.7071. Gold 5, 3, 1, 0: same order -> Spearman 1.
    d = StsData(("x", "x", "x", "x"), ("y1", "y2", "y3", "y4"), (5.0, 3.0, 1.0, 0.0))
    v = vecs({"x": [1, 0], "y1": [1, 0], "y2": [1, 1], "y3": [0, 1], "y4": [-1, 1]})
    ts = score_task(task("sts", d), v)
    assert ts.main == pytest.approx(1.0)
    cos = [1, 1 / math.sqrt(2), 0, -1 / math.sqrt(2)]
    assert ts.scores["cosine_pearson"] == pytest.approx(pearsonr([5, 3, 1, 0], cos)[0])
    # euclidean distances 0, 1, 1.4142, 2.2361 negated: same order -> Spearman 1
    assert ts.scores["euclidean_spearman"] == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    a, b, gold = rng.normal(size=(30, 5)), rng.normal(size=(30, 5)), rng.random(30) * 5
    s1, s2 = [f"a{i}" for i in range(30)], [f"b{i}" for i in range(30)]
    ts = score_task(task("sts", StsData(tuple(s1), tuple(s2), tuple(gold))),
                    {**vecs(dict(zip(s1, a))), **vecs(dict(zip(s2, b)))})
    a, b = a.astype(np.float32).astype(float), b.astype(np.float32).astype(float)
    cos = np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert ts.main == pytest.approx(spearmanr(gold, cos)[0])
    assert ts.scores["manhattan_spearman"] == pytest.approx(spearmanr(gold, -np.abs(a - b).sum(1))[0])
    assert main_statistic("sts", ts.units, np.arange(30)) == pytest.approx(ts.main)
    pearson = main_statistic("sts", ts.units, np.arange(30), "cosine_pearson")
    assert pearson == pytest.approx(ts.scores["cosine_pearson"])


# --------------------------------------------------------------------------------------------- rerank
def test_rerank_by_hand():
    # query [1, 0]; positive p at cos 0.6, negatives n1 at cos 0.8, n2 at cos 0.0 -> ranking n1, p, n2:
    # AP = 1/2 (one positive, at rank 2), RR@10 = 1/2. Second query: positive first -> AP 1, RR 1.
    d = RerankData(("q", "r"), (("p",), ("p2",)), (("n1", "n2"), ("n3",)))
    v = {**vecs({"q": [1, 0], "r": [0, 1]}, "query"),
         **vecs({"p": [0.6, 0.8], "n1": [0.8, 0.6], "n2": [0, 1], "p2": [0, 1], "n3": [1, 0]}, "document")}
    ts = score_task(task("rerank", d), v)
    assert ts.units["map"].tolist() == [0.5, 1.0] and ts.units["mrr_at_10"].tolist() == [0.5, 1.0]
    assert ts.main == pytest.approx(0.75) and ts.scores["mrr_at_10"] == pytest.approx(0.75)
    assert main_statistic("rerank", ts.units, np.array([0, 0, 1])) == pytest.approx(2 / 3)


def test_rerank_skips_queries_without_positives_or_negatives():
    d = RerankData(("q", "r"), (("p",), ()), (("n",), ("n",)))
    v = {**vecs({"q": [1, 0], "r": [0, 1]}, "query"), **vecs({"p": [1, 0], "n": [0, 1]}, "document")}
    ts = score_task(task("rerank", d), v)
    assert unit_count("rerank", ts.units) == 1 and ts.main == 1.0


# --------------------------------------------------------------------------------------------- classification
def _blobs(rng, n_per, centres, prefix):
    texts, labels, v = [], [], {}
    for lab, c in centres.items():
        for i in range(n_per):
            t = f"{prefix}-{lab}-{i}"
            texts.append(t)
            labels.append(lab)
            v[(t, None)] = (np.asarray(c) + rng.normal(scale=0.6, size=len(c))).astype(np.float32)
    return texts, labels, v


def test_classification_matches_a_direct_sklearn_run():
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    rng = np.random.default_rng(0)
    centres = {"a": [1, 0, 0], "b": [0, 1, 0], "c": [0, 0, 1]}
    tr, trl, v1 = _blobs(rng, 12, centres, "train")
    te, tel, v2 = _blobs(rng, 10, centres, "test")
    d = ClassificationData(tuple(tr), tuple(trl), tuple(te), tuple(tel), samples_per_label=4, n_experiments=3)
    ts = score_task(task("classification", d), {**v1, **v2}, seed=5)
    # the same procedure written out: one index list, reshuffled by RandomState(seed) each experiment
    code = {"a": 0, "b": 1, "c": 2}
    x_tr, y_tr = np.stack([v1[(t, None)] for t in tr]).astype(float), np.array([code[x] for x in trl])
    x_te, y_te = np.stack([v2[(t, None)] for t in te]).astype(float), np.array([code[x] for x in tel])
    idxs, accs, f1s = list(range(len(tr))), [], []
    for _ in range(3):
        np.random.RandomState(5).shuffle(idxs)
        keep, seen = [], {}
        for i in idxs:
            if seen.get(y_tr[i], 0) < 4:
                seen[y_tr[i]] = seen.get(y_tr[i], 0) + 1
                keep.append(i)
        assert len(keep) == 12
        p = LogisticRegression(random_state=5, max_iter=100).fit(x_tr[keep], y_tr[keep]).predict(x_te)
        accs.append(accuracy_score(y_te, p))
        f1s.append(f1_score(y_te, p, average="macro"))
    assert ts.scores["accuracy"] == pytest.approx(np.mean(accs))
    assert ts.scores["f1"] == pytest.approx(np.mean(f1s))
    assert 0.5 < ts.main <= 1.0
    assert unit_count("classification", ts.units) == 30
    assert main_statistic("classification", ts.units, np.arange(30)) == pytest.approx(ts.main)
    assert main_statistic("classification", ts.units, np.arange(30), "f1") == pytest.approx(ts.scores["f1"])


def test_classification_separable_is_perfect_and_binary_has_ap():
    # two far-apart points per label: every experiment predicts every test item right -> 1.0 everywhere
    v = vecs({"a1": [10, 0], "a2": [11, 0], "b1": [0, 10], "b2": [0, 11], "ta": [9, 0], "tb": [0, 9]})
    d = ClassificationData(("a1", "a2", "b1", "b2"), ("x", "x", "y", "y"), ("ta", "tb"), ("x", "y"))
    ts = score_task(task("classification", d), v)
    assert ts.scores["accuracy"] == 1.0 and ts.scores["f1"] == 1.0 and ts.scores["ap"] == 1.0
    assert ts.units["correct"].tolist() == [1.0, 1.0]


# --------------------------------------------------------------------------------------------- clustering
def test_clustering_v_measure():
    from sklearn.metrics import v_measure_score

    rng = np.random.default_rng(2)
    texts, labels, v = _blobs(rng, 15, {"a": [5, 0], "b": [0, 5], "c": [-5, -5]}, "c")
    ts = score_task(task("clustering", ClusteringData(tuple(texts), tuple(labels))), v)
    assert ts.main == pytest.approx(1.0)                      # three well-separated blobs
    noisy = {k: (x + rng.normal(scale=6, size=2)).astype(np.float32) for k, x in v.items()}
    ts = score_task(task("clustering", ClusteringData(tuple(texts), tuple(labels))), noisy)
    assert 0 <= ts.main < 1
    assert ts.main == pytest.approx(v_measure_score(ts.units["gold"], ts.units["predicted"]))
    assert main_statistic("clustering", ts.units, np.arange(45)) == pytest.approx(ts.main)
    again = score_task(task("clustering", ClusteringData(tuple(texts), tuple(labels))), noisy)
    assert again.main == ts.main                              # seeded


# --------------------------------------------------------------------------------------------- summarization
def test_summarization_by_hand():
    # humans h1 = [1, 0], h2 = [0, 1]; machine summaries' max cosine to either human:
    # m1 = [1, 0] -> 1; m2 = [1, 1] -> 0.7071; m3 = [1, -1] -> 0.7071; m4 = [-1, -1] -> 0 (cos -0.7071 twice -> max
    # -0.7071). Human scores 5, 4, 2, 1 -> predictions 1, .7071, .7071, -.7071: Spearman of ranks
    # gold (4,3,2,1) vs pred (4, 2.5, 2.5, 1) = 0.9487
    from scipy.stats import spearmanr

    d = SummarizationData(("t",), (("h1", "h2"),), (("m1", "m2", "m3", "m4"),), ((5.0, 4.0, 2.0, 1.0),))
    v = vecs({"h1": [1, 0], "h2": [0, 1], "m1": [1, 0], "m2": [1, 1], "m3": [1, -1], "m4": [-1, -1]})
    ts = score_task(task("summarization", d), v)
    assert ts.main == pytest.approx(spearmanr([5, 4, 2, 1], [1, 0.7071, 0.7071, -0.7071])[0])
    assert ts.main == pytest.approx(0.9486833)


def test_summarization_skips_texts_with_equal_human_scores():
    d = SummarizationData(("t", "u"), (("h",), ("h",)), (("m1", "m2"), ("m1", "m2")), ((3.0, 3.0), (1.0, 5.0)))
    v = vecs({"h": [1, 0], "m1": [1, 0], "m2": [0, 1]})
    ts = score_task(task("summarization", d), v)
    # only text u counts: gold (1, 5) vs pred (1, 0) -> Spearman -1
    assert unit_count("summarization", ts.units) == 1 and ts.main == pytest.approx(-1.0)


# --------------------------------------------------------------------------------------------- contract
def test_unit_count_rejects_ragged_units_and_unknown_types():
    with pytest.raises(ValueError):
        unit_count("sts", {"gold": np.zeros(3), "cosine": np.zeros(2)})
    with pytest.raises(ValueError):
        unit_count("bitext", {})
    with pytest.raises(ValueError):
        score_task(SimpleNamespace(type="bitext", data=None, main_score="x"), {})
