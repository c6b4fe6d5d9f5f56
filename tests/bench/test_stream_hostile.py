"""`assay bench perf`'s streaming client and its decoder against servers that misbehave on
purpose (issue 28, item 2): a bad chunk size, a chunk of 2^64 bytes, a negative Content-Length, a
flood of ``100 Continue`` heads, headers that never end, an SSE event that never ends, an endless
body. Each exchange ends within the client's timeout with one cause and one line, what is kept
per exchange is capped, and decoding is linear in the answer's size (counted in bytes the
decoder copied or searched, never timed)."""

from __future__ import annotations

import asyncio
import json

import pytest

from assay.bench.perf.stream import MAX_ANSWER, Exchange, StreamClient, decode
from tests.helpers.hostile_http import HostileServer, hang_guard

GUARD = 20.0          # seconds: only turns a hang into a failure
OK_HEAD = b"HTTP/1.1 200 OK\r\n"
SSE_HEAD = OK_HEAD + b"Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: 2\r\n\r\n{}")


async def exchange(script: list, *, kernel: bool = True, request: bytes = REQUEST,
                   **kw) -> tuple[Exchange, HostileServer, list]:
    """One exchange against ``script``; also the exceptions the event loop saw (none expected)."""
    loop = asyncio.get_running_loop()
    seen: list = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx.get("exception") or ctx.get("message")))
    with HostileServer(script) as srv:
        client = StreamClient(srv.url, timeout=kw.pop("timeout", 2.0), stall_timeout=kw.pop("stall_timeout", 2.0),
                              kernel_stamps=kernel, **kw)
        task = asyncio.ensure_future(client.request(request))
        try:
            with hang_guard(GUARD + 5):
                done, _ = await asyncio.wait({task}, timeout=GUARD)
            if not done:
                task.cancel()
                raise AssertionError(f"the exchange hung past the test's guard ({GUARD:g} s)")
            return task.result(), srv, seen
        finally:
            await client.aclose()
            loop.set_exception_handler(None)


def decoded(ex: Exchange):
    """decode(ex), or the ValueError it raised; bounded (a decoder that spins fails the test)."""
    with hang_guard(GUARD):
        try:
            return decode(ex)
        except ValueError as exc:
            return exc


def one_line(text: str) -> bool:
    return bool(text) and "\n" not in text and len(text) < 300


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "loop"])
@pytest.mark.parametrize("size", [b"-5", b"+5", b"0x5", b"1_0"])
async def test_a_chunk_size_that_is_not_hex_digits_is_a_bad_answer(kernel, size):
    ex, _, seen = await exchange([SSE_HEAD + size + b"\r\ndata: {}\n\n\r\n0\r\n\r\n"], kernel=kernel)
    assert ex.error == "bad answer" and "chunk size" in ex.detail and one_line(ex.detail)
    got = decoded(ex)
    assert isinstance(got, ValueError) and "chunk size" in str(got)
    assert not seen


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "loop"])
async def test_a_chunk_of_2_to_the_64_bytes_is_too_large_at_once(kernel):
    ex, srv, _ = await exchange([SSE_HEAD + b"%x\r\n" % 2**64, ("repeat", b"x" * 65536)], kernel=kernel, timeout=30)
    assert ex.error == "too large" and "16 MiB" in ex.detail and one_line(ex.detail)
    assert srv.sent < 4 * MAX_ANSWER


@pytest.mark.parametrize("length", [b"-5", b"+5", b"5, 6", b"x"])
async def test_a_content_length_that_is_not_a_size_is_a_bad_answer(length):
    ex, _, _ = await exchange([OK_HEAD + b"Content-Length: " + length + b"\r\n\r\n{}"])
    assert ex.error == "bad answer" and "Content-Length" in ex.detail and one_line(ex.detail)
    assert isinstance(decoded(ex), ValueError)


async def test_a_content_length_over_the_cap_is_too_large_at_once():
    ex, _, _ = await exchange([OK_HEAD + b"Content-Length: %d\r\n\r\n" % 2**64, ("repeat", b"x" * 65536)])
    assert ex.error == "too large" and "Content-Length" in ex.detail


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "loop"])
async def test_a_flood_of_100_continue_heads_is_one_error_not_tracebacks(kernel):
    ex, _, seen = await exchange([("repeat", b"HTTP/1.1 100 Continue\r\n\r\n" * 64)], kernel=kernel)
    assert ex.error == "bad answer" and "informational" in ex.detail and one_line(ex.detail)
    assert not seen, seen                         # no RecursionError escaped into the event loop
    assert isinstance(decoded(ex), ValueError)


async def test_a_few_informational_heads_are_read_past():
    body = b"data: {}\n\n"
    ex, _, _ = await exchange([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
                               + SSE_HEAD + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"])
    assert ex.error is None and ex.complete
    d = decoded(ex)
    assert d.status == 200 and d.ended and [e for _, e in d.events] == [b"{}"]


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "loop"])
async def test_headers_that_never_end_are_cut_at_the_head_cap(kernel):
    ex, _, _ = await exchange([OK_HEAD, ("repeat", b"X-Padding: " + b"a" * 100 + b"\r\n")], kernel=kernel)
    assert ex.error == "bad answer" and "64 KiB" in ex.detail and one_line(ex.detail)
    assert ex.size < 2 * (64 << 10) + (1 << 18)
    got = decoded(ex)
    assert isinstance(got, ValueError) and "64 KiB" in str(got)


async def test_headers_dripping_slowly_end_at_the_timeout():
    ex, _, _ = await exchange([OK_HEAD, ("drip", b"X-A: b\r\n", 0.05)], timeout=1.0, stall_timeout=0.5)
    assert ex.error == "timeout" and "1 s" in ex.detail


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "loop"])
async def test_a_server_that_never_reads_the_request_ends_at_the_timeout(kernel):
    body = b"x" * (48 << 20)             # more than the socket buffers hold
    big = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    ex, _, _ = await exchange(["deaf"], kernel=kernel, request=big, timeout=1.0, stall_timeout=0.5)
    assert ex.error in ("timeout", "stall") and one_line(ex.detail)


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "loop"])
async def test_an_sse_event_that_never_ends_stops_at_the_answer_cap(kernel):
    piece = b"8000\r\n" + b"x" * 0x8000 + b"\r\n"
    ex, srv, _ = await exchange([SSE_HEAD + b"6\r\ndata: \r\n", ("repeat", piece)], kernel=kernel,
                                max_answer=1 << 20, timeout=30, stall_timeout=30)
    assert ex.error == "too large" and "1 MiB" in ex.detail and one_line(ex.detail)
    assert ex.size <= (1 << 20) + (1 << 18)                   # at most one read past the cap
    assert srv.sent < 64 << 20
    d = decoded(ex)
    assert d.events == [] and not d.ended                    # the event never ended: no event


@pytest.mark.parametrize("head", [b"Connection: close\r\n\r\n", b"Content-Length: 1099511627776\r\n\r\n"])
async def test_an_endless_body_stops_at_the_answer_cap(head):
    ex, _, _ = await exchange([OK_HEAD + head, ("repeat", b"x" * 65536)], max_answer=1 << 20, timeout=30)
    assert ex.error == "too large" and "1 MiB" in ex.detail


def test_the_default_cap_is_16_mib():
    assert MAX_ANSWER == 16 << 20
    assert StreamClient("http://127.0.0.1:9").max_answer == MAX_ANSWER


# -- the decoder on its own ------------------------------------------------------------------------

def ex_of(raw: bytes, piece: int, error: str | None = None) -> Exchange:
    ex = Exchange(sent=0.0, reads=[(i / 1e6, raw[i:i + piece]) for i in range(0, len(raw), piece)])
    ex.error = error
    return ex


def sse_body(n_bytes: int, per_chunk: int = 1) -> bytes:
    """About ``n_bytes`` of a chunked SSE answer: OpenAI-style delta events, ``per_chunk`` to a chunk."""
    event = b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": " word"}}]}).encode() + b"\n\n"
    chunk = event * per_chunk
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    return SSE_HEAD + framed * (n_bytes // len(framed)) + b"0\r\n\r\n"


@pytest.mark.parametrize("case", [
    b"-5\r\nhello\r\n0\r\n\r\n",
    b"%x\r\n" % 2**64 + b"x" * 100,
])
def test_the_decoder_never_spins_on_a_bad_chunk_size(case):
    got = decoded(ex_of(SSE_HEAD + case, 4))
    assert isinstance(got, ValueError) or not got.ended


def test_the_decoder_reads_a_flood_of_informational_heads_iteratively():
    got = decoded(ex_of(b"HTTP/1.1 100 Continue\r\n\r\n" * 20000, 1 << 18))
    assert isinstance(got, ValueError) and "informational" in str(got)


@pytest.mark.parametrize("shape", ["event per chunk", "64 events per chunk", "one endless event"])
def test_decoding_is_linear_in_the_answer(shape):
    """8 MB of SSE in 256 KB pieces costs about four times what 2 MB does, and a few passes over it."""
    def work(n: int) -> tuple[int, int]:
        if shape == "one endless event":
            raw = SSE_HEAD + b"".join(b"10000\r\n" + b"data: " + b"x" * (0x10000 - 6) + b"\r\n"
                                      for _ in range(n // 0x10000))
        else:
            raw = sse_body(n, 64 if shape.startswith("64") else 1)
        d = decoded(ex_of(raw, 256 << 10, error="stream cut" if shape == "one endless event" else None))
        assert not isinstance(d, ValueError)
        return d.work, len(raw)

    w2, n2 = work(2 << 20)
    w8, n8 = work(8 << 20)
    assert w8 <= 4.4 * w2 * n8 / (4 * n2)       # four times the answer: about four times the work
    assert w8 <= 12 * n8                         # a bounded number of passes over each byte


def test_events_split_anywhere_are_the_same_events():
    raw = sse_body(20000)
    whole = decoded(ex_of(raw, len(raw)))
    for piece in (1, 2, 3, 7, 64, 1000):
        d = decoded(ex_of(raw, piece))
        assert [e for _, e in d.events] == [e for _, e in whole.events] and d.ended
    assert len(whole.events) > 100


@pytest.mark.parametrize("sep", [b"\n", b"\r\n", b"\r"])
def test_sse_lines_end_with_lf_crlf_or_cr(sep):
    body = sep.join([b"event: x", b"data: a", b"data: b", b"", b": comment", b"data: c", b"", b""])
    raw = OK_HEAD + b"Content-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    for piece in (1, 2, 5, len(raw)):
        d = decoded(ex_of(raw, piece))
        assert [e for _, e in d.events] == [b"a\nb", b"c"], (sep, piece)
