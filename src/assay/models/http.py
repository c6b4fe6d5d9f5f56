"""A lean keep-alive HTTP/1.1 client for one origin: the hot path of judge calls.

Why it exists (measured on this project's 2-core machine, client and a loopback endpoint
answering in 500 ms sharing the cores, 2,000 calls at concurrency 256): the ``openai`` SDK
costs 4.6-8.1 ms of client CPU per call and reaches 25% of the concurrency limit; a bare
``httpx`` client 2.2-4.7 ms; ``aiohttp`` 0.36-0.41 ms and 88.7-90.2% of the limit; this
client 0.085 ms and 95% (the ceiling for 2,000 calls in waves of 256 is 97.7%). See
``benchmarks/bench_judge_throughput.py``.

What it does: one request at a time per connection, a LIFO pool of idle connections
(dropped after ``keepalive_expiry`` seconds idle, under the 5 s that uvicorn and the
llama.cpp server keep them), ``Content-Length``, chunked and read-until-close bodies,
gzip/deflate bodies, ``Connection: close``, TLS through :mod:`ssl` (``SSL_CERT_FILE``, else
the system store via ``truststore``, else ``certifi``, else Python's defaults). A request
that fails on a reused connection before any byte of answer (the server closed it while it
sat idle) is sent once more on a fresh connection. Proxies are not handled here: the
backend uses the ``openai`` SDK's client when the environment names a proxy.

Bounds, whatever the server sends: ``connect_timeout`` to connect, ``timeout`` for the whole
request (a :class:`TimeoutError`); a head of at most ``MAX_HEAD`` (64 KiB) after at most
``MAX_INTERIM`` informational (1xx) heads; a body of at most ``max_body`` (``MAX_BODY``, 16 MiB,
per client or per request), decompressed included (:class:`AnswerTooLarge`); chunk sizes and
``Content-Length`` only as plain numbers (:class:`ProtocolError`). Bodies are parsed as they
arrive, each byte once; bytes a server sends while nobody asked close the connection.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import sys
import time
import zlib
from typing import Any, NamedTuple
from urllib.parse import urlsplit

if sys.version_info >= (3, 11):
    _timeout = asyncio.timeout
else:  # pragma: no cover
    _timeout = None


#: bytes kept for one answer's body, after decompression too (``max_body=`` changes it)
MAX_BODY = 16 << 20
#: bytes of an answer's head, informational (1xx) heads and chunked trailers included
MAX_HEAD = 64 << 10
#: informational (1xx) heads read past before the answer's own
MAX_INTERIM = 8
#: the longest chunk-size line (hex digits and extensions)
MAX_CHUNK_LINE = 4096


class Secret:
    """A credential that prints as ``***`` and is taken out of any text :meth:`scrub` is given."""

    __slots__ = ("value",)

    def __init__(self, value: str | None):
        self.value = value or None

    def __repr__(self) -> str:
        return "***" if self.value else "None"

    def scrub(self, text: str) -> str:
        return text.replace(self.value, "***") if self.value and text else text


class HTTPResponse(NamedTuple):
    status: int
    headers: dict[str, str]   # lower-case names
    body: bytes


class ProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.x we can read."""


class AnswerTooLarge(ProtocolError):
    """The answer is larger than the client keeps (its body, decompressed or not, over the cap)."""


class _Stale(ConnectionError):
    """A reused connection failed before any byte of the answer."""


_CRLF2 = b"\r\n\r\n"
_HEX = frozenset(b"0123456789abcdefABCDEF")


def size_text(n: int) -> str:
    """``n`` bytes as people say it: ``16 MiB``, ``64 KiB``, ``1,500 bytes``."""
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n:,} bytes"


def content_length(value: str) -> int:
    """A ``Content-Length`` value (repeated equal values are one); ProtocolError for anything else."""
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1:
        raise ProtocolError(f"bad Content-Length {value[:40]!r}: several values")
    v = values.pop()
    if not (v.isascii() and v.isdigit()):
        raise ProtocolError(f"bad Content-Length {value[:40]!r}: not a number of bytes")
    return int(v)


def chunk_size(line: bytes | bytearray) -> int:
    """The size on a chunk-size line (hex digits, then any ``;extensions``); ProtocolError otherwise."""
    digits = bytes(line).split(b";", 1)[0].strip(b" \t")
    if not digits or not _HEX.issuperset(digits):
        raise ProtocolError(f"bad chunk size {bytes(line[:20])!r}")
    return int(digits, 16)


def inflate(body: bytes, encoding: str, cap: int) -> bytes:
    """``body`` decoded from its ``Content-Encoding``, never keeping more than ``cap`` bytes of it."""
    if encoding in ("", "identity"):
        return body
    if encoding in ("gzip", "x-gzip"):
        tries = (16 + zlib.MAX_WBITS,)
    elif encoding == "deflate":
        tries = (zlib.MAX_WBITS, -zlib.MAX_WBITS)   # zlib-wrapped as the RFC says, or raw as some send
    else:
        raise ProtocolError(f"unsupported Content-Encoding {encoding!r}")
    for i, wbits in enumerate(tries):
        d = zlib.decompressobj(wbits)
        try:
            out = d.decompress(body, cap + 1)
        except zlib.error as exc:
            if i + 1 < len(tries):
                continue
            raise ProtocolError(f"cannot decompress the {encoding} body: {exc}") from None
        if len(out) > cap:
            raise AnswerTooLarge(f"the {encoding} body decompressed is over the {size_text(cap)} cap "
                                 f"({size_text(len(body))} compressed)")
        if not d.eof:
            raise ProtocolError(f"cannot decompress the {encoding} body: it is cut short")
        return out
    raise AssertionError("unreachable")  # pragma: no cover


class _Conn(asyncio.Protocol):
    """One connection and the answer it is reading, parsed as bytes arrive (each byte once)."""

    __slots__ = ("transport", "buf", "waiter", "closed", "idle_since", "received", "_head", "_framing",
                 "_length", "_keep", "_cap", "_scan", "_head_bytes", "_interim", "_body", "_chunk", "_state")

    def __init__(self) -> None:
        self.transport: Any = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[HTTPResponse] | None = None
        self.closed = False
        self.idle_since = 0.0
        self.received = False
        self._keep = True
        self.start(None, MAX_BODY)

    def start(self, waiter: asyncio.Future[HTTPResponse] | None, cap: int) -> None:
        """Wait for a new answer (``cap``: the most body bytes kept)."""
        self.waiter = waiter
        self.received = False
        self._cap = cap
        self._head: tuple[int, dict[str, str]] | None = None
        self._framing = ""
        self._length = 0
        self._scan = 0            # where the search for the head's end resumes
        self._head_bytes = 0      # head bytes read for this answer (1xx heads and trailers too)
        self._interim = 0
        self._body = bytearray()  # chunked: the data so far
        self._chunk = 0           # chunked: data bytes left in the current chunk
        self._state = "size"      # chunked: size | crlf (after a chunk's data) | trailer

    # -- asyncio.Protocol -------------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        w = self.waiter
        if w is None or w.done():
            # nobody asked: bytes from a server that talks out of turn are not kept
            self._keep = False
            self.closed = True
            self.buf.clear()
            self.transport.abort()
            return
        self.buf += data
        self.received = True
        try:
            resp = self._parse(eof=False)
        except Exception as exc:  # never let a parse error escape into the event loop
            self._keep = False
            w.set_exception(exc if isinstance(exc, ProtocolError) else ProtocolError(f"unreadable answer: {exc}"))
            return
        if resp is not None:
            w.set_result(resp)

    def eof_received(self) -> bool:
        self._finish_at_eof(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._finish_at_eof(exc)

    def _finish_at_eof(self, exc: Exception | None) -> None:
        self._keep = False
        w = self.waiter
        if w is None or w.done():
            return
        try:
            resp = self._parse(eof=True)
        except Exception as perr:
            w.set_exception(perr if isinstance(perr, ProtocolError) else ProtocolError(f"unreadable answer: {perr}"))
            return
        if resp is not None:
            w.set_result(resp)
        elif not self.received:
            w.set_exception(_Stale(str(exc) if exc else "connection closed before any answer"))
        else:
            w.set_exception(ConnectionError(f"connection closed mid-answer{f': {exc}' if exc else ''}"))

    # -- parsing ------------------------------------------------------------------------------------
    def _parse(self, eof: bool) -> HTTPResponse | None:
        while self._head is None:
            if not self._read_head():
                return None
        buf = self.buf
        if self._framing == "length":
            if len(buf) < self._length:
                if eof:
                    raise ProtocolError("connection closed mid-body")
                return None
            body = bytes(buf[:self._length])
            del buf[:self._length]
        elif self._framing == "chunked":
            if not self._dechunk():
                if eof:
                    raise ProtocolError("connection closed mid-body")
                return None
            body = bytes(self._body)
        else:
            if len(buf) > self._cap:
                raise AnswerTooLarge(f"the body is over the {size_text(self._cap)} cap (read until close)")
            if not eof:
                return None
            body = bytes(buf)
            buf.clear()
        status, headers = self._head
        self._head = None
        return HTTPResponse(status, headers, inflate(body, headers.get("content-encoding", "").lower(), self._cap))

    def _read_head(self) -> bool:
        """Read one head off the buffer: True when one was read (maybe a 1xx one), False for more bytes."""
        buf = self.buf
        end = buf.find(_CRLF2, max(0, self._scan - 3))
        if end < 0:
            self._scan = len(buf)
            if self._head_bytes + len(buf) > MAX_HEAD:
                raise ProtocolError(f"the answer's head is over {size_text(MAX_HEAD)}")
            return False
        self._head_bytes += end + 4
        if self._head_bytes > MAX_HEAD:
            raise ProtocolError(f"the answer's head is over {size_text(MAX_HEAD)}")
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        del buf[:end + 4]
        self._scan = 0
        status_line = lines[0].split(" ", 2)
        if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
            raise ProtocolError(f"not an HTTP response: {lines[0][:80]!r}")
        try:
            status = int(status_line[1])
        except ValueError:
            raise ProtocolError(f"bad status line: {lines[0][:80]!r}") from None
        headers: dict[str, str] = {}
        for ln in lines[1:]:
            k, sep, v = ln.partition(":")
            if not sep:
                continue
            k = k.strip().lower()
            v = v.strip()
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
        if 100 <= status < 200:   # 100 Continue and friends: the real answer follows
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise ProtocolError(f"more than {MAX_INTERIM} informational (1xx) heads before the answer")
            return True
        self._head = (status, headers)
        self._set_framing(status_line[0], status, headers)
        return True

    def _set_framing(self, version: str, status: int, headers: dict[str, str]) -> None:
        if version == "HTTP/1.0" or "close" in headers.get("connection", "").lower():
            self._keep = False
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._framing = "chunked"
        elif "content-length" in headers:
            self._length = content_length(headers["content-length"])
            if self._length > self._cap:
                raise AnswerTooLarge(f"the body is over the {size_text(self._cap)} cap "
                                     f"(Content-Length {self._length:,})")
            self._framing = "length"
        elif status in (204, 304):
            self._framing, self._length = "length", 0
        else:
            self._framing = "close"
            self._keep = False

    def _dechunk(self) -> bool:  # noqa: C901
        """Move what has arrived of a chunked body into ``_body``; True when its end (and any
        trailers) arrived. Each byte is looked at once; the cap holds chunk by chunk."""
        buf, body = self.buf, self._body
        pos, n = 0, len(buf)
        try:
            while pos < n:
                if self._chunk:
                    take = min(self._chunk, n - pos)
                    body += buf[pos:pos + take]
                    pos += take
                    self._chunk -= take
                    if not self._chunk:
                        self._state = "crlf"
                    continue
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if n - pos > MAX_CHUNK_LINE:
                        raise ProtocolError(f"a chunk-size line is over {size_text(MAX_CHUNK_LINE)}")
                    return False
                line_start, pos = pos, eol + 2
                if self._state == "crlf":
                    if eol != line_start:
                        raise ProtocolError("a chunk's data runs past its size")
                    self._state = "size"
                elif self._state == "trailer":
                    if eol == line_start:
                        return True
                    self._head_bytes += eol + 2 - line_start
                    if self._head_bytes > MAX_HEAD:
                        raise ProtocolError(f"the answer's head and trailers are over {size_text(MAX_HEAD)}")
                else:
                    size = chunk_size(buf[line_start:eol])
                    if len(body) + size > self._cap:
                        raise AnswerTooLarge(f"the chunked body is over the {size_text(self._cap)} cap "
                                             f"(a chunk of {size:,} bytes after {len(body):,})")
                    if size:
                        self._chunk = size
                    else:
                        self._state = "trailer"
            return False
        finally:
            del buf[:pos]


def _expire(fut: asyncio.Future[HTTPResponse], timeout: float) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError(f"no complete answer in {timeout:g} s"))


def default_ssl_context() -> ssl.SSLContext:
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()
    try:
        import truststore  # the system's trust store (what the openai SDK uses)

        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    except ImportError:
        pass
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


def split_origin(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of an http(s) URL; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    return parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


class LeanHTTP:
    """Keep-alive HTTP/1.1 to one origin (``scheme://host:port``); see the module doc.

    Every request is bounded: ``connect_timeout`` for the connection, ``timeout`` for the whole
    request (connecting, the head, the whole body: a :class:`TimeoutError` naming it), ``max_body``
    bytes for the answer's body (:class:`AnswerTooLarge`), ``MAX_HEAD`` for its head."""

    def __init__(self, url: str, *, keepalive_expiry: float = 4.0, connect_timeout: float = 30.0,
                 timeout: float = 600.0, max_body: int = MAX_BODY, ssl_context: ssl.SSLContext | None = None):
        self.scheme, self.host, self.port = split_origin(url)
        default_port = self.port == (443 if self.scheme == "https" else 80)
        h = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = h if default_port else f"{h}:{self.port}"
        self.keepalive_expiry = keepalive_expiry
        self.connect_timeout = connect_timeout
        self.timeout = timeout
        self.max_body = max_body
        self._ssl = ssl_context if ssl_context is not None or self.scheme == "http" else None
        self._idle: list[_Conn] = []
        self._loop: Any = None

    def head(self, method: str, target: str, headers: dict[str, str]) -> bytes:
        """The constant part of a request (everything up to the Content-Length value)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")

    async def request(self, head: bytes, body: bytes = b"", *, max_body: int | None = None) -> HTTPResponse:
        """Send ``head`` (from :meth:`head`) + body; raises ConnectionError subclasses (ProtocolError,
        AnswerTooLarge), OSError, TimeoutError (past ``timeout``). ``max_body``: this answer's cap."""
        payload = head + str(len(body)).encode() + _CRLF2 + body
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self.abandon()
            self._loop = loop
        deadline = loop.time() + self.timeout
        cap = self.max_body if max_body is None else max_body
        for _ in range(2):
            conn, reused = await self._get(loop, deadline)
            fut: asyncio.Future[HTTPResponse] = loop.create_future()
            conn.start(fut, cap)
            timer = loop.call_at(deadline, _expire, fut, self.timeout)
            try:
                conn.transport.write(payload)
                resp = await fut
            except _Stale:
                self._drop(conn)
                if reused:
                    continue
                raise ConnectionError("the server closed the connection before answering") from None
            except BaseException:  # cancelled, timed out, protocol error: the connection is spent
                self._drop(conn)
                raise
            finally:
                timer.cancel()
            conn.waiter = None
            if conn._keep and not conn.closed:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
            else:
                self._drop(conn)
            return resp
        raise ConnectionError("the server closed the connection before answering")  # pragma: no cover

    async def _get(self, loop: asyncio.AbstractEventLoop, deadline: float) -> tuple[_Conn, bool]:
        idle = self._idle
        if idle:
            now = time.monotonic()
            while idle:
                conn = idle.pop()
                if not conn.closed and now - conn.idle_since < self.keepalive_expiry and not conn.buf:
                    return conn, True
                self._drop(conn)
        if self.scheme == "https" and self._ssl is None:
            self._ssl = default_ssl_context()
        bound = min(self.connect_timeout, deadline - loop.time())
        coro = loop.create_connection(_Conn, self.host, self.port, ssl=self._ssl if self.scheme == "https" else None,
                                      server_hostname=self.host if self.scheme == "https" else None)
        try:
            if _timeout is not None:
                async with _timeout(max(0.0, bound)):
                    _, conn = await coro
            else:  # pragma: no cover
                _, conn = await asyncio.wait_for(coro, max(0.0, bound))
        except (TimeoutError, asyncio.TimeoutError):
            raise TimeoutError(f"no connection to {self.host}:{self.port} in {max(0.0, bound):g} s") from None
        return conn, False

    @staticmethod
    def _drop(conn: _Conn) -> None:
        conn.closed = True
        t = conn.transport
        if t is not None:
            try:
                t.abort()
            except Exception:
                pass

    async def aclose(self) -> None:
        if self._loop is not None and self._loop is not asyncio.get_running_loop():
            self.abandon()
            return
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.closed = True
            try:
                conn.transport.close()
            except Exception:
                pass
        if idle:
            await asyncio.sleep(0)  # let the transports finish closing

    def abandon(self) -> None:
        """Drop idle connections whose event loop may have ended (``asyncio.run`` per run)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.closed = True
            t = conn.transport
            if t is None:
                continue
            try:
                t.abort()
            except Exception:  # the loop is closed: close the socket ourselves, quietly
                sock = getattr(t, "_sock", None)
                if sock is not None:
                    try:
                        sock.close()
                    except OSError:
                        pass
                    t._sock = None
