"""An OTLP/HTTP trace export, as the receiver reads it and answers it.

- :func:`body_kind`: the request's ``Content-Type``: ``application/x-protobuf`` or
  ``application/json`` (anything else: 415);
- :func:`inflate`: its ``Content-Encoding`` (``gzip`` or none), decompressed within the size cap
  (beyond it: 413);
- :func:`parse`: the ``ExportTraceServiceRequest`` it holds, as the store's span rows
  (:mod:`assay.store.spans`); a body that is not one is refused whole (400, one line), a span
  that cannot be read (no trace id, a malformed id or value) is rejected alone and counted, for the
  response's ``partial_success``;
- :func:`export_response` / :func:`error_response`: the ``ExportTraceServiceResponse`` and the
  error body (a ``google.rpc.Status``) in the request's encoding, as the OTLP/HTTP specification
  asks.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import orjson

from assay.errors import InputError
from assay.formats.otlp import Span, decode_logs_protobuf, decode_protobuf, log_events_of, spans_of

PROTOBUF, JSON = "protobuf", "json"
MEDIA_TYPES = {"application/x-protobuf": PROTOBUF, "application/protobuf": PROTOBUF, "application/json": JSON}
SOURCE = "POST /v1/traces"
LOGS_SOURCE = "POST /v1/logs"


class Refused(Exception):
    """A request the receiver refuses whole: ``status`` (400, 413, 415) and a one-line ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, " ".join(message.split())


def body_kind(content_type: str | None) -> str:
    """``protobuf`` or ``json`` from a ``Content-Type`` header (its parameters ignored)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    kind = MEDIA_TYPES.get(media)
    if kind is None:
        raise Refused(415, f"unsupported Content-Type {media or '(none)'!r}: send application/x-protobuf or "
                           "application/json (OTLP/HTTP)")
    return kind


def inflate(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body decompressed (``gzip``; none or ``identity``: as it is), at most ``limit`` bytes."""
    enc = (encoding or "").strip().lower()
    if enc in ("", "identity"):
        return body
    if enc != "gzip":
        raise Refused(415, f"unsupported Content-Encoding {enc!r}: send gzip or no encoding")
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise Refused(400, f"the body is not gzip ({e})") from None
    if len(out) > limit or d.unconsumed_tail:
        raise Refused(413, f"the body is over {limit:,} bytes once decompressed: send smaller batches")
    if not d.eof:
        raise Refused(400, "the gzip body is cut short")
    return out


# --------------------------------------------------------------------------- spans

def _dump(v: Any) -> str:
    return orjson.dumps(v, default=str).decode()


def span_row(s: Span) -> dict[str, Any]:
    """A span as a row of the store's ``spans`` table (without ``received_at``)."""
    return {"trace_id": s.trace_id, "span_id": s.span_id, "parent_id": s.parent_id, "name": s.name, "kind": s.kind,
            "service": _service(s.resource), "scope": s.scope, "start_ns": s.start, "end_ns": s.end,
            "status": s.status, "status_message": s.status_message or None, "attributes": _dump(s.attributes),
            "events": _dump([{"name": e.name, "time": e.time, "attributes": e.attributes} for e in s.events]),
            "resource": _dump(s.resource)}


def _service(resource: dict[str, Any]) -> str | None:
    v = resource.get("service.name")
    return v if isinstance(v, str) else None


def _rows(spans: list[Span]) -> tuple[list[dict[str, Any]], int, str | None]:
    rows, rejected, why = [], 0, None
    for s in spans:
        try:
            rows.append(span_row(s))
        except (TypeError, orjson.JSONEncodeError) as e:   # a value JSON cannot hold (an integer over 64 bits)
            rejected += 1
            why = why or f"{s.label()}: {e}"
    return rows, rejected, why


def _json_singles(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each span of an OTLP/JSON request as a request of its own (its resource and scope kept)."""
    for rs in request.get("resourceSpans") or request.get("resource_spans") or ():
        if not isinstance(rs, dict):
            yield {"resourceSpans": [rs]}
            continue
        scopes = rs.get("scopeSpans") or rs.get("scope_spans") or ()
        for ss in scopes if isinstance(scopes, list) else [scopes]:
            if not isinstance(ss, dict):
                yield {"resourceSpans": [{"resource": rs.get("resource"), "scopeSpans": [ss]}]}
                continue
            spans = ss.get("spans") or ()
            for s in spans if isinstance(spans, list) else [spans]:
                yield {"resourceSpans": [{"resource": rs.get("resource"),
                                          "scopeSpans": [{"scope": ss.get("scope"), "spans": [s]}]}]}


def _proto_singles(request: Any) -> Iterator[Any]:
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                one = type(request)()
                r = one.resource_spans.add()
                r.resource.CopyFrom(rs.resource)
                q = r.scope_spans.add()
                q.scope.CopyFrom(ss.scope)
                q.spans.append(s)
                yield one


def _one_by_one(singles: Iterator[Any]) -> tuple[list[Span], int, str | None]:
    spans: list[Span] = []
    rejected, why = 0, None
    for one in singles:
        try:
            spans.extend(spans_of(one, SOURCE))
        except InputError as e:
            rejected += 1
            why = why or str(e)
    return spans, rejected, why


def _request(body: bytes, kind: str) -> Any:
    if kind == PROTOBUF:
        try:
            return decode_protobuf(body, SOURCE)
        except InputError as e:
            raise Refused(400, str(e)) from None
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise Refused(400, f"{SOURCE}: not JSON ({e})") from None
    if not isinstance(request, dict):
        raise Refused(400, f"{SOURCE}: expected an OTLP ExportTraceServiceRequest object, got "
                           f"{type(request).__name__}")
    return request


def parse(body: bytes, kind: str) -> tuple[list[dict[str, Any]], int, str | None]:
    """The span rows of a decoded (not compressed) body, the number of spans rejected and why
    the first was. A body that is not an ``ExportTraceServiceRequest``, or whose every span is
    rejected, raises :class:`Refused` (400)."""
    request = _request(body, kind)
    try:
        spans, rejected, why = spans_of(request, SOURCE), 0, None
    except InputError as e:
        try:
            spans, rejected, why = _one_by_one(_json_singles(request) if kind == JSON else _proto_singles(request))
        except (AttributeError, TypeError):
            raise Refused(400, str(e)) from None
        if not rejected:             # the request's shape, not a span, is wrong
            raise Refused(400, str(e)) from None
    rows, bad, bad_why = _rows(spans)
    rejected, why = rejected + bad, why or bad_why
    if rejected and not rows:
        raise Refused(400, why or "no span could be read")
    return rows, rejected, why


# --------------------------------------------------------------------------- logs

def parse_logs(body: bytes, kind: str) -> tuple[list[dict[str, Any]], int]:
    """The rows of the store's ``span_events`` table (without ``received_at``) of a decoded
    ``ExportLogsServiceRequest``: its log records on a span; and how many others it had (an
    app's ordinary logs, taken and not kept). A body that is not one raises :class:`Refused`."""
    import hashlib

    if kind == PROTOBUF:
        try:
            request: Any = decode_logs_protobuf(body, LOGS_SOURCE)
        except InputError as e:
            raise Refused(400, str(e)) from None
    else:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise Refused(400, f"{LOGS_SOURCE}: not JSON ({e})") from None
    try:
        events, others = log_events_of(request, LOGS_SOURCE)
    except InputError as e:
        raise Refused(400, str(e)) from None
    rows = []
    for trace_id, span_id, ev in events:
        attrs = _dump(ev.attributes)
        key = hashlib.blake2b(f"{ev.name}\x00{ev.time}\x00{attrs}".encode(), digest_size=16).hexdigest()
        rows.append({"trace_id": trace_id, "span_id": span_id, "event_key": key, "name": ev.name,
                     "time_ns": ev.time, "attributes": attrs})
    return rows, others


# --------------------------------------------------------------------------- answers

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def export_response(kind: str, rejected: int = 0, message: str | None = None) -> bytes:
    """The ``ExportTraceServiceResponse``: empty when every span was taken, else with its
    ``partial_success`` (``rejected_spans``, ``error_message``)."""
    if kind == JSON:
        if not rejected:
            return b"{}"
        return orjson.dumps({"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message or ""}})
    if not rejected:
        return b""
    # ExportTraceServiceResponse { ExportTracePartialSuccess partial_success = 1; }
    # ExportTracePartialSuccess { int64 rejected_spans = 1; string error_message = 2; }
    text = (message or "").encode()
    inner = b"\x08" + _varint(rejected) + (b"\x12" + _varint(len(text)) + text if text else b"")
    return b"\x0a" + _varint(len(inner)) + inner


GRPC_CODES = {400: 3, 401: 16, 413: 8, 415: 3, 429: 8, 503: 14}   # INVALID_ARGUMENT, UNAUTHENTICATED, ...


def error_response(kind: str | None, status: int, message: str) -> tuple[bytes, str]:
    """The body and media type of an error: a ``google.rpc.Status`` (code, message) in the
    request's encoding, or the message as one line of text when the encoding is unknown."""
    code = GRPC_CODES.get(status, 2)
    if kind == JSON:
        return orjson.dumps({"code": code, "message": message}), "application/json"
    if kind == PROTOBUF:
        text = message.encode()
        return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text, "application/x-protobuf"
    return (message + "\n").encode(), "text/plain; charset=utf-8"
