"""OTLP/gRPC (``assay monitor serve --grpc-port``): the OpenTelemetry SDK's own gRPC exporters
(``opentelemetry-exporter-otlp-proto-grpc``, gzip) send GenAI spans and a log record on a span to
the receiver on a loopback port; they are stored as the HTTP receiver stores them (read back as
the trace's records). With a token configured, a call without it or with a wrong one gets
``UNAUTHENTICATED`` and nothing is stored; a port in use ends with one line."""

from __future__ import annotations

import json

import grpc
import pytest
from grpc import Compression
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from assay.errors import RunIncomplete
from assay.formats.genai_spans import trace_records
from assay.monitor.grpc_receiver import grpc_server
from assay.monitor.ingest import Ingest
from assay.monitor.scoring import trace_of
from assay.store import Store
from assay.store.spans import SpanLog
from tests.helpers.otlp import Recorder


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _trace() -> tuple[str, Recorder]:
    rec = Recorder()
    with rec.span("invoke_agent shop", {"gen_ai.operation.name": "invoke_agent"}) as root:
        with rec.span("chat gpt-4o-mini", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                                           "gen_ai.usage.input_tokens": 17,
                                           "gen_ai.input.messages": _messages("user", "Where is order 7?"),
                                           "gen_ai.output.messages": _messages("assistant", "In Lyon.")}):
            pass
    return format(root.get_span_context().trace_id, "032x"), rec


class GrpcServed:
    """The gRPC receiver in this process over a fresh ingest queue on a free loopback port."""

    def __init__(self, st: Store, token: str | None = None, max_pending: int = 100_000, start: bool = True):
        self.ingest = Ingest(SpanLog(st), max_pending=max_pending)
        if start:
            self.ingest.start()
        self.server, self.port = grpc_server(self.ingest, "127.0.0.1", 0, token=token)

    def __enter__(self) -> GrpcServed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(None).wait()
        self.ingest.close()

    def exporter(self, headers: dict[str, str] | None = None) -> OTLPSpanExporter:
        return OTLPSpanExporter(endpoint=f"127.0.0.1:{self.port}", insecure=True, headers=headers,
                                compression=Compression.Gzip, timeout=10)


@pytest.fixture
def st(tmp_path):
    s = Store(str(tmp_path / "m.db"))
    yield s
    s.close()


def test_sdk_grpc_exporter_spans_are_stored_and_read_as_the_trace(st):
    trace_id, rec = _trace()
    with GrpcServed(st) as rx:
        ex = rx.exporter()
        for _ in range(2):                       # an exporter's retry: kept once
            assert ex.export(rec.spans()) is SpanExportResult.SUCCESS
        ex.shutdown()
    s = SpanLog(st).status()
    assert (s["spans"], s["traces"], s["complete_traces"]) == (2, 1, 1)
    by_name = {x["name"]: x for x in SpanLog(st).spans(trace_id)}
    assert by_name["chat gpt-4o-mini"]["parent_id"] == by_name["invoke_agent shop"]["span_id"]
    assert by_name["chat gpt-4o-mini"]["attributes"]["gen_ai.usage.input_tokens"] == 17
    assert by_name["chat gpt-4o-mini"]["service"] == "shop-assistant"
    (record,) = trace_records(trace_of(trace_id, SpanLog(st).spans(trace_id)), "trace")
    assert record["query"] == "Where is order 7?" and record["response"] == "In Lyon."


def test_sdk_grpc_log_exporter_records_on_a_span_are_its_events(st):
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    with GrpcServed(st) as rx:
        logs = LoggerProvider()
        logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(
            endpoint=f"127.0.0.1:{rx.port}", insecure=True, compression=Compression.Gzip, timeout=10)))
        logger = logs.get_logger("assay.tests")
        rec = Recorder()
        with rec.span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}) as s:
            logger.emit(event_name="gen_ai.user.message", body={"content": "Is it raining?"})
            logger.emit(event_name="gen_ai.choice", body={"index": 0, "finish_reason": "stop",
                                                          "message": {"content": "No, it is sunny."}})
        logger.emit(event_name="app.log", body="an ordinary record")      # on no span: answered, not kept
        logs.shutdown()
        ex = rx.exporter()
        assert ex.export(rec.spans()) is SpanExportResult.SUCCESS
        ex.shutdown()
    trace_id = format(s.get_span_context().trace_id, "032x")
    (span,) = SpanLog(st).spans(trace_id)
    assert [e["name"] for e in span["events"]] == ["gen_ai.user.message", "gen_ai.choice"]
    (record,) = trace_records(trace_of(trace_id, SpanLog(st).spans(trace_id)), "trace")
    assert record["query"] == "Is it raining?" and record["response"] == "No, it is sunny."


@pytest.mark.parametrize("headers", [None, {"authorization": "Bearer wrong"}])
def test_a_missing_or_wrong_token_is_unauthenticated_and_nothing_is_stored(st, headers, caplog):
    _, rec = _trace()
    with GrpcServed(st, token="s3cret") as rx:
        ex = rx.exporter(headers)
        assert ex.export(rec.spans()) is SpanExportResult.FAILURE
        ex.shutdown()
        assert SpanLog(st).status()["spans"] == 0
        with grpc.insecure_channel(f"127.0.0.1:{rx.port}") as ch:   # the status code the exporter got
            call = ch.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as no:
                call(rec.request().SerializeToString(), metadata=headers and list(headers.items()), timeout=10)
        assert no.value.code() is grpc.StatusCode.UNAUTHENTICATED and "Bearer TOKEN" in no.value.details()
        ok = rx.exporter({"authorization": "Bearer s3cret"})
        assert ok.export(rec.spans()) is SpanExportResult.SUCCESS
        ok.shutdown()
    assert SpanLog(st).status()["spans"] == 2


def test_a_body_that_is_not_an_export_request_is_invalid_argument(st):
    with GrpcServed(st) as rx, grpc.insecure_channel(f"127.0.0.1:{rx.port}") as ch:
        call = ch.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as bad:
            call(b"\xff\xff\xff", timeout=10)
    assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT and "\n" not in bad.value.details()
    assert SpanLog(st).status()["spans"] == 0


def test_a_full_queue_is_unavailable_and_the_batch_is_not_taken(st):
    _, rec = _trace()
    with GrpcServed(st, max_pending=1, start=False) as rx, grpc.insecure_channel(f"127.0.0.1:{rx.port}") as ch:
        rx.ingest.submit([{"trace_id": "waiting"}])              # the writer is not running: the queue stays full
        call = ch.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as full:
            call(rec.request().SerializeToString(), timeout=10)
        assert full.value.code() is grpc.StatusCode.UNAVAILABLE and "over capacity" in full.value.details()
        assert rx.ingest.pending == 1 and rx.ingest.refused == 1


def test_a_port_in_use_is_one_line(st):
    with GrpcServed(st) as rx:
        with pytest.raises(RunIncomplete, match="--grpc-port"):
            grpc_server(rx.ingest, "127.0.0.1", rx.port)


def test_monitor_serve_grpc_port_with_a_token(tmp_path):
    """The command itself: ``--grpc-port`` beside the HTTP port, the same token on both; a bad
    value is one line and exit 2."""
    import socket
    import subprocess
    import sys

    from tests.helpers.monitor import ROOT, Receiver, env

    store = str(tmp_path / "m.db")
    bad = subprocess.run([sys.executable, "-m", "assay.cli", "monitor", "serve", "--grpc-port", "70000",
                          "--store", store], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--grpc-port" in bad.stderr and "65535" in bad.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    trace_id, rec = _trace()
    with Receiver(store, "--token", "s3cret", "--grpc-port", str(port)) as rx:
        ex = OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=10,
                              headers={"authorization": "Bearer s3cret"})
        assert ex.export(rec.spans()) is SpanExportResult.SUCCESS
        ex.shutdown()
        assert rx.stop() == 143
        assert f"OTLP/gRPC traces and logs at 127.0.0.1:{port}" in rx.output()
    s = Store(store)
    try:
        assert {x["name"] for x in SpanLog(s).spans(trace_id)} == {"invoke_agent shop", "chat gpt-4o-mini"}
    finally:
        s.close()
