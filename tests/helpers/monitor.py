"""``assay monitor serve`` as a real subprocess for the tests, and a plain OTLP/HTTP client.

:class:`Receiver` starts the command on a free loopback port (``--port 0``) over a store and
reads the address it prints once it accepts connections; :func:`post` sends one body to it
with ``urllib`` and returns the status, the headers and the body, whatever the status.
:class:`Served` is the same receiver in the test's own process; :class:`LogsEndpoint` a loopback
OTLP/HTTP logs endpoint (where the scores are sent back as events).
"""

from __future__ import annotations

import gzip
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ADDRESS = re.compile(r"at (http://\S+/v1/traces)")


def env() -> dict[str, str]:
    """The environment of a child process: this tree's ``src`` and the repository root on the path."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "ASSAY_STORE": "off"}


class Receiver:
    """``assay monitor serve --store STORE --port 0 *args``; ``url`` is its ``/v1/traces`` address."""

    def __init__(self, store: str, *args: str, log: Path | None = None):
        self.cmd = [sys.executable, "-m", "assay.cli", "monitor", "serve", "--port", "0", "--store", store, *args]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, env=env())
        self.said = b""
        deadline = time.monotonic() + 60
        while b"\n" not in self.said:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                self.said += chunk
            if time.monotonic() > deadline:
                break
        found = ADDRESS.search(self.said.decode(errors="replace"))
        if found is None:
            self.kill()
            raise AssertionError(f"assay monitor serve did not start: {self.said.decode(errors='replace')}")
        self.url = found.group(1)

    def output(self) -> str:
        """What the server printed (read to the end: only once it has stopped)."""
        rest = self.proc.stdout.read() if self.proc.stdout else b""
        return (self.said + rest).decode(errors="replace")

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL (``kill -9``): no chance to finish anything."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc.poll() is None:
            self.kill()
        if self.proc.stdout:
            self.proc.stdout.close()


def post(url: str, body: bytes, content_type: str = "application/x-protobuf", *, gzipped: bool = False,
         headers: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, dict[str, str], bytes]:
    """POST ``body`` (gzip-compressed first when ``gzipped``); (status, headers, body)."""
    h = {"Content-Type": content_type, **(headers or {})}
    if gzipped:
        body = gzip.compress(body)
        h["Content-Encoding"] = "gzip"
    req = urllib.request.Request(url, data=body, headers=h, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def record_window(log: Any, start_s: int, values: list[float], tag: str, metric: str = "tool_errors") -> None:
    """Store one window of scored traces in ``log`` (a :class:`~assay.store.monitor.MonitorLog`):
    a trace per value of ``metric``, started from ``start_s`` on, ids ``TAG-0000``, ``TAG-0001`` ..."""
    log.record(metric, [
        {"trace_id": f"{tag}-{i:04d}", "status": "scored", "start_ns": start_s * 10**9 + i, "completed_at": 1.0,
         "scored_at": 2.0, "scores": [{metric: {"value": v, "score": v, "passed": v == 0, "result": "pass",
                                                "reason": None, "status": "completed", "threshold": 0.0}}]}
        for i, v in enumerate(values)])



class Served:
    """The receiver of ``assay monitor serve`` in this process (its Starlette app and ingest queue
    under uvicorn, on a thread, on a free loopback port): ``url`` is its ``/v1/traces`` address,
    ``ingest`` its queue. ``with Served(store) as rx: ...``; leaving stores what is queued."""

    def __init__(self, store: Any, quiet_period: float = 30.0):
        import socket
        import threading

        import uvicorn

        from assay.monitor.ingest import Ingest
        from assay.monitor.receiver import create_app
        from assay.store.spans import SpanLog

        self.ingest = Ingest(SpanLog(store), quiet_period=quiet_period)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/traces"
        cfg = uvicorn.Config(create_app(self.ingest), log_level="warning", access_log=False)
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the in-process receiver did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


class LogsEndpoint:
    """A loopback OTLP/HTTP logs endpoint: keeps each request's headers and decoded records.
    ``status``: what it answers; ``hold``: an Event it waits on before answering (a hung collector)."""

    def __init__(self, status: int = 200) -> None:
        self.requests: list[dict] = []
        self.status = status
        self.hold: threading.Event | None = None
        me = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
                    ExportLogsServiceRequest,
                    ExportLogsServiceResponse,
                )

                req = ExportLogsServiceRequest()
                req.ParseFromString(body)
                me.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                    "request": req})
                if me.hold is not None:
                    me.hold.wait(30)
                out = ExportLogsServiceResponse().SerializeToString() if me.status == 200 else b"down"
                self.send_response(me.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def records(self) -> list[tuple[dict, object]]:
        """(resource attributes, LogRecord) of every record received."""
        out = []
        for r in list(self.requests):
            for rl in r["request"].resource_logs:
                res = {kv.key: kv.value.string_value for kv in rl.resource.attributes}
                for sl in rl.scope_logs:
                    out.extend((res, rec) for rec in sl.log_records)
        return out

    def close(self) -> None:
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()


def attrs(rec) -> dict:
    out = {}
    for kv in rec.attributes:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None
    return out


def store_with_traces(path: str, n: int, *, fail: bool = False) -> list[str]:
    """``n`` traces (an agent root, a chat call, a tool call) stored in the store at ``path`` as the
    receiver stores them; their trace ids. ``fail``: the tool calls fail."""
    from assay.monitor import decode
    from assay.store import Store
    from assay.store.spans import SpanLog
    from tests.helpers.otlp import Recorder

    rec = Recorder()
    for _ in range(n):
        with rec.span("invoke_agent shop", {"gen_ai.operation.name": "invoke_agent"}):
            with rec.span("chat m", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                                     "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 2}):
                with rec.span("execute_tool search", {"gen_ai.operation.name": "execute_tool",
                                                      "gen_ai.tool.name": "search"},
                              error="timed out" if fail else None):
                    pass
    rows, rejected, _ = decode.parse(rec.request().SerializeToString(), "protobuf")
    assert rejected == 0
    st = Store(path)
    try:
        SpanLog(st).write(rows, time.time())
    finally:
        st.close()
    return sorted({r["trace_id"] for r in rows})


def export_config(endpoint: str, timeout: float = 1) -> Any:
    """A ``monitor.yaml`` scoring ``tool_errors`` and sending the scores to ``endpoint``."""
    from assay.monitor.config import parse_config

    return parse_config(f"retry_after: 0.01\nexport: {{otlp_endpoint: '{endpoint}', timeout: {timeout}}}\n"
                        "metrics:\n  tool_errors: {}\n")
