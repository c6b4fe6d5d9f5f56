"""A ``loglikelihood_rolling`` document on an OpenAI-compatible server that cannot cut it into
lm-evaluation-harness's rolling windows (no tokenizer endpoint, as a hosted ``/v1/completions`` with ``echo`` and
``logprobs``): the document is sent whole, which is the harness's figure only when it is one window of
``--max-length``. A longer one, by the server's own token count, stops the run with one line naming the model and
the flag; before, a server whose context held it gave the whole-document figure silently, not the harness's.
Also: a tokenizer endpoint that answers with no tokens (a server reading another field) is refused, where it gave
a perplexity of 1.0. Checked on a loopback server whose per-token log-probabilities are known
(tests.helpers.lmeval_models.TokenServer)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.errors import AssayError
from tests.helpers.lmeval_models import ROLLING_TASK, TokenServer

DOC = " ".join(f"w{k}" for k in range(10))          # ten tokens on TokenServer: ids 1..10
TASK = ROLLING_TASK


class EmptyTokenizer(TokenServer):
    """A server whose ``/tokenize`` answers every request with no tokens (llama.cpp's ``llama-server`` reads
    ``content``, not vLLM's ``prompt``)."""

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "/tokenize":
            return 200, {"tokens": []}
        return super().answer(path, body)


def _run(tmp_path: Path, server: TokenServer, max_length: int) -> dict:
    (tmp_path / "pages.jsonl").write_text(json.dumps({"page": DOC}) + "\n")
    (tmp_path / "long_pages.yaml").write_text(TASK)
    cfg = QualityConfig(model=f"{server.base_url}#toy", tasks=str(tmp_path / "long_pages.yaml"), api="completions",
                        max_length=max_length, concurrency=1)
    return asyncio.run(run_quality(cfg, store=str(tmp_path / "store.db"))).summary


@pytest.fixture
def server():
    s = TokenServer(n_ctx=40, flavour=None)
    yield s
    s.stop()


def _error(tmp_path: Path, server: TokenServer, max_length: int) -> str:
    """The document's one-line error: the run stops with it (every item failed) and the item keeps it whole."""
    with pytest.raises(AssayError, match=r"^every item failed \(1 of 1\); nothing was scored; first: "):
        _run(tmp_path, server, max_length)
    subject = Subject(f"{server.base_url}#toy", api="completions", cache=None, max_length=max_length)
    with pytest.raises(AssayError) as err:
        asyncio.run(subject.rolling(DOC))
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_document_longer_than_one_window_is_refused_not_scored_whole(tmp_path: Path, server: TokenServer) -> None:
    # the server's context holds the whole document, but lm-eval at --max-length 6 scores it over 3 windows
    said = _error(tmp_path, server, max_length=6)
    assert said == (f"{server.base_url}#toy: a document of 11 tokens (the server's count) is more than one window "
                    "of --max-length 6 (4 tokens), and with no tokenizer endpoint assay cannot cut windows: name the "
                    "model's GGUF with --tokenizer PATH, give --max-length 13 or more if the context holds it, or "
                    "serve it where it has one (llama.cpp, vLLM)")
    assert server.prompts == [DOC, DOC]              # asked whole (once by the run, once here); no figure


def test_a_document_that_is_one_window_is_scored_whole(tmp_path: Path, server: TokenServer) -> None:
    summary = _run(tmp_path, server, max_length=13)     # 11 tokens counted: one window of 13 scores them
    ll = sum(TokenServer.logprob(k, k) for k in range(1, 11))

    assert server.prompts == [DOC]
    assert summary["tasks"]["long_pages"]["metrics"]["word_perplexity"]["mean"] == pytest.approx(math.exp(-ll / 10))


def test_a_document_the_server_refuses_names_what_to_do(tmp_path: Path) -> None:
    s = TokenServer(n_ctx=7, flavour=None)
    try:
        said = _error(tmp_path, s, max_length=2048)
    finally:
        s.stop()
    assert said.startswith(f"{s.base_url}#toy refused a whole document (")
    assert "exceed context window of 7" in said
    assert said.endswith("), and with no tokenizer endpoint assay cannot cut windows: name the model's GGUF with "
                         "--tokenizer PATH, or serve it where it has one (llama.cpp, vLLM)")


def test_a_tokenizer_endpoint_that_gives_no_tokens_is_refused(tmp_path: Path) -> None:
    s = EmptyTokenizer(n_ctx=40, flavour="vllm")
    try:
        said = _error(tmp_path, s, max_length=6)
    finally:
        s.stop()
    assert said == (f"{s.base_url}#toy's tokenizer endpoint gave no tokens for a document of 29 characters, so "
                    "its rolling windows cannot be cut")
