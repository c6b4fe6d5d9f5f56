"""Real OpenTelemetry spans for the tests, as OTLP: made with the OpenTelemetry SDK (a
TracerProvider and an in-memory exporter) and encoded as an ``ExportTraceServiceRequest`` with
``opentelemetry-proto``'s classes, then as OTLP/JSON with ``google.protobuf.json_format`` and the
OTLP/JSON rule for ids (hex, not the protobuf mapping's base64).

The OTLP encoder package (``opentelemetry-exporter-otlp-proto-common``) is not installed here, so
:func:`to_request` does its job from the SDK's ReadableSpans: the same fields, one message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode


class Recorder:
    """A tracer whose finished spans are kept: ``with rec.span(name, attrs) as s: ...``."""

    def __init__(self, service: str = "shop-assistant"):
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("assay.tests", "1.0")

    @contextmanager
    def span(self, name: str, attributes: dict[str, Any] | None = None, error: str | None = None) -> Iterator[Any]:
        with self.tracer.start_as_current_span(name, attributes=attributes or {}, record_exception=False,
                                               set_status_on_exception=False) as s:
            yield s
            if error is not None:
                s.set_status(StatusCode.ERROR, error)

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def request(self) -> ExportTraceServiceRequest:
        return to_request(self.spans())


def _any(v: Any) -> AnyValue:
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, (list, tuple)):
        out = AnyValue()
        out.array_value.values.extend(_any(x) for x in v)
        return out
    return AnyValue(string_value=str(v))


def _kvs(attrs: Any) -> list[KeyValue]:
    return [KeyValue(key=k, value=_any(v)) for k, v in (attrs or {}).items()]


def _span(s: ReadableSpan) -> trace_pb2.Span:
    ctx = s.context
    out = trace_pb2.Span(
        trace_id=ctx.trace_id.to_bytes(16, "big"), span_id=ctx.span_id.to_bytes(8, "big"), name=s.name,
        kind=s.kind.value + 1,  # the SDK's INTERNAL is 0; OTLP's SPAN_KIND_INTERNAL is 1
        start_time_unix_nano=s.start_time, end_time_unix_nano=s.end_time, attributes=_kvs(s.attributes))
    if s.parent is not None:
        out.parent_span_id = s.parent.span_id.to_bytes(8, "big")
    for e in s.events:
        out.events.append(trace_pb2.Span.Event(time_unix_nano=e.timestamp, name=e.name, attributes=_kvs(e.attributes)))
    out.status.code = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}[s.status.status_code]
    out.status.message = s.status.description or ""
    return out


def to_request(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    """One ExportTraceServiceRequest: a ResourceSpans per resource, a ScopeSpans per scope."""
    req = ExportTraceServiceRequest()
    groups: dict[Any, dict[Any, list[ReadableSpan]]] = {}
    for s in spans:
        groups.setdefault(s.resource, {}).setdefault(s.instrumentation_scope, []).append(s)
    for resource, scopes in groups.items():
        rs = req.resource_spans.add()
        rs.resource.attributes.extend(_kvs(resource.attributes))
        for scope, members in scopes.items():
            ss = rs.scope_spans.add()
            ss.scope.name = scope.name
            ss.scope.version = scope.version or ""
            ss.spans.extend(_span(s) for s in members)
    return req


def _hex_ids(node: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex; the protobuf JSON mapping writes base64."""
    import base64

    if isinstance(node, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                    else _hex_ids(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids(x) for x in node]
    return node


def to_json(req: ExportTraceServiceRequest) -> dict[str, Any]:
    """The OTLP/JSON object of a request (what the Collector's file exporter writes per line)."""
    return _hex_ids(json_format.MessageToDict(req))


def json_line(req: ExportTraceServiceRequest) -> str:
    return json.dumps(to_json(req), separators=(",", ":"))


def messages(*msgs: dict[str, Any]) -> str:
    """GenAI ``gen_ai.input.messages`` / ``gen_ai.output.messages`` JSON text."""
    return json.dumps(list(msgs))


def text(role: str, content: str, **more: Any) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}], **more}
