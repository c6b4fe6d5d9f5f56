"""The store's spans and traces (assay.store.spans) on SQLite and a real PostgreSQL: a span
written twice is kept once, a trace is complete when its root span arrives or after a quiet
period, traces are read by time window. Spans made by the OpenTelemetry SDK."""

from __future__ import annotations

import pytest

from assay.formats.otlp import spans_of
from assay.monitor.decode import span_row
from assay.store import Store
from assay.store.spans import SpanLog
from tests.helpers.otlp import Recorder


@pytest.fixture(params=["sqlite", "postgres"])
def log(request, tmp_path):
    url = str(tmp_path / "s.db") if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    st = Store(url)
    with st.engine.begin() as conn:      # the PostgreSQL server is shared by the session's tests
        conn.exec_driver_sql("DELETE FROM spans")
        conn.exec_driver_sql("DELETE FROM traces")
    yield SpanLog(st)
    st.close()


def _rows(rec: Recorder) -> list[dict]:
    return [span_row(s) for s in spans_of(rec.request())]


def test_spans_kept_once_and_root_completes_the_trace(log):
    rec = Recorder()
    with rec.span("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}):
        with rec.span("chat m", {"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 7}):
            pass
    rows = _rows(rec)
    child = [r for r in rows if r["parent_id"] is not None]
    assert log.write(child, 100.0) == 1
    (open_trace,) = log.traces()
    assert open_trace["completed_at"] is None and open_trace["root_span_id"] is None and open_trace["spans"] == 1
    assert log.write(rows + rows, 101.0) == 1            # the child again, the root once: one new span
    assert log.write(rows, 102.0) == 0
    (t,) = log.traces()
    root = next(r for r in rows if r["parent_id"] is None)
    assert t["spans"] == 2 and t["root_span_id"] == root["span_id"] and t["root_name"] == "invoke_agent"
    assert t["completion"] == "root" and t["completed_at"] == 101.0 and t["service"] == "shop-assistant"
    assert t["start_ns"] == min(r["start_ns"] for r in rows) and t["end_ns"] == max(r["end_ns"] for r in rows)
    spans = log.spans(t["trace_id"])
    assert [s["name"] for s in spans] == ["invoke_agent", "chat m"]
    assert spans[1]["attributes"] == {"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 7}
    assert spans[1]["resource"]["service.name"] == "shop-assistant" and spans[1]["received_at"] == 100.0
    s = log.status()
    assert (s["spans"], s["traces"], s["complete_traces"], s["last_received"]) == (2, 1, 1, 101.0)


def test_a_trace_without_its_root_completes_after_the_quiet_period(log):
    rec = Recorder()
    with rec.span("root"):
        with rec.span("a"):
            pass
        with rec.span("b"):
            pass
    rows = [r for r in _rows(rec) if r["parent_id"] is not None]
    log.write(rows[:1], 100.0)
    log.write(rows[1:], 110.0)
    assert log.complete_quiet(30.0, 135.0) == 0            # 25 s since the last span
    assert log.complete_quiet(30.0, 140.0) == 1
    (t,) = log.traces(complete=True)
    assert t["completion"] == "quiet" and t["completed_at"] == 140.0 and t["spans"] == 2
    assert log.complete_quiet(30.0, 200.0) == 0 and log.traces(complete=False) == []


def test_traces_in_a_time_window(log):
    rec = Recorder()
    for name in ("one", "two", "three"):
        with rec.span(name):
            pass
    rows = _rows(rec)
    log.write(rows, 1.0)
    starts = sorted(r["start_ns"] for r in rows)
    got = log.traces(since_ns=starts[1], until_ns=starts[2])
    assert [t["root_name"] for t in got] == ["two"]
    assert [t["root_name"] for t in log.traces(since_ns=starts[1])] == ["two", "three"]
