"""``assay bench perf`` against the scripted endpoint (benchmarks/stream_endpoint.py) for what a
real server will not do on cue: exact timing, HTTP errors mid-run, a stream cut off, a stalled
stream hitting the stall timeout, a 429 storm. The run completes and reports each by cause,
and the figures of the requests that succeeded match the script's timing."""

from __future__ import annotations

import asyncio

import pytest

from assay.bench.perf.run import PerfConfig, run_perf
from assay.errors import AssayError

# exact timing (a few ms of slack): run apart from the parallel tests (`make test`)
pytestmark = pytest.mark.serial


def perf(port: int, **kw) -> dict:
    cfg = PerfConfig(endpoint=f"http://127.0.0.1:{port}/v1", model="scripted", input_tokens=kw.pop("input_tokens", 64),
                     output_tokens=kw.pop("output_tokens", 10), warmup=kw.pop("warmup", 0), **kw)
    return asyncio.run(run_perf(cfg))


def test_exact_timing_is_measured(endpoint):
    ep = endpoint("--ttft", "0.08", "--itl", "0.01", "--tokenize")
    run = perf(ep.port, requests=6, concurrency=[1, 3], output_tokens=12)
    log = [r for r in ep.stop() if r["i"] is not None]      # completions requests, not /tokenize
    s = run.summary
    assert s["tokenizer"]["source"] == "server /tokenize" and s["clock"] == "kernel"
    server_ttft = sorted(r["first_write"] - r["arrival"] for r in log)
    for p in s["points"]:
        m = p["metrics"]
        assert p["requests"]["ok"] == 6
        # the client's TTFT is the server's plus transit: a little more, never less
        assert server_ttft[0] - 0.001 <= m["ttft"]["min"]
        assert m["ttft"]["p50"] == pytest.approx(0.08, abs=0.02)
        assert m["itl"]["p50"] == pytest.approx(0.01, abs=0.004)
        assert m["itl"]["n"] == 6 * 11
        assert m["e2e"]["p50"] == pytest.approx(0.08 + 11 * 0.01, abs=0.03)
        assert p["tokens"]["output_mean"] == 12 and p["tokens"]["usage_from"].startswith("server")
        assert p["tokens"]["disagreements"] == 0 and p["tokens"]["input_mean"] == 64
    assert all(r["prompt_tokens"] == 64 for r in log)


def test_faults_are_counted_by_cause_and_left_out(endpoint):
    script = [{"requests": [2, 2], "status": 500, "body": {"error": {"message": "boom"}}},
              {"requests": [4, 4], "cut_after": 3},
              {"requests": [6, 6], "stall_after": 2},
              {"requests": [8, 11], "status": 429, "retry_after": 1}]
    ep = endpoint("--ttft", "0.02", "--itl", "0.005", script=script)
    run = perf(ep.port, requests=14, stall_timeout=0.5, timeout=30)
    ep.stop()
    p = run.summary["points"][0]
    assert p["requests"]["failures"] == {"http 500": 1, "stream cut": 1, "stall": 1, "http 429": 4}
    assert p["requests"]["ok"] == 7 and p["metrics"]["ttft"]["n"] == 7
    by_i = {r["i"]: r for r in run.requests}
    assert by_i[3]["status"] == "stream cut" and by_i[3]["chunks"] == 3
    assert by_i[5]["status"] == "stall" and "no byte for 0.5 s" in by_i[5]["error"]
    assert by_i[1]["http_status"] == 500
    v = run.summary["points"][0]["validity"]      # 7 of 14 failed: the rest's figures are no measure of the server
    assert v["valid"] is False and v["failed"] == 7 and "7 of 14 requests failed" in v["reasons"][0]


def test_a_request_past_its_timeout_is_a_timeout(endpoint):
    ep = endpoint("--ttft", "0.02", "--itl", "0.2", script=[{"requests": [1, 1], "delay_headers": 5.0}])
    run = perf(ep.port, requests=2, output_tokens=3, timeout=1.0, stall_timeout=10)
    ep.stop()
    statuses = sorted(r["status"] for r in run.requests)
    assert statuses == ["ok", "timeout"]


def test_open_loop_latency_from_the_schedule(endpoint):
    ep = endpoint("--ttft", "0.05", "--itl", "0.005")
    run = perf(ep.port, rates=[20.0], requests=30, output_tokens=5)
    ep.stop()
    p = run.summary["points"][0]
    assert p["rate"] == 20.0 and p["requests"]["ok"] == 30
    m = p["metrics"]
    assert m["ttft_sched"]["min"] >= m["ttft"]["min"] - 1e-9          # never earlier than the actual send
    lag = p["validity"]["schedule_lag_ms"]
    assert lag is not None and lag["max"] >= lag["p50"] >= 0
    assert all(r["scheduled"] is not None and r["sent"] >= r["scheduled"] - 1e-9 for r in run.requests)


def test_a_refused_first_request_stops_the_run_with_the_reason(endpoint):
    ep = endpoint(script=[{"requests": [1, 1], "status": 404, "body": {"error": {"message": "no such model"}}}])
    with pytest.raises(AssayError, match="HTTP 404.*no such model"):
        perf(ep.port, requests=2, warmup=1)
    ep.stop()


def test_a_reasoning_model_has_a_time_to_first_answer(endpoint):
    ep = endpoint("--ttft", "0.03", "--itl", "0.01", "--reasoning", "4")
    run = perf(ep.port, requests=3, output_tokens=8)
    ep.stop()
    m = run.summary["points"][0]["metrics"]
    assert m["ttfat"]["p50"] == pytest.approx(m["ttft"]["p50"] + 4 * 0.01, abs=0.006)


def test_a_rate_sweep_runs_between_one_at_a_time_and_flat_out(endpoint):
    ep = endpoint("--ttft", "0.02", "--itl", "0.004")
    run = perf(ep.port, sweep=2, sweep_concurrency=8, requests=16, output_tokens=6)
    ep.stop()
    s = run.summary
    assert s["mode"] == "sweep"
    pts = s["points"]
    assert [p["concurrency"] for p in pts[:2]] == [1, 8] and len(pts) == 4
    lo, hi = pts[0]["request_throughput"], pts[1]["request_throughput"]
    assert hi > lo
    rates = [p["rate"] for p in pts[2:]]
    assert lo < rates[0] < rates[1] < hi
    assert all(p["requests"]["ok"] == 16 for p in pts)


def test_without_kernel_stamps_the_event_loop_stamps_and_says_so(endpoint):
    from assay.bench.perf.measure import measure
    from assay.bench.perf.stream import StreamClient

    ep = endpoint("--ttft", "0.03", "--itl", "0.005")
    body = (b'{"model":"scripted","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}')
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body)) + body

    async def go():
        client = StreamClient(f"http://127.0.0.1:{ep.port}", kernel_stamps=False)
        try:
            return client.clock, [await client.request(req) for _ in range(2)]
        finally:
            await client.aclose()

    clock, exs = asyncio.run(go())
    ep.stop()
    assert clock == "user"
    for ex in exs:
        assert ex.complete and ex.kernel_stamps == 0 and ex.user_stamps >= 1
        rec = measure(ex, stream=True)
        assert rec["status"] == "ok" and rec["chunks"] == 4
        assert rec["ttft"] == pytest.approx(0.03, abs=0.02)


def test_scheduled_repeats_make_a_track(endpoint, tmp_path):
    import json

    from tests.helpers.cli import run_assay

    ep = endpoint("--ttft", "0.01", "--itl", "0.002")
    store = str(tmp_path / "s.db")
    r = run_assay(["bench", "perf", "--endpoint", f"http://127.0.0.1:{ep.port}/v1", "--model", "scripted",
                   "-n", "3", "--warmup", "1", "--input-tokens", "20", "--output-tokens", "4",
                   "--repeat", "2", "--every", "1s", "--out", str(tmp_path / "out"), "-q", "--store", store])
    ep.stop()
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["repeat-001", "repeat-002"]
    listed = json.loads(run_assay(["bench", "list", "--json", "--store", store]).stdout)
    tracks = {x["track"] for x in listed}
    assert len(listed) == 2 and len(tracks) == 1 and None not in tracks
    tr = run_assay(["bench", "track", tracks.pop(), "--json", "--store", store])
    assert tr.returncode == 0, tr.stderr
