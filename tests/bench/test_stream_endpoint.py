"""benchmarks/stream_endpoint.py, run as its own process on port 0, checked with a stdlib client."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import bpe_openai
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stream_endpoint.py"
ENC = bpe_openai.get_encoding("o200k_base")
CHAT = "/v1/chat/completions"
PROMPT = "Write one sentence about rivers and the stones in them."


def events(resp) -> list:
    """The SSE events of a streamed response, parsed ("[DONE]" kept as a string)."""
    out = []
    for line in resp:
        line = line.strip()
        if line.startswith(b"data: "):
            data = line[6:].decode()
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def chat_body(n: int, **extra) -> dict:
    return {"model": "scripted", "messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": PROMPT}],
            "max_tokens": n, "stream": True, **extra}


def deltas(evs: list, key: str = "content") -> list[str]:
    return [e["choices"][0]["delta"][key] for e in evs
            if isinstance(e, dict) and e["choices"] and key in e["choices"][0]["delta"]]


def test_words_are_single_o200k_tokens_alone_and_in_any_run():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import stream_endpoint
    finally:
        sys.path.remove(str(SCRIPT.parent))
    words = stream_endpoint.WORDS
    assert all(len(ENC.encode(" " + w)) == 1 for w in words)
    for n in range(1, 3 * len(words) + 2):
        assert len(ENC.encode("".join(" " + words[k % len(words)] for k in range(n)))) == n


@pytest.mark.serial   # upper bounds on timing: run apart
def test_streamed_chat_chunks_usage_and_server_ttft(endpoint):
    ep = endpoint("--ttft", "0.05", "--itl", "0.01")
    t0 = time.monotonic()
    conn, resp = ep.post(CHAT, chat_body(20, stream_options={"include_usage": True}),
                         {"X-Request-Id": "req-1"})
    t_sent = time.monotonic()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    assert resp.getheader("Transfer-Encoding") == "chunked"
    evs = events(resp)
    conn.close()
    assert evs[0]["choices"][0]["delta"] == {"role": "assistant"}
    content = deltas(evs)
    assert len(content) == 20 and len(evs) == 1 + 20 + 1 + 1
    assert len(ENC.encode("".join(content))) == 20
    assert [e["choices"][0]["finish_reason"] for e in evs[1:21]] == [None] * 19 + ["length"]
    usage = evs[21]
    assert usage["choices"] == []
    prompt_tokens = len(ENC.encode("Be brief." + PROMPT))
    assert usage["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": 20,
                              "total_tokens": prompt_tokens + 20}
    assert evs[22] == "[DONE]"

    (rec,) = ep.stop()
    assert rec["i"] == 1 and rec["request_id"] == "req-1" and rec["path"] == CHAT and rec["stream"]
    assert rec["outcome"] == "ok" and rec["chunks"] == 20 and rec["completion_tokens"] == 20
    assert rec["prompt_tokens"] == prompt_tokens
    assert rec["arrival_clock"] in ("kernel", "user")
    # arrival is stamped while the client was sending (kernel) or just after (user)
    slack = 0.002 if rec["arrival_clock"] == "kernel" else 0.05
    assert t0 - 0.002 <= rec["arrival"] <= t_sent + slack
    ttft = rec["first_write"] - rec["arrival"]
    assert 0.05 - 1e-6 <= ttft < 0.05 + 0.02  # never early; a few ms late at most on a busy box
    # token k is due at arrival + ttft + k * itl: absolute times, never early
    assert 0.05 + 19 * 0.01 - 1e-6 <= rec["last_write"] - rec["arrival"] < 0.05 + 19 * 0.01 + 0.05
    assert 0 <= rec["max_late"] < 0.05


def test_kernel_clock_on_linux(endpoint):
    if not sys.platform.startswith("linux"):
        pytest.skip("SO_TIMESTAMPNS is Linux's")
    ep = endpoint("--ttft", "0", "--itl", "0")
    conn, resp = ep.post(CHAT, chat_body(2))
    events(resp)
    conn.close()
    (rec,) = ep.stop()
    assert rec["arrival_clock"] == "kernel"


def test_streamed_completions_and_reasoning(endpoint):
    ep = endpoint("--ttft", "0.01", "--itl", "0.002", "--reasoning", "3")
    conn, resp = ep.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 7, "stream": True})
    evs = events(resp)
    texts = [e["choices"][0]["text"] for e in evs[:-1]]
    assert len(texts) == 7 and evs[-1] == "[DONE]"  # no role chunk, no usage unless asked
    assert evs[-2]["choices"][0]["finish_reason"] == "length"
    assert len(ENC.encode("".join(texts))) == 7
    # the same connection again (keep-alive): a chat answer that thinks for 3 tokens first
    conn.request("POST", CHAT, json.dumps(chat_body(5)), {"Content-Type": "application/json"})
    evs = events(conn.getresponse())
    assert len(deltas(evs, "reasoning_content")) == 3 and len(deltas(evs)) == 2
    conn.close()
    recs = ep.stop()
    assert [(r["i"], r["chunks"], r["outcome"]) for r in recs] == [(1, 7, "ok"), (2, 5, "ok")]


def test_not_streamed(endpoint):
    ep = endpoint("--ttft", "0.02", "--itl", "0.01", "--reasoning", "2", "--model", "m1")
    start = time.monotonic()
    conn, resp = ep.post(CHAT, chat_body(6, stream=False))
    body = json.loads(resp.read())
    assert time.monotonic() - start >= 0.02 + 5 * 0.01 - 1e-3
    assert resp.status == 200 and body["object"] == "chat.completion" and body["model"] == "m1"
    msg = body["choices"][0]["message"]
    assert len(ENC.encode(msg["reasoning_content"])) == 2 and len(ENC.encode(msg["content"])) == 4
    assert body["usage"]["completion_tokens"] == 6
    conn.request("POST", "/v1/completions", json.dumps({"prompt": ["ab", "cd"], "max_tokens": 3}))
    body = json.loads(conn.getresponse().read())
    assert body["choices"][0]["finish_reason"] == "length"
    assert len(ENC.encode(body["choices"][0]["text"])) == 3
    assert body["usage"]["prompt_tokens"] == len(ENC.encode("abcd"))
    conn.close()
    recs = ep.stop()
    assert [r["stream"] for r in recs] == [False, False]
    assert recs[0]["first_write"] - recs[0]["arrival"] >= 0.07 - 1e-6


def test_models_tokenize_and_404(endpoint, tmp_path):
    ep = endpoint("--model", "tiny")
    conn = ep.conn()
    conn.request("GET", "/v1/models")
    assert [m["id"] for m in json.loads(conn.getresponse().read())["data"]] == ["tiny"]
    for method, path in (("POST", "/tokenize"), ("GET", "/v1/chat/completions"), ("GET", "/nope")):
        conn.request(method, path, "{}")
        resp = conn.getresponse()
        assert resp.status == 404 and "error" in json.loads(resp.read())
    conn.close()
    ep.stop()

    ep = endpoint("--tokenize")
    text = "The quick brown fox jumps over the lazy dog, twice."
    conn, resp = ep.post("/tokenize", {"model": "scripted", "prompt": text})
    body = json.loads(resp.read())
    assert body == {"tokens": ENC.encode(text), "count": len(ENC.encode(text)), "max_model_len": 32768}
    conn.close()
    ep.stop()


def test_bad_request_is_400(endpoint):
    ep = endpoint()
    conn, resp = ep.post(CHAT, {"messages": [], "max_tokens": 0})
    assert resp.status == 400
    resp.read()
    conn.close()
    assert ep.stop()[0]["outcome"] == "http 400"


def test_status_faults(endpoint):
    ep = endpoint("--ttft", "0", "--itl", "0", script=[
        {"requests": [1, 1], "status": 500, "body": {"error": {"message": "boom"}}},
        {"requests": [2, 2], "status": 429, "retry_after": 1},
        {"requests": [1, 3], "status": 503},   # the first match wins: only 3 gets this
        {"every": 5, "status": 500},
    ])
    got = []
    conn = ep.conn()
    for _ in range(6):
        conn.request("POST", CHAT, json.dumps(chat_body(2)), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        got.append((resp.status, resp.getheader("Retry-After"), resp.read()))
    conn.close()
    assert [g[0] for g in got] == [500, 429, 503, 200, 500, 200]
    assert json.loads(got[0][2]) == {"error": {"message": "boom"}}
    assert got[1][1] == "1" and got[0][1] is None
    assert [r["outcome"] for r in ep.stop()] == ["http 500", "http 429", "http 503", "ok", "http 500", "ok"]


def raw_post(port: int, path: str, body: dict, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    data = json.dumps(body).encode()
    sock.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (path.encode(), len(data), data))
    return sock


def test_cut_after(endpoint):
    ep = endpoint("--ttft", "0.01", "--itl", "0.005", script=[{"requests": [1, 1], "cut_after": 3}])
    sock = raw_post(ep.port, CHAT, chat_body(10))
    raw = b""
    while chunk := sock.recv(65536):  # until the server closes
        raw += chunk
    sock.close()
    assert raw.startswith(b"HTTP/1.1 200 OK") and b"Transfer-Encoding: chunked" in raw
    assert raw.count(b'"content":') == 3 and b"[DONE]" not in raw and not raw.endswith(b"0\r\n\r\n")
    assert b'"finish_reason":"length"' not in raw
    conn, resp = ep.post(CHAT, chat_body(4))  # the next request is served normally
    assert len(deltas(events(resp))) == 4
    conn.close()
    recs = ep.stop()
    assert [(r["outcome"], r["chunks"]) for r in recs] == [("cut", 3), ("ok", 4)]


def test_stall_after(endpoint):
    ep = endpoint("--ttft", "0.01", "--itl", "0.005", script=[{"requests": [1, 1], "stall_after": 3}])
    conn, resp = ep.post(CHAT, chat_body(10), timeout=0.5)
    got = []
    with pytest.raises(TimeoutError):
        for line in resp:
            if line.startswith(b"data: "):
                got.append(json.loads(line[6:]))
    assert len(deltas(got)) == 3
    conn.close()
    time.sleep(0.2)  # the server notices the close
    conn, resp = ep.post(CHAT, chat_body(4))
    assert len(deltas(events(resp))) == 4
    conn.close()
    recs = ep.stop()
    assert [(r["outcome"], r["chunks"]) for r in recs] == [("stall", 3), ("ok", 4)]


def test_stall_without_stream_never_answers(endpoint):
    ep = endpoint("--ttft", "0", "--itl", "0", script=[{"stall_after": 0}])
    conn = ep.conn(timeout=0.4)
    conn.request("POST", CHAT, json.dumps(chat_body(3, stream=False)))
    with pytest.raises(TimeoutError):
        conn.getresponse()
    conn.close()
    time.sleep(0.2)
    assert [r["outcome"] for r in ep.stop()] == ["stall"]


@pytest.mark.serial   # upper bounds on timing: run apart
def test_delay_headers_and_timing_override(endpoint):
    ep = endpoint("--ttft", "0.01", "--itl", "0.002", script=[
        {"requests": [1, 1], "delay_headers": 0.3},
        {"requests": [2, 2], "ttft": 0.15, "itl": 0.01},
    ])
    start = time.monotonic()
    conn, resp = ep.post(CHAT, chat_body(3))
    assert time.monotonic() - start >= 0.3 - 1e-3  # the status line came after the delay
    assert len(deltas(events(resp))) == 3
    conn.request("POST", CHAT, json.dumps(chat_body(5)), {"Content-Type": "application/json"})
    assert len(deltas(events(conn.getresponse()))) == 5
    conn.close()
    first, second = ep.stop()
    assert first["first_write"] - first["arrival"] >= 0.31 - 1e-6
    assert 0.15 - 1e-6 <= second["first_write"] - second["arrival"] < 0.15 + 0.05
    assert 0.19 - 1e-6 <= second["last_write"] - second["arrival"] < 0.19 + 0.05


def test_bad_script_refuses_to_start(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"requests": [1, 2], "status": 500, "cut_after": 1}]))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--port", "0", "--script", str(path)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and "exactly one action" in proc.stderr


def test_pipelined_requests_and_a_client_that_leaves(endpoint):
    ep = endpoint("--ttft", "0.01", "--itl", "0.001")
    body = json.dumps({"prompt": "hi", "max_tokens": 2, "stream": True}).encode()
    req = b"POST /v1/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    sock = socket.create_connection(("127.0.0.1", ep.port), timeout=10)
    sock.sendall(req * 2 + b"GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n")
    raw = b""
    while chunk := sock.recv(65536):
        raw += chunk
    sock.close()
    assert raw.count(b"HTTP/1.1 200 OK") == 3 and raw.count(b"[DONE]") == 2 and raw.endswith(b"}")
    long = raw_post(ep.port, "/v1/completions", {"prompt": "hi", "max_tokens": 10000, "stream": True})
    assert long.recv(100).startswith(b"HTTP/1.1 200 OK")
    time.sleep(0.1)  # some tokens, then the client goes
    long.close()
    time.sleep(0.2)
    recs = ep.stop()
    assert [(r["i"], r["path"], r["outcome"]) for r in recs] == [
        (1, "/v1/completions", "ok"), (2, "/v1/completions", "ok"), (None, "/v1/models", "ok"),
        (3, "/v1/completions", "client closed")]
    assert 0 < recs[3]["chunks"] < 10000


def test_sigterm_logs_requests_in_flight(endpoint):
    ep = endpoint("--ttft", "5", "--itl", "0.01")
    sock = raw_post(ep.port, CHAT, chat_body(3))
    assert sock.recv(100).startswith(b"HTTP/1.1 200 OK")
    recs = ep.stop()
    sock.close()
    assert [(r["outcome"], r["first_write"]) for r in recs] == [("aborted", None)]


def _stream(port: int, n: int, rid: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", CHAT, json.dumps(chat_body(n)), {"X-Request-Id": str(rid)})
    count = len(deltas(events(conn.getresponse())))
    conn.close()
    return count


@pytest.mark.parametrize("workers", [1, 2])
def test_concurrent_streams(endpoint, workers):
    ep = endpoint("--ttft", "0.05", "--itl", "0.005", "--workers", str(workers))
    with ThreadPoolExecutor(64) as pool:
        counts = list(pool.map(lambda k: _stream(ep.port, 30, k), range(64)))
    assert counts == [30] * 64
    recs = ep.stop()
    assert sorted(r["i"] for r in recs) == list(range(1, 65))
    assert sorted(int(r["request_id"]) for r in recs) == list(range(64))
    assert all(r["outcome"] == "ok" and r["chunks"] == 30 for r in recs)
    assert all(r["first_write"] - r["arrival"] >= 0.05 - 1e-6 for r in recs)
    if workers > 1:
        assert {r["worker"] for r in recs} <= {0, 1}
        assert "STOPPED workers=2" in ep.stderr
