"""Batch mode (``evaluate(batch=...)``, ``assay eval --batch``) against a loopback server that speaks
OpenAI's Batch API and Anthropic's Message Batches API: the same scores as an online run, one batch
however often a killed run is started again, failed and expired requests asked online, the cost at
the batch price."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.batch_servers import BatchServer

ROWS = [{"query": f"Where is item {i}?", "context": f"Item {i} is in box {i}.",
         "response": f"Item {i} is in box {i}. zebra" if i % 3 else f"Item {i} is on the moon."}
        for i in range(9)]
BIN = ("gpt-4o-mini", 0.15, 0.60)          # the shipped list price, USD per 1M tokens


def judge(prompt: str) -> str:
    """Good (5) when the answer carries the marker, else 1: the same text for the same prompt."""
    return json.dumps({"reason": "read the context", "score": 5 if "zebra" in prompt else 1})


class Killed(Exception):
    pass


@pytest.fixture
def server(monkeypatch):
    srv = BatchServer(judge)
    monkeypatch.setenv("ASSAY_STORE", "off")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{srv.url}/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ak-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    monkeypatch.delenv("ASSAY_JUDGE_PRICE", raising=False)
    yield srv
    srv.close()


def run(spec: str, cache: Any, monkeypatch, batch: Any = None) -> Any:
    from assay import evaluate

    monkeypatch.setenv("ASSAY_CACHE", str(cache))
    return evaluate(ROWS, metrics="groundedness", judge=spec, batch=batch)


def scores(result: Any) -> list[dict[str, Any]]:
    """Each row's groundedness outputs (score, verdict, reason, status, the judge's raw answer and
    tokens), less the call's latency and whether it came from the cache."""
    out = []
    for r in result.rows:
        row = {k: v for k, v in r.items() if "groundedness" in k}
        props = row.pop("outputs.groundedness.groundedness_properties")
        row["properties"] = {k: v for k, v in props.items() if k not in ("latency_s", "cached", "repeats")}
        row["repeats"] = [{k: v for k, v in rep.items() if k != "cached"} for rep in props.get("repeats", [])]
        out.append(row)
    return out


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
def test_a_batch_run_gives_the_online_scores_with_no_online_call(server, monkeypatch, tmp_path, spec):
    online = run(spec, tmp_path / "online.sqlite", monkeypatch)
    assert server.online == len(ROWS) and server.batches_created == 0
    server.poll_faults = 2          # a poll that fails now and then is polled again
    seen: list[tuple[str, int, int]] = []
    batch = run(spec, tmp_path / "batch.sqlite", monkeypatch,
                batch={"poll": 0.001, "progress": lambda *a: seen.append(a)})
    assert server.online == len(ROWS), "the batch run made online calls"
    assert server.batches_created == 1
    assert scores(batch) == scores(online)
    # the batch sent the very bodies the online path sent
    def canon(bodies: list[dict[str, Any]]) -> list[str]:
        return sorted(json.dumps({k: v for k, v in b.items() if k != "stream"}, sort_keys=True) for b in bodies)
    assert canon(server.bodies["batch"]) == canon(server.bodies["online"])
    assert {r["outputs.groundedness.groundedness_result"] for r in scores(batch)} == {"pass", "fail"}
    assert batch.metrics == online.metrics
    assert seen[-1] == (seen[-1][0], len(ROWS), len(ROWS)) and len(seen) >= 2
    b = batch.run["batch"]
    assert (b["requests"], b["answered"], b["failed"]) == (len(ROWS), len(ROWS), 0)
    u = batch.run["judge_usage"]
    assert (u["cache_hits"], u["prompt_tokens"], u["cost_usd"]) == (len(ROWS), 0, 0.0)


def test_the_batch_cost_is_half_the_list_price(server, monkeypatch, tmp_path):
    online = run("openai:gpt-4o-mini", tmp_path / "online.sqlite", monkeypatch)
    batch = run("openai:gpt-4o-mini", tmp_path / "batch.sqlite", monkeypatch, batch={"poll": 0.001})
    _, pin, pout = BIN
    n = len(ROWS)
    assert online.run["judge_usage"]["cost_usd"] == pytest.approx(n * (100 * pin + 10 * pout) / 1e6)
    b = batch.run["batch"]
    assert (b["prompt_tokens"], b["completion_tokens"]) == (100 * n, 10 * n)
    assert b["price_per_1m"] == {"input": pin / 2, "output": pout / 2}
    assert b["cost_usd"] == pytest.approx(online.run["judge_usage"]["cost_usd"] / 2)
    assert "batch price" in b["price_source"]


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
def test_a_run_killed_while_polling_resumes_on_the_same_batch(server, monkeypatch, tmp_path, spec):
    online = run(spec, tmp_path / "online.sqlite", monkeypatch)
    before = server.online

    def kill(status: str, done: int, total: int) -> None:
        raise Killed(status)

    with pytest.raises(Killed):
        run(spec, tmp_path / "batch.sqlite", monkeypatch, batch={"poll": 0.001, "progress": kill})
    assert server.batches_created == 1
    states = list((tmp_path / "batches").glob("*.json"))
    assert len(states) == 1 and json.loads(states[0].read_text())["batch_id"] in server.batches
    again = run(spec, tmp_path / "batch.sqlite", monkeypatch, batch={"poll": 0.001})
    assert server.batches_created == 1, "a second batch was created"
    assert server.online == before
    assert scores(again) == scores(online)
    assert not list((tmp_path / "batches").glob("*.json"))     # done: the state file is gone
    # and a third start has nothing left to batch
    run(spec, tmp_path / "batch.sqlite", monkeypatch, batch={"poll": 0.001})
    assert server.batches_created == 1 and server.online == before


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
@pytest.mark.parametrize("fault", ["failed", "expired"])
def test_requests_the_batch_did_not_answer_are_asked_online(server, monkeypatch, tmp_path, spec, fault):
    online = run(spec, tmp_path / "online.sqlite", monkeypatch)
    before = server.online
    if fault == "failed":
        server.fail_when = lambda prompt: "item 4" in prompt.lower() or "item 7" in prompt.lower()
        missing = 2
    else:
        server.expire = True
        missing = len(ROWS) - len(ROWS) // 2
    batch = run(spec, tmp_path / "batch.sqlite", monkeypatch, batch={"poll": 0.001})
    assert server.batches_created == 1          # not sent again as a batch
    assert server.online - before == missing    # asked online, once each
    assert scores(batch) == scores(online)
    assert all(r["outputs.groundedness.groundedness_status"] == "completed" for r in scores(batch))
    b = batch.run["batch"]
    assert (b["answered"], b["failed"]) == (len(ROWS) - missing, missing)
    assert batch.run["judge_usage"]["prompt_tokens"] == 100 * missing     # the online ones at the list price


def test_batch_refuses_a_judge_without_a_batch_api_in_one_line(server, monkeypatch, tmp_path):
    from assay.errors import AssayError

    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    with pytest.raises(AssayError, match="no batch API"):
        run("gemini:gemini-2.5-flash", tmp_path / "c.sqlite", monkeypatch, batch=True)
    monkeypatch.setenv("ASSAY_CACHE", "off")
    from assay import evaluate

    with pytest.raises(AssayError, match="call cache"):
        evaluate(ROWS, metrics="groundedness", judge="openai:gpt-4o-mini", batch=True)


def test_assay_eval_batch_prints_the_batch_and_its_cost(server, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from assay.cli.main import app

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cli.sqlite"))
    res = CliRunner().invoke(app, ["eval", str(data), "--metrics", "groundedness", "--judge", "openai:gpt-4o-mini",
                                   "--batch", "--batch-poll", "0.001", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["batch"]["answered"] == len(ROWS) and summary["run"]["batch"]["batches"] == list(server.batches)
    assert server.batches_created == 1 and server.online == 0
    assert "batch: in_progress, 0 of 9 requests done" in res.output
    assert f"{len(ROWS)} of {len(ROWS)} requests answered" in res.output and "at the batch price" in res.output
    bad = CliRunner().invoke(app, ["eval", str(data), "--metrics", "groundedness", "--judge", "openai:gpt-4o-mini",
                                   "--batch", "--batch-poll", "0"])
    from assay.errors import AssayError

    assert isinstance(bad.exception, AssayError) and "--batch-poll must be a positive" in str(bad.exception)
    assert server.batches_created == 1       # refused before anything was sent


def test_repeats_are_batched_too(server, monkeypatch, tmp_path):
    from assay import evaluate

    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "online.sqlite"))
    online = evaluate(ROWS, metrics="groundedness", judge="openai:gpt-4o-mini", repeats=3)
    n = server.online
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "batch.sqlite"))
    batch = evaluate(ROWS, metrics="groundedness", judge="openai:gpt-4o-mini", repeats=3, batch={"poll": 0.001})
    assert server.online == n and server.batches_created == 1
    assert batch.run["batch"]["requests"] == 3 * len(ROWS)
    assert batch.metrics == online.metrics and batch.metrics["groundedness"]["evaluated"] == len(ROWS)
    assert scores(batch) == scores(online)


def test_a_batch_that_cannot_be_polled_stops_the_run_in_one_line(server, monkeypatch, tmp_path):
    from assay.models.base import ModelCallError

    server.poll_faults = 100
    with pytest.raises(ModelCallError, match=r"answered 503.*start the run again"):
        run("openai:gpt-4o-mini", tmp_path / "batch.sqlite", monkeypatch, batch={"poll": 0.001})
    server.poll_faults = 0
    again = run("openai:gpt-4o-mini", tmp_path / "batch.sqlite", monkeypatch, batch={"poll": 0.001})
    assert server.batches_created == 1 and server.online == 0
    assert again.run["batch"]["answered"] == len(ROWS)


def test_a_batch_that_failed_as_a_whole_is_asked_online_and_says_why(server, monkeypatch, tmp_path, caplog):
    online = run("openai:gpt-4o-mini", tmp_path / "online.sqlite", monkeypatch)
    server.fail_batch = True
    with caplog.at_level("WARNING", logger="assay.models"):
        batch = run("openai:gpt-4o-mini", tmp_path / "batch.sqlite", monkeypatch, batch={"poll": 0.001})
    assert server.batches_created == 1 and server.online == 2 * len(ROWS)
    assert scores(batch) == scores(online)
    assert batch.run["batch"]["failed"] == len(ROWS) and batch.run["batch"]["cost_usd"] == 0.0
    assert "(status failed): The model does not support batches." in caplog.text
