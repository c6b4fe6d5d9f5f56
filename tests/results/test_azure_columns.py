"""assay's Azure-layout export names its columns as azure-ai-evaluation's ``evaluate()`` does.

``tests/fixtures/azure_columns.json`` holds azure-ai-evaluation's own column names per evaluator,
written by ``benchmarks/roundtrip_azure_columns.py`` from a real ``evaluate()`` run (its version
is in the file). Every fixture metric that assay's registry has is run here, judge metrics on the
scripted fake endpoint, and its row columns (``outputs.<metric>.*``) and aggregate keys
(``<metric>.*``) must be the fixture's; metrics assay does not have yet are left out until it does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import assay
from assay.metrics.base import REGISTRY, load_builtin_metrics
from assay.results import EvalResult
from assay.results.azure import azure_metrics, azure_row

FIXTURE = json.loads((Path(__file__).parent.parent / "fixtures" / "azure_columns.json").read_text())
AZURE = FIXTURE["metrics"]

RAG_ROWS = [
    {"query": "How long is the warranty on the trail backpack?",
     "response": "The trail backpack comes with a two-year limited warranty.",
     "context": "Every backpack in the trail line carries a limited warranty of two years from purchase.",
     "ground_truth": "Two years, limited warranty."},
    {"query": "Which stove runs on butane?",
     "response": "The compact stove burns butane canisters; the base camp stove needs propane.",
     "context": "Compact stove: fuel butane, weight 300 g. Base camp stove: fuel propane, two burners.",
     "ground_truth": "The compact stove."},
]

_FORECAST = {"name": "get_forecast", "description": "Forecast for a city on a date.",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}

# the agent rows in assay's canonical fields (the shared Record contract): history with the system
# message, the agent's steps, its tool calls with results, the tool definitions
AGENT_ROWS = [
    {"history": [{"role": "system", "content": "You are a travel helper. Give temperatures in Celsius."}],
     "query": "Will it rain in Lisbon tomorrow?",
     "steps": [{"role": "assistant", "content": "",
                "tool_calls": [{"id": "call_a1", "type": "function",
                                "function": {"name": "get_forecast", "arguments": "{\"city\": \"Lisbon\"}"}}]},
               {"role": "tool", "tool_call_id": "call_a1", "content": "{\"rain_mm\": 4, \"high_c\": 17}"},
               {"role": "assistant", "content": "Yes, about 4 mm of rain; high 17 °C."}],
     "tool_calls": [{"type": "tool_call", "tool_call_id": "call_a1", "name": "get_forecast",
                     "arguments": {"city": "Lisbon"}, "result": {"rain_mm": 4, "high_c": 17}}],
     "tool_definitions": [_FORECAST],
     "response": "Yes, about 4 mm of rain; high 17 °C.",
     "ground_truth": "Light rain, around 4 mm; high 17 °C."},
]


def _answer(req: dict) -> dict:
    """The fake judge: a yes/no rating or an intent list when the prompt asks for one, else a score."""
    text = json.dumps((req.get("body") or {}).get("messages") or [])
    if '\\"intents\\"' in text:
        content = {"intents": ["the request as asked"]}
    elif '\\"rating\\"' in text:
        content = {"rating": "yes", "reason": "the documents hold it"}
    else:  # the top of the scale the prompt names (assay's judges: "an integer from 0 to 1" ...), else 4
        top = re.search(r"(?:an integer|a number) from -?[0-9.]+ to ([0-9.]+)", text)
        content = {"score": float(top.group(1)) if top else 4, "reason": "supported and on point"}
    return {"content": json.dumps(content)}


def _assay_has() -> list[str]:
    load_builtin_metrics()
    return [m for m in AZURE if m in REGISTRY]


def _columns(doc: dict, metric: str) -> tuple[list[str], list[str]]:
    prefix = f"outputs.{metric}."
    rows = sorted({k[len(prefix):] for row in doc["rows"] for k in row if k.startswith(prefix)})
    aggs = sorted(k[len(metric) + 1:] for k in doc["metrics"] if k.startswith(metric + "."))
    return rows, aggs


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    from tests.helpers.fake_openai_server import FakeOpenAI

    server = FakeOpenAI().start()
    server.default = _answer
    out = tmp_path_factory.mktemp("azure-columns")
    have = _assay_has()
    agent_metrics = [m for m in have if set(REGISTRY[m].requires) & {"tool_calls", "tool_definitions", "steps"}]
    try:
        docs = []
        for label, rows, metrics in (("rag", RAG_ROWS, [m for m in have if m not in agent_metrics]),
                                     ("agent", AGENT_ROWS, agent_metrics)):
            if not metrics:
                continue
            res = assay.evaluate(rows, metrics=",".join(metrics), judge=f"{server.base_url}#fake-judge",
                                 store=False)
            docs.append((metrics, json.loads(res.to_json(out / f"{label}.json").read_text())))
    finally:
        server.stop()
    return docs


def test_fixture_is_azure_output():
    assert FIXTURE["azure_ai_evaluation"] and FIXTURE["made_by"] == "benchmarks/roundtrip_azure_columns.py"
    # the evaluators the round trip ran, classic and judged, RAG and agent
    for m in ("f1_score", "bleu", "gleu", "meteor", "rouge1", "rougeL", "groundedness", "relevance", "coherence",
              "fluency", "similarity", "retrieval", "intent_resolution", "task_adherence", "tool_call_accuracy",
              "response_completeness"):
        assert AZURE[m]["rows"] and AZURE[m]["metrics"], m


def test_every_metric_both_have_is_covered(exports):
    covered = {m for metrics, _ in exports for m in metrics}
    assert covered == set(_assay_has())
    # the classic and RAG judge metrics are in assay today
    assert {"f1_score", "bleu", "gleu", "meteor", "rouge1", "rougeL", "groundedness", "relevance", "coherence",
            "fluency", "similarity", "retrieval"} <= covered


def test_azure_layout_export_has_azures_column_names(exports):
    for metrics, doc in exports:
        for m in metrics:
            rows, aggs = _columns(doc, m)
            assert rows == AZURE[m]["rows"], f"{m}: row columns {rows} != azure-ai-evaluation's {AZURE[m]['rows']}"
            assert aggs == AZURE[m]["metrics"], f"{m}: aggregates {aggs} != azure-ai-evaluation's {AZURE[m]['metrics']}"


def test_rouge_values_are_kept_in_azures_properties(exports):
    doc = next(d for metrics, d in exports if "rouge1" in metrics)
    row = doc["rows"][0]
    props = row["outputs.rouge1.rouge_properties"]
    assert row["outputs.rouge1.rouge"] == props["rouge_f1_score"]
    assert 0 < props["rouge_precision"] <= 1 and 0 < props["rouge_recall"] <= 1
    assert {"rouge_precision_result", "rouge_recall_passed", "rouge_f1_score_threshold"} <= set(props)
    # aggregates as Azure computes them: means, the pass rate of booleans, binary_aggregate rounded
    n = len(doc["rows"])
    mean = sum(r["outputs.rouge1.rouge"] for r in doc["rows"]) / n
    assert doc["metrics"]["rouge1.rouge"] == pytest.approx(mean)
    passed = sum(r["outputs.rouge1.rouge_result"] == "pass" for r in doc["rows"])
    assert doc["metrics"]["rouge1.binary_aggregate"] == round(passed / n, 2)


def test_stored_layout_is_unchanged_and_old_rows_export():
    res = assay.evaluate(RAG_ROWS, metrics="rouge1,f1_score", store=False)
    stored = res.to_dict(layout="assay")
    assert "outputs.rouge1.rouge1_precision" in stored["rows"][0]
    assert "rouge1.rouge1_f1_score_pass_rate" in stored["metrics"]
    # a row stored before inputs.context (inputs.contexts) exports under Azure's names
    old = {"inputs.query": "q", "inputs.contexts": [{"content": "c"}], "outputs.f1_score.f1_score": 0.5,
           "outputs.f1_score.f1_score_result": "pass", "outputs.f1_score.f1_score_passed": True}
    row = azure_row(old)
    assert row["inputs.context"] == [{"content": "c"}] and "inputs.contexts" not in row
    assert azure_metrics([row, {**row, "outputs.f1_score.f1_score_passed": None,
                                "outputs.f1_score.f1_score_result": "fail"}]) == {
        "f1_score.f1_score": 0.5, "f1_score.binary_aggregate": 0.5}


def test_export_cli_layout(tmp_path):
    from typer.testing import CliRunner

    from assay.cli.main import app

    db = tmp_path / "s.db"
    res = assay.evaluate(RAG_ROWS, metrics="rouge2", store=str(db), name="cols")
    assert isinstance(res, EvalResult)
    runner = CliRunner()
    r = runner.invoke(app, ["export", "cols", "-o", str(tmp_path / "a.json"), "--store", str(db)])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "a.json").read_text())
    assert _columns(doc, "rouge2") == (AZURE["rouge2"]["rows"], AZURE["rouge2"]["metrics"])
    r = runner.invoke(app, ["export", "cols", "-o", str(tmp_path / "b.jsonl"), "--layout", "azure", "--store", str(db)])
    assert r.exit_code == 0, r.output
    assert "outputs.rouge2.rouge" in json.loads((tmp_path / "b.jsonl").read_text().splitlines()[0])
    r = runner.invoke(app, ["export", "cols", "-o", str(tmp_path / "c.json"), "--layout", "dbx", "--store", str(db)])
    assert r.exit_code != 0 and "unknown layout 'dbx'; use assay or azure" in str(r.exception)


def test_tool_call_accuracy_gets_azures_alias_column():
    row = {"outputs.tool_call_accuracy.tool_call_accuracy": 4.0,
           "outputs.tool_call_accuracy.tool_call_accuracy_score": 4.0,
           "outputs.tool_call_accuracy.tool_call_accuracy_result": "pass"}
    out = azure_row(row)
    assert out["outputs.tool_call_accuracy.gpt_tool_call_accuracy"] == 4.0
    assert set(azure_metrics([out])) == {"tool_call_accuracy.tool_call_accuracy",
                                         "tool_call_accuracy.gpt_tool_call_accuracy",
                                         "tool_call_accuracy.tool_call_accuracy_score",
                                         "tool_call_accuracy.binary_aggregate"}
    assert "gpt_tool_call_accuracy" in AZURE["tool_call_accuracy"]["rows"]


def test_unknown_layout_is_refused():
    res = assay.evaluate(RAG_ROWS[:1], metrics="f1_score", store=False)
    with pytest.raises(ValueError, match="unknown layout 'excel'; use assay or azure"):
        res.to_dict(layout="excel")
