"""A loopback HTTP server that misbehaves on cue, and a guard that turns a hang into a failure.

:class:`HostileServer` listens on 127.0.0.1 (a thread per connection, blocking sockets, so it
works under any event loop and never waits on the client's). Each connection reads one request
(its head and ``Content-Length`` body; not when the script starts with ``"deaf"``: then it
reads nothing at all), then plays the script: a list of steps

* ``b"..."``: send these bytes;
* ``("repeat", piece)``: send ``piece`` again and again until the client goes away (or
  ``REPEAT_CEILING`` bytes, or ``REPEAT_SECONDS``: the server never runs unbounded itself);
* ``("drip", piece, seconds)``: the same, one piece every ``seconds``;
* ``("sleep", seconds)``; ``"hold"``: send nothing more and wait for the client to go;
  ``"close"``: close the connection.

The script ends with the connection held open (as ``"hold"``) unless it says ``"close"``.
:func:`hang_guard` raises :class:`Hung` in the main thread after a number of seconds, for code
that could loop forever in pure Python (a decoder), where ``asyncio.wait_for`` cannot help.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

REPEAT_CEILING = 1 << 30
REPEAT_SECONDS = 30.0


class Hung(Exception):
    """The code under test did not finish in the time :func:`hang_guard` allowed."""


@contextlib.contextmanager
def hang_guard(seconds: float) -> Iterator[None]:
    """Raise :class:`Hung` if the body runs past ``seconds`` (SIGALRM; main thread, POSIX)."""
    def ring(signum: int, frame: Any) -> None:
        raise Hung(f"still running after {seconds:g} s")

    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class HostileServer:
    """``with HostileServer(script) as srv: ... srv.url``; see the module doc for the script."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script
        self.requests = 0
        self.sent = 0                       # bytes written to clients, all connections
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> HostileServer:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)     # wakes the blocked accept()
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            c.close()
        for t in self._threads:
            t.join(5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            conn.settimeout(REPEAT_SECONDS)
            with self._lock:
                self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _read_request(self, conn: socket.socket) -> bool:
        buf = b""
        while b"\r\n\r\n" not in buf:
            got = conn.recv(65536)
            if not got:
                return False
            buf += got
        head, _, rest = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(rest) < length:
            got = conn.recv(65536)
            if not got:
                return False
            rest += got
        with self._lock:
            self.requests += 1
        return True

    def _send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        with self._lock:
            self.sent += len(data)

    def _repeat(self, conn: socket.socket, piece: bytes, every: float) -> None:
        start, sent = time.monotonic(), 0
        while not self._stop.is_set() and sent < REPEAT_CEILING and time.monotonic() - start < REPEAT_SECONDS:
            self._send(conn, piece)
            sent += len(piece)
            if every:
                time.sleep(every)

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.script[:1] == ["deaf"]:
                self._stop.wait(REPEAT_SECONDS)      # never reads: the client's sends fill up
                return
            if not self._read_request(conn):
                return
            for step in self.script:
                if isinstance(step, bytes):
                    self._send(conn, step)
                elif step == "close":
                    return
                elif step == "hold":
                    break
                elif step[0] == "repeat":
                    self._repeat(conn, step[1], 0.0)
                elif step[0] == "drip":
                    self._repeat(conn, step[1], step[2])
                elif step[0] == "sleep":
                    time.sleep(step[1])
            while not self._stop.is_set() and conn.recv(65536):   # hold: until the client goes
                pass
        except OSError:
            pass                            # the client went away: what hostile tests expect
        finally:
            with contextlib.suppress(OSError):
                conn.close()
