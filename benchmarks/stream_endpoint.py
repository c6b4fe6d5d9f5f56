#!/usr/bin/env python3
"""A scripted, streaming OpenAI-compatible endpoint: exact timing, fault injection and scale.

    python benchmarks/stream_endpoint.py --port 0 --ttft 0.1 --itl 0.02 [--log FILE]
        [--script FILE.json] [--tokenize] [--reasoning N] [--model NAME] [--host H] [--workers N]

`assay bench perf` is checked against it. Routes: `POST /v1/chat/completions` and
`/v1/completions` (`"stream": true`: SSE over chunked encoding; else one JSON body), `GET
/v1/models`, with `--tokenize` vLLM's `POST /tokenize`; anything else is a 404. A token is a word
of WORDS with its leading space: one o200k_base token, and n in a row are n tokens. Standard
library, plus bpe_openai for o200k counts. `--port 0` picks a port and prints `LISTENING <port>`
once it accepts. SIGTERM/SIGINT: flush the log, print `STOPPED ...` (CPU seconds) to stderr, exit.

Timing. Arrival is the kernel's receive stamp of a request's first bytes (SO_TIMESTAMPNS, on
CLOCK_REALTIME, moved onto time.monotonic() by an offset sampled at start and every 10 s:
"kernel"), else time.monotonic() when they are read ("user"). A stream sends its headers at
once (chat: with a chunk holding only `delta.role`), then token k (from 0) at `arrival + ttft +
k * itl`, on absolute times: a late loop writes as soon as it can and keeps the schedule. Not
streamed: one body at `arrival + ttft + (n - 1) * itl`. `delay_headers: d` shifts it all by d.
The loop sleeps in select() on its epoll fd (microsecond timeouts; epoll_wait rounds up to ms).

Log (`--log FILE`, truncated at start): a JSON line per request as it ends, flushed every second
and at exit: `i` (ordinal among POSTs to the completions routes, else null), `request_id`
(X-Request-Id), `path`, `stream`, `arrival`, `arrival_clock`, `first_write` (time.monotonic()
just before the first token chunk, reasoning or content), `last_write` (before the last one),
`chunks` (token chunks written), `prompt_tokens` (o200k; chat: message contents concatenated),
`completion_tokens` (as usage says), chat: `messages` (how many) and `first` (a hash of the first
one's content: the requests of one conversation share it), `max_late` (latest write behind schedule, s), `outcome`:
"ok", "http <status>", "cut", "stall", "client closed" (early), "aborted" (server stopped). The
server's TTFT is `first_write - arrival`. `--workers N`: N processes on one port (SO_REUSEPORT)
append to the one FILE (a flush is one O_APPEND write of whole lines), add `worker`, share `i`.

Faults (`--script FILE.json`): a list of rules, the first match wins. A rule picks ordinals by
`"requests": [first, last]` (1-based, inclusive) and/or `"every": k` (i % k == 0; neither: all)
and holds one action: `{"status": 500, "body": {...}}` (that answer at once), `{"status": 429,
"retry_after": 1}` (with Retry-After), `{"cut_after": 3}` (3 token chunks, then close without
the last chunk), `{"stall_after": 3}` (3 token chunks, then silence until the client closes),
`{"delay_headers": 2.0}`, `{"ttft": x, "itl": y}` (either or both). Not streamed, cut closes and
stall stays silent when the body is due.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import heapq
import itertools
import json
import os
import resource
import select
import selectors
import signal
import socket
import struct
import sys
import time
from http import HTTPStatus

WORDS = ("the of and to in is it that for on with as was at by be this from or an are not but "
         "all we can time new one day year way").split()
PIECES = [json.dumps(" " + w).encode() for w in WORDS]
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; SCM_TIMESTAMPNS has the same value
ACTIONS = ("status", "cut_after", "stall_after", "delay_headers", "ttft", "itl")
TAIL = b'"logprobs":null,"finish_reason":null}]}\n\n'
LAST_TAIL = b'"logprobs":null,"finish_reason":"length"}]}\n\n'


def clock_offset() -> float:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC, from the tightest of a few bracketed samples."""
    best = (1.0, 0.0)
    for _ in range(9):
        a, r, b = time.monotonic(), time.time(), time.monotonic()
        best = min(best, (b - a, r - (a + b) / 2))
    return best[1]


class FineEpollSelector(selectors.EpollSelector):
    """epoll, but timed waits happen in select() on the epoll fd: microseconds, not milliseconds."""

    def select(self, timeout=None):
        if timeout is not None and timeout > 0:
            select.select([self._selector.fileno()], [], [], timeout)
            timeout = 0
        return super().select(timeout)


class Timers:
    """One shared timer heap of plain lists (C comparisons) under a single asyncio timer."""

    def __init__(self, loop):
        self.loop, self.heap, self.seq = loop, [], itertools.count()
        self.handle, self.when, self.running = None, None, False

    def at(self, when: float, fn) -> list:
        entry = [when, next(self.seq), fn]
        heapq.heappush(self.heap, entry)
        if not self.running and (self.when is None or when < self.when):
            self.arm(when)
        return entry

    def arm(self, when: float):
        if self.handle is not None:
            self.handle.cancel()
        self.when, self.handle = when, self.loop.call_at(when, self.run)

    def run(self):
        self.running, self.handle, heap = True, None, self.heap
        try:
            while heap and heap[0][0] <= time.monotonic():  # everything due, late ones first
                fn = heapq.heappop(heap)[2]
                if fn is not None:  # None: cancelled
                    fn()
        finally:
            self.running, self.when = False, None
            if heap:
                self.arm(heap[0][0])


def o200k():
    """text -> o200k token ids; without bpe_openai, one 0 per word (said once on stderr)."""
    try:
        import bpe_openai
        return bpe_openai.get_encoding("o200k_base").encode_ordinary
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"stream_endpoint: no o200k tokenizer ({exc}); counting words\n")
        return lambda text: [0] * len(text.split())


def load_rules(path: str | None) -> list[dict]:
    if not path:
        return []
    with open(path) as f:
        rules = json.load(f)
    for r in rules:
        if len({"timing" if k in ("ttft", "itl") else k for k in r if k in ACTIONS}) != 1:
            raise SystemExit(f"stream_endpoint: rule {r!r} needs exactly one action")
    return rules


def match(rules: list[dict], i: int) -> dict:
    for r in rules:
        span, every = r.get("requests"), r.get("every")
        if (not span or span[0] <= i <= span[1]) and (not every or i % every == 0):
            return r
    return {}


def prompt_text(req: dict, chat: bool):
    """The prompt as text (chat: message contents concatenated), or as token ids if sent so."""
    if chat:
        out = []
        for m in req.get("messages") or []:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, list):
                out.extend(p.get("text", "") for p in c if isinstance(p, dict))
            elif isinstance(c, str):
                out.append(c)
        return "".join(out)
    p = req.get("prompt", "")
    if isinstance(p, list):
        return p if p and all(isinstance(x, int) for x in p) else "".join(x for x in p if isinstance(x, str))
    return p if isinstance(p, str) else ""


def load(body: bytes) -> dict | None:
    try:
        req = json.loads(body)
    except ValueError:
        return None
    return req if isinstance(req, dict) else None


def frame(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def json_response(status: int, obj, keep: bool, extra: bytes = b"") -> bytes:
    body = json.dumps(obj).encode()
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s%s\r\n%s"
            % (status, HTTPStatus(status).phrase.encode(), len(body), extra,
               b"" if keep else b"Connection: close\r\n", body))


class Answer:
    """One completion being served: its schedule, its chunks and its log record."""

    def __init__(self, conn, rec, chat, req, rule, args, keep):
        self.conn, self.rec, self.chat, self.keep = conn, rec, chat, keep
        self.stream, self.n = rec["stream"], rec["completion_tokens"]
        self.usage = not self.stream or bool((req.get("stream_options") or {}).get("include_usage"))
        self.think = args.reasoning if chat else 0
        self.itl = float(rule.get("itl", args.itl))
        self.start = rec["arrival"] + float(rule.get("delay_headers", 0.0))
        self.t0 = self.start + float(rule.get("ttft", args.ttft))  # token k is due at t0 + k * itl
        self.k, self.handle = 0, None
        self.limit = min(self.n, rule.get("cut_after", rule.get("stall_after", self.n)))
        self.fault = "cut" if "cut_after" in rule else "stall" if "stall_after" in rule else None
        self.ident = f"{'chatcmpl' if chat else 'cmpl'}-{conn.srv.worker}-{rec['i']}"
        self.created, self.model = int(time.time()), args.model
        self.head = (b'data: {"id":"%s","object":"%s","created":%d,"model":%s,"choices":['
                     % (self.ident.encode(), b"chat.completion.chunk" if chat else b"text_completion",
                        self.created, json.dumps(args.model).encode()))

    def begin(self):
        if self.start > time.monotonic():
            self.handle = self.conn.srv.timers.at(self.start, self.headers)
        else:
            self.headers()

    def cancel(self):
        if self.handle is not None:
            self.handle[2] = None

    def headers(self):
        timers = self.conn.srv.timers
        if not self.stream:
            self.handle = timers.at(self.t0 + (self.n - 1) * self.itl, self.body)
            return
        rid = self.rec["request_id"]
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Transfer-Encoding: chunked\r\n%s%s\r\n"
                % (b"X-Request-Id: %s\r\n" % rid.encode("latin-1", "replace") if rid else b"",
                   b"" if self.keep else b"Connection: close\r\n"))
        if self.chat:
            head += frame(self.head + b'{"index":0,"delta":{"role":"assistant"},' + TAIL)
        self.conn.write(head)
        if self.limit == 0:
            self.fault_now()
        else:
            self.handle = timers.at(self.t0, self.step)

    def step(self):
        k, rec = self.k, self.rec
        piece = PIECES[k % len(PIECES)]
        if self.chat:
            key = b'"reasoning_content":' if k < self.think else b'"content":'
            choice = b'{"index":0,"delta":{%s%s},' % (key, piece)
        else:
            choice = b'{"index":0,"text":%s,' % piece
        last = k == self.n - 1
        data = frame(self.head + choice + (LAST_TAIL if last else TAIL))
        if last:
            if self.usage:
                data += frame(self.head + b'],"usage":%s}\n\n' % json.dumps(self.usage_obj()).encode())
            data += frame(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        now = time.monotonic()
        rec["max_late"] = max(rec["max_late"], now - (self.t0 + k * self.itl))
        if k == 0:
            rec["first_write"] = now
        rec["last_write"] = now
        self.conn.write(data)
        rec["chunks"] = self.k = k + 1
        if last:
            self.conn.done(self, "ok")
        elif self.k == self.limit:
            self.fault_now()
        elif not self.conn.closed:
            self.handle = self.conn.srv.timers.at(self.t0 + self.k * self.itl, self.step)

    def fault_now(self):
        self.handle = None
        if self.fault == "cut":
            self.conn.done(self, "cut", close=True)
        else:  # stall: keep the socket open and write nothing; logged when the client closes
            self.rec["outcome"] = "stall"

    def usage_obj(self) -> dict:
        p = self.rec["prompt_tokens"]
        return {"prompt_tokens": p, "completion_tokens": self.n, "total_tokens": p + self.n}

    def body(self):
        if self.fault:
            return self.fault_now()
        words = [" " + WORDS[k % len(WORDS)] for k in range(self.n)]
        if self.chat:
            msg = {"role": "assistant", "content": "".join(words[self.think:])}
            if self.think:
                msg["reasoning_content"] = "".join(words[:self.think])
            choice = {"index": 0, "message": msg, "logprobs": None, "finish_reason": "length"}
        else:
            choice = {"index": 0, "text": "".join(words), "logprobs": None, "finish_reason": "length"}
        obj = {"id": self.ident, "object": "chat.completion" if self.chat else "text_completion",
               "created": self.created, "model": self.model, "choices": [choice],
               "usage": self.usage_obj()}
        now = self.rec["first_write"] = self.rec["last_write"] = time.monotonic()
        self.rec["max_late"] = now - (self.t0 + (self.n - 1) * self.itl)
        self.conn.write(json_response(200, obj, self.keep))
        self.conn.done(self, "ok")


class Conn:
    """A client connection: reads with kernel timestamps, parses HTTP/1.1, writes without blocking."""

    def __init__(self, srv, sock):
        self.srv, self.sock, self.fd = srv, sock, sock.fileno()
        self.buf, self.stamp, self.last_stamp, self.continued = b"", None, None, False
        self.answer, self.wbuf, self.closed, self.close_when_flushed = None, [], False, False
        srv.conns.add(self)
        srv.loop.add_reader(self.fd, self.on_read)

    def on_read(self):
        try:
            data, anc, _, _ = self.sock.recvmsg(262144, socket.CMSG_SPACE(16))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, anc = b"", []
        if not data:
            return self.close("client closed")
        now = time.monotonic()
        stamp = (now, "user")
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack_from("qq", raw)
                t = sec + nsec * 1e-9 - self.srv.offset
                if now - 60 < t < now + 0.001:  # a sane stamp, else keep the user clock
                    stamp = (min(t, now), "kernel")
        self.last_stamp = stamp
        if not self.buf:
            self.stamp = stamp
        self.buf += data
        if self.answer is None:
            self.parse()

    def parse(self):
        if self.closed or self.answer is not None or not self.buf:
            return
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            return self.fail(431, "headers too large") if len(buf) > 65536 else None
        lines = buf[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = headers.get("content-length", "0")
        if len(parts) != 3 or not length.isdigit() or "transfer-encoding" in headers:
            return self.fail(400, "unsupported request (no chunked bodies)")
        size = end + 4 + int(length)
        if len(buf) < size:
            if headers.get("expect", "").lower() == "100-continue" and not self.continued:
                self.continued = True
                self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            return
        body, self.buf, self.continued = buf[end + 4:size], buf[size:], False
        arrival, self.stamp = self.stamp, self.last_stamp if len(buf) > size else None
        conn_hdr = headers.get("connection", "").lower()
        keep = conn_hdr != "close" if parts[2] == "HTTP/1.1" else conn_hdr == "keep-alive"
        self.srv.dispatch(self, parts[0], parts[1].split("?", 1)[0], headers, body, arrival, keep)

    def write(self, data: bytes):
        if not self.closed:
            self.wbuf.append(data)
            if len(self.wbuf) == 1:
                self.send(first=True)

    def send(self, first=False):
        data = self.wbuf[0] if len(self.wbuf) == 1 else b"".join(self.wbuf)
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            return self.srv.loop.call_soon(self.close, "client closed")
        if sent < len(data):
            self.wbuf = [data[sent:]]
            if first:
                self.srv.loop.add_writer(self.fd, self.send)
        else:
            self.wbuf = []
            if not first:
                self.srv.loop.remove_writer(self.fd)
                if self.close_when_flushed:
                    self.close(None)

    def fail(self, status: int, message: str):
        self.write(json_response(status, {"error": {"message": message}}, False))
        self.flush_and_close()

    def flush_and_close(self):
        if self.wbuf:
            self.close_when_flushed = True
        else:
            self.close(None)

    def done(self, answer, outcome, close=False):
        """The answer ended (normally or by a fault): log it, then go on or close."""
        self.answer = None
        self.srv.record(answer.rec, outcome)
        self.next(answer.keep and not close)

    def next(self, keep: bool):
        """After an answer: close, or read the next request if it is already here."""
        if not keep:
            self.flush_and_close()
        elif self.buf:
            self.srv.loop.call_soon(self.parse)

    def close(self, outcome):
        if self.closed:
            return
        self.closed = True
        if self.answer is not None:
            self.answer.cancel()
            rec = self.answer.rec
            self.srv.record(rec, rec["outcome"] or outcome or "aborted")
            self.answer = None
        self.srv.loop.remove_reader(self.fd)
        self.srv.loop.remove_writer(self.fd)
        self.srv.conns.discard(self)
        self.sock.close()


class Server:
    """One process's loop: accepts, routes, keeps the log."""

    def __init__(self, args, lsock, worker, counter, encode):
        self.args, self.lsock, self.worker, self.counter, self.encode = args, lsock, worker, counter, encode
        self.loop = asyncio.SelectorEventLoop(FineEpollSelector())
        self.timers = Timers(self.loop)
        self.rules = load_rules(args.script)
        self.offset, self.ticks, self.served = clock_offset(), 0, 0
        self.conns: set[Conn] = set()
        self.lines: list[bytes] = []
        self.log_fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if args.log else None

    def accept(self):
        for _ in range(64):
            try:
                sock, _ = self.lsock.accept()
            except OSError:  # BlockingIOError included: nothing more to accept now
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            Conn(self, sock)

    def record(self, rec: dict, outcome: str):
        rec["outcome"] = outcome
        self.served += 1
        if self.log_fd is not None:
            if self.args.workers > 1:
                rec["worker"] = self.worker
            self.lines.append(json.dumps(rec).encode() + b"\n")

    def flush(self):
        if self.lines and self.log_fd is not None:
            os.write(self.log_fd, b"".join(self.lines))
        self.lines = []

    def tick(self):
        self.flush()
        self.ticks += 1
        if self.ticks % 10 == 0:
            self.offset = clock_offset()
        self.loop.call_later(1.0, self.tick)

    def dispatch(self, conn, method, path, headers, body, arrival, keep):
        rec = {"i": None, "request_id": headers.get("x-request-id"), "path": path, "stream": False,
               "arrival": arrival[0], "arrival_clock": arrival[1], "first_write": None,
               "last_write": None, "chunks": 0, "prompt_tokens": None, "completion_tokens": None,
               "max_late": 0.0, "outcome": None}
        chat = path == "/v1/chat/completions"
        if method == "POST" and (chat or path == "/v1/completions"):
            rec["i"] = self.counter()
            return self.completion(conn, rec, chat, body, keep)
        req = load(body) if method == "POST" and path == "/tokenize" and self.args.tokenize else None
        if method == "GET" and path == "/v1/models":
            status, obj = 200, {"object": "list", "data": [{"id": self.args.model, "object": "model",
                                "created": 0, "owned_by": "assay", "max_model_len": 32768}]}
        elif req is not None:
            text = prompt_text(req, "messages" in req)
            tokens = text if isinstance(text, list) else list(self.encode(text))
            status, obj = 200, {"tokens": tokens, "count": len(tokens), "max_model_len": 32768}
        else:
            status, obj = 404, {"error": {"message": f"no route {method} {path}", "type": "not_found",
                                          "code": 404}}
        self.reply(conn, rec, keep, status, obj)

    def reply(self, conn, rec, keep, status, obj, extra=b""):
        conn.write(json_response(status, obj, keep, extra))
        self.record(rec, "ok" if status == 200 else f"http {status}")
        conn.next(keep)

    def completion(self, conn, rec, chat, body, keep):
        req = load(body) or {}
        n = next((req[k] for k in ("max_completion_tokens", "max_tokens") if req.get(k) is not None), 16)
        if not req or not isinstance(n, int) or n < 1:
            return self.reply(conn, rec, keep, 400, {"error": {
                "message": "need a JSON object and max_tokens >= 1", "type": "invalid_request_error"}})
        text = prompt_text(req, chat)
        rec.update(stream=bool(req.get("stream")), completion_tokens=n,
                   prompt_tokens=len(text) if isinstance(text, list) else len(self.encode(text)))
        if chat and isinstance(req.get("messages"), list) and req["messages"]:
            first = prompt_text({"messages": req["messages"][:1]}, True)
            rec.update(messages=len(req["messages"]), first=hashlib.sha1(first.encode()).hexdigest()[:12])
        rule = match(self.rules, rec["i"])
        if "status" in rule:
            status = int(rule["status"])
            extra = b"Retry-After: %s\r\n" % str(rule["retry_after"]).encode() if "retry_after" in rule else b""
            obj = rule.get("body") or {"error": {"message": f"scripted error {status}",
                                                 "type": "server_error", "code": status}}
            return self.reply(conn, rec, keep, status, obj, extra)
        conn.answer = Answer(conn, rec, chat, req, rule, self.args, keep)
        conn.answer.begin()

    def run(self, announce: bool):
        loop = self.loop
        asyncio.set_event_loop(loop)
        loop.add_reader(self.lsock.fileno(), self.accept)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, loop.stop)
        loop.call_later(1.0, self.tick)
        if announce:
            print(f"LISTENING {self.lsock.getsockname()[1]}", flush=True)
        try:
            loop.run_forever()
        finally:
            for conn in list(self.conns):
                conn.close(None)
            self.flush()
            if self.log_fd is not None:
                os.close(self.log_fd)
            ru = resource.getrusage(resource.RUSAGE_SELF)
            sys.stderr.write(f"STOPPED worker={self.worker} requests={self.served} "
                             f"cpu_user={ru.ru_utime:.3f} cpu_sys={ru.ru_stime:.3f}\n")
            loop.close()


def shared_counter():
    """Request ordinals shared by forked workers."""
    import multiprocessing
    value = multiprocessing.Value("q", 0)

    def nxt():
        with value.get_lock():
            value.value += 1
            return value.value
    return nxt


def listen(args) -> list[socket.socket]:
    """One listening socket per worker, all on one port (the first picks it when --port is 0)."""
    socks, port = [], args.port
    for _ in range(args.workers):
        s = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if args.workers > 1:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        with contextlib.suppress(OSError):  # inherited by accepted sockets; while one socket
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # asks, every packet is stamped
        s.bind((args.host, port))
        port = s.getsockname()[1]
        s.listen(4096)
        s.setblocking(False)
        socks.append(s)
    return socks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Scripted streaming OpenAI-compatible endpoint.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: pick a free one, printed as LISTENING <port>")
    ap.add_argument("--ttft", type=float, default=0.1, help="seconds from arrival to the first token")
    ap.add_argument("--itl", type=float, default=0.02, help="seconds between tokens")
    ap.add_argument("--model", default="scripted")
    ap.add_argument("--reasoning", type=int, default=0, help="chat: the first N tokens are reasoning_content")
    ap.add_argument("--tokenize", action="store_true", help="serve vLLM's POST /tokenize")
    ap.add_argument("--script", help="JSON list of fault rules")
    ap.add_argument("--log", help="JSON lines, one per request")
    ap.add_argument("--workers", type=int, default=1, help="processes sharing the port (SO_REUSEPORT)")
    args = ap.parse_args(argv)
    args.workers = max(1, args.workers)
    load_rules(args.script)  # fail early on a bad script
    encode = o200k()
    if args.log:
        open(args.log, "w").close()
    socks = listen(args)
    if args.workers == 1:
        Server(args, socks[0], 0, itertools.count(1).__next__, encode).run(announce=True)
        return 0
    counter, children, port = shared_counter(), [], socks[0].getsockname()[1]
    for k, s in enumerate(socks):
        pid = os.fork()
        if pid == 0:  # a worker: serve, then leave (an exception ends it with a traceback, status 1)
            for other in socks:
                if other is not s:
                    other.close()
            Server(args, s, k, counter, encode).run(announce=False)
            os._exit(0)
        children.append(pid)
    for s in socks:
        s.close()

    def forward(sig, _frame):
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    print(f"LISTENING {port}", flush=True)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    sys.stderr.write(f"STOPPED workers={len(children)} cpu_user={ru.ru_utime:.3f} "
                     f"cpu_sys={ru.ru_stime:.3f}\n")
    return max(codes, key=abs)


if __name__ == "__main__":
    sys.exit(main())
