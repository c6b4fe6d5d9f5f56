"""Trace replay (`bench perf --replay`, issue 34 item 1) against the scripted endpoint, which counts
one token per word on /tokenize and logs each request's arrival: the arrival times as the trace
says (x 1/speed) within the schedule lag the run states, the lengths exactly in the server's
tokens, the shared prefixes where the hash ids say so; the Mooncake, plain and OTLP layouts; and
compare refusing a replay against a synthetic run (the workload fingerprint, item 7)."""

from __future__ import annotations

import asyncio
import json

import pytest

from assay.bench.kinds import store_benchmark
from assay.bench.perf.compare import compare_perf
from assay.bench.perf.replay import BLOCK_SIZE, read_trace
from assay.bench.perf.run import PerfConfig, run_perf
from assay.errors import AssayError
from assay.store import Store
from tests.helpers.perf_server import PerfServer
from tests.helpers.perfdata import make_run

MOONCAKE = [
    {"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]},
    {"timestamp": 120, "input_length": 700, "output_length": 5, "hash_ids": [0, 2]},
    {"timestamp": 120, "input_length": 40, "output_length": 2, "hash_ids": [3]},
    {"timestamp": 300, "input_length": 1100, "output_length": 4, "hash_ids": [0, 1, 4]},
    {"timestamp": 560, "input_length": 515, "output_length": 6, "hash_ids": [5, 6]},
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def words(entry) -> list[str]:
    return " ".join(m["content"] for m in entry["body"]["messages"]).split()


def replay(url: str, trace: str, speed: float = 1.0):
    cfg = PerfConfig(endpoint=url, model="scripted", replay=trace, speed=speed, warmup=0)
    return asyncio.run(run_perf(cfg))


def test_mooncake_replay_keeps_the_times_the_lengths_and_the_prefixes(tmp_path):
    trace = write_jsonl(tmp_path / "t.jsonl", MOONCAKE)
    with PerfServer(tokenize=True) as srv:
        run = replay(srv.url, trace, speed=2.0)
        log = sorted(srv.log, key=lambda e: e["t"])
    s = run.summary
    assert s["mode"] == "replay" and s["tokenizer"]["source"] == "server /tokenize"
    assert s["settings"]["workload"].startswith("replay mooncake sha256:") and s["settings"]["workload"].endswith("x2")
    point = s["points"][0]
    assert point["requests"]["ok"] == len(MOONCAKE)
    lag = point["replay"]["schedule_lag_ms"]
    assert set(lag) == {"p50", "p99", "max"}
    # arrival times: the trace's, halved, within the lag the run states (plus loopback's delivery)
    by_len = {len(words(e)): e for e in log}
    assert sorted(by_len) == sorted(r["input_length"] for r in MOONCAKE)     # lengths exact, server tokens
    t0 = log[0]["t"]
    for r in MOONCAKE:
        got = by_len[r["input_length"]]["t"] - t0
        assert abs(got - r["timestamp"] / 1000 / 2.0) <= lag["max"] / 1e3 + 0.03, (r, got)
        assert by_len[r["input_length"]]["body"]["max_tokens"] == r["output_length"]
        assert by_len[r["input_length"]]["body"]["ignore_eos"] is True
    assert point["replay"]["input_exact"] == len(MOONCAKE)
    assert point["replay"]["output_as_traced"] == len(MOONCAKE)
    # shared prefixes: the same first block where the first hash id is the same, different otherwise
    w600, w700, w1100, w515 = (words(by_len[n]) for n in (600, 700, 1100, 515))
    assert w600[:BLOCK_SIZE] == w700[:BLOCK_SIZE] == w1100[:BLOCK_SIZE]
    assert w600[BLOCK_SIZE:] == w1100[BLOCK_SIZE:600]          # [0, 1] is a prefix of [0, 1, 4]
    assert w700[BLOCK_SIZE:] != w600[BLOCK_SIZE:][:len(w700) - BLOCK_SIZE]
    assert w515[:BLOCK_SIZE] != w600[:BLOCK_SIZE]
    assert point["replay"]["reusable_tokens"] == 2 * BLOCK_SIZE + 88     # [0] twice more, [0, 1] once (88 sent)
    assert point["requests"]["ok"] and point["rate"] == pytest.approx(4 / 0.28, rel=1e-3)


def test_plain_layout_and_the_requests_file(tmp_path):
    rows = [{"at": 0.0, "input_tokens": 30, "output_tokens": 2}, {"at": 0.05, "input_tokens": 12, "output_tokens": 4}]
    trace = write_jsonl(tmp_path / "plain.jsonl", rows)
    with PerfServer(tokenize=True) as srv:
        run = replay(srv.url, trace)
        got = sorted((len(words(e)), e["body"]["max_tokens"]) for e in srv.log)
    assert got == [(12, 4), (30, 2)]
    assert run.summary["settings"]["workload"].startswith("replay plain")
    sched = sorted(r["scheduled"] for r in run.requests)       # requests.jsonl: from the first send
    assert sched[1] - sched[0] == pytest.approx(0.05)


def otlp_span(i: int, start_ms: int, input_tokens: int, output_tokens: int) -> dict:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
             "gen_ai.usage.input_tokens": input_tokens, "gen_ai.usage.output_tokens": output_tokens}
    start = 1_700_000_000_000_000_000 + start_ms * 1_000_000
    return {"traceId": f"{i + 1:032x}", "spanId": f"{i + 1:016x}", "name": "chat m", "kind": 3,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + 50_000_000),
            "attributes": [{"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
                           for k, v in attrs.items()]}


def test_otlp_spans_are_a_workload(tmp_path):
    doc = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "app"}, "spans": [
        otlp_span(0, 200, 25, 3), otlp_span(1, 0, 18, 2), otlp_span(2, 90, 40, 5)]}]}]}
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(doc))
    tr = read_trace(f"otlp:{path}")
    assert tr.layout == "otlp"
    assert [(r.at, r.input_tokens, r.output_tokens) for r in tr.requests] == [
        (0.0, 18, 2), (pytest.approx(0.09), 40, 5), (pytest.approx(0.2), 25, 3)]
    with PerfServer(tokenize=True) as srv:
        run = replay(srv.url, f"otlp:{path}")
        got = sorted((len(words(e)), e["body"]["max_tokens"]) for e in srv.log)
    assert got == [(18, 2), (25, 3), (40, 5)]
    assert run.summary["settings"]["workload"].startswith("replay otlp")


@pytest.mark.parametrize("row,msg", [
    ({"timestamp": 0, "input_length": "x", "output_length": 3}, "line 2: field 'input_length'"),
    ({"timestamp": 0, "input_length": 2000, "output_length": 3, "hash_ids": [1]}, "line 2: 1 hash ids"),
    ({"timestamp": 0, "input_length": 20, "output_length": 3, "hash_ids": "ab"}, "line 2: field 'hash_ids'"),
])
def test_bad_rows_name_the_line_and_field(tmp_path, row, msg):
    trace = write_jsonl(tmp_path / "t.jsonl", [MOONCAKE[2], row])
    with pytest.raises(AssayError, match=msg):
        read_trace(trace)


def test_replay_refuses_a_load_and_compare_refuses_to_mix_workloads(tmp_path):
    with pytest.raises(AssayError, match="--replay sends at the trace's own times"):
        PerfConfig(endpoint="http://x/v1", replay="t.jsonl", rates=[2.0]).check()
    st = Store(str(tmp_path / "s.db"))
    a, sa = make_run(mode="rate", levels=(2,), n=30, seed=1)
    b, sb = make_run(mode="rate", levels=(2,), n=30, seed=2)
    b["settings"]["workload"] = "replay mooncake sha256:0123456789abcdef x1"
    ra, rb = store_benchmark(st, "perf", a, sa), store_benchmark(st, "perf", b, sb)
    with pytest.raises(AssayError, match="ran different workloads"):
        compare_perf(st, ra, rb)
    c, sc = make_run(mode="rate", levels=(2,), n=30, seed=3)
    assert compare_perf(st, ra, store_benchmark(st, "perf", c, sc))["points"]     # synthetic vs synthetic


def test_replay_against_llama_cpp_server_is_exact_in_its_tokens(llama_server, tmp_path):
    """The real server (llama-cpp-python with the embedded Gemma 270M): each replayed prompt is its
    traced length by the server's own tokenizer, and the server's usage agrees (its count is the
    prompt's plus the BOS token it adds, the same for every request)."""
    rows = [{"timestamp": 0, "input_length": 40, "output_length": 3},
            {"timestamp": 40, "input_length": 90, "output_length": 4},
            {"timestamp": 80, "input_length": 64, "output_length": 2}]
    trace = write_jsonl(tmp_path / "t.jsonl", rows)
    cfg = PerfConfig(endpoint=llama_server, model="gemma-3-270m", replay=trace, warmup=0, api="completions",
                     stream=False)          # its streams carry no usage: unstreamed, to read the server's count
    run = asyncio.run(run_perf(cfg))
    s = run.summary
    assert s["tokenizer"]["model_tokens"] and "tokenize" in s["tokenizer"]["source"]
    reqs = sorted(run.requests, key=lambda r: r["i"])
    assert [r["input_tokens"]["used"] for r in reqs] == [40, 90, 64]
    extra = {r["input_tokens"]["usage"] - r["input_tokens"]["used"] for r in reqs}
    assert len(extra) == 1 and extra.pop() in (0, 1)
    assert all(r["output_tokens"]["used"] <= row["output_length"] for r, row in zip(reqs, rows))
    assert s["points"][0]["replay"]["input_exact"] == 3
