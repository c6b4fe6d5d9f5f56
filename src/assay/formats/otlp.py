"""OpenTelemetry traces in (OTLP), as plain spans grouped into traces.

What is read:

- **OTLP JSON**: an ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) per line, as the
  OpenTelemetry Collector's file exporter writes it, or one JSON document (an object, or a list of
  them). Field names in lowerCamelCase (the OTLP/JSON rule) or snake_case; ``traceId`` /
  ``spanId`` in hex (the OTLP/JSON rule) or base64 (the protobuf JSON mapping); 64-bit integers
  as numbers or strings; enums as integers or names;
- **OTLP protobuf**: one ``ExportTraceServiceRequest`` (``opentelemetry-proto``, imported when
  needed), or a sequence of them each prefixed by its 4-byte big-endian length (the Collector's
  file exporter with ``format: proto``);
- either of them gzip-compressed (recognised by its first bytes).

:func:`spans_of` turns one decoded request -- a JSON object, or an
``ExportTraceServiceRequest`` message as a receiver decodes it -- into :class:`Span` objects;
:func:`group_traces` groups spans into :class:`Trace` objects (a span seen twice, same trace
and span id, is kept once); :func:`read_file` does both for a file. Attribute values come out as
plain Python values (strings, numbers, booleans, lists, dicts). What the spans mean (the GenAI
conventions) is :mod:`.genai_spans`'s job.

A file that is not OTLP raises :class:`~assay.errors.InputError` naming the file and the line.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from assay.errors import InputError

#: OTLP's status codes and span kinds, by number (the JSON form may also give the names)
STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}
KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}

_GZIP = b"\x1f\x8b"


class Event:
    """A span event: ``name``, ``time`` (ns since the epoch, or None), ``attributes``."""

    __slots__ = ("name", "time", "attributes")

    def __init__(self, name: str, time: int | None, attributes: dict[str, Any]):
        self.name, self.time, self.attributes = name, time, attributes


class Span:
    """One span, its ids in lowercase hex. ``start`` / ``end`` are ns since the epoch (None when
    absent); ``status`` is ``UNSET``, ``OK`` or ``ERROR``; ``resource`` the attributes of the
    resource that emitted it (``service.name`` ...); ``scope`` the instrumentation scope's name;
    ``line`` the line of a JSON file where its request starts (None otherwise), for messages."""

    __slots__ = ("trace_id", "span_id", "parent_id", "name", "kind", "start", "end", "status", "status_message",
                 "attributes", "events", "resource", "scope", "line")

    def __init__(self, trace_id: str, span_id: str, parent_id: str | None, name: str, kind: str,
                 start: int | None, end: int | None, status: str, status_message: str,
                 attributes: dict[str, Any], events: list[Event], resource: dict[str, Any], scope: str | None,
                 line: int | None = None):
        self.trace_id, self.span_id, self.parent_id, self.name, self.kind = trace_id, span_id, parent_id, name, kind
        self.start, self.end, self.status, self.status_message = start, end, status, status_message
        self.attributes, self.events, self.resource, self.scope, self.line = attributes, events, resource, scope, line

    @property
    def latency_ms(self) -> float | None:
        if self.start is None or self.end is None or self.end < self.start:
            return None
        return (self.end - self.start) / 1e6

    def label(self) -> str:
        """How a message names the span: its name and its span id."""
        return f"span {self.name!r} (span id {self.span_id})"

    def __repr__(self) -> str:
        return f"Span({self.name!r}, trace_id={self.trace_id}, span_id={self.span_id}, parent_id={self.parent_id})"


class Trace:
    """The spans of one trace, in the order they were read; ``root`` is the span without a parent
    (or whose parent was never read), the earliest when there are several."""

    __slots__ = ("trace_id", "spans", "_root")

    def __init__(self, trace_id: str, spans: list[Span]):
        self.trace_id, self.spans = trace_id, spans
        self._root: Span | None = None

    @property
    def root(self) -> Span:
        if self._root is None:
            ids = {s.span_id for s in self.spans}
            roots = [s for s in self.spans if s.parent_id is None or s.parent_id not in ids] or self.spans
            self._root = min(roots, key=lambda s: (s.start is None, s.start or 0))
        return self._root


# --------------------------------------------------------------------------- values

class _Bad(Exception):
    """A value that is not what OTLP says (the message names the field)."""


def _get(d: dict[str, Any], camel: str, snake: str) -> Any:
    v = d.get(camel)
    return d.get(snake) if v is None else v


def _int(v: Any, what: str) -> int | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        raise _Bad(f"{what}: expected a whole number, got a boolean")
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    raise _Bad(f"{what}: expected a whole number, got {v!r:.40}")


def _hex_id(v: Any, size: int, what: str) -> str | None:
    """An id as lowercase hex: OTLP/JSON's hex text, the protobuf JSON mapping's base64, or bytes."""
    if v is None or v == "" or v == b"":
        return None
    if isinstance(v, (bytes, bytearray)):
        raw = bytes(v)
    elif isinstance(v, str):
        if len(v) == 2 * size:
            try:
                bytes.fromhex(v)
                return v.lower()
            except ValueError:
                pass
        try:
            raw = base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            raise _Bad(f"{what}: expected {2 * size} hex digits, got {v!r:.60}") from None
    else:
        raise _Bad(f"{what}: expected {2 * size} hex digits, got {type(v).__name__}")
    if len(raw) != size:
        raise _Bad(f"{what}: expected {size} bytes ({2 * size} hex digits), got {len(raw)}")
    if not any(raw):
        return None  # all zero: OTLP's "no id"
    return raw.hex()


_STRING, _BOOL, _DOUBLE, _INT, _ARRAY, _KVLIST, _BYTES = range(7)
_VALUE_KEYS = {"stringValue": _STRING, "string_value": _STRING, "boolValue": _BOOL, "bool_value": _BOOL,
               "doubleValue": _DOUBLE, "double_value": _DOUBLE, "intValue": _INT, "int_value": _INT,
               "arrayValue": _ARRAY, "array_value": _ARRAY, "kvlistValue": _KVLIST, "kvlist_value": _KVLIST,
               "bytesValue": _BYTES, "bytes_value": _BYTES}


def json_value(v: Any) -> Any:
    """An OTLP/JSON ``AnyValue`` (``{"stringValue": ...}``, ``{"intValue": "3"}``, arrays, key-value
    lists) as a plain value; bytes stay the base64 text the JSON has."""
    if not isinstance(v, dict):
        return v
    for key, x in v.items():  # one key: the value's type
        t = _VALUE_KEYS.get(key)
        if t is None or x is None:
            continue
        if t <= _DOUBLE or t == _BYTES:
            return x
        if t == _INT:
            return _int(x, "intValue")
        if t == _ARRAY:
            return [json_value(e) for e in (x.get("values") or ())] if isinstance(x, dict) else x
        return json_attributes(x.get("values")) if isinstance(x, dict) else x
    return None


def json_attributes(kvs: Any) -> dict[str, Any]:
    """``[{"key": k, "value": AnyValue}, ...]`` as a dict (an object of plain values is taken as it is)."""
    if kvs is None:
        return {}
    if isinstance(kvs, dict):
        return dict(kvs)
    if not isinstance(kvs, list):
        raise _Bad(f"attributes: expected a list of key-value pairs, got {type(kvs).__name__}")
    out: dict[str, Any] = {}
    for kv in kvs:
        if kv.__class__ is dict:
            key = kv.get("key")
            if key.__class__ is str:
                out[key] = json_value(kv.get("value"))
    return out


def _proto_value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    x = getattr(v, which)
    if which == "array_value":
        return [_proto_value(e) for e in x.values]
    if which == "kvlist_value":
        return _proto_attributes(x.values)
    if which == "bytes_value":
        return base64.b64encode(x).decode("ascii")
    return x


def _proto_attributes(kvs: Iterable[Any]) -> dict[str, Any]:
    return {kv.key: _proto_value(kv.value) for kv in kvs}


def _enum(v: Any, table: dict[int, str], prefix: str, what: str) -> str:
    if v is None or v == "":
        return table[0]
    if isinstance(v, str):
        name = v.upper().removeprefix(prefix)
        if name in table.values():
            return name
        if not v.strip().isdigit():
            raise _Bad(f"{what}: unknown value {v!r:.40}")
    n = _int(v, what)
    return table.get(n, table[0]) if n is not None else table[0]


# --------------------------------------------------------------------------- requests → spans

def _json_span(s: Any, resource: dict[str, Any], scope: str | None, line: int | None) -> Span:
    if not isinstance(s, dict):
        raise _Bad(f"a span must be an object, got {type(s).__name__}")
    name = s.get("name") if isinstance(s.get("name"), str) else ""
    where = f"span {name!r}"
    trace_id = _hex_id(_get(s, "traceId", "trace_id"), 16, f"{where}: traceId")
    span_id = _hex_id(_get(s, "spanId", "span_id"), 8, f"{where}: spanId")
    if trace_id is None or span_id is None:
        raise _Bad(f"{where} has no {'traceId' if trace_id is None else 'spanId'}")
    st = s.get("status") if isinstance(s.get("status"), dict) else {}
    events = []
    for e in s.get("events") or ():
        if isinstance(e, dict):
            events.append(Event(e.get("name") if isinstance(e.get("name"), str) else "",
                                _int(_get(e, "timeUnixNano", "time_unix_nano"), f"{where}: event time"),
                                json_attributes(e.get("attributes"))))
    msg = st.get("message")
    return Span(trace_id, span_id, _hex_id(_get(s, "parentSpanId", "parent_span_id"), 8, f"{where}: parentSpanId"),
                name, _enum(s.get("kind"), KINDS, "SPAN_KIND_", f"{where}: kind"),
                _int(_get(s, "startTimeUnixNano", "start_time_unix_nano"), f"{where}: startTimeUnixNano"),
                _int(_get(s, "endTimeUnixNano", "end_time_unix_nano"), f"{where}: endTimeUnixNano"),
                _enum(st.get("code"), STATUS, "STATUS_CODE_", f"{where}: status.code"),
                msg if isinstance(msg, str) else "", json_attributes(s.get("attributes")), events, resource, scope,
                line)


def _json_spans(request: dict[str, Any], line: int | None) -> Iterator[Span]:
    groups = _get(request, "resourceSpans", "resource_spans")
    if groups is None:
        keys = ", ".join(list(map(str, request))[:5]) or "none"
        raise _Bad(f"expected an OTLP ExportTraceServiceRequest ({{\"resourceSpans\": [...]}}), got an object "
                   f"with keys {keys}")
    if not isinstance(groups, list):
        raise _Bad(f"resourceSpans: expected a list, got {type(groups).__name__}")
    for rs in groups:
        if not isinstance(rs, dict):
            raise _Bad(f"resourceSpans: expected objects, got {type(rs).__name__}")
        res = rs.get("resource") if isinstance(rs.get("resource"), dict) else {}
        resource = json_attributes(res.get("attributes"))
        scopes = _get(rs, "scopeSpans", "scope_spans")
        if scopes is None:  # OTLP before 0.15
            scopes = _get(rs, "instrumentationLibrarySpans", "instrumentation_library_spans")
        for ss in scopes or ():
            if not isinstance(ss, dict):
                raise _Bad(f"scopeSpans: expected objects, got {type(ss).__name__}")
            sc = ss.get("scope") or ss.get("instrumentationLibrary") or ss.get("instrumentation_library") or {}
            scope = sc.get("name") if isinstance(sc, dict) and isinstance(sc.get("name"), str) else None
            for s in ss.get("spans") or ():
                yield _json_span(s, resource, scope, line)


def _proto_spans(request: Any, line: int | None) -> Iterator[Span]:
    for rs in request.resource_spans:
        resource = _proto_attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name or None
            for s in ss.spans:
                trace_id = _hex_id(s.trace_id, 16, f"span {s.name!r}: trace_id")
                span_id = _hex_id(s.span_id, 8, f"span {s.name!r}: span_id")
                if trace_id is None or span_id is None:
                    raise _Bad(f"span {s.name!r} has no {'trace_id' if trace_id is None else 'span_id'}")
                events = [Event(e.name, e.time_unix_nano or None, _proto_attributes(e.attributes)) for e in s.events]
                yield Span(trace_id, span_id, _hex_id(s.parent_span_id, 8, f"span {s.name!r}: parent_span_id"),
                           s.name, KINDS.get(s.kind, "UNSPECIFIED"), s.start_time_unix_nano or None,
                           s.end_time_unix_nano or None, STATUS.get(s.status.code, "UNSET"), s.status.message,
                           _proto_attributes(s.attributes), events, resource, scope, line)


def spans_of(request: Any, source: str = "<request>", line: int | None = None) -> list[Span]:
    """The spans of one ``ExportTraceServiceRequest``: its OTLP/JSON object (decoded JSON), or the
    protobuf message itself (what an OTLP receiver decodes). Raises :class:`InputError`."""
    try:
        if isinstance(request, dict):
            return list(_json_spans(request, line))
        if hasattr(request, "resource_spans"):
            return list(_proto_spans(request, line))
    except _Bad as e:
        raise InputError(f"not OTLP: {e}", source=source, line=line) from None
    raise InputError(f"expected an OTLP ExportTraceServiceRequest, got {type(request).__name__}", source=source,
                     line=line)


def decode_protobuf(data: bytes, source: str = "<request>") -> Any:
    """One ``ExportTraceServiceRequest`` from its protobuf bytes (``opentelemetry-proto``)."""
    return _parse_export(data, "trace.v1.trace_service_pb2", "ExportTraceServiceRequest", source)


def _parse_export(data: bytes, module: str, name: str, source: str) -> Any:
    """The OTLP collector message ``name`` (in ``opentelemetry.proto.collector.<module>``) from its bytes."""
    import importlib

    try:
        from google.protobuf.message import DecodeError
        cls = getattr(importlib.import_module(f"opentelemetry.proto.collector.{module}"), name)
    except ImportError:
        raise InputError("reading OTLP protobuf needs opentelemetry-proto: pip install 'assay[monitor]'",
                         source=source) from None
    msg = cls()
    try:
        msg.ParseFromString(data)
    except DecodeError as e:
        raise InputError(f"not an OTLP protobuf {name} ({e})", source=source) from None
    return msg


# --------------------------------------------------------------------------- logs → span events

def _log_event(trace_id: str | None, span_id: str | None, name: str, time: int | None,
               attrs: dict[str, Any], body: Any) -> tuple[str, str, Event] | None:
    """A log record as an event of its span (None without a span context or a name). The record's
    body is folded into the attributes as the per-message events' ``gen_ai.event.content`` (a map)
    or ``content`` (anything else), where the GenAI reader looks for it."""
    name = name or (attrs.get("event.name") if isinstance(attrs.get("event.name"), str) else "")
    if trace_id is None or span_id is None or not name:
        return None
    attrs = dict(attrs)
    if isinstance(body, dict):
        attrs.setdefault("gen_ai.event.content", body)
    elif body is not None:
        attrs.setdefault("content", body)
    return trace_id, span_id, Event(name, time, attrs)


def _json_logs(request: dict[str, Any]) -> Iterator[tuple[str, str, Event] | None]:
    groups = _get(request, "resourceLogs", "resource_logs")
    if not isinstance(groups, list):
        raise _Bad("expected an OTLP ExportLogsServiceRequest ({\"resourceLogs\": [...]})")
    for rl in groups:
        scopes = _get(rl, "scopeLogs", "scope_logs") if isinstance(rl, dict) else None
        for sl in scopes if isinstance(scopes, list) else ():
            records = sl.get("logRecords") or sl.get("log_records") if isinstance(sl, dict) else None
            for r in records if isinstance(records, list) else ():
                if not isinstance(r, dict):
                    raise _Bad(f"logRecords: expected objects, got {type(r).__name__}")
                name = _get(r, "eventName", "event_name")
                yield _log_event(_hex_id(_get(r, "traceId", "trace_id"), 16, "log record: traceId"),
                                 _hex_id(_get(r, "spanId", "span_id"), 8, "log record: spanId"),
                                 name if isinstance(name, str) else "",
                                 _int(_get(r, "timeUnixNano", "time_unix_nano"), "log record: timeUnixNano")
                                 or _int(_get(r, "observedTimeUnixNano", "observed_time_unix_nano"),
                                         "log record: observedTimeUnixNano"),
                                 json_attributes(r.get("attributes")), json_value(r.get("body")))


def _proto_logs(request: Any) -> Iterator[tuple[str, str, Event] | None]:
    for rl in request.resource_logs:
        for sl in rl.scope_logs:
            for r in sl.log_records:
                yield _log_event(_hex_id(r.trace_id, 16, "log record: trace_id"),
                                 _hex_id(r.span_id, 8, "log record: span_id"), getattr(r, "event_name", ""),
                                 r.time_unix_nano or r.observed_time_unix_nano or None,
                                 _proto_attributes(r.attributes),
                                 _proto_value(r.body) if r.HasField("body") else None)


def log_events_of(request: Any, source: str = "<request>") -> tuple[list[tuple[str, str, Event]], int]:
    """The log records of one ``ExportLogsServiceRequest`` (OTLP/JSON object or protobuf message)
    that sit on a span (a trace and span id, and an event name), as ``(trace id, span id,
    Event)``; and how many records were passed over (no span context or no
    name: an app's ordinary logs). Raises :class:`InputError` for a request of another shape."""
    try:
        if isinstance(request, dict):
            got = list(_json_logs(request))
        elif hasattr(request, "resource_logs"):
            got = list(_proto_logs(request))
        else:
            raise _Bad(f"expected an OTLP ExportLogsServiceRequest, got {type(request).__name__}")
    except _Bad as e:
        raise InputError(f"not OTLP logs: {e}", source=source) from None
    kept = [e for e in got if e is not None]
    return kept, len(got) - len(kept)


def decode_logs_protobuf(data: bytes, source: str = "<request>") -> Any:
    """One ``ExportLogsServiceRequest`` from its protobuf bytes (``opentelemetry-proto``)."""
    return _parse_export(data, "logs.v1.logs_service_pb2", "ExportLogsServiceRequest", source)


def group_traces(spans: Iterable[Span]) -> list[Trace]:
    """The spans as traces, in the order each trace was first seen; a span read twice (same trace
    and span id: an exporter's retry) is kept once, the first time."""
    by_trace: dict[str, dict[str, Span]] = {}
    for s in spans:
        seen = by_trace.setdefault(s.trace_id, {})
        if s.span_id not in seen:
            seen[s.span_id] = s
    return [Trace(tid, list(spans.values())) for tid, spans in by_trace.items()]


# --------------------------------------------------------------------------- files

def _read_all(f: IO[bytes], name: str) -> bytes:
    try:
        return f.read()
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise InputError(f"cannot read it: {e}", source=name) from None


def _json_requests(f: IO[bytes], first: bytes, name: str) -> Iterator[tuple[int | None, Any]]:
    """(line, request) of JSON lines, or of one JSON document (an object or a list of them)."""
    try:
        top = orjson.loads(first)
    except orjson.JSONDecodeError:
        top = None
    if not isinstance(top, (dict, list)):  # the first line is not a whole document: one (pretty-printed) document
        raw = first + _read_all(f, name)
        try:
            top = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise InputError(f"malformed JSON ({getattr(e, 'msg', e)})", source=name,
                             line=getattr(e, "lineno", None)) from None
        for r in top if isinstance(top, list) else [top]:
            yield 1, r
        return
    for r in top if isinstance(top, list) else [top]:
        yield 1, r
    lineno = 1
    try:
        for raw_line in f:
            lineno += 1
            if not raw_line.strip():
                continue
            try:
                yield lineno, orjson.loads(raw_line)
            except orjson.JSONDecodeError as e:
                raise InputError(f"malformed JSON ({getattr(e, 'msg', e)})", source=name, line=lineno) from None
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise InputError(f"cannot read it: {e}", source=name, line=lineno) from None


def _proto_requests(data: bytes, name: str) -> Iterator[tuple[int | None, Any]]:
    """The message(s) of a protobuf file: one ExportTraceServiceRequest, or length-prefixed ones
    (a message starts with the tag of ``resource_spans``, 0x0a; a 4-byte length below 16 MiB with 0x00)."""
    if data[:1] != b"\x00":
        yield None, decode_protobuf(data, name)
        return
    at, n = 0, 0
    while at < len(data):
        if at + 4 > len(data):
            raise InputError(f"truncated: {len(data) - at} bytes at offset {at} are not a length prefix", source=name)
        size = int.from_bytes(data[at:at + 4], "big")
        at += 4
        if at + size > len(data):
            raise InputError(f"truncated: message {n + 1} at offset {at} says {size} bytes, {len(data) - at} are left",
                             source=name)
        n += 1
        yield None, decode_protobuf(data[at:at + size], f"{name} (message {n})")
        at += size


def _requests(f: IO[bytes], name: str) -> Iterator[tuple[int | None, Any]]:
    first = _first_line(f, name)
    head = first.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not first:
        raise InputError("the file is empty: no spans", source=name)
    if head[:1] in (b"{", b"["):
        yield from _json_requests(f, first.lstrip(b"\xef\xbb\xbf"), name)
    else:
        yield from _proto_requests(first + _read_all(f, name), name)


def requests_of(path: Path, name: str) -> Iterator[tuple[int | None, Any]]:
    """(line, request) of an OTLP file: JSON (lines or one document) or protobuf, gzip'd or not.
    The line is where the request starts in a JSON file (None in a protobuf one)."""
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise InputError(f"cannot read it: {e.strerror or e}", source=name) from None
    with raw:
        gz = raw.read(2) == _GZIP
        raw.seek(0)
        if gz:
            with gzip.GzipFile(fileobj=raw, mode="rb") as f:
                yield from _requests(f, name)
        else:
            yield from _requests(raw, name)


def _first_line(f: IO[bytes], name: str) -> bytes:
    try:
        return f.readline()
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise InputError(f"cannot read it (a gzip file that is not whole?): {e}", source=name) from None


def read_file(path: Path | str, name: str | None = None) -> list[Trace]:
    """The traces of an OTLP file (see the module's description)."""
    path = Path(path)
    name = name or str(path)
    spans: list[Span] = []
    for pos, request in requests_of(path, name):
        spans.extend(spans_of(request, name, pos))
    return group_traces(spans)


def read_bytes(data: bytes, name: str = "<bytes>") -> list[Trace]:
    """:func:`read_file` for bytes held in memory (a request body, a test)."""
    if data[:2] == _GZIP:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise InputError(f"cannot read it: {e}", source=name) from None
    spans: list[Span] = []
    for pos, request in _requests(io.BytesIO(data), name):
        spans.extend(spans_of(request, name, pos))
    return group_traces(spans)
