"""Every reader (JSONL, JSON, CSV, Parquet, DataFrame, list, dict, directory) and the column mapping."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.errors import InputError
from assay.formats import Dataset, open_dataset
from assay.records import Record

FIX = Path(__file__).resolve().parents[1] / "fixtures"

ROWS = [
    {"id": "a", "query": "q1", "response": "r1", "contexts": [{"content": "c1", "doc_uri": "u1"}],
            "expected_facts": ["f1"], "ground_truth": "g1"},
    {"id": "b", "query": "q2", "response": "r2", "contexts": [{"content": "c2", "doc_uri": "u2"}],
            "expected_facts": ["f2", "f3"], "ground_truth": "g2"},
]


def check(recs):
    assert [r.id for r in recs] == ["a", "b"]
    assert recs[1].contexts[0].doc_uri == "u2" and recs[1].expected_facts == ["f2", "f3"]
    assert all(isinstance(r, Record) for r in recs)


def test_jsonl_streams_lazily_with_blank_lines_ignored(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in ROWS).replace("\n", "\n\n   \n") + "\n")
    ds = open_dataset(p)
    assert isinstance(ds, Dataset) and ds.source == str(p) and ds.format == "jsonl"
    it = iter(ds)
    first = next(it)
    assert first.id == "a" and ds.rows_read == 1  # read one row, not the file
    check([first, *it])
    assert ds.rows_read == 2


def test_iterating_again_reads_again(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    ds = open_dataset(str(p))
    assert len(list(ds)) == 2 and len(list(ds)) == 2 and ds.rows_read == 2


def test_json_list_and_data_wrapper_and_single_row(tmp_path):
    p = tmp_path / "l.json"
    p.write_text(json.dumps(ROWS))
    check(list(open_dataset(p)))
    p = tmp_path / "w.json"
    p.write_text(json.dumps({"version": 1, "data": ROWS}))
    ds = open_dataset(p)
    check(list(ds))
    assert ds.format == "json"
    p = tmp_path / "one.json"
    p.write_text(json.dumps(ROWS[0]))
    assert [r.id for r in open_dataset(p)] == ["a"]


def test_csv_with_json_cells_quoted_newlines_and_empty_cells():
    ds = open_dataset(FIX / "qa.csv")
    a, b = list(ds)
    assert ds.format == "csv"
    assert a.id == "1" and a.query == "Which tent is the most waterproof?"
    assert a.contexts[0].doc_uri == "tents.md"
    assert a.expected_facts == ["Alpine Explorer", "3000m rainfly"]
    assert a.extra == {}  # the empty 'notes' cell is a missing value
    assert b.query == "What is the capital\nof France?" and b.contexts is None
    assert b.extra == {"notes": "multi-line question"}


def test_csv_line_numbers_count_physical_lines(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text('query,response,turn\n"multi\nline",ok,0\nq2,7,1\nq3,r,first\n')
    ds = open_dataset(p, on_bad_row="skip")
    recs = list(ds)
    assert [r.query for r in recs] == ["multi\nline", "q2"]
    assert recs[1].response == "7" and recs[1].turn == 1  # CSV cells are text; a whole number parses
    (err,) = ds.bad_rows
    assert str(err) == f"{p}, line 5, field 'turn': expected a whole number, got a string"


def test_csv_cells_holding_a_chat_request_and_a_chat_completion(tmp_path):
    req = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                        {"role": "user", "content": "q2"}]}
    resp = {"choices": [{"message": {"role": "assistant", "content": "ans"}}]}
    p = tmp_path / "d.csv"
    df = pd.DataFrame({"request": [json.dumps(req), "{plain text"], "response": [json.dumps(resp), "r"]})
    df.to_csv(p, index=False)
    a, b = list(open_dataset(p))
    assert a.query == "q2" and [m.content for m in a.history] == ["hi", "yo"] and a.response == "ans"
    assert b.query == "{plain text" and b.response == "r"


def test_jsonl_with_byte_order_mark(tmp_path):
    p = tmp_path / "bom.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"query": "q"}\n')
    assert [r.query for r in open_dataset(p)] == ["q"]


def test_csv_row_with_too_many_cells(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("query,response\nq1,r1\nq2,r2,extra\nq3,r3\n")
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q1", "q3"]
    (err,) = ds.bad_rows
    assert err.line == 3 and "3 cells but the header has 2 columns" in str(err)


def test_parquet_in_batches(tmp_path):
    p = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), p)
    ds = open_dataset(p)
    check(list(ds))
    assert ds.format == "parquet"


def test_dataframe_read_from_parquet_with_nested_arrays(tmp_path):
    rows = json.loads((FIX / "databricks_level_4.json").read_text())
    conv = [json.loads(line) for line in (FIX / "azure_conversation_multiturn.jsonl").read_text().splitlines()][:1]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "l4.parquet")
    pq.write_table(pa.Table.from_pylist(conv), tmp_path / "conv.parquet")
    df = pd.read_parquet(tmp_path / "l4.parquet")
    assert isinstance(df.iloc[0]["retrieved_context"], np.ndarray)
    (r,) = list(open_dataset(df))
    assert r.expected_doc_uris == ["doc_uri_2_1", "doc_uri_2_2"] and r.contexts[1].doc_uri == "doc_uri_6_extra"
    for data in (pd.read_parquet(tmp_path / "conv.parquet"), tmp_path / "conv.parquet"):
        recs = list(open_dataset(data))
        assert [x.id for x in recs] == ["conv-sarah#0", "conv-sarah#1"]
        assert [d.doc_uri for d in recs[1].contexts] == ["product_info_6.md", "cHJvZHVjdF9pbmZvXzYubWQ0"]


def test_parquet_struct_columns_fill_missing_keys_with_null(tmp_path):
    rows = [{"query": "q1", "guidelines": {"tone": ["polite"]}},
            {"query": "q2", "guidelines": {"scope": ["databricks only"]}}]
    p = tmp_path / "g.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    a, b = list(open_dataset(p))
    assert a.guidelines == {"tone": ["polite"]} and b.guidelines == {"scope": ["databricks only"]}


def test_dataframe_with_nan_numpy_arrays_and_numpy_scalars():
    df = pd.DataFrame({
        "id": ["a", "b"],
        "query": ["q1", "q2"],
        "response": ["r1", None],
        "expected_facts": [np.array(["f1"]), np.array(["f2", "f3"])],
        "score": [np.float64(0.5), np.nan],
        "n": [1, 2],
    })
    ds = open_dataset(df)
    a, b = list(ds)
    assert ds.source == "<DataFrame>" and ds.format == "dataframe"
    assert a.expected_facts == ["f1"] and b.expected_facts == ["f2", "f3"]
    assert b.response is None
    assert a.extra == {"score": 0.5, "n": 1} and b.extra == {"score": None, "n": 2}
    assert type(a.extra["n"]) is int


def test_list_of_dicts_and_dict_of_columns():
    ds = open_dataset(ROWS)
    check(list(ds))
    assert ds.source == "<list>" and ds.format == "list"
    cols = {"id": ["a", "b"], "query": ["q1", "q2"]}
    ds = open_dataset(cols)
    assert [r.query for r in ds] == ["q1", "q2"] and ds.source == "<dict>"


def test_directory_reads_every_supported_file_in_name_order(tmp_path):
    (tmp_path / "b.csv").write_text("id,query\nb,q2\n")
    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "a", "query": "q1"}) + "\n")
    (tmp_path / "c.json").write_text(json.dumps([{"id": "c", "query": "q3"}]))
    pq.write_table(pa.Table.from_pylist([{"id": "d", "query": "q4"}]), tmp_path / "d.parquet")
    (tmp_path / "README.md").write_text("ignored")
    ds = open_dataset(tmp_path)
    assert [r.id for r in ds] == ["a", "b", "c", "d"]
    assert ds.rows_read == 4 and ds.format == "mixed" and ds.source == str(tmp_path)


def test_directory_errors_name_the_file(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"query": "q1"}\n')
    (tmp_path / "b.jsonl").write_text('{"query": false}\n')
    with pytest.raises(InputError) as ei:
        list(open_dataset(tmp_path))
    assert str(ei.value) == f"{tmp_path / 'b.jsonl'}, line 1, field 'query': expected text, got a boolean"


def test_unknown_extension(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text("hello")
    with pytest.raises(InputError) as ei:
        open_dataset(p)
    assert "unsupported file type '.txt'" in str(ei.value) and str(p) in str(ei.value)


def test_unsupported_data_type():
    with pytest.raises(InputError, match="got int"):
        open_dataset(42)


# ----------------------------------------------------------------------------- mapping

def test_mapping_plain_and_azure_forms():
    rows = [{"question_text": "q", "answer_text": "a", "gold": "g", "docs": "ctx", "other": 1}]
    m = {"query": "question_text", "response": "${data.answer_text}", "ground_truth": "${target.gold}",
         "context": "docs"}
    (r,) = list(open_dataset(rows, mapping=m))
    assert (r.query, r.response, r.ground_truth) == ("q", "a", "g")
    assert r.contexts[0].content == "ctx"
    assert r.extra == {"other": 1}  # mapped columns are consumed, others kept


def test_mapping_nested_path_and_missing_column():
    rows = [{"item": {"question": "nested q"}, "out": "a"}, {"out": "b"}]
    ds = open_dataset(rows, mapping={"query": "${data.item.question}", "response": "out"})
    a, b = list(ds)
    assert a.query == "nested q" and a.response == "a"
    assert b.query is None and b.response == "b"  # absent column: the field is just missing
    assert ds.columns_seen == {"item", "out"}


def test_mapping_to_a_column_no_row_has_is_visible_in_columns_seen():
    ds = open_dataset([{"q": "x"}], mapping={"query": "question"})
    (r,) = list(ds)
    assert r.query is None and r.extra == {"q": "x"}
    assert "question" not in ds.columns_seen


def test_mapping_displaces_a_column_with_the_canonical_name_into_extra():
    (r,) = list(open_dataset([{"query": "old", "prompt": "new"}], mapping={"query": "prompt"}))
    assert r.query == "new" and r.extra == {"query": "old"}


def test_mapping_errors_name_the_users_column():
    with pytest.raises(InputError) as ei:
        list(open_dataset([{"docs": "not a list"}], mapping={"contexts": "docs"}))
    assert ei.value.field == "docs" and "expected a list of documents, got a string" in str(ei.value)


@pytest.mark.parametrize("mapping,needle", [
    ({"qury": "q"}, "unknown field 'qury'"),
    ({"query": 3}, "expected a column name"),
    ({"query": "${foo.bar}"}, "cannot read '${foo.bar}'"),
])
def test_bad_mapping(mapping, needle):
    with pytest.raises(InputError) as ei:
        open_dataset([{"q": 1}], mapping=mapping)
    assert needle in str(ei.value)
