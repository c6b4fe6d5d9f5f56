"""A persistent cache of model calls: SQLite (stdlib), WAL mode, safe across processes.

The key is the sha256 of (model identity, messages, every generation parameter): the
endpoint and model name, never the API key. A hit returns the stored
:class:`~assay.models.base.Generation` with ``cached=True`` and makes no call. Each
answer is committed as its call completes, so a killed run loses at most the calls in
flight, and a resumed run pays for no completed call twice.

Location: ``path`` if given, else ``$ASSAY_CACHE``, else ``.assay/cache.sqlite`` under the
working directory. ``ASSAY_CACHE=off`` turns the cache off (:func:`open_cache` returns None).
A ``postgresql://`` URL (as ``path`` or ``$ASSAY_CACHE``) keeps the cache in that database
instead (:class:`PgCallCache`: two tables, ``assay_call_cache`` and ``assay_call_vectors``), so
that processes on several machines (the workers of a Ray cluster) share one cache; the Ray
engine does this by itself when the run's store is PostgreSQL.

The hot path is one primary-key lookup on one open connection (tens of microseconds);
:meth:`CallCache.get_many` looks up a batch in one query.

Embeddings are cached per text, not per request, in a table of their own (``embeddings``,
schema 2): the key is the sha256 of (model identity, input type, text) (:func:`embed_key`), the
value the vector as float32 bytes (1,536 bytes for 384 dimensions, against ~8 KB as JSON), so
that a text embedded once is never embedded again, whatever batch it comes in. A cache file of
schema 1 gains the table when it is opened; nothing in it changes.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from assay.errors import AssayError
from assay.models.base import Generation, Messages

SCHEMA_VERSION = 2                   # 2: the embeddings table
KEY_VERSION = 1
DEFAULT_PATH = Path(".assay") / "cache.sqlite"
_OFF = {"off", "0", "false", "no", "none", "disabled"}
_DUMP_OPTS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


PG_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
PG_CALLS, PG_VECTORS = "assay_call_cache", "assay_call_vectors"
PG_LOCK = 7_302_214_919      # the advisory lock under which the tables are made (workers start at once)


class CacheError(Exception):
    """A call cache read or write that failed (a database gone away): it costs the cache, not the
    run. SQLite's own errors (``sqlite3.Error``) are the other kind in :data:`CACHE_ERRORS`."""


CACHE_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, CacheError)


def is_db_url(location: Any) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return isinstance(location, str) and location.strip().lower().startswith(PG_SCHEMES)


def default_cache_path() -> Path | None:
    """``$ASSAY_CACHE`` (None when it says off), else ``./.assay/cache.sqlite``."""
    env = os.environ.get("ASSAY_CACHE")
    if env is not None and env.strip():
        if env.strip().lower() in _OFF:
            return None
        return Path(env).expanduser()
    return Path.cwd() / DEFAULT_PATH


def open_cache(path: str | os.PathLike[str] | None = None) -> CallCache | None:
    """The call cache at ``path`` or the default location; None when turned off. A
    ``postgresql://`` URL (given, or in ``$ASSAY_CACHE``) opens a :class:`PgCallCache`."""
    if path is None:
        env = (os.environ.get("ASSAY_CACHE") or "").strip()
        if is_db_url(env):
            return PgCallCache(env)
    elif is_db_url(path):
        return PgCallCache(str(path))
    p = Path(path) if path is not None else default_cache_path()
    return CallCache(p) if p is not None else None


def call_key(identity: str, messages: Messages, params: Mapping[str, Any]) -> str:
    """sha256 over the model identity, the messages and every generation parameter."""
    blob = orjson.dumps([KEY_VERSION, identity, list(messages), params], option=_DUMP_OPTS, default=str)
    return hashlib.sha256(blob).hexdigest()


def embed_key(identity: str, input_type: str | None, text: str) -> str:
    """sha256 over the model identity, the input type and the text: one embedding's key."""
    blob = orjson.dumps([KEY_VERSION, "embed", identity, input_type, text])
    return hashlib.sha256(blob).hexdigest()


class CallCache:
    """Model answers by call key, in one SQLite file shared by every process that opens it."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._open()
            self._migrate()
        except (sqlite3.Error, OSError) as exc:
            raise AssayError(f"cannot open the call cache at {self.path}: {exc} "
                             "(set ASSAY_CACHE to another file, or ASSAY_CACHE=off)") from None
        self.hits = 0
        self.misses = 0
        self.writes = 0

    key = staticmethod(call_key)

    def _open(self) -> None:
        # autocommit: every put is its own committed transaction
        self._conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=30000")
        self.journal_mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._pid = os.getpid()

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection; a forked child opens its own (a connection must not cross a fork)."""
        if self._pid != os.getpid():
            self._open()
        return self._conn

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"written by a newer assay (schema {version})")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS calls ("
            " key TEXT PRIMARY KEY, model TEXT NOT NULL, created REAL NOT NULL, value BLOB NOT NULL"
            ") WITHOUT ROWID")
        # schema 2: one float32 vector per (model, input type, text); a rowid table, since its
        # rows (1.5 KB and more) are too large for a WITHOUT ROWID b-tree to pay off
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embeddings ("
            " key TEXT PRIMARY KEY, model TEXT NOT NULL, created REAL NOT NULL, dim INTEGER NOT NULL,"
            " value BLOB NOT NULL)")
        if version < SCHEMA_VERSION:
            self._conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def __repr__(self) -> str:
        return f"CallCache({str(self.path)!r})"

    # -- reads -------------------------------------------------------------------------------
    def get(self, key: str) -> Generation | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM calls WHERE key=?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return Generation.from_dict(orjson.loads(row[0]), cached=True)

    def get_many(self, keys: Iterable[str]) -> dict[str, Generation]:
        """The cached answers among ``keys`` (one query per 500 keys)."""
        return {k: Generation.from_dict(orjson.loads(v), cached=True) for k, v in self._select("calls", keys).items()}

    def _select(self, table: str, keys: Iterable[str]) -> dict[str, bytes]:
        """The stored values of ``table`` among ``keys``, one query per 500 keys; counts hits and misses."""
        ks = list(dict.fromkeys(keys))
        out: dict[str, bytes] = {}
        with self._lock:
            for i in range(0, len(ks), 500):
                part = ks[i:i + 500]
                q = f"SELECT key, value FROM {table} WHERE key IN ({','.join('?' * len(part))})"
                out.update(self._db.execute(q, part))
        self.hits += len(out)
        self.misses += len(ks) - len(out)
        return out

    def _insert(self, table: str, rows: list[tuple]) -> None:
        """``INSERT OR REPLACE`` ``rows`` into ``table`` in one committed transaction."""
        if not rows:
            return
        sql = f"INSERT OR REPLACE INTO {table} VALUES ({','.join('?' * len(rows[0]))})"
        with self._lock:
            db = self._db
            if len(rows) == 1:
                db.execute(sql, rows[0])
            else:
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.executemany(sql, rows)
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
        self.writes += len(rows)

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM calls WHERE key=?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM calls").fetchone()[0]

    # -- writes ------------------------------------------------------------------------------
    def put(self, key: str, gen: Generation, *, model: str = "") -> None:
        """Store one answer, committed before returning."""
        self.put_many([(key, gen)], model=model)

    def put_many(self, items: Iterable[tuple[str, Generation]], *, model: str = "") -> None:
        now = time.time()
        rows = [(k, model or g.model, now, orjson.dumps(g.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY,
                                                         default=str))
                for k, g in items]
        self._insert("calls", rows)

    # -- embeddings --------------------------------------------------------------------------
    def get_vectors(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``keys`` (:func:`embed_key`), float32, one query per 500 keys."""
        return {k: np.frombuffer(v, dtype=np.float32) for k, v in self._select("embeddings", keys).items()}

    def put_vectors(self, items: Iterable[tuple[str, np.ndarray]], *, model: str = "") -> None:
        """Store vectors by key in one committed transaction."""
        now = time.time()
        rows = []
        for k, v in items:
            a = np.ascontiguousarray(v, dtype=np.float32).reshape(-1)
            rows.append((k, model, now, int(a.shape[0]), a.tobytes()))
        self._insert("embeddings", rows)

    def count_vectors(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM embeddings").fetchone()[0]

    def clear(self) -> None:
        with self._lock:
            self._db.execute("DELETE FROM calls")
            self._db.execute("DELETE FROM embeddings")

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> CallCache:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _libpq_url(url: str) -> str:
    """``url`` as libpq reads it (SQLAlchemy's ``postgresql+psycopg://`` scheme made plain)."""
    url = url.strip()
    scheme, rest = url.split("://", 1)
    return "postgresql://" + rest if scheme.lower() != "postgresql" else url


def _one_line(exc: BaseException) -> str:
    """A driver's message (libpq's run over several lines) on one line."""
    return " ".join(str(exc).split())


def _safe(url: str) -> str:
    """``url`` without its password, for messages and ``repr``."""
    scheme, rest = url.split("://", 1)
    if "@" in rest:
        creds, host = rest.rsplit("@", 1)
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":***"
        rest = f"{creds}@{host}"
    return f"{scheme}://{rest}"


class PgCallCache(CallCache):
    """The call cache in a PostgreSQL database: the same keys, values and methods as
    :class:`CallCache`, in two tables (``assay_call_cache`` for answers, ``assay_call_vectors``
    for embeddings) that every process reaching the database shares, wherever it runs. One
    autocommit connection (psycopg 3), reopened after a fork or when the server dropped it; a
    failed read or write raises :class:`CacheError`, which the model path logs and goes on without.
    """

    def __init__(self, url: str):
        self.url = _libpq_url(url)
        self.path = None
        self._lock = threading.Lock()
        self._conn: Any = None
        try:
            import psycopg
        except ImportError:
            raise AssayError("a call cache in PostgreSQL needs psycopg, which is not installed: "
                             "pip install 'assay[postgres]' (or set ASSAY_CACHE to a file, or off)") from None
        self._pg = psycopg
        try:
            self._open()
            self._migrate()
        except psycopg.Error as exc:
            raise AssayError(f"cannot open the call cache in {_safe(self.url)}: {_one_line(exc)} "
                             "(set ASSAY_CACHE to a file, or ASSAY_CACHE=off)") from None
        self.hits = 0
        self.misses = 0
        self.writes = 0

    def _open(self) -> None:
        self._conn = self._pg.connect(self.url, autocommit=True, connect_timeout=30)
        self._pid = os.getpid()
        self.journal_mode = "postgresql"

    @property
    def _db(self) -> Any:
        """The connection: a forked child's own, or a new one when the server dropped it."""
        if self._conn is None or self._pid != os.getpid() or self._conn.closed or self._conn.broken:
            self._open()
        return self._conn

    def _migrate(self) -> None:
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (PG_LOCK,))
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {PG_CALLS} (key TEXT PRIMARY KEY, model TEXT NOT NULL,"
                               " created DOUBLE PRECISION NOT NULL, value BYTEA NOT NULL)")
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {PG_VECTORS} (key TEXT PRIMARY KEY, model TEXT NOT NULL,"
                               " created DOUBLE PRECISION NOT NULL, dim INTEGER NOT NULL, value BYTEA NOT NULL)")

    def __repr__(self) -> str:
        return f"PgCallCache({_safe(self.url)!r})"

    def _run(self, sql: str, params: Any = None, *, many: bool = False) -> list[tuple]:
        """One statement under the lock; its rows (none for a write). psycopg's errors become
        :class:`CacheError` (the connection is dropped, to be opened again next time)."""
        with self._lock:
            try:
                db = self._db
                if many:
                    with db.cursor() as cur:
                        cur.executemany(sql, params)
                    return []
                cur = db.execute(sql, params)
                return cur.fetchall() if cur.description is not None else []
            except self._pg.Error as exc:
                try:
                    self._conn.close()
                except Exception:   # closing a broken connection
                    pass
                self._conn = None
                raise CacheError(f"{_safe(self.url)}: {_one_line(exc)}") from None

    @staticmethod
    def _table(table: str) -> str:
        return PG_CALLS if table == "calls" else PG_VECTORS

    # -- reads -------------------------------------------------------------------------------
    def get(self, key: str) -> Generation | None:
        rows = self._run(f"SELECT value FROM {PG_CALLS} WHERE key = %s", (key,))
        if not rows:
            self.misses += 1
            return None
        self.hits += 1
        return Generation.from_dict(orjson.loads(bytes(rows[0][0])), cached=True)

    def _select(self, table: str, keys: Iterable[str]) -> dict[str, bytes]:
        ks = list(dict.fromkeys(keys))
        out: dict[str, bytes] = {}
        for i in range(0, len(ks), 500):
            rows = self._run(f"SELECT key, value FROM {self._table(table)} WHERE key = ANY(%s)", (ks[i:i + 500],))
            out.update((k, bytes(v)) for k, v in rows)
        self.hits += len(out)
        self.misses += len(ks) - len(out)
        return out

    def _insert(self, table: str, rows: list[tuple]) -> None:
        """Upsert ``rows`` (one statement per row, one round trip for them all; autocommit: a
        row another worker wrote at the same time is simply written again, with the same value)."""
        if not rows:
            return
        cols = "(key, model, created, value)" if table == "calls" else "(key, model, created, dim, value)"
        marks = ",".join(["%s"] * len(rows[0]))
        sql = (f"INSERT INTO {self._table(table)} {cols} VALUES ({marks}) "
               "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, created = EXCLUDED.created")
        self._run(sql, rows, many=True)
        self.writes += len(rows)

    def __contains__(self, key: str) -> bool:
        return bool(self._run(f"SELECT 1 FROM {PG_CALLS} WHERE key = %s", (key,)))

    def __len__(self) -> int:
        return int(self._run(f"SELECT count(*) FROM {PG_CALLS}")[0][0])

    def count_vectors(self) -> int:
        return int(self._run(f"SELECT count(*) FROM {PG_VECTORS}")[0][0])

    def clear(self) -> None:
        self._run(f"DELETE FROM {PG_CALLS}")
        self._run(f"DELETE FROM {PG_VECTORS}")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except Exception:   # gone already
                    pass
                self._conn = None
