"""Output column names follow the tools they imitate (issue 14, item 9): the Azure-layout rows say
``inputs.context`` as azure-ai-evaluation does; ``result.databricks()`` uses Databricks' evaluation-set names."""

import json
from pathlib import Path

import assay
from assay.formats import open_dataset

FIX = Path(__file__).parent.parent / "fixtures"


def test_azure_layout_export_writes_inputs_context(tmp_path):
    res = assay.evaluate(str(FIX / "azure_qa.jsonl"), metrics="f1_score")
    doc = json.loads(res.to_json(tmp_path / "r.json").read_text())
    row = doc["rows"][0]
    assert "inputs.context" in row and "inputs.contexts" not in row
    assert row["inputs.context"][0]["content"].startswith("From our product list")
    assert {"inputs.query", "inputs.response", "inputs.ground_truth"} <= set(row)
    # the export reads back as an Azure-shaped input with the same documents
    back = tmp_path / "rows.jsonl"
    back.write_text("".join(json.dumps({k[len("inputs."):]: v for k, v in r.items() if k.startswith("inputs.")}) + "\n"
                            for r in doc["rows"]))
    first = next(iter(open_dataset(back)))
    assert first.contexts[0].content == row["inputs.context"][0]["content"]


def test_input_field_reads_old_rows_too():
    from assay.results import input_field

    assert input_field({"inputs.contexts": [{"content": "c"}]}, "contexts") == [{"content": "c"}]
    assert input_field({"inputs.context": [{"content": "d"}]}, "contexts") == [{"content": "d"}]


def test_databricks_view_uses_databricks_input_names():
    view = assay.evaluate(str(FIX / "databricks_eval_set_export.json"), metrics="document_recall").databricks()
    row = view["rows"][0]
    assert row["request_id"] == "r-1"
    assert row["request"] == "What is the default retention for Delta time travel?"
    assert row["expected_response"] == "30 days."
    assert row["retrieved_context"] == [{"doc_uri": "docs/delta/history.md",
                                         "content": "By default, table history is retained for 30 days."}]
    assert row["expected_retrieved_context"] == [{"doc_uri": "docs/delta/history.md"}, {"doc_uri": "docs/delta/vacuum.md"}]
    assert not {"id", "query", "ground_truth", "contexts", "context", "expected_doc_uris"} & set(row)
    assert row["retrieval/ground_truth/document_recall"] == 0.5
