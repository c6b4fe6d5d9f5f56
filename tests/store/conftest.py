from __future__ import annotations

import pytest

from assay.store import Store
from tests.helpers.postgres_server import PostgresServer, pg_bin


@pytest.fixture(scope="session")
def postgres_url():
    if pg_bin() is None:
        pytest.skip("PostgreSQL is not installed: run `make test` (it installs Debian's postgresql)")
    server = PostgresServer().start()
    yield server.url
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    """A store on SQLite and on a real PostgreSQL server: the same tests on both."""
    url = str(tmp_path / "s.db") if request.param == "sqlite" else request.getfixturevalue("postgres_url")
    st = Store(url)
    yield st
    st.close()
