"""Server telemetry (`bench perf --server-metrics`, issue 34 item 4): the scripted endpoint's
/metrics page (vLLM's names, counters the test reads) scraped during the run, stored on the run's
time axis and summarised per point; the Prometheus parser on the three servers' names."""

from __future__ import annotations

import asyncio

import pytest

from assay.bench.perf.run import PerfConfig, run_perf
from assay.bench.perf.telemetry import Scraper, parse_prometheus, point_summary, signals
from assay.errors import AssayError
from tests.helpers.perf_server import PerfServer


def test_scraped_counters_match_the_endpoints_and_are_summarised_per_point():
    with PerfServer(lambda i, stream, body: {"first_delay": 0.03, "tokens": 3}, capacity=2, spec=True,
                    tokenize=True) as srv:
        cfg = PerfConfig(endpoint=srv.url, model="scripted", input_tokens=20, output_tokens=3, warmup=0, requests=8,
                         concurrency=[1, 4], server_metrics=srv.url[:-3] + "/metrics", metrics_interval=0.02)
        run = asyncio.run(run_perf(cfg))
        final = dict(srv.counters)
    s = run.summary
    tel = s["telemetry"]
    assert tel["names"]["running"] == "vllm:num_requests_running" and not tel["scrape_errors"]
    ts = [x["t"] for x in tel["samples"]]
    assert ts == sorted(ts) and len(ts) >= 4
    assert tel["samples"][-1]["prompt_tokens"] == final["prompt"] == 16 * 20      # the endpoint's own count
    assert tel["samples"][-1]["generation_tokens"] == final["generation"] == 16 * 3
    one, four = (p["server"] for p in s["points"])
    # per point: the counters' differences are that point's requests exactly
    assert one["counters"]["prompt_tokens"] == four["counters"]["prompt_tokens"] == 8 * 20
    assert one["counters"]["generation_tokens"] == 8 * 3
    assert one["spec_acceptance_rate"] == pytest.approx(8 / 12) and one["spec_mean_acceptance_length"] == 3.0
    # the gauges: one at a time never queues; four on a server of two does
    assert one["running"]["max"] <= 1 and one["queued"]["max"] == 0
    assert four["running"]["max"] == 2 and four["queued"]["max"] >= 1 and four["kv_cache_usage"]["max"] == 1.0
    assert all(p["window_s"][0] < p["window_s"][1] for p in s["points"])
    from assay.ui.perf_timeline import timeline

    svg = timeline(s, run.requests)           # --out's timeline.svg: requests and counters on one axis
    assert svg.startswith("<svg") and svg.count("<circle") == 16
    assert all(k in svg for k in ("TTFT per request", "running (requests)", "queued (requests)", "kv cache usage"))


def test_the_three_servers_names():
    text = """# HELP x
sglang:num_running_reqs{tp="0"} 3
sglang:num_running_reqs{tp="1"} 2
sglang:num_queue_reqs 7
sglang:cache_hit_rate 0.25
llamacpp:requests_processing 1
llamacpp:kv_cache_usage_ratio 0.5
vllm:time_to_first_token_seconds_bucket{le="0.1"} 4
bad line here
"""
    vals, names = signals(parse_prometheus(text))
    assert vals["running"] == 5 and names["running"] == "sglang:num_running_reqs"     # summed over labels
    assert vals["queued"] == 7 and vals["prefix_cache_hit_rate"] == 0.25 and vals["kv_cache_usage"] == 0.5
    samples = [(0.0, {"prefix_cache_hits": 10, "prefix_cache_queries": 100, "generation_tokens": 0, "decode_steps": 0}),
               (1.0, {"prefix_cache_hits": 40, "prefix_cache_queries": 200, "generation_tokens": 90, "decode_steps": 30})]
    got = point_summary(samples, 0.0, 1.0)
    assert got["prefix_cache_hit_rate_measured"] == 0.3 and got["tokens_per_step"] == 3.0
    assert point_summary(samples, 5.0, 6.0) is None


def test_a_bad_metrics_url_is_refused_and_a_dead_one_recorded():
    with pytest.raises(AssayError, match="--server-metrics must be an http"):
        Scraper("ftp://x/metrics")
    with PerfServer() as srv:
        cfg = PerfConfig(endpoint=srv.url, model="scripted", input_tokens=8, output_tokens=1, warmup=0, requests=2,
                         server_metrics=srv.url[:-3] + "/nothing", metrics_interval=0.05)
        run = asyncio.run(run_perf(cfg))
    tel = run.summary["telemetry"]
    assert tel["samples"] == [] and "HTTP 404" in tel["scrape_errors"][0]
    assert run.summary["points"][0]["server"] is None
