"""`assay bench perf` asks the server's tokenizer (`/tokenize`, `/extras/tokenize`) under a bound
(issue 28, item 2): a server that never answers is passed over at the probe, and one that stops
answering while the prompts are counted ends the run with one error naming the endpoint, instead
of waiting forever whatever `--timeout` says. A loopback server that reads each request and
answers only the first N of them."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from assay.bench.perf.workload import server_counter
from assay.errors import AssayError
from assay.models.http import LeanHTTP


async def _server(answers: list[dict]) -> tuple[asyncio.AbstractServer, list[str]]:
    """Answers the first ``len(answers)`` requests (in order) with those JSON bodies, then reads
    every later request and never answers it. Returns the server and the request lines seen."""
    seen: list[str] = []
    hold = asyncio.Event()                 # never set: a silent server

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                seen.append(head.split(b"\r\n", 1)[0].decode())
                if len(seen) > len(answers):
                    await hold.wait()
                body = orjson.dumps(answers[len(seen) - 1])
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, seen


async def _count_against(answers: list[dict], timeout: float, texts: list[str] | None = None):
    server, seen = await _server(answers)
    port = server.sockets[0].getsockname()[1]
    http = LeanHTTP(f"http://127.0.0.1:{port}")
    try:
        # the guard only turns a hang (the defect) into a failure; the bound under test is `timeout`
        counter = await asyncio.wait_for(server_counter(http, "", "m", {}, timeout=timeout), 60)
        counts = None
        if counter is not None and texts is not None:
            counts = await asyncio.wait_for(counter.count(texts), 60)
        return counter, counts, seen
    finally:
        http.abandon()
        server.close()


def test_a_tokenizer_that_never_answers_is_passed_over_at_the_probe():
    counter, _, seen = asyncio.run(_count_against([], timeout=0.3))
    assert counter is None                              # the bundled tokenizer is used instead
    assert seen == ["POST /tokenize HTTP/1.1", "POST /extras/tokenize HTTP/1.1"]


def test_a_tokenizer_that_stops_answering_ends_the_count_with_one_error():
    answers = [{"tokens": []}, {"tokens": [1, 2]}, {"tokens": [7, 8, 9]}]
    with pytest.raises(AssayError, match=r"^/tokenize: no answer in 0\.3 s \(--timeout\)$"):
        asyncio.run(_count_against(answers, timeout=0.3, texts=["one two three", "four"]))


def test_a_tokenizer_that_answers_counts_as_before():
    answers = [{"tokens": []}, {"tokens": [1, 2]}, {"tokens": [7, 8, 9]}, {"count": 4}]
    counter, counts, seen = asyncio.run(_count_against(answers, timeout=5, texts=["a b c", "d e f g"]))
    assert counter is not None and counter.source == "server /tokenize" and counter.model_tokens
    assert counts == [3, 4]
    assert seen == ["POST /tokenize HTTP/1.1"] * 4
