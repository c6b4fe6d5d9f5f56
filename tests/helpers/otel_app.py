"""An app instrumented with the OpenTelemetry SDK, run as its own process by the monitor tests::

    python -m tests.helpers.otel_app URL TRACES [--duplicate] [--bad]

It makes ``TRACES`` traces of three spans (an ``invoke_agent`` root, a ``chat`` model call with the
question and the answer as GenAI messages, and an ``execute_tool`` call under it) through a
``TracerProvider`` and the SDK's ``BatchSpanProcessor``, and exports them to ``URL``
(``/v1/traces``) with the OpenTelemetry OTLP/HTTP exporter
(``opentelemetry-exporter-otlp-proto-http``'s ``OTLPSpanExporter``: protobuf, gzip, its own retries
on 429 / 502 / 503 / 504 after the ``Retry-After`` the receiver gives). ``--duplicate`` exports
every batch twice (an exporter retrying after a lost answer). ``--bad`` plants a drop: every tool
call fails (an ``ERROR`` status) and the answer is unhelpful.

With ``--openai MODEL_URL`` it is instead an app around a real ``openai`` client calling the
OpenAI-compatible server at ``MODEL_URL`` (a loopback one in the tests), instrumented by
``--instrumentation``: ``otel`` (the official ``opentelemetry-instrumentation-openai-v2``, its
message content captured as ``--content`` says: ``span_only``, the messages as span attributes,
or ``event_only``, as a log record on the span sent with the SDK's ``OTLPLogExporter`` to
``/v1/logs`` beside ``URL``) or ``openinference`` (``openinference-instrumentation-openai``).
Each of its ``TRACES`` traces is one chat completion, "Where is my order N?", under no span of
the app's own.

It prints one JSON line: the trace ids made and the spans acknowledged.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode


class Counting(SpanExporter):
    """The real OTLP/HTTP exporter, counting the spans it got acknowledged (each batch sent twice
    with ``duplicate``, counted once)."""

    def __init__(self, url: str, duplicate: bool = False):
        self.real = OTLPSpanExporter(endpoint=url, compression=Compression.Gzip, timeout=30)
        self.duplicate = duplicate
        self.acknowledged = 0
        self.seen: list[str] = []     # the trace ids of the spans acknowledged

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for _ in range(2 if self.duplicate else 1):
            if self.real.export(spans) is not SpanExportResult.SUCCESS:
                return SpanExportResult.FAILURE
        self.acknowledged += len(spans)
        self.seen.extend(format(s.context.trace_id, "032x") for s in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.real.shutdown()


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _openai_app(a: argparse.Namespace) -> None:
    """Chat completions through a real, instrumented ``openai`` client; spans (and log records)
    over OTLP/HTTP to the receiver."""
    from opentelemetry import _logs, trace

    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = a.content
    try:   # openai 3 uses httpx2; the official instrumentation (2.4b0) still imports httpx for its URL type
        import httpx  # noqa: F401
    except ImportError:
        import httpx2

        sys.modules["httpx"] = httpx2
    exporter = Counting(a.url)
    provider = TracerProvider(resource=Resource.create({"service.name": "order-bot"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=50))
    trace.set_tracer_provider(provider)
    logs = None
    if a.instrumentation == "otel":
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        logs = LoggerProvider(resource=Resource.create({"service.name": "order-bot"}))
        logs.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(
            endpoint=a.url.rsplit("/v1/", 1)[0] + "/v1/logs", compression=Compression.Gzip),
            schedule_delay_millis=50))
        _logs.set_logger_provider(logs)
        OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logs)
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceInstrumentor

        OpenInferenceInstrumentor().instrument(tracer_provider=provider)
    import openai

    client = openai.OpenAI(base_url=a.openai, api_key="not-needed", max_retries=0)
    for i in range(a.traces):
        client.chat.completions.create(model="gpt-4o-mini", messages=[
            {"role": "system", "content": "You answer questions about orders in one sentence."},
            {"role": "user", "content": f"Where is my order {i}?"}])
    if logs is not None:
        logs.shutdown()      # the log records first: they are emitted before their span ends
    provider.shutdown()
    print(json.dumps({"trace_ids": sorted(set(exporter.seen)), "acknowledged": exporter.acknowledged}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("traces", type=int)
    ap.add_argument("--duplicate", action="store_true")
    ap.add_argument("--bad", action="store_true")
    ap.add_argument("--openai", metavar="MODEL_URL")
    ap.add_argument("--instrumentation", choices=["otel", "openinference"], default="otel")
    ap.add_argument("--content", choices=["span_only", "event_only", "span_and_event"], default="span_only")
    a = ap.parse_args()
    if a.openai:
        _openai_app(a)
        return
    exporter = Counting(a.url, a.duplicate)
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-assistant"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=16, schedule_delay_millis=50))
    tracer = provider.get_tracer("shop.app", "1.0")
    trace_ids = []
    for i in range(a.traces):
        answer = "I could not look that up." if a.bad else f"Order {i} ships tomorrow from the Lyon warehouse."
        with tracer.start_as_current_span("invoke_agent shop", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
            trace_ids.append(format(root.get_span_context().trace_id, "032x"))
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 10 + i, "gen_ai.usage.output_tokens": 5,
                    "gen_ai.input.messages": _messages("user", f"Where is my order {i}?"),
                    "gen_ai.output.messages": _messages("assistant", answer)}):
                with tracer.start_as_current_span("execute_tool search", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.arguments": json.dumps({"order": i})}) as tool:
                    if a.bad:
                        tool.set_status(StatusCode.ERROR, "search backend timed out")
    provider.shutdown()   # flushes the batch processor
    print(json.dumps({"trace_ids": trace_ids, "acknowledged": exporter.acknowledged}))


if __name__ == "__main__":
    main()
