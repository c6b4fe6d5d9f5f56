"""Fixtures of the benchmark tests: ``endpoint`` starts benchmarks/stream_endpoint.py (the scripted
streaming endpoint, for exact timing and faults) as its own process on a free port."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stream_endpoint.py"


class Endpoint:
    def __init__(self, tmp_path: Path, *args: str, script: list | None = None):
        self.log = tmp_path / "requests.jsonl"
        cmd = [sys.executable, str(SCRIPT), "--port", "0", "--log", str(self.log), *args]
        if script is not None:
            path = tmp_path / "script.json"
            path.write_text(json.dumps(script))
            cmd += ["--script", str(path)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("LISTENING "), (line, self.proc.stderr.read() if self.proc.poll() else "")
        self.port = int(line.split()[1])
        self.stderr = ""

    def conn(self, timeout: float = 10.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def post(self, path: str, body: dict, headers: dict | None = None, timeout: float = 10.0):
        conn = self.conn(timeout)
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
        return conn, conn.getresponse()

    def stop(self) -> list[dict]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=10) == 0
        self.stderr = self.proc.stderr.read()
        assert "STOPPED" in self.stderr
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def endpoint(tmp_path):
    started: list[Endpoint] = []

    def start(*args: str, script: list | None = None) -> Endpoint:
        started.append(Endpoint(tmp_path, *args, script=script))
        return started[-1]
    yield start
    for e in started:
        if e.proc.poll() is None:
            e.proc.kill()
            e.proc.wait()
