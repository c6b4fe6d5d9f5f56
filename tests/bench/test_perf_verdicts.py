"""`bench perf` verdicts against servers that misbehave (issue 28, items 2 and 4): negative token
counts, failures that must touch the validity verdict, a server that stalls every request, a
whole-run time limit, intervals of too few values, token counts with and without streaming, and
progress that names its load point. The servers are scripted on loopback (tests/helpers/perf_server.py)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from scipy import stats as sps

from assay.bench.perf import measure as M
from assay.bench.perf.compare import MIN_COMPARED, compare_points
from assay.bench.perf.run import PerfConfig, run_perf
from tests.helpers.perf_server import PerfServer
from tests.helpers.perfdata import make_run


def perf(url: str, progress=None, **kw):
    cfg = PerfConfig(endpoint=url, model="scripted", input_tokens=kw.pop("input_tokens", 24),
                     output_tokens=kw.pop("output_tokens", 4), warmup=kw.pop("warmup", 0), **kw)
    return asyncio.run(run_perf(cfg, progress=progress))


def test_negative_usage_is_rejected_per_request_and_throughput_stays_positive():
    neg = {"prompt_tokens": -5, "completion_tokens": -3_390_000_000, "total_tokens": -3_390_000_005}
    with PerfServer(lambda i, stream, body: {"usage": neg}) as srv:
        run = perf(srv.url, requests=4)
    p = run.summary["points"][0]
    assert p["requests"]["ok"] == 4
    assert p["output_throughput"] > 0 and p["total_token_throughput"] > 0
    assert p["tokens"]["output_total"] == 4 * 4 and p["tokens"]["input_total"] == 4 * 24
    assert p["tokens"]["usage_rejected"] == 4
    assert "server usage" in p["tokens"]["usage_rejected_why"][0]
    for r in run.requests:
        assert r["output_tokens"]["used"] == 4 and r["output_tokens"]["usage"] is None
        assert "negative" in r["output_tokens"]["usage_rejected"]
    assert all(m["mean"] > 0 for k, m in p["metrics"].items() if k in ("gtps", "ttps"))


def test_an_absurdly_large_usage_is_rejected_too():
    huge = {"prompt_tokens": 24, "completion_tokens": 10**12}
    with PerfServer(lambda i, stream, body: {"usage": huge}) as srv:
        run = perf(srv.url, requests=2)
    p = run.summary["points"][0]
    assert p["tokens"]["output_total"] == 2 * 4 and p["tokens"]["usage_rejected"] == 2


def test_failures_make_a_point_not_valid_above_the_threshold_and_are_counted():
    with PerfServer(lambda i, stream, body: {"status": 500} if i > 1 else {}) as srv:
        run = perf(srv.url, requests=6)
    p = run.summary["points"][0]
    v = p["validity"]
    assert p["requests"]["ok"] == 1 and p["requests"]["failed"] == 5
    assert v["valid"] is False and v["failed"] == 5 and v["failure_rate"] == pytest.approx(5 / 6)
    assert any("5 of 6 requests failed" in r for r in v["reasons"])


def test_a_few_failures_under_the_threshold_are_said_but_keep_the_point_valid():
    v = M.verdict({"metrics": {"ttft": {"p50": 0.1}}, "duration_s": 10.0,
                   "requests": {"sent": 100, "ok": 99, "failed": 1, "failures": {"stall": 1}}},
                  {"clock": "kernel", "cpu_s": 0.1})
    assert v["valid"] and v["failed"] == 1 and v["failure_rate"] == pytest.approx(0.01)
    assert v["notes"] == ["1 of 100 requests failed (1.0%: stall 1); their latencies are left out"]


def test_compare_gives_no_verdict_below_the_minimum_count_and_warns():
    a, xa = make_run(levels=(1,), n=MIN_COMPARED - 1, seed=1)
    b, xb = make_run(levels=(1,), n=MIN_COMPARED - 1, seed=2, speed=0.2)     # five times slower
    cmp = compare_points(a, xa, b, xb, seed=0, resamples=200)
    pt = cmp["points"][0]
    assert all(e["verdict"] is None for e in pt["metrics"].values())
    assert all(s["verdict"] is None for e in pt["metrics"].values() for s in e["stats"].values())
    assert any(f"fewer than {MIN_COMPARED} completed requests" in w for w in cmp["warnings"])
    a, xa = make_run(levels=(1,), n=MIN_COMPARED, seed=1)
    b, xb = make_run(levels=(1,), n=MIN_COMPARED, seed=2, speed=0.2)
    assert compare_points(a, xa, b, xb, seed=0, resamples=200)["points"][0]["metrics"]["ttft"]["verdict"] == "slower"


def test_a_server_that_stalls_every_request_ends_the_point_early():
    with PerfServer(lambda i, stream, body: {"stall": 30}) as srv:
        run = perf(srv.url, requests=30, warmup=2, stall_timeout=0.3, timeout=30)
        sent = srv.count
    p = run.summary["points"][0]
    assert p["requests"]["ok"] == 0 and p["requests"]["sent"] == M.STOP_AFTER_FAILURES
    assert sent <= 1 + M.STOP_AFTER_FAILURES         # one warm-up (it stalled: no second), then the stop
    assert any("stopped after the first 3 requests all failed" in n for n in run.summary["notes"])
    assert p["validity"]["valid"] is False


def test_a_run_stops_at_its_time_limit_and_says_so():
    with PerfServer(lambda i, stream, body: {"stall": 0.3}) as srv:
        run = perf(srv.url, requests=40, concurrency=[1, 2], stall_timeout=5, max_time=1.0)
        sent = srv.count
    s = run.summary
    assert sent < 10 and len(s["points"]) == 1
    assert s["stopped"]["reason"] == "time limit" and "--max-time" in s["stopped"]["message"]
    assert any("--max-time" in n for n in s["notes"])
    assert s["points"][0]["requests"]["failures"].get("run time limit", 0) <= 1


def test_the_default_time_limit_bounds_the_run_and_is_recorded():
    with PerfServer() as srv:
        run = perf(srv.url, requests=2)
    assert run.summary["settings"]["max_time"] == 3600.0
    with PerfServer() as srv:
        run = perf(srv.url, duration=0.5, concurrency=[1, 2], max_prompts=20)
    assert run.summary["settings"]["max_time"] == 3600.0


def test_one_value_has_no_interval_and_small_samples_get_a_t_interval():
    one = M.distribution(np.array([0.5]))
    assert one["ci"]["mean"] is None and one["ci_method"]["mean"].startswith("too few")
    assert one["se"] is None
    v = np.array([0.20, 0.25, 0.22, 0.31, 0.24])
    d = M.distribution(v)
    se = v.std(ddof=1) / np.sqrt(5)
    t = sps.t.ppf(0.975, 4)
    assert d["se"] == pytest.approx(se)
    assert d["ci"]["mean"] == pytest.approx([v.mean() - t * se, v.mean() + t * se])
    assert d["ci_method"]["mean"] == "t (n=5)"
    # a percentile's interval needs enough values for one to exist: 50 requests have none for p99
    d50 = M.distribution(np.random.default_rng(0).lognormal(0, 0.3, 50))
    assert d50["ci"]["p50"] is not None and d50["ci"]["p99"] is None
    assert "too few" in d50["ci_method"]["p99"]


def test_a_point_of_one_request_shows_too_few_not_an_interval():
    with PerfServer() as srv:
        run = perf(srv.url, requests=1)
    m = run.summary["points"][0]["metrics"]["ttft"]
    assert m["n"] == 1 and m["ci"]["mean"] is None and m["ci"]["p50"] is None


def test_a_track_of_two_repeats_has_no_interval_and_three_have_a_t_interval():
    from assay.bench.perf.compare import aggregate_repeats

    runs = [{"summary": make_run(levels=(1,), n=20, seed=k)[0]} for k in range(3)]
    two = aggregate_repeats(runs[:2])[0]["metrics"]["ttft"]["mean"]
    assert two["ci95_low"] is None and two["ci95_high"] is None and two["se"] is not None
    three = aggregate_repeats(runs)[0]["metrics"]["ttft"]["mean"]
    means = [r["summary"]["points"][0]["metrics"]["ttft"]["mean"] for r in runs]
    se = np.std(means, ddof=1) / np.sqrt(3)
    half = sps.t.ppf(0.975, 2) * se
    assert three["se"] == pytest.approx(se)
    assert [three["ci95_low"], three["ci95_high"]] == pytest.approx([np.mean(means) - half, np.mean(means) + half])
    assert three["ci95_low"] < min(means) and three["ci95_high"] > max(means)    # wider than [min, max]


def test_input_tokens_are_the_same_with_and_without_streaming():
    def answer(i, stream, body):     # as llama.cpp: no usage when streamed; the chat template's 9 more when not
        return {"usage": None} if stream else {"usage": {"prompt_tokens": 33, "completion_tokens": 4}}

    with PerfServer(answer) as srv:
        streamed = perf(srv.url, requests=2, stream=True)
        whole = perf(srv.url, requests=2, stream=False)
    ts, tw = streamed.summary["points"][0]["tokens"], whole.summary["points"][0]["tokens"]
    assert ts["input_mean"] == tw["input_mean"] == 24
    assert ts["input_from"] == tw["input_from"] == "prompt (bundled o200k_base)"
    assert tw["input_server_mean"] == 33 and ts["input_server_mean"] is None
    assert streamed.requests[0]["input_tokens"]["used"] == whole.requests[0]["input_tokens"]["used"] == 24


def test_progress_names_the_load_point():
    seen = []
    with PerfServer() as srv:
        perf(srv.url, requests=2, concurrency=[1, 2], progress=lambda stage, done, total: seen.append(stage))
    assert any(s.startswith("concurrency 1 (1/2)") for s in seen)
    assert any(s.startswith("concurrency 2 (2/2)") for s in seen)
    assert {s.split(": ")[-1] for s in seen} == {"prompts", "requests"}


def test_an_open_loop_against_a_server_that_stalls_stops_scheduling():
    with PerfServer(lambda i, stream, body: {"stall": 30}) as srv:
        run = perf(srv.url, rates=[20.0], requests=60, stall_timeout=0.3, timeout=30)
        sent = srv.count
    p = run.summary["points"][0]
    assert p["requests"]["ok"] == 0 and sent < 20 and p["requests"]["sent"] == sent
    assert p["stopped"].startswith("stopped after the first")
