"""The persistent call cache: no call twice, across processes, keyed by everything but the key."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from assay.models import (
    CallCache,
    Generation,
    LimitedModel,
    Limiter,
    ModelCallError,
    OpenAICompat,
    TokenUsage,
    call_key,
    open_cache,
)
from assay.models.cache import default_cache_path

KEY = "sk-cache-test-SECRET-9f8e7d6c5b4a"
ROWS = [[{"role": "system", "content": "Judge in JSON."}, {"role": "user", "content": f"row {i}"}] for i in range(20)]
SRC = str(Path(__file__).resolve().parents[2] / "src")


def judge(fake, cache, model="m"):
    return LimitedModel(OpenAICompat.endpoint(fake.base_url, model, api_key=KEY), Limiter(8, max_attempts=2), cache)


async def run_all(lm, **kw):
    return await asyncio.gather(*(lm.generate(m, max_tokens=20, **kw) for m in ROWS))


async def test_second_run_makes_zero_calls(fake, tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    lm = judge(fake, cache)
    first = await run_all(lm)
    assert len(fake.chat_requests) == 20 and not any(g.cached for g in first)
    second = await run_all(judge(fake, cache))
    assert len(fake.chat_requests) == 20               # nothing new reached the endpoint
    assert all(g.cached for g in second)
    assert [g.text for g in second] == [g.text for g in first]
    assert second[0].usage == first[0].usage and second[0].raw == first[0].raw
    assert cache.journal_mode == "wal"
    await lm.aclose()


def test_cache_survives_a_new_process(fake, tmp_path):
    db = tmp_path / "c.sqlite"
    script = textwrap.dedent(f"""
        import asyncio, sys
        sys.path.insert(0, {SRC!r})
        from assay.models import CallCache, LimitedModel, Limiter, OpenAICompat
        rows = [[{{"role": "system", "content": "Judge in JSON."}}, {{"role": "user", "content": f"row {{i}}"}}]
                for i in range(20)]
        async def main():
            lm = LimitedModel(OpenAICompat.endpoint({fake.base_url!r}, "m", api_key="k"), Limiter(8),
                              CallCache({str(db)!r}))
            out = await asyncio.gather(*(lm.generate(m, max_tokens=20) for m in rows))
            await lm.aclose()
            print(sum(g.cached for g in out))
        asyncio.run(main())
    """)
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_CACHE"}
    out1 = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out1.returncode == 0, out1.stderr
    assert out1.stdout.strip() == "0" and len(fake.chat_requests) == 20
    out2 = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out2.returncode == 0, out2.stderr
    assert out2.stdout.strip() == "20" and len(fake.chat_requests) == 20


async def test_key_differs_when_anything_that_changes_the_answer_differs(fake, tmp_path):
    base = dict(max_tokens=20, temperature=0.0, response_format=None, logprobs=False, top_logprobs=None)
    ident = OpenAICompat.endpoint(fake.base_url, "m", api_key=KEY).cache_identity
    k0 = call_key(ident, ROWS[0], base)
    variants = [
        call_key(ident, ROWS[1], base),
        call_key(ident, ROWS[0], {**base, "max_tokens": 21}),
        call_key(ident, ROWS[0], {**base, "temperature": 0.7}),
        call_key(ident, ROWS[0], {**base, "response_format": {"type": "json_object"}}),
        call_key(ident, ROWS[0], {**base, "logprobs": True}),
        call_key(ident, ROWS[0], {**base, "top_logprobs": 5}),
        call_key(OpenAICompat.endpoint(fake.base_url, "other-model").cache_identity, ROWS[0], base),
        call_key(OpenAICompat.endpoint("http://10.0.0.1:8000/v1", "m").cache_identity, ROWS[0], base),
    ]
    assert len({k0, *variants}) == len(variants) + 1
    # the same call, keyed twice, and with the params in another order: the same key
    assert call_key(ident, ROWS[0], dict(reversed(list(base.items())))) == k0
    # the API key is no part of the identity
    assert OpenAICompat.endpoint(fake.base_url, "m", api_key="another").cache_identity == ident
    # and through LimitedModel: a new temperature is a new call
    cache = CallCache(tmp_path / "c.sqlite")
    lm = judge(fake, cache)
    await lm.generate(ROWS[0], max_tokens=20)
    await lm.generate(ROWS[0], max_tokens=20, temperature=0.5)
    await lm.generate(ROWS[0], max_tokens=20, response_format={"type": "json_object"})
    await lm.generate(ROWS[0], max_tokens=20)
    assert len(fake.chat_requests) == 3 and len(cache) == 3
    await lm.aclose()


async def test_api_key_is_not_in_the_db_file(fake, tmp_path):
    db = tmp_path / "c.sqlite"
    cache = CallCache(db)
    lm = judge(fake, cache)
    await run_all(lm)
    await lm.aclose()
    for _ in ("open (WAL beside the file)", "closed (checkpointed)"):
        blobs = b"".join(p.read_bytes() for p in tmp_path.glob("c.sqlite*"))
        assert b"fine" in blobs                  # the answers are stored ...
        assert KEY.encode() not in blobs         # ... the key never is
        cache.close()


async def test_each_answer_is_committed_as_it_completes(fake, tmp_path):
    db = tmp_path / "c.sqlite"
    lm = judge(fake, CallCache(db))
    await lm.generate(ROWS[0], max_tokens=20)
    other = sqlite3.connect(db)                  # another reader sees it at once (no close, no flush)
    assert other.execute("select count(*) from calls").fetchone()[0] == 1
    other.close()
    await lm.aclose()


async def test_identical_calls_in_flight_are_made_once(fake, tmp_path):
    fake.default = {"delay": 0.1, "content": '{"score": 3}'}
    lm = judge(fake, CallCache(tmp_path / "c.sqlite"))
    out = await asyncio.gather(*(lm.generate(ROWS[0], max_tokens=20) for _ in range(10)))
    assert len(fake.chat_requests) == 1
    assert sum(not g.cached for g in out) == 1 and lm.stats.shared == 9
    await lm.aclose()


async def test_failed_calls_are_not_cached(fake, tmp_path):
    fake.push({"status": 400, "json": {"error": {"message": "nope"}}})
    cache = CallCache(tmp_path / "c.sqlite")
    lm = judge(fake, cache)
    with pytest.raises(ModelCallError):
        await lm.generate(ROWS[0], max_tokens=20)
    assert len(cache) == 0
    assert (await lm.generate(ROWS[0], max_tokens=20)).cached is False
    await lm.aclose()


def test_several_processes_write_at_once(tmp_path):
    db = tmp_path / "c.sqlite"
    CallCache(db).close()
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SRC!r})
        from assay.models import CallCache, Generation
        c = CallCache({str(db)!r})
        for i in range(300):
            c.put(f"{{sys.argv[1]}}-{{i}}", Generation(text=str(i)))
        print(len(c))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    c = CallCache(db)
    assert len(c) == 900
    assert c.get("2-299").text == "299" and c.get("2-299").cached


def test_generation_round_trip_and_batch_lookup(tmp_path):
    c = CallCache(tmp_path / "c.sqlite")
    g = Generation(text="4", usage=TokenUsage(12, 1), latency_s=0.5, logprobs={"4": -0.1, " 5": -2.3},
                   model="m", raw={"id": "x"}, finish_reason="stop", token_logprobs=[("4", {"4": -0.1})])
    c.put("k1", g)
    c.put_many([("k2", Generation(text="a")), ("k3", Generation(text="b"))])
    back = c.get("k1")
    assert back.cached and back.text == "4" and back.usage == TokenUsage(12, 1)
    assert back.logprobs == {"4": -0.1, " 5": -2.3} and back.token_logprobs == [("4", {"4": -0.1})]
    assert back.raw == {"id": "x"} and back.finish_reason == "stop" and back.latency_s == 0.5
    assert c.get("missing") is None
    many = c.get_many(["k1", "k3", "nope"] + [f"x{i}" for i in range(1200)])
    assert set(many) == {"k1", "k3"}
    assert "k2" in c and len(c) == 3
    c.clear()
    assert len(c) == 0


def test_default_location_and_switching_off(tmp_path, monkeypatch):
    monkeypatch.delenv("ASSAY_CACHE")
    monkeypatch.chdir(tmp_path)
    assert default_cache_path() == tmp_path / ".assay" / "cache.sqlite"
    c = open_cache()
    assert c is not None and (tmp_path / ".assay" / "cache.sqlite").exists()
    c.close()
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "elsewhere" / "x.sqlite"))
    assert default_cache_path() == tmp_path / "elsewhere" / "x.sqlite"
    for off in ("off", "0", "false", "none"):
        monkeypatch.setenv("ASSAY_CACHE", off)
        assert open_cache() is None


def test_a_cache_from_a_newer_schema_is_refused(tmp_path):
    db = tmp_path / "c.sqlite"
    con = sqlite3.connect(db)
    con.execute("PRAGMA user_version=99")
    con.close()
    from assay.errors import AssayError
    with pytest.raises(AssayError, match="ASSAY_CACHE"):
        CallCache(db)


def _child_put(path: str) -> None:
    c = _FORKED["cache"]
    c.put("from-child", Generation(text="child"))
    assert c.get("from-parent").text == "parent"


_FORKED: dict = {}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection(tmp_path):
    import multiprocessing as mp
    c = CallCache(tmp_path / "c.sqlite")
    c.put("from-parent", Generation(text="parent"))
    _FORKED["cache"] = c
    p = mp.get_context("fork").Process(target=_child_put, args=(str(tmp_path),))
    p.start()
    p.join(30)
    assert p.exitcode == 0
    assert c.get("from-child").text == "child" and c.get("from-parent").text == "parent"
