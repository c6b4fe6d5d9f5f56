"""embed_tasks: builtin samples, layout recognition, task.yaml, one-line errors, hashes, hf: without datasets."""

from __future__ import annotations

import json
import sys

import pytest

from assay.bench.embed.tasks import BUILTIN_TASKS, TASK_TYPES, EmbedTaskError, load_embed_tasks
from assay.errors import AssayError


def jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


STS_ROWS = [{"sentence1": f"a {i}", "sentence2": f"b {i}", "score": i % 5} for i in range(6)]


def test_every_builtin_loads_with_its_type_and_sizes():
    tasks = load_embed_tasks("all")
    assert [t.name for t in tasks] == list(BUILTIN_TASKS)
    assert {t.type for t in tasks} == set(TASK_TYPES)
    by = {t.name: t for t in tasks}
    assert by["retrieval"].n_units == 36 and len(by["retrieval"].data.corpus_ids) == 186
    assert by["classification"].n_units == 60 and len(by["classification"].data.train_text) == 100
    assert by["clustering"].n_units == 100 and len(set(by["clustering"].data.label)) == 5
    assert by["rerank"].n_units == 25 and by["summarization"].n_units == 8
    assert by["sts"].n_units >= 80 and by["pair"].n_units >= 78
    for t in tasks:
        assert t.source == f"builtin:{t.name}" and t.split == "test"
        assert len(t.task_hash) == 64 and len(t.data_hash) == 64
    # queries embedded as queries, passages as documents; each (text, type) once
    texts = by["retrieval"].texts()
    assert len(texts) == len(set(texts)) == 186 + 36
    assert {k for _, k in texts} == {"query", "document"}
    assert {k for _, k in by["sts"].texts()} == {None}
    pair = by["pair"]
    assert 0.4 < sum(pair.data.label) / len(pair.data.label) < 0.6          # balanced
    sts = by["sts"].data.score
    assert min(sts) == 0 and max(sts) == 5


def test_builtin_hashes_are_stable():
    a, b = load_embed_tasks("sts,retrieval"), load_embed_tasks("sts,retrieval")
    assert [(t.task_hash, t.data_hash) for t in a] == [(t.task_hash, t.data_hash) for t in b]


def test_layouts_are_recognised(tmp_path):
    sts = jsonl(tmp_path / "s" / "test.jsonl", STS_ROWS)
    jsonl(tmp_path / "p" / "test.jsonl", [{"sentence1": "x", "sentence2": "y", "label": i % 2} for i in range(4)])
    jsonl(tmp_path / "r" / "test.jsonl", [{"query": "q", "positive": ["a"], "negative": ["b", "c"]}])
    jsonl(tmp_path / "m" / "test.jsonl", [{"text": "t", "human_summaries": ["h"], "machine_summaries": ["m", "n"],
                                          "relevance": [1, 2]}])
    jsonl(tmp_path / "c" / "train.jsonl", [{"text": f"t{i}", "label": i % 2} for i in range(6)])
    jsonl(tmp_path / "c" / "test.jsonl", [{"text": f"u{i}", "label": i % 2} for i in range(4)])
    b = tmp_path / "b"
    jsonl(b / "corpus.jsonl", [{"_id": "d1", "title": "T", "text": "doc one"}, {"_id": "d2", "text": "doc two"}])
    jsonl(b / "queries.jsonl", [{"_id": "q1", "text": "first"}, {"_id": "q2", "text": "second"}])
    (b / "qrels").mkdir()
    (b / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")
    spec = ",".join(str(tmp_path / x) for x in "spmrcb")
    got = {t.name: t.type for t in load_embed_tasks(spec)}
    assert got == {"s": "sts", "p": "pair", "m": "summarization", "r": "rerank", "c": "classification",
                   "b": "retrieval"}
    ret = load_embed_tasks(str(b))[0]
    assert ret.data.corpus_texts == ("T doc one", "doc two") and ret.n_units == 1
    assert ret.texts() == [("first", "query"), ("T doc one", "document"), ("doc two", "document")]
    assert load_embed_tasks(str(sts))[0].type == "sts"                # a single file


def test_other_formats(tmp_path):
    (tmp_path / "a.csv").write_text("sentence1,sentence2,score\nx,y,1.5\nz,w,3\n")
    (tmp_path / "b.tsv").write_text("query\tpositive\tnegative\nq\t[\"a\"]\t[\"b\"]\n")
    (tmp_path / "c.json").write_text(json.dumps(STS_ROWS))
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pd.DataFrame(STS_ROWS).to_parquet(tmp_path / "d.parquet")
    tasks = load_embed_tasks(",".join(str(tmp_path / f) for f in ("a.csv", "b.tsv", "c.json", "d.parquet")))
    assert [t.type for t in tasks] == ["sts", "rerank", "sts", "sts"]
    assert tasks[0].data.score == (1.5, 3.0) and tasks[1].data.positive == (("a",),)
    assert tasks[2].data_hash == tasks[3].data_hash                   # same rows, json vs parquet


def test_task_yaml_declares_type_columns_split_and_main_score(tmp_path):
    jsonl(tmp_path / "dev.jsonl", [{"a": f"s{i}", "b": f"t{i}", "gold": i} for i in range(5)])
    (tmp_path / "task.yaml").write_text("type: sts\nname: mine\nsplit: dev\nmain_score: cosine_pearson\n"
                                        "columns: {sentence1: a, sentence2: b, score: gold}\n")
    t = load_embed_tasks(str(tmp_path))[0]
    assert (t.name, t.type, t.split, t.main_score, t.n_units) == ("mine", "sts", "dev", "cosine_pearson", 5)
    jsonl(tmp_path / "clu" / "test.jsonl", [{"text": f"x{i}", "label": i % 2} for i in range(4)])
    (tmp_path / "clu" / "task.yaml").write_text("type: clustering\n")
    t = load_embed_tasks(str(tmp_path / "clu"))[0]
    assert t.type == "clustering" and t.main_score == "v_measure"


def test_classification_split_column_and_options(tmp_path):
    rows = [{"text": f"t{i}", "label": "ab"[i % 2], "split": "train" if i < 6 else "test"} for i in range(10)]
    jsonl(tmp_path / "data.jsonl", rows)
    (tmp_path / "task.yaml").write_text("samples_per_label: 2\nn_experiments: 3\n")
    t = load_embed_tasks(str(tmp_path))[0]
    assert t.type == "classification" and len(t.data.train_text) == 6 and t.n_units == 4
    assert (t.data.samples_per_label, t.data.n_experiments) == (2, 3)


def test_data_with_a_builtin_type_name(tmp_path):
    jsonl(tmp_path / "test.jsonl", [{"text": f"x{i}", "label": i % 3} for i in range(6)])
    t = load_embed_tasks("clustering", data=str(tmp_path))[0]
    assert t.type == "clustering" and t.data.label == ("0", "1", "2", "0", "1", "2")
    with pytest.raises(EmbedTaskError, match="exactly one"):
        load_embed_tasks("sts,pair", data=str(tmp_path))


def test_hashes_follow_data_and_definition(tmp_path):
    p = jsonl(tmp_path / "x" / "test.jsonl", STS_ROWS)
    first = load_embed_tasks(str(p))[0]
    jsonl(p, STS_ROWS[:-1] + [{**STS_ROWS[-1], "score": 4.5}])
    changed = load_embed_tasks(str(p))[0]
    assert changed.data_hash != first.data_hash and changed.task_hash == first.task_hash
    (tmp_path / "x" / "task.yaml").write_text("main_score: cosine_pearson\n")
    declared = load_embed_tasks(str(p))[0]
    assert declared.task_hash != changed.task_hash and declared.data_hash == changed.data_hash


@pytest.mark.parametrize("rows, message", [
    ([{"sentence1": "a", "sentence2": "b", "score": 1}] * 6 + [{"sentence1": "a", "sentence2": "b", "score": "high"}],
     "line 7, field 'score': is not a number"),
    ([{"sentence1": "a", "sentence2": "b", "score": 1}, {"sentence1": "a", "score": 2}],
     "line 2, field 'sentence2': is missing"),
    ([{"sentence1": "a", "sentence2": "b", "label": 2}], "line 1, field 'label': is not 0 or 1"),
    ([{"query": "q", "positive": "a", "negative": ["b"]}], "line 1, field 'positive': is not a list"),
    ([{"text": "t", "human_summaries": ["h"], "machine_summaries": ["m"], "relevance": [1, 2]}],
     "line 1, field 'relevance': has 2 scores for 1 machine summaries"),
])
def test_bad_rows_give_one_line_with_file_line_and_field(tmp_path, rows, message):
    p = jsonl(tmp_path / "my.jsonl", rows)
    with pytest.raises(EmbedTaskError) as exc:
        load_embed_tasks(str(p))
    text = str(exc.value)
    assert "\n" not in text and text.startswith(str(p)) and message in text
    assert isinstance(exc.value, AssayError)


def test_other_bad_inputs(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n{not json\n')
    with pytest.raises(EmbedTaskError, match=r"bad.jsonl, line 2: not valid JSON"):
        load_embed_tasks(str(bad))
    with pytest.raises(EmbedTaskError, match="not a builtin task"):
        load_embed_tasks("nope")
    jsonl(tmp_path / "u" / "test.jsonl", [{"foo": 1}])
    with pytest.raises(EmbedTaskError, match="cannot tell the task type"):
        load_embed_tasks(str(tmp_path / "u"))
    jsonl(tmp_path / "k" / "test.jsonl", [{"text": "a", "label": 1}])
    with pytest.raises(EmbedTaskError, match="needs training data"):
        load_embed_tasks(str(tmp_path / "k"))
    (tmp_path / "k" / "task.yaml").write_text("type: sts\ncolor: red\n")
    with pytest.raises(EmbedTaskError, match=r"task.yaml, field 'color': unknown key"):
        load_embed_tasks(str(tmp_path / "k"))
    (tmp_path / "k" / "task.yaml").write_text("type: clustering\nmain_score: accuracy\n")
    with pytest.raises(EmbedTaskError, match=r"field 'main_score'"):
        load_embed_tasks(str(tmp_path / "k"))
    b = tmp_path / "b"
    jsonl(b / "corpus.jsonl", [{"_id": "d1", "text": "x"}])
    jsonl(b / "queries.jsonl", [{"_id": "q1", "text": "y"}])
    (b / "qrels").mkdir()
    (b / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\n")
    with pytest.raises(EmbedTaskError, match=r"test.tsv, line 3, field 'query-id': query 'q9' is not in queries"):
        load_embed_tasks(str(b))


def test_hf_without_datasets_says_what_to_do(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)       # import datasets -> ImportError
    with pytest.raises(EmbedTaskError) as exc:
        load_embed_tasks("hf:mteb/stsbenchmark-sts")
    text = str(exc.value)
    assert text.startswith("hf:mteb/stsbenchmark-sts") and "download" in text and "\n" not in text
