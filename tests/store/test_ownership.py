"""Run ownership: a running run has an owner (session, pid, host) and a heartbeat. A run whose
process was killed reads as ``stale`` (``assay runs``, ``assay show``, the dashboard) and
resumes; a live one is not resumed a second time; a resumed run's judge usage adds up every
session; SIGTERM's SystemExit leaves the run ``interrupted``. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from sqlalchemy import update

import assay
from assay.engine import run as engine_run
from assay.errors import AssayError
from assay.metrics.base import Score
from assay.store import Store, StoredRow
from assay.store import schema as S
from assay.store.sessions import PID_GRACE_S, STALE_AFTER_S, is_stale, sum_usage, this_host
from tests.helpers.cli import run_assay
from tests.helpers.old_stores import BEFORE_V6

N_ROWS = 1300      # the killed run's rows
ANSWERED = 600     # chat calls the fake judge answers before it hangs


def _url(request, tmp_path, backend: str) -> str:
    return str(tmp_path / "own.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    st = Store(_url(request, tmp_path, request.param))
    yield st
    st.close()


def _cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    """``assay ARGS`` with ``env`` (what it prints, refuses and stores), in this process; the run
    that is killed is a real process."""
    return run_assay(args, env=env)


def _listed_status(stdout: str, run_id: str) -> str:
    """The status cell of ``run_id``'s row in the table `assay runs` prints."""
    line = next(ln for ln in stdout.splitlines() if run_id in ln)
    cells = [c.strip() for c in line.split("│")]
    return next(c for c in cells if c in ("running", "stale", "completed", "interrupted", "failed"))


def _one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


# -- real processes: kill -9, stale, refused, resumed -------------------------------------------------

@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kill_9_leaves_a_stale_run_that_resumes_and_a_live_run_is_not_resumed_twice(tmp_path, request, backend,
                                                                                      fake):
    from fastapi.testclient import TestClient

    from assay.ui.server import create_app

    url = _url(request, tmp_path, backend)
    name = f"own-{backend}-{uuid.uuid4().hex[:6]}"
    data = tmp_path / "rag.jsonl"
    with open(data, "w") as fh:
        for i in range(N_ROWS):
            fh.write(json.dumps({"query": f"what is item {i}?", "response": f"item {i} is of kind {i % 11}"}) + "\n")
    answered = {"n": 0, "hang": True}
    lock = threading.Lock()

    def judge(req):   # answers ANSWERED calls, then hangs (until the run is resumed)
        with lock:
            if answered["hang"] and answered["n"] >= ANSWERED:
                return {"delay": 3600}
            answered["n"] += 1
        return {"content": json.dumps({"score": 4, "reason": "fine"})}

    fake.default = judge
    env = {**os.environ, "ASSAY_STORE": url, "ASSAY_CACHE": str(tmp_path / "cache.sqlite"),
           "OPENAI_API_KEY": "unused"}
    args = ["eval", str(data), "--metrics", "coherence", "--judge", f"{fake.base_url}#fake-judge", "-q",
            "--concurrency", "8", "--name", name]
    st = Store(url)
    p = subprocess.Popen([sys.executable, "-m", "assay.cli", *args], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        # the first session runs until the judge hangs, and records the calls it paid for
        deadline = time.time() + 90
        while True:
            assert p.poll() is None, p.stderr.read()
            runs = st.list_runs(name=name)
            sessions = st.sessions(runs[0]["id"]) if runs else []
            # (calls in flight count as calls; the tokens are those of the calls answered)
            if sessions and (sessions[0]["usage"] or {}).get("prompt_tokens") == 100 * ANSWERED:
                break
            assert time.time() < deadline, f"no heartbeat with {ANSWERED} calls answered: {sessions}"
            time.sleep(0.2)
        run_id = runs[0]["id"]
        live = st.get_run(run_id)
        assert live["status"] == "running" and live["owner_pid"] == p.pid and live["owner_host"] == this_host()

        # live: listed as running, shown as being written, and a second resume is refused
        r = _cli(["runs", "--name", name], env)
        assert r.returncode == 0 and _listed_status(r.stdout, run_id) == "running"
        r = _cli(["show", run_id], env)
        assert r.returncode == 0 and "being written" in r.stdout and f"pid {p.pid}" in r.stdout
        asked = len(fake.chat_requests)
        for flag in (["--resume"], ["--resume-from", run_id]):
            line = _one_line_error(_cli([*args, *flag], env))
            assert f"run {run_id} is still running (pid {p.pid} on host {this_host()}" in line
        assert len(fake.chat_requests) == asked          # the refused processes asked the judge nothing

        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
        rows_done = st.get_run(run_id)["rows_done"]

        # killed: stale in the store, `assay runs`, `assay show` and the dashboard
        assert st.get_run(run_id)["status"] == "stale"
        assert [r["id"] for r in st.list_runs(status="stale", name=name)] == [run_id]
        assert st.list_runs(status="running", name=name) == []
        r = _cli(["runs", "--name", name], env)
        assert r.returncode == 0 and _listed_status(r.stdout, run_id) == "stale"
        r = _cli(["runs", "--status", "stale"], env)
        assert r.returncode == 0 and _listed_status(r.stdout, run_id) == "stale"
        r = _cli(["show", run_id], env)
        assert r.returncode == 0 and f"run {run_id} ({name}): stale" in r.stdout
        assert "stopped without finishing" in r.stdout
        assert f"--resume-from {run_id}" in r.stdout
        client = TestClient(create_app(st), base_url="http://127.0.0.1")
        assert client.get(f"/api/runs/{run_id}").json()["status"] == "stale"
        listed = client.get("/api/runs", params={"status": "stale", "name": name}).json()
        assert listed["total"] == 1 and listed["runs"][0]["status"] == "stale"
        assert client.get("/api/runs", params={"status": "running", "name": name}).json()["total"] == 0
        page = client.get(f"/runs/{run_id}").text
        assert "<dd>stale" in page and "stopped without finishing it" in page

        # resumed: completes, and its judge usage is both sessions'
        with lock:
            answered["hang"] = False
        r = _cli([*args, "--resume"], env)
        assert r.returncode == 0, r.stderr
        said = " ".join(r.stdout.split())
        assert f"resumed with {rows_done} rows already scored" in said and "over 2 sessions" in said
        done = st.get_run(run_id)
        assert done["status"] == "completed" and st.count_rows(run_id) == N_ROWS
        sessions = st.sessions(run_id)
        assert [s["status"] for s in sessions] == ["stale", "completed"] and sessions[0]["pid"] == p.pid
        usage = done["usage"]
        assert usage["sessions"] == 2 and done["summary"]["judge_usage"] == usage
        assert usage["calls"] == sessions[0]["usage"]["calls"] + sessions[1]["usage"]["calls"] >= N_ROWS
        # every call answered by the endpoint, in either session, is counted once (100 + 10 tokens each)
        assert usage["prompt_tokens"] == 100 * answered["n"] and usage["completion_tokens"] == 10 * answered["n"]
        assert done["summary"]["judge_calls"]["calls"] == usage["calls"]
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
        st.close()


# -- two resumes at once, and a session that lost its run ---------------------------------------------

def _rows(lo: int, hi: int) -> list[StoredRow]:
    return [StoredRow(i, None, None, False, {"i": i}, {"m": {"m": Score(value=i, score=i)}}) for i in range(lo, hi)]


def _as_if_on_a_lost_host(st: Store, run_id: str) -> None:
    """The run's owner ran on another machine that stopped beating a while ago."""
    with st.engine.begin() as conn:
        conn.execute(update(S.runs).where(S.runs.c.id == run_id)
                     .values(owner_host="elsewhere", heartbeat_at=time.time() - STALE_AFTER_S - 5))


def test_two_resumes_at_once_one_takes_the_run_and_the_old_owner_stops_writing(store):
    rid = store.start_run(name="race", source="t", fingerprint=None, config={}, config_hash="h", metrics=["m"],
                          judge=None)
    store.write_rows(rid, _rows(0, 10))
    with pytest.raises(AssayError, match=f"run {rid} is still running"):   # this process is alive
        Store(store.url).reopen_run(rid)
    _as_if_on_a_lost_host(store, rid)
    assert store.get_run(rid)["status"] == "stale"

    contenders = [Store(store.url), Store(store.url)]
    start = threading.Barrier(2)
    outcome: list[str] = []

    def resume(st: Store) -> None:
        start.wait()
        try:
            st.reopen_run(rid)
            outcome.append("took it")
        except AssayError as exc:
            outcome.append(str(exc))

    threads = [threading.Thread(target=resume, args=(c,)) for c in contenders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcome)[-1] == "took it" and outcome.count("took it") == 1, outcome
    refused = next(o for o in outcome if o != "took it")
    assert "still running" in refused or "just taken over" in refused
    winner = next(c for c in contenders if c.owns(rid))

    # the old owner can no longer write, beat or end the run
    with pytest.raises(AssayError, match=f"run {rid} was taken over by another process"):
        store.write_rows(rid, _rows(10, 20))
    assert store.count_rows(rid) == 10 and store.get_run(rid)["rows_done"] == 10
    assert store.heartbeat(rid) is False
    store.finish_run(rid, "interrupted", error="interrupted")
    assert store.get_run(rid)["status"] == "running"
    winner.write_rows(rid, _rows(10, 20))
    winner.finish_run(rid, "completed", aggregates={"m": {"metric": "m"}})
    got = store.get_run(rid)
    assert got["status"] == "completed" and got["rows_done"] == 20
    assert [s["status"] for s in store.sessions(rid)] == ["stale", "completed"]
    for c in contenders:
        c.close()


# -- the rules ----------------------------------------------------------------------------------------

def test_stale_or_live_by_pid_on_this_host_and_by_heartbeat_elsewhere():
    now = time.time()
    here, gone = this_host(), _dead_pid()
    base = {"status": "running", "updated_at": now - 3600}
    assert not is_stale({**base, "owner_host": here, "owner_pid": os.getpid(), "heartbeat_at": now - 30})
    assert is_stale({**base, "owner_host": here, "owner_pid": gone, "heartbeat_at": now})   # killed a moment ago
    assert is_stale({**base, "owner_host": here, "owner_pid": os.getpid(), "heartbeat_at": now - PID_GRACE_S - 1})
    assert not is_stale({**base, "owner_host": "elsewhere", "owner_pid": gone, "heartbeat_at": now - 5})
    assert is_stale({**base, "owner_host": "elsewhere", "owner_pid": 1, "heartbeat_at": now - STALE_AFTER_S - 1})
    assert is_stale(base)                                                # a run from before heartbeats
    assert not is_stale({"status": "running", "updated_at": now - 5})
    assert not is_stale({**base, "status": "interrupted", "owner_host": here, "owner_pid": gone})


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_usage_of_sessions_adds_up():
    a = {"calls": 600, "cache_hits": 0, "errors": 1, "prompt_tokens": 60000, "completion_tokens": 6000,
         "cost_usd": 0.5, "price_per_1m": {"input": 1, "output": 2}, "price_source": "old"}
    b = {"calls": 788, "cache_hits": 88, "errors": 0, "prompt_tokens": 70000, "completion_tokens": 7000,
         "cost_usd": 0.25, "price_per_1m": {"input": 3, "output": 4}, "price_source": "new"}
    total = sum_usage([a, b])
    assert total["calls"] == 1388 and total["cache_hits"] == 88 and total["errors"] == 1
    assert total["prompt_tokens"] == 130000 and total["completion_tokens"] == 13000
    assert total["cost_usd"] == 0.75 and total["price_source"] == "new" and total["sessions"] == 2
    assert "sessions_unrecorded" not in total
    unknown_price = sum_usage([{**a, "cost_usd": None}, b])
    assert unknown_price["cost_usd"] is None                 # tokens paid at a price nobody knows
    killed_early = sum_usage([None, b])
    assert killed_early["calls"] == 788 and killed_early["sessions"] == 2 and killed_early["sessions_unrecorded"] == 1
    assert sum_usage([None, None]) is None


# -- in process: accounting after Ctrl-C, and SIGTERM's SystemExit ------------------------------------

_STOP = {"at": None, "exc": KeyboardInterrupt}


@assay.metric(name="test_ownership_stops", kind="custom")
def _stops(response: str) -> float:
    if _STOP["at"] is not None and response.startswith(f"answer {_STOP['at']} "):
        _STOP["at"] = None
        raise _STOP["exc"]
    return float(len(response))


ROWS = [{"query": f"question {i}", "response": f"answer {i} with {i % 7} words"} for i in range(60)]


def test_a_resumed_runs_judge_usage_counts_every_session(store, fake, monkeypatch, tmp_path):
    monkeypatch.setattr(engine_run, "CHUNK", 8)
    monkeypatch.setenv("ASSAY_CACHE", "off")
    judge = f"{fake.base_url}#fake-judge"
    name = f"acct-{uuid.uuid4().hex[:6]}"
    metrics = "coherence,test_ownership_stops"
    _STOP.update(at=30, exc=KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        assay.evaluate(ROWS, metrics=metrics, judge=judge, store=store, name=name, workers=1)
    cut = store.get_run(name)
    first = store.sessions(cut["id"])[0]["usage"]
    assert cut["status"] == "interrupted" and first["calls"] >= cut["rows_done"] > 0
    assert cut["usage"]["calls"] == first["calls"] and cut["usage"]["sessions"] == 1

    res = assay.evaluate(ROWS, metrics=metrics, judge=judge, store=store, name=name, resume=True, workers=1)
    paid = len(fake.chat_requests)
    u = res.run["judge_usage"]
    assert res.run["resumed_rows"] == cut["rows_done"] and u["sessions"] == 2
    # every request the endpoint got is a call; those cut off by Ctrl-C are errors and cost no tokens
    assert u["calls"] == paid and u["prompt_tokens"] == 100 * (paid - u["errors"])
    assert u["completion_tokens"] == 10 * (paid - u["errors"])
    assert res.run["judge_calls"]["calls"] == paid
    assert store.get_run(name)["usage"] == u


def test_systemexit_from_sigterm_leaves_the_run_interrupted_and_resumable(store, monkeypatch):
    monkeypatch.setattr(engine_run, "CHUNK", 8)
    name = f"term-{uuid.uuid4().hex[:6]}"
    _STOP.update(at=25, exc=SystemExit(143))
    with pytest.raises(SystemExit):
        assay.evaluate(ROWS, metrics="test_ownership_stops", store=store, name=name, workers=1)
    run = store.get_run(name)
    assert run["status"] == "interrupted" and run["error"] == "interrupted"
    assert [s["status"] for s in store.sessions(run["id"])] == ["interrupted"]
    res = assay.evaluate(ROWS, metrics="test_ownership_stops", store=store, name=name, resume=True, workers=1)
    assert res.run["run_id"] == run["id"] and store.get_run(name)["status"] == "completed"


def test_a_run_that_stops_before_its_rows_is_not_left_running(store, monkeypatch):
    """In a process that goes on (a notebook), a run that failed after it was opened and before
    its first chunk is not left alive."""
    import assay.engine.evaluate as ev

    def broken(*a, **kw):
        raise OSError("the rows' writer could not start")

    name = f"nostart-{uuid.uuid4().hex[:6]}"
    with monkeypatch.context() as m:
        m.setattr(ev, "ChunkRunner", broken)
        with pytest.raises(OSError):
            assay.evaluate(ROWS, metrics="test_ownership_stops", store=store, name=name)
    run = store.get_run(name)
    assert run["status"] == "failed" and not store.owns(run["id"])
    res = assay.evaluate(ROWS, metrics="test_ownership_stops", store=store, name=name, resume=True, workers=1)
    assert res.run["run_id"] == run["id"] and store.get_run(name)["status"] == "completed"


# -- a store written before ownership -----------------------------------------------------------------

def test_a_version_4_store_gets_sessions_and_its_running_runs_read_as_stale(tmp_path):
    import sqlite3

    path = tmp_path / "v4.db"
    st = Store(str(path), row_format=1)
    done = assay.evaluate(ROWS[:5], metrics="test_ownership_stops", store=st, name="old-done").run["run_id"]
    left = st.start_run(name="old-left", source="t", fingerprint=None, config={}, config_hash="h",
                        metrics=["m"], judge=None)
    st.close()
    con = sqlite3.connect(path)   # as assay with schema version 4 wrote it, an hour ago
    con.executescript(f"""
        INSERT INTO run_columns (run_id, name, data) SELECT run_id, name, data FROM run_column_parts;
        DROP TABLE run_sessions; DROP TABLE run_column_parts;
        ALTER TABLE runs DROP COLUMN owner; ALTER TABLE runs DROP COLUMN owner_pid;
        ALTER TABLE runs DROP COLUMN owner_host; ALTER TABLE runs DROP COLUMN heartbeat_at;
        UPDATE runs SET usage = '{{"calls": 7, "prompt_tokens": 700, "cost_usd": null}}' WHERE id = '{done}';
        UPDATE runs SET updated_at = updated_at - 3600 WHERE id = '{left}';
        UPDATE assay_meta SET value = '4' WHERE key = 'schema_version';""" + BEFORE_V6)
    con.close()
    st = Store(str(path))
    assert st.schema_version() == S.SCHEMA_VERSION
    assert [s["usage"] for s in st.sessions(done)] == [{"calls": 7, "prompt_tokens": 700, "cost_usd": None}]
    cols = st.columns(done)                        # columns kept whole by version 4 still read
    assert len(cols["row_id"]) == 5 and len(cols["score:test_ownership_stops"]) == 5
    assert st.get_run(left)["status"] == "stale"
    st.reopen_run(left)
    assert st.get_run(left)["status"] == "running"
    assert [s["status"] for s in st.sessions(left)] == ["stale", None]
    st.close()
