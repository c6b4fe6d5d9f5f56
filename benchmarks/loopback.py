"""For benchmark scripts that serve a scripted endpoint from their own file (``--serve PORT
--latency S``): start that server on a free loopback port and wait until it says ``ready``."""

from __future__ import annotations

import socket
import subprocess
import sys


def start_own_server(script: str, latency: float) -> tuple[subprocess.Popen, str]:
    """``python SCRIPT --serve PORT --latency LATENCY`` on a free port: the process and its root URL."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen([sys.executable, script, "--serve", str(port), "--latency", str(latency)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc, f"http://127.0.0.1:{port}"
