"""Small defects of what quality runs report (issue 28 item 4): item export columns named once
(``outputs.quality.<score>``, not ``outputs.<score>.<score>``), the calls line counting the HTTP
requests really sent, and refs of one length in bench output."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.store import Store
from tests.helpers.cli import run_assay

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"


def _assay(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(cwd)]), "COLUMNS": "250",
           "ASSAY_CACHE": "off"}
    return run_assay(args, cwd=cwd, env=env)


def test_item_export_names_each_score_once(tmp_path: Path) -> None:
    name = f"qexp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("def answer(prompt):\n    return '#### 12'\n")
    db = str(tmp_path / "s.db")
    tasks = f"{TASKS / 'arithmetic.yaml'},{TASKS / 'science_mc.yaml'}"
    run = _assay(tmp_path, "bench", "quality", "--model", f"python:{name}:answer", "--tasks", tasks, "--limit", "5",
                 "--store", db, "--json", "-q")
    assert run.returncode == 0, run.stderr
    run_id = json.loads(run.stdout)["run_id"]
    for fmt in ("jsonl", "json"):
        got = _assay(tmp_path, "export", run_id, "-o", str(tmp_path / f"items.{fmt}"), "--store", db)
        assert got.returncode == 0, got.stderr
    rows = [json.loads(x) for x in (tmp_path / "items.jsonl").read_text().splitlines()]
    cols = {c for r in rows for c in r if c.startswith("outputs.")}
    assert "outputs.quality.exact_match,strict-match" in cols and "outputs.quality.acc" in cols
    for c in cols:
        metric, _, output = c[len("outputs."):].partition(".")
        assert not output.startswith(metric + ".") and output != metric, c      # no outputs.X.X
    assert sum(r["outputs.quality.exact_match,strict-match"] or 0 for r in rows if r["task"] == "arithmetic") == 1
    doc = json.loads((tmp_path / "items.json").read_text())
    json_cols = {k for r in doc["rows"] for k in r if k.startswith("outputs.")}
    assert "outputs.quality.acc" in json_cols
    assert not any(k.split(".")[1] == k.split(".")[2].split("_")[0] for k in json_cols if k.count(".") >= 2)
    shown = _assay(tmp_path, "show", run_id, "--store", db)
    assert shown.returncode == 0 and "quality index" in shown.stdout


def test_calls_line_counts_the_http_requests_sent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake) -> None:
    """Multiple choice by log-likelihood asks one call per item of the model, which sends one HTTP
    request per choice: 2 items of 4 choices are 8 requests, and the summary says 8, not 2."""
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache.sqlite"))
    fake.models = ["m"]

    def echo(req: dict) -> dict:
        text = req["body"]["prompt"]
        toks = [text[:len(text) - 3], text[len(text) - 3:]]
        return {"json": {"choices": [{"text": text + "x", "index": 0, "finish_reason": "length", "logprobs": {
            "tokens": toks + ["x"], "token_logprobs": [-2.0, -1.0, -0.5],
            "top_logprobs": [{toks[0]: -2.0}, {toks[1]: -1.0}, {"x": -0.5}], "text_offset": [0, len(toks[0]), len(text)]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}}

    fake.default = echo
    cfg = QualityConfig(model=f"{fake.base_url}#m", tasks=str(TASKS / "science_mc.yaml"), limit=2, api="completions")
    r = asyncio.run(run_quality(cfg, store=None))
    posts = [q for q in fake.requests if q["method"] == "POST"]
    assert r.summary["tasks"]["science_mc"]["modes"] == ["loglik"]
    assert len(posts) == 8
    assert r.summary["calls"]["calls"] == 2 and r.summary["calls"]["requests"] == 8
    again = asyncio.run(run_quality(cfg, store=None))         # all from the call cache: no request
    assert again.summary["calls"]["cache_hits"] == 2 and again.summary["calls"]["requests"] == 0
    assert len([q for q in fake.requests if q["method"] == "POST"]) == 8


def test_refs_in_bench_output_have_one_length(tmp_path: Path, endpoint) -> None:
    from assay.bench.kinds import store_benchmark
    from assay.bench.perf import KIND as PERF
    from assay.bench.perf.run import PerfConfig, run_perf

    ep = endpoint("--ttft", "0.001", "--itl", "0.001")
    perf = asyncio.run(run_perf(PerfConfig(endpoint=f"http://127.0.0.1:{ep.port}/v1", model="scripted",
                                           input_tokens=8, output_tokens=2, warmup=0, requests=2)))
    ep.stop()
    db = str(tmp_path / "s.db")
    st = Store(db)
    perf_ref = store_benchmark(st, PERF, perf.summary)
    st.close()
    name = f"qref_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("def answer(prompt):\n    return '#### 12'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        q = asyncio.run(run_quality(QualityConfig(model=f"python:{name}:answer", tasks=str(TASKS / "arithmetic.yaml"),
                                                  limit=2), store=db))
    finally:
        sys.path.remove(str(tmp_path))
    assert len(perf_ref) == len(q.ref) == len(q.run_id) == 12
    costs = _assay(tmp_path, "bench", "cost", "--runs", "--json", "--store", db)
    assert costs.returncode == 0, costs.stderr
    assert {len(c["id"]) for c in json.loads(costs.stdout)["runs"]} == {12}
