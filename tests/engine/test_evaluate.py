"""evaluate(): planning, skipping with reasons, targets, results, outputs."""

import asyncio
import json

import pandas as pd
import pytest

import assay
from assay.errors import AssayError
from assay.metrics.base import UnknownMetricError

ROWS = [
    {"id": "1", "query": "capital of France?", "response": "Paris is the capital.", "ground_truth": "Paris"},
    {"id": "2", "query": "2+2?", "response": "It is 4", "ground_truth": "4"},
    {"id": "3", "query": "no reference here", "response": "something"},
]


def test_auto_plans_from_the_fields_present():
    from assay.engine.evaluate import plan

    names = {m.name for m in plan(["auto"], {"query", "response", "ground_truth"})}
    assert {"f1_score", "coherence", "fluency", "similarity", "correctness"} <= names
    assert "groundedness" not in names and "relevance_to_query" not in names  # replaced by correctness
    names = {m.name for m in plan(["auto"], {"query", "response", "contexts"}, family="databricks")}
    assert {"relevance_to_query", "databricks_groundedness", "chunk_relevance"} <= names
    assert "f1_score" not in names and "coherence" not in names


def test_rows_without_ground_truth_are_skipped_with_the_reason():
    res = assay.evaluate(ROWS, metrics="f1_score")
    agg = res.metrics["f1_score"]
    assert (agg["evaluated"], agg["skipped"], agg["errored"]) == (2, 1, 0)
    assert agg["skip_reasons"] == {"missing input: ground_truth": 1}
    row3 = res.rows[2]
    assert row3["outputs.f1_score.f1_score_status"] == "skipped"
    assert row3["outputs.f1_score.f1_score_result"] == "not_applicable"
    assert res.run["rows_read"] == 3 and res.run["rows_evaluated"] == 3


def test_rows_have_the_eight_key_schema():
    res = assay.evaluate(ROWS[:1], metrics=["f1_score"])
    row = res.rows[0]
    assert row["inputs.query"] == "capital of France?"
    keys = {k for k in row if k.startswith("outputs.f1_score.")}
    assert keys == {f"outputs.f1_score.f1_score{s}" for s in
                    ("", "_score", "_passed", "_result", "_reason", "_status", "_threshold", "_properties")}
    # "Paris is the capital." vs "Paris": P = 1/3 ("the" is dropped), R = 1 -> F1 = 0.5
    assert row["outputs.f1_score.f1_score"] == pytest.approx(0.5)
    assert row["outputs.f1_score.f1_score_passed"] is True  # 0.5 >= 0.5
    assert row["outputs.f1_score.f1_score_threshold"] == 0.5


def test_thresholds_override_and_are_checked():
    res = assay.evaluate(ROWS[:2], metrics="f1_score", thresholds={"f1_score": 0.9})
    assert res.rows[0]["outputs.f1_score.f1_score_result"] == "fail"
    assert res.metrics["f1_score"]["threshold"] == 0.9
    with pytest.raises(AssayError, match="not among the metrics"):
        assay.evaluate(ROWS, metrics="f1_score", thresholds={"bleu": 0.2})
    with pytest.raises(AssayError, match="must be a number"):
        assay.evaluate(ROWS, metrics="f1_score", thresholds={"f1_score": "high"})


def test_unknown_metric():
    with pytest.raises(UnknownMetricError, match="unknown metric 'f1'"):
        assay.evaluate(ROWS, metrics="f1")


def test_no_applicable_metric_is_a_clear_error():
    with pytest.raises(AssayError, match="no metric applies"):
        assay.evaluate([{"query": "only a question"}], metrics="auto")


def test_aggregates_mean_pass_rate_and_ci():
    rows = [{"response": "a b", "ground_truth": "a b" if i % 2 else "c d"} for i in range(40)]
    agg = assay.evaluate(rows, metrics="f1_score").metrics["f1_score"]
    assert agg["mean"] == 0.5 and agg["pass_rate"] == 0.5
    assert agg["ci_method"] == "bootstrap"
    assert agg["ci95_low"] < 0.5 < agg["ci95_high"]
    assert (agg["passed"], agg["failed"]) == (20, 20)


def test_sync_target_is_called_by_parameter_name():
    seen = []

    def app(query, topic="none"):
        seen.append((query, topic))
        return {"response": f"answer to {query}", "contexts": ["doc one"], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}

    data = [{"query": "q1", "topic": "t1", "ground_truth": "answer to q1"}, {"query": "q2", "ground_truth": "nope"}]
    res = assay.evaluate(data, target=app, metrics="f1_score,token_count,latency")
    assert sorted(seen) == [("q1", "t1"), ("q2", "none")]
    row = res.rows[0]
    assert row["inputs.response"] == "answer to q1"
    assert row["inputs.context"] == [{"content": "doc one"}]
    assert row["outputs.f1_score.f1_score"] == 1.0
    assert row["outputs.token_count.total_token_count"] == 10
    assert row["outputs.latency.latency_seconds"] >= 0


def test_async_target_and_target_errors_are_kept_not_dropped():
    async def app(query):
        await asyncio.sleep(0)
        if query == "bad":
            raise RuntimeError("service down")
        return "fine"

    data = [{"query": "good", "ground_truth": "fine"}, {"query": "bad", "ground_truth": "fine"}]
    res = assay.evaluate(data, target=app, metrics="f1_score")
    assert len(res.rows) == 2
    bad = res.rows[1]
    assert bad["outputs.f1_score.f1_score_status"] == "error"
    assert "service down" in bad["outputs.f1_score.f1_score_reason"]
    agg = res.metrics["f1_score"]
    assert (agg["evaluated"], agg["errored"], agg["failed"]) == (1, 1, 0)  # errors are not fails
    assert res.run["rows_errored"] == 1 and res.run["target_errors"] == 1


def test_streaming_to_an_output_folder(tmp_path):
    res = assay.evaluate(ROWS, metrics="f1_score", out=tmp_path / "run")
    lines = (tmp_path / "run" / "rows.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["inputs.id"] == "1"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metrics"]["f1_score"]["evaluated"] == 2
    assert [r["inputs.id"] for r in res.rows] == ["1", "2", "3"]


def test_exports(tmp_path):
    res = assay.evaluate(ROWS, metrics="f1_score")
    df = res.to_pandas()
    assert isinstance(df, pd.DataFrame) and len(df) == 3
    assert "outputs.f1_score.f1_score" in df.columns
    back = pd.read_parquet(res.to_parquet(tmp_path / "r.parquet"))
    assert list(back["inputs.id"]) == ["1", "2", "3"]
    assert len(res.to_jsonl(tmp_path / "r.jsonl").read_text().splitlines()) == 3
    doc = json.loads(res.to_json(tmp_path / "r.json").read_text())
    assert doc["metrics"]["f1_score.f1_score"] == pytest.approx(res.metrics["f1_score"]["mean"])
    assert len(doc["rows"]) == 3


def test_databricks_view():
    data = [{"request": "q", "response": "a", "retrieved_context": [{"doc_uri": "u1", "content": "c"}],
             "expected_retrieved_context": [{"doc_uri": "u1"}, {"doc_uri": "u2"}]}]
    view = assay.evaluate(data, metrics="document_recall,token_count").databricks()
    assert view["rows"][0]["retrieval/ground_truth/document_recall"] == 0.5
    assert view["metrics"]["retrieval/ground_truth/document_recall/average"] == 0.5
    assert "agent/total_token_count" in view["rows"][0]


def test_evaluate_inside_a_running_event_loop():
    async def main():
        return assay.evaluate(ROWS, metrics="f1_score")

    assert len(asyncio.run(main()).rows) == 3


def test_conversations_are_scored_per_turn_and_rolled_up():
    conv = {"id": "c1", "messages": [
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris", "context": {"citations": [{"id": "d1", "content": "Paris is the capital of France."}]}},
        {"role": "user", "content": "And of Italy?"},
        {"role": "assistant", "content": "Milan", "context": {"citations": [{"id": "d2", "content": "Rome is the capital of Italy."}]}},
    ]}
    rows = [conv, {"query": "q", "response": "x", "ground_truth": "x"}]
    res = assay.evaluate(rows, metrics="exact_match", mapping=None)
    ids = [r["inputs.id"] for r in res.rows]
    assert ids[:2] == ["c1#0", "c1#1"]
    # turns have no ground truth: skipped with the reason, not failed
    agg = res.metrics["exact_match"]
    assert agg["skipped"] == 2 and agg["evaluated"] == 1 and agg["failed"] == 0
    res = assay.evaluate([conv], metrics="token_count")
    agg = res.metrics["total_output_token_count"]
    assert agg["conversations"] == 1 and agg["evaluated"] == 2
    # one conversation: its figure is its worst turn, and fewer tokens are better, so the most
    turns = [r["outputs.token_count.total_output_token_count"] for r in res.rows]
    assert agg["conversation_mean"] == max(turns) and max(turns) > agg["mean"]


def test_worker_processes_give_the_same_rows_in_the_same_order(tmp_path):
    from assay.metrics.base import REGISTRY, metric

    @metric(name="resp_len_for_test", threshold=10)
    def resp_len(response: str) -> float:  # registered after import: workers inherit it (fork)
        return float(len(response))

    rows = [{"id": str(i), "response": f"answer {i} " * (i % 7), "ground_truth": f"answer {i}"}
            for i in range(1500)]
    try:
        inline = assay.evaluate(rows, metrics="f1_score,bleu,resp_len_for_test", workers=1)
        pooled = assay.evaluate(rows, metrics="f1_score,bleu,resp_len_for_test", workers=2,
                                out=tmp_path / "pooled")
    finally:
        REGISTRY.pop("resp_len_for_test")
    assert [r["inputs.id"] for r in pooled.rows] == [str(i) for i in range(1500)]
    assert pooled.rows == inline.rows
    assert pooled.metrics == inline.metrics


def test_workers_must_be_positive():
    with pytest.raises(AssayError, match="workers"):
        assay.evaluate(ROWS, metrics="f1_score", workers=0)
