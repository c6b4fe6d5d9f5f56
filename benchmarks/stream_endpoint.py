#!/usr/bin/env python3
"""A scripted, streaming OpenAI-compatible endpoint: exact timing, fault injection and scale.

    python benchmarks/stream_endpoint.py --port 0 --ttft 0.1 --itl 0.02 [--log FILE]
        [--script FILE.json] [--tokenize] [--reasoning N] [--model NAME] [--host H] [--workers N]

It is the instrument `assay bench perf` is checked against: it answers `POST /v1/chat/completions`
and `POST /v1/completions` (streamed as SSE over chunked encoding, or as one JSON body),
`GET /v1/models`, and with `--tokenize` vLLM's `POST /tokenize`; anything else is a 404. Every
token is one word of WORDS with its leading space, and each such word, and any run of them, is
exactly one o200k_base token per word, so a client's own tokenizer agrees with the chunk count.
Standard library only, plus bpe_openai (o200k) when it is importable. With `--port 0` it prints
one line `LISTENING <port>` once it accepts connections; SIGTERM or SIGINT stop it cleanly (the
log is flushed and `STOPPED ...` with its CPU seconds goes to stderr).

Timing model. A request's arrival is the kernel's receive timestamp of its first bytes
(SO_TIMESTAMPNS, CLOCK_REALTIME, turned into time.monotonic() by an offset sampled at start and
every 10 s): `arrival_clock` "kernel"; where there is none, time.monotonic() when the bytes are
read: "user". A streamed answer sends its headers (and, for chat, a chunk with only
`delta.role`) at once, then token k (0-based) at `arrival + ttft + k * itl`: absolute times, so
a late loop writes as soon as it can and the schedule does not drift. A non-streamed answer is
one body at `arrival + ttft + (n - 1) * itl`. `delay_headers: d` shifts all of it by d. The
event loop waits in select() on its epoll descriptor (microsecond timeouts) rather than in
epoll_wait() (milliseconds, rounded up), so writes are typically well under 0.1 ms late.

The log (`--log FILE`, truncated at start): one JSON line per request, written when it ends,
flushed every second and at exit. `i` is the ordinal among POSTs to the completions endpoints
(null for other paths), `request_id` the X-Request-Id header, then `path`, `stream`,
`arrival`, `arrival_clock`, `first_write` (time.monotonic() just before the first token chunk,
reasoning or content), `last_write` (just before the last token chunk), `chunks` (token chunks
written), `prompt_tokens` (o200k count of the prompt; chat: the message contents concatenated),
`completion_tokens` (the answer's length as usage reports it), `max_late` (the latest write
behind its schedule, s), `outcome`: "ok", "http <status>", "cut", "stall", "client closed"
(before the end), "aborted" (server stopped). The server's TTFT is `first_write - arrival`.
With `--workers N` (N processes on one port, SO_REUSEPORT) all append to the one FILE, each
flush a single O_APPEND write of whole lines; lines carry `worker`, and ordinals are shared.

Faults (`--script FILE.json`): a list of rules, the first match wins. A rule selects ordinals
by `"requests": [first, last]` (1-based, inclusive) and/or `"every": k` (ordinal % k == 0;
neither: all) and holds one action: `{"status": 500, "body": {...}}` (that error at once),
`{"status": 429, "retry_after": 1}` (with Retry-After), `{"cut_after": 3}` (3 token chunks,
then close without the terminating chunk), `{"stall_after": 3}` (3 token chunks, then silence
until the client closes), `{"delay_headers": 2.0}`, `{"ttft": x, "itl": y}` (either or both).
Non-streamed: cut closes, stall never answers, at the time the body was due.
"""

from __future__ import annotations

import argparse
import asyncio
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

WORDS = ("the of and to in is it that for on with as was at by be this from or an are not but "
         "all we can time new one day year way").split()
PIECES = [json.dumps(" " + w).encode() for w in WORDS]
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; SCM_TIMESTAMPNS has the same value
ANC_SIZE = socket.CMSG_SPACE(16)
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           503: "Service Unavailable"}
ACTIONS = ("status", "cut_after", "stall_after", "delay_headers", "ttft", "itl")


def clock_offset() -> float:
    """CLOCK_REALTIME minus CLOCK_MONOTONIC, from the tightest of a few bracketed samples."""
    best = (1.0, 0.0)
    for _ in range(9):
        a = time.monotonic(); r = time.time(); b = time.monotonic()  # noqa: E702
        if b - a < best[0]:
            best = (b - a, r - (a + b) / 2)
    return best[1]


class FineEpollSelector(selectors.EpollSelector):
    """epoll, but timed waits happen in select() on the epoll fd: microseconds, not milliseconds."""

    def select(self, timeout=None):
        if timeout is not None and timeout > 0:
            select.select([self._selector.fileno()], [], [], timeout)
            timeout = 0
        return super().select(timeout)


class Tokenizer:
    def __init__(self):
        try:
            import bpe_openai
            self.enc = bpe_openai.get_encoding("o200k_base")
        except Exception as exc:  # noqa: BLE001 - counts become word counts, said once
            print(f"stream_endpoint: no o200k tokenizer ({exc}); counting words", file=sys.stderr)
            self.enc = None

    def encode(self, text: str) -> list[int]:
        if self.enc is not None:
            return list(self.enc.encode_ordinary(text))
        return [0] * len(text.split())


def load_rules(path: str | None) -> list[dict]:
    if not path:
        return []
    with open(path) as f:
        rules = json.load(f)
    for r in rules:
        acts = {("timing" if k in ("ttft", "itl") else k) for k in r if k in ACTIONS}
        if len(acts) != 1:
            raise SystemExit(f"stream_endpoint: rule {r!r} needs exactly one action")
    return rules


def match(rules: list[dict], i: int) -> dict:
    for r in rules:
        span, every = r.get("requests"), r.get("every")
        if span and not span[0] <= i <= span[1]:
            continue
        if every and i % every:
            continue
        return r
    return {}


def prompt_text(req: dict, chat: bool):
    """The prompt as text (chat: message contents concatenated), or its token ids if given so."""
    if chat:
        out = []
        for m in req.get("messages") or []:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, str):
                out.append(c)
            elif isinstance(c, list):
                out.extend(p.get("text", "") for p in c if isinstance(p, dict))
        return "".join(out)
    p = req.get("prompt", "")
    if isinstance(p, list) and p and all(isinstance(x, int) for x in p):
        return p
    if isinstance(p, list):
        return "".join(x for x in p if isinstance(x, str))
    return p if isinstance(p, str) else ""


def frame(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Answer:
    """One completion being served: its schedule, its chunks and its log record."""

    def __init__(self, conn, rec, chat, stream, n, think, ttft, itl, delay, rule, usage, keep,
                 ident, model, rid):
        self.conn, self.rec, self.chat, self.stream, self.n = conn, rec, chat, stream, n
        self.think, self.itl, self.keep, self.usage, self.rid = think, itl, keep, usage, rid
        self.start = rec["arrival"] + delay
        self.t0 = self.start + ttft
        self.k, self.handle = 0, None
        self.limit = min(n, rule.get("cut_after", rule.get("stall_after", n)))
        self.fault = "cut" if "cut_after" in rule else "stall" if "stall_after" in rule else None
        created = int(time.time())
        kind = b"chat.completion.chunk" if chat else b"text_completion"
        self.head = (b'data: {"id":"%s","object":"%s","created":%d,"model":%s,"choices":['
                     % (ident.encode(), kind, created, json.dumps(model).encode()))
        self.ident, self.created, self.model = ident, created, model

    def begin(self):
        loop = self.conn.srv.loop
        if self.start > loop.time():
            self.handle = loop.call_at(self.start, self.headers)
        else:
            self.headers()

    def cancel(self):
        if self.handle is not None:
            self.handle.cancel()

    def headers(self):
        loop = self.conn.srv.loop
        if not self.stream:
            self.handle = loop.call_at(self.t0 + (self.n - 1) * self.itl, self.body)
            return
        extra = b"X-Request-Id: %s\r\n" % self.rid.encode("latin-1", "replace") if self.rid else b""
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Transfer-Encoding: chunked\r\n%s%s\r\n"
                % (extra, b"" if self.keep else b"Connection: close\r\n"))
        if self.chat:
            head += frame(self.head + b'{"index":0,"delta":{"role":"assistant"},'
                          b'"logprobs":null,"finish_reason":null}]}\n\n')
        self.conn.write(head)
        if self.limit == 0:
            self.fault_now()
        else:
            self.handle = loop.call_at(self.t0, self.step)

    def step(self):
        k, rec = self.k, self.rec
        piece = PIECES[k % len(PIECES)]
        if self.chat:
            key = b'"reasoning_content":' if k < self.think else b'"content":'
            choice = b'{"index":0,"delta":{%s%s},' % (key, piece)
        else:
            choice = b'{"index":0,"text":%s,' % piece
        last = k == self.n - 1
        data = frame(self.head + choice + (b'"logprobs":null,"finish_reason":"length"}]}\n\n'
                                           if last else b'"logprobs":null,"finish_reason":null}]}\n\n'))
        if last:
            if self.usage:
                data += frame(self.head + b'],"usage":%s}\n\n' % json.dumps(self.usage_obj()).encode())
            data += frame(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        now = time.monotonic()
        late = now - (self.t0 + k * self.itl)
        if late > rec["max_late"]:
            rec["max_late"] = late
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
            self.handle = self.conn.srv.loop.call_at(self.t0 + self.k * self.itl, self.step)

    def fault_now(self):
        self.handle = None
        if self.fault == "cut":
            self.conn.done(self, "cut", close=True)
        else:  # stall: keep the socket open, write nothing; logged when the client closes
            self.rec["outcome"] = "stall"

    def usage_obj(self):
        p = self.rec["prompt_tokens"]
        return {"prompt_tokens": p, "completion_tokens": self.n, "total_tokens": p + self.n}

    def body(self):
        self.handle = None
        if self.fault == "stall":
            self.rec["outcome"] = "stall"
            return
        if self.fault == "cut":
            self.conn.done(self, "cut", close=True)
            return
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
        self.rec["first_write"] = self.rec["last_write"] = time.monotonic()
        self.rec["max_late"] = self.rec["first_write"] - (self.t0 + (self.n - 1) * self.itl)
        self.conn.write(json_response(200, obj, self.keep))
        self.conn.done(self, "ok")


def json_response(status: int, obj, keep: bool, extra: bytes = b"") -> bytes:
    body = json.dumps(obj).encode()
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s%s\r\n%s"
            % (status, REASONS.get(status, "Error").encode(), len(body), extra,
               b"" if keep else b"Connection: close\r\n", body))


class Conn:
    """One client connection: reads with kernel timestamps, parses HTTP/1.1, writes without blocking."""

    def __init__(self, srv, sock):
        self.srv, self.sock, self.fd = srv, sock, sock.fileno()
        self.buf, self.stamp, self.last_stamp = b"", None, None
        self.answer, self.wbuf, self.closed, self.close_when_flushed = None, [], False, False
        srv.conns.add(self)
        srv.loop.add_reader(self.fd, self.on_read)

    def on_read(self):
        try:
            data, anc, _, _ = self.sock.recvmsg(262144, ANC_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, anc = b"", []
        if not data:
            self.close("client closed")
            return
        now = time.monotonic()
        stamp = (now, "user")
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack_from("qq", raw)
                t = sec + nsec * 1e-9 - self.srv.offset
                if now - 60 < t < now + 0.001:
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
            if len(buf) > 65536:
                self.write(json_response(431, {"error": {"message": "headers too large"}}, False))
                self.flush_and_close()
            return
        lines = buf[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        try:
            length = int(headers.get("content-length", 0))
        except ValueError:
            length = -1
        if len(parts) != 3 or length < 0 or "transfer-encoding" in headers:
            self.write(json_response(400, {"error": {"message": "unsupported request"}}, False))
            self.flush_and_close()
            return
        if len(buf) < end + 4 + length:
            return
        body, self.buf = buf[end + 4:end + 4 + length], buf[end + 4 + length:]
        arrival = self.stamp
        self.stamp = self.last_stamp if self.buf else None
        conn_hdr = headers.get("connection", "").lower()
        keep = conn_hdr != "close" if parts[2] == "HTTP/1.1" else conn_hdr == "keep-alive"
        self.srv.dispatch(self, parts[0], parts[1].split("?", 1)[0], headers, body, arrival, keep)

    def write(self, data: bytes):
        if self.closed:
            return
        if self.wbuf:
            self.wbuf.append(data)
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.srv.loop.call_soon(self.close, "client closed")
            return
        if sent < len(data):
            self.wbuf.append(data[sent:])
            self.srv.loop.add_writer(self.fd, self.on_write)

    def on_write(self):
        data = b"".join(self.wbuf)
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.close("client closed")
            return
        self.wbuf = [data[sent:]] if sent < len(data) else []
        if not self.wbuf:
            self.srv.loop.remove_writer(self.fd)
            if self.close_when_flushed:
                self.close(None)

    def flush_and_close(self):
        if self.wbuf:
            self.close_when_flushed = True
        else:
            self.close(None)

    def done(self, answer, outcome, close=False):
        """The answer ended (normally or by a fault): log it, then close or read the next request."""
        self.answer = None
        self.srv.record(answer.rec, outcome)
        if close or not answer.keep:
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
        loop = self.srv.loop
        loop.remove_reader(self.fd)
        loop.remove_writer(self.fd)
        self.srv.conns.discard(self)
        self.sock.close()


class Server:
    def __init__(self, args, lsock, worker, counter, tokenizer):
        self.args, self.lsock, self.worker, self.counter, self.tok = args, lsock, worker, counter, tokenizer
        self.loop = asyncio.SelectorEventLoop(FineEpollSelector())
        self.rules = load_rules(args.script)
        self.offset, self.ticks = clock_offset(), 0
        self.conns: set[Conn] = set()
        self.lines: list[bytes] = []
        self.served = 0
        self.log_fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if args.log else None

    def accept(self):
        for _ in range(64):
            try:
                sock, _ = self.lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            except OSError:
                pass
            Conn(self, sock)

    def record(self, rec, outcome):
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
            return self.completion(conn, rec, chat, headers, body, keep)
        if method == "GET" and path == "/v1/models":
            status, obj = 200, {"object": "list", "data": [
                {"id": self.args.model, "object": "model", "created": 0, "owned_by": "assay",
                 "max_model_len": 32768}]}
        elif method == "POST" and path == "/tokenize" and self.args.tokenize:
            req = self.load(body)
            if req is None:
                status, obj = 400, {"error": {"message": "body is not a JSON object"}}
            else:
                text = prompt_text(req, "messages" in req)
                tokens = text if isinstance(text, list) else self.tok.encode(text)
                status, obj = 200, {"tokens": tokens, "count": len(tokens), "max_model_len": 32768}
        else:
            status, obj = 404, {"error": {"message": f"no route {method} {path}", "type": "not_found",
                                          "code": 404}}
        conn.write(json_response(status, obj, keep))
        self.record(rec, "ok" if status == 200 else f"http {status}")
        if not keep:
            conn.flush_and_close()
        elif conn.buf:
            self.loop.call_soon(conn.parse)

    @staticmethod
    def load(body):
        try:
            req = json.loads(body)
        except ValueError:
            return None
        return req if isinstance(req, dict) else None

    def reject(self, conn, rec, keep, status, obj, extra=b""):
        conn.write(json_response(status, obj, keep, extra))
        self.record(rec, f"http {status}")
        if not keep:
            conn.flush_and_close()
        elif conn.buf:
            self.loop.call_soon(conn.parse)

    def completion(self, conn, rec, chat, headers, body, keep):
        req = self.load(body)
        n = None
        if req is not None:
            n = req.get("max_completion_tokens")
            n = req.get("max_tokens") if n is None else n
            n = 16 if n is None else n
        if req is None or not isinstance(n, int) or n < 1:
            return self.reject(conn, rec, keep, 400, {"error": {
                "message": "need a JSON object and max_tokens >= 1", "type": "invalid_request_error"}})
        stream = bool(req.get("stream"))
        text = prompt_text(req, chat)
        rec.update(stream=stream, completion_tokens=n,
                   prompt_tokens=len(text) if isinstance(text, list) else len(self.tok.encode(text)))
        rule = match(self.rules, rec["i"])
        if "status" in rule:
            status = int(rule["status"])
            extra = b"Retry-After: %s\r\n" % str(rule["retry_after"]).encode() if "retry_after" in rule else b""
            obj = rule.get("body") or {"error": {"message": f"scripted error {status}",
                                                 "type": "server_error", "code": status}}
            return self.reject(conn, rec, keep, status, obj, extra)
        usage = not stream or bool((req.get("stream_options") or {}).get("include_usage"))
        ident = ("chatcmpl-" if chat else "cmpl-") + f"{self.worker}-{rec['i']}"
        answer = Answer(conn, rec, chat, stream, n, self.args.reasoning if chat else 0,
                        float(rule.get("ttft", self.args.ttft)), float(rule.get("itl", self.args.itl)),
                        float(rule.get("delay_headers", 0.0)), rule, usage, keep, ident,
                        self.args.model, rec["request_id"])
        conn.answer = answer
        answer.begin()

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
            print(f"STOPPED worker={self.worker} requests={self.served} cpu_user={ru.ru_utime:.3f} "
                  f"cpu_sys={ru.ru_stime:.3f}", file=sys.stderr, flush=True)
            loop.close()


def make_counter(shared: bool):
    if not shared:
        state = [0]

        def nxt():
            state[0] += 1
            return state[0]
        return nxt
    import multiprocessing
    value = multiprocessing.Value("q", 0)

    def nxt_shared():
        with value.get_lock():
            value.value += 1
            return value.value
    return nxt_shared


def main(argv=None):
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
    load_rules(args.script)  # fail early on a bad script
    tokenizer = Tokenizer()
    if args.log:
        open(args.log, "w").close()
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    socks, port = [], args.port
    for _ in range(max(1, args.workers)):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if args.workers > 1:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            pass
        s.bind((args.host, port))
        port = s.getsockname()[1]
        s.listen(4096)
        s.setblocking(False)
        socks.append(s)
    counter = make_counter(args.workers > 1)
    if args.workers <= 1:
        Server(args, socks[0], 0, counter, tokenizer).run(announce=True)
        return 0
    children = []
    for k, s in enumerate(socks):
        pid = os.fork()
        if pid == 0:
            for other in socks:
                if other is not s:
                    other.close()
            code = 0
            try:
                Server(args, s, k, counter, tokenizer).run(announce=False)
            except BaseException:  # noqa: BLE001
                import traceback
                traceback.print_exc()
                code = 1
            os._exit(code)
        children.append(pid)
    for s in socks:
        s.close()

    def forward(sig, _frame):
        for pid in children:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    print(f"LISTENING {port}", flush=True)
    code = 0
    for pid in children:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        code = code or os.waitstatus_to_exitcode(status)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"STOPPED workers={len(children)} cpu_user={ru.ru_utime:.3f} cpu_sys={ru.ru_stime:.3f}",
          file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
