"""Online evaluation end to end: an app process instrumented with the OpenTelemetry SDK and its
OTLP/HTTP exporter sends traces to ``assay monitor serve --config``, which scores a hash sample of
them with the engine of ``assay eval`` (``tool_errors``: no judge model, offline), windows them and
alerts: ``assay monitor check`` exits 0 over the good period and 1 after a planted drop, and a
webhook on loopback receives the firing as JSON. Also: backfill, and a judge outage that leaves the
traces unscored until the judge answers again."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from assay.monitor.config import parse_config, sampled
from assay.monitor.scoring import OnlineScorer
from assay.store import Store
from assay.store.monitor import MonitorLog
from tests.helpers.cli import run_assay
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.monitor import ROOT, Receiver, env, record_window


class Hook:
    """A loopback HTTP server that keeps the JSON bodies POSTed to it."""

    def __init__(self) -> None:
        got: list[dict] = []

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                got.append({"type": self.headers.get("Content-Type"), "body": json.loads(self.rfile.read(n))})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *a: object) -> None:
                pass

        self.got = got
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _app(url: str, n: int, *extra: str) -> list[str]:
    app = subprocess.run([sys.executable, "-m", "tests.helpers.otel_app", url, str(n), *extra],
                         cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120)
    assert app.returncode == 0, app.stderr
    made = json.loads(app.stdout)
    assert made["acknowledged"] == 3 * n
    return made["trace_ids"]


def _assay(*args: str) -> subprocess.CompletedProcess:
    """``assay monitor ARGS`` (check, status, backfill: what they print and store), in this process."""
    return run_assay(["monitor", *args], cwd=ROOT, env=env())


def _wait(pred, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _tried(store: str, metric: str) -> dict[str, str]:
    st = Store(store)
    try:
        from sqlalchemy import text

        with st.engine.connect() as c:
            return dict(c.execute(text("select trace_id, status from monitor_scores where metric = :m"),
                                  {"m": metric}).all())
    finally:
        st.close()


def _next_window(seconds: float) -> None:
    """Sleep to the start of the next aligned window (and a little past it)."""
    now = time.time()
    time.sleep((now // seconds + 1) * seconds - now + 0.05)


CONFIG = """
interval: 0.2
lookback: 1h
sinks:
  log: true
  webhook: {{url: "{hook}", timeout: 2}}
metrics:
  tool_errors:
    sample: 0.6
    window: 2s
    min_traces: 3
    alerts:
      - tool_errors.mean<=0.2
"""


def test_serve_scores_a_sample_and_the_planted_drop_fires(tmp_path):
    store = str(tmp_path / "m.db")
    hook = Hook()
    cfg = tmp_path / "monitor.yaml"
    cfg.write_text(CONFIG.format(hook=hook.url))
    try:
        with Receiver(store, "--config", str(cfg)) as rx:
            _next_window(2)
            good = _app(rx.url, 16)
            picked_good = {t for t in good if sampled(t, "tool_errors", 0.6)}
            assert 3 <= len(picked_good) < 16
            _wait(lambda: set(_tried(store, "tool_errors")) >= picked_good, "the good sample scored")
            _next_window(2)                                   # the good window is closed
            ok = _assay("check", "--since", "1h", "--config", str(cfg), "--store", store)
            assert ok.returncode == 0, ok.stdout + ok.stderr
            assert "alerts firing: none" in ok.stdout
            bad = _app(rx.url, 16, "--bad")
            picked_bad = {t for t in bad if sampled(t, "tool_errors", 0.6)}
            _wait(lambda: set(_tried(store, "tool_errors")) >= picked_good | picked_bad, "the bad sample scored")
            _next_window(2)
            _wait(lambda: hook.got, "the webhook")            # the serve loop checks the closed window
            drop = _assay("check", "--since", "1h", "--config", str(cfg), "--store", store)
            assert drop.returncode == 1, drop.stdout + drop.stderr
            assert "FIRING" in drop.stdout
            assert rx.stop() == 143                                 # SIGTERM stops the scoring loop too
            said = rx.output()
        tried = _tried(store, "tool_errors")
        assert set(tried) == picked_good | picked_bad           # exactly the hash sample: nothing else
        assert set(tried.values()) == {"scored"}
        (event,) = [h["body"] for h in hook.got]
        assert hook.got[0]["type"] == "application/json"
        assert event["state"] == "firing" and event["rule"] == "tool_errors.mean<=0.2"
        assert event["figure"] == 1.0 and event["ci_low"] == 1.0 and event["n"] == len(event["trace_ids"]) >= 3
        assert set(event["trace_ids"]) <= picked_bad                # the traces behind it: the bad ones
        assert "ALERT firing: tool_errors" in said
        st = Store(store)
        log = MonitorLog(st)
        (alert,) = log.alerts()
        assert alert["trace_ids"] == event["trace_ids"] and alert["state"] == "firing"
        status = log.status()
        st.close()
        assert status["metrics"]["tool_errors"]["scored"] == len(picked_good | picked_bad)
        assert status["metrics"]["tool_errors"]["lag_p95_s"] is not None
        assert [a["rule"] for a in status["open_alerts"]] == ["tool_errors.mean<=0.2"]
        shown = _assay("status", "--store", store)
        assert "open alerts    1" in shown.stdout and "errored 0" in shown.stdout, shown.stdout
        # a rerun over the same traces picks the same sample
        rerun = tmp_path / "rerun.yaml"
        rerun.write_text("metrics:\n  token_count:\n    sample: 0.6\n")
        again = _assay("backfill", "--since", "1h", "--config", str(rerun), "--store", store)
        assert again.returncode == 0, again.stderr
        assert set(_tried(store, "token_count")) == {t for t in good + bad if sampled(t, "token_count", 0.6)}
    finally:
        hook.close()


def test_sampling_is_a_hash_of_the_trace_id():
    import hashlib

    ids = [hashlib.md5(str(i).encode()).hexdigest() for i in range(20_000)]
    picked = [t for t in ids if sampled(t, "groundedness", 0.1)]
    assert 0.09 < len(picked) / len(ids) < 0.11
    assert picked == [t for t in ids if sampled(t, "groundedness", 0.1)]        # the same on a rerun
    other = {t for t in ids if sampled(t, "coherence", 0.1)}
    assert other != set(picked)                                                 # each metric its own sample
    assert all(sampled(t, "x", 1.0) for t in ids[:100]) and not any(sampled(t, "x", 0.0) for t in ids[:100])


def test_backfill_scores_stored_traces(tmp_path):
    store = str(tmp_path / "m.db")
    with Receiver(store) as rx:
        ids = _app(rx.url, 6)
        rx.stop()
    got = _assay("backfill", "--since", "1h", "--metrics", "tool_errors", "--store", store)
    assert got.returncode == 0, got.stderr
    assert "tool_errors: scored 6," in got.stdout
    assert _tried(store, "tool_errors") == {t: "scored" for t in ids}
    again = _assay("backfill", "--since", "1h", "--metrics", "tool_errors", "--store", store)
    assert "tool_errors: scored 0," in again.stdout                # scored once, kept


def test_a_judge_outage_leaves_traces_unscored_until_it_recovers(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    store = str(tmp_path / "m.db")
    with Receiver(store) as rx:
        ids = _app(rx.url, 5)
        rx.stop()
    fake = FakeOpenAI().start()
    fake.default = {"status": 500, "json": {"error": {"message": "judge down"}}}
    cfg = parse_config(f"""
retry_after: 0.01
metrics:
  coherence:
    judge: "{fake.base_url}#fake-judge"
    max_attempts: 1
    timeout: 5
""")
    st = Store(store)
    try:
        scorer = OnlineScorer(st, cfg)
        down = scorer.run_pass(everything=True)["coherence"]
        assert down["scored"] == 0 and down["errored"] == 5
        assert fake.chat_requests                                  # the judge was asked, and failed
        assert set(_tried(store, "coherence").values()) == {"error"}
        assert len(MonitorLog(st).due("coherence")) == 5             # still due: nothing lost
        fake.default = {"content": '{"score": 4, "reason": "clear"}'}
        time.sleep(0.05)
        up = scorer.run_pass(everything=True)["coherence"]
        assert up["scored"] == 5 and up["errored"] == 0
        assert _tried(store, "coherence") == {t: "scored" for t in ids}
        assert MonitorLog(st).due("coherence") == []
        (row,) = MonitorLog(st).scores("coherence")[:1]
        assert row["scores"][0]["coherence"]["score"] == 4
    finally:
        st.close()
        fake.stop()




def test_a_rule_fires_only_when_the_interval_is_wholly_on_the_wrong_side(log):
    from assay.monitor.alerts import AlertChecker

    cfg = parse_config("metrics:\n  tool_errors:\n    window: 10s\n    min_traces: 3\n"
                       "    alerts: ['tool_errors.mean<=0.3']\n")
    record_window(log, 1000, [0.0] * 12, "a")                   # mean 0: right side
    record_window(log, 1010, [0.0] * 6 + [1.0] * 4, "b")         # mean 0.4, interval across 0.3: no change
    checker = AlertChecker(log.store, cfg)
    r = checker.check(since_ns=1000 * 10**9, until_ns=1100 * 10**9, now_ns=1100 * 10**9)
    rule = r["metrics"]["tool_errors"]["rules"][0]
    assert rule["last"]["ci_low"] < 0.3 < rule["last"]["ci_high"] and rule["last"]["side"] is None
    assert r["firing"] == [] and log.alerts() == []
    record_window(log, 1020, [1.0] * 9 + [0.0], "c")             # mean 0.9, wholly above: fires
    record_window(log, 1030, [0.0] * 6 + [1.0] * 4, "d")         # across the bound again: still firing
    r = checker.check(since_ns=1000 * 10**9, until_ns=1100 * 10**9, now_ns=1100 * 10**9)
    assert [(a["state"], a["window_start_ns"]) for a in log.alerts()] == [("firing", 1020 * 10**9)]
    assert len(r["firing"]) == 1
    record_window(log, 1040, [0.0] * 10, "e")                    # wholly below: clears
    r = checker.check(since_ns=1000 * 10**9, until_ns=1100 * 10**9, now_ns=1100 * 10**9)
    assert [a["state"] for a in log.alerts()] == ["firing", "cleared"] and r["firing"] == []
    again = checker.check(since_ns=1000 * 10**9, until_ns=1100 * 10**9, now_ns=1100 * 10**9)
    assert again["events"] == [] and len(log.alerts()) == 2         # recorded once


def test_no_regression_against_the_previous_window(log):
    from assay.monitor.alerts import AlertChecker

    cfg = parse_config("metrics:\n  tool_errors:\n    window: 10s\n    min_traces: 3\n    alerts: [no-regression]\n")
    record_window(log, 1000, [0.0] * 10, "a")
    record_window(log, 1010, [0.0] * 9 + [1.0], "b")             # a little worse: not significant
    record_window(log, 1020, [1.0] * 8 + [0.0] * 2, "c")         # significantly worse: fires
    r = AlertChecker(log.store, cfg).check(since_ns=1000 * 10**9, until_ns=1100 * 10**9, now_ns=1100 * 10**9)
    (ev,) = r["events"]
    assert ev["state"] == "firing" and ev["window_start_ns"] == 1020 * 10**9 and ev["ci_low"] > 0


@pytest.mark.parametrize(("text", "message"), [
    ("metrics:\n  tool_errors:\n    sample: 2\n", "monitor.yaml:3: metrics.tool_errors.sample: must be a share"),
    ("metrics:\n  tool_errors:\n    windo: 5m\n", "monitor.yaml:3: metrics.tool_errors.windo: unknown key 'windo'"),
    ("metrics:\n  tool_errors:\n    window: 5 minutes\n", "monitor.yaml:3: metrics.tool_errors.window: must be a"),
    ("metrics:\n  nope: {}\n", "monitor.yaml:2: metrics.nope: unknown metric 'nope'"),
    ("metrics:\n  tool_errors:\n    alerts: ['tool_errors.avg>=1']\n",
     "monitor.yaml:3: metrics.tool_errors.alerts[0]: rule 'tool_errors.avg>=1': unknown statistic"),
    ("metrics:\n  tool_errors:\n    alerts: ['coherence.mean>=4']\n",
     "monitor.yaml:3: metrics.tool_errors.alerts[0]: rule 'coherence.mean>=4' names 'coherence'"),
    ("sinks:\n  webhook: {url: ftp://x}\nmetrics:\n  tool_errors: {}\n",
     "monitor.yaml:2: sinks.webhook.url: must be an http://"),
    ("interval: 5\n", "monitor.yaml:1: metrics: missing"),
    ("metrics:\n  tool_errors:\n    max_cost_per_hour: -1\n", "monitor.yaml:3: metrics.tool_errors.max_cost_per_hour"),
])
def test_config_errors_name_the_file_line_and_field(text, message):
    from assay.errors import AssayError

    with pytest.raises(AssayError) as e:
        parse_config(text)
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


def test_a_config_is_read(tmp_path: Path):
    cfg = parse_config("""
interval: 2
sinks: {log: false, webhook: {url: "http://127.0.0.1:9/x", timeout: 1.5}}
metrics:
  coherence:
    sample: 0.1
    window: 1h
    judge: openai:gpt-4o-mini
    max_cost_per_hour: 0.5
    filters: {service: shop, span_name: chat, attributes: {gen_ai.request.model: gpt-4o-mini}}
    alerts: [coherence.mean>=4, no-regression]
""")
    mc = cfg.metrics["coherence"]
    assert (mc.sample, mc.window_s, mc.judge, mc.max_cost_per_hour) == (0.1, 3600.0, "openai:gpt-4o-mini", 0.5)
    assert mc.filters.attributes == {"gen_ai.request.model": "gpt-4o-mini"} and mc.filters.service == "shop"
    assert [g.text for g in mc.alerts] == ["coherence.mean>=4", "no-regression"]
    assert cfg.webhook.timeout == 1.5 and cfg.log is False and cfg.interval == 2


def test_the_hourly_budget_pauses_scoring_and_keeps_the_traces_due(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    store = str(tmp_path / "m.db")
    with Receiver(store) as rx:
        ids = _app(rx.url, 8)
        rx.stop()
    fake = FakeOpenAI().start()                 # each call: 100 prompt + 10 completion tokens
    fake.default = {"content": '{"score": 4, "reason": "clear"}'}
    cfg = parse_config(f"""
batch: 2
metrics:
  coherence:
    judge: "{fake.base_url}#fake-judge"
    max_cost_per_hour: 0.3
    options: {{judge_price: "1000,1000"}}
""")                                            # 0.11 USD a call: two batches of two reach the cap
    st = Store(store)
    said: list[str] = []
    try:
        scorer = OnlineScorer(st, cfg, say=said.append)
        got = scorer.run_pass()["coherence"]                           # as the serve loop runs it
        log = MonitorLog(st)
        assert got["errored"] == 0 and 2 <= got["scored"] < 8
        assert 0.2 < log.spent("coherence", 0) <= 0.3                 # the cap holds
        assert len(log.due("coherence")) == 8 - got["scored"]       # the rest waits: not lost, not errored
        assert any("budget of $0.3 an hour is spent" in line for line in said)
        assert set(_tried(store, "coherence")) < set(ids)
        cfg.metrics["coherence"].max_cost_per_hour = 10.0                # the budget raised: the next pass
        assert scorer.run_pass()["coherence"]["scored"] == 8 - got["scored"]   # finds the traces left
        assert _tried(store, "coherence") == {t: "scored" for t in ids}
    finally:
        st.close()
        fake.stop()


def test_no_regression_against_a_named_baseline_run(log):
    import assay
    from assay.monitor.alerts import AlertChecker

    calls = [{"name": "search", "arguments": {}, "error": None}]
    assay.evaluate([{"id": f"r{i}", "tool_calls": calls} for i in range(12)], metrics="tool_errors",
                   store=log.store, name="release-41")
    cfg = parse_config("metrics:\n  tool_errors:\n    window: 10s\n    min_traces: 3\n    baseline: release-41\n"
                       "    alerts: [no-regression]\n")
    record_window(log, 1000, [0.0] * 10, "a")                    # as good as the baseline
    record_window(log, 1010, [1.0] * 7 + [0.0] * 3, "b")         # significantly worse than it: fires
    record_window(log, 1020, [0.0] * 10, "c")                    # as good again: clears
    r = AlertChecker(log.store, cfg).check(since_ns=1000 * 10**9, until_ns=1100 * 10**9, now_ns=1100 * 10**9)
    assert [(e["state"], e["window_start_ns"] // 10**9) for e in r["events"]] == [("firing", 1010), ("cleared", 1020)]
    assert r["events"][0]["ci_high"] > r["events"][0]["ci_low"] > 0           # the difference from the baseline


def test_filters_pick_the_traces_a_metric_looks_at():
    from assay.monitor.scoring import passes_filters

    spans = [{"name": "invoke_agent shop", "attributes": {}},
             {"name": "chat gpt-4o-mini", "attributes": {"gen_ai.request.model": "gpt-4o-mini"}}]
    trace = {"service": "shop-assistant"}

    def mc(filters: str):
        return parse_config(f"metrics:\n  tool_errors:\n    filters: {filters}\n").metrics["tool_errors"]

    assert passes_filters(mc("{service: shop-assistant}"), trace, spans)
    assert not passes_filters(mc("{service: billing}"), trace, spans)
    assert passes_filters(mc("{span_name: chat gpt-4o-mini, attributes: {gen_ai.request.model: gpt-4o-mini}}"),
                          trace, spans)
    assert not passes_filters(mc("{span_name: invoke_agent shop, attributes: {gen_ai.request.model: gpt-4o-mini}}"),
                              trace, spans)                 # the name and the attributes on the same span
    assert not passes_filters(mc("{attributes: {gen_ai.request.model: gpt-4o}}"), trace, spans)


def _scored_rows(store: str, metric: str) -> dict[str, tuple]:
    st = Store(store)
    try:
        from sqlalchemy import text

        with st.engine.connect() as c:
            return {r[0]: tuple(r[1:]) for r in c.execute(text(
                "select trace_id, run_id, attempts, scores from monitor_scores where metric = :m and status = 'scored'"),
                {"m": metric})}
    finally:
        st.close()


def test_kill_9_while_scoring_keeps_finished_scores_and_the_restart_scores_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    store = str(tmp_path / "m.db")
    fake = FakeOpenAI().start()
    fake.default = {"content": '{"score": 4, "reason": "clear"}', "delay": 0.4}
    cfg = tmp_path / "monitor.yaml"
    cfg.write_text(f"interval: 0.1\nbatch: 2\nmetrics:\n  coherence:\n    judge: \"{fake.base_url}#fake-judge\"\n")
    try:
        with Receiver(store, "--config", str(cfg)) as rx:
            ids = _app(rx.url, 12)
            _wait(lambda: len(_scored_rows(store, "coherence")) >= 2, "the first scores")
            rx.kill()                                              # kill -9 in mid-stream
        before = _scored_rows(store, "coherence")
        assert 2 <= len(before) < 12
        with Receiver(store, "--config", str(cfg)) as rx:          # restarted on the same store
            _wait(lambda: len(_scored_rows(store, "coherence")) == 12, "the rest scored", timeout=90)
            rx.stop()
        after = _scored_rows(store, "coherence")
        assert set(after) == set(ids)
        assert {t: after[t] for t in before} == before             # finished scores kept as they were, not redone
    finally:
        fake.stop()
