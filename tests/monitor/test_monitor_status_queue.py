"""``assay monitor status`` shows the running server's queue: spans received and not yet committed
(the ingest queue held by a store that is slow to commit), the traces waiting to be scored and the
current evaluation lag (from the server's heartbeat in the store); a server that stopped, or was
killed (its heartbeat stale), is said not to run."""

from __future__ import annotations

import json
import threading
import time

from assay.cli.main import run
from assay.monitor.config import parse_config
from assay.monitor.heartbeat import Heartbeat
from assay.monitor.ingest import Ingest
from assay.monitor.scoring import OnlineScorer
from assay.store import Store
from assay.store.monitor import MonitorLog
from assay.store.spans import SpanLog
from tests.helpers.otlp import messages, text


def _span(tid: str, sid: str = "00000000000000aa", parent: str | None = None) -> dict:
    return {"trace_id": tid, "span_id": sid, "parent_id": parent, "name": "chat m", "kind": "CLIENT",
            "service": "bot", "scope": None, "start_ns": 1, "end_ns": 2, "status": "UNSET", "status_message": None,
            "attributes": json.dumps({"gen_ai.operation.name": "chat", "gen_ai.usage.output_tokens": 3,
                                      "gen_ai.input.messages": messages(text("user", "Hi?")),
                                      "gen_ai.output.messages": messages(text("assistant", "Hello."))}),
            "events": "[]", "resource": "{}"}


class SlowLog(SpanLog):
    """A span log whose commits wait until ``go`` is set."""

    def __init__(self, store):
        super().__init__(store)
        self.go = threading.Event()

    def write(self, spans, now, events=()):
        self.go.wait(30)
        return super().write(spans, now, events)


def test_status_shows_the_queue_the_waiting_traces_and_the_lag(tmp_path, capsys):
    path = str(tmp_path / "m.db")
    st = Store(path)
    try:
        SpanLog(st).write([_span(f"{i:032x}") for i in range(1, 6)], time.time() - 40)   # 5 complete, 40 s ago
        assert run(["monitor", "status", "--store", path]) == 0
        assert "server         not running (no `assay monitor serve` on this store)" in capsys.readouterr().out
        log = SlowLog(st)
        ingest = Ingest(log)
        ingest.start()
        pending = ingest.submit([_span(f"{i:032x}", "00000000000000bb", "00000000000000aa") for i in range(1, 8)])
        cfg = parse_config("metrics:\n  token_count:\n    sample: 1\n")
        scorer = OnlineScorer(st, cfg, now=time.time())
        beat = Heartbeat(st, ingest, "http://127.0.0.1:4318/v1/traces", scorer)
        beat.beat()
        assert run(["monitor", "status", "--store", path]) == 0
        said = capsys.readouterr().out
        assert "server         running: pid" in said and "http://127.0.0.1:4318/v1/traces" in said
        assert "  queue        7 spans received, not yet committed" in said
        line = next(x for x in said.splitlines() if x.startswith("  token_count"))
        assert "5 traces waiting to be scored; evaluation lag now" in line
        assert float(line.split("lag now ")[1].split(" s")[0]) >= 39.0
        log.go.set()
        pending.result(30)
        assert scorer.run_pass()["token_count"]["scored"] == 5
        beat.beat()
        assert run(["monitor", "status", "--store", path, "--json"]) == 0
        (srv,) = json.loads(capsys.readouterr().out)["servers"]
        assert srv["running"] and srv["state"]["spans_pending"] == 0
        assert srv["state"]["scoring"]["token_count"] == {"waiting": 0, "lag_s": 0.0}
        # killed: the heartbeat stays and goes stale
        MonitorLog(st).beat({**beat.base, "beat_at": time.time() - 60, "state": beat.state()})
        assert run(["monitor", "status", "--store", path]) == 0
        said = capsys.readouterr().out
        assert "not running (no `assay monitor serve` on this store; the last heartbeat was" in said
        beat.stop()                                             # a clean stop removes it
        assert MonitorLog(st).servers() == []
        ingest.close()
    finally:
        st.close()


def test_the_dashboard_shows_the_running_servers_queue(tmp_path):
    from fastapi.testclient import TestClient

    from assay.ui.server import create_app

    st = Store(str(tmp_path / "m.db"))
    try:
        client = TestClient(create_app(st), base_url="http://127.0.0.1")
        assert "not running</dd>" in client.get("/monitor").text
        ingest = Ingest(SpanLog(st))            # not started: what is submitted stays queued
        ingest.submit([_span("0" * 31 + "1")] * 3)
        beat = Heartbeat(st, ingest, "http://127.0.0.1:4318/v1/traces",
                         OnlineScorer(st, parse_config("metrics:\n  token_count: {}\n")))
        beat.beat()
        page = client.get("/monitor").text
        assert "3 spans received, not yet committed; token_count: 0 traces waiting" in page
        (srv,) = client.get("/api/monitor").json()["status"]["servers"]
        assert srv["running"] and srv["state"]["spans_pending"] == 3
        beat.stop()
        assert "not running</dd>" in client.get("/monitor").text
    finally:
        st.close()
