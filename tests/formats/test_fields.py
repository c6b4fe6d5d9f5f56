"""The public pieces of ``assay.formats.fields`` and the shape-adapter contract."""

import ast
from pathlib import Path

import pytest

from assay.formats import azure, databricks, fields, mlflow_trace, normalize
from assay.formats.fields import FieldError, container, decoded, each, some_messages, to_record

FORMATS = Path(fields.__file__).parent


def _err(fn, *args, **kw):
    with pytest.raises(FieldError) as e:
        fn(*args, **kw)
    return e.value.field, e.value.message


def test_container_none_json_text_and_value():
    assert container(None, "f", "a list of things") is None
    assert container('["a", 1]', "f", "a list of things") == ["a", 1]
    assert container({"a": 1}, "f", "an object", "{", (dict,)) == {"a": 1}
    assert container('{"a": 1}', "f", "an object", "{", (dict,)) == {"a": 1}


def test_container_errors_name_the_path_and_what_was_expected():
    assert _err(container, "plain words", "contexts", "a list of documents") == \
        ("contexts", "expected a list of documents, got a string")
    assert _err(container, 3, "contexts", "a list of documents") == \
        ("contexts", "expected a list of documents, got a number")
    assert _err(container, "[1,", "x", "a list of strings") == ("x", "expected a list of strings, got a string")


def test_each_checks_items_and_copies_only_on_replacement():
    items = ["a", "b"]
    assert each(items, "f", "a list", lambda v, p, i: v) is items
    out = each(items, "f", "a list", lambda v, p, i: v.upper())
    assert out == ["A", "B"] and items == ["a", "b"]

    def item(v, p, i):
        raise FieldError(fields.at(p, i), "bad")

    assert _err(each, [1, 2], "tags", "a list", item) == ("tags[0]", "bad")
    assert each(None, "f", "a list", item) is None


def test_decoded_parses_json_text_or_keeps_the_value():
    assert decoded('{"a": 1}', "{") == {"a": 1}
    assert decoded("not json", "{") == "not json"
    assert decoded("[1]", "{") == "[1]"
    assert decoded(5, "{") == 5


def test_some_messages_needs_one():
    assert some_messages([{"role": "user", "content": "hi"}], "m") == [{"role": "user", "content": "hi"}]
    assert _err(some_messages, [], "messages") == \
        ("messages", "expected at least one chat message, got an empty list")


def test_to_record_names_the_users_column():
    r = to_record({"query": "q", "response": "r"})
    assert r.query == "q" and r.response == "r"
    assert _err(to_record, {"query": "q", "turn": "x"}, {"turn": "step"}) == \
        ("step", "expected a whole number, got a string")


def test_converters_keep_their_wording():
    assert _err(fields.str_list, [1], "facts") == ("facts[0]", "expected text, got a number")
    assert _err(fields.obj_list, [1], "calls", "tool calls") == ("calls[0]", "expected an object, got a number")
    assert _err(fields.obj_list, "x", "calls", "tool calls") == ("calls", "expected a list of tool calls, got a string")
    assert _err(fields.doc_uris, [{}], "e") == ("e[0]", "the document has no 'doc_uri'")
    assert _err(fields.documents, 5, "context", string_ok=True) == \
        ("context", "expected text or a list of documents, got a number")
    assert _err(fields.documents, {"a": 1}, "c") == ("c", "expected a list of documents, got an object")
    assert _err(fields.guidelines, 3, "g") == \
        ("g", "expected a list of strings (or an object mapping names to lists of strings), got a number")
    assert _err(fields.usage, "x", "u") == ("u", "expected an object with token counts, got a string")
    assert fields.guidelines({"tone": ["calm"], "gone": None}, "g") == {"tone": ["calm"]}


def test_shape_adapters_share_one_contract():
    for shape in normalize.SHAPES:
        for name in ("matches", "own_columns", "to_fields"):
            assert callable(getattr(shape, name)), (shape.__name__, name)
    assert azure.matches({"messages": []}) and not azure.matches({"query": "q"})
    assert mlflow_trace.matches({"info": {}, "data": {}}) and not mlflow_trace.matches({"info": 1, "data": {}})


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("module", [azure, databricks, mlflow_trace, fields])
def test_adapters_never_import_the_normaliser(module):
    imported = _imports(Path(module.__file__))
    assert not {m for m in imported if m.startswith(("assay.formats.normalize", "assay.formats.dataset"))}
