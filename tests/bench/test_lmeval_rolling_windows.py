"""A ``loglikelihood_rolling`` document longer than the model's context, scored over lm-evaluation-harness's
rolling windows (``lm_eval.utils.get_rolling_token_windows`` + ``make_disjoint_window`` as its API models call
them: ``max_seq_len = max_length − 2``, ``context_len = 1``): the first window scores its tokens after the start
token, each later one the next tokens conditioned on as many preceding tokens as fit in ``max_length − 1``.
Checked against a loopback server whose per-token log-probabilities are known (tests.helpers.lmeval_models.
TokenServer): before windows, a document longer than the context was refused by the server."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

from assay.bench.quality.lmeval import rolling_windows
from assay.bench.quality.run import FIRST_TOKEN_NOTE, QualityConfig, run_quality
from assay.errors import AssayError
from tests.helpers.lmeval_models import ROLLING_TASK, TokenServer

DOC = " ".join(f"w{k}" for k in range(10))          # ten tokens on TokenServer: ids 1..10
TASK = ROLLING_TASK


def test_windows_are_the_harness_s() -> None:
    # max_length 6: windows of up to 4 scored tokens; each request max_length - 1 = 5 tokens
    assert rolling_windows(10, 6) == [(0, 0, 4), (3, 4, 8), (5, 8, 10)]
    assert rolling_windows(4, 6) == [(0, 0, 4)]
    assert rolling_windows(5, 6) == [(0, 0, 4), (0, 4, 5)]
    assert rolling_windows(0, 6) == []
    for n in range(1, 40):
        ws = rolling_windows(n, 7)
        scored = [k for _, s, e in ws for k in range(s, e)]
        assert scored == list(range(n))                  # every token scored once, in order
        assert all(e - b <= 6 for b, _, e in ws[1:]) and all(e - b == 6 for b, _, e in ws[1:] if b > 0)
    with pytest.raises(ValueError, match="at least 3"):
        rolling_windows(3, 2)


def _run(tmp_path: Path, server: TokenServer, max_length: int) -> dict:
    (tmp_path / "pages.jsonl").write_text(json.dumps({"page": DOC}) + "\n")
    (tmp_path / "long_pages.yaml").write_text(TASK)
    cfg = QualityConfig(model=f"{server.base_url}#toy", tasks=str(tmp_path / "long_pages.yaml"), api="completions",
                        max_length=max_length, concurrency=1)
    return asyncio.run(run_quality(cfg, store=str(tmp_path / "store.db"))).summary


def _expected(pairs: list[tuple[int, int]]) -> float:
    return sum(TokenServer.logprob(tok, pos) for tok, pos in pairs)


@pytest.fixture
def server(request: pytest.FixtureRequest):
    s = TokenServer(n_ctx=7, flavour=request.param)
    yield s
    s.stop()


@pytest.mark.parametrize("server", ["llama.cpp"], indirect=True)
def test_long_document_is_scored_over_windows_llama_cpp(tmp_path: Path, server: TokenServer) -> None:
    summary = _run(tmp_path, server, max_length=6)
    t = summary["tasks"]["long_pages"]
    # the windows as sent: [w0..w3], [w3..w7] scoring w4..w7, [w5..w9] scoring w8, w9
    assert server.prompts == ["w0 w1 w2 w3", "w3 w4 w5 w6 w7", "w5 w6 w7 w8 w9"]
    # (token id, position after the start token): llama-cpp-python gives w0 (the first prompt token) none
    ll = _expected([(2, 2), (3, 3), (4, 4), (5, 2), (6, 3), (7, 4), (8, 5), (9, 4), (10, 5)])

    assert t["metrics"]["word_perplexity"]["mean"] == pytest.approx(math.exp(-ll / 10))
    assert FIRST_TOKEN_NOTE in t["notes"]


@pytest.mark.parametrize("server", ["vllm"], indirect=True)
def test_long_document_is_scored_over_windows_vllm(tmp_path: Path, server: TokenServer) -> None:
    summary = _run(tmp_path, server, max_length=6)
    t = summary["tasks"]["long_pages"]
    ll = _expected([(1, 1), (2, 2), (3, 3), (4, 4), (5, 2), (6, 3), (7, 4), (8, 5), (9, 4), (10, 5)])

    assert t["metrics"]["bits_per_byte"]["mean"] == pytest.approx(-ll / len(DOC) / math.log(2))
    assert FIRST_TOKEN_NOTE not in t["notes"]


@pytest.mark.parametrize("server", ["vllm"], indirect=True)
def test_a_document_that_fits_is_one_window(tmp_path: Path, server: TokenServer) -> None:
    server.n_ctx = 20
    summary = _run(tmp_path, server, max_length=2048)
    assert server.prompts == [DOC]
    ll = _expected([(k, k) for k in range(1, 11)])

    assert summary["tasks"]["long_pages"]["metrics"]["word_perplexity"]["mean"] == pytest.approx(math.exp(-ll / 10))


@pytest.mark.parametrize("server", [None], indirect=True)
def test_without_a_tokenizer_endpoint_a_long_document_still_fails_plainly(tmp_path: Path, server: TokenServer) -> None:
    with pytest.raises(AssayError, match="exceed context window"):
        _run(tmp_path, server, max_length=6)


def test_max_length_below_three_is_refused() -> None:
    with pytest.raises(AssayError, match="--max-length must be at least 3"):
        QualityConfig(model="x", tasks="y", max_length=2).check()
