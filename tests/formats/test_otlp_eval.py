"""`assay eval traces.otlp.json --metrics auto`: an exported OTLP file (what the Collector's file
exporter writes) evaluated through the real CLI process; the scored rows carry the trace ids."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import assay
from assay.cli.common import count_rows
from tests.formats.test_otlp_genai import _agent_trace, _openinference_trace
from tests.helpers.cli import run_assay
from tests.helpers.otlp import Recorder, json_line

TIMEOUT = 240  # seconds for one `assay eval` process (the embedded scorers load their models)


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    src = str(Path(assay.__file__).resolve().parents[1])  # the assay under test, whatever the working directory
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])])}
    p = run_assay(args, cwd=cwd, env=env)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_assay_eval_scores_an_otlp_json_file_and_the_rows_carry_the_trace_ids(tmp_path):
    rec = Recorder()
    _agent_trace(rec)
    _openinference_trace(rec)
    f = tmp_path / "traces.otlp.json"
    f.write_text(json_line(rec.request()) + "\n")
    trace_ids = list(dict.fromkeys(format(s.context.trace_id, "032x") for s in rec.spans()))
    p = _cli("eval", str(f), "--metrics", "auto", "--store", "off", "--out", "out", "-q", cwd=tmp_path)
    assert p.returncode == 0, p.stderr + p.stdout
    rows = [json.loads(line) for line in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    assert [r["inputs.id"] for r in rows] == trace_ids
    assert [r["inputs.trace_id"] for r in rows] == trace_ids
    assert rows[0]["inputs.query"] == "Where is my order 42, and refund it if it is late?"
    assert [(d["id"], d["doc_uri"]) for d in rows[1]["inputs.context"]] == [
        ("policy-7", "https://shop.example/policy"), ("17", "17")]
    scored = {k.split(".")[1] for r in rows for k, v in r.items() if k.startswith("outputs.") and v is not None}
    assert {"token_count", "latency", "tool_errors", "relevance_to_query"} <= scored
    assert rows[0]["outputs.token_count.total_token_count"] == 160
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["format"] == "otlp" and summary["run"]["rows_read"] == 2


def test_assay_eval_per_model_call_with_format_otlp_calls(tmp_path):
    rec = Recorder()
    _agent_trace(rec)
    f = tmp_path / "agent.otlp.jsonl"
    f.write_text(json_line(rec.request()) + "\n")
    p = _cli("eval", str(f), "--format", "otlp-calls", "-m", "token_count", "--store", "off", "--out", "out", "-q",
             cwd=tmp_path)
    assert p.returncode == 0, p.stderr + p.stdout
    rows = [json.loads(line) for line in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    chats = [s for s in rec.spans() if s.name == "chat gpt-4o"]
    assert [r["inputs.span_id"] for r in rows] == [format(s.context.span_id, "016x") for s in chats]
    assert {r["inputs.trace_id"] for r in rows} == {format(chats[0].context.trace_id, "032x")}
    assert [r["inputs.usage"]["total_tokens"] for r in rows] == [60, 100]
    # the first call only asks for tools: no answer text, so token_count (which needs a response) skips it
    assert [r["outputs.token_count.total_token_count"] for r in rows] == [None, 100]


def test_the_progress_total_is_not_the_lines_of_an_otlp_file(tmp_path):
    """A line of an OTLP JSON lines file is a batch of spans, not a row: no total from counting lines."""
    f = tmp_path / "t.otlp.jsonl"
    f.write_text('{"resourceSpans": []}\n' * 3)
    assert count_rows(str(f)) is None
    plain = tmp_path / "rows.jsonl"
    plain.write_text('{"query": "q"}\n' * 3)
    assert count_rows(str(plain)) == 3
