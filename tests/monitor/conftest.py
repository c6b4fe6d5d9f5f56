from __future__ import annotations

import pytest

from assay.store import Store
from assay.store.monitor import MonitorLog
from tests.helpers.postgres_server import PostgresServer, pg_bin


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server (as tests/store's fixture); skipped where it is not installed."""
    if pg_bin() is None:
        pytest.skip("PostgreSQL is not installed: run `make test` (it installs Debian's postgresql)")
    server = PostgresServer().start()
    yield server.url
    server.stop()


@pytest.fixture
def log(tmp_path):
    """The monitor's score log over a fresh SQLite store."""
    st = Store(str(tmp_path / "a.db"))
    yield MonitorLog(st)
    st.close()

