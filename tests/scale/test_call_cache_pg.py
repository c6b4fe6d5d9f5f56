"""The call cache in PostgreSQL (issue 16, item 3): the same answers and vectors as the SQLite
cache, shared by every process that reaches the database; a dropped connection costs a lookup,
never the run; and where the Ray engine's workers keep their cache (:func:`worker_cache`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from assay.errors import AssayError
from assay.models import LimitedModel, Limiter, OpenAICompat, PgCallCache, open_cache
from assay.models.base import Generation, TokenUsage
from assay.models.cache import PG_CALLS, CacheError, CallCache, call_key, embed_key
from tests.helpers.postgres_server import PostgresServer, pg_bin

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL cache needs psycopg (pip install 'assay[postgres]')")


@pytest.fixture(scope="module")
def pg_url():
    if pg_bin() is None:
        pytest.skip("PostgreSQL is not installed: run `make test` (it installs Debian's postgresql)")
    server = PostgresServer().start()
    yield server.url
    server.stop()


@pytest.fixture
def pg(pg_url):
    c = PgCallCache(pg_url)
    c.clear()
    yield c
    c.close()


def gen(text: str) -> Generation:
    return Generation(text=text, model="m", usage=TokenUsage(7, 3))


def test_answers_written_by_one_process_are_read_by_another(pg, pg_url):
    k1 = call_key("http://judge/v1#m", [{"role": "user", "content": "q1"}], {"temperature": 0})
    k2 = call_key("http://judge/v1#m", [{"role": "user", "content": "q2"}], {"temperature": 0})
    assert pg.get(k1) is None
    pg.put(k1, gen("four"))
    pg.put_many([(k2, gen("five"))])
    pg.put(k1, gen("four, again"))                       # written again: replaced, as in SQLite
    other = PgCallCache(pg_url.replace("postgresql://", "postgresql+psycopg://"))   # the store's own URL form
    try:
        hit = other.get(k1)
        assert hit is not None and hit.text == "four, again" and hit.cached
        assert hit.usage.input_tokens == 7
        assert {k: g.text for k, g in other.get_many([k1, k2, "nope"]).items()} == {k1: "four, again", k2: "five"}
        assert other.hits == 3 and other.misses == 1
        assert len(other) == 2 and k2 in other and "nope" not in other
    finally:
        other.close()


def test_vectors_round_trip(pg):
    keys = [embed_key("e", "query", t) for t in ("a", "b")]
    pg.put_vectors(zip(keys, [np.arange(4, dtype=np.float32), np.ones(4)]), model="e")
    got = pg.get_vectors(keys + ["missing"])
    assert set(got) == set(keys)
    assert got[keys[0]].tolist() == [0.0, 1.0, 2.0, 3.0] and got[keys[0]].dtype == np.float32
    assert pg.count_vectors() == 2


def test_open_cache_takes_a_database_url_given_or_from_the_environment(pg_url, monkeypatch, tmp_path):
    c = open_cache(pg_url)
    assert isinstance(c, PgCallCache) and "assay@127.0.0.1" in repr(c)
    c.close()
    monkeypatch.setenv("ASSAY_CACHE", pg_url)
    c = open_cache()
    assert isinstance(c, PgCallCache)
    c.close()
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "c.sqlite"))
    assert type(open_cache()) is CallCache


def test_a_database_that_cannot_be_reached_is_one_line_naming_it_without_the_password():
    with pytest.raises(AssayError) as ei:
        PgCallCache("postgresql://who:secret@127.0.0.1:1/nowhere")
    msg = str(ei.value)
    assert "cannot open the call cache in postgresql://who:***@127.0.0.1:1/nowhere" in msg
    assert "secret" not in msg and "\n" not in msg


def test_a_dropped_connection_costs_one_lookup_then_the_cache_reconnects(pg, pg_url):
    k = call_key("x", [{"role": "user", "content": "q"}], {})
    pg.put(k, gen("kept"))
    pid = pg._conn.info.backend_pid
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(CacheError):
        pg.get(k)
    assert pg.get(k).text == "kept"                       # a fresh connection


def test_a_judge_call_is_paid_once_across_two_models_sharing_the_database(fake, pg_url, pg):
    """Two judges (two processes' worth: two connections) on one database: the second asks nothing."""
    fake.default = {"content": '{"score": 4, "reason": "fine"}'}
    msgs = [{"role": "user", "content": "Rate this answer."}]

    async def ask(cache):
        lm = LimitedModel(OpenAICompat.endpoint(fake.base_url, "m"), Limiter(2), cache)
        try:
            return await lm.generate(msgs, temperature=0.0)
        finally:
            await lm.aclose()

    first = asyncio.run(ask(PgCallCache(pg_url)))
    second = asyncio.run(ask(PgCallCache(pg_url)))
    assert len(fake.chat_requests) == 1
    assert not first.cached and second.cached and second.text == first.text
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(f"SELECT count(*) FROM {PG_CALLS}").fetchone()[0] == 1


def test_a_cache_error_during_a_run_costs_the_cache_not_the_call(fake, pg_url):
    fake.default = {"content": "ok"}
    cache = PgCallCache(pg_url)
    cache.close()
    cache.url = "postgresql://assay@127.0.0.1:1/assay"     # the database went away after it was opened

    async def ask():
        lm = LimitedModel(OpenAICompat.endpoint(fake.base_url, "m"), Limiter(2), cache)
        try:
            return await lm.generate([{"role": "user", "content": "hi"}])
        finally:
            await lm.aclose()

    assert asyncio.run(ask()).text == "ok"
    assert len(fake.chat_requests) == 1


# -- where the Ray engine's workers keep the cache --------------------------------------------------

class _Judge:
    def __init__(self, cache):
        self.cache = cache


class _Cache:
    def __init__(self, path=None, url=None):
        self.path, self.url = path, url


class _Store:
    """A stand-in with a SQLAlchemy engine's ``dialect.name`` and ``url``."""

    def __init__(self, url: str):
        from sqlalchemy import create_engine

        self.engine = create_engine(url)


def test_worker_cache_is_the_store_database_when_the_store_is_postgresql(monkeypatch, tmp_path):
    from assay.scale.ray_engine import PER_WORKER_CACHE, worker_cache

    pg_store = _Store("postgresql+psycopg://u:pw@db:5432/assay")
    lite = _Store(f"sqlite:///{tmp_path / 'runs.db'}")
    sqlite_judge = _Judge(_Cache(path=Path("rel/cache.sqlite")))
    # the store's database, on this machine or a cluster, password included (the workers connect)
    assert worker_cache(sqlite_judge, pg_store, None) == ("postgresql+psycopg://u:pw@db:5432/assay", None)
    assert worker_cache(sqlite_judge, pg_store, "ray://head:10001")[0].startswith("postgresql+psycopg://u:pw@db")
    # a cache the driver keeps in a database wins
    assert worker_cache(_Judge(_Cache(url="postgresql://c/db")), pg_store, "ray://h:1") == ("postgresql://c/db", None)
    # SQLite: the driver's file on this machine; on a cluster, each worker's own and a note
    assert worker_cache(sqlite_judge, lite, None) == (str(Path("rel/cache.sqlite").resolve()), None)
    assert worker_cache(sqlite_judge, lite, "ray://head:10001") == (None, PER_WORKER_CACHE)
    assert "per worker" in PER_WORKER_CACHE and "\n" not in PER_WORKER_CACHE
    # the cache turned off stays off
    assert worker_cache(_Judge(None), pg_store, None) == ("off", None)
    # no judge: the driver's setting; a file path is not sent to another machine
    monkeypatch.setenv("ASSAY_CACHE", "/tmp/x.sqlite")
    assert worker_cache(None, None, None) == ("/tmp/x.sqlite", None)
    assert worker_cache(None, None, "ray://h:1") == (None, None)


class _Runner:
    def __init__(self, judge, store):
        from types import SimpleNamespace

        self.ctx = SimpleNamespace(judge=judge)
        self.saved = SimpleNamespace(store=store)


def test_the_workers_settings_carry_the_cache_and_a_remote_sqlite_run_says_it_is_per_worker(monkeypatch, tmp_path):
    from assay.scale.ray_engine import PER_WORKER_CACHE, RayScorer

    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "c.sqlite"))
    monkeypatch.setenv("ASSAY_JUDGE_TIMEOUT", "30")
    judge = _Judge(_Cache(path=tmp_path / "c.sqlite"))

    def env_of(store, address):
        rs = RayScorer(_Runner(judge, store), None, address=address, judge=None, concurrency=None, timeout=None,
                       max_attempts=None, actors=None)
        return rs.worker_env(), rs.cache_note

    env, note = env_of(_Store("postgresql+psycopg://u:pw@db/assay"), "ray://head:10001")
    assert env["ASSAY_CACHE"] == "postgresql+psycopg://u:pw@db/assay" and note is None
    assert env["ASSAY_JUDGE_TIMEOUT"] == "30"                 # the other settings travel as they are
    env, note = env_of(_Store(f"sqlite:///{tmp_path / 'runs.db'}"), "ray://head:10001")
    assert "ASSAY_CACHE" not in env and note == PER_WORKER_CACHE
    env, note = env_of(_Store(f"sqlite:///{tmp_path / 'runs.db'}"), None)
    assert env["ASSAY_CACHE"] == str(tmp_path / "c.sqlite") and note is None
