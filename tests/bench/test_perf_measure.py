"""The instrument's arithmetic on exchanges built byte by byte, with exact stamps: HTTP framing
and SSE events split at awkward places, what counts as the first token, token reconciliation,
failures by cause, the open-loop schedule, the validity verdict, and prompts of exact length."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from assay.bench.perf import measure as M
from assay.bench.perf.run import gamma_schedule
from assay.bench.perf.stream import Exchange, decode
from assay.bench.perf.workload import build_prompts, bundled_counter


def sse(events: list[dict | str]) -> list[bytes]:
    """Chunked SSE body pieces, one HTTP chunk per event."""
    out = []
    for e in events:
        data = (e if isinstance(e, str) else json.dumps(e)).encode()
        payload = b"data: " + data + b"\n\n"
        out.append(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
    return out


HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")


def delta(content: str | None = None, reasoning: str | None = None, role: str | None = None) -> dict:
    d: dict = {}
    if role:
        d["role"] = role
    if content is not None:
        d["content"] = content
    if reasoning is not None:
        d["reasoning_content"] = reasoning
    return {"choices": [{"index": 0, "delta": d}]}


def exchange(reads: list[tuple[float, bytes]], sent: float = 10.0, error: str | None = None) -> Exchange:
    ex = Exchange(sent=sent, reads=reads)
    ex.error = error
    ex.complete = error is None
    return ex


def test_role_chunk_is_not_the_first_token_and_gaps_follow_the_stamps():
    pieces = sse([delta(role="assistant"), delta("Hello"), delta(" there"), delta(" friend"),
                  {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}}, "[DONE]"])
    reads = [(10.001, HEAD + pieces[0]), (10.100, pieces[1]), (10.120, pieces[2]),
             (10.150, pieces[3] + pieces[4] + pieces[5] + b"0\r\n\r\n")]
    rec = M.measure(exchange(reads), stream=True)
    assert rec["status"] == "ok"
    assert rec["ttft"] == pytest.approx(0.100)
    assert rec["e2e"] == pytest.approx(0.150)
    assert rec["itl"] == pytest.approx([0.020, 0.030])
    assert rec["text"] == "Hello there friend"
    M.finish(rec, prompt_tokens=12, model_count=None, bundled_count=3)
    assert rec["output_tokens"]["used"] == 3 and rec["output_tokens"]["from"] == "server"
    assert rec["tpot"] == pytest.approx((0.150 - 0.100) / 2)
    assert rec["gtps"] == pytest.approx(3 / 0.150)
    assert rec["ttps"] == pytest.approx(15 / 0.150)
    assert rec["disagree"] is None


def test_events_split_across_reads_take_the_stamp_of_the_read_that_completes_them():
    body = b"".join(sse([delta("a"), delta("b")])) + b"0\r\n\r\n"
    raw = HEAD + body
    cut1 = len(HEAD) + 7          # inside the first chunk's data
    cut2 = raw.index(b"\r\n", len(HEAD) + 20) + 1   # between the CR and LF after the first chunk
    reads = [(10.2, raw[:cut1]), (10.3, raw[cut1:cut2]), (10.4, raw[cut2:])]
    d = decode(exchange(reads))
    assert d.ended and d.status == 200
    assert [t for t, _ in d.events] == [10.3, 10.4]
    assert [json.loads(e)["choices"][0]["delta"]["content"] for _, e in d.events] == ["a", "b"]


def test_a_thinking_model_has_a_later_first_answer_token():
    pieces = sse([delta(reasoning="hmm"), delta(reasoning=" so"), delta("42"), "[DONE]"])
    reads = [(10.05, HEAD + pieces[0]), (10.07, pieces[1]), (10.30, pieces[2] + pieces[3] + b"0\r\n\r\n")]
    rec = M.measure(exchange(reads), stream=True)
    assert rec["ttft"] == pytest.approx(0.05)
    assert rec["ttfat"] == pytest.approx(0.30)
    assert rec["text"] == "hmm so42"


def test_failures_are_named_by_cause():
    err = b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 15\r\n\r\n{\"error\":\"boom\"}"[:-1]
    rec = M.measure(exchange([(10.1, err)]), stream=True)
    assert rec["status"] == "http 500"
    pieces = sse([delta("a"), delta("b")])
    cut = M.measure(exchange([(10.1, HEAD + pieces[0]), (10.2, pieces[1])], error="stream cut"), stream=True)
    assert cut["status"] == "stream cut" and cut["chunks"] == 2
    stall = M.measure(exchange([(10.1, HEAD + pieces[0])], error="stall"), stream=True)
    assert stall["status"] == "stall"
    errev = M.measure(exchange([(10.1, HEAD + b"".join(sse([{"error": {"message": "overloaded"}}])) + b"0\r\n\r\n")]),
                      stream=True)
    assert errev["status"] == "error event" and "overloaded" in errev["error"]
    records = [dict(rec, i=0), dict(cut, i=1), dict(stall, i=2)]
    ok = M.measure(exchange([(10.1, HEAD + pieces[0]), (10.2, pieces[1] + b"0\r\n\r\n")]), stream=True)
    ok["i"] = 3
    records.append(ok)
    for r in records:
        M.finish(r, prompt_tokens=5, model_count=None, bundled_count=r["chunks"])
    point, samples = M.summarize(records, duration=1.0, concurrency=1, rate=None, slo={"ttft": 0.5},
                                 client={"clock": "kernel", "cpu_s": 0.01, "tokens": 2, "loop_lag": [0.001]})
    assert point["requests"] == {"sent": 4, "ok": 1, "failed": 3,
                                 "failures": {"http 500": 1, "stall": 1, "stream cut": 1}}
    assert point["metrics"]["ttft"]["n"] == 1 and len(samples["ttft"]) == 1
    assert point["slo"]["attainment"] == pytest.approx(0.25)     # failed requests miss every objective


def test_counts_that_disagree_are_flagged_not_hidden():
    pieces = sse([delta("x")] * 5 + [{"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}])
    rec = M.measure(exchange([(10.1, HEAD + b"".join(pieces) + b"0\r\n\r\n")]), stream=True)
    M.finish(rec, prompt_tokens=4, model_count=None, bundled_count=5)
    assert rec["disagree"] == "5 token chunks but 2 tokens"
    rec2 = M.measure(exchange([(10.1, HEAD + b"".join(pieces) + b"0\r\n\r\n")]), stream=True)
    M.finish(rec2, prompt_tokens=4, model_count=40, bundled_count=None)
    assert "server usage 2 vs model tokenizer 40" == rec2["disagree"]


def test_a_non_streamed_answer_has_no_ttft():
    body = json.dumps({"choices": [{"message": {"content": "hi"}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()
    raw = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body
    rec = M.measure(exchange([(10.5, raw)]), stream=False)
    assert rec["status"] == "ok" and rec["ttft"] is None and rec["e2e"] == pytest.approx(0.5)
    M.finish(rec, prompt_tokens=3, model_count=None, bundled_count=1)
    assert rec["tpot"] is None and rec["gtps"] == pytest.approx(2.0)


def test_open_loop_schedule_has_the_asked_rate_and_burstiness():
    rng = np.random.default_rng(3)
    t = gamma_schedule(10.0, 1.0, 20_000, None, rng)
    gaps = np.diff(t)
    assert t[0] == 0.0
    assert gaps.mean() == pytest.approx(0.1, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)        # Poisson: CV 1
    bursty = np.diff(gamma_schedule(10.0, 0.25, 20_000, None, rng))
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, rel=0.08)    # CV = 1/sqrt(shape)
    assert gamma_schedule(10.0, 1.0, None, 3.0, rng).max() < 3.0


def test_the_verdict_names_the_client_as_the_bottleneck():
    base = {"metrics": {"ttft": {"p50": 0.1}}, "duration_s": 10.0, "requests": {"ok": 5}}
    good = M.verdict(base, {"clock": "kernel", "cpu_s": 1.0, "tokens": 1000, "schedule_lag": [0.001] * 50})
    assert good["valid"] and good["cpu_per_token_us"] == pytest.approx(1000.0)
    busy = M.verdict(base, {"clock": "kernel", "cpu_s": 9.5, "tokens": 1000})
    assert not busy["valid"] and "95% of a CPU core" in busy["reasons"][0]
    late = M.verdict(base, {"clock": "kernel", "cpu_s": 1.0, "schedule_lag": [0.001] * 90 + [0.2] * 10})
    assert not late["valid"] and "after their scheduled time" in late["reasons"][0]
    lagged = M.verdict(base, {"clock": "user", "cpu_s": 1.0, "loop_lag": [0.05] * 10})
    assert not lagged["valid"] and "event loop" in lagged["reasons"][0]
    kernel = M.verdict(base, {"clock": "kernel", "cpu_s": 1.0, "loop_lag": [0.05] * 10})
    assert kernel["valid"]      # kernel stamps do not depend on the loop
    closed = {**base, "metrics": {"ttft": {"p50": 0.1}, "e2e": {"mean": 0.2}}}
    short = M.verdict(closed, {"clock": "kernel", "cpu_s": 1.0, "turnaround": [0.05] * 10})
    assert not short["valid"] and "held 80% of the concurrency" in short["reasons"][0]
    assert M.verdict(closed, {"clock": "kernel", "cpu_s": 1.0, "turnaround": [0.002] * 10})["valid"]


def test_prompts_have_the_exact_length_and_unique_starts():
    counter = bundled_counter("some-model")
    prompts = asyncio.run(build_prompts(counter, 30, 300, seed=7))
    assert all(p.tokens == 300 and p.exact for p in prompts)
    counts = asyncio.run(counter.count([p.text for p in prompts]))
    assert counts == [300] * 30
    firsts = {p.text.split(":")[0] for p in prompts}
    assert len(firsts) == 30                        # no two share a first line: no prefix-cache help
    shared = asyncio.run(build_prompts(counter, 5, 300, shared_prefix=120, seed=7))
    assert all(p.tokens == 300 for p in shared)
    import bpe_openai

    enc = bpe_openai.get_encoding("o200k_base")
    heads = {tuple(enc.encode_ordinary(p.text)[:120]) for p in shared}
    assert len(heads) == 1


def test_bad_prompt_settings_are_refused():
    from assay.errors import AssayError

    with pytest.raises(AssayError, match="shared-prefix"):
        asyncio.run(build_prompts(bundled_counter(None), 1, 50, shared_prefix=49))


def test_a_100_continue_before_the_answer_is_skipped():
    pieces = sse([delta("a"), delta("b")])
    reads = [(10.05, b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + pieces[0]), (10.08, pieces[1] + b"0\r\n\r\n")]
    rec = M.measure(exchange(reads), stream=True)
    assert rec["status"] == "ok" and rec["ttft"] == pytest.approx(0.05) and rec["chunks"] == 2


def test_an_unreadable_answer_ends_the_exchange_at_once():
    """A head the client cannot frame (here a bad Content-Length) is a failure named at once,
    not an exchange left waiting for its timeout."""
    from assay.bench.perf.stream import StreamClient

    async def go():
        async def answer(reader, writer):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\nhello")
            await writer.drain()
            await asyncio.sleep(5)
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = StreamClient(f"http://127.0.0.1:{port}", timeout=30)
        try:
            return await asyncio.wait_for(client.request(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 3)
        finally:
            await client.aclose()
            server.close()

    ex = asyncio.run(go())
    assert ex.error == "bad answer" and "lots" in ex.detail
    assert M.measure(ex, stream=True)["status"] == "bad answer"
