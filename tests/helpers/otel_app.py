"""An app instrumented with the OpenTelemetry SDK, run as its own process by the monitor tests::

    python -m tests.helpers.otel_app URL TRACES [--duplicate]

It makes ``TRACES`` traces of three spans (an ``invoke_agent`` root, a ``chat`` model call and an
``execute_tool`` call under it, with GenAI attributes) through a ``TracerProvider`` and the SDK's
``BatchSpanProcessor``, and exports them to ``URL`` (``/v1/traces``) as OTLP/HTTP protobuf,
gzip-compressed. The OTLP/HTTP exporter package (``opentelemetry-exporter-otlp-proto-http``) is not
installed here, so :class:`HttpExporter` does its job: the SDK's spans encoded as an
``ExportTraceServiceRequest`` (``tests.helpers.otlp.to_request``), POSTed, and sent again on 429,
502, 503 and 504 after the ``Retry-After`` the receiver gives, as the real exporter does.
``--duplicate`` sends every batch twice (an exporter retrying after a lost answer).

It prints one JSON line: the trace ids made, the spans acknowledged, the retries.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tests.helpers.otlp import to_request

RETRYABLE = (429, 502, 503, 504)


class HttpExporter(SpanExporter):
    def __init__(self, url: str, duplicate: bool = False):
        self.url, self.duplicate = url, duplicate
        self.acknowledged = self.retries = 0

    def _send(self, body: bytes) -> bool:
        for _ in range(50):
            req = urllib.request.Request(self.url, data=body, method="POST", headers={
                "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    r.read()
                    return r.status == 200
            except urllib.error.HTTPError as e:
                if e.code not in RETRYABLE:
                    return False
                self.retries += 1
                time.sleep(min(float(e.headers.get("Retry-After") or 1), 5))
        return False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        body = gzip.compress(to_request(spans).SerializeToString())
        for _ in range(2 if self.duplicate else 1):
            if not self._send(body):
                return SpanExportResult.FAILURE
        self.acknowledged += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("traces", type=int)
    ap.add_argument("--duplicate", action="store_true")
    a = ap.parse_args()
    exporter = HttpExporter(a.url, a.duplicate)
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-assistant"}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=16, schedule_delay_millis=50))
    tracer = provider.get_tracer("shop.app", "1.0")
    trace_ids = []
    for i in range(a.traces):
        with tracer.start_as_current_span("invoke_agent shop", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
            trace_ids.append(format(root.get_span_context().trace_id, "032x"))
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 10 + i, "gen_ai.usage.output_tokens": 5}):
                with tracer.start_as_current_span("execute_tool search", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}):
                    pass
    provider.shutdown()   # flushes the batch processor
    print(json.dumps({"trace_ids": trace_ids, "acknowledged": exporter.acknowledged, "retries": exporter.retries}))


if __name__ == "__main__":
    main()
