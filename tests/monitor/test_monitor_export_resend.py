"""Scores whose ``gen_ai.evaluation.result`` events could not be sent are marked in the store and
sent again later: an endpoint that fails (503), then recovers, ends with every score's event
received, each score ``sent``; a score still ``pending`` long after it was queued (its process
stopped first) is re-sent too; without ``export`` nothing is marked."""

from __future__ import annotations

import time

from assay.monitor.scoring import OnlineScorer
from assay.store import Store
from assay.store.monitor import MonitorLog
from tests.helpers.monitor import LogsEndpoint, attrs, export_config, store_with_traces


def _wait(pred, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_failed_exports_are_resent_once_the_endpoint_recovers(tmp_path):
    ep = LogsEndpoint(status=503)
    ids = store_with_traces(str(tmp_path / "m.db"), 4)
    st = Store(str(tmp_path / "m.db"))
    try:
        scorer = OnlineScorer(st, export_config(ep.base, timeout=0.5), say=lambda line: None)
        assert scorer.run_pass(everything=True)["tool_errors"]["scored"] == 4
        log = MonitorLog(st)
        _wait(lambda: log.export_counts() == {"failed": 4}, "the failed export marked")
        assert scorer.resend_exports(now=time.time() - 60) == 0     # not before retry_after has passed
        ep.status = 200
        assert scorer.resend_exports(now=time.time() + 1) == 4
        _wait(lambda: log.export_counts() == {"sent": 4}, "the re-sent events acknowledged")
        ok = [r for r in ep.requests if r["request"].resource_logs]
        got = {r.trace_id.hex() for _, r in ep.records()[-4:]}
        assert got == set(ids) and len(ok) >= 2                       # refused once, then received
        assert {attrs(r)["gen_ai.evaluation.name"] for _, r in ep.records()} == {"tool_errors"}
        assert scorer.resend_exports(now=time.time() + 3600) == 0    # sent: never again
        scorer.close()
    finally:
        st.close()
        ep.close()


def test_a_score_left_pending_by_a_stopped_process_is_resent(tmp_path):
    ep = LogsEndpoint()
    ids = store_with_traces(str(tmp_path / "m.db"), 2)
    st = Store(str(tmp_path / "m.db"))
    try:
        first = OnlineScorer(st, export_config(ep.base), say=lambda line: None)
        first.export.provider.shutdown()          # stops before its queue is sent (as a killed process)
        first.export = type(first.export).__new__(type(first.export))   # an exporter that sends nothing
        first.export.send = lambda metric, outcomes: 0
        first.export.timeout = 1
        assert first.run_pass(everything=True)["tool_errors"]["scored"] == 2
        log = MonitorLog(st)
        assert log.export_counts() == {"pending": 2}
        later = OnlineScorer(st, export_config(ep.base), say=lambda line: None)      # the restarted server
        assert later.resend_exports(now=time.time() + 10) == 0               # still recent: maybe in flight
        assert later.resend_exports(now=time.time() + 120) == 2
        later.close()
        assert log.export_counts() == {"sent": 2}
        assert {r.trace_id.hex() for _, r in ep.records()} == set(ids)
    finally:
        st.close()
        ep.close()


def test_without_export_nothing_is_marked(tmp_path):
    from assay.monitor.config import parse_config

    store_with_traces(str(tmp_path / "m.db"), 2)
    st = Store(str(tmp_path / "m.db"))
    try:
        scorer = OnlineScorer(st, parse_config("metrics:\n  tool_errors: {}\n"))
        assert scorer.run_pass(everything=True)["tool_errors"]["scored"] == 2
        assert MonitorLog(st).export_counts() == {} and scorer.resend_exports() == 0
    finally:
        st.close()
