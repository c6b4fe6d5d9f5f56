"""Scores back to the user's telemetry (issue 29, item 6): each score as an OpenTelemetry
``gen_ai.evaluation.result`` event, a log record exported with the SDK's OTLP/HTTP exporter to the
endpoint of ``monitor.yaml``'s ``export``. The endpoint here is a loopback HTTP server that decodes
each ``POST /v1/logs`` body as ``opentelemetry-proto``'s ``ExportLogsServiceRequest``; the scores
come from the real ``assay monitor serve --config`` fed by an app instrumented with the SDK, or from
an in-process :class:`OnlineScorer` over spans decoded as the receiver decodes them. A failing or
hanging endpoint never blocks the scoring and loses no score (they are in the store)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from assay.errors import AssayError
from assay.monitor.config import parse_config, sampled
from assay.monitor.scoring import OnlineScorer
from assay.store import Store
from assay.store.monitor import MonitorLog
from assay.store.spans import SpanLog
from tests.helpers.monitor import ROOT, LogsEndpoint, Receiver, attrs, env, export_config, store_with_traces


def _wait(pred, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _roots(store: str) -> dict[str, str]:
    st = Store(store)
    try:
        return {t["trace_id"]: t["root_span_id"] for t in SpanLog(st).traces()}
    finally:
        st.close()


def test_serve_sends_each_score_as_a_gen_ai_evaluation_result_event(tmp_path):
    """The real flow: an SDK-instrumented app -> `assay monitor serve --config` -> scores -> the
    events on the endpoint, each on the evaluated trace's root span, with the semconv attributes."""
    ep = LogsEndpoint()
    store = str(tmp_path / "m.db")
    cfg = tmp_path / "monitor.yaml"
    cfg.write_text(f"""
interval: 0.2
export:
  otlp_endpoint: {ep.base}
  headers: {{Authorization: "Bearer s3cret"}}
  timeout: 5
metrics:
  tool_errors:
    sample: 0.7
""")
    try:
        with Receiver(store, "--config", str(cfg)) as rx:
            app = subprocess.run([sys.executable, "-m", "tests.helpers.otel_app", rx.url, "8", "--bad"],
                                 cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
            assert app.returncode == 0, app.stderr
            ids = json.loads(app.stdout)["trace_ids"]
            picked = {t for t in ids if sampled(t, "tool_errors", 0.7)}
            assert 0 < len(picked) < len(ids)
            _wait(lambda: len(ep.records()) >= len(picked), "the evaluation events")
            assert rx.stop() == 143
        roots = _roots(store)
        recs = ep.records()
        assert len(recs) == len(picked)                                   # one event per score, once
        assert {r["path"] for r in ep.requests} == {"/v1/logs"}
        assert all(r["headers"].get("authorization") == "Bearer s3cret" for r in ep.requests)
        got = {}
        for res, rec in recs:
            assert res["service.name"] == "assay-monitor"
            assert rec.event_name == "gen_ai.evaluation.result"
            got[rec.trace_id.hex()] = (rec.span_id.hex(), attrs(rec))
        assert set(got) == picked                                         # exactly the scored sample
        for tid, (span_id, a) in got.items():
            assert span_id == roots[tid]                                  # on the evaluated trace's root span
            assert a["gen_ai.evaluation.name"] == "tool_errors"
            assert a["gen_ai.evaluation.score.value"] == 1.0              # --bad: the one tool call failed
            assert a["gen_ai.evaluation.score.label"] == "fail"
            assert "search backend timed out" in a["gen_ai.evaluation.explanation"]
        st = Store(store)
        scored = {r["trace_id"]: r["run_id"] for r in MonitorLog(st).scores("tool_errors")}
        st.close()
        assert set(scored) == picked
        assert all(a["assay.metric"] == "tool_errors" and a["assay.run_id"] == scored[tid] for tid, (_, a) in got.items())
    finally:
        ep.close()


@pytest.mark.parametrize("status", [500, 0], ids=["endpoint-500", "endpoint-closed"])
def test_a_failing_endpoint_never_blocks_scoring_and_loses_no_score(tmp_path, status):
    ep = LogsEndpoint(status=status or 200)
    url = ep.base
    if not status:                      # nothing listens there any more: connection refused
        ep.close()
    ids = store_with_traces(str(tmp_path / "m.db"), 4)
    said: list[str] = []
    st = Store(str(tmp_path / "m.db"))
    try:
        scorer = OnlineScorer(st, export_config(url), say=said.append)
        got = scorer.run_pass(everything=True)["tool_errors"]
        assert got["scored"] == 4 and got["errored"] == 0
        assert {r["trace_id"] for r in MonitorLog(st).scores("tool_errors")} == set(ids)   # all kept
        scorer.close()                                      # tries the export, bounded by its timeout
        assert scorer.export is None
        lines = [s for s in said if "evaluation events" in s]
        assert len(lines) == 1, said                        # one line for the outage, not one per batch
        assert "failed" in lines[0] and url in lines[0] and "kept in the store" in lines[0]
        if status:
            assert ep.requests and "HTTP 500" in lines[0]    # it was tried, and said why it failed
        else:
            assert "Connection refused" in lines[0]
    finally:
        st.close()
        if status:
            ep.close()


def test_a_hanging_endpoint_does_not_hold_up_scoring(tmp_path):
    ep = LogsEndpoint()
    ep.hold = threading.Event()                             # answers nothing until released
    store_with_traces(str(tmp_path / "m.db"), 3)
    store_with_traces(str(tmp_path / "m.db"), 2, fail=True)
    st = Store(str(tmp_path / "m.db"))
    try:
        scorer = OnlineScorer(st, export_config(ep.base, timeout=30), say=lambda line: None)
        first = scorer.run_pass(everything=True)["tool_errors"]
        _wait(lambda: ep.requests, "the first export")
        assert not ep.hold.is_set()
        # more traces come in and are scored while the endpoint still holds the first batch
        store_with_traces(str(tmp_path / "m.db"), 2)
        second = scorer.run_pass(everything=True)["tool_errors"]
        assert (first["scored"], second["scored"]) == (5, 2)
        assert len(MonitorLog(st).scores("tool_errors")) == 7
        assert not ep.hold.is_set() and len(ep.requests) == 1   # still hung: scoring did not wait for it
        ep.hold.set()
        scorer.close()
        recs = ep.records()
        assert len(recs) == 7
        values = sorted(attrs(r)["gen_ai.evaluation.score.value"] for _, r in recs)
        assert values == [0.0] * 5 + [1.0] * 2
    finally:
        st.close()
        ep.close()


def test_an_outage_of_the_endpoint_is_one_line_and_its_end_another(tmp_path):
    ep = LogsEndpoint(status=503)
    store_with_traces(str(tmp_path / "m.db"), 2)
    said: list[str] = []
    st = Store(str(tmp_path / "m.db"))
    try:
        scorer = OnlineScorer(st, export_config(ep.base, timeout=0.5), say=said.append)
        scorer.run_pass(everything=True)
        assert not scorer.export.flush(timeout=5) or scorer.export.lost == 2
        _wait(lambda: scorer.export.lost == 2, "the failed export")
        ep.status = 200
        store_with_traces(str(tmp_path / "m.db"), 3)
        assert scorer.run_pass(everything=True)["tool_errors"]["scored"] == 3
        scorer.export.flush(timeout=5)
        assert scorer.export.sent == 3
        lines = [s for s in said if "evaluation events" in s]
        assert len(lines) == 2 and "failed (HTTP 503 Service Unavailable)" in lines[0]
        assert "reach" in lines[1] and "again (2 were not sent" in lines[1]
        scorer.close()
    finally:
        st.close()
        ep.close()


def test_the_export_section_is_read_strictly():
    cfg = parse_config("export: {otlp_endpoint: 'http://collector:4318/'}\nmetrics: {tool_errors: {}}\n")
    assert cfg.export.endpoint == "http://collector:4318/v1/logs" and cfg.export.timeout == 10
    same = parse_config("export: {otlp_endpoint: 'https://c.example/v1/logs', timeout: 2}\nmetrics: {tool_errors: {}}\n")
    assert same.export.endpoint == "https://c.example/v1/logs" and same.export.timeout == 2
    for text, msg in (("export: {otlp_endpoint: 'collector:4318'}", "export.otlp_endpoint: must be an http"),
                      ("export: {url: 'http://x'}", "export.url: unknown key"),
                      ("export: {headers: {a: b}}", "export: needs an otlp_endpoint"),
                      ("export: {otlp_endpoint: 'http://x', timeout: 0}", "export.timeout: must be seconds")):
        with pytest.raises(AssayError, match=msg):
            parse_config(text + "\nmetrics: {tool_errors: {}}\n")
