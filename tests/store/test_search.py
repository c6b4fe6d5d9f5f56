"""The store's full-text search (store version 6) and the rows kept with their scores, on
SQLite (FTS5) and on a real PostgreSQL server (tsvector + GIN), against the scan they replace."""

from __future__ import annotations

import sqlite3
import uuid

import assay
from assay.metrics.base import Score, metric
from assay.store import Store
from assay.store import schema as S
from assay.store import search as T
from assay.store.queries import RowQuery, get_row, histograms, query_rows, worst_rows
from tests.helpers.old_stores import BEFORE_V6

WORDS = "apple river stone cloud paper garden signal copper window valley".split()


@metric("search_judge", threshold=3, scale="1-5")
def search_judge(query: str, response: str) -> Score:
    s = 1 + len(response) % 5
    if "broken" in response:
        return Score(value=None, score=None, passed=None, result="unknown", status="error",
                     reason="the judge answered nothing")
    return Score(value=s, reason=f"the answer names {response.split()[0]}; verdict {'good' if s >= 3 else 'weak'}")


def rows(n: int = 60) -> list[dict]:
    out = []
    for i in range(n):
        w = [WORDS[(i * k + k) % len(WORDS)] for k in range(1, 7)]
        out.append({"id": f"r{i}", "query": f"question {i}: how do {w[0]} and {w[1]} meet?",
                    "response": " ".join(w[1:5]), "ground_truth": " ".join(w[:4])})
    out[17]["response"] = "<p>the <b>zeppelin</b>&nbsp;landed</p>"         # a word inside markup
    out[23]["query"] = "tab\tseparated\x01quokka\x02 text\nline two"       # ... and control characters
    out[31]["response"] = "broken answer"
    out[40]["ground_truth"] = "the gyrfalcon flies"
    return out


def search(st: Store, ref: str, text: str, **kw) -> list[int]:
    run = st.get_run(ref)
    got = query_rows(st, run, RowQuery(search=text, per_page=500, **kw))
    assert got["total"] == len(got["rows"])
    return [r["idx"] for r in got["rows"]]


def indexed(st: Store, ref: str, text: str) -> list[int] | None:
    with st.engine.connect() as conn:
        return T.find(conn, st.get_run(ref), text)


METRICS = "f1_score,exact_match,search_judge"


def test_a_rare_word_is_found_by_the_index_and_only_in_its_run(store):
    name = f"s-{id(store)}"
    assay.evaluate(rows(), metrics=METRICS, store=store, name=name + "a")
    other = rows()
    other[5]["query"] = "question 5: where is the zeppelin?"
    other[17]["response"] = "no airship here"
    assay.evaluate(other, metrics=METRICS, store=store, name=name + "b")
    assert indexed(store, name + "a", "zeppelin") == [17]              # the index answers ...
    assert search(store, name + "a", "zeppelin") == [17]               # ... within the run
    assert search(store, name + "b", "zeppelin") == [5]
    assert search(store, name + "a", "ZEPPELIN") == [17]
    assert search(store, name + "a", "quokka") == [23]                 # between control characters
    assert search(store, name + "a", "question 22") == [22]
    assert search(store, name + "a", "verdict good") == search(store, name + "a", "verdict goo")
    assert set(search(store, name + "a", "verdict weak")) == {i for i, r in enumerate(rows())
                                                               if i != 31 and 1 + len(r["response"]) % 5 < 3}
    assert search(store, name + "a", "judge answered nothing") == [31]  # an error's reason
    assert search(store, name + "a", "falcon") == [40]                   # inside a word: the scan
    assert indexed(store, name + "a", "falcon") == []
    assert search(store, name + "a", "?") == [i for i in range(60) if i != 23]   # no words: the scan
    assert indexed(store, name + "a", "?") is None
    assert search(store, name + "a", "zebra") == []
    assert search(store, name + "a", 'zeppelin" OR "apple') == []          # quotes and OR are text
    assert search(store, name + "a", "zeppelin OR") == []


def test_search_with_a_filter_and_a_sort(store):
    name = f"f-{id(store)}"
    assay.evaluate(rows(), metrics=METRICS, store=store, name=name)
    run = store.get_run(name)
    every = {r["idx"]: r for r in query_rows(store, run, RowQuery(per_page=500))["rows"]}
    weak = [i for i in search(store, name, "verdict weak")]
    got = search(store, name, "verdict", filter_output="search_judge", filter_result="fail")
    assert got == sorted(weak) and got
    by_score = search(store, name, "question", sort="search_judge", desc=True)
    key = [(every[i]["scores"]["search_judge"]["score"] is None, -(every[i]["scores"]["search_judge"]["score"] or 0), -i)
           for i in by_score]
    assert key == sorted(key) and by_score[-1] == 31                      # no score: last


def test_rows_kept_with_their_scores_read_as_score_rows_did(tmp_path):
    """The same data written both ways (version 6, and as version 5 wrote it): every page,
    chart and row reads the same."""
    new, old = Store(str(tmp_path / "n.db")), Store(str(tmp_path / "o.db"), row_format=1)
    data = rows()
    for st in (new, old):
        assay.evaluate(data, metrics=METRICS, store=st, name="x")
    assert new.is_packed(new.get_run("x")["id"]) and not old.is_packed(old.get_run("x")["id"])
    with old.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM scores").scalar() == 60 * 3
    with new.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM scores").scalar() == 0

    def read(st: Store) -> list:
        run = st.get_run("x")
        pages = []
        for q in (RowQuery(per_page=7, page=3), RowQuery(sort="f1_score", per_page=500),
                  RowQuery(sort="search_judge", desc=True, per_page=500, page=1),
                  RowQuery(sort="search_judge", desc=True, per_page=9, page=7),
                  RowQuery(filter_output="search_judge", filter_result="error"),
                  RowQuery(filter_output="exact_match", filter_result="fail", sort="f1_score", desc=True),
                  RowQuery(search="verdict good", sort="f1_score")):
            got = query_rows(st, run, q)
            pages.append((got["total"], got["pages"], [(r["idx"], r["row_id"], r["inputs"], r["scores"])
                                                       for r in got["rows"]]))
        outs = ["f1_score", "exact_match", "search_judge"]
        return [pages, histograms(st, run["id"], outs), [r["idx"] for r in worst_rows(st, run, "search_judge", 10)],
                {k: v for k, v in get_row(st, run["id"], 31).items()},
                [(r.idx, r.inputs, r.scores) for r in st.iter_scored(run["id"])]]

    a, b = read(new), read(old)
    a[3]["scores"] = sorted(a[3]["scores"], key=lambda s: (s["metric"], s["output"]))
    b[3]["scores"] = sorted(b[3]["scores"], key=lambda s: (s["metric"], s["output"]))
    assert a == b
    new.close()
    old.close()


def test_a_version_5_store_is_indexed_when_opened_and_its_runs_resume(tmp_path):
    from assay.engine import run as engine_run

    path = tmp_path / "v5.db"
    st = Store(str(path), row_format=1)
    assay.evaluate(rows(), metrics=METRICS, store=st, name="done")
    left = st.start_run(name="left", source="t", fingerprint=None, config={}, config_hash="h", metrics=["m"],
                        judge=None)
    st.close()
    con = sqlite3.connect(path)          # as assay with schema version 5 wrote it
    con.executescript("UPDATE assay_meta SET value = '5' WHERE key = 'schema_version';" + BEFORE_V6)
    con.close()
    st = Store(str(path))
    assert st.schema_version() == S.SCHEMA_VERSION
    assert not st.is_packed(st.get_run("done")["id"]) and st.get_run(left)["seq"] is not None
    assert indexed(st, "done", "zeppelin") == [17] and search(st, "done", "zeppelin") == [17]
    assert search(st, "done", "judge answered nothing") == [31]       # reasons of score rows are indexed
    assert search(st, "done", "verdict weak", filter_output="search_judge", filter_result="fail")
    # a run of the old form, stopped half-way, is resumed in its form
    st.close()
    st = Store(str(path), row_format=1)
    import pytest as _pt

    mp = _pt.MonkeyPatch()
    mp.setattr(engine_run, "CHUNK", 10)
    try:
        assay.evaluate(rows()[:30], metrics=METRICS, store=st, name="half")
        half = st.get_run("half")["id"]
        with st.engine.begin() as conn:    # as if killed after 20 rows
            conn.exec_driver_sql("DELETE FROM scores WHERE run_id = ? AND idx >= 20", (half,))
            conn.exec_driver_sql("DELETE FROM rows WHERE run_id = ? AND idx >= 20", (half,))
            conn.exec_driver_sql("UPDATE runs SET status = 'interrupted', rows_done = 20 WHERE id = ?", (half,))
    finally:
        mp.undo()
    st.close()
    st = Store(str(path))                # the new version resumes it in its old form
    res = assay.evaluate(rows()[:30], metrics=METRICS, store=st, name="half", resume=True)
    assert res.run["resumed_rows"] == 20 and not st.is_packed(half)
    assert [r.idx for r in st.iter_scored(half)] == list(range(30))
    assert search(st, "half", "zeppelin") == [17]
    st.close()


def test_a_deleted_run_leaves_nothing_in_the_index(store):
    name = f"d-{id(store)}"
    rid = assay.evaluate(rows(), metrics=METRICS, store=store, name=name).run["run_id"]
    run = store.get_run(rid)
    store.delete_run(rid)
    with store.engine.connect() as conn:
        assert T.find(conn, run, "zeppelin") == []
        if store.engine.dialect.name == "sqlite":
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM row_text WHERE row_text MATCH 'question'").scalar() == 0


def test_the_search_text_is_never_query_syntax():
    assert T.sqlite_match('a" OR b NEAR(c) *') == '"a OR b NEAR c"'
    assert T.sqlite_match("zebra%") == '"zebra"'
    assert T.pg_tsquery("x & !y | z:*") == "x <-> y <-> z"
    assert T.sqlite_match("?!") is None and T.pg_tsquery("--") is None


def test_a_resumed_runs_columns_are_made_from_its_parts_and_rows(tmp_path, monkeypatch):
    """Parts completed before a run was killed are kept; the rest come from the rows; the
    finished columns are those of a run that was never stopped."""
    from assay.engine import run as engine_run
    from assay.store import store as store_mod

    monkeypatch.setattr(engine_run, "CHUNK", 10)
    monkeypatch.setattr(store_mod, "PART_ROWS", 8)
    data = rows()[:40]
    st = Store(str(tmp_path / "r.db"))
    whole = st.columns(assay.evaluate(data, metrics=METRICS, store=st, name="whole").run["run_id"])
    rid = assay.evaluate(data, metrics=METRICS, store=st, name="cut").run["run_id"]
    with st.engine.begin() as conn:    # as if killed after 20 rows: parts 0 and 1 were complete
        conn.exec_driver_sql("DELETE FROM rows WHERE run_id = ? AND idx >= 20", (rid,))
        conn.exec_driver_sql("DELETE FROM run_column_parts WHERE run_id = ? AND part >= 2", (rid,))
        conn.exec_driver_sql("UPDATE runs SET status = 'interrupted', rows_done = 20 WHERE id = ?", (rid,))
    assert st.columns(rid) == {}
    st.close()
    st = Store(str(tmp_path / "r.db"))
    res = assay.evaluate(data, metrics=METRICS, store=st, name="cut", resume=True)
    assert res.run["resumed_rows"] == 20
    got = st.columns(rid)
    assert sorted(got) == sorted(whole) and len(got["row_id"]) == 40
    for k, v in whole.items():
        assert (got[k] == v if k == "row_id" else (got[k].tobytes() == v.tobytes())), k
    assert set(whole) >= {"score:search_judge", "result:search_judge", "result:f1_score"}
    assert sorted(set(whole["result:search_judge"].tolist())) == [1, 2, 3]     # pass, fail, error
    st.close()


def test_a_version_5_postgres_store_is_indexed_when_opened(postgres_url):
    """The same upgrade on PostgreSQL: the rows already stored are indexed by tsvector."""
    st = Store(postgres_url, row_format=1)
    name = f"pg5-{uuid.uuid4().hex[:8]}"
    data = rows()
    data[9]["response"] = f"the {name[4:]}zz marker"
    assay.evaluate(data, metrics=METRICS, store=st, name=name)
    with st.engine.begin() as conn:      # as assay with schema version 5 left it
        conn.exec_driver_sql("DROP TABLE row_text")
        for table, col in (("runs", "row_format"), ("runs", "seq"), ("rows", "scores"), ("rows", "reasons")):
            conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN {col}")
        conn.exec_driver_sql("DELETE FROM assay_meta WHERE key = 'text_seq'")
        conn.exec_driver_sql("UPDATE assay_meta SET value = '5' WHERE key = 'schema_version'")
    st.close()
    st = Store(postgres_url)
    assert st.schema_version() == S.SCHEMA_VERSION
    assert indexed(st, name, name[4:] + "zz") == [9] and search(st, name, name[4:] + "zz marker") == [9]
    assert search(st, name, "judge answered nothing") == [31]
    st.close()


def test_the_text_a_row_is_indexed_by_is_the_same_for_every_kind_of_value():
    """Deleting a run's rows from the contentless FTS5 table makes each row's text again: the
    fast path for plain dicts, lists and strings must give what the general one gives."""
    from collections import OrderedDict

    import numpy as np

    class Text(str):
        pass

    inputs = {"q": "what?", "empty": "", "n": 3, "x": 2.5, "flag": True, "none": None,
              "ctx": [{"content": "alpha beta", "uri": "doc://1", "score": 0.25, "ok": False},
                      ["", "nested", 7, (8, "tuple")], "gamma"],
              "od": OrderedDict(k="ordered"), "np": np.float64(0.5), "npint": np.int64(9),
              "sub": Text("subclass"), "deep": {"a": {"b": [{"c": "deepest"}]}}}
    assert T.row_doc(inputs, [None, "a reason", "", "another"]) == "\n".join([
        "what?", "", "3", "2.5", "alpha beta", "doc://1", "0.25", "nested", "7", "8", "tuple", "gamma",
        "ordered", "0.5", "subclass", "deepest", "a reason", "another"])
    assert T.row_doc({"q": ""}, ()) == ""           # a top-level empty string keeps its (empty) line
    assert T.row_doc({"q": "", "r": "x"}, ()) == "\nx"
    assert T.row_doc("plain", ["why"]) == "plain\nwhy"
