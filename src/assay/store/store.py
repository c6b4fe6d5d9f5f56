"""Where every run is kept: SQLite by default, PostgreSQL (or any SQLAlchemy URL) by URL.

Location: ``url`` if given, else ``$ASSAY_STORE`` (a path or a SQLAlchemy URL;
``off`` turns saving off), else ``.assay/assay.db`` under the working directory.

A run is written as it goes: :meth:`Store.write_rows` commits scored rows (one insert per
row: its inputs, its scores in compact form, its full-text index entry) with the run's
progress in one transaction, on a writer thread behind the scoring (the engine's sink hands
it 4,096 rows at a time, or what came in a second: ``assay.results.WRITE_ROWS``), so a run
killed at any moment leaves a consistent prefix of its rows that ``assay eval --resume``
continues from. SQLite runs
in WAL mode with a busy timeout, so several processes can write one store at once.

A running run is owned by the session (process) writing it, which keeps a heartbeat; a run
whose process is gone reads as ``stale`` and can be resumed, a live one cannot
(:mod:`assay.store.sessions`).
"""

from __future__ import annotations

import math
import os
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from sqlalchemy import create_engine, delete, event, func, insert, inspect, select, update
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError

from assay.errors import AssayError
from assay.metrics.base import Score
from assay.results import StoredRow
from assay.store import schema as S
from assay.store import search as T
from assay.store.search import raw_rows
from assay.store.sessions import describe_owner, is_stale, this_host

DEFAULT_PATH = Path(".assay") / "assay.db"
_OFF = {"off", "0", "false", "no", "none", "disabled"}
_DUMP = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
RESUMABLE = ("running", "interrupted", "failed")   # as stored (a stale run is stored as running)
_JSON_COLUMNS = ("config", "metrics", "versions", "aggregates", "summary", "usage")
PART_ROWS = 8_192       # rows per stored part of a finished run's columns
COLUMN_BATCH = 1_024    # rows read at a time when they are written
WAL_CHECKPOINT = 8_192  # SQLite: WAL pages (4 KiB) between automatic checkpoints


def _dumps(v: Any) -> str | None:
    if v is None:
        return None
    return orjson.dumps(v, option=_DUMP, default=_default).decode()


def _default(o: Any) -> Any:
    if hasattr(o, "model_dump"):
        return o.model_dump(exclude_none=True)
    return str(o)


def load_json(v: str | None) -> Any:
    return None if v is None else orjson.loads(v)


def default_store_url() -> str | None:
    """``$ASSAY_STORE`` (None when it says off), else SQLite at ``./.assay/assay.db``."""
    env = os.environ.get("ASSAY_STORE", "").strip()
    if env:
        return None if env.lower() in _OFF else env
    return str(Path.cwd() / DEFAULT_PATH)


def _engine_url(url: str) -> str:
    """A path becomes a SQLite URL; ``postgresql://`` gets the psycopg (v3) driver."""
    if "://" not in url:
        p = Path(url).expanduser()
        p.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{p}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _safe_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


class _BeingCreated(Exception):
    """The store's tables exist but its version is not written yet: another process is creating it."""


class _NotOwner(Exception):
    """This session no longer owns the run it is writing (raised inside a transaction, to roll it back)."""


class Store:
    def __init__(self, url: str, *, row_format: int = 2):
        """``row_format=1`` writes new runs as stores of version 5 and before did (a score row
        per metric output; for tests of stores written by older versions)."""
        self.row_format = row_format
        self._formats: dict[str, tuple[int | None, int | None]] = {}   # run id -> (row_format, seq)
        # a run being written (row form 2): its outputs, and the columns of its parts not yet
        # complete, written with the chunk that completes them (see _Part)
        self._outputs: dict[str, list[str]] = {}
        self._parts: dict[str, dict[int, _Part]] = {}
        self.url = _engine_url(url)
        self.display_url = _safe_url(self.url)
        try:
            self.engine: Engine = create_engine(self.url, future=True)
        except (ArgumentError, ImportError) as exc:
            raise AssayError(f"store {self.display_url}: {exc}") from None
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._mark = _param_mark(self.engine)
        self._insert_rows = _insert_sql(self.engine, S.rows)
        self._insert_scores = _insert_sql(self.engine, S.scores)
        self._insert_text = T.index_sql(self.engine.dialect.name, self._mark)
        self._text_index: bool | None = None
        self._owned: dict[str, str] = {}   # run id -> the session of this process that owns it
        for attempt in range(20):
            try:
                self._migrate()
                break
            except (OperationalError, IntegrityError, ProgrammingError, _BeingCreated) as exc:
                # Another process may be creating the same store this instant: look again.
                why = str(getattr(exc, "orig", exc)).lower()
                if attempt == 19 or not (isinstance(exc, _BeingCreated) or "exist" in why or "unique" in why
                                         or "duplicate" in why):
                    raise AssayError(f"cannot open the store at {self.display_url}: "
                                     f"{getattr(exc, 'orig', exc)}") from None
                time.sleep(0.05)

    # -- schema ---------------------------------------------------------------------------
    def _migrate(self) -> None:
        with self.engine.begin() as conn:
            have = set(inspect(conn).get_table_names())
            if "assay_meta" not in have:
                S.metadata.create_all(conn)
                S.create_text_index(conn)
                conn.execute(insert(S.meta).values(key="schema_version", value=str(S.SCHEMA_VERSION)))
                return
            found = conn.execute(select(S.meta.c.value).where(S.meta.c.key == "schema_version")).scalar()
            if found is None:
                raise _BeingCreated()
            version = int(found)
            if version > S.SCHEMA_VERSION:
                raise AssayError(f"the store at {self.display_url} has schema version {version}, written by a "
                                 f"newer assay; this one reads up to {S.SCHEMA_VERSION}: upgrade assay")
            for v in range(version + 1, S.SCHEMA_VERSION + 1):
                S.MIGRATIONS[v](conn)
                conn.execute(update(S.meta).where(S.meta.c.key == "schema_version").values(value=str(v)))

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(S.meta.c.value).where(S.meta.c.key == "schema_version")).scalar_one())

    def close(self) -> None:
        self.engine.dispose()

    # -- writing a run --------------------------------------------------------------------
    def start_run(self, *, name: str | None, source: str | None, fingerprint: str | None,
                  config: Mapping[str, Any], config_hash: str, metrics: Sequence[str],
                  judge: str | None) -> str:
        """A new run, owned by this process (a session of it) until :meth:`finish_run`."""
        run_id = uuid.uuid4().hex[:12]
        session = uuid.uuid4().hex
        now = time.time()
        from assay.version import __version__

        fmt = 2 if self.row_format == 2 else None
        with self.engine.begin() as conn:
            seq = T.next_seq(conn)
            conn.execute(insert(S.runs).values(
                row_format=fmt, seq=seq, id=run_id, name=name, status="running", created_at=now, updated_at=now, source=source,
                data_fingerprint=fingerprint, config_hash=config_hash, config=_dumps(dict(config)),
                metrics=_dumps(list(metrics)), judge=judge, rows_done=0,
                versions=_dumps({"assay": __version__, "python": sys.version.split()[0]}),
                owner=session, owner_pid=os.getpid(), owner_host=this_host(), heartbeat_at=now))
            self._add_session(conn, run_id, session, now, 0)
        self._owned[run_id] = session
        self._formats[run_id] = (fmt, seq)
        self._outputs[run_id] = _layout_outputs(config)
        return run_id

    def reopen_run(self, run_id: str) -> None:
        """Take over an unfinished run to resume it: refused (one line) while the process that
        runs it is alive; a stale run (its process gone) is taken over. Two processes resuming
        one run at once: one gets it, the other is refused."""
        with self.engine.connect() as conn:
            row = conn.execute(select(S.runs).where(S.runs.c.id == run_id)).mappings().first()
        if row is None:
            raise AssayError(f"no run {run_id!r} in the store at {self.display_url}")
        if row["status"] == "completed":
            raise AssayError(f"run {run_id} is already complete; nothing to resume")
        if row["status"] == "running" and not is_stale(row):
            raise AssayError(f"run {run_id} is still running ({describe_owner(row)}); wait for it to "
                             "finish, or stop that process and resume again")
        session = uuid.uuid4().hex
        now = time.time()
        c = S.runs.c

        def same(col: Any, value: Any) -> Any:
            return col.is_(None) if value is None else col == value

        with self.engine.begin() as conn:
            # taken only if nobody took it since it was read (compare and set)
            got = conn.execute(update(S.runs).where(c.id == run_id, c.status == row["status"],
                                                   same(c.owner, row["owner"]),
                                                   same(c.heartbeat_at, row["heartbeat_at"]))
                               .values(status="running", error=None, finished_at=None, updated_at=now,
                                       owner=session, owner_pid=os.getpid(), owner_host=this_host(),
                                       heartbeat_at=now))
            if got.rowcount != 1:
                raise AssayError(f"run {run_id} was just taken over by another process; "
                                 "see `assay show " + run_id + "`")
            # the sessions before this one ended, when they did not say so themselves (killed)
            conn.execute(update(S.run_sessions).where(S.run_sessions.c.run_id == run_id,
                                                      S.run_sessions.c.ended_at.is_(None))
                         .values(ended_at=row["heartbeat_at"] or row["updated_at"],
                                 status="stale" if row["status"] == "running" else row["status"]))
            self._add_session(conn, run_id, session, now, int(row["rows_done"] or 0))
        self._owned[run_id] = session
        self._parts.pop(run_id, None)
        self._outputs[run_id] = _layout_outputs(load_json(row["config"]) or {})

    def owns(self, run_id: str) -> bool:
        """Whether a session of this Store started or resumed ``run_id`` and has not ended it."""
        return run_id in self._owned

    def _add_session(self, conn: Any, run_id: str, session: str, now: float, rows_start: int) -> None:
        conn.execute(insert(S.run_sessions).values(run_id=run_id, session=session, pid=os.getpid(),
                                                   host=this_host(), started_at=now, rows_start=rows_start))

    def _owner_check(self, run_id: str) -> Any:
        """The condition "this process's session still owns the run" (true when it never did:
        rows written to a run this Store did not start or resume)."""
        session = self._owned.get(run_id)
        return S.runs.c.owner == session if session is not None else S.runs.c.id == run_id

    def _lost(self, run_id: str) -> AssayError:
        try:
            run = self.get_run(run_id)
            who = f" ({describe_owner(run)})"
        except AssayError:
            who = ""
        return AssayError(f"run {run_id} was taken over by another process{who}; this one stops "
                          "writing to it")

    def heartbeat(self, run_id: str, usage: Any = None) -> bool:
        """Renew the heartbeat of a run this process owns, and record its session's judge
        usage so far; False when it does not own the run (any more)."""
        session = self._owned.get(run_id)
        if session is None:
            return False
        with self.engine.begin() as conn:
            got = conn.execute(update(S.runs).where(S.runs.c.id == run_id, S.runs.c.owner == session)
                               .values(heartbeat_at=time.time()))
            if got.rowcount == 1 and usage is not None:
                conn.execute(update(S.run_sessions).where(S.run_sessions.c.run_id == run_id,
                                                          S.run_sessions.c.session == session)
                             .values(usage=_dumps(usage)))
        return got.rowcount == 1

    def sessions(self, run_id: str) -> list[dict[str, Any]]:
        """The run's sessions, oldest first: pid, host, started/ended, status, rows_start, usage."""
        t = S.run_sessions
        with self.engine.connect() as conn:
            got = conn.execute(select(t).where(t.c.run_id == run_id)
                               .order_by(t.c.started_at, t.c.session)).mappings().all()
        return [{**r, "usage": load_json(r["usage"])} for r in got]

    def _run_format(self, run_id: str) -> tuple[int | None, int | None]:
        """The run's row form (2: scores kept with the row; None: a score row per output, as
        before version 6) and its number in the full-text index."""
        got = self._formats.get(run_id)
        if got is None:
            with self.engine.connect() as conn:
                row = conn.execute(select(S.runs.c.row_format, S.runs.c.seq).where(S.runs.c.id == run_id)).first()
            got = (row[0], row[1]) if row is not None else (self.row_format if self.row_format == 2 else None, None)
            self._formats[run_id] = got
        return got

    def has_text_index(self) -> bool:
        if self._text_index is None:
            with self.engine.connect() as conn:
                self._text_index = T.has_index(conn)
        return self._text_index

    def write_rows(self, run_id: str, batch: Sequence[StoredRow]) -> None:  # noqa: C901
        """Rows and their scores, their full-text index, and the run's progress, in one transaction."""
        if not batch:
            return
        fmt, seq = self._run_format(run_id)
        # The hot path of a saved run: plain tuples through the driver's executemany (the
        # SQL is built once from the schema). A row of a run of version 6 is one insert: its
        # scores in one compact JSON list (see schema), its reasons in another.
        row_params = []
        score_params = []
        docs = []
        index = self._insert_text is not None and self.has_text_index() and (seq is not None or
                                                                             self.engine.dialect.name != "sqlite")
        outputs = self._outputs.get(run_id) if fmt == 2 else None
        parts = self._parts.setdefault(run_id, {}) if outputs is not None else None
        size = PART_ROWS
        part: _Part | None = None
        nan = math.nan
        dumps, row_doc = orjson.dumps, T.row_doc
        for r in batch:
            if fmt == 2:
                i = r.idx
                if parts is not None:
                    if part is None or not part.lo <= i < part.lo + size:
                        k = i // size
                        part = parts.get(k)
                        if part is None:
                            part = parts[k] = _Part(k * size, size, outputs)   # type: ignore[arg-type]
                    pi = i - part.lo
                    part.n += 1
                    part.ids[pi] = r.row_id
                    which, at, col_score, col_code = part.which, part.at, part.score, part.code
                else:
                    which = {}
                packed = []
                reasons = []
                any_reason = False
                for m, outs in r.scores.items():
                    for o, s in outs.items():
                        v = s.value
                        if type(v) is float and v == v and v not in _INF:
                            value = repr(v)
                        elif v is None:
                            value = None
                        else:
                            value = _dump_value(v)
                        sc = s.score
                        if sc is not None:
                            sc = None if sc != sc else float(sc)   # NaN: none (the value keeps it)
                        res = s.result
                        packed.append((m, o, value, sc, s.passed, res, s.status, s.threshold,
                                       s.properties or None))
                        why = s.reason
                        reasons.append(why)
                        if why is not None:
                            any_reason = True
                        j = which.get(o)
                        if j is not None:
                            at.append(j * size + pi)
                            col_score.append(nan if sc is None else sc)
                            col_code.append(1 if res == "pass" else 2 if res == "fail" else result_code(res, s.status))
                row_params.append((run_id, i, r.row_id, r.conversation_id, r.target_error,
                                   dumps(r.inputs, option=_DUMP, default=_default).decode(),
                                   dumps(packed, option=_DUMP, default=_default).decode(),
                                   dumps(reasons).decode() if any_reason else None))
                if index:
                    docs.append((i, row_doc(r.inputs, reasons)))
                continue
            row_params.append((run_id, r.idx, r.row_id, r.conversation_id, r.target_error, _dumps(r.inputs),
                               None, None))
            reasons = []
            for m, outs in r.scores.items():
                for o, s in outs.items():
                    v = s.value
                    value = None if v is None else (repr(float(v)) if type(v) is float and v == v and v not in _INF
                                                    else _dump_value(v))
                    score_params.append((run_id, r.idx, m, o, value, _finite(s.score), s.passed, s.result,
                                         s.reason, s.status, s.threshold,
                                         _dumps(s.properties) if s.properties else None))
                    reasons.append(s.reason)
            if index:
                docs.append((r.idx, T.row_doc(r.inputs, reasons)))
        done = batch[-1].idx + 1
        full = [k for k, p in (parts or {}).items() if p.n == p.size]
        try:
            with self.engine.begin() as conn:
                # the owner is checked first: a session that lost the run writes nothing
                now = time.time()
                got = conn.execute(update(S.runs).where(S.runs.c.id == run_id, self._owner_check(run_id))
                                   .values(rows_done=done, updated_at=now, heartbeat_at=now))
                if got.rowcount != 1:
                    raise _NotOwner()
                conn.exec_driver_sql(self._insert_rows, row_params)
                if full:
                    conn.execute(insert(S.run_column_parts), [b for k in full for b in parts[k].blobs(run_id, k)])  # type: ignore[index]
                if score_params:
                    conn.exec_driver_sql(self._insert_scores, score_params)
                if docs:
                    conn.exec_driver_sql(self._insert_text, T.index_params(self.engine.dialect.name, run_id,
                                                                           seq or 0, docs))
        except BaseException as exc:
            self._parts.pop(run_id, None)   # the parts not written are made again from the rows
            if isinstance(exc, _NotOwner):
                raise self._lost(run_id) from None
            if not isinstance(exc, SQLAlchemyError):
                raise
            raise AssayError(f"cannot write run {run_id} to the store at {self.display_url}: "
                             f"{getattr(exc, 'orig', exc)} (the rows up to {batch[0].idx} are saved; "
                             "fix the cause and run again with --resume)") from None
        for k in full:
            parts.pop(k, None)   # type: ignore[union-attr]

    def finish_run(self, run_id: str, status: str, *, aggregates: Any = None, summary: Any = None,
                   usage: Any = None, error: str | None = None) -> None:
        """The run's end (``completed``, ``interrupted`` or ``failed``) and this session's.
        ``usage``: the whole run's judge usage (every session's, see :meth:`sessions`).
        A session that lost the run to another process changes nothing; for ``completed``
        that is an error."""
        now = time.time()
        values: dict[str, Any] = {"status": status, "updated_at": now, "error": error}
        if status == "completed":
            values["finished_at"] = now
        for k, v in (("aggregates", aggregates), ("summary", summary), ("usage", usage)):
            if v is not None:
                values[k] = _dumps(v)
        session = self._owned.get(run_id)
        try:
            with self.engine.begin() as conn:
                got = conn.execute(update(S.runs).where(S.runs.c.id == run_id, self._owner_check(run_id))
                                   .values(**values))
                if got.rowcount != 1:
                    raise _NotOwner()
                if session is not None:
                    conn.execute(update(S.run_sessions).where(S.run_sessions.c.run_id == run_id,
                                                              S.run_sessions.c.session == session)
                                 .values(ended_at=now, status=status))
                if status == "completed":
                    self._write_columns(conn, run_id, list(aggregates or {}))
        except _NotOwner:
            if status == "completed":
                raise self._lost(run_id) from None
        finally:
            self._owned.pop(run_id, None)

    def _write_columns(self, conn: Any, run_id: str, outputs: list[str]) -> None:
        """The finished run's scores (float64 by row position, NaN where none) and row ids, in
        parts of :data:`PART_ROWS` rows, each read :data:`COLUMN_BATCH` rows at a time (a range
        of row positions, by the primary keys): what is held is one part and one batch,
        whatever the size of the run."""
        done = conn.execute(select(S.runs.c.rows_done).where(S.runs.c.id == run_id)).scalar_one()
        if self._run_format(run_id)[0] == 2:
            return self._write_packed_columns(conn, run_id, outputs, done)
        conn.execute(delete(S.run_columns).where(S.run_columns.c.run_id == run_id))
        conn.execute(delete(S.run_column_parts).where(S.run_column_parts.c.run_id == run_id))
        code = {o: j for j, o in enumerate(outputs)}
        for part, lo in enumerate(range(0, max(done, 1), PART_ROWS)):
            hi = min(lo + PART_ROWS, done)
            scores = np.full((len(outputs), hi - lo), np.nan)
            ids: list[str | None] = [None] * (hi - lo)
            for b_lo in range(lo, hi, COLUMN_BATCH):
                b_hi = min(b_lo + COLUMN_BATCH, hi)
                got = self._raw(conn, "SELECT idx, output, score FROM scores WHERE run_id = ? AND idx >= ? "
                                      "AND idx < ? AND score IS NOT NULL", (run_id, b_lo, b_hi))
                if got:
                    n = len(got)
                    which = np.fromiter((code.get(r[1], -1) for r in got), dtype=np.int64, count=n)
                    at = np.fromiter((r[0] for r in got), dtype=np.int64, count=n) - lo
                    val = np.fromiter((r[2] for r in got), dtype=np.float64, count=n)
                    mine = which >= 0
                    scores[which[mine], at[mine]] = val[mine]
                for i, rid in self._raw(conn, "SELECT idx, row_id FROM rows WHERE run_id = ? AND idx >= ? "
                                              "AND idx < ?", (run_id, b_lo, b_hi)):
                    ids[i - lo] = rid
            blobs = [{"run_id": run_id, "name": f"score:{o}", "part": part, "data": scores[j].tobytes()}
                     for j, o in enumerate(outputs)]
            blobs.append({"run_id": run_id, "name": "row_id", "part": part, "data": orjson.dumps(ids)})
            conn.execute(insert(S.run_column_parts), blobs)

    def _write_packed_columns(self, conn: Any, run_id: str, outputs: list[str], done: int) -> None:
        """:meth:`_write_columns` for a run whose rows keep their scores: also each output's
        result as int8 codes (:data:`RESULT_CODES`), which the dashboard filters by. The parts
        completed while the run was written are there already (when they have the same
        outputs); the last one comes from memory, others (a resumed run's) from the rows."""
        t = S.run_column_parts
        names = {f"{k}:{o}" for o in outputs for k in ("score", "result")} | {"row_id"}
        have = {}
        for part, name in conn.execute(select(t.c.part, t.c.name).where(t.c.run_id == run_id)):
            have.setdefault(part, set()).add(name)
        if any(got != names for got in have.values()):
            conn.execute(delete(t).where(t.c.run_id == run_id))
            have = {}
        mem = self._parts.pop(run_id, {})
        for part, lo in enumerate(range(0, max(done, 1), PART_ROWS)):
            if part in have:
                continue
            hi = min(lo + PART_ROWS, done)
            acc = mem.get(part)
            if acc is not None and acc.n == hi - lo and acc.size == PART_ROWS and acc.outputs == outputs:
                conn.execute(insert(t), acc.blobs(run_id, part, hi - lo))
                continue
            cols = packed_columns(outputs, hi - lo, (
                (i - lo, rid, sc) for b_lo in range(lo, hi, COLUMN_BATCH)
                for i, rid, sc in self._raw(conn, "SELECT idx, row_id, scores FROM rows WHERE run_id = ? "
                                                  "AND idx >= ? AND idx < ?", (run_id, b_lo, min(b_lo + COLUMN_BATCH, hi)))))
            conn.execute(insert(t), _blobs(run_id, part, cols))

    def row_scores(self, conn: Any, run_id: str, idxs: Sequence[int]) -> dict[int, list[tuple[str, str, Score]]]:
        """The scores of the run's rows at ``idxs``: ``{idx: [(metric, output, Score)]}``, in
        either row form."""
        out: dict[int, list[tuple[str, str, Score]]] = {}
        idxs = list(idxs)
        packed = self._run_format(run_id)[0] == 2
        for lo in range(0, len(idxs), 900):   # stay under SQLite's bound-parameter limit
            part = idxs[lo:lo + 900]
            if packed:
                for i, sc, rs in conn.execute(select(S.rows.c.idx, S.rows.c.scores, S.rows.c.reasons)
                                              .where(S.rows.c.run_id == run_id, S.rows.c.idx.in_(part))):
                    out[i] = unpack_scores(sc, rs)
                continue
            for s in conn.execute(select(S.scores).where(S.scores.c.run_id == run_id, S.scores.c.idx.in_(part))
                                  .order_by(S.scores.c.idx)):
                value = load_value(s.value)
                score = s.score
                if score is None and isinstance(value, float) and not math.isfinite(value):
                    score = value
                out.setdefault(s.idx, []).append((s.metric, s.output, Score(
                    value, score, s.passed, s.result, s.reason, s.status, s.threshold, load_json(s.properties) or {})))
        return out

    def is_packed(self, run_id: str) -> bool:
        """Whether the run's rows keep their scores (runs written since store version 6)."""
        return self._run_format(run_id)[0] == 2

    def live_columns(self, run_id: str, outputs: Sequence[str]) -> dict[str, Any]:
        """The columns of :meth:`columns` (scores, results, row ids) read from the rows of a run
        whose rows keep their scores, whatever its state (a run still going has no stored columns)."""
        with self.engine.connect() as conn:
            got = self._raw(conn, "SELECT idx, row_id, scores FROM rows WHERE run_id = ?", (run_id,))
        n = max((r[0] for r in got), default=-1) + 1
        return packed_columns(list(outputs), n, got)

    def columns(self, run_id: str) -> dict[str, Any]:
        """A finished run's columns: ``{"score:<output>": float64 array, "row_id": list}``;
        empty for a run that did not finish."""
        t = S.run_column_parts
        with self.engine.connect() as conn:
            status = conn.execute(select(S.runs.c.status).where(S.runs.c.id == run_id)).scalar()
            if status != "completed":   # the parts of a run being written are not all there
                return {}
            parts = conn.execute(select(t.c.name, t.c.data).where(t.c.run_id == run_id)
                                 .order_by(t.c.name, t.c.part)).all()
            if not parts:   # a run finished before version 5: one blob per column
                parts = conn.execute(select(S.run_columns.c.name, S.run_columns.c.data)
                                     .where(S.run_columns.c.run_id == run_id)).all()
        by_name: dict[str, list[bytes]] = {}
        for name, data in parts:
            by_name.setdefault(name, []).append(data)
        return {name: ([rid for d in blobs for rid in orjson.loads(d)] if name == "row_id"
                       else np.concatenate([np.frombuffer(d, dtype=np.int8 if name.startswith("result:")
                                                          else np.float64) for d in blobs]))
                for name, blobs in by_name.items()}

    def find_resumable(self, fingerprint: str | None, config_hash: str, name: str | None = None) -> dict | None:
        """The latest unfinished run over the same data with the same configuration."""
        q = (select(S.runs).where(S.runs.c.status.in_(RESUMABLE), S.runs.c.config_hash == config_hash,
                                  S.runs.c.data_fingerprint == fingerprint)
             .order_by(S.runs.c.created_at.desc()).limit(1))
        if name is not None:
            q = q.where(S.runs.c.name == name)
        with self.engine.connect() as conn:
            row = conn.execute(q).mappings().first()
        return _run(row) if row else None

    # -- reading --------------------------------------------------------------------------
    def list_runs(self, *, name: str | None = None, status: str | None = None,
                  limit: int | None = None) -> list[dict[str, Any]]:
        """Runs newest first; ``status`` as shown: ``running`` (alive) and ``stale`` (its
        process gone) are told apart here, both being stored as ``running``."""
        q = select(S.runs).order_by(S.runs.c.created_at.desc())
        if name is not None:
            q = q.where(S.runs.c.name == name)
        live = status in ("running", "stale")
        if status is not None:
            q = q.where(S.runs.c.status == ("running" if live else status))
        if limit is not None and not live:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            got = [_run(r) for r in conn.execute(q).mappings()]
        if live:
            got = [r for r in got if r["status"] == status][:limit]
        return got

    def get_run(self, ref: str) -> dict[str, Any]:
        """A run by id, unique id prefix, name (the latest run with it), or ``last``. A blank
        reference is refused (as a prefix it would match every run)."""
        ref = str(ref or "").strip()
        if not ref:
            raise AssayError("the run reference is empty: name a run by its id, an id prefix, its name or 'last'")
        with self.engine.connect() as conn:
            if ref in ("last", "latest"):
                row = conn.execute(select(S.runs).order_by(S.runs.c.created_at.desc()).limit(1)).mappings().first()
                if row is None:
                    raise AssayError(f"the store at {self.display_url} has no runs yet")
                return _run(row)
            row = conn.execute(select(S.runs).where(S.runs.c.id == ref)).mappings().first()
            if row is not None:
                return _run(row)
            named = conn.execute(select(S.runs).where(S.runs.c.name == ref)
                                 .order_by(S.runs.c.created_at.desc()).limit(1)).mappings().first()
            if named is not None:
                return _run(named)
            pref = conn.execute(select(S.runs).where(S.runs.c.id.like(_like_prefix(ref), escape="\\"))
                                .limit(2)).mappings().all()
        if len(pref) == 1:
            return _run(pref[0])
        if len(pref) > 1:
            raise AssayError(f"run {ref!r} is ambiguous: more than one run id starts with it")
        raise AssayError(f"no run {ref!r} in the store at {self.display_url} (see `assay runs`)")

    def iter_scored(self, run_id: str, *, start: int = 0, stop: int | None = None,
                    batch: int = 2000) -> Iterator[StoredRow]:
        """The run's rows in input order, with their scores, read in batches."""
        lo = start
        packed = self._run_format(run_id)[0] == 2
        with self.engine.connect() as conn:
            while True:
                hi = lo + batch if stop is None else min(lo + batch, stop)
                if hi <= lo:
                    return
                rrows = conn.execute(select(S.rows).where(S.rows.c.run_id == run_id, S.rows.c.idx >= lo,
                                                          S.rows.c.idx < hi).order_by(S.rows.c.idx)).all()
                if not rrows:
                    return
                by_idx: dict[int, dict[str, dict[str, Score]]] = {r.idx: {} for r in rrows}
                if packed:
                    for r in rrows:
                        for m, o, sc in unpack_scores(r.scores, r.reasons):
                            by_idx[r.idx].setdefault(m, {})[o] = sc
                old = () if packed else conn.execute(select(S.scores).where(
                    S.scores.c.run_id == run_id, S.scores.c.idx >= lo, S.scores.c.idx < hi))
                for s in old:
                    value = load_value(s.value)
                    score = s.score
                    if score is None and isinstance(value, float) and not math.isfinite(value):
                        score = value  # stored as NULL, restored from the value
                    by_idx[s.idx].setdefault(s.metric, {})[s.output] = Score(
                        value, score, s.passed, s.result, s.reason, s.status, s.threshold,
                        load_json(s.properties) or {})
                for r in rrows:
                    yield StoredRow(r.idx, r.row_id, r.conversation_id, bool(r.target_error),
                                    orjson.loads(r.inputs), by_idx[r.idx])
                lo = hi

    def load_result(self, ref: str) -> Any:
        """A stored run as an :class:`~assay.results.EvalResult` (rows streamed from the store)."""
        from assay.results import EvalResult, flat_row, output_keys

        run = self.get_run(ref)
        keys = output_keys((run.get("config") or {}).get("layout") or [])

        def rows() -> Iterator[dict[str, Any]]:
            for r in self.iter_scored(run["id"]):
                yield flat_row(r.inputs, r.scores, keys)

        summary = dict(run.get("summary") or {})
        summary.update(run_id=run["id"], name=run["name"], status=run["status"])
        return EvalResult(metrics=run.get("aggregates") or {}, run=summary, row_source=rows)

    def fetch_raw(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        """Rows of a read-only query as plain tuples straight from the driver: for the few
        reads that take a whole run's column. ``?`` marks a parameter."""
        with self.engine.connect() as conn:
            return self._raw(conn, sql, params)

    def _raw(self, conn: Any, sql: str, params: Sequence[Any]) -> list[tuple]:
        return raw_rows(conn, sql, params)

    def count_rows(self, run_id: str) -> int:
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(S.rows).where(S.rows.c.run_id == run_id)).scalar_one()

    def delete_run(self, run_id: str) -> None:
        if not str(run_id or "").strip():
            raise AssayError("the run id to delete is empty")
        with self.engine.begin() as conn:
            got = conn.execute(select(S.runs.c.seq, S.runs.c.row_format).where(S.runs.c.id == run_id)).first()
            if got is not None:
                T.delete_text(conn, run_id, got[0], got[1])
            conn.execute(delete(S.run_columns).where(S.run_columns.c.run_id == run_id))
            conn.execute(delete(S.run_column_parts).where(S.run_column_parts.c.run_id == run_id))
            conn.execute(delete(S.scores).where(S.scores.c.run_id == run_id))
            conn.execute(delete(S.rows).where(S.rows.c.run_id == run_id))
            conn.execute(delete(S.run_sessions).where(S.run_sessions.c.run_id == run_id))
            conn.execute(update(S.benchmarks).where(S.benchmarks.c.run_id == run_id).values(run_id=None))
            conn.execute(delete(S.runs).where(S.runs.c.id == run_id))

    # -- benchmarks -----------------------------------------------------------------------
    def add_benchmark(self, *, kind: str, name: str | None = None, model: str | None = None,
                      task: str | None = None, metrics: Any = None, details: Any = None,
                      run_id: str | None = None, track: str | None = None, created_at: float | None = None,
                      ref: str | None = None, samples: Mapping[str, Any] | None = None) -> int:
        """One benchmark result of any kind; returns its row id (its public ``ref`` is made unless
        given). ``samples``: ``{"<part>/<name>": float array}`` kept in ``benchmark_samples``. The
        store does not read a kind's summary: ``assay.bench.kinds.store_benchmark`` checks it with
        the kind's own check and gives the columns."""
        ref = ref or S.new_ref()
        blobs = [{"name": str(k), "data": np.ascontiguousarray(v, dtype=np.float64).tobytes()}
                 for k, v in (samples or {}).items()]
        try:
            with self.engine.begin() as conn:
                res = conn.execute(insert(S.benchmarks).values(
                    kind=kind, name=name, model=model, task=task,
                    created_at=time.time() if created_at is None else float(created_at),
                    metrics=_dumps(metrics), details=_dumps(details), run_id=run_id, ref=ref, track=track))
                bid = int(res.inserted_primary_key[0])
                if blobs:
                    conn.execute(insert(S.benchmark_samples), [{"benchmark_id": bid, **b} for b in blobs])
                return bid
        except IntegrityError as exc:
            with self.engine.connect() as conn:
                taken = conn.execute(select(S.benchmarks.c.id).where(S.benchmarks.c.ref == ref)).first() is not None
            if taken:
                raise AssayError(f"a benchmark with ref {ref!r} is already in the store at {self.display_url}") from None
            raise AssayError(f"cannot save the benchmark in the store at {self.display_url}: "
                             f"{getattr(exc, 'orig', exc)}") from None

    def get_benchmark(self, ref: str, *, kind: str | None = None) -> dict[str, Any]:
        """A benchmark by ref, unique ref prefix, name (the latest with it), ``latest`` (or
        ``last``), or row id; ``kind`` limits the search (``"perf"``)."""
        ref = str(ref).strip()
        t = S.benchmarks
        base = select(t)
        if kind is not None:
            base = base.where(t.c.kind == kind)
        what = f"{kind} benchmark" if kind else "benchmark"
        if not ref:
            raise AssayError(f"name a {what}: a ref, a ref prefix, a name or 'latest'")
        with self.engine.connect() as conn:
            if ref.lower() in ("last", "latest"):
                row = conn.execute(base.order_by(t.c.created_at.desc(), t.c.id.desc()).limit(1)).mappings().first()
                if row is None:
                    raise AssayError(f"the store at {self.display_url} has no {what} yet")
                return _benchmark(row)
            row = conn.execute(base.where(t.c.ref == ref.lower())).mappings().first()
            if row is None:
                row = conn.execute(base.where(t.c.name == ref).order_by(t.c.created_at.desc(), t.c.id.desc())
                                   .limit(1)).mappings().first()
            if row is not None:
                return _benchmark(row)
            pref = conn.execute(base.where(t.c.ref.like(_like_prefix(ref.lower()), escape="\\"))
                                .limit(2)).mappings().all()
            if len(pref) > 1:
                raise AssayError(f"{what} {ref!r} is ambiguous: more than one ref starts with it; type more of it")
            if not pref and ref.isascii() and ref.isdigit() and int(ref) < 2**63:   # a 64-bit row id
                pref = conn.execute(base.where(t.c.id == int(ref))).mappings().all()
        if pref:
            return _benchmark(pref[0])
        raise AssayError(f"no {what} {ref!r} in the store at {self.display_url} (see `assay bench list`)")

    def benchmark_samples(self, benchmark_id: int) -> dict[int, dict[str, np.ndarray]]:
        """A benchmark's samples: ``{point index: {metric: float64 array}}`` (empty when none
        were kept). Names that are not ``"<int>/<metric>"`` are returned under point ``-1``."""
        with self.engine.connect() as conn:
            got = conn.execute(select(S.benchmark_samples.c.name, S.benchmark_samples.c.data)
                               .where(S.benchmark_samples.c.benchmark_id == int(benchmark_id))).all()
        out: dict[int, dict[str, np.ndarray]] = {}
        for name, data in got:
            point, _, metric_name = name.partition("/")
            idx = int(point) if point.isdigit() and metric_name else -1
            out.setdefault(idx, {})[metric_name if idx >= 0 else name] = np.frombuffer(data, dtype=np.float64)
        return dict(sorted(out.items()))

    def delete_benchmark(self, benchmark_id: int) -> None:
        """A benchmark and its samples."""
        with self.engine.begin() as conn:
            conn.execute(delete(S.benchmark_samples).where(S.benchmark_samples.c.benchmark_id == int(benchmark_id)))
            conn.execute(delete(S.benchmarks).where(S.benchmarks.c.id == int(benchmark_id)))

    def list_benchmarks(self, *, kind: str | None = None, model: str | None = None, track: str | None = None,
                        limit: int | None = None, details: bool = True) -> list[dict[str, Any]]:
        """Benchmarks, newest first. ``details=False`` leaves out the (large) details."""
        t = S.benchmarks
        cols = [c for c in t.c if details or c.name != "details"]
        q = select(*cols).order_by(t.c.created_at.desc(), t.c.id.desc())
        if kind is not None:
            q = q.where(t.c.kind == kind)
        if model is not None:
            q = q.where(t.c.model == model)
        if track is not None:
            q = q.where(t.c.track == track)
        if limit is not None:
            q = q.limit(limit)
        with self.engine.connect() as conn:
            return [_benchmark(r) for r in conn.execute(q).mappings()]


def _benchmark(row: Mapping[str, Any]) -> dict[str, Any]:
    d = dict(row)
    d["metrics"] = load_json(d.get("metrics"))
    if "details" in d:
        d["details"] = load_json(d["details"])
    return d


_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_INF = (math.inf, -math.inf)
_INF_NAMES = {"Infinity": math.inf, "-Infinity": -math.inf}


# A metric output's result as the dashboard filters it (see queries.RESULTS): 0 none or other
RESULT_CODES = {"pass": 1, "fail": 2, "error": 3, "skipped": 4}


def result_code(result: str | None, status: str | None) -> int:
    if result == "pass":
        return 1
    if result == "fail":
        return 2
    if result == "unknown" and status == "error":
        return 3
    if result == "not_applicable" and status == "skipped":
        return 4
    return 0


def unpack_scores(packed: str | None, reasons: str | None) -> list[tuple[str, str, Score]]:
    """``(metric, output, Score)`` of a row whose scores are kept with it (row form 2)."""
    if not packed:
        return []
    items = orjson.loads(packed)
    why = orjson.loads(reasons) if reasons else [None] * len(items)
    out = []
    for (m, o, value, score, passed, result, status, threshold, props), reason in zip(items, why):
        v = load_value(value)
        if score is None and isinstance(v, float) and not math.isfinite(v):
            score = v   # stored as null, restored from the value
        out.append((m, o, Score(v, score, passed, result, reason, status, threshold, props or {})))
    return out


def packed_columns(outputs: list[str], n: int, got: Iterator[tuple[int, Any, str | None]] | Sequence[Any]) -> dict[str, Any]:
    """``score:<o>`` (float64, NaN: none), ``result:<o>`` (int8 :data:`RESULT_CODES`) and
    ``row_id`` of ``n`` rows from ``(position, row id, packed scores)``."""
    code = {o: j for j, o in enumerate(outputs)}
    scores = np.full((len(outputs), n), np.nan)
    results = np.zeros((len(outputs), n), dtype=np.int8)
    ids: list[str | None] = [None] * n
    for i, rid, packed in got:
        ids[i] = rid
        if not packed:
            continue
        for _m, o, value, score, _passed, result, status, _threshold, _props in orjson.loads(packed):
            j = code.get(o)
            if j is None:
                continue
            if score is not None:
                scores[j, i] = score
            elif value in _INF_NAMES:   # JSON has no infinity: the score is null, the value names it
                scores[j, i] = _INF_NAMES[value]
            results[j, i] = result_code(result, status)
    cols: dict[str, Any] = {}
    for j, o in enumerate(outputs):
        cols[f"score:{o}"] = scores[j]
        cols[f"result:{o}"] = results[j]
    cols["row_id"] = ids
    return cols


class _Part:
    """The columns of one part (``size`` rows from ``lo``) of a run being written, gathered
    as its rows are written (:meth:`Store.write_rows`), so that a finished run's columns need
    not be read back: ``at`` = output position * size + row position, with its score and
    result code."""

    __slots__ = ("lo", "size", "outputs", "n", "ids", "at", "score", "code", "which")

    def __init__(self, lo: int, size: int, outputs: list[str]):
        self.lo, self.size, self.outputs, self.n = lo, size, outputs, 0
        self.which = {o: j for j, o in enumerate(outputs)}
        self.ids: list[str | None] = [None] * size
        self.at: list[int] = []
        self.score: list[float] = []
        self.code: list[int] = []

    def blobs(self, run_id: str, part: int, n: int | None = None) -> list[dict[str, Any]]:
        n = self.size if n is None else n
        k = len(self.outputs)
        scores = np.full(k * self.size, np.nan)
        codes = np.zeros(k * self.size, dtype=np.int8)
        at = np.asarray(self.at, dtype=np.int64)
        scores[at] = np.asarray(self.score, dtype=np.float64)
        codes[at] = np.asarray(self.code, dtype=np.int8)
        scores, codes = scores.reshape(k, self.size)[:, :n], codes.reshape(k, self.size)[:, :n]
        cols: dict[str, Any] = {}
        for j, o in enumerate(self.outputs):
            cols[f"score:{o}"] = np.ascontiguousarray(scores[j])
            cols[f"result:{o}"] = np.ascontiguousarray(codes[j])
        cols["row_id"] = self.ids[:n]
        return _blobs(run_id, part, cols)


def _blobs(run_id: str, part: int, cols: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"run_id": run_id, "name": name, "part": part,
             "data": orjson.dumps(v) if name == "row_id" else v.tobytes()} for name, v in cols.items()]


def _layout_outputs(config: Mapping[str, Any]) -> list[str]:
    """The metric outputs of a run's configured layout, in order."""
    return [o for _, outs in config.get("layout") or [] for o in outs]


def _param_mark(engine: Engine) -> str:
    style = engine.dialect.paramstyle
    mark = {"qmark": "?", "format": "%s", "pyformat": "%s"}.get(style)
    if mark is None:
        raise AssayError(f"store: the database driver's parameter style {style!r} is not supported")
    return mark


def _insert_sql(engine: Engine, table: Any) -> str:
    """``INSERT INTO table (all columns) VALUES (...)`` in the driver's parameter style."""
    mark = _param_mark(engine)
    cols = [c.name for c in table.columns]
    return f"INSERT INTO {table.name} ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))})"


def _dump_value(v: Any) -> str | None:
    # JSON has no NaN or infinity; they are kept as their names so a resumed run scores the same.
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    return _dumps(v)


def load_value(v: str | None) -> Any:
    if v is None:
        return None
    if v in _NONFINITE:
        return _NONFINITE[v]
    return orjson.loads(v)


def _finite(x: float | None) -> float | None:
    # NaN is not portable across databases: stored as NULL (the value column keeps it).
    if x is None or x != x:
        return None
    return float(x)


def _like_prefix(ref: str) -> str:
    return ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _run(row: Mapping[str, Any]) -> dict[str, Any]:
    """A run as read: JSON columns parsed; ``status`` ``stale`` for a run stored as running
    whose process is gone."""
    d = dict(row)
    for k in _JSON_COLUMNS:
        d[k] = load_json(d.get(k))
    if is_stale(d):
        d["status"] = "stale"
    return d


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    # the WAL is copied into the database every WAL_CHECKPOINT pages (32 MiB) rather than
    # SQLite's 1,000: a page that several writes of a run change is copied once (~9% less
    # CPU writing a run's rows; the WAL file grows to that size before it is reused)
    cur.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def open_store(url: str | os.PathLike | None | bool = None) -> Store | None:
    """The store at ``url`` or the default location; None when saving is off.

    ``url=False``, ``url="off"`` (``--store off``) or ``$ASSAY_STORE=off`` with no url turns saving off;
    a path (``str`` or ``pathlib.Path``) is a SQLite file, saved to whatever ``$ASSAY_STORE`` says.
    """
    if isinstance(url, os.PathLike):          # a pathlib.Path: the SQLite file it names
        url = os.fspath(url)
    if url is False or (isinstance(url, str) and url.strip().lower() in _OFF):
        return None
    if isinstance(url, Store):
        return url
    u = url if isinstance(url, str) and url.strip() else default_store_url()
    if u is None:
        return None
    return Store(u)
