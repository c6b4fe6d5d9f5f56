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


class HTTPResponse(NamedTuple):
    status: int
    headers: dict[str, str]   # lower-case names
    body: bytes


class ProtocolError(ConnectionError):
    """The server's answer is not HTTP/1.x we can read."""


class _Stale(ConnectionError):
    """A reused connection failed before any byte of the answer."""


_CRLF2 = b"\r\n\r\n"


class _Conn(asyncio.Protocol):
    __slots__ = ("transport", "buf", "waiter", "closed", "idle_since", "received", "_head", "_framing",
                 "_length", "_keep")

    def __init__(self) -> None:
        self.transport: Any = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[HTTPResponse] | None = None
        self.closed = False
        self.idle_since = 0.0
        self.received = False
        self._head: tuple[int, dict[str, str]] | None = None
        self._framing = ""
        self._length = 0
        self._keep = True

    # -- asyncio.Protocol -------------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.received = True
        w = self.waiter
        if w is None or w.done():
            return
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
    def _parse(self, eof: bool) -> HTTPResponse | None:  # noqa: C901
        buf = self.buf
        while self._head is None:
            end = buf.find(_CRLF2)
            if end < 0:
                if len(buf) > 65536:
                    raise ProtocolError("response headers too long")
                return None
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[:end + 4]
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
            if 100 <= status < 200:
                continue  # 100 Continue and friends: the real answer follows
            self._head = (status, headers)
            if status_line[0] == "HTTP/1.0" or "close" in headers.get("connection", "").lower():
                self._keep = False
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self._framing = "chunked"
            elif "content-length" in headers:
                try:
                    self._length = int(headers["content-length"])
                except ValueError:
                    raise ProtocolError("bad Content-Length") from None
                self._framing = "length"
            elif status in (204, 304):
                self._framing, self._length = "length", 0
            else:
                self._framing = "close"
                self._keep = False
        status, headers = self._head
        if self._framing == "length":
            if len(buf) < self._length:
                if eof:
                    raise ProtocolError("connection closed mid-body")
                return None
            body = bytes(buf[:self._length])
            del buf[:self._length]
        elif self._framing == "chunked":
            got = _dechunk(buf)
            if got is None:
                if eof:
                    raise ProtocolError("connection closed mid-body")
                return None
            body, used = got
            del buf[:used]
        else:
            if not eof:
                return None
            body = bytes(buf)
            buf.clear()
        self._head = None
        enc = headers.get("content-encoding", "").lower()
        try:
            if enc in ("gzip", "x-gzip"):
                body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
            elif enc == "deflate":
                try:
                    body = zlib.decompress(body)
                except zlib.error:
                    body = zlib.decompress(body, -zlib.MAX_WBITS)
            elif enc not in ("", "identity"):
                raise ProtocolError(f"unsupported Content-Encoding {enc!r}")
        except zlib.error as exc:
            raise ProtocolError(f"cannot decompress the {enc} body: {exc}") from None
        return HTTPResponse(status, headers, body)


def _dechunk(buf: bytearray) -> tuple[bytes, int] | None:
    """The body of a complete chunked message at the start of ``buf`` and the bytes it used."""
    pos, out = 0, []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size_s = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
        try:
            size = int(size_s, 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size {size_s[:20]!r}") from None
        pos = eol + 2
        if size == 0:
            # trailers, then an empty line
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    return None
                if eol == pos:
                    return b"".join(out), eol + 2
                pos = eol + 2
        if len(buf) < pos + size + 2:
            return None
        out.append(bytes(buf[pos:pos + size]))
        pos += size + 2


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
    """Keep-alive HTTP/1.1 to one origin (``scheme://host:port``); see the module doc."""

    def __init__(self, url: str, *, keepalive_expiry: float = 4.0, connect_timeout: float = 30.0,
                 ssl_context: ssl.SSLContext | None = None):
        self.scheme, self.host, self.port = split_origin(url)
        default_port = self.port == (443 if self.scheme == "https" else 80)
        h = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = h if default_port else f"{h}:{self.port}"
        self.keepalive_expiry = keepalive_expiry
        self.connect_timeout = connect_timeout
        self._ssl = ssl_context if ssl_context is not None or self.scheme == "http" else None
        self._idle: list[_Conn] = []
        self._loop: Any = None

    def head(self, method: str, target: str, headers: dict[str, str]) -> bytes:
        """The constant part of a request (everything up to the Content-Length value)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")

    async def request(self, head: bytes, body: bytes = b"") -> HTTPResponse:
        """Send ``head`` (from :meth:`head`) + body; raises ConnectionError subclasses, OSError."""
        payload = head + str(len(body)).encode() + _CRLF2 + body
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self.abandon()
            self._loop = loop
        for _ in range(2):
            conn, reused = await self._get(loop)
            conn.waiter = fut = loop.create_future()
            conn.received = False
            try:
                conn.transport.write(payload)
                resp = await fut
            except _Stale:
                self._drop(conn)
                if reused:
                    continue
                raise ConnectionError("the server closed the connection before answering") from None
            except BaseException:  # cancelled (timeout), protocol error: the connection is spent
                self._drop(conn)
                raise
            conn.waiter = None
            if conn._keep and not conn.closed:
                conn.idle_since = time.monotonic()
                self._idle.append(conn)
            else:
                self._drop(conn)
            return resp
        raise ConnectionError("the server closed the connection before answering")  # pragma: no cover

    async def _get(self, loop: asyncio.AbstractEventLoop) -> tuple[_Conn, bool]:
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
        coro = loop.create_connection(_Conn, self.host, self.port, ssl=self._ssl if self.scheme == "https" else None,
                                      server_hostname=self.host if self.scheme == "https" else None)
        if _timeout is not None:
            async with _timeout(self.connect_timeout):
                _, conn = await coro
        else:  # pragma: no cover
            _, conn = await asyncio.wait_for(coro, self.connect_timeout)
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
