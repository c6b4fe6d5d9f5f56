"""The lean HTTP client (judges, models, embeddings, ``/v1/models``, ``/tokenize``) against servers
that misbehave on purpose (issue 28, item 2): each answer below ends within the client's timeout
with one clear error, and what the client keeps for one answer is capped (the body, the head,
a decompressed body). Every request runs under a guard (a hang, or a loop that never yields,
fails the test instead of hanging it); the bound under test is the client's own ``timeout``."""

from __future__ import annotations

import asyncio
import gzip
import time
import tracemalloc
import zlib

import pytest

from assay.models import ModelCallError, OpenAICompat
from assay.models.http import MAX_BODY, AnswerTooLarge, LeanHTTP, ProtocolError
from tests.helpers.hostile_http import HostileServer, hang_guard

OK_HEAD = b"HTTP/1.1 200 OK\r\n"
GUARD = 20.0          # seconds: only turns a hang into a failure


def client(url: str, **kw) -> LeanHTTP:
    return LeanHTTP(url, timeout=kw.pop("timeout", 2.0), **kw)


async def bounded(coro):
    """``await coro``, failing the test (not hanging it) past ``GUARD`` seconds."""
    task = asyncio.ensure_future(coro)
    with hang_guard(GUARD + 5):         # a parser that spins without yielding to the loop
        done, _ = await asyncio.wait({task}, timeout=GUARD)
    if not done:
        task.cancel()
        raise AssertionError(f"the client hung past the test's guard ({GUARD:g} s)")
    return task.result()


async def ask(script: list, **kw) -> tuple[BaseException | None, float, HostileServer]:
    """The error the client raised for one GET against ``script`` (None: an answer), and how long it took."""
    with HostileServer(script) as srv:
        http = client(srv.url, **kw)
        t0 = time.monotonic()
        try:
            await bounded(http.request(http.head("GET", "/v1/models", {})))
            err = None
        except AssertionError:
            raise
        except Exception as exc:
            err = exc
        finally:
            http.abandon()
        return err, time.monotonic() - t0, srv


@pytest.mark.parametrize("size", [b"-5", b"+5", b"0x5", b"1_0", b" "])
async def test_a_chunk_size_that_is_not_hex_digits_is_refused(size):
    err, _, _ = await ask([OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + size + b"\r\nhello\r\n0\r\n\r\n"])
    assert isinstance(err, ProtocolError) and "chunk size" in str(err)


async def test_a_chunk_size_of_2_to_the_64_is_refused_at_once():
    err, _, srv = await ask([OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n" % 2**64, ("repeat", b"x" * 65536)],
                            timeout=10)
    assert isinstance(err, AnswerTooLarge) and "chunk" in str(err) and "16 MiB" in str(err)
    assert srv.sent < 64 * MAX_BODY


@pytest.mark.parametrize("length", [b"-5", b"+5", b"5, 6", b"0x10", b"99999999999999999999"])
async def test_a_content_length_that_is_not_a_size_is_refused(length):
    err, _, _ = await ask([OK_HEAD + b"Content-Length: " + length + b"\r\n\r\nhello"])
    assert isinstance(err, ProtocolError), err
    assert "Content-Length" in str(err)


async def test_repeated_equal_content_lengths_are_one():
    err, _, _ = await ask([OK_HEAD + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"])
    assert err is None


async def test_a_flood_of_100_continue_heads_ends_with_one_error():
    err, _, _ = await ask([("repeat", b"HTTP/1.1 100 Continue\r\n\r\n")])
    assert isinstance(err, ProtocolError) and "informational" in str(err)


async def test_a_few_informational_heads_are_read_past():
    body = b'{"data": []}'
    err, _, _ = await ask([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                           + OK_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body])
    assert err is None


async def test_headers_that_never_end_are_cut_at_the_head_cap():
    err, _, srv = await ask([OK_HEAD, ("repeat", b"X-Padding: " + b"a" * 100 + b"\r\n")])
    assert isinstance(err, ProtocolError) and "64 KiB" in str(err)


async def test_headers_dripping_slowly_end_at_the_timeout():
    err, took, _ = await ask([OK_HEAD, ("drip", b"X-A: b\r\n", 0.05)], timeout=1.0)
    assert isinstance(err, TimeoutError) and "1 s" in str(err)
    assert took < GUARD


async def test_a_server_that_accepts_and_never_answers_ends_at_the_timeout():
    err, _, srv = await ask(["hold"], timeout=1.0)
    assert isinstance(err, TimeoutError) and "no complete answer in 1 s" in str(err)
    assert srv.requests == 1


async def test_a_server_that_never_reads_the_request_ends_at_the_timeout():
    with HostileServer(["deaf"]) as srv:
        http = client(srv.url, timeout=1.0)
        with pytest.raises(TimeoutError):
            await bounded(http.request(http.head("POST", "/", {}), b"x" * (48 << 20)))
        http.abandon()


async def test_the_sdk_transport_is_bounded_as_a_whole():
    """The SDK's own timeout is per read: a server that sends a header line now and then never
    trips it. The call as a whole is bounded by the model's timeout."""
    with HostileServer([OK_HEAD, ("drip", b"X-A: b\r\n", 0.2)]) as srv:
        m = OpenAICompat.endpoint(f"{srv.url}/v1", "m", transport="sdk", timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises(ModelCallError) as ei:
            await bounded(m.generate([{"role": "user", "content": "hi"}]))
        await m.aclose()
    assert ei.value.kind == "timeout" and time.monotonic() - t0 < GUARD


async def test_the_default_timeout_bounds_every_request():
    http = LeanHTTP("http://127.0.0.1:9")
    assert 0 < http.timeout <= 600 and http.max_body == MAX_BODY == 16 << 20


@pytest.mark.parametrize("framing", ["chunked", "close", "length"])
async def test_an_endless_body_ends_at_the_body_cap(framing):
    heads = {"chunked": b"Transfer-Encoding: chunked\r\n\r\n", "close": b"Connection: close\r\n\r\n",
             "length": b"Content-Length: %d\r\n\r\n" % (1 << 40)}
    piece = b"8000\r\n" + b"x" * 0x8000 + b"\r\n" if framing == "chunked" else b"x" * 65536
    err, _, srv = await ask([OK_HEAD + heads[framing], ("repeat", piece)], max_body=1 << 20, timeout=10)
    assert isinstance(err, AnswerTooLarge) and "1 MiB" in str(err)
    assert srv.sent < 64 << 20          # stopped near the cap, not at the server's ceiling


async def test_a_per_request_cap_overrides_the_client_default():
    body = b"x" * (3 << 20)
    script = [OK_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body]
    err, _, _ = await ask(script, max_body=1 << 20)
    assert isinstance(err, AnswerTooLarge)
    with HostileServer(script) as srv:
        http = client(srv.url, max_body=1 << 20)
        resp = await bounded(http.request(http.head("GET", "/", {}), max_body=4 << 20))
        http.abandon()
    assert resp.body == body


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_compression_bomb_stops_at_the_body_cap(encoding):
    raw = bytes(64 << 20)                                      # 64 MiB of zeros: ~64 KB compressed
    packed = gzip.compress(raw, 9) if encoding == "gzip" else zlib.compress(raw, 9)
    del raw
    tracemalloc.start()
    try:
        err, _, _ = await ask([OK_HEAD + b"Content-Encoding: %s\r\nContent-Length: %d\r\n\r\n"
                               % (encoding.encode(), len(packed)) + packed], max_body=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(err, AnswerTooLarge) and "decompressed" in str(err) and "1 MiB" in str(err)
    assert peak < 16 << 20, f"peak {peak / 2**20:.1f} MiB while decompressing"


async def test_a_compressed_body_within_the_cap_is_read():
    body = b'{"data": [{"id": "m"}]}' * 1000
    packed = gzip.compress(body)
    err, _, _ = await ask([OK_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed])
    assert err is None
    with HostileServer([OK_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed)
                        + packed]) as srv:
        http = client(srv.url)
        resp = await bounded(http.request(http.head("GET", "/", {})))
        http.abandon()
    assert resp.body == body


async def test_bytes_sent_to_an_idle_connection_are_not_kept():
    body = b"{}"
    answer = OK_HEAD + b"Content-Length: 2\r\n\r\n" + body
    with HostileServer([answer, ("repeat", b"junk" * 16384)]) as srv:
        http = client(srv.url)
        resp = await bounded(http.request(http.head("GET", "/", {})))
        assert resp.body == body
        await asyncio.sleep(0.3)                                # the junk arrives while it sits idle
        assert all(len(c.buf) == 0 and c.closed for c in http._idle) or not http._idle
        http.abandon()


async def test_the_models_list_bomb_is_one_line_for_the_user():
    """``GET /v1/models`` (a model named by its server) under the same caps."""
    raw = bytes(40 << 20)
    packed = gzip.compress(raw, 9)
    del raw
    script = [OK_HEAD + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed]
    with HostileServer(script) as srv:
        m = OpenAICompat.endpoint(f"{srv.url}/v1", None, transport="lean", timeout=5)
        m._lean().max_body = 1 << 20
        with pytest.raises(Exception) as ei:
            await bounded(m.generate([{"role": "user", "content": "hi"}]))
        await m.aclose()
    assert "GET /models" in str(ei.value) and "\n" not in str(ei.value)
    assert "over the 1 MiB cap" in str(ei.value)


async def test_an_answer_over_the_cap_is_a_model_error_not_retried():
    body = b"x" * (2 << 20)
    with HostileServer([OK_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body]) as srv:
        m = OpenAICompat.endpoint(f"{srv.url}/v1", "m", transport="lean", timeout=5)
        m._lean().max_body = 1 << 20
        with pytest.raises(ModelCallError) as ei:
            await bounded(m.generate([{"role": "user", "content": "hi"}]))
        await m.aclose()
    assert ei.value.kind == "bad_response" and not ei.value.retryable
    assert "1 MiB" in str(ei.value)


async def test_an_embeddings_answer_may_pass_the_default_cap_with_many_texts():
    """An embeddings answer holds up to 256 KiB per text (120 texts: 30 MiB), so big vectors in
    float JSON are not cut at the 16 MiB default."""
    import orjson

    dims, n = 8192, 120
    row = [0.12345678901234567] * dims
    body = orjson.dumps({"data": [{"index": i, "embedding": row} for i in range(n)], "model": "e",
                         "usage": {"prompt_tokens": n}})
    assert MAX_BODY < len(body) < n * (256 << 10)
    with HostileServer([OK_HEAD + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                        + body]) as srv:
        m = OpenAICompat.endpoint(f"{srv.url}/v1", "e", transport="lean", timeout=10)
        vectors = await bounded(m.embed([f"text {i}" for i in range(n)]))
        await m.aclose()
    assert vectors.shape == (n, dims)
