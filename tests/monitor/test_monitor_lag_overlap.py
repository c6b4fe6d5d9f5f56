"""Overlapping scoring passes (the evaluation-lag fix of ``assay monitor serve``): a trace that
completes while a pass waits on the judge is scored before that pass ends, by a pass of its own,
and no trace is scored twice. The judge is a loopback OpenAI-compatible stand-in whose first
request blocks until the test releases it; the traces come from a real OpenTelemetry app process
through the receiver."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from assay.monitor.config import parse_config
from assay.monitor.scoring import OnlineScorer
from assay.store import Store
from assay.store.monitor import MonitorLog
from tests.helpers.monitor import ROOT, Receiver, env


class BlockingJudge:
    """Answers chat completions with a score; the first request waits until :meth:`release`."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.released = threading.Event()
        self.first = threading.Event()
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                outer.requests.append(body)
                if len(outer.requests) == 1:
                    outer.first.set()
                    outer.released.wait(60)
                out = json.dumps({"id": "x", "object": "chat.completion", "model": "fake-judge", "choices": [
                    {"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": '{"score": 4, "reason": "clear"}'}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1#fake-judge"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def _app(url: str, n: int) -> list[str]:
    app = subprocess.run([sys.executable, "-m", "tests.helpers.otel_app", url, str(n)],
                         cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert app.returncode == 0, app.stderr
    return json.loads(app.stdout)["trace_ids"]


def _until(pred, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _attempts(st: Store) -> dict[str, tuple[str, int]]:
    from sqlalchemy import text

    with st.engine.connect() as c:
        return {r[0]: (r[1], r[2]) for r in c.execute(text(
            "SELECT trace_id, status, attempts FROM monitor_scores WHERE metric = 'coherence'"))}


@pytest.fixture
def judge():
    j = BlockingJudge()
    yield j
    j.close()


def _cfg(url: str):
    return parse_config(f'interval: 0.05\nmetrics:\n  coherence:\n    judge: "{url}"\n    max_attempts: 1\n'
                        f'    timeout: 60\n')


def test_a_trace_completed_during_a_pass_is_scored_before_that_pass_ends(tmp_path, monkeypatch, judge):
    from assay.cli.monitor import ScoringLoop

    monkeypatch.setenv("ASSAY_CACHE", "off")
    store = str(tmp_path / "m.db")
    st = Store(store)
    loop = None
    with Receiver(store) as rx:
        try:
            (first,) = _app(rx.url, 1)
            loop = ScoringLoop(st, _cfg(judge.url))
            loop.start()
            assert judge.first.wait(30), "the first pass never asked the judge"
            (second,) = _app(rx.url, 1)          # completes while the first pass waits on the judge
            scored = _until(lambda: _attempts(st).get(second, ("", 0))[0] == "scored")
            assert scored, "the trace completed during a pass waited for that pass to end"
            assert first not in _attempts(st)    # the first pass is still waiting: nothing stored for it
            judge.release()
            assert _until(lambda: _attempts(st).get(first, ("", 0))[0] == "scored")
            assert _attempts(st) == {first: ("scored", 1), second: ("scored", 1)}
            assert len(judge.requests) == 2       # each trace asked of the judge once
        finally:
            judge.release()
            if loop is not None:
                loop.stop()
            st.close()


def test_overlapping_passes_never_score_a_trace_twice(tmp_path, monkeypatch, judge):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    store = str(tmp_path / "m.db")
    with Receiver(store) as rx:
        (first,) = _app(rx.url, 1)
        st = Store(store)
        try:
            scorer = OnlineScorer(st, _cfg(judge.url))
            got: dict[str, dict] = {}
            t = threading.Thread(target=lambda: got.update(scorer.run_pass()))
            t.start()
            assert judge.first.wait(30)
            ids = _app(rx.url, 3)                 # three more while the first pass is in flight
            beside = scorer.run_pass()["coherence"]            # a second pass beside the first
            assert beside["scored"] == 3 and t.is_alive()      # the new ones, not the one in flight
            judge.release()
            t.join(60)
            assert got["coherence"]["scored"] == 1
            assert scorer.run_pass()["coherence"]["scored"] == 0
            assert _attempts(st) == {tid: ("scored", 1) for tid in [first, *ids]}
            assert len(judge.requests) == 4
            assert MonitorLog(st).due("coherence") == []
            (limits,) = scorer.limits.values()     # one set of judge limits for both passes
            assert limits.peak >= 2 and limits.in_flight == 0
        finally:
            judge.release()
            st.close()
