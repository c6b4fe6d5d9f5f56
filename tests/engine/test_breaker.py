"""A hung or unreachable judge (or endpoint target) cannot stall a run: the circuit breaker
stops it after requests in a row timed out or could not connect, keeps the whole chunks already
scored, leaves the run ``interrupted`` with the reason, and it resumes; the CLI says so in one
line and exits 3, as it does when a metric errored on every row."""

from __future__ import annotations

import json
import math
import os
import socket

import pytest

import assay
from assay.engine import run as engine_run
from assay.engine.aggregate import all_errored
from assay.engine.evaluate import call_limits
from assay.engine.target import EndpointApp
from assay.errors import AssayError, RunIncomplete
from assay.models import LimitedModel, Limiter, OpenAICompat, RetryPolicy
from assay.store import Store
from tests.helpers.cli import run_assay

HANG = {"delay": 30.0, "content": "late"}
ROWS = [{"query": f"question {i}", "response": f"answer {i}"} for i in range(40)]


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    """Every judgment is a request to the fake endpoint (none answered from a cache)."""
    monkeypatch.setenv("ASSAY_CACHE", "off")
    for k in ("ASSAY_JUDGE", "ASSAY_JUDGE_TIMEOUT", "ASSAY_JUDGE_MAX_ATTEMPTS"):
        monkeypatch.delenv(k, raising=False)


def refused_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1#m"


def test_a_judge_that_hangs_midway_stops_the_run_which_resumes(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_run, "CHUNK", 4)
    fake.default = lambda req: {"content": '{"score": 4, "reason": "ok"}'} if len(fake.chat_requests) <= 12 else HANG
    st = Store(str(tmp_path / "s.db"))
    judge = f"{fake.base_url}#m"
    with pytest.raises(RunIncomplete) as ei:
        assay.evaluate(ROWS, metrics="coherence", judge=judge, timeout=0.3, concurrency=8, store=st, name="hung")
    exc = ei.value
    assert exc.exit_code == 3
    msg = str(exc)
    assert f"5 requests in a row to the judge {fake.base_url}#m timed out" in msg
    assert "no answer within 0.3 s" in msg and "--resume" in msg
    run = st.get_run("hung")
    assert run["status"] == "interrupted" and "timed out or could not connect" in run["error"]
    done = run["rows_done"]
    assert done in (8, 12) and exc.rows_done == done and exc.run_id == run["id"]   # whole chunks of 4
    assert st.count_rows(run["id"]) == done

    fake.requests.clear()
    fake.default = {"content": '{"score": 4, "reason": "ok"}'}
    res = assay.evaluate(ROWS, metrics="coherence", judge=judge, timeout=0.3, concurrency=8, store=st, name="hung",
                         resume=True)
    assert res.run["run_id"] == run["id"] and res.run["resumed_rows"] == done
    assert len(fake.chat_requests) == len(ROWS) - done        # the stored rows are not judged again
    agg = res.metrics["coherence"]
    assert (agg["evaluated"], agg["errored"]) == (len(ROWS), 0)   # no row was stored as a timeout error
    assert st.get_run(run["id"])["status"] == "completed"


def test_refused_connections_stop_the_run(tmp_path):
    st = Store(str(tmp_path / "s.db"))
    with pytest.raises(RunIncomplete, match="could not connect") as ei:
        assay.evaluate(ROWS, metrics="coherence", judge=refused_url(), store=st, name="down")
    assert "connection failed" in str(ei.value)
    run = st.get_run("down")
    assert run["status"] == "interrupted" and run["rows_done"] == 0


def test_the_breaker_can_be_turned_off_and_then_every_row_errors(tmp_path):
    res = assay.evaluate(ROWS[:6], metrics="coherence", judge=refused_url(), max_attempts=1,
                         max_consecutive_failures=0, store=False)
    agg = res.metrics["coherence"]
    assert (agg["evaluated"], agg["errored"]) == (0, 6)
    assert all_errored(res.metrics) == ["coherence"]


def test_an_endpoint_target_that_hangs_trips_the_breaker_too(fake):
    fake.default = HANG
    rows = [{"query": f"q{i}", "ground_truth": f"a{i}"} for i in range(10)]
    app = EndpointApp(f"{fake.base_url}#m", timeout=0.3)
    with pytest.raises(RunIncomplete, match=r"in a row to the target .*#m timed out"):
        assay.evaluate(rows, target=app, metrics="f1_score", store=False)
    assert app.limiter.max_consecutive_failures is None    # armed for the run only


def test_a_given_limited_model_is_armed_for_the_run_only(fake):
    fake.default = HANG
    lm = LimitedModel(OpenAICompat.endpoint(fake.base_url, "m"),
                      Limiter(8, timeout=0.3, retry=RetryPolicy(base_delay=0.01, max_delay=0.05)))
    with pytest.raises(RunIncomplete, match="3 requests in a row"):
        assay.evaluate(ROWS, metrics="coherence", judge=lm, max_consecutive_failures=3, store=False)
    assert lm.limiter.max_consecutive_failures is None and lm.limiter.tripped is None
    with pytest.raises(AssayError, match="LimitedModel"):   # its limiter is its own
        assay.evaluate(ROWS, metrics="coherence", judge=lm, timeout=5, store=False)


@pytest.mark.parametrize("kw,what", [
    ({"timeout": math.nan}, "timeout"), ({"timeout": math.inf}, "timeout"), ({"timeout": 0}, "timeout"),
    ({"timeout": -1.0}, "timeout"), ({"timeout": "soon"}, "timeout"), ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": 1.5}, "max_attempts"), ({"max_attempts": True}, "max_attempts"),
    ({"max_consecutive_failures": -1}, "max_consecutive_failures"),
])
def test_bad_limits_are_refused_before_anything_runs(kw, what, fake):
    with pytest.raises(AssayError, match=f"^{what} must be"):
        assay.evaluate(ROWS, metrics="coherence", judge=f"{fake.base_url}#m", store=False, **kw)
    assert fake.chat_requests == []


def test_limits_from_the_environment(monkeypatch, fake):
    monkeypatch.setenv("ASSAY_JUDGE_TIMEOUT", "0.3")
    monkeypatch.setenv("ASSAY_JUDGE_MAX_ATTEMPTS", "3")
    assert call_limits() == (0.3, 3, 5)
    assert call_limits(2.5, 4, 0) == (2.5, 4, 0)          # given values win
    fake.default = HANG
    with pytest.raises(RunIncomplete, match=r"no answer within 0\.3 s"):
        assay.evaluate(ROWS, metrics="coherence", judge=f"{fake.base_url}#m", store=False)
    monkeypatch.setenv("ASSAY_JUDGE_TIMEOUT", "nan")
    with pytest.raises(AssayError, match=r"^\$ASSAY_JUDGE_TIMEOUT must be a number of seconds above 0, got 'nan'"):
        call_limits()


# -- the command line, as a user runs it ---------------------------------------------------------

def cli(*args, env):
    p = run_assay(args, env=env)
    assert "Traceback" not in p.stderr, p.stderr
    return p


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "ASSAY_STORE": str(tmp_path / "s.db"), "ASSAY_CACHE": "off"}


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "rag.jsonl"
    path.write_text("".join(json.dumps({**r, "ground_truth": r["response"]}) + "\n" for r in ROWS[:20]))
    return str(path)


def test_cli_hung_judge_exits_3_with_one_line_then_resumes(fake, data, env, tmp_path):
    fake.default = HANG
    args = ["eval", data, "--metrics", "coherence", "--judge", f"{fake.base_url}#m", "--timeout", "0.5", "-q",
            "--name", "hung"]
    p = cli(*args, env=env)
    assert p.returncode == 3, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: stopped after 5 requests in a row to the judge")
    assert "no answer within 0.5 s" in lines[0] and "--resume" in lines[0]
    run = Store(env["ASSAY_STORE"]).get_run("hung")
    assert run["status"] == "interrupted" and "timed out" in run["error"]

    fake.default = {"content": '{"score": 5, "reason": "ok"}'}
    p = cli(*args, "--resume", env=env)
    assert p.returncode == 0, p.stderr
    assert "resumed with 0 rows already scored" in p.stdout
    assert Store(env["ASSAY_STORE"]).get_run("hung")["status"] == "completed"


def test_cli_unreachable_judge_exits_3(data, env):
    p = cli("eval", data, "--metrics", "coherence", "--judge", refused_url(), "-q", env=env)
    assert p.returncode == 3, p.stderr
    assert "could not connect" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_cli_metric_that_errored_on_every_row_exits_3_after_the_table(fake, data, env):
    fake.default = {"status": 404, "json": {"error": {"message": "this model does not exist"}}}
    p = cli("eval", data, "--metrics", "coherence,f1_score", "--judge", f"{fake.base_url}#m", "-q", env=env)
    assert p.returncode == 3, p.stderr
    assert "assay results" in p.stdout and "coherence" in p.stdout          # the table came first
    assert "f1_score" in p.stdout and "20 read, 20 evaluated" in p.stdout
    assert "this model does not exist" in p.stdout                           # and the reason
    lines = p.stderr.strip().splitlines()
    assert lines == ["error: metric coherence errored on every row it applied to (20 rows), so there is no "
                     "score to report; the errors are listed above"], p.stderr


def test_cli_some_errored_rows_are_not_exit_3(fake, data, env):
    fake.push({"status": 404, "json": {"error": {"message": "one bad row"}}})
    p = cli("eval", data, "--metrics", "coherence", "--judge", f"{fake.base_url}#m", "-q", env=env)
    assert p.returncode == 0, p.stderr
    assert "1 error(s)" in p.stdout


def test_cli_max_attempts_bounds_the_tries_on_server_errors(fake, data, env):
    fake.default = {"status": 503, "json": {"error": {"message": "overloaded"}}}
    p = cli("eval", data, "--metrics", "coherence", "--judge", f"{fake.base_url}#m", "-q", "--max-attempts", "2",
            "--concurrency", "20", env=env)
    assert p.returncode == 3, p.stderr                  # every row errored
    assert len(fake.chat_requests) == 2 * 20


@pytest.mark.parametrize("opt,value,what", [("--timeout", "nan", "timeout"), ("--timeout", "-1e309", "timeout"),
                                            ("--max-attempts", "0", "max_attempts"),
                                            ("--max-consecutive-failures", "-2", "max_consecutive_failures")])
def test_cli_bad_limits_exit_2_with_one_line(opt, value, what, data, env):
    p = cli("eval", data, "--metrics", "coherence", "--judge", refused_url(), opt, value, env=env)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and p.stderr.startswith(f"error: {what} must be")
