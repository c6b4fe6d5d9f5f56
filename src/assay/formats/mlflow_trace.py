"""MLflow trace v2/v3 JSON → one record per trace.

A whole-row shape adapter (:func:`matches`, :func:`own_columns`, :func:`to_fields`) for
files of traces; :func:`trace_fields` also serves the Databricks ``trace`` column and
:func:`trace_to_record` the trace a target returns.

Layouts read (both are what MLflow's ``Trace.to_dict()`` / ``Trace.to_json()`` write):

- **v2** (MLflow 2.x): ``info`` = ``{request_id, experiment_id, timestamp_ms,
  execution_time_ms, status, request_metadata, tags}``; ``data`` = ``{spans, request,
  response}``; a span is ``{name, context: {span_id, trace_id}, parent_id, start_time,
  end_time, status_code, status_message, attributes, events}`` with times in ns.
- **v3** (MLflow 3.x): ``info`` = ``{trace_id, client_request_id, trace_location,
  request_time (RFC 3339), execution_duration_ms (or a proto duration "1.5s"), state,
  trace_metadata, tags, assessments}``; ``data`` = ``{spans}``; a span is OpenTelemetry
  shaped: ``{trace_id, span_id, parent_span_id, name, start_time_unix_nano,
  end_time_unix_nano, status: {code, message}, attributes, events}``.

In both, span ``attributes`` hold JSON-encoded values: ``mlflow.spanType``
(``"\\"RETRIEVER\\""``), ``mlflow.spanInputs``, ``mlflow.spanOutputs``,
``mlflow.chat.tokenUsage``. Values that are not JSON text are taken as they are, and
OTLP attribute lists (``[{key, value: {stringValue}}]``) are accepted too.

What a trace gives (the Databricks Agent Evaluation rules):

- ``query`` / ``history`` from the root span's inputs, ``response`` from its outputs
  (chat requests and completions understood; other objects become compact JSON). A
  ResponsesAgent's root span (inputs ``{"request": {"input": [...], "tools": [...]}}``,
  outputs ``{"output": [...items]}``) gives the user's last message as ``query``, the
  items as ``steps`` / ``tool_calls`` and the request's ``tools`` as ``tool_definitions``
  (:mod:`.agent`). When the inputs give no text, ``info.request_preview`` is the query;
- ``contexts`` from the **last top-level RETRIEVER span** in time order ("top-level": no
  RETRIEVER ancestor; "last": when an app retrieves several times, the documents of the
  final retrieval step, as the Databricks evaluation-set schema says). A document's
  content comes from ``page_content`` / ``content`` / ``text``, its ``doc_uri`` from
  ``metadata.doc_uri``, else ``metadata.source``, else its id;
- ``tool_calls`` from TOOL spans, in time order:
  ``{type: "tool_call", name, arguments, result, tool_call_id?, error?}`` (``error``: the
  span's status is ERROR; its status message, else its exception event's message) -- or,
  when the root span's output items hold the calls, those, with their TOOL spans' errors;
- ``usage``: input/output/total tokens summed over the LLM and CHAT_MODEL spans that have
  no LLM/CHAT_MODEL descendant (so a wrapper and the call it wraps are not counted twice),
  from ``mlflow.chat.tokenUsage`` or the span outputs' OpenAI ``usage``; else the trace's
  ``mlflow.trace.tokenUsage`` metadata. Latency from ``execution_duration_ms`` /
  ``execution_time_ms`` / ``execution_duration``, else the root span's end − start;
- expectations logged on a v3 trace (``expected_response``, ``expected_facts``,
  ``guidelines``, ``expected_retrieved_context``) become ``ground_truth`` and friends.
"""

from __future__ import annotations

from typing import Any

import orjson

from assay.errors import InputError
from assay.formats import agent
from assay.formats.fields import (
    REQUEST,
    FieldError,
    doc_uris,
    documents,
    guidelines,
    json_text,
    kind,
    request_fields,
    response_text,
    str_list,
    to_record,
)
from assay.records import Record

SPAN_TYPE = "mlflow.spanType"
SPAN_INPUTS = "mlflow.spanInputs"
SPAN_OUTPUTS = "mlflow.spanOutputs"
CHAT_USAGE = "mlflow.chat.tokenUsage"
TRACE_USAGE = "mlflow.trace.tokenUsage"

_LLM_TYPES = frozenset(("LLM", "CHAT_MODEL"))


def matches(row: Any) -> bool:
    """True for an MLflow trace object: ``{"info": {...}, "data": {...}}``, or a trace's data
    alone, ``{"spans": [...]}`` (the form MLflow's own examples publish)."""
    if not isinstance(row, dict):
        return False
    if isinstance(row.get("info"), dict) and isinstance(row.get("data"), dict):
        return True
    return "info" not in row and "data" not in row and _spans_only(row)


def _spans_only(row: dict[str, Any]) -> bool:
    """``{"spans": [span, ...]}`` whose first span has a span id (v2 ``context.span_id`` or v3 ``span_id``)."""
    spans = row.get("spans")
    if not isinstance(spans, list) or not spans or not isinstance(spans[0], dict):
        return False
    s0 = spans[0]
    return "span_id" in s0 or (isinstance(s0.get("context"), dict) and "span_id" in s0["context"])


def _whole(row: dict[str, Any]) -> dict[str, Any]:
    """A spans-only trace as ``{"info": {}, "data": {"spans": [...]}}``; a whole trace as it is."""
    if "data" in row or "info" in row or "spans" not in row:
        return row
    return {"info": {}, "data": {"spans": row["spans"]}}


def _decode(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _int(value: Any) -> int | None:
    """A count or a time in ns: a whole number, a float (truncated) or digits; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _otlp_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "string_value"):
        if k in v:
            return v[k]
    for k in ("intValue", "int_value"):
        if k in v:
            return int(v[k])
    for k in ("doubleValue", "double_value", "boolValue", "bool_value"):
        if k in v:
            return v[k]
    return v


class _Span:
    __slots__ = ("id", "parent", "name", "start", "end", "attrs", "raw", "order", "_decoded")

    def __init__(self, raw: dict[str, Any], order: int):
        self.raw, self.order = raw, order
        sid = raw.get("span_id")
        ctx = raw.get("context")
        if sid is None and isinstance(ctx, dict):
            sid = ctx.get("span_id")
        self.id = sid if sid not in (None, "") else f"#{order}"
        parent = raw["parent_span_id"] if "parent_span_id" in raw else raw.get("parent_id")
        self.parent = parent if parent not in (None, "") else None
        self.name = raw.get("name")
        self.start = _int(raw.get("start_time_unix_nano", raw.get("start_time", raw.get("start_time_ns"))))
        self.end = _int(raw.get("end_time_unix_nano", raw.get("end_time", raw.get("end_time_ns"))))
        attrs = raw.get("attributes")
        if isinstance(attrs, list):
            attrs = {a.get("key"): _otlp_value(a.get("value")) for a in attrs if isinstance(a, dict)}
        self.attrs = attrs if isinstance(attrs, dict) else {}
        self._decoded: dict[str, Any] = {}

    def attr(self, key: str, fallback: str | None = None) -> Any:
        if key in self._decoded:
            return self._decoded[key]
        if key in self.attrs:
            v = _decode(self.attrs[key])
        elif fallback is not None:
            v = self.raw.get(fallback)
        else:
            v = None
        self._decoded[key] = v
        return v

    @property
    def type(self) -> str | None:
        t = self.attr(SPAN_TYPE, "span_type")
        return t if isinstance(t, str) else None

    @property
    def inputs(self) -> Any:
        return self.attr(SPAN_INPUTS, "inputs")

    @property
    def outputs(self) -> Any:
        return self.attr(SPAN_OUTPUTS, "outputs")

    def when(self) -> tuple[int, int]:
        return (self.start if self.start is not None else -1, self.order)


def load_trace(value: Any, path: str) -> dict[str, Any]:
    """A trace given as an object or as its JSON text (the Databricks ``trace`` column)."""
    if isinstance(value, (str, bytes)):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            raise FieldError(path, "expected an MLflow trace (an object or its JSON text), "
                                   "but the text is not valid JSON") from None
    if not isinstance(value, dict):
        raise FieldError(path, f"expected an MLflow trace (an object with 'info' and 'data'), got {kind(value)}")
    value = _whole(value)
    if not isinstance(value.get("info", {}), dict):
        raise FieldError(f"{path}.info", f"expected an object, got {kind(value.get('info'))}")
    if not isinstance(value.get("data", {}), dict):
        raise FieldError(f"{path}.data", f"expected an object with 'spans', got {kind(value.get('data'))}")
    return value


def _spans(trace: dict[str, Any], path: str) -> list[_Span]:
    data = trace.get("data") or {}
    raw = data.get("spans")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise FieldError(f"{path}.data.spans", f"expected a list of spans, got {kind(raw)}")
    out = []
    for i, s in enumerate(raw):
        if not isinstance(s, dict):
            raise FieldError(f"{path}.data.spans[{i}]", f"expected a span (an object), got {kind(s)}")
        out.append(_Span(s, i))
    return out


def _root(spans: list[_Span]) -> _Span | None:
    if not spans:
        return None
    roots = [s for s in spans if s.parent is None]
    if not roots:
        ids = {s.id for s in spans}
        roots = [s for s in spans if s.parent not in ids]
    if not roots:
        return None
    return min(roots, key=lambda s: (s.start is None, s.start or 0, s.order))


def _ancestors(span: _Span, by_id: dict[Any, _Span]):
    seen = 0
    parent = span.parent
    while parent is not None and seen <= len(by_id):
        p = by_id.get(parent)
        if p is None:
            return
        yield p
        parent = p.parent
        seen += 1


def _retrieved(spans: list[_Span], by_id: dict[Any, _Span], path: str) -> list[dict[str, Any]] | None:
    retrievers = [s for s in spans if s.type == "RETRIEVER"]
    if not retrievers:
        return None
    top = [s for s in retrievers if not any(a.type == "RETRIEVER" for a in _ancestors(s, by_id))]
    last = max(top or retrievers, key=_Span.when)
    out = last.outputs
    if isinstance(out, dict):
        for k in ("documents", "results", "output", "chunks"):
            if isinstance(out.get(k), list):
                out = out[k]
                break
    if out is None:
        return []
    if not isinstance(out, list):
        raise FieldError(f"{path}.data.spans[{last.order}].outputs",
                         f"expected the retriever's list of documents, got {kind(out)}")
    return documents(out, f"{path}.data.spans[{last.order}].outputs", retriever=True) or []


def _span_error(s: _Span) -> str | None:
    """The error of a span whose status is ERROR: the status message, else its exception event's, else "ERROR"."""
    st = s.raw.get("status")
    code = st.get("code") if isinstance(st, dict) else s.raw.get("status_code")
    if not isinstance(code, str) or not code.upper().endswith("ERROR"):
        return None
    msg = st.get("message") if isinstance(st, dict) else s.raw.get("status_message")
    if isinstance(msg, str) and msg:
        return msg
    for ev in s.raw.get("events") or ():
        attrs = ev.get("attributes") if isinstance(ev, dict) else None
        if isinstance(attrs, dict) and isinstance(attrs.get("exception.message"), str):
            t = attrs.get("exception.type")
            return f"{t}: {attrs['exception.message']}" if isinstance(t, str) else attrs["exception.message"]
    return "ERROR"


def _tool_calls(spans: list[_Span]) -> list[dict[str, Any]] | None:
    tools = sorted((s for s in spans if s.type == "TOOL"), key=_Span.when)
    if not tools:
        return None
    calls = []
    for s in tools:
        call: dict[str, Any] = {"type": "tool_call", "name": s.name, "arguments": s.inputs, "result": s.outputs}
        for src in (s.outputs, s.inputs):
            if isinstance(src, dict) and isinstance(src.get("tool_call_id"), str):
                call["tool_call_id"] = src["tool_call_id"]
                break
        err = _span_error(s)
        if err is not None:
            call["error"] = err
            if call["result"] is None:
                del call["result"]
        calls.append(call)
    return calls


def _span_errors(calls: list[dict[str, Any]], span_calls: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The calls read from the root span's output items, with the errors of their TOOL spans
    (matched by ``tool_call_id``, else by name in order)."""
    failed = [c for c in span_calls or () if "error" in c]
    if not failed:
        return calls
    out = []
    for c in calls:
        hit = next((f for f in failed if c.get("tool_call_id") is not None
                    and f.get("tool_call_id") == c["tool_call_id"]), None)
        if hit is None:
            hit = next((f for f in failed if f.get("tool_call_id") is None and f["name"] == c["name"]), None)
        if hit is not None:
            failed.remove(hit)
            c = {**c, "error": hit["error"]}
        out.append(c)
    return out


def _span_usage(s: _Span) -> tuple[int | None, int | None, int | None] | None:
    u = s.attr(CHAT_USAGE)
    if isinstance(u, dict):
        return _int(u.get("input_tokens")), _int(u.get("output_tokens")), _int(u.get("total_tokens"))
    out = s.outputs
    if isinstance(out, dict) and isinstance(out.get("usage"), dict):
        u = out["usage"]
        return (_int(u.get("prompt_tokens", u.get("input_tokens"))),
                _int(u.get("completion_tokens", u.get("output_tokens"))), _int(u.get("total_tokens")))
    i = _int(_decode(s.attrs.get("gen_ai.usage.input_tokens")))
    o = _int(_decode(s.attrs.get("gen_ai.usage.output_tokens")))
    if i is not None or o is not None:
        return i, o, None
    return None


def _duration_ms(info: dict[str, Any]) -> float | None:
    for k in ("execution_duration_ms", "execution_time_ms"):
        v = info.get(k)
        if v is not None and not isinstance(v, bool):
            try:
                return float(v)
            except (TypeError, ValueError):
                pass
    v = info.get("execution_duration")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str) and v.endswith("s"):
        try:
            return float(v[:-1]) * 1000.0
        except ValueError:
            return None
    return None


def _usage(spans: list[_Span], by_id: dict[Any, _Span], info: dict[str, Any], root: _Span | None  # noqa: C901
           ) -> dict[str, Any] | None:
    llm = [s for s in spans if s.type in _LLM_TYPES]
    wrapping: set[Any] = set()
    for s in llm:
        for a in _ancestors(s, by_id):
            if a.id in wrapping:
                break
            wrapping.add(a.id)
    inp = out = tot = None
    for s in llm:
        if s.id in wrapping:
            continue
        u = _span_usage(s)
        if u is None:
            continue
        i, o, t = u
        if i is not None:
            inp = (inp or 0) + i
        if o is not None:
            out = (out or 0) + o
        if t is None and i is not None and o is not None:
            t = i + o
        if t is not None:
            tot = (tot or 0) + t
    if inp is None and out is None and tot is None:
        meta = info.get("trace_metadata") or info.get("request_metadata") or {}
        u = _decode(meta.get(TRACE_USAGE)) if isinstance(meta, dict) else None
        if isinstance(u, dict):
            inp, out, tot = _int(u.get("input_tokens")), _int(u.get("output_tokens")), _int(u.get("total_tokens"))
    if tot is None and inp is not None and out is not None:
        tot = inp + out
    latency = _duration_ms(info)
    if latency is None and root is not None and root.start is not None and root.end is not None:
        latency = (root.end - root.start) / 1e6
    usage = {k: v for k, v in (("input_tokens", inp), ("output_tokens", out), ("total_tokens", tot),
                                ("latency_ms", latency)) if v is not None}
    return usage or None


def _expectations(info: dict[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    assessments = info.get("assessments")
    if not isinstance(assessments, list):
        return out
    for i, a in enumerate(assessments):
        if not isinstance(a, dict) or not isinstance(a.get("expectation"), dict):
            continue
        name = a.get("assessment_name") or a.get("name")
        exp = a["expectation"]
        v = exp.get("value")
        if v is None and isinstance(exp.get("serialized_value"), dict):
            v = _decode(exp["serialized_value"].get("value"))
        if v is None:
            continue
        p = f"{path}.info.assessments[{i}].expectation.value"
        if name == "expected_response":
            out["ground_truth"] = v if isinstance(v, str) else json_text(v)
        elif name == "expected_facts":
            out["expected_facts"] = str_list(v, p)
        elif name == "guidelines":
            out["guidelines"] = guidelines(v, p)
        elif name == "expected_retrieved_context":
            out["expected_doc_uris"] = doc_uris(v, p)
    return out


def trace_fields(trace: dict[str, Any], path: str = "trace") -> dict[str, Any]:  # noqa: C901
    """The canonical fields a trace gives (only those it has), as plain values."""
    info = trace.get("info") or {}
    spans = _spans(trace, path)
    by_id = {s.id: s for s in spans}
    root = _root(spans)
    fields: dict[str, Any] = {}
    tid = info.get("trace_id") or info.get("request_id")
    if tid is None and not info and spans:  # spans only: the spans' own trace id
        tid = spans[0].raw.get("trace_id") or (spans[0].raw.get("context") or {}).get("trace_id")
    if isinstance(tid, str):
        fields["id"] = tid

    inputs = root.inputs if root is not None else None
    outputs = root.outputs if root is not None else None
    data = trace.get("data") or {}
    if inputs is None and data.get("request") is not None:  # v2 keeps them on the trace data too
        inputs = _decode(data["request"])
    if outputs is None and data.get("response") is not None:
        outputs = _decode(data["response"])
    request = produced = None
    if inputs is not None:
        items = agent.request_items(inputs)
        if items is not None:  # a Responses API request (a ResponsesAgent's {"request": {"input": [...]}})
            request = agent.chat_messages(items, f"{path}.inputs.input", True)
            tools = agent.request_tools(inputs)
            if tools is not None:
                fields["tool_definitions"] = agent.tool_definitions(tools, f"{path}.inputs.tools")
        else:
            q, hist = request_fields(inputs, f"{path}.inputs", strict=False)
            if q is not None:
                fields["query"] = q
            if hist:
                fields["history"] = hist
        fields[REQUEST] = inputs
    if outputs is not None:
        items = agent.response_items(outputs)
        if items is not None:  # a Responses API response: {"output": [...items]}
            produced = agent.chat_messages(items, f"{path}.outputs.output", True)
        else:
            r = response_text(outputs, f"{path}.outputs", strict=False)
            if r is not None:
                fields["response"] = r
    if request is not None or produced is not None:
        got = agent.split(request, produced)
        if request is None:
            got.pop("history", None)
        fields.update(got)
    preview = info.get("request_preview")
    q = fields.get("query")
    if isinstance(preview, str) and preview.strip() and not preview.lstrip().startswith(("{", "[")) and (
            q is None or (not isinstance(inputs, str) and q.lstrip().startswith(("{", "[")))):
        fields["query"] = preview  # the root span's inputs give no text: the trace's own preview of the request

    docs = _retrieved(spans, by_id, path)
    if docs is not None:
        fields["contexts"] = docs
    calls = _tool_calls(spans)
    if "tool_calls" in fields:
        fields["tool_calls"] = _span_errors(fields["tool_calls"], calls)
    elif calls:
        fields["tool_calls"] = calls
    usage = _usage(spans, by_id, info, root)
    if usage:
        fields["usage"] = usage
    fields.update(_expectations(info, path))
    return fields


def own_columns(row: dict[str, Any]) -> tuple[str, ...]:
    """The columns :func:`to_fields` reads itself; the others are the row's ``base`` fields."""
    return ("info", "data") if "info" in row or "data" in row else ("spans",)


def to_fields(row: dict[str, Any], base: dict[str, Any], index: int) -> dict[str, Any]:
    """The record fields of a row that *is* a trace (a JSON/JSONL file of traces).

    ``base``: the canonical fields of the columns a user added next to the trace (e.g. an
    ``expected_response``); they win over what the trace gives. ``index`` is not used (a
    trace has its own id).
    """
    row = _whole(row)
    fields = trace_fields(row, "trace")
    fields.pop(REQUEST, None)
    if base:
        fields = {**fields, **base}
    state = row["info"].get("state") or row["info"].get("status")
    if isinstance(state, str):
        fields["extra"] = {**(fields.get("extra") or {}), "trace_state": state}
    return fields


def trace_to_record(trace: Any) -> Record:
    """One :class:`Record` from an MLflow trace (an object or its JSON text).

    Used by the engine for the trace a target returns. Raises :class:`InputError`.
    """
    try:
        fields = trace_fields(load_trace(trace, "trace"), "trace")
        fields.pop(REQUEST, None)
        return to_record(fields)
    except FieldError as e:
        raise InputError(e.message, source="<trace>", field=e.field) from None
