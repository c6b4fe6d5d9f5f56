"""One source row (a dict) → canonical fields → :class:`Record`.

The record fields are those of :class:`assay.records.Record`. Per row the shape is
recognised from its keys, cheaply, by the whole-row shape adapters in :data:`SHAPES`:

- ``messages`` / ``conversation`` → an Azure AI Evaluation conversation (:mod:`.azure`),
  one record per assistant turn;
- ``info`` + ``data`` objects → an MLflow trace (:mod:`.mlflow_trace`);
- ``query`` / ``response`` as message lists (Azure's agent rows), ``request`` / ``inputs`` as a
  Responses API request (``{"input": [...]}``), ``response`` / ``outputs`` as a Responses API
  response (``{"output": [...]}``) → an agent row (:mod:`.agent`).

A shape adapter is a module with ``matches(row)``, ``own_columns(row)`` (the columns it
reads itself) and ``to_fields(row, base, index)``; ``base`` is this module's reading of
the row's other columns as a flat row. Adapters never call back into the normaliser.

Any other row is a *flat* row, read key by key through one table that knows the
canonical names (priority 2), the Azure AI Evaluation names ``question``/``answer``/
``context`` (:data:`.azure.ALIASES`) and the Databricks Agent Evaluation names
``request``/``request_id``/``retrieved_context``/``expected_*``/``inputs``/``outputs``
(:mod:`.databricks`, priority 1), and the ``trace`` column (fills what is still missing).
So a row may mix vocabularies; when two columns give one field, the canonical one wins
and the other is kept in ``extra``. Columns with no meaning to assay go to
``Record.extra``.

A ``None`` value in a known column means the field is absent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from assay.errors import InputError
from assay.formats import agent, azure, databricks, mlflow_trace
from assay.formats.fields import (
    REQUEST,
    FieldError,
    decoded,
    documents,
    guidelines,
    ident,
    integer,
    is_number,
    kind,
    request_id,
    str_list,
    text,
    usage,
)
from assay.records import CANONICAL_FIELDS

__all__ = ["SHAPES", "Normalizer", "ColumnMapping", "MAPPABLE", "PRE_EXTRA", "NUMBERS_AS_TEXT"]

#: the whole-row shapes, tried in order; a row that none matches is a flat row
SHAPES = (azure, mlflow_trace, agent)

PRE_EXTRA = "\x00extra"  # key under which a mapped row carries columns displaced by the mapping

#: ``extra`` key listing the columns whose JSON number was read as text (``{"response": 42}`` → ``"42"``)
NUMBERS_AS_TEXT = "numbers_read_as_text"
_TEXT_FIELDS = frozenset(("query", "response", "ground_truth"))

_TEXT, _SINGLE, _MULTI, _SPECIAL = 0, 1, 2, 3  # _TEXT: a str value is taken as is


def _contexts(v: Any, p: str) -> Any:
    return documents(v, p)


CANONICAL = {
    "id": ident,
    "query": text,
    "history": agent.chat_messages,
    "response": databricks.response,
    "contexts": _contexts,
    "ground_truth": text,
    "expected_facts": str_list,
    "expected_doc_uris": str_list,
    "guidelines": guidelines,
    "steps": agent.chat_messages,
    "tool_calls": agent.tool_calls,
    "tool_definitions": agent.tool_definitions,
    "expected_tool_calls": agent.expected_tool_calls,
    "usage": usage,
    "conversation_id": ident,
    "turn": integer,
    "turns": integer,
}
assert set(CANONICAL) == set(CANONICAL_FIELDS), "a Record field has no reader"


#: converters that return a str value unchanged (so the table may skip calling them)
_TEXT_FNS = (text, ident, databricks.response, databricks.outputs)
_request = databricks.request


def _table(text_cells: bool) -> dict[str, tuple[Any, ...]]:
    t: dict[str, tuple[Any, ...]] = {}
    for name, fn in CANONICAL.items():
        t[name] = (name, 2, fn, _TEXT if fn in _TEXT_FNS else _SINGLE)
    if text_cells:
        t["response"] = ("response", 2, databricks.response_text_cell, _SINGLE)
    for src, (field, fn) in {**azure.ALIASES, **databricks.ALIASES}.items():
        t[src] = (field, 1, fn, _TEXT if fn in _TEXT_FNS else _SINGLE)
    t["trace"] = ("trace", 0, None, _SPECIAL)
    for src, (field, fn) in (databricks.MULTI_TEXT_CELLS if text_cells else databricks.MULTI).items():
        t[src] = (field, 1, fn, _MULTI)
    for src in ("extra", PRE_EXTRA):
        t[src] = (None, 0, None, _SPECIAL)
    return t


#: every column name the mapping may target
MAPPABLE = frozenset(CANONICAL) | frozenset(azure.ALIASES) | frozenset(databricks.ALIASES) \
    | frozenset(databricks.MULTI) | {"trace", "messages", "conversation", "expectations"}


class Normalizer:
    """Turns rows into canonical field dicts. ``origin`` (after each flat row) maps each
    field to the column it came from, so an error can name the user's column."""

    __slots__ = ("table", "origin")

    def __init__(self, text_cells: bool = False):
        self.table = _table(text_cells)
        self.origin: dict[str, str] = {}

    def row(self, row: dict[str, Any], index: int) -> dict[str, Any] | list[dict[str, Any]]:
        """The fields of one record, or a list of them (a conversation gives one per turn)."""
        for shape in SHAPES:
            if shape.matches(row):
                own = shape.own_columns(row)
                rest = {k: v for k, v in row.items() if k not in own}
                base = self.flat(rest) if rest else {}
                self.origin = {}
                return shape.to_fields(row, base, index)
        return self.flat(row)

    def flat(self, row: dict[str, Any]) -> dict[str, Any]:  # noqa: C901
        if "expectations" in row:
            row = _expand_expectations(row)
        table = self.table
        out: dict[str, Any] = {}
        origin: dict[str, str] = {}
        extra: dict[str, Any] | None = None
        trace = raw_request = numbers = None
        for key, value in row.items():
            h = table.get(key)
            if h is None:
                if extra is None:
                    extra = {}
                extra[key] = value
                continue
            if value is None:
                continue
            field, p, fn, mode = h
            if mode <= _SINGLE:
                cur = origin.get(field)
                if cur is not None:
                    if extra is None:
                        extra = {}
                    if table[cur][1] >= p:
                        extra[key] = value
                        continue
                    extra[cur] = row[cur]
                if mode == _TEXT and value.__class__ is str:
                    out[field] = value
                else:
                    out[field] = fn(value, key)
                    if field in _TEXT_FIELDS and is_number(value):
                        numbers = [*(numbers or ()), key]
                origin[field] = key
            elif mode == _MULTI:
                cur = origin.get(field)
                if cur is not None and table[cur][1] >= p:
                    if extra is None:
                        extra = {}
                    extra[key] = value
                    continue
                if value.__class__ is str and fn is _request:  # the common case, without the call
                    out[field] = value
                    origin[field] = key
                    if raw_request is None:
                        raw_request = value
                    continue
                got = fn(value, key)
                if is_number(value):
                    numbers = [*(numbers or ()), key]
                if raw_request is None:
                    raw_request = got.pop(REQUEST)
                else:
                    got.pop(REQUEST)
                for f, v in got.items():
                    c = origin.get(f)
                    if c is None or table[c][1] < p:
                        if v is None:
                            out.pop(f, None)
                        else:
                            out[f] = v
                        origin[f] = key
            elif key == "trace":
                trace = value
            else:  # "extra" (a results file read back) or columns displaced by a mapping
                if extra is None:
                    extra = {}
                if isinstance(value, dict):
                    extra.update(value)
                else:
                    extra[key] = value
        if trace is not None:
            seen = databricks.fill_from_trace(out, origin, trace, raw_request is not None)
            if raw_request is None:
                raw_request = seen
        if raw_request is not None and "id" not in out and "id" not in origin:
            out["id"] = request_id(raw_request)
        if numbers:
            if extra is None:
                extra = {}
            extra[NUMBERS_AS_TEXT] = numbers
        if extra:
            out["extra"] = extra
        self.origin = origin
        return out


def _expand_expectations(row: dict[str, Any]) -> dict[str, Any]:
    exp = row["expectations"]
    new = {k: v for k, v in row.items() if k != "expectations"}
    exp = decoded(exp, "{")
    if not isinstance(exp, dict):
        if exp is not None:
            raise FieldError("expectations", f"expected an object of expected values, got {kind(exp)}")
        return new
    for k, v in exp.items():
        if k not in new:
            new[k] = v
    return new


# --------------------------------------------------------------------------- mapping

_REF = re.compile(r"^\$\{\s*(?:data|target)\.([^}]+?)\s*\}$")


class ColumnMapping:
    """``{canonical_field: user_column}``; ``${data.x}`` / ``${target.x}`` name column ``x``
    (Azure's form); a dotted name reaches into nested objects when no column has that name.

    ``unmatched`` holds the columns that no row given to :meth:`apply` has had yet (a mapping
    to a column no row has is a mistake: :meth:`assay.formats.Dataset.check_mapping`);
    ``target_refs`` the columns written ``${target.x}``."""

    __slots__ = ("pairs", "consumed", "reverse", "unmatched", "target_refs")

    def __init__(self, mapping: Mapping[str, Any]):
        if not isinstance(mapping, Mapping):
            raise InputError(f"the column mapping must be an object of field -> column, got {kind(mapping)}",
                             source="mapping")
        pairs = []
        target_refs = set()
        for field, col in mapping.items():
            if field not in MAPPABLE:
                known = ", ".join(sorted(CANONICAL))
                raise InputError(f"unknown field {field!r}; the fields are: {known}", source="mapping",
                                 field=field)
            if not isinstance(col, str) or not col.strip():
                raise InputError(f"expected a column name or '${{data.column}}', got {kind(col)}",
                                 source="mapping", field=field)
            col = col.strip()
            m = _REF.match(col)
            if m:
                if col.lstrip("${ ").startswith("target."):
                    target_refs.add(m.group(1))
                col = m.group(1)
            elif col.startswith("${"):
                raise InputError(f"cannot read {col!r}: write '${{data.column}}' or '${{target.column}}'",
                                 source="mapping", field=field)
            path = tuple(col.split(".")) if "." in col else None
            pairs.append((field, col, path))
        self.pairs = pairs
        self.consumed = frozenset(c for _, c, _ in pairs) | frozenset(p[0] for _, _, p in pairs if p)
        self.reverse = {field: col for field, col, _ in pairs}
        self.unmatched = {col for _, col, _ in pairs}
        self.target_refs = frozenset(target_refs)

    def __bool__(self) -> bool:
        return bool(self.pairs)

    @property
    def columns(self) -> list[str]:
        return [c for _, c, _ in self.pairs]

    def apply(self, row: dict[str, Any]) -> dict[str, Any]:
        new: dict[str, Any] = {}
        unmatched = self.unmatched
        for field, col, path in self.pairs:
            if col in row:
                new[field] = row[col]
            elif path is not None:
                v: Any = row
                for part in path:
                    if isinstance(v, dict) and part in v:
                        v = v[part]
                    else:
                        break
                else:
                    new[field] = v
            if unmatched and col in unmatched and field in new:
                unmatched.discard(col)
        displaced = None
        consumed = self.consumed
        for k, v in row.items():
            if k in consumed:
                continue
            if k in new:
                if displaced is None:
                    displaced = {}
                displaced[k] = v
                continue
            new[k] = v
        if displaced:
            new[PRE_EXTRA] = displaced
        return new

    def user_name(self, path: str | None) -> str | None:
        """``path`` with its first part (a field or column name) renamed to the user's column."""
        if not path or not self.reverse:
            return path
        cut = len(path)
        for sep in ".[":
            i = path.find(sep)
            if 0 <= i < cut:
                cut = i
        root = path[:cut]
        col = self.reverse.get(root)
        return path if col is None else col + path[cut:]
