"""A trace given as its spans alone, ``{"spans": [...]}``, is read as an MLflow trace (issue 14, item 8)."""

from pathlib import Path

from assay.formats import open_dataset, trace_to_record

FIX = Path(__file__).parent.parent / "fixtures"
ANSWER = "MLflow Tracing records the inputs, outputs and metadata of each step of a GenAI application."


def test_spans_only_json_file_is_a_trace():
    ds = open_dataset(FIX / "mlflow_spans_only.json")
    (r,) = list(ds)
    assert r.id == "tr-7a1c2e9d4b6f4e0a9c3d5e7f8a9b0c1d"
    assert r.query == "What is MLflow Tracing?"
    assert r.response == ANSWER
    assert [(d.content, d.doc_uri) for d in r.contexts] == [
        ("MLflow Tracing captures inputs, outputs and metadata for each intermediate step.",
         "https://mlflow.org/docs/latest/tracing")]
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (312, 41, 353)
    assert "spans" not in r.extra


def test_spans_only_jsonl_lines_are_traces():
    rows = list(open_dataset(FIX / "mlflow_spans_only.jsonl"))
    assert [(r.id, r.query) for r in rows] == [("tr-7a1c2e9d4b6f4e0a9c3d5e7f8a9b0c1d", "What is MLflow Tracing?"),
                                               ("tr-second", "What is MLflow Tracing?")]


def test_spans_only_trace_from_a_target_or_trace_column():
    import json

    r = trace_to_record(json.loads((FIX / "mlflow_spans_only.json").read_text()))
    assert r.response == ANSWER and r.contexts[0].doc_uri == "https://mlflow.org/docs/latest/tracing"
    rows = list(open_dataset([{"request": "What is MLflow Tracing?",
                               "trace": (FIX / "mlflow_spans_only.json").read_text()}]))
    assert rows[0].response == ANSWER


def test_a_row_with_a_spans_column_that_is_not_spans_stays_a_row():
    (r,) = list(open_dataset([{"query": "q", "spans": [1, 2]}]))
    assert r.query == "q" and r.extra == {"spans": [1, 2]}
