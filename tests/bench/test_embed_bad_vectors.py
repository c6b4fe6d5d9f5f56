"""Embedding vectors that are not numbers, and tasks with nothing to embed (issue 28, item 3).

A model that returns NaN or infinite values for one text is an error naming the model and the text, on every task
type (before, scikit-learn raised from inside pair, classification, clustering and rerank, and retrieval silently
scored nDCG@10 = 0.0 with a [0, 0] interval); such vectors never reach the call cache, so a model that recovers is
asked again. An empty corpus or an empty set of queries is one error naming the task."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from assay.bench.embed.run import EmbedConfig, run_embed
from assay.bench.embed.tasks import TASK_TYPES, EmbedTaskError, load_embed_tasks
from assay.errors import AssayError
from assay.models import resolve

pytest.importorskip("sklearn")


class Poisoned:
    """Hash-seeded vectors (equal texts agree), except ``bad`` texts, which get a vector holding ``value``
    (NaN or an infinity) until ``heal()`` is called."""

    name = "control:poisoned"
    embed_batch_size = 16

    def __init__(self, bad: set[str], value: float = float("nan")):
        self.bad, self.value = set(bad), value
        self.asked: list[str] = []

    def heal(self) -> None:
        self.bad = set()

    async def embed(self, texts, *, input_type=None):
        out = []
        for t in texts:
            self.asked.append(t)
            seed = int.from_bytes(t.encode("utf-8")[:16].ljust(16, b"\0"), "little") % (2 ** 32) ^ len(t)
            v = np.random.default_rng(seed).standard_normal(24)
            if t in self.bad:
                v[3] = self.value
            out.append(v)
        return np.asarray(out, dtype=np.float64)


def _one_text(kind: str) -> str:
    """A text from the middle of the builtin task's list (a document for retrieval and rerank)."""
    texts = load_embed_tasks(kind)[0].texts()
    return texts[len(texts) // 2 + 1][0]


@pytest.mark.parametrize("kind", TASK_TYPES)
@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_a_vector_that_is_not_finite_is_an_error_naming_the_model_and_the_text(kind: str, value: float):
    bad = _one_text(kind)
    with pytest.raises(AssayError) as exc:
        asyncio.run(run_embed(EmbedConfig(model="control", tasks=kind), store=False, model=Poisoned({bad}, value)))
    msg = str(exc.value)
    assert "\n" not in msg and "control:poisoned" in msg and "NaN or infinite" in msg, msg
    assert repr(bad[:40])[1:-1] in msg or bad[:40] in msg, msg


def test_the_other_tasks_are_scored_and_the_bad_one_keeps_its_error():
    bad = _one_text("retrieval")
    run = asyncio.run(run_embed(EmbedConfig(model="control", tasks="sts,retrieval"), store=False,
                                model=Poisoned({bad})))
    t = run.summary["tasks"]
    assert t["sts"]["error"] is None and t["sts"]["value"] is not None
    r = t["retrieval"]
    assert r["value"] is None and r["ci95_low"] is None and r["scores"] == {}   # never a silent nDCG of 0.0
    assert "control:poisoned" in r["error"] and "NaN or infinite" in r["error"]


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_a_too_large_number_becomes_infinite_as_float32_and_is_refused():
    bad = _one_text("sts")
    with pytest.raises(AssayError, match="NaN or infinite"):
        asyncio.run(run_embed(EmbedConfig(model="control", tasks="sts"), store=False, model=Poisoned({bad}, 1e300)))


def test_bad_vectors_never_reach_the_call_cache(tmp_path: Path):
    bad = _one_text("pair")
    backend = Poisoned({bad})
    model = resolve(backend, role="embedder", cache=str(tmp_path / "cache.sqlite"))
    with pytest.raises(AssayError, match="NaN or infinite"):
        asyncio.run(run_embed(EmbedConfig(model="control", tasks="pair"), store=False, model=model))
    backend.heal()
    backend.asked.clear()
    again = resolve(backend, role="embedder", cache=str(tmp_path / "cache.sqlite"))
    run = asyncio.run(run_embed(EmbedConfig(model="control", tasks="pair"), store=False, model=again))
    assert run.summary["tasks"]["pair"]["value"] is not None
    assert bad in backend.asked            # asked again, not answered with the bad vector from the cache


# --------------------------------------------------------------------------------------------- empty data
def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _beir(folder: Path, *, corpus: list[dict], queries: list[dict], qrels: str) -> Path:
    _jsonl(folder / "corpus.jsonl", corpus)
    _jsonl(folder / "queries.jsonl", queries)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return folder


def test_an_empty_corpus_is_one_error_naming_the_task(tmp_path: Path):
    folder = _beir(tmp_path / "mycorpus", corpus=[], queries=[{"_id": "q1", "text": "where"}], qrels="q1\td1\t1\n")
    with pytest.raises(EmbedTaskError) as exc:
        load_embed_tasks(str(folder))
    msg = str(exc.value)
    assert "task mycorpus" in msg and "the corpus has no documents" in msg and "\n" not in msg, msg
    with pytest.raises(AssayError, match="task mycorpus"):
        asyncio.run(run_embed(EmbedConfig(model="control", tasks=str(folder)), store=False,
                              model=Poisoned(set())))


def test_empty_queries_are_one_error_naming_the_task(tmp_path: Path):
    folder = _beir(tmp_path / "noq", corpus=[{"_id": "d1", "text": "a doc"}], queries=[], qrels="")
    with pytest.raises(EmbedTaskError) as exc:
        load_embed_tasks(str(folder))
    msg = str(exc.value)
    assert "task noq" in msg and "queries file has no queries" in msg and "\n" not in msg, msg


def test_an_empty_data_file_is_one_error_naming_the_task(tmp_path: Path):
    (tmp_path / "sts").mkdir()
    (tmp_path / "sts" / "task.yaml").write_text("type: sts\nname: my-sts\n")
    (tmp_path / "sts" / "test.jsonl").write_text("")
    with pytest.raises(EmbedTaskError) as exc:
        load_embed_tasks(str(tmp_path / "sts"))
    assert "task my-sts" in str(exc.value) and "\n" not in str(exc.value)
