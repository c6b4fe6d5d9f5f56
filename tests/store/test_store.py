"""The store on SQLite: runs are saved as they go, read back exactly, resumed, deleted."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

import assay
from assay.errors import AssayError
from assay.metrics.base import Score
from assay.store import Store, StoredRow, open_store
from assay.store import schema as S
from tests.helpers.old_stores import BEFORE_V6

ROWS = [{"query": f"q{i}", "response": f"the answer is {i} apples", "ground_truth": f"the answer is {i % 3} apples"}
        for i in range(40)]


def test_a_run_is_saved_with_its_rows_scores_and_aggregates(store):
    res = assay.evaluate(ROWS, metrics="f1_score,bleu", name="base", store=store)
    run = store.get_run("base")
    assert run["id"] == res.run["run_id"] and run["status"] == "completed"
    assert run["rows_done"] == 40 and store.count_rows(run["id"]) == 40
    assert run["metrics"] == ["f1_score", "bleu"]
    assert run["aggregates"]["f1_score"]["mean"] == pytest.approx(res.metrics["f1_score"]["mean"])
    assert run["summary"]["rows_evaluated"] == 40
    assert run["data_fingerprint"] and run["config_hash"]
    stored = list(store.iter_scored(run["id"]))
    assert [r.idx for r in stored] == list(range(40))
    for row, s in zip(res.rows, stored):
        assert s.inputs["inputs.query"] == row["inputs.query"]
        f1 = s.scores["f1_score"]["f1_score"]
        assert f1.score == pytest.approx(row["outputs.f1_score.f1_score"])
        assert f1.result == row["outputs.f1_score.f1_score_result"]
        assert f1.threshold == row["outputs.f1_score.f1_score_threshold"]


def test_runs_are_found_by_id_prefix_name_and_last(store):
    a = assay.evaluate(ROWS[:3], metrics="f1_score", name="x", store=store).run["run_id"]
    b = assay.evaluate(ROWS[:5], metrics="f1_score", name="x", store=store).run["run_id"]
    assert store.get_run("x")["id"] == b          # a name means its latest run
    assert store.get_run(a[:6])["id"] == a
    assert store.get_run("last")["id"] == b
    assert [r["id"] for r in store.list_runs(name="x")] == [b, a]
    with pytest.raises(AssayError, match="no run 'nope'"):
        store.get_run("nope")


def test_delete_removes_rows_and_scores(store):
    from sqlalchemy import func, select

    rid = assay.evaluate(ROWS[:4], metrics="f1_score", store=store).run["run_id"]
    keep = assay.evaluate(ROWS[:3], metrics="f1_score", store=store).run["run_id"]
    store.delete_run(rid)
    with store.engine.connect() as con:
        for table in (S.rows, S.scores):
            n = con.execute(select(func.count()).select_from(table).where(table.c.run_id == rid)).scalar_one()
            assert n == 0
        assert con.execute(select(func.count()).select_from(S.runs).where(S.runs.c.id == rid)).scalar_one() == 0
    assert store.count_rows(keep) == 3


def test_store_off_saves_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_STORE", "off")
    assert open_store() is None
    res = assay.evaluate(ROWS[:2], metrics="f1_score")
    assert res.run["run_id"] is None
    with pytest.raises(AssayError, match="resume needs the store"):
        assay.evaluate(ROWS[:2], metrics="f1_score", resume=True)


def test_store_option_off_saves_nothing_and_makes_no_file(tmp_path):
    """``--store off`` turns saving off as ``$ASSAY_STORE=off`` does (it once made a database named off)."""
    import subprocess
    import sys

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2]), encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "assay.cli", "eval", str(data), "-m", "f1_score", "-q", "--store", "off"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "saved in" not in p.stdout and not (tmp_path / "off").exists()
    assert open_store("OFF") is None


def test_default_location_is_dot_assay_in_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("ASSAY_STORE")
    monkeypatch.chdir(tmp_path)
    res = assay.evaluate(ROWS[:2], metrics="f1_score")
    assert (tmp_path / ".assay" / "assay.db").exists()
    assert res.run["store"].endswith(".assay/assay.db")


def test_a_store_from_a_newer_assay_is_refused(tmp_path):
    path = tmp_path / "new.db"
    Store(str(path)).close()
    con = sqlite3.connect(path)
    con.execute("update assay_meta set value = ? where key = 'schema_version'", (str(S.SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with pytest.raises(AssayError, match="newer assay"):
        Store(str(path))


def test_migrations_run_in_order_and_record_the_version(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    Store(str(path)).close()
    seen = []
    monkeypatch.setattr(S, "SCHEMA_VERSION", S.SCHEMA_VERSION + 1)
    monkeypatch.setitem(S.MIGRATIONS, S.SCHEMA_VERSION, lambda conn: seen.append("upgraded"))
    st = Store(str(path))
    assert seen == ["upgraded"] and st.schema_version() == S.SCHEMA_VERSION


def test_scores_round_trip_every_key_including_nan_and_labels(store):
    rid = store.start_run(name=None, source="t", fingerprint=None, config={}, config_hash="h",
                          metrics=["m"], judge=None)
    scores = {"m": {"a": Score(value="yes", score=1.0, passed=True, result="pass", reason="r <b>",
                               threshold=0.5, properties={"k": [1, 2]}),
                    "b": Score(value=float("nan"), score=float("nan"), status="completed"),
                    "c": Score.error("boom", raw="x")}}
    store.write_rows(rid, [StoredRow(0, "id0", "conv", False, {"inputs.query": "q"}, scores)])
    (back,) = list(store.iter_scored(rid))
    assert back.row_id == "id0" and back.conversation_id == "conv"
    a = back.scores["m"]["a"]
    assert (a.value, a.score, a.passed, a.result, a.reason, a.threshold, a.properties) == \
        ("yes", 1.0, True, "pass", "r <b>", 0.5, {"k": [1, 2]})
    assert math.isnan(back.scores["m"]["b"].score) and math.isnan(back.scores["m"]["b"].value)
    c = back.scores["m"]["c"]
    assert c.status == "error" and c.properties == {"raw": "x"}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_three_processes_write_one_store_at_once(tmp_path, request, backend):
    import multiprocessing as mp

    path = str(tmp_path / "shared.db") if backend == "sqlite" else request.getfixturevalue("postgres_url")
    Store(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_many, args=(path, k)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    st = Store(path)
    runs = [r for r in st.list_runs() if (r["name"] or "").startswith(f"proc-{backend}-")]
    assert len(runs) == 3 and all(r["rows_done"] == 300 for r in runs)
    assert sum(st.count_rows(r["id"]) for r in runs) == 900


def _write_many(path: str, k: int) -> None:
    st = Store(path)
    backend = "sqlite" if "://" not in path else "postgres"
    rid = st.start_run(name=f"proc-{backend}-{k}", source="t", fingerprint=None, config={}, config_hash="h",
                       metrics=["m"], judge=None)
    for start in range(0, 300, 10):
        st.write_rows(rid, [StoredRow(i, None, None, False, {"i": i}, {"m": {"m": Score(value=i, score=i)}})
                            for i in range(start, start + 10)])
    st.finish_run(rid, "completed")


def test_compare_paired_deltas_and_worse_rows(store):
    base_rows = [{"id": str(i), "response": "cat dog fish bird", "ground_truth": "cat dog fish bird"} for i in range(30)]
    new_rows = [{"id": str(i), "response": "cat dog fish bird" if i % 3 else "cat x y z", "ground_truth": "cat dog fish bird"}
                for i in range(30)]
    a = assay.evaluate(base_rows, metrics="f1_score", store=store, name="cmp-base").run["run_id"]
    b = assay.evaluate(new_rows, metrics="f1_score", store=store, name="cmp-new").run["run_id"]
    from assay.store.compare import compare_runs, worse_rows

    cmp = compare_runs(store, [a, b])
    (m,) = cmp["metrics"]
    d = m["deltas"][1]
    # 10 of 30 rows drop from 1.0 to F1 = 0.25 (one of four words shared)
    assert d["paired"] and d["matched"] == 30
    assert d["delta"] == pytest.approx(-0.75 * 10 / 30)
    assert d["ci95_high"] < 0 and d["significant"] and d["better"] is False
    worse = worse_rows(store, a, b, "f1_score", limit=50)
    assert sorted(int(w["key"]) for w in worse) == list(range(0, 30, 3))
    assert all(w["base"]["score"] == 1.0 and w["other"]["score"] == pytest.approx(0.25) for w in worse)
    assert worse[0]["inputs"]["inputs.response"] == "cat x y z"


def test_load_result_exports_the_same_rows(store, tmp_path):
    res = assay.evaluate(ROWS, metrics="f1_score,rouge", store=store)
    back = store.load_result(res.run["run_id"])
    assert back.rows == res.rows
    assert back.metrics == res.metrics
    back.to_parquet(tmp_path / "x.parquet")
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "x.parquet")) == len(ROWS)


def test_api_keys_never_reach_the_store(tmp_path, monkeypatch, fake):
    secret = "sk-test-DO-NOT-STORE-0123456789"
    monkeypatch.setenv("ASSAY_JUDGE_API_KEY", secret)
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache.sqlite"))
    path = tmp_path / "k.db"
    st = Store(str(path))
    res = assay.evaluate([{"query": "q", "response": "r"}], metrics="coherence",
                         judge=f"{fake.base_url}#fake-judge", store=st, name="keys")
    assert res.metrics["coherence"]["evaluated"] == 1
    assert fake.chat_requests[0]["headers"]["authorization"] == f"Bearer {secret}"  # it was used ...
    st.close()
    for f in tmp_path.glob("k.db*"):
        assert secret.encode() not in f.read_bytes()                                # ... and not kept


def test_a_version_1_store_is_migrated_and_keeps_its_runs(tmp_path):
    from sqlalchemy import inspect as sa_inspect

    path = tmp_path / "v1.db"
    st = Store(str(path), row_format=1)
    rid = assay.evaluate(ROWS[:5], metrics="f1_score", store=st, name="old").run["run_id"]
    st.close()
    con = sqlite3.connect(path)   # make it look as version 1 wrote it
    con.executescript("""
        DROP INDEX ix_scores_run_output_score_idx; DROP INDEX ix_scores_run_output_result_idx;
        CREATE INDEX ix_scores_run_output_score ON scores (run_id, output, score);
        CREATE INDEX ix_scores_run_output_result ON scores (run_id, output, result);
        DROP TABLE run_columns; DROP TABLE run_column_parts; DROP TABLE run_sessions;
        DROP TABLE spans; DROP TABLE traces;
        ALTER TABLE runs DROP COLUMN owner; ALTER TABLE runs DROP COLUMN owner_pid;
        ALTER TABLE runs DROP COLUMN owner_host; ALTER TABLE runs DROP COLUMN heartbeat_at;
        UPDATE assay_meta SET value = '1' WHERE key = 'schema_version';""" + BEFORE_V6)
    con.close()
    st = Store(str(path))
    assert st.schema_version() == S.SCHEMA_VERSION == 10
    assert {"spans", "traces"} <= set(sa_inspect(st.engine).get_table_names())    # version 7: the monitor's
    assert {ix["name"] for ix in sa_inspect(st.engine).get_indexes("traces")} >= {"ix_traces_start", "ix_traces_open"}
    assert {"monitor_scores", "monitor_alerts"} <= set(sa_inspect(st.engine).get_table_names())   # version 8
    assert {"review_queues", "review_labels"} <= set(sa_inspect(st.engine).get_table_names())     # version 10
    names = {ix["name"] for ix in sa_inspect(st.engine).get_indexes("scores")}
    assert {"ix_scores_run_output_score_idx", "ix_scores_run_output_result_idx"} <= names
    assert "ix_scores_run_output_score" not in names
    assert st.get_run("old")["id"] == rid and st.count_rows(rid) == 5
    assert "run_columns" in sa_inspect(st.engine).get_table_names() and st.columns(rid) == {}
    from assay.store.compare import compare_runs  # a run from before version 3 still compares
    again = assay.evaluate(ROWS[:5], metrics="f1_score", store=st, name="new").run["run_id"]
    assert compare_runs(st, [rid, again])["metrics"][0]["deltas"][1]["delta"] == 0


def test_a_failed_write_is_a_clear_error_and_the_run_resumes(tmp_path, monkeypatch):
    st = Store(str(tmp_path / "f.db"))
    real = st._insert_rows
    calls = {"n": 0}

    def failing_write(run_id, batch):
        calls["n"] += 1
        if calls["n"] == 2:
            st._insert_rows = "INSERT INTO no_such_table VALUES (?)"
        try:
            return Store.write_rows(st, run_id, batch)
        finally:
            st._insert_rows = real

    from assay import results
    from assay.engine import run as engine_run

    monkeypatch.setattr(engine_run, "CHUNK", 10)
    monkeypatch.setattr(results, "WRITE_ROWS", 1)     # a store write per chunk
    monkeypatch.setattr(st, "write_rows", failing_write)
    with pytest.raises(AssayError, match=r"cannot write run \w+ to the store .*--resume"):
        assay.evaluate(ROWS, metrics="f1_score", store=st, name="w", workers=1)
    run = st.get_run("w")
    # the first write saved a prefix of whole chunks (one or more: a writer that fell behind
    # writes the chunks waiting together); nothing after the failed one was written
    done = run["rows_done"]
    assert run["status"] == "failed" and done % 10 == 0 and 10 <= done < 40 and st.count_rows(run["id"]) == done
    monkeypatch.undo()
    again = assay.evaluate(ROWS, metrics="f1_score", store=st, name="w", resume=True, workers=1)
    assert again.run["resumed_rows"] == done and st.count_rows(run["id"]) == 40


def test_a_finished_runs_columns_are_written_a_batch_at_a_time(store, monkeypatch):
    """Flat memory with the store on: the column writer never reads more than one batch of rows
    at once, and keeps the columns in parts, whatever the size of the run (by design, not RSS)."""
    from sqlalchemy import func, select

    from assay.store import store as store_mod

    monkeypatch.setattr(store_mod, "COLUMN_BATCH", 7)
    monkeypatch.setattr(store_mod, "PART_ROWS", 10)
    fetched: list[int] = []
    real_raw = Store._raw

    def raw(self, conn, sql, params):
        got = real_raw(self, conn, sql, params)
        fetched.append(len(got))
        return got

    monkeypatch.setattr(Store, "_raw", raw)
    rows = [{"id": f"r{i}", **r} for i, r in enumerate(ROWS)]
    res = assay.evaluate(rows, metrics="f1_score,rougeL", name="cols", store=store, workers=1)
    rid = res.run["run_id"]
    assert fetched == []    # the columns were gathered as the rows were written: nothing is read back
    t = S.run_column_parts
    with store.engine.connect() as conn:
        parts = conn.execute(select(t.c.name, func.count()).where(t.c.run_id == rid).group_by(t.c.name)).all()
        biggest = conn.execute(select(func.max(func.length(t.c.data))).where(t.c.run_id == rid,
                                                                            t.c.name != "row_id")).scalar()
    outs = ("f1_score", "rougeL_precision", "rougeL_recall", "rougeL_f1_score")
    assert dict(parts) == {n: 4 for n in ("row_id", *(f"score:{o}" for o in outs), *(f"result:{o}" for o in outs))}
    assert biggest == 10 * 8
    cols = store.columns(rid)
    assert cols["row_id"] == [f"r{i}" for i in range(len(ROWS))]
    for m, o in (("f1_score", "f1_score"), ("rougeL", "rougeL_precision"), ("rougeL", "rougeL_recall"),
                 ("rougeL", "rougeL_f1_score")):
        assert cols[f"score:{o}"].tolist() == [row[f"outputs.{m}.{o}"] for row in res.rows]


def test_sqlite_connections_run_in_wal_mode_with_a_larger_checkpoint_interval(tmp_path):
    from assay.store.store import WAL_CHECKPOINT

    st = Store(str(tmp_path / "p.db"))
    try:
        with st.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1          # NORMAL
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == WAL_CHECKPOINT > 1000
    finally:
        st.close()


def test_columns_read_back_from_rows_keep_infinite_scores(store):
    """A score of +/-infinity is stored as a null score whose value names it (JSON has no
    infinity); the columns made again from the rows (a run still going, a resumed run) give
    the infinity back, as the columns gathered while the rows are written do."""
    rid = store.start_run(name="inf", source="t", fingerprint=None, config={}, config_hash="h",
                          metrics=["m"], judge=None)
    values = [math.inf, -math.inf, 0.5, math.nan]
    store.write_rows(rid, [StoredRow(i, f"r{i}", None, False, {"i": i}, {"m": {"m": Score(value=v, score=v)}})
                           for i, v in enumerate(values)])
    live = store.live_columns(rid, ["m"])["score:m"].tolist()
    assert live[:3] == [math.inf, -math.inf, 0.5] and math.isnan(live[3])
