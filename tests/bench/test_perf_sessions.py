"""Multi-turn sessions (`bench perf --sessions --turns --think-time`, issue 34 item 2) against the
scripted endpoint, whose TTFT is scripted to grow with the context it receives and which remembers
its answers: each turn carries every earlier turn (the answers included), the per-turn figures show
TTFT rising as scripted, the think time is kept, sessions run closed or open loop, and the workload
is fingerprinted (item 7)."""

from __future__ import annotations

import asyncio

import pytest

from assay.bench.perf.run import PerfConfig, run_perf
from assay.errors import AssayError
from tests.helpers.perf_server import PerfServer

BASE, PER_WORD = 0.004, 0.001        # scripted TTFT: BASE + PER_WORD x words of context


def scripted(i, stream, body):
    words = sum(len(m["content"].split()) for m in body["messages"])
    return {"first_delay": BASE + PER_WORD * words, "tokens": 4, "word": f" a{i}"}


def sessions(url: str, **kw):
    cfg = PerfConfig(endpoint=url, model="scripted", input_tokens=30, output_tokens=4, warmup=0, **kw)
    return asyncio.run(run_perf(cfg))


def test_each_turn_carries_the_conversation_and_ttft_rises_with_it():
    with PerfServer(scripted, tokenize=True) as srv:
        run = sessions(srv.url, sessions=3, turns=4, think_time=0.02)
        log = list(srv.log)
    s = run.summary
    assert s["mode"] == "sessions" and s["settings"]["workload"] == "sessions 4 turns, think 0.02s, closed loop"
    pt = s["points"][0]
    assert pt["concurrency"] == 3 and pt["requests"]["ok"] == 12
    # session memory: turn k carries the k-1 answers the server gave, none it did not
    by_turn = sorted(len(e["body"]["messages"]) for e in log)
    assert by_turn == sorted([1, 3, 5, 7] * 3)
    assert all(e["carried"] == (len(e["body"]["messages"]) - 1) // 2 and e["forgotten"] == 0 for e in log)
    # the context the client reports is what the server received (one token per word, usage for answers)
    assert sorted(e["context_words"] for e in log) == sorted(r["context_tokens"] for r in run.requests)
    rows = pt["sessions"]["per_turn"]
    assert [r["turn"] for r in rows] == [1, 2, 3, 4] and all(r["ok"] == 3 for r in rows)
    assert [r["context_tokens_mean"] for r in rows] == [30, 64, 98, 132]
    ttft = [r["ttft"]["p50"] for r in rows]
    assert ttft == sorted(ttft)                       # rises turn by turn, as scripted
    scripted_ratio = (BASE + PER_WORD * 132) / (BASE + PER_WORD * 30)
    assert ttft[-1] / ttft[0] > 0.6 * scripted_ratio
    slope = pt["sessions"]["ttft_vs_context"]
    assert 0.5 * PER_WORD * 1e6 < slope["ms_per_1k_tokens"] < 2 * PER_WORD * 1e6 and slope["r"] > 0.9
    per = pt["sessions"]["per_session"]
    assert per["sessions"] == 3 and per["completed"] == 3 and per["turns_completed"]["mean"] == 4
    # the think time is kept: a session's next turn arrives at least that long after its last
    by_session: dict[str, list[float]] = {}
    for e in log:
        by_session.setdefault(e["body"]["messages"][0]["content"], []).append(e["t"])
    assert sorted(len(v) for v in by_session.values()) == [4, 4, 4]
    for ts in by_session.values():
        ts.sort()
        assert all(b - a >= 0.02 for a, b in zip(ts, ts[1:]))


def test_open_loop_sessions_start_at_the_rate():
    with PerfServer(scripted, tokenize=True) as srv:
        run = sessions(srv.url, sessions=4, turns=2, think_time=0.0, rates=[50.0])
    pt = run.summary["points"][0]
    assert pt["rate"] == 50.0 and pt["concurrency"] is None and pt["requests"]["ok"] == 8
    assert pt["sessions"]["loop"] == "open"
    assert run.summary["settings"]["workload"].endswith("open loop")
    assert pt["validity"]["schedule_lag_ms"] is not None


def test_a_failed_turn_ends_its_session():
    def fail_second(i, stream, body):
        return {"status": 500} if len(body["messages"]) == 3 else {"tokens": 2}

    with PerfServer(fail_second) as srv:
        run = sessions(srv.url, sessions=2, turns=3)
    pt = run.summary["points"][0]
    assert pt["requests"]["sent"] == 4 and pt["requests"]["failures"] == {"http 500": 2}
    assert pt["sessions"]["per_session"]["completed"] == 0


@pytest.mark.parametrize("kw,msg", [({"concurrency": [4]}, "without --concurrency"),
                                    ({"api": "completions"}, "needs --api chat"),
                                    ({"turns": 0}, "--turns at least 1")])
def test_bad_session_options(kw, msg):
    with pytest.raises(AssayError, match=msg):
        PerfConfig(endpoint="http://x/v1", sessions=2, **kw).check()


def test_the_cli_runs_sessions_and_a_replay(tmp_path):
    from tests.bench.test_perf_cli_runs import assay, perf_args

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 20, "output_length": 2}\n'
                     '{"timestamp": 30, "input_length": 25, "output_length": 3}\n')
    with PerfServer(tokenize=True) as srv:
        p = assay(*perf_args(srv.url, "--sessions", "2", "--turns", "2", "--think-time", "10ms"), store="off")
        assert p.returncode == 0, p.stderr
        assert "sessions (closed loop): turn 1:" in " ".join(p.stdout.split())
        q = assay("bench", "perf", "--endpoint", srv.url, "--model", "scripted", "--warmup", "0", "-q",
                  "--replay", str(trace), "--speed", "2", "--json", store="off")
        assert q.returncode == 0, q.stderr
    import json
    r = json.loads(q.stdout)
    assert r["mode"] == "replay" and r["points"][0]["replay"]["input_exact"] == 2


def test_per_turn_cached_tokens_are_the_servers_usage():
    # the scripted endpoint caches whole 16-word blocks of each prompt and says so in its usage: a session's
    # turn finds its earlier turns cached, and each turn's figure is the server's own count
    with PerfServer(scripted, tokenize=True, cached_usage=True) as srv:
        run = sessions(srv.url, sessions=1, turns=3, think_time=0.0)
        log = sorted(srv.log, key=lambda e: e["i"])
    rows = run.summary["points"][0]["sessions"]["per_turn"]
    assert [r["cached_tokens_mean"] for r in rows] == [e["cached_words"] for e in log]
    assert rows[0]["cached_tokens_mean"] == 0 and 0 < rows[1]["cached_tokens_mean"] < rows[2]["cached_tokens_mean"]
    with PerfServer(scripted, tokenize=True) as srv:           # a server whose usage says nothing of its cache
        run = sessions(srv.url, sessions=1, turns=2, think_time=0.0)
    assert all(r["cached_tokens_mean"] is None for r in run.summary["points"][0]["sessions"]["per_turn"])
