"""OTLP files in: JSON lines, one JSON document, protobuf (whole or length-prefixed), gzip'd;
spans grouped into traces; how a file is recognised as traces. The spans are made by the
OpenTelemetry SDK and encoded with opentelemetry-proto (tests/helpers/otlp.py)."""

from __future__ import annotations

import gzip
import json

import pytest

from assay.errors import InputError
from assay.formats import open_dataset
from assay.formats.otlp import group_traces, read_bytes, read_file, spans_of
from tests.helpers.otlp import Recorder, json_line, messages, text, to_json, to_request


def _chat_trace(rec: Recorder, question: str, answer: str) -> None:
    with rec.span("handle_request", {"http.route": "/ask"}):
        with rec.span("chat gpt-4o-mini", {
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 5,
                "gen_ai.input.messages": messages(text("user", question)),
                "gen_ai.output.messages": messages(text("assistant", answer, finish_reason="stop"))}):
            pass


@pytest.fixture
def two_traces():
    rec = Recorder()
    _chat_trace(rec, "What is the capital of France?", "Paris.")
    _chat_trace(rec, "And of Italy?", "Rome.")
    return rec


def test_json_lines_protobuf_and_json_document_give_the_same_records(tmp_path, two_traces):
    req = two_traces.request()
    (tmp_path / "t.otlp.jsonl").write_text(json_line(req) + "\n")
    (tmp_path / "t.otlp.pb").write_bytes(req.SerializeToString())
    (tmp_path / "t.otlp.json").write_text(json.dumps(to_json(req), indent=2))
    got = {name: [r.model_dump() for r in open_dataset(tmp_path / name)]
           for name in ("t.otlp.jsonl", "t.otlp.pb", "t.otlp.json")}
    assert got["t.otlp.jsonl"] == got["t.otlp.pb"] == got["t.otlp.json"]
    rows = got["t.otlp.pb"]
    assert [r["query"] for r in rows] == ["What is the capital of France?", "And of Italy?"]
    assert [r["response"] for r in rows] == ["Paris.", "Rome."]
    assert rows[0]["steps"] is None and rows[0]["tool_calls"] is None  # a plain chat is not an agent's steps
    assert rows[0]["usage"]["input_tokens"] == 12 and rows[0]["extra"]["model"] == "gpt-4o-mini"
    ids = [format(s.context.trace_id, "032x") for s in two_traces.spans() if s.parent is None]
    assert [r["id"] for r in rows] == ids
    assert rows[0]["extra"]["trace_id"] == ids[0] and rows[0]["extra"]["service"] == "shop-assistant"


def test_spans_of_takes_the_decoded_protobuf_message_a_receiver_holds(two_traces):
    req = two_traces.request()
    from_msg = spans_of(req)
    from_json = spans_of(to_json(req))
    assert [(s.trace_id, s.span_id, s.parent_id, s.name, s.kind, s.start, s.end, s.attributes) for s in from_msg] == \
           [(s.trace_id, s.span_id, s.parent_id, s.name, s.kind, s.start, s.end, s.attributes) for s in from_json]
    assert from_msg[0].resource["service.name"] == "shop-assistant"
    assert from_msg[0].resource["telemetry.sdk.name"] == "opentelemetry"
    assert all(len(s.trace_id) == 32 and len(s.span_id) == 16 for s in from_msg)
    assert from_msg[0].kind == "INTERNAL" and from_msg[0].status == "UNSET"


def test_spans_of_one_trace_across_batches_are_grouped_and_a_resent_span_is_kept_once(tmp_path):
    rec = Recorder()
    _chat_trace(rec, "q", "a")
    child, root = rec.spans()
    lines = [json_line(to_request([child])), json_line(to_request([root])), json_line(to_request([child]))]
    p = tmp_path / "split.otlp.jsonl"
    p.write_text("\n".join(lines) + "\n")
    (trace,) = read_file(p)
    assert len(trace.spans) == 2 and trace.root.name == "handle_request"
    (r,) = list(open_dataset(p))
    assert r.query == "q" and r.response == "a"


def test_gzip_files_and_length_prefixed_protobuf_are_read(tmp_path, two_traces):
    req = two_traces.request()
    body = req.SerializeToString()
    (tmp_path / "t.otlp.jsonl.gz").write_bytes(gzip.compress((json_line(req) + "\n").encode()))
    (tmp_path / "t.pb.gz").write_bytes(gzip.compress(body))
    half = to_request(two_traces.spans()[:2]).SerializeToString()
    rest = to_request(two_traces.spans()[2:]).SerializeToString()
    framed = b"".join(len(m).to_bytes(4, "big") + m for m in (half, rest))
    (tmp_path / "framed.pb").write_bytes(framed)
    for name in ("t.otlp.jsonl.gz", "t.pb.gz", "framed.pb"):
        ds = open_dataset(tmp_path / name)
        assert [r.response for r in ds] == ["Paris.", "Rome."], name
        assert ds.format == "otlp"
    assert len(read_bytes(gzip.compress(body))) == 2


def test_a_plain_json_file_of_otlp_is_recognised_by_its_content(tmp_path, two_traces):
    p = tmp_path / "export.json"
    p.write_text(json_line(two_traces.request()) + "\n")
    ds = open_dataset(p)
    assert [r.response for r in ds] == ["Paris.", "Rome."] and ds.format == "otlp"
    q = tmp_path / "rows.jsonl"
    q.write_text(json.dumps({"query": "resourceSpans", "response": "x"}) + "\n")
    assert open_dataset(q).format == "jsonl"


def test_format_names_pick_per_trace_or_per_call(tmp_path, two_traces):
    p = tmp_path / "traces.bin"
    p.write_bytes(two_traces.request().SerializeToString())
    assert open_dataset(p, format="otlp").format == "otlp"
    ds = open_dataset(p, format="otlp-calls")
    rows = list(ds)
    assert ds.format == "otlp-calls" and len(rows) == 2 and all("-" in r.id for r in rows)
    with pytest.raises(InputError, match="otlp-calls"):
        open_dataset(p, format="otel")


def test_bad_otlp_is_one_error_naming_the_file_and_line(tmp_path, two_traces):
    p = tmp_path / "bad.otlp.jsonl"
    p.write_text(json_line(two_traces.request()) + "\n" + '{"resourceSpans": [' + "\n")
    with pytest.raises(InputError) as ei:
        list(open_dataset(p))
    assert str(p) in str(ei.value) and "line 2" in str(ei.value) and "malformed JSON" in str(ei.value)
    q = tmp_path / "nototlp.otlp.json"
    q.write_text(json.dumps({"spans": []}))
    with pytest.raises(InputError, match=r"nototlp\.otlp\.json.*resourceSpans"):
        list(open_dataset(q))
    r = tmp_path / "noid.otlp.json"
    r.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "chat", "spanId": "ab" * 8}]}]}]}))
    with pytest.raises(InputError, match=r"span 'chat' has no traceId"):
        list(open_dataset(r))


def test_a_file_with_no_genai_span_is_one_error_naming_the_file(tmp_path):
    rec = Recorder()
    with rec.span("GET /health", {"http.method": "GET"}):
        with rec.span("db.query", {"db.system": "sqlite"}):
            pass
    p = tmp_path / "plain.otlp.json"
    p.write_text(json_line(rec.request()))
    with pytest.raises(InputError) as ei:
        list(open_dataset(p))
    msg = str(ei.value)
    assert msg.startswith(str(p)) and "no span with GenAI content (2 spans in 1 traces read" in msg


def test_ids_in_base64_as_the_protobuf_json_mapping_writes_them_are_read_as_hex(two_traces):
    from google.protobuf import json_format

    req = two_traces.request()
    b64 = json_format.MessageToDict(req)
    assert [s.trace_id for s in spans_of(b64)] == [s.trace_id for s in spans_of(req)]
    traces = group_traces(spans_of(b64))
    assert len(traces) == 2


def test_a_truncated_protobuf_file_is_one_error_without_a_line(tmp_path, two_traces):
    body = two_traces.request().SerializeToString()
    p = tmp_path / "cut.pb"
    p.write_bytes(len(body).to_bytes(4, "big") + body[:-5])
    with pytest.raises(InputError) as ei:
        list(open_dataset(p))
    assert str(ei.value) == f"{p}: truncated: message 1 at offset 4 says {len(body)} bytes, {len(body) - 5} are left"
    q = tmp_path / "junk.pb"
    q.write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")
    with pytest.raises(InputError, match=r"junk\.pb: not an OTLP protobuf ExportTraceServiceRequest"):
        list(open_dataset(q))
