"""Prefix caching against a server that counts its cache as llama.cpp's ``llama-server`` does on
``/metrics`` (``llamacpp:prompt_tokens_cached_total`` and ``llamacpp:prompt_tokens_total``, the
latter the prompt tokens it evaluated, cached ones excluded; issue 34 item 3): the scripted endpoint
in those names, and the hit rate assay measures equals the endpoint's own count."""

from __future__ import annotations

import asyncio

import pytest

from assay.bench.perf.run import PerfConfig, run_perf
from assay.bench.perf.telemetry import parse_prometheus, point_summary, signals
from tests.helpers.perf_server import PerfServer

SHARED, TOKENS, GROUPS, N = 64, 96, 2, 6


def prefill(i, stream, body):
    return {"first_delay": 0.001, "prefill_per_word": 0.0002, "tokens": 2}


def test_hit_rate_from_llama_server_counters_is_the_endpoints_count():
    with PerfServer(prefill, tokenize=True, metrics_names="llamacpp") as srv:
        cfg = PerfConfig(endpoint=srv.url, model="scripted", input_tokens=TOKENS, output_tokens=2, warmup=1,
                         requests=N, shared_prefix=SHARED, prefix_groups=GROUPS,
                         server_metrics=srv.url[:-3] + "/metrics", metrics_interval=0.05)
        run = asyncio.run(run_perf(cfg))
        log = sorted(srv.log, key=lambda e: e["i"])
    px = run.summary["points"][0]["prefix"]
    point = log[-N:]                    # after the unshared twin and the warm-up
    expected = sum(e["cached_words"] for e in point) / sum(e["context_words"] for e in point)
    assert expected == pytest.approx((N - GROUPS + 1) * SHARED / (N * TOKENS))   # the warm-up sent group 0
    assert px["hit_rate_source"].startswith("server counters")
    assert px["hit_rate"] == pytest.approx(expected)


def test_llama_server_counters_make_the_queries_from_cached_plus_evaluated():
    page = ("# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total {}\n"
            "# TYPE llamacpp:prompt_tokens_cached_total counter\nllamacpp:prompt_tokens_cached_total {}\n")
    samples = [(float(t), signals(parse_prometheus(page.format(e, c)))[0]) for t, (e, c) in enumerate([(50, 10), (350, 110)])]
    got = point_summary(samples, 0.0, 1.0)
    assert got["counters"]["prefix_cache_hits"] == 100
    assert got["prefix_cache_hit_rate_measured"] == pytest.approx(100 / 400)
