"""Two scorers on one store (two ``monitor serve`` processes: each its own store connection and
lease holder) never score one trace twice: a pass takes a lease on each trace in the store (one
transaction), releases it on outcome; a holder that crashed leaves its leases, which expire, and
the other scores those traces (its watermark stayed before them). SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import time

import pytest

from assay.monitor.config import parse_config
from assay.monitor.scoring import OnlineScorer
from assay.store import Store
from assay.store.monitor import MonitorLog
from assay.store.spans import SpanLog
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.otlp import messages, text

N = 12


def _trace(i: int) -> dict:
    return {"trace_id": f"{i + 1:032x}", "span_id": "00000000000000aa", "parent_id": None, "name": "chat m",
            "kind": "CLIENT", "service": "bot", "scope": None, "start_ns": 1, "end_ns": 2, "status": "UNSET",
            "status_message": None, "events": "[]", "resource": "{}",
            "attributes": json.dumps({"gen_ai.operation.name": "chat",
                                      "gen_ai.input.messages": messages(text("user", f"Question {i}?")),
                                      "gen_ai.output.messages": messages(text("assistant", f"Answer {i}."))})}


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "m.db")
    url = request.getfixturevalue("postgres_url")
    st = Store(url)
    with st.engine.begin() as conn:      # the PostgreSQL server is shared by the session's tests
        for table in ("spans", "traces", "monitor_scores", "monitor_claims"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    st.close()
    return url


@pytest.fixture
def judge():
    fake = FakeOpenAI().start()
    fake.default = {"delay": 0.05, "content": '{"score": 4, "reason": "fine"}'}
    yield fake
    fake.stop()


def _config(judge, lease: str = "5m") -> object:
    return parse_config(f'batch: 3\nlease: {lease}\nretry_after: 0.01\nmetrics:\n  coherence:\n'
                        f'    judge: "{judge.base_url}#fake-judge"\n    timeout: 10\n')


def test_two_scorers_never_score_a_trace_twice(store_url, judge, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    stores = [Store(store_url), Store(store_url)]          # two processes' connections
    try:
        SpanLog(stores[0]).write([_trace(i) for i in range(N)], time.time())
        scorers = [OnlineScorer(st, _config(judge)) for st in stores]
        got: list[dict] = []
        start = threading.Barrier(2)

        def work(sc: OnlineScorer) -> None:
            start.wait()
            for _ in range(3):
                got.append(sc.run_pass()["coherence"])

        threads = [threading.Thread(target=work, args=(sc,)) for sc in scorers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert sum(g["scored"] for g in got) == N                   # each trace once, by one of them
        assert len(judge.chat_requests) == N                          # the judge asked once per trace
        rows = MonitorLog(stores[0]).trace_scores([f"{i + 1:032x}" for i in range(N)])
        assert {r["coherence"]["attempts"] for r in rows.values()} == {1} and len(rows) == N
        with stores[0].engine.connect() as conn:                      # every lease released
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM monitor_claims").scalar_one() == 0
    finally:
        for st in stores:
            st.close()


def test_a_crashed_holders_leases_expire_and_the_other_scores_them(store_url, judge, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    stores = [Store(store_url), Store(store_url)]
    try:
        SpanLog(stores[0]).write([_trace(i) for i in range(N)], time.time())
        ids = [f"{i + 1:032x}" for i in range(N)]
        crashed = MonitorLog(stores[0])                       # took 4 traces, then was killed: never released
        took = time.time()
        assert crashed.claim("coherence", {t: 0 for t in ids[:4]}, "dead-process", 3, took) == ids[:4]
        # another holder cannot take a live lease
        assert crashed.claim("coherence", {ids[0]: 0}, "someone-else", 60, took + 1) == []
        scorer = OnlineScorer(stores[1], _config(judge))
        first = scorer.run_pass()["coherence"]
        assert first["scored"] == N - 4                            # the leased ones are left alone
        assert set(MonitorLog(stores[1]).trace_scores(ids)) == set(ids[4:])
        time.sleep(max(0.0, took + 3.05 - time.time()))            # the dead holder's leases expire
        second = scorer.run_pass()["coherence"]                    # (not a backfill: the watermark waited)
        assert second["scored"] == 4
        assert len(judge.chat_requests) == N
        rows = MonitorLog(stores[1]).trace_scores(ids)
        assert {r["coherence"]["attempts"] for r in rows.values()} == {1}
        # a trace scored since another found it due is not taken again on a stale reading
        assert crashed.claim("coherence", {ids[5]: 0}, "late-reader", 60, time.time()) == []
    finally:
        for st in stores:
            st.close()


def test_leases_of_a_dead_process_on_this_host_are_taken_at_once(tmp_path, judge, monkeypatch):
    import subprocess

    from assay.store.sessions import this_host

    monkeypatch.setenv("ASSAY_CACHE", "off")
    st = Store(str(tmp_path / "m.db"))
    try:
        SpanLog(st).write([_trace(i) for i in range(N)], time.time())
        gone = subprocess.Popen(["true"])
        gone.wait()                                          # a pid that no longer runs
        ids = [f"{i + 1:032x}" for i in range(N)]
        log = MonitorLog(st)
        assert log.claim("coherence", {t: 0 for t in ids[:3]}, f"{this_host()}|{gone.pid}|killed", 600,
                         time.time()) == ids[:3]
        assert log.claim("coherence", {ids[3]: 0}, f"elsewhere|{gone.pid}|alive", 600, time.time()) == [ids[3]]
        got = OnlineScorer(st, _config(judge)).run_pass()["coherence"]
        assert got["scored"] == N - 1               # the killed local process's 3 at once; another host's lease kept
        assert log.holders("coherence") == [f"elsewhere|{gone.pid}|alive"]
    finally:
        st.close()
