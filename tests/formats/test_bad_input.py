"""Bad input: one clear line naming the file, the line and the field; skip mode keeps the good rows."""

import os
from pathlib import Path

import pytest

from assay.errors import InputError
from assay.formats import open_dataset

BAD = Path(__file__).resolve().parents[1] / "fixtures" / "bad"


def first_error(path, **kw):
    with pytest.raises(InputError) as ei:
        list(open_dataset(path, **kw))
    return ei.value


def one_line(err):
    s = str(err)
    assert "\n" not in s and "Traceback" not in s and "pydantic" not in s.lower() and "validation error" not in s
    return s


def test_malformed_json_line():
    p = BAD / "malformed_line.jsonl"
    e = first_error(p)
    assert e.source == str(p) and e.line == 3 and e.field is None
    assert one_line(e).startswith(f"{p}, line 3: malformed JSON")
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q1", "q3"]
    assert ds.rows_read == 3 and [b.line for b in ds.bad_rows] == [3]


def test_wrong_type_boolean_where_text_belongs():
    p = BAD / "wrong_type.jsonl"
    e = first_error(p)
    assert one_line(e) == f"{p}, line 2, field 'query': expected text, got a boolean"
    assert (e.line, e.field) == (2, "query")
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q1", "q3"]


def test_string_where_a_list_belongs():
    p = BAD / "string_for_list.jsonl"
    e = first_error(p)
    assert one_line(e) == f"{p}, line 2, field 'contexts': expected a list of documents, got a string"
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q1"] and len(ds.bad_rows) == 1


def test_empty_file_even_in_skip_mode(tmp_path):
    p = BAD / "empty.jsonl"
    for mode in ("fail", "skip"):
        with pytest.raises(InputError) as ei:
            list(open_dataset(p, on_bad_row=mode))
        assert one_line(ei.value) == f"{p}: the file is empty: no rows"
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n\n")
    with pytest.raises(InputError, match="empty"):
        list(open_dataset(blank, on_bad_row="skip"))
    for name, text in (("e.json", "  "), ("e.json2.json", "[]"), ("h.csv", "query,response\n")):
        f = tmp_path / name
        f.write_text(text)
        with pytest.raises(InputError, match="empty"):
            list(open_dataset(f, on_bad_row="skip"))
    with pytest.raises(InputError, match="no rows"):
        list(open_dataset([]))


def test_missing_path():
    p = BAD / "nope.jsonl"
    with pytest.raises(InputError) as ei:
        open_dataset(p)
    assert one_line(ei.value) == f"{p}: no such file or directory"


def test_path_through_a_file_is_unreadable(tmp_path):
    f = tmp_path / "file.jsonl"
    f.write_text('{"query": "q"}\n')
    with pytest.raises(InputError) as ei:
        open_dataset(f / "inner.jsonl")
    assert one_line(ei.value).startswith(f"{f / 'inner.jsonl'}: ")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
def test_unreadable_path(tmp_path):
    p = tmp_path / "secret.jsonl"
    p.write_text('{"query": "q"}\n')
    p.chmod(0)
    with pytest.raises(InputError, match="cannot read"):
        list(open_dataset(p))


def test_row_that_is_not_an_object():
    p = BAD / "not_object.jsonl"
    e = first_error(p)
    assert one_line(e) == f"{p}, line 2: expected a row object with named fields, got a list"
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q1", "q4"]
    assert [b.line for b in ds.bad_rows] == [2, 3] and ds.rows_read == 4
    e = first_error(["text row"])
    assert str(e) == "<list>, line 1: expected a row object with named fields, got a string"


def test_json_array_element_errors_give_the_elements_file_line():
    p = BAD / "bad_element.json"
    e = first_error(p)
    assert one_line(e) == f"{p}, line 3, field 'retrieved_context': expected a list of documents, got a string"
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q1", "q3"]


def test_data_wrapper_element_errors_give_the_elements_file_line(tmp_path):
    p = tmp_path / "w.json"
    p.write_text('{"version": "1", "note": "[not the array]",\n "data": [\n  {"query": "q1"},\n\n  {"query": true}\n ]}\n')
    e = first_error(p)
    assert (e.line, e.field) == (5, "query")


def test_malformed_json_file_names_the_line(tmp_path):
    p = tmp_path / "d.json"
    p.write_text('[\n {"query": "q1"},\n {"query": }\n]\n')
    with pytest.raises(InputError) as ei:
        open_dataset(p, on_bad_row="skip").__iter__().__next__()
    assert ei.value.line == 3 and "malformed JSON" in one_line(ei.value)


@pytest.mark.parametrize("row,field,msg", [
    ({"response": True}, "response", "expected text, got a boolean"),
    ({"query": ["a"]}, "query", "expected text, got a list"),
    ({"contexts": [{"content": 3}]}, "contexts[0].content", "expected text, got a number"),
    ({"contexts": [7]}, "contexts[0]",
     "expected a document (an object with 'content' and/or 'doc_uri') or a string, got a number"),
    ({"history": "hi"}, "history", "expected a list of chat messages, got a string"),
    ({"history": [{"role": "user", "content": 4}]}, "history[0].content", "expected text, got a number"),
    ({"expected_doc_uris": "u1"}, "expected_doc_uris", "expected a list of strings, got a string"),
    ({"usage": {"input_tokens": "many"}}, "usage.input_tokens", "expected a number, got a string"),
    ({"turn": "first"}, "turn", "expected a whole number, got a string"),
    ({"tool_calls": {"name": "x"}}, "tool_calls", "expected a list of tool calls, got an object"),
    ({"context": 12}, "context", "expected text or a list of documents, got a number"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "context": 5}]},
     "messages[1].context", "expected text or a list of documents, got a number"),
    ({"messages": []}, "messages", "expected at least one chat message, got an empty list"),
])
def test_type_errors(row, field, msg):
    e = first_error([row])
    assert e.field == field, str(e)
    assert one_line(e) == f"<list>, line 1, field {field!r}: {msg}"


def test_skip_mode_keeps_rows_around_a_bad_conversation():
    rows = [{"query": "ok1"},
            {"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": 9}]},
            {"query": "ok2"}]
    ds = open_dataset(rows, on_bad_row="skip")
    assert [r.query for r in ds] == ["ok1", "ok2"]
    (err,) = ds.bad_rows
    assert err.line == 2 and err.field == "messages[1].content"


def test_bad_on_bad_row_value():
    with pytest.raises(InputError, match="on_bad_row"):
        open_dataset([{"query": "q"}], on_bad_row="ignore")


def test_csv_header_with_an_empty_column_name():
    p = BAD / "empty_column_name.csv"
    with pytest.raises(InputError) as ei:
        list(open_dataset(p, on_bad_row="skip"))
    e = ei.value
    assert (e.source, e.line, e.field) == (str(p), 1, None)
    assert one_line(e) == f"{p}, line 1: the header's column 3 of 4 has no name (name it, or remove the column)"
