"""``assay monitor serve`` as a real process on a free loopback port over a temporary store, fed
by an app process instrumented with the OpenTelemetry SDK (tests/helpers/otel_app.py) and by
plain HTTP posts of real OTLP bodies made from SDK spans (tests/helpers/otlp.py): every span
stored once, traces complete (root and quiet period), protobuf / JSON / gzip bodies, partial
success, 400 / 413 / 415 with one line, 429 with Retry-After when the queue is full, the token
rules, ``assay monitor status``, and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from assay.cli.main import run
from assay.store import Store
from assay.store.spans import SpanLog
from tests.helpers.monitor import ROOT, Receiver, env, post
from tests.helpers.otlp import Recorder, to_json

JSON = "application/json"


def _status(store: str) -> dict:
    st = Store(store)
    try:
        return SpanLog(st).status()
    finally:
        st.close()


def _traces(store: str, **kw) -> list[dict]:
    st = Store(store)
    try:
        return SpanLog(st).traces(**kw)
    finally:
        st.close()


def _wait(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _chat(rec: Recorder, n: int = 1) -> None:
    for i in range(n):
        with rec.span("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}):
            with rec.span("chat m", {"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": i}):
                pass


def test_an_instrumented_app_process_every_span_stored_once(tmp_path):
    store = str(tmp_path / "m.db")
    with Receiver(store) as rx:
        app = subprocess.run([sys.executable, "-m", "tests.helpers.otel_app", rx.url, "40", "--duplicate"],
                             cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
        assert app.returncode == 0, app.stderr
        made = json.loads(app.stdout)
        assert made["acknowledged"] == 120            # every batch answered 200, sent twice
        assert rx.stop() == 143                        # SIGTERM: the documented exit code
    s = _status(store)
    assert (s["spans"], s["traces"], s["complete_traces"]) == (120, 40, 40)
    traces = _traces(store)
    assert sorted(t["trace_id"] for t in traces) == sorted(made["trace_ids"])
    assert {t["completion"] for t in traces} == {"root"} and {t["spans"] for t in traces} == {3}
    st = Store(store)
    spans = SpanLog(st).spans(made["trace_ids"][7])
    st.close()
    by_name = {s["name"]: s for s in spans}
    assert set(by_name) == {"invoke_agent shop", "chat gpt-4o-mini", "execute_tool search"}
    assert by_name["chat gpt-4o-mini"]["parent_id"] == by_name["invoke_agent shop"]["span_id"]
    assert by_name["execute_tool search"]["parent_id"] == by_name["chat gpt-4o-mini"]["span_id"]
    assert by_name["chat gpt-4o-mini"]["attributes"]["gen_ai.usage.input_tokens"] == 17
    assert {s["service"] for s in spans} == {"shop-assistant"}


def test_protobuf_json_and_gzip_bodies_and_their_answers(tmp_path):
    store = str(tmp_path / "m.db")
    recs = [Recorder() for _ in range(4)]
    for rec in recs:
        _chat(rec)
    with Receiver(store) as rx:
        proto = recs[0].request().SerializeToString()
        assert post(rx.url, proto)[::2] == (200, b"")     # an empty ExportTraceServiceResponse
        code, headers, body = post(rx.url, recs[1].request().SerializeToString(), gzipped=True)
        assert (code, body) == (200, b"") and headers["content-type"] == "application/x-protobuf"
        code, headers, body = post(rx.url, json.dumps(to_json(recs[2].request())).encode(), JSON)
        assert (code, json.loads(body)) == (200, {}) and headers["content-type"] == JSON
        code, _, body = post(rx.url, json.dumps(to_json(recs[3].request())).encode(), JSON, gzipped=True)
        assert (code, json.loads(body)) == (200, {})
        assert post(rx.url, proto)[0] == 200             # the same spans again: kept once
    s = _status(store)
    assert (s["spans"], s["traces"], s["complete_traces"]) == (8, 4, 4)


def test_partial_success_names_the_rejected_span(tmp_path):
    store = str(tmp_path / "m.db")
    rec = Recorder()
    _chat(rec, 2)
    doc = to_json(rec.request())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["traceId"] = "not-a-trace-id"
    with Receiver(store) as rx:
        code, _, body = post(rx.url, json.dumps(doc).encode(), JSON)
        assert code == 200
        partial = json.loads(body)["partialSuccess"]
        assert partial["rejectedSpans"] == "1" and spans[0]["name"] in partial["errorMessage"]
        bad = rec.request()
        bad.resource_spans[0].scope_spans[0].spans[1].trace_id = b"\x01\x02"
        code, _, body = post(rx.url, bad.SerializeToString())
        # ExportTraceServiceResponse{partial_success{rejected_spans: 1, error_message}}
        assert code == 200 and body[:4] == b"\x0a" + bytes([body[1]]) + b"\x08\x01" and b"trace_id" in body
    # the first post stored all but spans[0]; the second all but spans[1], spans[0] among them
    assert _status(store)["spans"] == 4


def test_bad_bodies_get_one_line(tmp_path):
    with Receiver(str(tmp_path / "m.db"), "--max-body", "4096") as rx:
        code, _, body = post(rx.url, b"{not json", JSON)
        msg = json.loads(body)["message"]
        assert code == 400 and "not JSON" in msg and "\n" not in msg
        code, _, body = post(rx.url, b'{"resource": []}', JSON)
        assert code == 400 and "resourceSpans" in json.loads(body)["message"]
        code, _, body = post(rx.url, b"\xff\xff\xff garbage")
        assert code == 400 and b"not an OTLP protobuf" in body and b"\n" not in body
        code, _, body = post(rx.url, b"x" * 10, JSON, headers={"Content-Encoding": "gzip"})
        assert code == 400 and "gzip" in json.loads(body)["message"]
        code, _, body = post(rx.url, b"{}", "text/plain")
        assert code == 415 and body.decode().count("\n") == 1 and "application/x-protobuf" in body.decode()
        code, _, body = post(rx.url, b"{" + b" " * 5000 + b"}", JSON)
        assert code == 413
        code, _, body = post(rx.url, b"[" + b" " * 50_000 + b"]", JSON, gzipped=True)   # small once compressed
        assert code == 413 and "decompressed" in json.loads(body)["message"]
        assert post(rx.url.replace("/v1/traces", "/v1/metrics"), b"{}", JSON)[0] == 404
        code, _, body = post(rx.url.replace("/v1/traces", "/v1/logs"), b"{}", JSON)   # logs are taken, not this
        assert code == 400 and "resourceLogs" in json.loads(body)["message"]
    assert _status(str(tmp_path / "m.db"))["spans"] == 0


def test_quiet_period_completes_a_trace_whose_root_never_comes(tmp_path):
    store = str(tmp_path / "m.db")
    rec = Recorder()
    _chat(rec)
    req = rec.request()
    spans = req.resource_spans[0].scope_spans[0].spans
    root = next(i for i, s in enumerate(spans) if not s.parent_span_id)
    del spans[root]
    with Receiver(store, "--quiet-period", "0.5") as rx:
        assert post(rx.url, req.SerializeToString())[0] == 200
        _wait(lambda: _traces(store, complete=True), "the quiet period to complete the trace")
    (t,) = _traces(store)
    assert t["completion"] == "quiet" and t["root_span_id"] is None and t["spans"] == 1


def test_a_full_queue_answers_429_with_retry_after_and_drops_nothing(tmp_path):
    store = str(tmp_path / "m.db")
    Store(store).close()
    a, b = Recorder(), Recorder()
    _chat(a, 2)
    _chat(b, 2)
    answers: dict[str, tuple] = {}
    with Receiver(store, "--max-pending", "4") as rx:
        lock = sqlite3.connect(store, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")               # the writer cannot commit: batches stay queued
        threads = [threading.Thread(target=lambda k=k, r=r: answers.__setitem__(k, post(rx.url, r)))
                   for k, r in (("a", a.request().SerializeToString()), ("b", b.request().SerializeToString()))]
        for t in threads:
            t.start()
        _wait(lambda: answers, "one of the two batches to be answered")
        ((first, (code, headers, body)),) = answers.items()
        assert code == 429 and headers["retry-after"] == "1" and b"over capacity" in body
        lock.execute("ROLLBACK")
        lock.close()
        for t in threads:
            t.join(60)
        other = "b" if first == "a" else "a"
        assert answers[other][0] == 200
        again = (a if first == "a" else b).request().SerializeToString()
        assert post(rx.url, again)[0] == 200           # the exporter's retry is taken
    assert _status(store)["spans"] == 8


def test_bind_and_token_rules(tmp_path):
    store = str(tmp_path / "m.db")
    cmd = [sys.executable, "-m", "assay.cli", "monitor", "serve", "--host", "0.0.0.0", "--port", "0", "--store", store]
    refused = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "needs a token" in refused.stderr and refused.stderr.strip().count("\n") == 0
    rec = Recorder()
    _chat(rec)
    body = rec.request().SerializeToString()
    with Receiver(store, "--token", "s3cret-token-for-tests") as rx:
        code, _, said = post(rx.url, body)
        assert code == 401 and b"Authorization: Bearer" in said
        assert post(rx.url, body, headers={"Authorization": "Bearer wrong"})[0] == 401
        assert post(rx.url, body, headers={"Authorization": "Bearer s3cret-token-for-tests"})[0] == 200
    with Receiver(store) as rx:                        # no token: loopback host names only
        assert post(rx.url, body, headers={"Host": "evil.example:4318"})[0] == 400
        assert post(rx.url.replace("127.0.0.1", "localhost"), body)[0] == 200


def test_monitor_status(tmp_path, capsys):
    store = str(tmp_path / "m.db")
    assert run(["monitor", "status", "--store", store]) == 0
    said = capsys.readouterr().out
    assert "spans          0" in said and "last received  never" in said
    rec = Recorder()
    _chat(rec, 3)
    with Receiver(store) as rx:
        assert post(rx.url, rec.request().SerializeToString())[0] == 200
        _wait(lambda: run(["monitor", "status", "--store", store]) == 0 and
              f"server         running: pid {rx.proc.pid}" in capsys.readouterr().out, "the server's heartbeat")
        assert run(["monitor", "status", "--store", store]) == 0
        said = capsys.readouterr().out
        assert "  queue        0 spans received, not yet committed" in said and "  scoring      off" in said
        rx.stop()
    assert run(["monitor", "status", "--store", store]) == 0
    said = capsys.readouterr().out
    assert "server         not running" in said                # stopped: its heartbeat removed
    assert "spans          6" in said and "traces         3 (3 complete, 0 open)" in said and "UTC" in said
    assert run(["monitor", "status", "--store", store, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["spans"], got["traces"], got["complete_traces"]) == (6, 3, 3) and got["store"].endswith("m.db")


def test_postgresql_store(postgres_url):
    st = Store(postgres_url)
    with st.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM spans")
        conn.exec_driver_sql("DELETE FROM traces")
    st.close()
    rec = Recorder()
    _chat(rec, 5)
    with Receiver(postgres_url, "--quiet-period", "60") as rx:
        for gz in (False, True):                      # the same spans twice
            assert post(rx.url, rec.request().SerializeToString(), gzipped=gz)[0] == 200
        assert post(rx.url, json.dumps(to_json(rec.request())).encode(), JSON)[0] == 200
    s = _status(postgres_url)
    assert (s["spans"], s["traces"], s["complete_traces"]) == (10, 5, 5)


@pytest.fixture(autouse=True)
def _no_store_env(monkeypatch):
    monkeypatch.setenv("ASSAY_STORE", "off")


def test_a_port_in_use_ends_with_one_line_and_exit_3(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        cmd = [sys.executable, "-m", "assay.cli", "monitor", "serve", "--port", str(port),
               "--store", str(tmp_path / "m.db")]
        r = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "port is in use" in r.stderr and "assay monitor serve" in r.stderr
    assert r.stderr.strip().count("\n") == 0 and r.stdout == ""


def test_a_store_that_fails_answers_503_with_retry_after_and_acknowledges_nothing(tmp_path):
    from assay.store import schema as S

    store = str(tmp_path / "m.db")
    rec = Recorder()
    _chat(rec, 2)
    body = rec.request().SerializeToString()
    with Receiver(store) as rx:
        st = Store(store)
        with st.engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE spans")      # every write now fails
        code, headers, said = post(rx.url, body)
        assert code == 503 and headers["retry-after"] == "1" and b"send them again" in said
        S.spans.create(st.engine)                          # the store is back: the exporter's retry is taken
        assert post(rx.url, body)[0] == 200
        st.close()
        rx.stop()
        assert "could not store 4 spans" in rx.output()
    assert _status(store)["spans"] == 4
