"""``assay bench perf`` end to end against a real server: llama.cpp's OpenAI-compatible server
(``python -m llama_cpp.server``, the embedded Gemma 3 270M) on loopback, started by the test.

What is checked is the path and the bookkeeping, not the server's speed: streamed answers are
stamped and measured (TTFT before E2E, one gap per token after the first), the prompt length
is counted by the server's own tokenizer, tokens reconcile, percentiles come with intervals,
the run is stored, shown, compared, and written out with its charts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import run_assay

ALIAS = "gemma-3-270m"


def assay(*args: str, store: Path) -> subprocess.CompletedProcess:
    return run_assay([*args, "--store", str(store)])


def test_perf_against_llama_server(llama_server: str, tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    out = tmp_path / "out"
    r = assay("bench", "perf", "--endpoint", llama_server, "--model", ALIAS, "--concurrency", "1,2",
              "--requests", "4", "--warmup", "1", "--input-tokens", "48", "--output-tokens", "12",
              "--name", "llama-smoke", "--out", str(out), "-q", store=store)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "assay.bench.perf/1" and summary["mode"] == "concurrency"
    assert summary["tokenizer"]["source"] == "server /extras/tokenize"
    assert summary["clock"] == "kernel"
    assert [p["concurrency"] for p in summary["points"]] == [1, 2]
    for p in summary["points"]:
        assert p["requests"] == {"sent": 4, "ok": 4, "failed": 0, "failures": {}}
        m = p["metrics"]
        assert 0 < m["ttft"]["p50"] < m["e2e"]["p50"]
        lo, hi = m["ttft"]["ci"]["mean"]
        assert lo <= m["ttft"]["mean"] <= hi
        assert p["latency_index"] == m["ttft"]["mean"] and p["throughput_index"] == m["gtps"]["mean"]
        assert p["tokens"]["input_mean"] == 48
        assert p["tokens"]["disagreements"] == 0
        assert 1 <= p["tokens"]["output_mean"] <= 12
        assert p["validity"]["clock"] == "kernel"
    lines = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert len(lines) == 8 and all(x["status"] == "ok" for x in lines)
    for x in lines:
        n = x["output_tokens"]["used"]
        assert x["output_tokens"]["from"] == "model tokenizer"
        assert len(x["itl"]) == x["chunks"] - 1
        assert x["ttft"] + sum(x["itl"]) == pytest.approx(x["e2e"], abs=1e-6)
        assert x["input_tokens"]["prompt"] == 48 and n >= 1
    svgs = sorted(p.name for p in out.glob("*.svg"))
    assert svgs and all((out / s).read_text().startswith("<svg") for s in svgs)

    shown = assay("bench", "show", "--json", store=store)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["ref"] == summary["id"]
    listed = assay("bench", "list", store=store)
    assert "llama-smoke" in listed.stdout

    r2 = assay("bench", "perf", "--endpoint", llama_server, "--model", ALIAS, "--requests", "3", "--warmup", "0",
               "--input-tokens", "48", "--output-tokens", "12", "--json", "-q", store=store)
    assert r2.returncode == 0, r2.stderr
    second = json.loads(r2.stdout)
    assert second["mode"] == "sequential"
    cmp = assay("bench", "compare", summary["id"], second["id"], "--json", store=store)
    assert cmp.returncode == 0, cmp.stderr


def test_unreachable_endpoint_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = assay("bench", "perf", "--endpoint", f"http://127.0.0.1:{port}/v1", "--model", "m", "-n", "1", "-q",
              store=tmp_path / "s.db")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert f"127.0.0.1:{port}" in r.stderr


def test_llama_server_reports_no_cached_tokens_so_the_hit_rate_is_inferred(llama_server: str) -> None:
    # llama-cpp-python's server has no /metrics and no prompt_tokens_details in its usage: assay says its
    # prefix hit rate is inferred and why, and leaves the per-turn cached tokens empty rather than guess
    # (benchmarks/bench_perf_llamacpp.py holds both against the server's own log)
    import asyncio

    from assay.bench.perf.run import PerfConfig, run_perf

    run = asyncio.run(run_perf(PerfConfig(endpoint=llama_server, model=ALIAS, input_tokens=24, output_tokens=2,
                                          warmup=1, requests=2, shared_prefix=16, prefix_groups=1)))
    px = run.summary["points"][0]["prefix"]
    assert px["hit_rate_source"].startswith("inferred") and "no cached tokens in its usage" in px["hit_rate_source"]
    assert px["hit_rate_usage"] is None and px["hit_rate"] == px["hit_rate_inferred"]
    assert all(r["input_tokens"]["cached"] is None for r in run.requests)
    run = asyncio.run(run_perf(PerfConfig(endpoint=llama_server, model=ALIAS, input_tokens=12, output_tokens=2,
                                          warmup=0, sessions=1, turns=2)))
    rows = run.summary["points"][0]["sessions"]["per_turn"]
    assert [r["ok"] for r in rows] == [1, 1] and all(r["cached_tokens_mean"] is None for r in rows)
    assert rows[1]["context_tokens_mean"] > rows[0]["context_tokens_mean"]
