"""Small shared pieces of the input layer: field errors and value converters.

Every converter takes the value and the *path* of the source field it came from (the
user's own name, e.g. ``retrieved_context[2]``) so that an error names what the user
wrote, not what assay calls it. Converters return plain dicts and lists; the
:class:`~assay.records.Record` is built once per row (:func:`to_record`, or the dataset's
own validation), and :func:`translate` words a pydantic error the same way.

They do the type checks pydantic would do, up front and with readable messages, so the
one validation error a user sees reads ``field 'contexts': expected a list of documents,
got a string`` rather than a pydantic dump. Every list or object field has one shape —
absent (``None``), the JSON text of the value (a CSV cell), or the value itself — read by
one combinator, :func:`container`; :func:`each` adds a check of each list element.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from assay.records import Record

MISSING = object()

#: key under which a request converter also returns the raw request (the source of a default id)
REQUEST = "\x00request"


class FieldError(Exception):
    """A bad value in one field of one row. The dataset adds the source and the line."""

    def __init__(self, field: str | None, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def kind(value: Any) -> str:
    """How a value reads in an error message: ``a string``, ``a number``, ``an object`` ..."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def maybe_json(value: str, opening: str) -> Any:
    """``value`` parsed as JSON if it starts with ``opening`` (``[`` or ``{``) and parses; else missing.

    Lets a CSV cell (or a JSON-encoded column of a DataFrame) hold a list or object.
    """
    s = value.lstrip()
    if not s or s[0] not in opening:
        return MISSING
    try:
        return orjson.loads(s)
    except orjson.JSONDecodeError:
        return MISSING


def json_text(value: Any) -> str:
    """Compact JSON text of a structured value (what a judge sees for a non-text input/output)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return str(value)


# --------------------------------------------------------------------------- scalars

def is_number(value: Any) -> bool:
    """A JSON number (not a boolean): read as its text where text belongs, as a CSV cell would be."""
    return value.__class__ is int or value.__class__ is float


def number_text(value: int | float) -> str:
    """The text of a JSON number: ``42`` → ``"42"``, ``2.5`` → ``"2.5"``."""
    return str(value)


def text(value: Any, path: str) -> str | None:
    """Text; a JSON number is read as its text (math answers are numbers), as a CSV cell is."""
    if value is None or value.__class__ is str:
        return value
    if isinstance(value, str):
        return str(value)
    if is_number(value):
        return number_text(value)
    raise FieldError(path, f"expected text, got {kind(value)}")


def ident(value: Any, path: str) -> str | None:
    """An id: text, or a whole number (written as text)."""
    if value is None or value.__class__ is str:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return str(value)
    raise FieldError(path, f"expected an id (text or a whole number), got {kind(value)}")


def integer(value: Any, path: str) -> int | None:
    if value is None or (value.__class__ is int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise FieldError(path, f"expected a whole number, got {kind(value)}")


def content_text(content: Any, path: str) -> str | None:
    """A chat message's content: text, or OpenAI content parts whose text parts are joined."""
    if content is None or content.__class__ is str:
        return content
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                t = part.get("text")
                if t is None and isinstance(part.get("content"), str):
                    t = part["content"]
                if t is not None:
                    if not isinstance(t, str):
                        raise FieldError(f"{path}[{i}].text", f"expected text, got {kind(t)}")
                    parts.append(t)
            else:
                raise FieldError(f"{path}[{i}]", f"expected a content part (an object), got {kind(part)}")
        return "\n".join(parts)
    raise FieldError(path, f"expected text, got {kind(content)}")


# --------------------------------------------------------------------------- the container combinator

def container(value: Any, path: str, what: str, opening: str = "[", types: tuple[type, ...] = (list,)) -> Any:
    """The one shape every list / object field shares: ``None`` stays ``None``; a string must be the
    JSON text of the value (it starts with ``opening`` and parses); the value must be one of ``types``.

    Otherwise a :class:`FieldError` ``expected <what>, got <kind>`` names ``path``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        parsed = maybe_json(value, opening)
        if parsed is MISSING:
            raise FieldError(path, f"expected {what}, got a string")
        value = parsed
    if not isinstance(value, types):
        raise FieldError(path, f"expected {what}, got {kind(value)}")
    return value


def each(value: Any, path: str, what: str, item: Callable[[Any, str, int], Any]) -> list[Any] | None:
    """A list field: :func:`container`, then ``item(element, path, i)`` for each element.

    ``item`` checks one element and returns it, or its canonical replacement (the list is
    copied only when an element is replaced); an error names the element ``at(path, i)``,
    built only when there is one.
    """
    value = container(value, path, what)
    return None if value is None else items(value, path, item)


def items(value: list[Any], path: str, item: Callable[[Any, str, int], Any]) -> list[Any]:
    """:func:`each` for a value already known to be a list."""
    out = value
    for i, v in enumerate(value):
        nv = item(v, path, i)
        if nv is not v:
            if out is value:
                out = list(value)
            out[i] = nv
    return out


def at(path: str, i: int) -> str:
    """The path of a list's element: ``contexts[2]``."""
    return f"{path}[{i}]"


def decoded(value: Any, opening: str) -> Any:
    """``value`` parsed if it is the JSON text of a list / object (see :func:`maybe_json`), else as it is."""
    if isinstance(value, str):
        parsed = maybe_json(value, opening)
        if parsed is not MISSING:
            return parsed
    return value


# --------------------------------------------------------------------------- list items

def _string(v: Any, path: str, i: int) -> str:
    if v.__class__ is not str:
        raise FieldError(at(path, i), f"expected text, got {kind(v)}")
    return v


def _object(v: Any, path: str, i: int) -> dict[str, Any]:
    if v.__class__ is not dict:
        raise FieldError(at(path, i), f"expected an object, got {kind(v)}")
    return v


def _message(m: Any, path: str, i: int) -> dict[str, Any]:
    if m.__class__ is not dict:
        raise FieldError(at(path, i), "expected a chat message (an object with 'role' and 'content'), "
                                      f"got {kind(m)}")
    role = m.get("role")
    if role.__class__ is not str:
        if role is None:
            raise FieldError(at(path, i), "the chat message has no 'role'")
        raise FieldError(f"{at(path, i)}.role", f"expected text, got {kind(role)}")
    c = m.get("content")
    if c is not None and c.__class__ is not str:
        m = {**m, "content": content_text(c, f"{at(path, i)}.content")}
    tc = m.get("tool_calls")
    if tc is not None and not isinstance(tc, list):
        raise FieldError(f"{at(path, i)}.tool_calls", f"expected a list of tool calls, got {kind(tc)}")
    return m


def _doc_uri(d: Any, path: str, i: int) -> str:
    if isinstance(d, dict):
        uri = d.get("doc_uri")
        if uri is None:
            raise FieldError(at(path, i), "the document has no 'doc_uri'")
        if not isinstance(uri, str):
            raise FieldError(f"{at(path, i)}.doc_uri", f"expected text, got {kind(uri)}")
        return uri
    if isinstance(d, str):
        return d
    raise FieldError(at(path, i), f"expected a document with 'doc_uri', got {kind(d)}")


_PLAIN_DOC_KEYS = frozenset(("content", "doc_uri", "title", "id"))
_DOC_TEXT_KEYS = ("content", "doc_uri", "title")


def _plain_document(d: Any, path: str, i: int) -> dict[str, Any]:
    if d.__class__ is dict:
        if d.keys() <= _PLAIN_DOC_KEYS:
            v = d.get("id")
            if v is None or v.__class__ is str:
                return d  # already canonical; pydantic checks the value types
        return _document(d, at(path, i), False)
    return _document_item(d, path, i)


def _retrieved_document(d: Any, path: str, i: int) -> dict[str, Any]:
    if d.__class__ is dict:
        return _document(d, at(path, i), True)
    return _document_item(d, path, i)


def _document_item(d: Any, path: str, i: int) -> dict[str, Any]:
    if isinstance(d, str):
        return {"content": d}
    raise FieldError(at(path, i), "expected a document (an object with 'content' and/or 'doc_uri') "
                                  f"or a string, got {kind(d)}")


# --------------------------------------------------------------------------- messages

def messages(value: Any, path: str) -> list[dict[str, Any]] | None:
    """A list of OpenAI-style chat messages, checked; content parts are joined into text."""
    return each(value, path, "a list of chat messages", _message)


def some_messages(value: Any, path: str) -> list[dict[str, Any]]:
    """:func:`messages` that must give at least one message."""
    msgs = messages(value, path)
    if not msgs:
        raise FieldError(path, "expected at least one chat message, got an empty list")
    return msgs


def split_messages(msgs: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]] | None]:
    """(the last user message's text, the messages before it)."""
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i]["role"] == "user":
            return msgs[i].get("content"), (msgs[:i] or None)
    return None, (msgs or None)


# --------------------------------------------------------------------------- documents

def documents(value: Any, path: str, *, string_ok: bool = False, retriever: bool = False
              ) -> list[dict[str, Any]] | None:
    """A list of retrieved chunks as ``{content, doc_uri, title, id, ...}`` dicts.

    ``string_ok``: a plain string is one document (Azure's ``context``). An object with
    ``citations`` (an Azure assistant message's context) gives its citations. Items may be
    strings (the content) or objects; ``page_content``/``text`` name the content, and
    ``metadata.doc_uri`` / ``metadata.source`` (and, for ``retriever`` output, ``id``)
    the document URI.
    """
    if string_ok and isinstance(value, str):
        s = value.lstrip()
        if s.startswith("{") and "citations" in s:
            parsed = maybe_json(s, "{")
            if isinstance(parsed, dict) and "citations" in parsed:
                return documents(parsed, path, retriever=True)
        return [{"content": value}]
    what = "text or a list of documents" if string_ok else "a list of documents"
    value = container(value, path, what, "[", (list, dict))
    if isinstance(value, dict):
        if "citations" in value:
            return documents(value["citations"], f"{path}.citations", retriever=True)
        raise FieldError(path, "expected a list of documents, got an object")
    return None if value is None else items(value, path, _retrieved_document if retriever else _plain_document)


def _first_str(d: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def _document(d: dict[str, Any], path: str, retriever: bool) -> dict[str, Any]:  # noqa: C901
    nd = dict(d)
    if nd.get("content") is None:
        for k in ("page_content", "text", "chunk_text"):
            if k in nd:
                nd["content"] = nd.pop(k)
                break
    meta = nd.get("metadata")
    if isinstance(meta, str):
        parsed = maybe_json(meta, "{")
        if isinstance(parsed, dict):
            meta = parsed
    if nd.get("doc_uri") is None:
        uri = None
        if isinstance(meta, dict):
            uri = _first_str(meta, ("doc_uri", "source", "url", "uri", "file_path", "filepath"))
        if uri is None:
            uri = _first_str(nd, ("url", "uri", "filepath", "source"))
        if uri is None and retriever:
            if isinstance(meta, dict):
                uri = _first_str(meta, ("id", "doc_id", "chunk_id"))
            if uri is None:
                v = nd.get("id")
                uri = str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) and v != "" else None
        if uri is not None:
            nd["doc_uri"] = uri
        elif "doc_uri" in nd:
            del nd["doc_uri"]
    if nd.get("title") is None and isinstance(meta, dict) and isinstance(meta.get("title"), str):
        nd["title"] = meta["title"]
    v = nd.get("id")
    if v is not None and v.__class__ is not str:
        if isinstance(v, int) and not isinstance(v, bool):
            nd["id"] = str(v)
        else:
            raise FieldError(f"{path}.id", f"expected an id (text or a whole number), got {kind(v)}")
    for k in _DOC_TEXT_KEYS:
        v = nd.get(k)
        if v is not None and v.__class__ is not str:
            raise FieldError(f"{path}.{k}", f"expected text, got {kind(v)}")
    return nd


def doc_uris(value: Any, path: str) -> list[str] | None:
    """``expected_retrieved_context``: a list of ``{doc_uri}`` objects (or of URI strings)."""
    return each(value, path, "a list of documents with 'doc_uri'", _doc_uri)


# --------------------------------------------------------------------------- lists & objects

def str_list(value: Any, path: str) -> list[str] | None:
    return each(value, path, "a list of strings", _string)


_GUIDELINES = "a list of strings (or an object mapping names to lists of strings)"


def guidelines(value: Any, path: str) -> list[str] | dict[str, list[str]] | None:
    """A list of guideline strings, or named lists of them (``{"tone": [...], ...}``)."""
    value = container(value, path, _GUIDELINES, "[{", (list, dict))
    if not isinstance(value, dict):
        return items(value, path, _string)
    # a Parquet struct column fills names absent from this row with null
    return {str(name): str_list(v, f"{path}.{name}") for name, v in value.items() if v is not None}


def obj_list(value: Any, path: str, what: str = "objects") -> list[dict[str, Any]] | None:
    return each(value, path, f"a list of {what}", _object)


_USAGE_KEYS = {
    "input_tokens": "input_tokens", "prompt_tokens": "input_tokens",
    "output_tokens": "output_tokens", "completion_tokens": "output_tokens",
    "total_tokens": "total_tokens", "latency_ms": "latency_ms",
}


def usage(value: Any, path: str) -> dict[str, Any] | None:
    """Token counts and latency; OpenAI's ``prompt_tokens``/``completion_tokens`` are accepted."""
    value = container(value, path, "an object with token counts", "{", (dict,))
    if value is None:
        return None
    out: dict[str, Any] = {}
    for k, v in value.items():
        name = _USAGE_KEYS.get(k)
        if name is None or v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise FieldError(f"{path}.{k}", f"expected a number, got {kind(v)}")
        if name != "latency_ms":
            if isinstance(v, float) and not v.is_integer():
                raise FieldError(f"{path}.{k}", "expected a whole number of tokens")
            v = int(v)
        out.setdefault(name, v)
    return out


# --------------------------------------------------------------------------- requests & responses

def request_id(request: Any) -> str:
    """The default row id: SHA-256 hex of the raw request (sorted-key compact JSON if not a string)."""
    if isinstance(request, str):
        raw = request.encode()
    else:
        raw = orjson.dumps(request, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(raw).hexdigest()


_QUERY_KEYS = ("query", "question", "input", "prompt", "request", "user_input", "text", "message")
_ANSWER_KEYS = ("response", "answer", "output", "result", "text", "content", "completion")


def _other_object(value: dict[str, Any], path: str, strict: bool, expected: str, keys: tuple[str, ...],
                  inner: Callable[[Any], Any]) -> Any:
    """An object of no known request / response shape: with ``strict`` an error; else its single
    value (``inner`` reads a nested object or list), its first text field among ``keys``, or its
    compact JSON."""
    if strict:
        names = ", ".join(list(map(str, value))[:5]) or "none"
        raise FieldError(path, f"expected {expected}, got an object with keys {names}")
    if len(value) == 1:
        (only,) = value.values()
        if only is None or only.__class__ is str:
            return only
        if isinstance(only, (dict, list)):
            return inner(only)
    for k in keys:
        v = value.get(k)
        if v.__class__ is str:
            return v
    return json_text(value)


def request_fields(value: Any, path: str, *, strict: bool) -> tuple[str | None, list[dict[str, Any]] | None]:
    """(query, history) from a request in any of the Databricks / MLflow shapes.

    - a string: the query;
    - ``{"messages": [...]}`` (OpenAI chat request): the last user message; earlier ones are history;
    - ``{"query": ..., "history": [...]}``;
    - a bare list of chat messages.
    Other objects: with ``strict`` an error, else a single text field (``question``,
    ``input``, ...) or the compact JSON of the object (MLflow ``inputs`` are any kwargs).
    """
    if value is None or value.__class__ is str:
        return value, None
    if is_number(value):
        return number_text(value), None
    if isinstance(value, dict):
        if "messages" in value:
            msgs = some_messages(value["messages"], f"{path}.messages")
            return split_messages(msgs)
        if "query" in value:
            q = value["query"]
            if q is not None and q.__class__ is not str:
                if strict:
                    q = text(q, f"{path}.query")
                else:
                    q = q if isinstance(q, str) else json_text(q)
            return q, messages(value.get("history"), f"{path}.history") or None
        got = _other_object(value, path, strict, "text, {'messages': [...]} or {'query': ..., 'history': [...]}",
                            _QUERY_KEYS, lambda only: request_fields(only, path, strict=False))
        return got if isinstance(got, tuple) else (got, None)
    if isinstance(value, list):
        if value and all(isinstance(m, dict) and "role" in m for m in value):
            return split_messages(messages(value, path))
        if strict:
            raise FieldError(path, "expected text or a chat request, got a list")
        return json_text(value), None
    if strict:
        raise FieldError(path, f"expected text or a chat request, got {kind(value)}")
    return json_text(value), None


def response_text(value: Any, path: str, *, strict: bool) -> str | None:  # noqa: C901
    """The answer text from a response in any of the Databricks / MLflow / OpenAI shapes.

    A string; an OpenAI chat completion (``choices[0].message.content``, or ``.text``);
    ``{"messages": [...]}`` (the last message); ``{"content": ...}``; an OpenAI Responses
    API object (``output[].content[].text``). Other objects: with ``strict`` an error, else
    a single text field or the compact JSON of the value.
    """
    if value is None or value.__class__ is str:
        return value
    if is_number(value):
        return number_text(value)
    if isinstance(value, dict):
        choices = value.get("choices")
        if isinstance(choices, list) and choices:
            c0 = choices[0]
            if isinstance(c0, dict):
                msg = c0.get("message")
                if isinstance(msg, dict):
                    return content_text(msg.get("content"), f"{path}.choices[0].message.content")
                if "text" in c0:
                    return text(c0["text"], f"{path}.choices[0].text")
                delta = c0.get("delta")
                if isinstance(delta, dict):
                    return content_text(delta.get("content"), f"{path}.choices[0].delta.content")
            raise FieldError(f"{path}.choices[0]", "expected a chat completion choice with 'message'")
        if "messages" in value:
            msgs = some_messages(value["messages"], f"{path}.messages")
            return msgs[-1].get("content")
        if "content" in value:
            return content_text(value["content"], f"{path}.content")
        out = value.get("output")
        if isinstance(out, list):  # OpenAI Responses API / MLflow ResponsesAgent
            texts = [part["text"] for item in out if isinstance(item, dict)
                     and isinstance(item.get("content"), list)
                     for part in item["content"] if isinstance(part, dict) and isinstance(part.get("text"), str)]
            if texts:
                return "\n".join(texts)
        return _other_object(value, path, strict,
                             "text, a chat completion, {'messages': [...]} or {'content': ...}",
                             _ANSWER_KEYS, lambda only: response_text(only, path, strict=False))
    if isinstance(value, list):
        if value and isinstance(value[-1], dict) and "role" in value[-1]:
            return content_text(value[-1].get("content"), f"{path}[{len(value) - 1}].content")
        if strict:
            raise FieldError(path, "expected text or a chat response, got a list")
        return json_text(value)
    if strict:
        raise FieldError(path, f"expected text, got {kind(value)}")
    return json_text(value)


# --------------------------------------------------------------------------- validation errors

_EXPECT = {
    "id": "an id (text)", "query": "text", "response": "text", "ground_truth": "text",
    "history": "a list of chat messages", "contexts": "a list of documents",
    "expected_facts": "a list of strings", "expected_doc_uris": "a list of strings",
    "guidelines": "a list of strings (or an object mapping names to lists of strings)",
    "steps": "a list of chat messages",
    "tool_calls": "a list of tool calls", "tool_definitions": "a list of tool definitions",
    "expected_tool_calls": "a list of expected tool calls",
    "usage": "an object with token counts", "conversation_id": "an id (text)", "turn": "a whole number", "turns": "a whole number",
}


def translate(err: ValidationError, origin: Mapping[str, str] | None = None
              ) -> tuple[str | None, str]:
    """(field path, one-line message) for the first error of a pydantic validation."""
    e = err.errors(include_url=False)[0]
    loc = [p for p in e.get("loc", ()) if not (isinstance(p, str) and ("[" in p or p in ("list", "dict")))]
    if not loc:
        return None, "the row is not valid"
    root = str(loc[0])
    src = origin.get(root) if origin else None
    path = (src or root) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])
    got = kind(e.get("input"))
    t = e.get("type", "")
    if t == "missing":
        return path, "a required value is missing"
    if len(loc) == 1 and root in _EXPECT:
        return path, f"expected {_EXPECT[root]}, got {got}"
    if t.startswith("string"):
        return path, f"expected text, got {got}"
    if t.startswith("int") or t.startswith("float"):
        return path, f"expected a number, got {got}"
    if t.startswith("list"):
        return path, f"expected a list, got {got}"
    if t in ("model_type", "model_attributes_type", "dict_type"):
        return path, f"expected an object, got {got}"
    return path, f"invalid value ({got})"


def to_record(fields: dict[str, Any], origin: Mapping[str, str] | None = None) -> Record:
    """The :class:`Record` of one set of fields; a type error raises :class:`FieldError` naming the field."""
    try:
        return Record.model_validate(fields)
    except ValidationError as e:
        path, msg = translate(e, origin)
        raise FieldError(path, msg) from None
