"""``POST /v1/logs``: the log records an instrumentation emits on a span (message content captured
as events) are kept with the spans and read as the span's events — the current conventions'
``gen_ai.client.inference.operation.details`` (messages as structured values) and the older
per-message events (the message in the record's body); a record sent twice is kept once, an
app's ordinary log records (no span context) are answered and not kept, a body that is not an
``ExportLogsServiceRequest`` gets 400 with one line; protobuf and JSON."""

from __future__ import annotations

import json

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from assay.formats.genai_spans import trace_records
from assay.monitor.scoring import trace_of
from assay.store import Store
from assay.store.spans import SpanLog
from tests.helpers.monitor import Served, post
from tests.helpers.otlp import Recorder

JSON = "application/json"


def _kv(key: str, value: object) -> dict:
    if isinstance(value, dict):
        return {"key": key, "value": {"kvlistValue": {"values": [_kv(k, v) for k, v in value.items()]}}}
    if isinstance(value, list):
        return {"key": key, "value": {"arrayValue": {"values": [_kv("", v)["value"] for v in value]}}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _logs(*records: dict) -> dict:
    return {"resourceLogs": [{"resource": {"attributes": [_kv("service.name", "bot")]},
                              "scopeLogs": [{"scope": {"name": "x"}, "logRecords": list(records)}]}]}


def _record(ctx: tuple[str, str] | None, name: str, attrs: dict, body: object = None, t: int = 1) -> dict:
    r: dict = {"timeUnixNano": str(t), "eventName": name, "attributes": [_kv(k, v) for k, v in attrs.items()]}
    if ctx:
        r["traceId"], r["spanId"] = ctx
    if body is not None:
        r["body"] = _kv("", body)["value"]
    return r


def _span(st: Store) -> tuple[str, str]:
    rec = Recorder()
    with rec.span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}) as s:
        ctx = (format(s.get_span_context().trace_id, "032x"), format(s.get_span_context().span_id, "016x"))
    from tests.helpers.otlp import to_json

    return ctx, to_json(rec.request())


def test_log_records_on_a_span_are_its_events(tmp_path):
    st = Store(str(tmp_path / "m.db"))
    try:
        ctx, spans = _span(st)
        details = _record(ctx, "gen_ai.client.inference.operation.details", {
            "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Where is order 7?"}]}],
            "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "In Lyon."}]}]})
        with Served(st) as rx:
            logs_url = rx.url.replace("/v1/traces", "/v1/logs")
            for _ in range(2):                                   # an exporter's retry: kept once
                status, _, body = post(logs_url, json.dumps(_logs(details, _record(None, "app.log", {"a": 1})))
                                       .encode(), JSON)
                assert (status, body) == (200, b"{}")
            assert post(rx.url, json.dumps(spans).encode(), JSON)[0] == 200
            bad = post(logs_url, b'{"resourceSpans": []}', JSON)
        assert bad[0] == 400 and b"ExportLogsServiceRequest" in bad[2]
        (span,) = SpanLog(st).spans(ctx[0])
        assert [e["name"] for e in span["events"]] == ["gen_ai.client.inference.operation.details"]
        (rec,) = trace_records(trace_of(ctx[0], SpanLog(st).spans(ctx[0])), "trace")
        assert rec["query"] == "Where is order 7?" and rec["response"] == "In Lyon."
    finally:
        st.close()


def test_older_per_message_events_as_protobuf_log_records(tmp_path):
    st = Store(str(tmp_path / "m.db"))
    try:
        ctx, spans = _span(st)
        req = ExportLogsServiceRequest()
        sl = req.resource_logs.add().scope_logs.add()
        for i, (name, body) in enumerate([("gen_ai.user.message", {"content": "Is it raining?"}),
                                          ("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                                             "message": {"content": "No, it is sunny."}})]):
            r = sl.log_records.add(time_unix_nano=10 + i, event_name=name, trace_id=bytes.fromhex(ctx[0]),
                                   span_id=bytes.fromhex(ctx[1]))
            r.attributes.add(key="gen_ai.system").value.string_value = "openai"
            for k, v in body.items():
                kv = r.body.kvlist_value.values.add(key=k)
                if isinstance(v, dict):
                    kv.value.kvlist_value.values.add(key="content").value.string_value = v["content"]
                elif isinstance(v, int):
                    kv.value.int_value = v
                else:
                    kv.value.string_value = v
        with Served(st) as rx:
            assert post(rx.url.replace("/v1/traces", "/v1/logs"), req.SerializeToString(), gzipped=True)[0] == 200
            assert post(rx.url, json.dumps(spans).encode(), JSON)[0] == 200
        (rec,) = trace_records(trace_of(ctx[0], SpanLog(st).spans(ctx[0])), "trace")
        assert rec["query"] == "Is it raining?" and rec["response"] == "No, it is sunny."
    finally:
        st.close()


def test_a_trace_skipped_for_want_of_content_is_scored_once_its_log_records_come(tmp_path):
    """A chat span without messages (content capture off, or the messages still to come as log
    records) is skipped, not an error retried forever; its log records make it due again."""
    from assay.monitor.config import parse_config
    from assay.monitor.scoring import OnlineScorer
    from assay.store.monitor import MonitorLog

    st = Store(str(tmp_path / "m.db"))
    try:
        ctx, spans = _span(st)
        scorer = OnlineScorer(st, parse_config("metrics:\n  token_count: {}\n"))
        with Served(st) as rx:
            assert post(rx.url, json.dumps(spans).encode(), JSON)[0] == 200           # the spans first
            first = scorer.run_pass()["token_count"]                                  # nothing to score yet:
            assert first["skipped"] == 1 and first["errored"] == 0                    # skipped, not an error
            details = _record(ctx, "gen_ai.client.inference.operation.details", {
                "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}],
                "gen_ai.output.messages": [{"role": "assistant", "parts": [{"type": "text", "content": "Hello."}]}]})
            assert post(rx.url.replace("/v1/traces", "/v1/logs"), json.dumps(_logs(details)).encode(), JSON)[0] == 200
        assert scorer.run_pass()["token_count"]["scored"] == 1                        # due again, and scored
        (row,) = MonitorLog(st).scores("token_count")
        assert row["trace_id"] == ctx[0] and row["scores"][0]["total_output_token_count"]["value"] > 0
    finally:
        st.close()


def test_without_content_a_metric_that_needs_none_still_scores(tmp_path):
    """Content capture off: latency (it needs only the usage) is scored; token_count (it needs the
    answer) skips the trace, saying so, rather than erroring it again and again."""
    from assay.monitor.config import parse_config
    from assay.monitor.scoring import OnlineScorer
    from assay.store.monitor import MonitorLog

    st = Store(str(tmp_path / "m.db"))
    try:
        ctx, spans = _span(st)
        with Served(st) as rx:
            assert post(rx.url, json.dumps(spans).encode(), JSON)[0] == 200
        got = OnlineScorer(st, parse_config("metrics:\n  latency: {}\n  token_count: {}\n")).run_pass()
        assert (got["latency"]["scored"], got["token_count"]["skipped"], got["token_count"]["errored"]) == (1, 1, 0)
        reason = MonitorLog(st).trace_scores([ctx[0]])[ctx[0]]["token_count"]["reason"]
        assert reason == "no GenAI content in the trace"
    finally:
        st.close()
