"""Prefix caching (`bench perf --shared-prefix N --prefix-groups G`, issue 34 item 5) against the
scripted endpoint's prefix cache (whole blocks of 16 words; prefill time scripted per word it did
not find cached): the hit rate measured from its /metrics counters equals its own count, the
inferred one (no counters) is labelled so and agrees here, and TTFT with the shared prefix is shown
beside TTFT without it."""

from __future__ import annotations

import asyncio

import pytest

from assay.bench.perf.measure import cached_tokens
from assay.bench.perf.prefix import inferred_hit_rate, usage_hit_rate
from assay.bench.perf.run import PerfConfig, run_perf
from assay.errors import AssayError
from tests.helpers.perf_server import PerfServer

SHARED, TOKENS, GROUPS, N = 64, 96, 3, 9


def prefill(i, stream, body):
    return {"first_delay": 0.002, "prefill_per_word": 0.0005, "tokens": 2}


def run_prefix(srv, metrics: bool):
    cfg = PerfConfig(endpoint=srv.url, model="scripted", input_tokens=TOKENS, output_tokens=2, warmup=1, requests=N,
                     shared_prefix=SHARED, prefix_groups=GROUPS,
                     server_metrics=srv.url[:-3] + "/metrics" if metrics else None, metrics_interval=0.05)
    return asyncio.run(run_perf(cfg))


def test_measured_hit_rate_is_the_endpoints_counter_and_ttft_is_side_by_side(capsys):
    with PerfServer(prefill, tokenize=True) as srv:
        run = run_prefix(srv, metrics=True)
        log = sorted(srv.log, key=lambda e: e["i"])
    s = run.summary
    pt = s["points"][0]
    px = pt["prefix"]
    assert s["settings"]["workload"] == f"prefix cache: {SHARED} shared tokens in {GROUPS} group(s), measured against none shared"
    # the endpoint's own count over the shared point (its last N requests: after the unshared twin and the warm-up)
    shared_batch = log[-N:]
    expected = sum(e["cached_words"] for e in shared_batch) / sum(e["context_words"] for e in shared_batch)
    assert px["hit_rate_source"].startswith("server counters")
    assert px["hit_rate"] == pytest.approx(expected)
    assert expected == pytest.approx((N - GROUPS + 1) * SHARED / (N * TOKENS))    # the warm-up sent group 0
    assert px["hit_rate_inferred"] == pytest.approx(expected)
    assert all(e["cached_words"] == 0 for e in log[:N])               # the unshared twin: nothing to reuse
    ttft = px["ttft"]
    assert ttft["with"]["n"] == ttft["without"]["n"] == N
    assert ttft["with"]["mean"] < ttft["without"]["mean"] and ttft["ratio_of_means"] < 0.9
    assert px["without"]["requests"]["ok"] == N
    from assay.cli.bench.perf import render_perf

    render_perf(s)
    shown = " ".join(capsys.readouterr().out.split())
    assert "prefix cache: hit rate" in shown and "(server counters" in shown and "ms without" in shown
    assert "server: running mean" in shown


def test_without_counters_the_hit_rate_is_inferred_and_says_so():
    with PerfServer(prefill, tokenize=True) as srv:
        run = run_prefix(srv, metrics=False)
    px = run.summary["points"][0]["prefix"]
    assert px["hit_rate_source"].startswith("inferred") and "no --server-metrics" in px["hit_rate_source"]
    assert px["hit_rate"] == px["hit_rate_inferred"] == pytest.approx(inferred_hit_rate(1, N, GROUPS, SHARED, TOKENS))


def test_prefix_groups_need_a_shared_prefix():
    with pytest.raises(AssayError, match="--prefix-groups needs --shared-prefix"):
        PerfConfig(endpoint="http://x/v1", prefix_groups=4).check()


def test_without_counters_the_hit_rate_comes_from_the_answers_usage():
    # a server that reports each prompt's cached part in its usage (OpenAI's prompt_tokens_details.cached_tokens,
    # which vLLM and llama.cpp's llama-server fill) but has no /metrics counters: the rate is its own count
    with PerfServer(prefill, tokenize=True, cached_usage=True) as srv:
        run = run_prefix(srv, metrics=False)
        log = sorted(srv.log, key=lambda e: e["i"])
    px = run.summary["points"][0]["prefix"]
    shared_batch = log[-N:]
    expected = sum(e["cached_words"] for e in shared_batch) / sum(e["context_words"] for e in shared_batch)
    assert px["hit_rate_source"].startswith("server usage (prompt_tokens_details.cached_tokens")
    assert f"{N} answers" in px["hit_rate_source"]
    assert px["hit_rate"] == px["hit_rate_usage"] == pytest.approx(expected) and expected > 0


def test_usage_hit_rate_reads_only_plausible_counts():
    ok = {"status": "ok", "input_tokens": {"usage": 10, "cached": 4}}
    assert usage_hit_rate([ok, {**ok, "status": "timeout"}])["rate"] == 0.4
    assert usage_hit_rate([{"status": "ok", "input_tokens": {"usage": 10, "cached": None}}]) is None
    assert cached_tokens({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 4}}) == 4
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": True}}) is None
    assert cached_tokens({"prompt_tokens_details": {"cached_tokens": -1}}) is None
    assert cached_tokens({"prompt_tokens": 10}) is None
