"""The lean HTTP/1.1 client's framing and connection reuse, at the wire level."""

from __future__ import annotations

import gzip
import json

import pytest

from assay.models import LimitedModel, Limiter, ModelCallError, OpenAICompat
from assay.models.http import LeanHTTP
from tests.helpers.fake_openai_server import chat_json

MSG = [{"role": "user", "content": "Rate in JSON."}]


def body(text: str = '{"score": 5}') -> bytes:
    return json.dumps(chat_json(text)).encode()


def chunked(payload: bytes, size: int = 7) -> bytes:
    parts = [b"%x;ext=1\r\n%s\r\n" % (len(payload[i:i + size]), payload[i:i + size])
             for i in range(0, len(payload), size)]
    return b"".join(parts) + b"0\r\nX-Trailer: t\r\n\r\n"


WIRE = {
    "content-length, split in pieces": [b"HTTP/1.1 200 OK\r\nContent-Le", b"ngth: %d\r\n\r\n" % len(body()),
                                        body()[:10], body()[10:]],
    "chunked": [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body())],
    "chunked in pieces": [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunked(body())[:15],
                          chunked(body())[15:]],
    "100 continue first": [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                           % len(body()) + body()],
    "gzip": [b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
             % len(gzip.compress(body())) + gzip.compress(body())],
}


@pytest.mark.parametrize("case", list(WIRE))
async def test_framings_are_read(fake, case):
    fake.push({"wire": WIRE[case]})
    m = OpenAICompat.endpoint(fake.base_url, "m", transport="lean")
    g = await m.generate(MSG)
    assert g.text == '{"score": 5}'
    g2 = await m.generate(MSG)   # and the connection is usable (or replaced) afterwards
    assert g2.text
    await m.aclose()


async def test_read_until_close_and_connection_close(fake):
    fake.push({"wire": [b"HTTP/1.0 200 OK\r\n\r\n" + body()], "close_after": True},
              {"wire": [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body())
                        + body()], "close_after": True})
    m = OpenAICompat.endpoint(fake.base_url, "m", transport="lean")
    assert (await m.generate(MSG)).text == '{"score": 5}'
    assert (await m.generate(MSG)).text == '{"score": 5}'
    assert (await m.generate(MSG)).text   # a fresh connection each time
    await m.aclose()


async def test_connections_are_reused(fake):
    m = OpenAICompat.endpoint(fake.base_url, "m", transport="lean")
    for _ in range(5):
        await m.generate(MSG)
    assert len(m._http._idle) == 1
    await m.aclose()


async def test_a_reused_connection_closed_by_the_server_is_replaced_silently(fake):
    lm = LimitedModel(OpenAICompat.endpoint(fake.base_url, "m", transport="lean"), Limiter(2, max_attempts=1))
    await lm.generate(MSG)                       # leaves a pooled connection
    fake.push({"close": True})                   # the server drops it as the next request arrives
    g = await lm.generate(MSG + [{"role": "user", "content": "again"}])
    assert g.text and len(fake.chat_requests) == 3 and lm.limiter.stats.requests == 2
    await lm.aclose()


async def test_server_closing_idle_connections_is_noticed(fake):
    fake.push({"content": "1", "close_after": True})
    m = OpenAICompat.endpoint(fake.base_url, "m", transport="lean")
    await m.generate(MSG)
    import asyncio
    await asyncio.sleep(0.05)
    assert (await m.generate(MSG)).text
    await m.aclose()


@pytest.mark.parametrize("wire", [
    [b"SSH-2.0-OpenSSH\r\n\r\n"],
    [b"HTTP/1.1 abc Nope\r\n\r\n"],
    [b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"partial"],
    [b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\nxx"],
    [b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nxxxx"],
    [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"],
])
async def test_unreadable_answers_are_connection_errors(fake, wire):
    fake.push({"wire": wire, "close_after": True})
    m = OpenAICompat.endpoint(fake.base_url, "m", transport="lean")
    with pytest.raises(ModelCallError) as ei:
        await m.generate(MSG)
    assert ei.value.kind == "connection" and ei.value.retryable
    await m.aclose()


def test_head_and_host_header():
    h = LeanHTTP("https://example.com/openai/v1")
    assert (h.port, h.host_header) == (443, "example.com")
    assert h.head("POST", "/x", {"A": "b"}) == b"POST /x HTTP/1.1\r\nHost: example.com\r\nA: b\r\nContent-Length: "
    assert LeanHTTP("http://[::1]:8000/v1").host_header == "[::1]:8000"
    with pytest.raises(ValueError):
        LeanHTTP("ftp://x")


def test_a_proxy_in_the_environment_selects_the_sdk_transport(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert OpenAICompat.endpoint("https://api.example.com/v1", "m").transport == "sdk"
    assert OpenAICompat.endpoint("http://127.0.0.1:8000/v1", "m").transport == "lean"
