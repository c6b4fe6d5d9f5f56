"""Full-text search over a run's rows: their inputs' text and their scores' reasons.

Each row's text (every string and number in its inputs, then every reason, one per line) is
indexed when the row is written: on SQLite in the FTS5 table ``row_text`` (tokens: runs of
letters and digits, case and diacritics folded; its rowid is ``runs.seq * 2**32 + idx``, so a
search reads one run's range), on PostgreSQL as ``to_tsvector('simple', text)`` under a GIN
index. The text itself is not kept a second time.

A search's words are looked up as a phrase (in that order, next to each other), the last one
as a prefix when the search does not end with a space or punctuation (``"question 99"`` finds
``question 991``), whatever separates the words in the text (``"misses part"`` finds
``misses, part``). A search with other characters than letters, digits and single spaces is
then checked for as typed (case aside: ``"zebra%"`` does not find ``zebra_%word``;
``"question 7:"`` needs the colon), as the scan does. A word is found at the start of a word
(``"falc"`` finds ``falcon``; ``"alcon"`` finds it only by the scan, when the index finds no row). The search text is never read as query syntax: only its words
are used, each quoted. What the index cannot find falls back to the substring scan (``LIKE``) over the
inputs and reasons: a search with no letters or digits (``"?!"``), a search that the index
finds in no row (a piece inside a word: ``"alcon"`` in ``falcon``), and runs on a database
without the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

SEQ_SHIFT = 32          # FTS5 rowid = run seq << 32 | row position
_WORD = re.compile(r"[^\W_]+")
_OLD_BATCH = 2_000


def _strings(v: Any, out: list[str]) -> None:  # noqa: C901
    # Plain dicts, lists, strings and floats are read by their exact type (the hot path of
    # writing rows); anything else (subclasses, numpy numbers) by isinstance, as before.
    t = type(v)
    if t is str:
        if v:
            out.append(v)
    elif t is dict or t is list or t is tuple:
        for x in (v.values() if t is dict else v):
            tx = type(x)
            if tx is str:
                if x:
                    out.append(x)
            else:
                _strings(x, out)
    elif t is int or t is float:
        out.append(str(v))
    elif isinstance(v, str):
        if v:
            out.append(v)
    elif isinstance(v, dict):
        for x in v.values():
            _strings(x, out)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _strings(x, out)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        out.append(str(v))


def row_doc(inputs: Any, reasons: Iterable[str | None]) -> str:
    """The text a row is found by: its inputs' strings and numbers, then its reasons (one a
    line). Deleting a run's rows from the index makes this text again: it must not change."""
    out: list[str] = []
    for v in inputs.values() if type(inputs) is dict else (inputs,):
        if type(v) is str:
            out.append(v)
        else:
            _strings(v, out)
    for r in reasons:
        if r:
            out.append(r)
    return "\n".join(out)


def words(text: str) -> list[str]:
    return _WORD.findall(text)


_PLAIN = re.compile(r"[^\W_]+( [^\W_]+)*")


def plain_words(text: str) -> bool:
    """Whether the search is words separated by single spaces (the index's answer is then
    taken as it is: words, whatever separates them in the text)."""
    return _PLAIN.fullmatch(text.strip()) is not None


def sqlite_match(text: str) -> str | None:
    """The FTS5 query for a search (None when it has no words): one quoted phrase."""
    w = words(text)
    if not w:
        return None
    prefix = bool(_WORD.match(text[-1:]))
    return '"' + " ".join(w) + '"' + (" *" if prefix else "")


def pg_tsquery(text: str) -> str | None:
    """The ``to_tsquery('simple', ...)`` text for a search: its words joined by ``<->``."""
    w = [x.lower() for x in words(text)]
    if not w:
        return None
    if _WORD.match(text[-1:]):
        w[-1] += ":*"
    return " <-> ".join(w)


def has_index(conn: Any) -> bool:
    name = conn.dialect.name
    if name == "sqlite":
        return conn.exec_driver_sql("SELECT 1 FROM sqlite_master WHERE name = 'row_text'").first() is not None
    if name == "postgresql":
        return conn.exec_driver_sql("SELECT to_regclass('row_text')").scalar() is not None
    return False


def next_seq(conn: Any) -> int:
    """A new run's number in the index (never reused: the rows of a deleted run may still be
    in a contentless FTS5 table until its text is deleted)."""
    conn.exec_driver_sql("UPDATE assay_meta SET value = CAST(CAST(value AS INTEGER) + 1 AS VARCHAR(20)) "
                         "WHERE key = 'text_seq'")
    got = conn.exec_driver_sql("SELECT value FROM assay_meta WHERE key = 'text_seq'").scalar()
    return int(got) if got is not None else 0


def index_sql(dialect: str, mark: str) -> str | None:
    if dialect == "sqlite":
        return "INSERT INTO row_text (rowid, doc) VALUES (?, ?)"
    if dialect == "postgresql":
        return f"INSERT INTO row_text (run_id, idx, doc) VALUES ({mark}, {mark}, to_tsvector('simple', {mark}))"
    return None


def index_params(dialect: str, run_id: str, seq: int, docs: Iterable[tuple[int, str]]) -> list[tuple]:
    if dialect == "sqlite":
        base = seq << SEQ_SHIFT
        return [(base + idx, doc) for idx, doc in docs]
    return [(run_id, idx, doc) for idx, doc in docs]


def _old_docs(conn: Any, run_id: str, lo: int, hi: int, row_format: int | None) -> list[tuple[int, str]]:
    """The index text of rows ``[lo, hi)`` of a run as stored (either row form)."""
    if row_format == 2:
        got = raw_rows(conn, "SELECT idx, inputs, reasons FROM rows WHERE run_id = ? AND idx >= ? AND idx < ?",
                       (run_id, lo, hi))
        return [(i, row_doc(orjson.loads(inp), orjson.loads(rs) if rs else ())) for i, inp, rs in got]
    reasons: dict[int, list[str]] = {}
    for i, r in raw_rows(conn, "SELECT idx, reason FROM scores WHERE run_id = ? AND idx >= ? AND idx < ? "
                               "AND reason IS NOT NULL ORDER BY idx, metric, output", (run_id, lo, hi)):
        reasons.setdefault(i, []).append(r)
    got = raw_rows(conn, "SELECT idx, inputs FROM rows WHERE run_id = ? AND idx >= ? AND idx < ?", (run_id, lo, hi))
    return [(i, row_doc(orjson.loads(inp), reasons.get(i, ()))) for i, inp in got]


def _batches(conn: Any, run_id: str, row_format: int | None) -> Iterator[list[tuple[int, str]]]:
    top = raw_rows(conn, "SELECT MAX(idx) FROM rows WHERE run_id = ?", (run_id,))[0][0]
    for lo in range(0, (top if top is not None else -1) + 1, _OLD_BATCH):
        docs = _old_docs(conn, run_id, lo, lo + _OLD_BATCH, row_format)
        if docs:
            yield docs


def index_old_rows(conn: Any) -> None:
    """Index every stored run's rows (a store migrated to version 6): each run gets its number.
    The index is built afresh, so that entries already there (a store written by a newer assay
    and marked older) are not indexed twice."""
    dialect = conn.dialect.name
    if not has_index(conn):
        return
    if dialect == "postgresql":
        conn.exec_driver_sql("DELETE FROM row_text")
    else:
        conn.exec_driver_sql("INSERT INTO row_text (row_text) VALUES ('delete-all')")
    sql = index_sql(dialect, raw_mark(conn))
    for run_id, fmt in raw_rows(conn, "SELECT id, row_format FROM runs ORDER BY created_at", ()):
        seq = next_seq(conn)
        raw_rows(conn, "UPDATE runs SET seq = ? WHERE id = ?", (seq, run_id), fetch=False)
        for docs in _batches(conn, run_id, fmt):
            conn.exec_driver_sql(sql, index_params(dialect, run_id, seq, docs))


def delete_text(conn: Any, run_id: str, seq: int | None, row_format: int | None) -> None:
    """Remove a run's rows from the index (before its rows are deleted: a contentless FTS5
    table deletes a row given the text it indexed)."""
    if not has_index(conn):
        return
    if conn.dialect.name == "postgresql":
        raw_rows(conn, "DELETE FROM row_text WHERE run_id = ?", (run_id,), fetch=False)
        return
    if conn.dialect.name != "sqlite" or seq is None:
        return
    for docs in _batches(conn, run_id, row_format):
        conn.exec_driver_sql("INSERT INTO row_text (row_text, rowid, doc) VALUES ('delete', ?, ?)",
                             index_params("sqlite", run_id, seq, docs))


def raw_rows(conn: Any, sql: str, params: Sequence[Any], *, fetch: bool = True) -> list[tuple]:
    """A query through the driver on a SQLAlchemy connection, ``?`` marking parameters."""
    mark = raw_mark(conn)
    if mark != "?":
        sql = sql.replace("%", "%%").replace("?", mark)
    cur = conn.connection.driver_connection.cursor()
    try:
        cur.execute(sql, tuple(params))
        return cur.fetchall() if fetch else []
    finally:
        cur.close()


def raw_mark(conn: Any) -> str:
    return {"qmark": "?", "format": "%s", "pyformat": "%s"}.get(conn.dialect.paramstyle, "?")


def find(conn: Any, run: dict[str, Any], text: str) -> list[int] | None:
    """Row positions of ``run`` whose text has the search's words, in order, or None when the index cannot answer (no words, no index, a run not indexed):
    then the caller scans."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        q = sqlite_match(text)
        if q is None or run.get("seq") is None or not has_index(conn):
            return None
        lo = int(run["seq"]) << SEQ_SHIFT
        got = raw_rows(conn, "SELECT rowid FROM row_text WHERE row_text MATCH ? AND rowid >= ? AND rowid < ? "
                             "ORDER BY rowid", (q, lo, lo + (1 << SEQ_SHIFT)))
        return [r[0] - lo for r in got]
    if dialect == "postgresql":
        q = pg_tsquery(text)
        if q is None or not has_index(conn):
            return None
        got = raw_rows(conn, "SELECT idx FROM row_text WHERE run_id = ? AND doc @@ to_tsquery('simple', ?) "
                             "ORDER BY idx", (run["id"], q))
        return [r[0] for r in got]
    return None
