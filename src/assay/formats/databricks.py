"""The Databricks Agent Evaluation input schema (the evaluation set of
``mlflow.evaluate(model_type="databricks-agent")``) and MLflow 3's ``mlflow.genai.evaluate``
evaluation sets. These are flat rows: this module gives their column names (:data:`ALIASES`,
:data:`MULTI`) to the normaliser's flat-row reader, and the ``trace`` column's fill rule.

Columns:

- ``request`` — a string; ``{"messages": [...]}`` (OpenAI chat request: ``query`` is the
  last user message, ``history`` the messages before it); ``{"query": ..., "history":
  [...]}``. ``inputs`` (MLflow 3) is read the same way, and any other object there gives
  its single text field or its compact JSON.
- ``response`` — a string; an OpenAI chat completion (``choices[0].message.content``);
  ``{"messages": [...]}`` (the last message); ``{"content": ...}``. ``outputs`` (MLflow 3)
  likewise, any other value as its compact JSON.
- ``retrieved_context`` — ``[{doc_uri, content}]`` → ``contexts``.
- ``expected_retrieved_context`` — ``[{doc_uri}]`` → ``expected_doc_uris``.
- ``expected_response`` → ``ground_truth``; ``expected_facts``; ``guidelines`` (a list of
  strings, or named lists). MLflow 3's ``expectations`` object holds the same keys.
- ``request_id`` → ``id``. Without one, ``id`` is the SHA-256 (hex) of the request: of
  its UTF-8 text when it is a string, else of its compact JSON with sorted keys
  (``json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``),
  so the same request gets the same id in every file format.
- ``trace`` — an MLflow trace (object or JSON text). Fields the row does not give
  directly (``response``, ``contexts``, ``usage``, ``tool_calls``, even ``query``) are
  taken from it; see :mod:`assay.formats.mlflow_trace`.
"""

from __future__ import annotations

from typing import Any

from assay.formats.fields import (
    REQUEST,
    decoded,
    doc_uris,
    documents,
    ident,
    maybe_json,
    request_fields,
    response_text,
    text,
)
from assay.formats.mlflow_trace import load_trace, trace_fields


def _query_fields(value: Any, path: str, strict: bool) -> dict[str, Any]:
    q, hist = request_fields(value, path, strict=strict)
    out = {"query": q, REQUEST: value}
    if hist:
        out["history"] = hist
    return out


def request(value: Any, path: str) -> dict[str, Any]:
    """The ``request`` column: ``query`` (and ``history``), and the raw request under :data:`REQUEST`."""
    return _query_fields(value, path, True)


def request_text_cell(value: Any, path: str) -> dict[str, Any]:
    """``request`` from a CSV cell: JSON text of a chat request is read as the request."""
    if isinstance(value, str):
        parsed = maybe_json(value, "{")
        if isinstance(parsed, dict) and ("messages" in parsed or "query" in parsed):
            value = parsed
    return _query_fields(value, path, True)


def inputs(value: Any, path: str) -> dict[str, Any]:
    """MLflow 3's ``inputs`` column: like ``request``, but any other value is read loosely."""
    return _query_fields(decoded(value, "{["), path, False)


def response(value: Any, path: str) -> str | None:
    return response_text(value, path, strict=True)


def response_text_cell(value: Any, path: str) -> str | None:
    """``response`` from a CSV cell: JSON text of a chat completion / messages is read as such."""
    if isinstance(value, str):
        parsed = maybe_json(value, "{")
        if isinstance(parsed, dict) and ("choices" in parsed or "messages" in parsed
                                         or set(parsed) == {"content"}):
            value = parsed
    return response_text(value, path, strict=True)


def outputs(value: Any, path: str) -> str | None:
    """MLflow 3's ``outputs`` column: any value that is not a known response shape as its compact JSON."""
    return response_text(value, path, strict=False)


#: source name -> (canonical field, converter); priority 1 (a canonical name wins)
ALIASES = {
    "request_id": ("id", ident),
    "expected_response": ("ground_truth", text),
    "retrieved_context": ("contexts", documents),
    "expected_retrieved_context": ("expected_doc_uris", doc_uris),
    "outputs": ("response", outputs),
}

#: source name -> (primary canonical field, converter returning several fields)
MULTI = {
    "request": ("query", request),
    "inputs": ("query", inputs),
}

MULTI_TEXT_CELLS = {
    "request": ("query", request_text_cell),
    "inputs": ("query", inputs),
}

#: fields a trace may fill when the row does not give them
TRACE_FILLS = ("query", "history", "response", "contexts", "usage", "steps", "tool_calls", "tool_definitions",
               "ground_truth", "expected_facts", "expected_doc_uris", "guidelines")


def fill_from_trace(out: dict[str, Any], origin: dict[str, str], value: Any, row_has_request: bool) -> Any:
    """Fill the fields ``out`` lacks from the row's ``trace``; return the request it saw (or None)."""
    fields = trace_fields(load_trace(value, "trace"), "trace")
    for k in TRACE_FILLS:
        if k not in out and k in fields:
            out[k] = fields[k]
            origin[k] = "trace"
    if "id" not in out and not row_has_request and "id" in fields:
        out["id"] = fields["id"]
        origin["id"] = "trace"
    return fields.get(REQUEST)
