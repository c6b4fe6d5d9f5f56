"""Resume: a run interrupted (Ctrl-C, a crash, kill -9) continues where it stopped, pays for
no completed judgment twice, and ends with the same result as an uninterrupted run."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import assay
from assay.engine import run as engine_run
from assay.errors import AssayError
from assay.store import Store
from tests.helpers.fake_openai_server import FakeOpenAI  # tests/models, on the path from tests/conftest.py

ROWS = [{"query": f"question {i}", "response": f"answer {i} with {i % 7} words", "ground_truth": f"answer {i % 5}"}
        for i in range(100)]
_BOOM = {"at": None}


@assay.metric(name="test_resume_explodes", kind="custom")
def _explodes(response: str) -> float:
    if _BOOM["at"] is not None and response.startswith(f"answer {_BOOM['at']} "):
        _BOOM["at"] = None
        raise KeyboardInterrupt
    return float(len(response))


def _comparable(res):
    return [{k: v for k, v in row.items() if k.startswith(("inputs.", "outputs."))} for row in res.rows]


def test_ctrl_c_then_resume_gives_the_uninterrupted_result(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_run, "CHUNK", 8)
    st = Store(str(tmp_path / "s.db"))
    metrics = "f1_score,test_resume_explodes"
    full = assay.evaluate(ROWS, metrics=metrics, store=st, name="full", workers=1)

    _BOOM["at"] = 43
    with pytest.raises(KeyboardInterrupt):
        assay.evaluate(ROWS, metrics=metrics, store=st, name="cut", workers=1)
    cut = st.get_run("cut")
    done = cut["rows_done"]
    assert cut["status"] == "interrupted" and 0 < done <= 40 and done % 8 == 0   # whole chunks of 8

    resumed = assay.evaluate(ROWS, metrics=metrics, store=st, name="cut", resume=True, workers=1)
    assert resumed.run["run_id"] == cut["id"] and resumed.run["resumed_rows"] == done
    assert st.get_run(cut["id"])["status"] == "completed"
    assert _comparable(resumed) == _comparable(full)
    assert resumed.metrics == full.metrics
    assert st.count_rows(cut["id"]) == 100


def test_resume_refuses_other_data_or_options(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_run, "CHUNK", 8)
    st = Store(str(tmp_path / "s.db"))
    _BOOM["at"] = 20
    with pytest.raises(KeyboardInterrupt):
        assay.evaluate(ROWS, metrics="test_resume_explodes", store=st, name="r", workers=1)
    rid = st.get_run("r")["id"]
    with pytest.raises(AssayError, match="different data"):
        assay.evaluate(ROWS[:50], metrics="test_resume_explodes", store=st, resume=rid)
    with pytest.raises(AssayError, match="different configuration"):
        assay.evaluate(ROWS, metrics="test_resume_explodes,f1_score", store=st, resume=rid)
    # --resume with no matching unfinished run starts a new one
    fresh = assay.evaluate(ROWS[:50], metrics="test_resume_explodes", store=st, resume=True)
    assert fresh.run["run_id"] != rid and fresh.run["resumed_rows"] == 0
    done = assay.evaluate(ROWS, metrics="test_resume_explodes", store=st, resume=rid)
    with pytest.raises(AssayError, match="already complete"):
        assay.evaluate(ROWS, metrics="test_resume_explodes", store=st, resume=done.run["run_id"])


def _deterministic_judge(req):
    """Each prompt always gets the same score (1..5), whatever order the calls come in."""
    prompt = json.dumps(req["body"]["messages"], sort_keys=True)
    k = 1 + int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 5
    return {"content": json.dumps({"score": k, "reason": f"scored {k}"}), "delay": 0.02}


def _cli(args, env, **kw):
    return subprocess.Popen([sys.executable, "-m", "assay.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _rows(path):
    """Rows as written, less what differs between any two runs (call latency, cache hits)."""
    rows = [json.loads(line) for line in open(path)]
    for r in rows:
        for k, v in r.items():
            if k.endswith("_properties") and v:
                v.pop("latency_s", None)
                v.pop("cached", None)
    return rows


def test_kill_9_in_the_middle_then_resume(tmp_path):
    server = FakeOpenAI().start()
    server.default = _deterministic_judge
    started: list[subprocess.Popen] = []
    try:
        data = tmp_path / "rag.jsonl"
        with open(data, "w") as fh:
            for i in range(1300):
                fh.write(json.dumps({"query": f"what is item {i}?", "response": f"item {i} is a thing of kind {i % 11}"}) + "\n")
        judge = f"{server.base_url}#fake-judge"
        args = ["eval", str(data), "--metrics", "coherence", "--judge", judge, "-q", "--concurrency", "8"]
        base_env = {**os.environ, "OPENAI_API_KEY": "unused"}

        # the reference: one uninterrupted run, with its own store and cache
        ref_env = {**base_env, "ASSAY_STORE": str(tmp_path / "ref.db"), "ASSAY_CACHE": str(tmp_path / "ref-cache.sqlite")}
        p = _cli([*args, "--out", str(tmp_path / "ref")], ref_env)
        assert p.wait(300) == 0, p.stderr.read()
        reference_calls = len(server.chat_requests)
        assert reference_calls == 1300
        server.requests.clear()

        env = {**base_env, "ASSAY_STORE": str(tmp_path / "run.db"), "ASSAY_CACHE": str(tmp_path / "cache.sqlite")}
        p = _cli([*args, "--out", str(tmp_path / "cut"), "--name", "cut"], env)
        started.append(p)
        st = None
        deadline = time.time() + 240
        while time.time() < deadline:
            if (tmp_path / "run.db").exists():
                st = st or Store(str(tmp_path / "run.db"))
                runs = st.list_runs(name="cut")
                if runs and runs[0]["rows_done"] >= 512:
                    break
            assert p.poll() is None, "the run finished before it could be killed"
            time.sleep(0.02)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
        killed = st.get_run("cut")
        assert killed["status"] == "stale" and 512 <= killed["rows_done"] < 1300
        calls_before = len(server.chat_requests)

        p = _cli([*args, "--out", str(tmp_path / "cut"), "--name", "cut", "--resume"], env)
        out, errs = p.communicate(timeout=300)
        assert p.returncode == 0, errs
        assert f"resumed with {killed['rows_done']} rows already scored" in out
        assert st.get_run("cut")["status"] == "completed"

        bodies = [json.dumps(r["body"], sort_keys=True) for r in server.chat_requests]
        assert len(set(bodies)) == 1300                  # every judgment made ...
        assert len(bodies) - 1300 <= 8                   # ... and only those in flight at the kill twice
        assert len(bodies) - calls_before < 1300 - killed["rows_done"] + 8 + 1

        ref_rows = _rows(tmp_path / "ref" / "rows.jsonl")
        cut_rows = _rows(tmp_path / "cut" / "rows.jsonl")
        assert len(cut_rows) == 1300 and cut_rows == ref_rows
        ref_summary = json.loads((tmp_path / "ref" / "summary.json").read_text())["metrics"]
        cut_summary = json.loads((tmp_path / "cut" / "summary.json").read_text())["metrics"]
        assert cut_summary == ref_summary
    finally:
        for proc in started:       # never leave a run behind when an assertion fails
            if proc.poll() is None:
                proc.kill()
        server.stop()

