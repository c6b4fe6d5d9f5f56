"""An app instrumented with OpenTelemetry and the official OpenAI instrumentation, for
``assay monitor`` (docs/monitor.md, "A complete example").

It asks an OpenAI-compatible model server (``MODEL_URL``, default a local ``llama_cpp.server`` at
http://127.0.0.1:8080/v1; ``MODEL``, default ``gemma-3-270m``) a few questions with the ``openai``
client, instrumented by ``opentelemetry-instrumentation-openai-v2``; the SDK's OTLP/HTTP exporters
send the spans (and the log records with the messages, when content is captured as events) to
``OTEL_EXPORTER_OTLP_ENDPOINT`` (default http://127.0.0.1:4318), where ``assay monitor serve``
receives them.

    python examples/monitor/app.py [N]      # N questions (default 12)
"""

from __future__ import annotations

import os
import sys

from opentelemetry import _logs, trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

QUESTIONS = ["Where is my order 1042?", "Can I return shoes after 30 days?", "Do you ship to Canada?",
             "How do I change my delivery address?", "What does express shipping cost?",
             "My parcel arrived damaged. What now?"]

# Message content is off by default: capture it on the spans (span_only), as log records on the
# spans (event_only, sent to /v1/logs) or both (span_and_event). The latest GenAI conventions.
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
os.environ.setdefault("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")

try:   # openai 3 uses httpx2; opentelemetry-instrumentation-openai-v2 2.4b0 imports httpx for its URL type
    import httpx  # noqa: F401
except ImportError:
    import httpx2

    sys.modules["httpx"] = httpx2

from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    resource = Resource.create({"service.name": "order-bot"})
    spans = TracerProvider(resource=resource)
    spans.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))      # reads OTEL_EXPORTER_OTLP_ENDPOINT
    trace.set_tracer_provider(spans)
    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    _logs.set_logger_provider(logs)
    OpenAIInstrumentor().instrument()

    import openai

    client = openai.OpenAI(base_url=os.environ.get("MODEL_URL", "http://127.0.0.1:8080/v1"),
                           api_key=os.environ.get("OPENAI_API_KEY", "not-needed"))
    for i in range(n):
        answer = client.chat.completions.create(
            model=os.environ.get("MODEL", "gemma-3-270m"), max_tokens=24, temperature=0,
            messages=[{"role": "system", "content": "You are the support assistant of a web shop. Answer in one "
                                                    "sentence."},
                      {"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}])
        print(f"{QUESTIONS[i % len(QUESTIONS)]} -> {(answer.choices[0].message.content or '').strip()[:70]!r}")
    logs.shutdown()          # sends what is batched
    spans.shutdown()


if __name__ == "__main__":
    main()
