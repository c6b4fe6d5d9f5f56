"""Stopping where more load buys nothing (`--rate sweep --stop-at-saturation`, `--max-error-rate`;
issue 34 item 3) against a scripted endpoint with a knee: it makes at most CAPACITY answers at once,
each SERVICE seconds long, so it cannot serve more than CAPACITY / SERVICE requests per second."""

from __future__ import annotations

import asyncio

import pytest

from assay.bench.perf.run import PerfConfig, run_perf
from assay.bench.perf.saturation import GROWTH, MIN_GAIN, MIN_LATENCY_RISE, saturated
from assay.errors import AssayError
from tests.helpers.perf_server import PerfServer

CAPACITY, SERVICE = 3, 0.02
KNEE = CAPACITY / SERVICE           # 150 requests per second


def test_the_sweep_stops_at_the_scripted_knee():
    with PerfServer(lambda i, stream, body: {"first_delay": SERVICE, "tokens": 1}, capacity=CAPACITY) as srv:
        cfg = PerfConfig(endpoint=srv.url, model="scripted", input_tokens=8, output_tokens=1, warmup=0, requests=60,
                         sweep=10, stop_at_saturation=True)
        run = asyncio.run(run_perf(cfg))
    s = run.summary
    pts = s["points"]
    stop = s["stop_rule"]
    assert stop is not None and stop["reason"] == "saturation", [p["request_throughput"] for p in pts]
    assert pts[0]["concurrency"] == 1 and all(p["rate"] is not None for p in pts[1:])
    rates = [p["rate"] for p in pts[1:]]
    assert all(b == pytest.approx(a * GROWTH, rel=0.01) for a, b in zip(rates, rates[1:]))
    # it stopped once the offered rate passed the knee and the throughput had flattened at the
    # server's capacity (a point of 60 requests drains after its last send, so the measured throughput
    # nears the capacity a step or two past it), and not far beyond
    assert KNEE < stop["at"]["rate"] <= KNEE * GROWTH ** 3
    assert 0.8 * KNEE < stop["at"]["request_throughput"] < 1.05 * KNEE
    assert stop["knee"] == stop["previous"] and stop["previous"]["rate"] == rates[-2]
    # the evidence is the rule applied to the stored points
    assert stop["throughput_gain"] < MIN_GAIN and stop["e2e_p50_rise"] > MIN_LATENCY_RISE
    assert stop["throughput_gain"] == pytest.approx(pts[-1]["request_throughput"] / pts[-2]["request_throughput"] - 1)
    assert "saturated at" in s["notes"][-1] and len(pts) < 11


def test_max_error_rate_stops_the_run_at_the_failing_point():
    with PerfServer(lambda i, stream, body: {"status": 503} if i > 12 else {"tokens": 1}) as srv:
        cfg = PerfConfig(endpoint=srv.url, model="scripted", input_tokens=8, output_tokens=1, warmup=0, requests=6,
                         rates=[50.0, 60.0, 70.0, 80.0], max_error_rate=0.2)
        run = asyncio.run(run_perf(cfg))
    s = run.summary
    assert [p["rate"] for p in s["points"]] == [50.0, 60.0, 70.0]
    assert s["stop_rule"]["reason"] == "error rate" and s["stop_rule"]["at"]["failure_rate"] == 1.0
    assert "more than --max-error-rate 20%" in s["notes"][-1]


def test_the_rule_on_its_own():
    prev = {"rate": 10.0, "request_throughput": 10.0, "metrics": {"e2e": {"p50": 1.0}}}
    assert saturated(prev, {"rate": 15.0, "request_throughput": 10.5, "metrics": {"e2e": {"p50": 1.5}}})
    assert saturated(prev, {"rate": 15.0, "request_throughput": 12.0, "metrics": {"e2e": {"p50": 3.0}}}) is None
    assert saturated(prev, {"rate": 15.0, "request_throughput": 10.0, "metrics": {"e2e": {"p50": 1.1}}}) is None


@pytest.mark.parametrize("kw,msg", [({"stop_at_saturation": True}, "needs --rate sweep"),
                                    ({"max_error_rate": 1.5}, "--max-error-rate must be a share")])
def test_bad_options(kw, msg):
    with pytest.raises(AssayError, match=msg):
        PerfConfig(endpoint="http://x/v1", **kw).check()
