"""Requests spread over LoRA adapters (`bench perf --lora a,b --lora-mix`, issue 34 item 6): each
request names its adapter as the model, the mix is kept, figures come per adapter (the scripted
endpoint answers adapter b more slowly), and the workload is fingerprinted (item 7)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from assay.bench.perf.lora import assign
from assay.bench.perf.run import PerfConfig, run_perf
from assay.errors import AssayError
from tests.helpers.perf_server import PerfServer


def slow_b(i, stream, body):
    return {"first_delay": 0.03 if body["model"] == "b" else 0.002, "tokens": 2}


def test_requests_go_to_their_adapters_and_figures_come_per_adapter():
    with PerfServer(slow_b) as srv:
        cfg = PerfConfig(endpoint=srv.url, model="scripted", input_tokens=10, output_tokens=2, warmup=0, requests=12,
                         concurrency=[2], lora=["a", "b"], lora_mix="round-robin")
        run = asyncio.run(run_perf(cfg))
        sent = Counter(e["body"]["model"] for e in srv.log)
    s = run.summary
    assert s["settings"]["workload"] == "lora a,b (round-robin)"
    per = s["points"][0]["lora"]
    assert sent == {"a": 6, "b": 6} and per["a"]["ok"] == per["b"]["ok"] == 6
    assert per["b"]["ttft"]["p50"] > per["a"]["ttft"]["p50"]
    assert {r["adapter"] for r in run.requests} == {"a", "b"}


def test_mixes():
    assert assign(["a", "b", "c"], "round-robin", 5, 0) == ["a", "b", "c", "a", "b"]
    got = Counter(assign(["a", "b"], "3,1", 4000, 1))
    assert got["a"] / 4000 == pytest.approx(0.75, abs=0.03)
    got = Counter(assign(["a", "b"], "uniform", 4000, 1))
    assert got["a"] / 4000 == pytest.approx(0.5, abs=0.03)
    assert assign(["a", "b"], "uniform", 50, 7) == assign(["a", "b"], "uniform", 50, 7)
    with pytest.raises(AssayError, match="2 adapter"):
        PerfConfig(endpoint="http://x/v1", lora=["a", "b"], lora_mix="1,2,3").check()
