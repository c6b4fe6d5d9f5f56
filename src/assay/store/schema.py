"""The store's tables (SQLAlchemy Core) and its versioned migrations.

One schema for SQLite and PostgreSQL. JSON values are stored as text written by orjson,
so they read the same on both and ``LIKE`` searches work on both.

- ``runs``: one row per evaluation run: name, status (running | completed | interrupted |
  failed), data fingerprint, configuration and its hash, judge, versions, aggregates,
  the run summary, judge usage (every session's, added up), timings, rows written so far,
  and its owner while it runs: the session holding it (``owner``), that process's pid and
  host, and its ``heartbeat_at`` (see :mod:`assay.store.sessions`).
- ``run_sessions``: one per process that ran (or resumed) a run: pid, host, when it
  started and ended, how it ended, the row it started from and its judge usage.
- ``rows``: one per evaluated row: its position ``idx`` in the input, the row id, the
  conversation id, the ``inputs.*`` columns as JSON, and (runs written since version 6, whose
  ``runs.row_format`` is 2) every metric output's score in compact form: ``scores``, a JSON list
  of ``[metric, output, value (JSON text), score, passed, result, status, threshold,
  properties]``, and ``reasons``, the JSON list of their reasons (null when none has one).
- ``scores``: one per (row, metric output) of the runs written before version 6 (``row_format``
  null): the eight columns of a row's metric output (value, score, passed, result, reason,
  status, threshold, properties). A finished run of either form also has its scores and
  results as compact columns (``run_column_parts``), which sorting, filtering and charts read.
- ``row_text`` (since version 6): the full-text index of each row's input text and reasons, for
  the dashboard's search: on SQLite an FTS5 table (contentless; its rowid is the run's
  ``runs.seq`` times 2**32 plus the row position), on PostgreSQL a table of ``tsvector``
  (``to_tsvector('simple', ...)``) with a GIN index. Made by :func:`create_text_index`.
- ``run_column_parts``: a finished run's scores and row ids as compact blobs, for comparisons,
  in parts of a fixed number of rows (``run_columns``: the same in one blob per column, as
  runs finished before version 5 have them).
- ``benchmarks``: results of model benchmarks (for the benchmark commands): a short public
  hex ``ref`` that users type (``assay bench show 3f9a``), the ``track`` of scheduled repeats.
- ``benchmark_samples``: a benchmark's raw measurements as float64 blobs, named
  ``"<point index>/<metric>"`` (``"0/ttft"``), so two perf runs can be compared by bootstrap.
- ``spans`` (since version 7): the OpenTelemetry spans ``assay monitor serve`` received, one per
  (trace id, span id) (a span sent twice is kept once): parent, name, kind, service, scope, start
  and end (ns since the epoch), status, attributes / events / resource as JSON, and when it was
  received. Written by :mod:`assay.store.spans`.
- ``traces`` (since version 7): one per trace of those spans: its root span (once received), its
  first start and last end, how many spans it has, when its spans were first and last received,
  and when it was complete (``completion``: ``root``, its root span received, or ``quiet``, no
  span for the quiet period). Indexed by start time (traces in a time window) and by open traces'
  last reception (the quiet-period scan).
- ``monitor_scores`` (since version 8): one per (monitor metric, trace) that the online
  evaluation picked: ``scored``, ``skipped`` (no GenAI content, or the metric does not apply) or
  ``error`` (retried later), the run whose rows hold the scores, the scores themselves (JSON), the
  trace's start, when it was complete and when it was scored (the lag), the tries, the cost.
- ``monitor_alerts`` (since version 8): each firing and clearing of an alert rule: the metric,
  rule and output, the window, the figure and its 95% interval, the trace ids behind it.
  Written by :mod:`assay.store.monitor`.
- ``span_events`` (since version 9): the OTLP log records (``POST /v1/logs``) that carry a trace
  and span id, such as the GenAI conventions' ``gen_ai.client.inference.operation.details`` event
  with the messages: read as events of their span (:mod:`assay.store.spans`).
- ``monitor_claims`` (since version 9): a lease per (monitor metric, trace) a scoring pass holds,
  with its holder and expiry, so two monitor processes on one store never score a trace twice.
- ``monitor_servers`` (since version 9): each running ``assay monitor serve``'s heartbeat: its
  pid, host and address, and what it holds that the tables do not show (spans not yet committed,
  traces waiting to be scored, the evaluation lag), for ``assay monitor status``.
- ``monitor_scores.export`` / ``export_at`` / ``span_ids`` (since version 9): ``pending``, ``sent``
  or ``failed``: whether the score's ``gen_ai.evaluation.result`` events reached the user's endpoint
  (failed ones are re-sent), since when, and the span each record scored (the events' context).
- ``review_queues`` (since version 10): a named queue of rows sampled from a run for human
  review: the run, the metric (and its output), how the rows were picked (``random``,
  ``disagreements`` with another output, ``flaky``), the seed, the label scale (``pass_fail`` or
  ``1-5``) and the row positions (JSON list).
- ``review_labels`` (since version 10): one label per (queue, row, reviewer): the value, a note
  and when it was given (a reviewer's new label of a row replaces the former). Written by
  :mod:`assay.store.review`.
- ``assay_meta``: ``schema_version``.

Migrations: ``MIGRATIONS[v]`` brings a store at version ``v - 1`` to ``v``. A store
written by a newer assay is refused with a clear message rather than misread.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    inspect,
    select,
    update,
)

SCHEMA_VERSION = 10

metadata = MetaData()

meta = Table(
    "assay_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "runs", metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(200), index=True),
    Column("status", String(16), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("finished_at", Float),
    Column("source", Text),
    Column("data_fingerprint", String(64)),
    Column("config_hash", String(64)),
    Column("config", Text),          # JSON: metrics, thresholds, mapping, family, target, options
    Column("metrics", Text),         # JSON list of metric names
    Column("judge", Text),
    Column("versions", Text),        # JSON: assay, python
    Column("aggregates", Text),      # JSON: output -> aggregate
    Column("summary", Text),         # JSON: the run dict of the result
    Column("usage", Text),           # JSON: judge usage and cost
    Column("rows_done", Integer, nullable=False, default=0),
    Column("error", Text),
    Column("owner", String(32)),     # the session that holds the run (run_sessions.session)
    Column("owner_pid", Integer),
    Column("owner_host", String(255)),
    Column("heartbeat_at", Float),
    Column("row_format", Integer),   # 2: rows keep their scores (version 6); null: in ``scores``
    Column("seq", Integer),          # the run's number in the full-text index (SQLite)
)

# One per process that ran a run: the first, then one per resume. ``usage``: that session's
# judge usage (JSON), written with its heartbeats, so a killed session's calls still count.
run_sessions = Table(
    "run_sessions", metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("session", String(32), nullable=False),
    Column("pid", Integer),
    Column("host", String(255)),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("status", String(16)),
    Column("rows_start", Integer, nullable=False, default=0),
    Column("usage", Text),
    PrimaryKeyConstraint("run_id", "session"),
)

rows = Table(
    "rows", metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("idx", Integer, nullable=False),
    Column("row_id", Text),
    Column("conversation_id", Text),
    Column("target_error", Boolean, nullable=False, default=False),
    Column("inputs", Text, nullable=False),
    Column("scores", Text),          # JSON, row_format 2 (see the module's docstring)
    Column("reasons", Text),         # JSON list, row_format 2
    PrimaryKeyConstraint("run_id", "idx"),
)

scores = Table(
    "scores", metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("idx", Integer, nullable=False),
    Column("metric", String(100), nullable=False),
    Column("output", String(100), nullable=False),
    Column("value", Text),           # JSON (numbers, labels, lists)
    Column("score", Float),
    Column("passed", Boolean),
    Column("result", String(16)),
    Column("reason", Text),
    Column("status", String(16), nullable=False),
    Column("threshold", Float),
    Column("properties", Text),      # JSON
    PrimaryKeyConstraint("run_id", "idx", "metric", "output"),
    # (score, idx): sorting by a score and reading an output's scores need not touch the table.
    Index("ix_scores_run_output_score_idx", "run_id", "output", "score", "idx"),
    Index("ix_scores_run_output_result_idx", "run_id", "output", "result", "idx"),
)

# A finished run's columns in compact form, written once when the run completes, so that
# comparing two 100,000-row runs reads a few blobs instead of every score row:
# ``score:<output>`` = float64 scores by row position (NaN: no score), ``row_id`` = JSON list.
run_columns = Table(
    "run_columns", metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(120), nullable=False),
    Column("data", LargeBinary, nullable=False),
    PrimaryKeyConstraint("run_id", "name"),
)

# Since version 5: the same columns in parts of ``store.PART_ROWS`` rows (``part`` 0, 1, ... in row
# order), so that writing them holds one part at a time, whatever the size of the run.
run_column_parts = Table(
    "run_column_parts", metadata,
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(120), nullable=False),
    Column("part", Integer, nullable=False),
    Column("data", LargeBinary, nullable=False),
    PrimaryKeyConstraint("run_id", "name", "part"),
)

benchmarks = Table(
    "benchmarks", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="SET NULL")),
    Column("kind", String(32), nullable=False),     # quality | perf | cost | embed | judge_check
    Column("name", Text),
    Column("model", Text),
    Column("task", Text),
    Column("created_at", Float, nullable=False),
    Column("metrics", Text),                         # JSON
    Column("details", Text),                         # JSON
    Column("ref", String(32)),                       # public hex id (unique; see ix_benchmarks_ref)
    Column("track", String(200)),                    # scheduled repeats of one benchmark share it
    Index("ix_benchmarks_kind_model", "kind", "model"),
    Index("ix_benchmarks_ref", "ref", unique=True),
    Index("ix_benchmarks_track", "track", "created_at"),
)

# A benchmark's samples: ``"<point index>/<metric>"`` -> float64 array (``numpy.tobytes``).
benchmark_samples = Table(
    "benchmark_samples", metadata,
    Column("benchmark_id", Integer, ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False),
    Column("name", String(120), nullable=False),
    Column("data", LargeBinary, nullable=False),
    PrimaryKeyConstraint("benchmark_id", "name"),
)

# Since version 7: what ``assay monitor serve`` receives (see :mod:`assay.store.spans`).
spans = Table(
    "spans", metadata,
    Column("trace_id", String(32), nullable=False),    # lowercase hex
    Column("span_id", String(16), nullable=False),
    Column("parent_id", String(16)),
    Column("name", Text, nullable=False),
    Column("kind", String(16)),
    Column("service", Text),                           # the resource's service.name
    Column("scope", Text),
    Column("start_ns", BigInteger),
    Column("end_ns", BigInteger),
    Column("status", String(8), nullable=False),       # UNSET | OK | ERROR
    Column("status_message", Text),
    Column("attributes", Text),                        # JSON
    Column("events", Text),                            # JSON list of {name, time, attributes}
    Column("resource", Text),                          # JSON
    Column("received_at", Float, nullable=False),
    PrimaryKeyConstraint("trace_id", "span_id"),
    Index("ix_spans_received", "received_at"),
)

traces = Table(
    "traces", metadata,
    Column("trace_id", String(32), primary_key=True),
    Column("service", Text),
    Column("root_span_id", String(16)),
    Column("root_name", Text),
    Column("start_ns", BigInteger),
    Column("end_ns", BigInteger),
    Column("spans", Integer, nullable=False),
    Column("first_received", Float, nullable=False),
    Column("last_received", Float, nullable=False),
    Column("completed_at", Float),
    Column("completion", String(8)),                   # root | quiet
    Index("ix_traces_start", "start_ns"),
    Index("ix_traces_open", "completed_at", "last_received"),
)

# Since version 8: the online evaluation of those traces (see :mod:`assay.store.monitor`).
monitor_scores = Table(
    "monitor_scores", metadata,
    Column("metric", String(200), nullable=False),
    Column("trace_id", String(32), nullable=False),
    Column("status", String(8), nullable=False),       # scored | skipped | error
    Column("run_id", String(36)),                      # the run whose rows scored it (last try)
    Column("scores", Text),                            # JSON: per record, {output: score fields}
    Column("reason", Text),
    Column("start_ns", BigInteger),                    # the trace's start: which window it is in
    Column("completed_at", Float),
    Column("scored_at", Float),
    Column("lag_s", Float),                            # scored_at - completed_at
    Column("attempts", Integer, nullable=False),
    Column("cost", Float),                             # USD of judge calls, the run's share
    Column("export", String(8)),                       # pending | sent | failed (version 9); null: none
    Column("export_at", Float),                        # when ``export`` was last set (version 9)
    Column("span_ids", Text),                          # JSON: the span each record scored (version 9)
    PrimaryKeyConstraint("metric", "trace_id"),
    Index("ix_monitor_scores_start", "metric", "start_ns"),
    Index("ix_monitor_scores_status", "status", "scored_at"),
)

monitor_alerts = Table(
    "monitor_alerts", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("metric", String(200), nullable=False),
    Column("rule", Text, nullable=False),
    Column("output", String(200), nullable=False),
    Column("state", String(8), nullable=False),        # firing | cleared
    Column("window_start_ns", BigInteger, nullable=False),
    Column("window_end_ns", BigInteger, nullable=False),
    Column("at", Float, nullable=False),
    Column("figure", Float),
    Column("ci_low", Float),
    Column("ci_high", Float),
    Column("bound", Text),
    Column("n", Integer),
    Column("reason", Text),
    Column("trace_ids", Text),                         # JSON list
    Index("ix_monitor_alerts_key", "metric", "rule", "output", "window_start_ns"),
)

# Since version 9: log records on a span's context (see :mod:`assay.store.spans`).
span_events = Table(
    "span_events", metadata,
    Column("trace_id", String(32), nullable=False),
    Column("span_id", String(16), nullable=False),
    Column("event_key", String(32), nullable=False),   # a digest of the record: a resent one is kept once
    Column("name", Text, nullable=False),
    Column("time_ns", BigInteger),
    Column("attributes", Text),                        # JSON (the record's body folded in)
    Column("received_at", Float, nullable=False),
    PrimaryKeyConstraint("trace_id", "span_id", "event_key"),
)

# Since version 9: the lease a scoring pass holds on a trace (see :mod:`assay.store.monitor`).
monitor_claims = Table(
    "monitor_claims", metadata,
    Column("metric", String(200), nullable=False),
    Column("trace_id", String(32), nullable=False),
    Column("holder", String(64), nullable=False),
    Column("expires_at", Float, nullable=False),
    PrimaryKeyConstraint("metric", "trace_id"),
)

# Since version 9: the heartbeat of each running ``assay monitor serve`` (see :mod:`assay.store.monitor`).
monitor_servers = Table(
    "monitor_servers", metadata,
    Column("id", String(32), primary_key=True),
    Column("pid", Integer),
    Column("host", String(255)),
    Column("url", Text),
    Column("started_at", Float, nullable=False),
    Column("beat_at", Float, nullable=False),
    Column("period", Float, nullable=False),           # seconds between beats
    Column("state", Text),                             # JSON: the queue depth and the scoring backlog
)


# Since version 10: human review (see :mod:`assay.store.review`).
review_queues = Table(
    "review_queues", metadata,
    Column("name", String(200), primary_key=True),
    Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("metric", String(100), nullable=False),
    Column("output", String(100), nullable=False),
    Column("source", String(16), nullable=False),        # random | disagreements | flaky
    Column("against", String(100)),                      # disagreements: the other output
    Column("seed", Integer, nullable=False),
    Column("scale", String(16), nullable=False),         # pass_fail | 1-5
    Column("idxs", Text, nullable=False),                # JSON list of row positions, in review order
    Column("created_at", Float, nullable=False),
)

review_labels = Table(
    "review_labels", metadata,
    Column("queue", String(200), ForeignKey("review_queues.name", ondelete="CASCADE"), nullable=False),
    Column("idx", Integer, nullable=False),
    Column("reviewer", String(100), nullable=False),
    Column("row_id", Text),
    Column("value", String(16), nullable=False),         # pass | fail | 1..5
    Column("note", Text),
    Column("at", Float, nullable=False),
    PrimaryKeyConstraint("queue", "idx", "reviewer"),
)


def _v2(conn: Connection) -> None:
    """Version 2: the score and result indexes also carry the row position, so a sorted or
    filtered page, and an output's scores, are read from the index alone."""
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_scores_run_output_score")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_scores_run_output_result")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_scores_run_output_score_idx "
                         "ON scores (run_id, output, score, idx)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_scores_run_output_result_idx "
                         "ON scores (run_id, output, result, idx)")


def _v3(conn: Connection) -> None:
    """Version 3: finished runs keep compact columns in ``run_columns`` (runs finished before
    are compared from their score rows, as before)."""
    run_columns.create(conn, checkfirst=True)


def _v4(conn: Connection) -> None:
    """Version 4: benchmarks get a public ``ref`` (given to the ones already stored) and a
    ``track``; their samples are kept in ``benchmark_samples``."""
    have = {c["name"] for c in inspect(conn).get_columns("benchmarks")}
    if "ref" not in have:
        conn.exec_driver_sql("ALTER TABLE benchmarks ADD COLUMN ref VARCHAR(32)")
    if "track" not in have:
        conn.exec_driver_sql("ALTER TABLE benchmarks ADD COLUMN track VARCHAR(200)")
    for (bid,) in conn.execute(select(benchmarks.c.id).where(benchmarks.c.ref.is_(None))).all():
        conn.execute(update(benchmarks).where(benchmarks.c.id == bid).values(ref=new_ref()))
    conn.exec_driver_sql("CREATE UNIQUE INDEX IF NOT EXISTS ix_benchmarks_ref ON benchmarks (ref)")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_benchmarks_track ON benchmarks (track, created_at)")
    benchmark_samples.create(conn, checkfirst=True)


_V5_RUN_COLUMNS = (("owner", "VARCHAR(32)"), ("owner_pid", "INTEGER"), ("owner_host", "VARCHAR(255)"),
                   ("heartbeat_at", "FLOAT"))


def _v5(conn: Connection) -> None:
    """Version 5: a running run has an owner (session, pid, host) and a heartbeat; each session
    of a run is kept in ``run_sessions`` with its judge usage. Every run already stored gets
    one session holding what its ``usage`` says. Finished runs' columns are written in parts
    (``run_column_parts``); those written before stay in ``run_columns``."""
    have = {c["name"] for c in inspect(conn).get_columns("runs")}
    for name, sql_type in _V5_RUN_COLUMNS:
        if name not in have:
            conn.exec_driver_sql(f"ALTER TABLE runs ADD COLUMN {name} {sql_type}")
    run_sessions.create(conn, checkfirst=True)
    run_column_parts.create(conn, checkfirst=True)
    old = conn.execute(select(runs.c.id, runs.c.created_at, runs.c.updated_at, runs.c.status, runs.c.usage)).all()
    if old:
        conn.execute(run_sessions.insert(), [
            {"run_id": r.id, "session": "v4", "started_at": r.created_at,
             "ended_at": None if r.status == "running" else r.updated_at, "status": r.status, "rows_start": 0,
             "usage": r.usage} for r in old])


_V6_COLUMNS = (("runs", "row_format", "INTEGER"), ("runs", "seq", "INTEGER"), ("rows", "scores", "TEXT"),
               ("rows", "reasons", "TEXT"))


def _v6(conn: Connection) -> None:
    """Version 6: new runs keep each row's scores with the row (one insert per row); the
    full-text index of rows (``row_text``) is made, and the rows already stored are indexed
    (their inputs' text and their scores' reasons)."""
    for table, name, sql_type in _V6_COLUMNS:
        if name not in {c["name"] for c in inspect(conn).get_columns(table)}:
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")
    create_text_index(conn)
    from assay.store.search import index_old_rows

    index_old_rows(conn)


def _v7(conn: Connection) -> None:
    """Version 7: the spans and traces ``assay monitor serve`` receives."""
    spans.create(conn, checkfirst=True)
    traces.create(conn, checkfirst=True)


def _v8(conn: Connection) -> None:
    """Version 8: the monitor's online scores and alerts."""
    monitor_scores.create(conn, checkfirst=True)
    monitor_alerts.create(conn, checkfirst=True)


def _v9(conn: Connection) -> None:
    """Version 9: log records on spans, the scoring leases, the servers' heartbeats, and the
    export state of a score."""
    span_events.create(conn, checkfirst=True)
    monitor_claims.create(conn, checkfirst=True)
    monitor_servers.create(conn, checkfirst=True)
    have = {c["name"] for c in inspect(conn).get_columns("monitor_scores")}
    for name, sql_type in (("export", "VARCHAR(8)"), ("export_at", "FLOAT"), ("span_ids", "TEXT")):
        if name not in have:
            conn.exec_driver_sql(f"ALTER TABLE monitor_scores ADD COLUMN {name} {sql_type}")


def _v10(conn: Connection) -> None:
    """Version 10: human review queues and their labels."""
    review_queues.create(conn, checkfirst=True)
    review_labels.create(conn, checkfirst=True)


def create_text_index(conn: Connection) -> None:
    """The full-text index of rows: FTS5 on SQLite, ``tsvector`` + GIN on PostgreSQL; nothing
    on another database or a SQLite built without FTS5 (searches then scan, as before)."""
    name = conn.dialect.name
    if name == "sqlite":
        try:
            conn.exec_driver_sql("CREATE VIRTUAL TABLE IF NOT EXISTS row_text USING fts5(doc, content='', columnsize=0)")
            # merge segments less often while runs are written (a commit per chunk of rows):
            # about a third less work to index, a search reads a few more segments
            conn.exec_driver_sql("INSERT INTO row_text (row_text, rank) VALUES ('automerge', 16)")
        except Exception as exc:   # a SQLite without FTS5: searches scan
            if "fts5" not in str(exc).lower():
                raise
    elif name == "postgresql":
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS row_text (run_id VARCHAR(32) NOT NULL, idx INTEGER NOT NULL, "
                             "doc TSVECTOR NOT NULL, PRIMARY KEY (run_id, idx))")
        conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_row_text_doc ON row_text USING GIN (doc)")
    if conn.exec_driver_sql("SELECT value FROM assay_meta WHERE key = 'text_seq'").first() is None:
        conn.exec_driver_sql("INSERT INTO assay_meta (key, value) VALUES ('text_seq', '0')")


def new_ref() -> str:
    """A fresh public id for a benchmark: 12 hex digits."""
    return uuid.uuid4().hex[:12]


# version -> function that upgrades a store from version - 1. The current version is created whole.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {2: _v2, 3: _v3, 4: _v4, 5: _v5, 6: _v6, 7: _v7, 8: _v8, 9: _v9,
                                                    10: _v10}
