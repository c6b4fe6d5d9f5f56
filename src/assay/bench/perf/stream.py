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
the bytes appended to a list, a look at the tail for the end of the chunked body. HTTP
framing and SSE events are decoded after the exchange ends (:func:`decode`), each event
carrying the stamp of the read that completed it.

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

from assay.models.http import default_ssl_context, split_origin

# Linux values (asm-generic/socket.h); Python's socket module does not export them.
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
_ANC = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TS = struct.Struct("qq")
_READ = 1 << 18


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
    # framing state for spotting the end of the answer (the hot path)
    _head: bytes = b""
    _framing: str = ""                # "" until the head is read, then chunked | length | close
    _left: int = 0
    _tail: bytes = b""
    keep_alive: bool = True


def _answer_ended(ex: Exchange, data: bytes) -> bool:
    """Whether the HTTP/1.1 answer ended with ``data``: spotted cheaply, as bytes arrive."""
    if not ex._framing:
        ex._head += data
        end = ex._head.find(b"\r\n\r\n")
        if end < 0:
            return False
        head, body = ex._head[:end].decode("latin-1"), ex._head[end + 4:]
        ex._head = b""
        lines = head.split("\r\n")
        hdr = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        status = lines[0].split(" ", 2)
        if len(status) > 1 and status[1].startswith("1"):   # 100 Continue: the answer follows
            return _answer_ended(ex, body)
        if lines[0].startswith("HTTP/1.0") or "close" in hdr.get("connection", "").lower():
            ex.keep_alive = False
        if "chunked" in hdr.get("transfer-encoding", "").lower():
            ex._framing = "chunked"
        elif "content-length" in hdr:
            ex._framing, ex._left = "length", int(hdr["content-length"] or 0)
        else:
            ex._framing, ex.keep_alive = "close", False
        data = body
    if ex._framing == "length":
        ex._left -= len(data)
        return ex._left <= 0
    if ex._framing == "chunked":
        return _chunked(ex, data)
    return False


def _chunked(ex: Exchange, data: bytes) -> bool:
    """Follow chunk sizes across reads (usually one chunk per read: a few operations); True
    when the last chunk and its closing empty line have arrived. ``_left`` is what remains of
    the current chunk's data and CRLF; ``_tail`` an incomplete size line; ``_left = -1`` after
    the zero-size chunk, waiting for the empty line that ends the trailers."""
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
            return False
        if ex._left < 0:                  # trailers after the last chunk: an empty line ends them
            if eol == pos:
                return True
            pos = eol + 2
            continue
        try:
            size = int(data[pos:eol].split(b";", 1)[0].strip() or b"0", 16)
        except ValueError:
            return True                   # unreadable framing: end here; decode() reports it
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


def decode(ex: Exchange) -> Decoded:  # noqa: C901
    """HTTP framing and SSE events of an exchange; each event stamped by the read that completed it."""
    buf = b""
    status, headers = 0, {}
    framing = ""
    left = 0
    body_parts: list[bytes] = []
    events: list[tuple[float, bytes]] = []
    sse = b""
    state, need = "size", 0  # chunked framing: a size line, then its data, then CRLF
    ended = False
    stream = False
    for t, data in ex.reads:
        buf += data
        while not framing:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            lines = buf[:end].decode("latin-1").split("\r\n")
            buf = buf[end + 4:]
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
                raise ValueError(f"not an HTTP response: {lines[0][:80]!r}")
            status = int(parts[1])
            if 100 <= status < 200:
                continue                      # 100 Continue: the real head follows
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            stream = "text/event-stream" in headers.get("content-type", "")
            if "chunked" in headers.get("transfer-encoding", "").lower():
                framing = "chunked"
            elif "content-length" in headers:
                framing, left = "length", int(headers["content-length"] or 0)
            else:
                framing = "close"
        if not framing:
            continue
        new: list[bytes] = []
        if framing == "chunked":
            while not ended:
                if state == "size":
                    eol = buf.find(b"\r\n")
                    if eol < 0:
                        break
                    need = int(buf[:eol].split(b";", 1)[0].strip() or b"0", 16)
                    buf = buf[eol + 2:]
                    if need == 0:
                        ended = True
                    else:
                        state = "data"
                elif state == "data":
                    if not buf:
                        break
                    take = buf[:need]
                    new.append(take)
                    need -= len(take)
                    buf = buf[len(take):]
                    if need == 0:
                        state = "crlf"
                else:
                    if len(buf) < 2:
                        break
                    buf, state = buf[2:], "size"
        elif framing == "length":
            take = buf[:left]
            new.append(take)
            left -= len(take)
            buf = buf[len(take):]
            ended = left <= 0
        elif framing == "close":
            new.append(buf)
            buf = b""
        if not new:
            continue
        piece = b"".join(new)
        body_parts.append(piece)
        if stream:
            sse += piece
            while True:
                end = sse.find(b"\n\n")
                end_r = sse.find(b"\r\n\r\n")
                if end_r >= 0 and (end < 0 or end_r < end):
                    ev, sse = sse[:end_r], sse[end_r + 4:]
                elif end >= 0:
                    ev, sse = sse[:end], sse[end + 2:]
                else:
                    break
                data_lines = [ln[5:].lstrip() for ln in ev.replace(b"\r\n", b"\n").split(b"\n")
                              if ln.startswith(b"data:")]
                if data_lines:
                    events.append((t, b"\n".join(data_lines)))
    if framing == "close" and not ex.error:
        ended = True
    body = b"".join(body_parts)
    if not stream and ex.reads:
        events = [(ex.reads[-1][0], body)]
    return Decoded(status, headers, events, body, ended)


class StreamClient:
    """Keep-alive HTTP/1.1 connections to one origin whose answers are stamped on arrival."""

    def __init__(self, url: str, *, timeout: float = 600.0, stall_timeout: float = 60.0, tick: float = 0.05,
                 kernel_stamps: bool = True) -> None:
        self.scheme, self.host, self.port = split_origin(url)
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self.tick = tick
        self.kernel = kernel_stamps and self.scheme == "http" and sys.platform.startswith("linux") and _ANC > 0
        self.offset_ns = realtime_offset_ns()
        self.loop_lag: list[float] = []
        self._idle: list[Any] = []
        self._inflight: dict[int, tuple[Exchange, asyncio.Future, Any]] = {}
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
            infos = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            last: Exception | None = None
            for family, type_, proto, _, addr in infos:
                sock = socket.socket(family, type_, proto)
                sock.setblocking(False)
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                    await asyncio.wait_for(loop.sock_connect(sock, addr), 30.0)
                    return sock
                except (OSError, asyncio.TimeoutError) as exc:
                    sock.close()
                    last = exc
            raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {last}")
        if self.scheme == "https" and self._ssl is None:
            self._ssl = default_ssl_context()
        try:
            transport, proto = await asyncio.wait_for(loop.create_connection(
                _Proto, self.host, self.port, ssl=self._ssl, server_hostname=self.host if self._ssl else None), 30.0)
        except (OSError, asyncio.TimeoutError) as exc:
            raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        return proto

    def _close(self, conn: Any) -> None:
        try:
            if isinstance(conn, socket.socket):
                try:
                    asyncio.get_running_loop().remove_reader(conn.fileno())
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
                    if n < len(payload):
                        await loop.sock_sendall(conn, payload[n:])
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
            try:
                ended = _answer_ended(ex, data)
            except ValueError as exc:         # an unreadable head (a bad Content-Length, say)
                self._finish(key, "bad answer", str(exc))
                return
            if ended:
                self._finish(key, None)
                return

    def _finish(self, key: int, error: str | None, detail: str = "") -> None:
        got = self._inflight.pop(key, None)
        if got is None:
            return
        ex, fut, conn = got
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
        try:
            ended = _answer_ended(ex, data)
        except ValueError as exc:
            client._finish(self.key, "bad answer", str(exc))
            return
        if ended:
            client._finish(self.key, None)

    def connection_lost(self, exc: Exception | None) -> None:
        ex, client = self.ex, self.client
        if ex is not None and client is not None:
            client._finish(self.key, "stream cut" if ex.reads else "stale", str(exc or "the server closed the connection"))


__all__ = ["Decoded", "Exchange", "StreamClient", "decode", "realtime_offset_ns"]
