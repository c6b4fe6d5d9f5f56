"""A small scripted OpenAI-compatible endpoint on loopback, for the `bench perf` tests that need
answers benchmarks/stream_endpoint.py does not give: a usage block the test writes (negative
counts, a chat template's extra prompt tokens, no usage when streamed), a stall on every request,
a failure on every request. It serves in threads of the test process (`with PerfServer(...) as
srv:` starts and stops it; a subprocess `assay` can reach it at `srv.url`).

``answer(i, stream, body) -> dict`` says what request ``i`` (from 1) gets: ``tokens`` (words
answered, default the request's max_tokens), ``usage`` (the usage block; ``"auto"``: the words
of the prompt and the answer; None: no usage), ``stall`` (seconds of silence after the headers
and ``stall_tokens`` tokens), ``status`` (an HTTP error status, answered at once). ``/tokenize`` only
with ``tokenize=True`` (one token per whitespace-separated word, so a test knows the server's
count); otherwise the client counts with its bundled tokenizer. ``first_delay`` (seconds before the
first token, e.g. scripted to grow with the context), ``word`` (the token answered, default
``" word"``). Session memory: every answer's text is kept, and each request's log entry says how
many of its assistant messages are answers this server gave (``carried``) and how many are not
(``forgotten``), and its prompt's words (``context_words``). ``capacity=K``: at most K answers
are made at once, the others wait (so with a scripted ``first_delay`` the server has a knee at
K / first_delay requests per second, or K / the ``held`` seconds each answer's log entry says it
took, first delay and overheads included, on a loaded machine). Prefix cache: prompts are cached by whole blocks of
``block`` words from their start; ``prefill_per_word`` (seconds per word not found in the cache)
is added to ``first_delay``, and a request's log entry says its ``cached_words`` (with
``cached_usage=True`` its usage says them too, as ``prompt_tokens_details.cached_tokens``). ``/metrics``: a
Prometheus page in vLLM's names (running, waiting, KV-cache use = running / capacity, prompt and
generation tokens, prefix-cache queries and hits; with ``spec=True`` speculative-decoding drafts,
draft tokens and accepted tokens, 4 / 12 / 8 per request) from ``counters``, which a test reads. Each request's arrival
(``time.monotonic()`` as its first line was read) is logged as ``t``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = Callable[[int, bool, dict[str, Any]], dict[str, Any]]


def _prompt_words(body: dict[str, Any]) -> int:
    text = " ".join(m.get("content", "") for m in body.get("messages") or [] if isinstance(m, dict))
    return len((text or str(body.get("prompt", ""))).split())


class _Handler(BaseHTTPRequestHandler):
    """The routes of a :class:`PerfServer` (``self.owner``)."""

    protocol_version = "HTTP/1.1"

    @property
    def owner(self) -> PerfServer:
        return self.server.owner  # type: ignore[attr-defined]

    def log_message(self, *args: Any) -> None:   # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # each event goes out as written (no Nagle wait on a delayed ACK, which adds ~40 ms to small writes)
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        try:
            super().handle()
        except (BrokenPipeError, ConnectionResetError):   # the client went away (cancelled, stalled out)
            pass

    def do_GET(self) -> None:
        if self.path == "/metrics":
            data = self.owner.metrics_text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.owner.model, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "no route"}})

    def do_POST(self) -> None:
        arrived = time.monotonic()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/tokenize" and self.owner.tokenize:      # one token per word, llama.cpp's fields
            text = json.loads(raw or b"{}").get("content", "")
            self._json(200, {"tokens": list(range(len(text.split())))})
            return
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._json(404, {"error": {"message": "no route"}})
            return
        body = json.loads(raw or b"{}")
        with self.owner.lock:
            self.owner.count += 1
            i = self.owner.count
        stream = bool(body.get("stream"))
        how = self.owner.answer(i, stream, body) or {}
        said = [m.get("content") for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant"]
        with self.owner.lock:
            carried = sum(1 for x in said if x in self.owner.answers)
        entry = {"i": i, "stream": stream, "body": body, "t": arrived, "carried": carried,
                 "forgotten": len(said) - carried, "context_words": _prompt_words(body)}
        self.owner.log.append(entry)
        if how.get("status"):
            self._json(int(how["status"]), {"error": {"message": f"scripted {how['status']}"}})
            return
        n = int(how.get("tokens", body.get("max_tokens") or 4))
        word = str(how.get("word", " word"))
        prompt = (" ".join(m.get("content", "") for m in body.get("messages") or [] if isinstance(m, dict))
                  or str(body.get("prompt", ""))).split()
        with self.owner.lock:
            self.owner.answers.add(word * n)
            hit = self.owner.cache_lookup(prompt)
            self.owner.counters["waiting"] += 1
        entry["cached_words"] = hit
        usage = how.get("usage", "auto")
        if usage == "auto":
            p = _prompt_words(body)
            usage = {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}
            if self.owner.cached_usage:
                usage["prompt_tokens_details"] = {"cached_tokens": hit}
        if how.get("prefill_per_word"):
            how = {**how, "first_delay": float(how.get("first_delay", 0)) + how["prefill_per_word"] * (len(prompt) - hit)}
        if self.owner.slots is not None:
            self.owner.slots.acquire()
        held = time.monotonic()
        with self.owner.lock:
            self.owner.counters["waiting"] -= 1
            self.owner.counters["running"] += 1
            # counted before the answer is sent, as a server counts what it generates: a scrape taken
            # once the client has read the whole answer always sees it
            self.owner.counters["generation"] += n
        try:
            self._answer(i, stream, n, usage, how, word)
        finally:
            with self.owner.lock:
                self.owner.counters["running"] -= 1
            if self.owner.slots is not None:
                self.owner.slots.release()
            entry["held"] = time.monotonic() - held

    def _answer(self, i: int, stream: bool, n: int, usage: Any, how: dict[str, Any], word: str) -> None:
        if stream:
            self._stream(n, usage, how, word)
        else:
            if how.get("stall"):
                self.owner.stop.wait(float(how["stall"]))
            text = "".join(" word" for _ in range(n))
            obj: dict[str, Any] = {"id": f"x{i}", "object": "chat.completion", "model": self.owner.model,
                                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                "finish_reason": "length"}]}
            if usage is not None:
                obj["usage"] = usage
            self._json(200, obj)

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _chunk(self, payload: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        self.wfile.flush()

    def _event(self, obj: Any) -> None:
        self._chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _stream(self, n: int, usage: Any, how: dict[str, Any], word: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        head = {"id": "x", "object": "chat.completion.chunk", "model": self.owner.model}
        if how.get("first_delay"):
            self.owner.stop.wait(float(how["first_delay"]))
        for k in range(n):
            if how.get("stall") and k == int(how.get("stall_tokens", 0)):
                self.owner.stop.wait(float(how["stall"]))
                if self.owner.stop.is_set():
                    return
            self._event({**head, "choices": [{"index": 0, "delta": {"content": word},
                                              "finish_reason": None}]})
        if usage is not None:
            self._event({**head, "choices": [], "usage": usage})
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()



class PerfServer:
    def __init__(self, answer: Script | None = None, model: str = "scripted", *, tokenize: bool = False,
                 capacity: int | None = None, block: int = 16, spec: bool = False,
                 cached_usage: bool = False, metrics_names: str = "vllm") -> None:
        self.answer = answer or (lambda i, stream, body: {})
        self.cached_usage = cached_usage
        self.metrics_names = metrics_names
        self.model = model
        self.tokenize = tokenize
        self.spec = spec
        # at most this many answers at once (the rest wait their turn): a server with a knee
        self.slots = threading.Semaphore(capacity) if capacity else None
        self.capacity = capacity
        self.block = block
        self.cached: set[int] = set()       # hashes of the word-block prefixes seen (the prefix cache)
        self.counters = {"running": 0, "waiting": 0, "prompt": 0, "generation": 0, "hits": 0, "queries": 0,
                         "drafts": 0, "draft_tokens": 0, "accepted": 0}
        self.count = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.log: list[dict[str, Any]] = []
        self.answers: set[str] = set()      # every answer's text, so a later request can be seen carrying it
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.owner = self  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def cache_lookup(self, words: list[str]) -> int:
        """The prompt's words found in the prefix cache (whole blocks of ``block`` words from the start),
        counted like vLLM's prefix-cache counters (queries: the prompt's tokens; hits: those cached);
        then every whole-block prefix of the prompt is cached. Call with ``lock`` held."""
        blocks = len(words) // self.block
        keys = [hash(tuple(words[:k * self.block])) for k in range(1, blocks + 1)]
        hit = 0
        for k, key in enumerate(keys, 1):
            if key not in self.cached:
                break
            hit = k * self.block
        self.cached.update(keys)
        c = self.counters
        c["prompt"] += len(words)
        c["queries"] += len(words)
        c["hits"] += hit
        if self.spec:                # scripted speculative decoding: 4 drafts of 3 tokens, 2 accepted each
            c["drafts"] += 4
            c["draft_tokens"] += 12
            c["accepted"] += 8
        return hit

    def metrics_text(self) -> str:
        """The /metrics page, in vLLM's names (or llama-server's: ``metrics_names="llamacpp"``), from
        the counters the test can read."""
        with self.lock:
            c = dict(self.counters)
        if self.metrics_names == "llamacpp":
            return self._llamacpp_text(c)
        kv = c["running"] / self.capacity if self.capacity else 0.0
        lines = [("vllm:num_requests_running", "gauge", c["running"]), ("vllm:num_requests_waiting", "gauge", c["waiting"]),
                 ("vllm:kv_cache_usage_perc", "gauge", kv), ("vllm:prompt_tokens_total", "counter", c["prompt"]),
                 ("vllm:generation_tokens_total", "counter", c["generation"]),
                 ("vllm:prefix_cache_queries_total", "counter", c["queries"]),
                 ("vllm:prefix_cache_hits_total", "counter", c["hits"])]
        if self.spec:
            lines += [("vllm:spec_decode_num_drafts_total", "counter", c["drafts"]),
                      ("vllm:spec_decode_num_draft_tokens_total", "counter", c["draft_tokens"]),
                      ("vllm:spec_decode_num_accepted_tokens_total", "counter", c["accepted"])]
        out = []
        for name, kind, v in lines:
            out += [f"# TYPE {name} {kind}", f'{name}{{model_name="{self.model}"}} {float(v)}']
        return "\n".join(out) + "\n"

    def _llamacpp_text(self, c: dict[str, int]) -> str:
        """llama-server's counters: prompt tokens reused from the cache, and those evaluated (the
        cached ones excluded), unlabelled."""
        lines = [("llamacpp:prompt_tokens_total", "counter", c["queries"] - c["hits"]),
                 ("llamacpp:prompt_tokens_cached_total", "counter", c["hits"]),
                 ("llamacpp:tokens_predicted_total", "counter", c["generation"]),
                 ("llamacpp:requests_processing", "gauge", c["running"])]
        return "".join(f"# TYPE {name} {kind}\n{name} {float(v)}\n" for name, kind, v in lines)

    def __enter__(self) -> PerfServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)
