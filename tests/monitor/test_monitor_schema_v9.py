"""Schema version 9 (the monitor's log records on spans, leases, server heartbeats and export
state): a version-8 store is brought up to it and keeps its monitor scores; SQLite."""

from __future__ import annotations

import sqlite3

from sqlalchemy import inspect as sa_inspect

from assay.store import Store
from assay.store import schema as S
from assay.store.monitor import MonitorLog
from tests.helpers.monitor import record_window


def test_a_version_8_store_is_migrated(tmp_path):
    path = tmp_path / "v8.db"
    st = Store(str(path))
    record_window(MonitorLog(st), 1_000, [0.0, 1.0], "old")
    st.close()
    con = sqlite3.connect(path)           # as version 8 wrote it
    con.executescript("""
        DROP TABLE span_events; DROP TABLE monitor_claims; DROP TABLE monitor_servers;
        ALTER TABLE monitor_scores DROP COLUMN export; ALTER TABLE monitor_scores DROP COLUMN export_at;
        ALTER TABLE monitor_scores DROP COLUMN span_ids;
        UPDATE assay_meta SET value = '8' WHERE key = 'schema_version';""")
    con.close()
    st = Store(str(path))
    try:
        assert st.schema_version() == S.SCHEMA_VERSION >= 9
        assert {"span_events", "monitor_claims", "monitor_servers"} <= set(sa_inspect(st.engine).get_table_names())
        assert {"export", "export_at", "span_ids"} <= {c["name"] for c in sa_inspect(st.engine).get_columns(
            "monitor_scores")}
        log = MonitorLog(st)
        assert [r["trace_id"] for r in log.scores("tool_errors")] == ["old-0000", "old-0001"]
        assert log.claim("tool_errors", {"t": 0}, "me", 10, 0.0) == ["t"]
        assert log.export_counts() == {}
    finally:
        st.close()
