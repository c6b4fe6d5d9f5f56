"""Perf runs in the store: kept with their samples, found by ref, prefix, name or 'latest',
deleted with their samples, and a version-3 store migrated to the current version with its data kept;
on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from sqlalchemy import func, inspect, select, text

import assay
from assay.bench.kinds import store_benchmark
from assay.errors import AssayError
from assay.store import Store
from assay.store import schema as S
from tests.helpers.perfdata import make_run, perf_postgres_url  # noqa: F401  (a fixture)


def _wipe(st: Store) -> None:
    S.metadata.drop_all(st.engine)
    with st.engine.begin() as conn:   # the full-text index is made outside the metadata (store v6)
        conn.exec_driver_sql("DROP TABLE IF EXISTS row_text")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "perf.db")
        return
    u = request.getfixturevalue("perf_postgres_url")
    yield u
    st = Store(u)      # the server is shared by the session: leave it empty
    _wipe(st)
    st.close()


@pytest.fixture
def store(url):
    st = Store(url)
    yield st
    st.close()


def test_a_perf_run_round_trips_with_its_samples(store):
    summary, samples = make_run(name="base", levels=(1, 4, 16), n=50, track="nightly")
    ref = store_benchmark(store, "perf", summary, samples)
    assert ref == summary["id"]
    rec = store.get_benchmark(ref)
    assert rec["kind"] == "perf" and rec["name"] == "base" and rec["model"] == "qwen2.5-7b"
    assert rec["task"] == "concurrency" and rec["track"] == "nightly" and rec["ref"] == ref
    assert rec["created_at"] == pytest.approx(summary["created_at"])
    assert rec["details"] == summary                      # the summary as given, every field
    assert [m["concurrency"] for m in rec["metrics"]] == [1, 4, 16]
    assert rec["metrics"][0]["ttft_p50"] == summary["points"][0]["metrics"]["ttft"]["p50"]
    assert rec["metrics"][0]["valid"] is True and rec["metrics"][0]["failed"] == 2
    back = store.benchmark_samples(rec["id"])
    assert sorted(back) == [0, 1, 2]
    for i, per in samples.items():
        assert sorted(back[i]) == sorted(per)
        for name, v in per.items():
            assert back[i][name].dtype == np.float64
            np.testing.assert_array_equal(back[i][name], v)   # bit for bit
    listed = store.list_benchmarks(kind="perf", details=False)
    assert [b["ref"] for b in listed] == [ref] and "details" not in listed[0]


def test_a_run_is_found_by_ref_prefix_name_latest_and_id(store):
    s1, x1 = make_run(name="nightly-a", n=10, created_at=1_700_000_000.0)
    s2, x2 = make_run(name="nightly-a", n=10, created_at=1_700_000_100.0)
    s3, x3 = make_run(name=None, n=10, created_at=1_700_000_050.0)
    s1["id"], s2["id"], s3["id"] = "3f9a00000001", "3f9b00000002", "77aa00000003"
    r1, r2, r3 = (store_benchmark(store, "perf", s, x) for s, x in ((s1, x1), (s2, x2), (s3, x3)))
    assert store.get_benchmark("3f9a")["ref"] == r1
    assert store.get_benchmark("3F9B00000002")["ref"] == r2          # refs are hex: any case
    assert store.get_benchmark("nightly-a")["ref"] == r2             # a name: its latest run
    assert store.get_benchmark(r3)["name"] == r3                     # no name: named by its id
    assert store.get_benchmark("latest")["ref"] == r2 and store.get_benchmark("last")["ref"] == r2
    assert store.get_benchmark(str(store.get_benchmark(r1)["id"]))["ref"] == r1   # the row id
    with pytest.raises(AssayError, match=r"'3f9' is ambiguous"):
        store.get_benchmark("3f9")
    with pytest.raises(AssayError, match=r"no benchmark 'zz'.*assay bench list"):
        store.get_benchmark("zz")
    with pytest.raises(AssayError, match="no perf benchmark '%'"):   # LIKE wildcards are literal
        store.get_benchmark("%", kind="perf")
    with pytest.raises(AssayError, match="already in the store"):
        store_benchmark(store, "perf", s1, x1)


def test_bad_input_and_an_empty_store_are_clear_errors(store):
    with pytest.raises(AssayError, match="has no perf benchmark yet"):
        store.get_benchmark("latest", kind="perf")
    with pytest.raises(AssayError, match="not a perf result"):
        store_benchmark(store, "perf", {"schema": "something/1", "points": []})
    summary, samples = make_run(n=5, levels=(1,))
    with pytest.raises(AssayError, match="samples for point 3"):
        store_benchmark(store, "perf", summary, {3: samples[0]})
    # a summary without a usable id gets a fresh ref; samples are optional
    summary["id"] = "not hex!"
    ref = store_benchmark(store, "perf", summary)
    assert len(ref) == 12 and store.benchmark_samples(store.get_benchmark(ref)["id"]) == {}


def test_deleting_a_benchmark_deletes_its_samples(store):
    summary, samples = make_run(n=20)
    bid = store.get_benchmark(store_benchmark(store, "perf", summary, samples))["id"]
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(S.benchmark_samples)).scalar_one() == 12
    store.delete_benchmark(bid)
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(S.benchmark_samples)).scalar_one() == 0
        assert conn.execute(select(func.count()).select_from(S.benchmarks)).scalar_one() == 0


def test_samples_go_when_their_benchmark_row_is_deleted_directly(store):
    """The foreign key cascades in the database itself (SQLite runs with foreign_keys=ON)."""
    summary, samples = make_run(n=20)
    bid = store.get_benchmark(store_benchmark(store, "perf", summary, samples))["id"]
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM benchmarks WHERE id = :i"), {"i": bid})
    assert store.benchmark_samples(bid) == {}


def _make_version_3(url: str) -> tuple[str, int]:
    """A store as assay wrote it at schema version 3: an evaluation run, and a benchmark row
    with no ref, no track and no samples table."""
    st = Store(url)
    rid = assay.evaluate([{"response": "a b c", "ground_truth": "a b d"}] * 3, metrics="f1_score",
                         name="old-eval", store=st).run["run_id"]
    bid = st.add_benchmark(kind="cost", name="old-cost", model="gpt-4o-mini", metrics={"usd": 0.25})
    st.close()
    stmts = ["DROP TABLE benchmark_samples", "DROP INDEX ix_benchmarks_ref", "DROP INDEX ix_benchmarks_track",
             "ALTER TABLE benchmarks DROP COLUMN ref", "ALTER TABLE benchmarks DROP COLUMN track",
             "UPDATE assay_meta SET value = '3' WHERE key = 'schema_version'"]
    if "://" not in url:
        con = sqlite3.connect(url)
        for sql in stmts:
            con.execute(sql)
        con.commit()
        con.close()
    else:
        st = Store(url)
        with st.engine.begin() as conn:
            for sql in stmts:
                conn.exec_driver_sql(sql)
        st.close()
    return rid, bid


def test_a_version_3_store_migrates_to_the_current_version_and_keeps_its_data(url):
    rid, bid = _make_version_3(url)
    st = Store(url)
    try:
        assert st.schema_version() == S.SCHEMA_VERSION >= 4
        insp = inspect(st.engine)
        assert "benchmark_samples" in insp.get_table_names()
        assert {"ref", "track"} <= {c["name"] for c in insp.get_columns("benchmarks")}
        assert {"ix_benchmarks_ref", "ix_benchmarks_track"} <= {ix["name"] for ix in insp.get_indexes("benchmarks")}
        # the evaluation run and the old benchmark are still there; the benchmark got a ref
        assert st.get_run("old-eval")["id"] == rid and st.count_rows(rid) == 3
        old = st.get_benchmark("old-cost")
        assert old["id"] == bid and old["metrics"] == {"usd": 0.25} and len(old["ref"]) == 12
        assert st.get_benchmark(old["ref"][:6])["id"] == bid and old["track"] is None
        # and the migrated store takes perf runs with samples
        summary, samples = make_run(n=15, track="hourly")
        ref = store_benchmark(st, "perf", summary, samples)
        got = st.get_benchmark(ref)
        np.testing.assert_array_equal(st.benchmark_samples(got["id"])[1]["ttft"], samples[1]["ttft"])
        assert [b["ref"] for b in st.list_benchmarks(track="hourly")] == [ref]
    finally:
        st.close()
    st = Store(url)          # opening it again changes nothing
    try:
        assert st.schema_version() == S.SCHEMA_VERSION and st.get_benchmark("old-cost")["id"] == bid
    finally:
        st.close()


def test_refs_are_unique_in_the_database(store):
    store.add_benchmark(kind="cost", name="x", ref="aaaa00000001")
    with pytest.raises(AssayError, match="already in the store"):
        store.add_benchmark(kind="cost", name="y", ref="aaaa00000001")
    with store.engine.connect() as conn:   # nothing half-written
        assert conn.execute(select(func.count()).select_from(S.benchmarks)).scalar_one() == 1


def test_a_benchmark_of_an_unknown_run_is_a_clear_error(store):
    with pytest.raises(AssayError, match="cannot save the benchmark"):
        store.add_benchmark(kind="quality", name="q", run_id="no-such-run")
