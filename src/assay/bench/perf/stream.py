"""Streamed HTTP exchanges, each byte stamped with when it arrived: the instrument of ``assay bench perf``.

Why not an ordinary client: a client that stamps a chunk when its own code gets round to it
adds its event-loop lag to every figure, and under load (hundreds of streams on a few cores)
that lag is tens to hundreds of milliseconds — the peers' TTFT errors at 256 streams come from
there. Here, on Linux over plain HTTP, each socket has ``SO_TIMESTAMPNS`` set and is read with
``recvmsg``: the kernel stamps every segment when it arrives on the socket, so a chunk's time
does not depend on when the event loop read it (``clock = "kernel"``). Kernel stamps are
``CLOCK_REALTIME``; they are moved to the ``time.monotonic()`` scale with an offset sampled at
start and checked at the end (a clock step between the two is reported). Over TLS, or where the
kernel gives no stamp, the read time is used (``clock = "user"``) and the run says so.

The hot path does as little as possible: one ``recvmsg`` per readable event, the stamp and
the bytes appended to a list, their count held against ``max_answer`` (16 MiB: past it the
exchange ends as ``too large``), a look at the tail for the end of the chunked body. HTTP
framing and SSE events are decoded after the exchange ends (:func:`decode`, one pass, linear
in the answer), each event carrying the stamp of the read that completed it. A head over 64
KiB, more than 8 informational heads, a chunk size or ``Content-Length`` that is not a plain
number end the exchange as ``bad answer``.

A watchdog task wakes every ``tick`` seconds: it ends exchanges that ran past the timeout or
stalled (no byte for ``stall_timeout``), and records how late it woke — the event loop's lag,
one of the run's validity figures.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from assay.models.http import (
    MAX_BODY,
    MAX_CHUNK_LINE,
    MAX_HEAD,
    MAX_INTERIM,
    AnswerTooLarge,
    ProtocolError,
    chunk_size,
    content_length,
    default_ssl_context,
    size_text,
    split_origin,
)

# Linux values (asm-generic/socket.h); Python's socket module does not export them.
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_ANC = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TS = struct.Struct("qq")
_READ = 1 << 18
#: bytes kept for one exchange (head and body): past it the exchange ends as ``too large``
MAX_ANSWER = MAX_BODY
_HEX_DIGITS = b"0123456789abcdefABCDEF"     # a size line of only these needs no other check
#: seconds to connect (name lookup included)
CONNECT_TIMEOUT = 30.0


def realtime_offset_ns() -> int:
    """``CLOCK_REALTIME - CLOCK_MONOTONIC`` in ns, from the tightest of a few bracketed samples."""
    best, off = None, 0
    for _ in range(9):
        a = time.monotonic_ns()
        r = time.time_ns()
        b = time.monotonic_ns()
        if best is None or b - a < best:
            best, off = b - a, r - (a + b) // 2
    return off


@dataclass(slots=True)
class Exchange:
    """One request and its answer as it arrived: ``reads`` are ``(monotonic s, bytes)``."""

    sent: float = 0.0
    reads: list[tuple[float, bytes]] = field(default_factory=list)
    error: str | None = None          # the failure cause when the exchange did not complete
    detail: str = ""
    complete: bool = False
    last: float = 0.0                 # monotonic time of the last read (for stalls)
    kernel_stamps: int = 0
    user_stamps: int = 0
    size: int = 0                     # bytes read (held against the client's max_answer)
    # framing state for spotting the end of the answer (the hot path)
    _head: bytearray = field(default_factory=bytearray)
    _scan: int = 0                    # where the search for the head's end resumes
    _head_bytes: int = 0              # head bytes of this answer so far, 1xx heads included
    _interim: int = 0                 # informational (1xx) heads read past
    _framing: str = ""                # "" until the head is read, then chunked | length | close
    _left: int = 0
    _tail: bytes = b""
    keep_alive: bool = True


def _head_end(buf: bytearray, scan: int, head_bytes: int) -> int:
    """Where the head at the start of ``buf`` ends (-1: not yet); ProtocolError past ``MAX_HEAD``."""
    end = buf.find(b"\r\n\r\n", max(0, scan - 3))
    if head_bytes + (len(buf) if end < 0 else end + 4) > MAX_HEAD:
        raise ProtocolError(f"the answer's head is over {size_text(MAX_HEAD)}")
    return end


def _read_head(text: str, interim: int) -> tuple[str, int, dict[str, str]] | None:
    """The version, status and headers of one head; None for an informational (1xx) one
    (``interim``: how many came before it)."""
    lines = text.split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not (parts[1].isascii() and parts[1].isdigit()):
        raise ProtocolError(f"not an HTTP response: {lines[0][:80]!r}")
    status = int(parts[1])
    if 100 <= status < 200:
        if interim + 1 > MAX_INTERIM:
            raise ProtocolError(f"more than {MAX_INTERIM} informational (1xx) heads before the answer")
        return None
    headers: dict[str, str] = {}
    for ln in lines[1:]:
        k, sep, v = ln.partition(":")
        if sep:
            k, v = k.strip().lower(), v.strip()
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
    return parts[0], status, headers


def _framing(status: int, headers: dict[str, str], cap: int) -> tuple[str, int]:
    """``(chunked | length | close, Content-Length)`` of an answer's head."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return "chunked", 0
    if "content-length" in headers:
        n = content_length(headers["content-length"])
        if n > cap:
            raise AnswerTooLarge(f"the body is over the {size_text(cap)} cap (Content-Length {n:,})")
        return "length", n
    if status in (204, 304):
        return "length", 0
    return "close", 0


def _answer_ended(ex: Exchange, data: bytes, cap: int = MAX_ANSWER) -> bool:
    """Whether the HTTP/1.1 answer ended with ``data``: spotted cheaply, as bytes arrive."""
    if not ex._framing:
        head = ex._head
        head += data
        while True:                       # 1xx heads first, each bounded; never recursive
            end = _head_end(head, ex._scan, ex._head_bytes)
            if end < 0:
                ex._scan = len(head)
                return False
            ex._head_bytes += end + 4
            got = _read_head(head[:end].decode("latin-1"), ex._interim)
            del head[:end + 4]
            ex._scan = 0
            if got is not None:
                break
            ex._interim += 1
        version, status, hdr = got
        if version == "HTTP/1.0" or "close" in hdr.get("connection", "").lower():
            ex.keep_alive = False
        ex._framing, ex._left = _framing(status, hdr, cap)
        if ex._framing == "close":
            ex.keep_alive = False
        data = bytes(head)
        head.clear()
    if ex._framing == "length":
        ex._left -= len(data)
        return ex._left <= 0
    if ex._framing == "chunked":
        return _chunked(ex, data, cap)
    return False


def _chunked(ex: Exchange, data: bytes, cap: int) -> bool:
    """Follow chunk sizes across reads (usually one chunk per read: a few operations); True
    when the last chunk and its closing empty line have arrived. ``_left`` is what remains of
    the current chunk's data and CRLF; ``_tail`` an incomplete size line; ``_left = -1`` after
    the zero-size chunk, waiting for the empty line that ends the trailers. ProtocolError for a
    size that is not hex digits, AnswerTooLarge for one over ``cap``."""
    if ex._tail:
        data, ex._tail = ex._tail + data, b""
    pos, n = 0, len(data)
    while pos < n:
        if ex._left > 0:
            take = min(ex._left, n - pos)
            ex._left -= take
            pos += take
            continue
        eol = data.find(b"\r\n", pos)
        if eol < 0:
            ex._tail = data[pos:]
            if len(ex._tail) > MAX_CHUNK_LINE:
                raise ProtocolError(f"a chunk-size line is over {size_text(MAX_CHUNK_LINE)}")
            return False
        if ex._left < 0:                  # trailers after the last chunk: an empty line ends them
            if eol == pos:
                return True
            pos = eol + 2
            continue
        line = data[pos:eol]
        size = int(line, 16) if line and not line.translate(None, _HEX_DIGITS) else chunk_size(line)
        if size > cap:
            raise AnswerTooLarge(f"a chunk of {size:,} bytes is over the {size_text(cap)} answer cap")
        pos = eol + 2
        ex._left = size + 2 if size else -1
    return False


@dataclass(slots=True)
class Decoded:
    status: int
    headers: dict[str, str]
    events: list[tuple[float, bytes]]   # (stamp, the event's data) for SSE; [(stamp, body)] otherwise
    body: bytes
    ended: bool                         # the body ended as its framing says
    work: int = 0                       # bytes the decoder copied or searched: linear in the answer


def decode(ex: Exchange) -> Decoded:
    """HTTP framing and SSE events of an exchange; each event stamped by the read that completed it.
    One pass: each byte is copied and searched a bounded number of times. ValueError for an
    answer that is not HTTP/1.x as it should be (a bad chunk size or Content-Length, a head over
    64 KiB, more than 8 informational heads)."""
    dec = _Decoder()
    try:
        for t, data in ex.reads:
            dec.feed(t, data)
    except ProtocolError as exc:
        raise ValueError(str(exc)) from None
    ended = dec.ended or (dec.framing == "close" and not ex.error)
    body = b"".join(dec.body)
    dec.work += len(body)
    events = dec.events
    if not dec.stream and ex.reads:
        events = [(ex.reads[-1][0], body)]
    return Decoded(dec.status, dec.headers, events, body, ended, dec.work)


class _Decoder:
    """The state of :func:`decode` between reads."""

    def __init__(self) -> None:
        self.buf = bytearray()            # framing bytes not used yet
        self.scan = self.head_bytes = self.interim = 0
        self.status, self.headers = 0, {}
        self.framing, self.left, self.stream, self.ended = "", 0, False, False
        self.state, self.need = "size", 0  # chunked: a size line, then its data, then CRLF
        self.body: list[bytes] = []
        self.events: list[tuple[float, bytes]] = []
        self.line = bytearray()           # SSE: the line not ended yet
        self.cr = False                   # SSE: the last line ended with a CR (an LF may follow)
        self.data: list[bytes] = []       # SSE: the data lines of the event being read
        self.work = 0

    def feed(self, t: float, data: bytes) -> None:
        if self.ended:
            return
        self.buf += data
        self.work += len(data)
        if not self.framing and not self._heads():
            return
        buf = self.buf
        if self.framing == "chunked":
            new = self._chunks()
        elif self.framing == "length":
            new = [bytes(buf[:self.left])]
            self.left -= len(new[0])
            self.ended = self.left <= 0
            buf.clear()                   # anything past the length is not this answer's
        else:
            new = [bytes(buf)]
            buf.clear()
        self.work += sum(len(b) for b in new)
        piece = b"".join(new) if len(new) != 1 else new[0]
        if piece:
            self.body.append(piece)
            if self.stream:
                self._sse(t, piece)

    def _heads(self) -> bool:
        buf = self.buf
        while True:
            end = _head_end(buf, self.scan, self.head_bytes)
            self.work += (end if end >= 0 else len(buf)) - max(0, self.scan - 3)
            if end < 0:
                self.scan = len(buf)
                return False
            self.head_bytes += end + 4
            got = _read_head(buf[:end].decode("latin-1"), self.interim)
            del buf[:end + 4]
            self.scan = 0
            if got is not None:
                break
            self.interim += 1
        _, self.status, self.headers = got
        self.stream = "text/event-stream" in self.headers.get("content-type", "")
        self.framing, self.left = _framing(self.status, self.headers, 1 << 62)
        return True

    def _chunks(self) -> list[bytes]:
        buf, new = self.buf, []
        pos, n = 0, len(buf)
        while pos < n and not self.ended:
            if self.state == "data":
                take = min(self.need, n - pos)
                new.append(bytes(buf[pos:pos + take]))
                self.need -= take
                pos += take
                if not self.need:
                    self.state = "crlf"
                continue
            if self.state == "crlf":
                if n - pos < 2:
                    break
                pos, self.state = pos + 2, "size"
                continue
            eol = buf.find(b"\r\n", pos)
            self.work += (eol if eol >= 0 else n) - pos
            if eol < 0:
                if n - pos > MAX_CHUNK_LINE:
                    raise ProtocolError(f"a chunk-size line is over {size_text(MAX_CHUNK_LINE)}")
                break
            self.need = chunk_size(buf[pos:eol])
            pos = eol + 2
            if self.need:
                self.state = "data"
            else:
                self.ended = True
        del buf[:pos]                     # from the front: no copy (what is left: part of a size line)
        return new

    def _sse(self, t: float, piece: bytes) -> None:
        """Split ``piece`` into lines (CR, LF or CRLF, as SSE says) and events (an empty line ends one)."""
        if self.cr and piece[:1] == b"\n":
            piece = piece[1:]             # the LF of a CRLF split across two pieces
            self.work += len(piece)
        self.cr = False
        lines = piece.splitlines(keepends=True)
        # splitting scans and copies each byte once; then a line's slice, its data's slice and
        # strip, the event's join: at most six passes over each byte in all
        self.work += 6 * len(piece)
        partial = lines.pop() if lines and not lines[-1].endswith((b"\n", b"\r")) else b""
        if self.line and lines:
            lines[0] = bytes(self.line) + lines[0]
            self.work += 2 * len(lines[0])
            self.line.clear()
        for ln in lines:
            ln = ln[:-2] if ln.endswith(b"\r\n") else ln[:-1]
            if not ln:
                if self.data:
                    self.events.append((t, b"\n".join(self.data)))
                    self.data = []
            elif ln.startswith(b"data:"):
                self.data.append(ln[5:].lstrip())
        if partial:
            self.line += partial
        elif lines:
            self.cr = lines[-1].endswith(b"\r")


class StreamClient:
    """Keep-alive HTTP/1.1 connections to one origin whose answers are stamped on arrival."""

    def __init__(self, url: str, *, timeout: float = 600.0, stall_timeout: float = 60.0, tick: float = 0.05,
                 kernel_stamps: bool = True, max_answer: int = MAX_ANSWER) -> None:
        self.scheme, self.host, self.port = split_origin(url)
        self.timeout = timeout
        self.max_answer = max_answer
        self.stall_timeout = stall_timeout
        self.tick = tick
        self.kernel = kernel_stamps and self.scheme == "http" and sys.platform.startswith("linux") and _ANC > 0
        self.offset_ns = realtime_offset_ns()
        self.loop_lag: list[float] = []
        self._idle: list[Any] = []
        self._inflight: dict[int, tuple[Exchange, asyncio.Future, Any]] = {}
        self._senders: dict[int, asyncio.Task] = {}   # requests too large for one send()
        self._watch: asyncio.Task | None = None
        self._ssl: ssl.SSLContext | None = None
        self._seq = 0

    @property
    def clock(self) -> str:
        return "kernel" if self.kernel else "user"

    # -- connections ------------------------------------------------------------------------
    async def _connect(self) -> Any:
        loop = asyncio.get_running_loop()
        if self.kernel:
            deadline = loop.time() + CONNECT_TIMEOUT     # name lookup and every address, together
            try:
                infos = await asyncio.wait_for(loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM),
                                               CONNECT_TIMEOUT)
            except (OSError, asyncio.TimeoutError) as exc:
                raise ConnectionError(f"cannot resolve {self.host}: {exc or 'no answer in 30 s'}") from None
            last: Exception | None = None
            for family, type_, proto, _, addr in infos:
                sock = socket.socket(family, type_, proto)
                sock.setblocking(False)
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                    await asyncio.wait_for(loop.sock_connect(sock, addr), max(0.0, deadline - loop.time()))
                    return sock
                except (OSError, asyncio.TimeoutError) as exc:
                    sock.close()
                    last = exc
            raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {last or 'no answer in 30 s'}")
        if self.scheme == "https" and self._ssl is None:
            self._ssl = default_ssl_context()
        try:
            transport, proto = await asyncio.wait_for(loop.create_connection(
                _Proto, self.host, self.port, ssl=self._ssl, server_hostname=self.host if self._ssl else None),
                CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError) as exc:
            raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        return proto

    def _close(self, conn: Any) -> None:
        try:
            if isinstance(conn, socket.socket):
                try:
                    loop = asyncio.get_running_loop()
                    loop.remove_reader(conn.fileno())
                    loop.remove_writer(conn.fileno())   # a send cut short: its fd may be reused
                except (ValueError, RuntimeError):
                    pass
                conn.close()
            else:
                conn.transport.abort()
        except Exception:
            pass

    async def aclose(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for key in list(self._inflight):
            self._finish(key, "cancelled")
        idle, self._idle = self._idle, []
        for conn in idle:
            self._close(conn)

    # -- one exchange -------------------------------------------------------------------------
    async def request(self, payload: bytes) -> Exchange:  # noqa: C901
        """Send ``payload`` (a whole HTTP/1.1 request) and wait for the whole answer; never raises
        for the server's faults: they end up in ``Exchange.error``."""
        loop = asyncio.get_running_loop()
        if self._watch is None or self._watch.done():
            self._watch = loop.create_task(self._watchdog())
        for attempt in range(2):
            conn = None
            while self._idle and conn is None:
                conn = self._idle.pop()
                if not isinstance(conn, socket.socket) and conn.transport.is_closing():
                    conn = None
            reused = conn is not None
            ex = Exchange()
            try:
                if conn is None:
                    conn = await self._connect()
            except ConnectionError as exc:
                ex.error, ex.detail = "connect error", str(exc)
                return ex
            fut = loop.create_future()
            self._seq += 1
            key = self._seq
            self._inflight[key] = (ex, fut, conn)
            try:
                if isinstance(conn, socket.socket):
                    loop.add_reader(conn.fileno(), self._readable, key, conn, ex)
                    ex.sent = ex.last = time.monotonic()
                    try:
                        n = conn.send(payload)
                    except BlockingIOError:
                        n = 0
                    if n < len(payload):    # the rest as the server reads it, under the watchdog
                        self._senders[key] = loop.create_task(self._send_rest(key, conn, payload[n:], reused))
                else:
                    conn.bind(self, key, ex)
                    ex.sent = ex.last = time.monotonic()
                    conn.transport.write(payload)
            except OSError as exc:
                self._finish(key, "stale" if reused else "connect error", str(exc))
            await fut
            if ex.error == "stale" and attempt == 0:
                continue                      # the server closed an idle connection: once more, fresh
            if ex.error == "stale":
                ex.error = "connection closed"
            return ex
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_rest(self, key: int, sock: socket.socket, data: bytes, reused: bool) -> None:
        try:
            await asyncio.get_running_loop().sock_sendall(sock, data)
        except OSError as exc:
            self._senders.pop(key, None)
            self._finish(key, "stale" if reused else "connect error", str(exc))
        else:
            self._senders.pop(key, None)

    def _readable(self, key: int, sock: socket.socket, ex: Exchange) -> None:
        offset = self.offset_ns
        while True:
            try:
                data, anc, _, _ = sock.recvmsg(_READ, _ANC)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._finish(key, "stream cut" if ex.reads else "stale", str(exc))
                return
            now = time.monotonic()
            if not data:
                self._finish(key, "stream cut" if ex.reads else "stale", "the server closed the connection")
                return
            t, kernel = now, False
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(cdata) >= 16:
                    sec, nsec = _TS.unpack_from(cdata)
                    k = (sec * 1_000_000_000 + nsec - offset) / 1e9
                    if ex.sent - 0.001 <= k <= now + 0.001:
                        t, kernel = k, True
                    break
            if kernel:
                ex.kernel_stamps += 1
            else:
                ex.user_stamps += 1
            ex.reads.append((t, data))
            ex.last = now
            if self._ended(key, ex, data):
                return

    def _ended(self, key: int, ex: Exchange, data: bytes) -> bool:
        """After a read: end the exchange if its answer ended, broke the framing or the cap."""
        ex.size += len(data)
        try:
            if ex.size > self.max_answer:
                raise AnswerTooLarge(f"the answer is over the {size_text(self.max_answer)} cap")
            if not _answer_ended(ex, data, self.max_answer):
                return False
        except AnswerTooLarge as exc:
            self._finish(key, "too large", str(exc))
        except (ValueError, ProtocolError) as exc:   # an unreadable head, chunk size, Content-Length
            self._finish(key, "bad answer", str(exc))
        else:
            self._finish(key, None)
        return True

    def _finish(self, key: int, error: str | None, detail: str = "") -> None:
        got = self._inflight.pop(key, None)
        if got is None:
            return
        ex, fut, conn = got
        sender = self._senders.pop(key, None)
        if sender is not None and not sender.done():
            sender.cancel()                   # ended (a timeout, a stall, an early answer) mid-send:
            ex.keep_alive = False             # the connection is not reusable
        if error == "stream cut" and ex._framing == "close":
            error = None                      # read-until-close bodies end this way
            ex.keep_alive = False
        ex.error, ex.detail = error, detail
        ex.complete = error is None
        if isinstance(conn, socket.socket):
            try:
                asyncio.get_running_loop().remove_reader(conn.fileno())
            except (ValueError, RuntimeError):
                pass
        else:
            conn.unbind()
        if error is None and ex.keep_alive:
            self._idle.append(conn)
        else:
            self._close(conn)
        if not fut.done():
            fut.set_result(None)

    async def _watchdog(self) -> None:
        tick = self.tick
        lag = self.loop_lag
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(tick)
            now = time.monotonic()
            if self._inflight:
                lag.append(max(0.0, now - t0 - tick))
            for key, (ex, _, _) in list(self._inflight.items()):
                if now - ex.sent > self.timeout:
                    self._finish(key, "timeout", f"no complete answer in {self.timeout:g} s")
                elif now - ex.last > self.stall_timeout:
                    self._finish(key, "stall", f"no byte for {self.stall_timeout:g} s")

    def stamp_clock_drift_ms(self) -> float:
        """How far the realtime-to-monotonic offset moved since start (a clock step), in ms."""
        return abs(realtime_offset_ns() - self.offset_ns) / 1e6


class _Proto(asyncio.Protocol):
    """The TLS (or no-kernel-stamp) path: bytes stamped when the event loop delivers them."""

    def __init__(self) -> None:
        self.transport: Any = None
        self.client: StreamClient | None = None
        self.key = 0
        self.ex: Exchange | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def bind(self, client: StreamClient, key: int, ex: Exchange) -> None:
        self.client, self.key, self.ex = client, key, ex

    def unbind(self) -> None:
        self.client, self.ex = None, None

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        ex, client = self.ex, self.client
        if ex is None or client is None:
            return
        ex.reads.append((now, data))
        ex.user_stamps += 1
        ex.last = now
        client._ended(self.key, ex, data)

    def connection_lost(self, exc: Exception | None) -> None:
        ex, client = self.ex, self.client
        if ex is not None and client is not None:
            client._finish(self.key, "stream cut" if ex.reads else "stale", str(exc or "the server closed the connection"))


__all__ = ["Decoded", "Exchange", "StreamClient", "decode", "realtime_offset_ns"]
