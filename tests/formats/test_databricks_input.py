"""Databricks Agent Evaluation evaluation sets (seed 002): every example of the seed, plus the other
request/response forms, expected_* columns, guidelines, MLflow 3 inputs/outputs/expectations and trace."""

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from assay.formats import open_dataset
from assay.records import Document, Message

FIX = Path(__file__).resolve().parents[1] / "fixtures"

Q = "What is the difference between reduceByKey and groupByKey in Spark?"
R = ("reduceByKey aggregates data before shuffling, whereas groupByKey shuffles all data, making reduceByKey "
     "more efficient.")
CONTEXTS = [
    Document(content="reduceByKey reduces the amount of data shuffled by merging values before shuffling.",
             doc_uri="doc_uri_2_1"),
    Document(content="groupByKey may lead to inefficient data shuffling due to sending all values across the network.",
             doc_uri="doc_uri_6_extra"),
]


def sha(request):
    raw = request if isinstance(request, str) else json.dumps(request, sort_keys=True, separators=(",", ":"),
                                                              ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


# ----------------------------------------------------------------------------- the seed's examples

def _check_request_schema(recs):
    a, b, c = recs
    assert a.query == Q and a.history is None
    assert b.query == "How can you minimize data shuffling in Spark?" and b.history is None
    assert c.query == "Explain broadcast variables in Spark. How do they enhance performance?"
    assert c.history == [
        Message(role="user", content="What are broadcast variables?"),
        Message(role="assistant", content="Broadcast variables allow the programmer to keep a read-only variable "
                                          "cached on each machine."),
    ]
    assert [r.ground_truth for r in recs] == ["expected response for first question",
                                              "expected response for second question",
                                              "expected response for third question"]
    # no request_id: the id is the sha256 of the raw request
    assert a.id == sha(Q)
    assert b.id == sha({"messages": [{"role": "user", "content": "How can you minimize data shuffling in Spark?"}]})


def test_seed_request_schema_three_forms_as_json_columns():
    ds = open_dataset(FIX / "databricks_request_schema.json")
    _check_request_schema(list(ds))
    assert ds.rows_read == 3


def test_seed_request_schema_three_forms_as_the_seeds_dataframe():
    data = json.loads((FIX / "databricks_request_schema.json").read_text())
    eval_dataset = pd.DataFrame(data)  # exactly what the seed builds
    ds = open_dataset(eval_dataset)
    _check_request_schema(list(ds))
    assert ds.source == "<DataFrame>" and ds.format == "dataframe"


def test_seed_request_only():
    (r,) = list(open_dataset(FIX / "databricks_request.json"))
    assert r.query == Q and r.response is None and r.id == sha(Q)


def test_seed_request_and_expected_response():
    (r,) = list(open_dataset(FIX / "databricks_request_expected_response.json"))
    assert (r.id, r.query, r.ground_truth) == ("request-id", Q, "There's no significant difference.")


def test_seed_request_expected_response_expected_retrieved_context():
    (r,) = list(open_dataset(FIX / "databricks_request_expected_retrieved_context.json"))
    assert r.id == "request-id" and r.query == Q
    assert r.expected_doc_uris == ["doc_uri_1", "doc_uri_2"]
    assert r.ground_truth == "There's no significant difference."


def test_seed_request_and_response():
    (r,) = list(open_dataset(FIX / "databricks_request_response.json"))
    assert (r.query, r.response) == (Q, R)


def test_seed_request_response_retrieved_context():
    (r,) = list(open_dataset(FIX / "databricks_request_response_retrieved_context.json"))
    assert r.id == "request-id" and r.response == R
    assert r.contexts == CONTEXTS


def test_seed_request_response_retrieved_context_expected_response():
    (r,) = list(open_dataset(FIX / "databricks_request_response_retrieved_context_expected_response.json"))
    assert r.contexts == CONTEXTS and r.ground_truth == "There's no significant difference."


def test_seed_level_4_all_columns():
    (r,) = list(open_dataset(FIX / "databricks_level_4.json"))
    assert r.id == "request-id" and r.query == Q and r.response == R
    assert r.contexts == CONTEXTS
    assert r.expected_doc_uris == ["doc_uri_2_1", "doc_uri_2_2"]
    assert r.ground_truth == "There's no significant difference."
    assert r.extra == {}


def test_seed_examples_as_python_lists():
    eval_set = [{"request": Q}]
    (r,) = list(open_dataset(eval_set))
    assert r.query == Q and r.id == sha(Q)


# ----------------------------------------------------------------------------- other forms

def test_response_forms_expected_facts_guidelines_and_mlflow3_columns():
    a, b, c, d = list(open_dataset(FIX / "databricks_forms.jsonl"))
    assert a.response == "Spark is a distributed data processing engine."  # chat completion
    assert a.expected_facts == ["Spark is distributed", "Spark processes data"]
    assert b.query == "Does it support time travel?" and [m.role for m in b.history] == ["user", "assistant"]
    assert b.response == "Yes, with VERSION AS OF."  # {messages}: the last one
    assert b.guidelines == ["Answer in one sentence", "Mention the SQL syntax"]
    assert c.query == "And MLflow?" and c.history[0].content == "What is Unity Catalog?"
    assert c.response == "MLflow manages the ML lifecycle."  # {content}
    assert c.guidelines == {"tone": ["Be polite"], "scope": ["Only talk about Databricks", "No pricing"]}
    # MLflow 3: inputs / outputs / expectations
    assert d.query == "What is a lakehouse?"
    assert d.response == "A lakehouse combines a data lake and a warehouse."
    assert d.ground_truth == "Data lake plus warehouse."
    assert d.expected_facts == ["combines a data lake and a warehouse"]
    assert d.expected_doc_uris == ["docs/lakehouse.md"]
    assert d.id == sha({"question": "What is a lakehouse?"})


def test_request_id_default_is_sha256_of_sorted_compact_json():
    req = {"messages": [{"role": "user", "content": "héllo"}], "a_first": 1}
    (r,) = list(open_dataset([{"request": req}]))
    expected = hashlib.sha256(
        json.dumps(req, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")).hexdigest()
    assert r.id == expected
    (s,) = list(open_dataset([{"request": "plain text"}]))
    assert s.id == hashlib.sha256(b"plain text").hexdigest()
    (t,) = list(open_dataset([{"request": "plain text", "request_id": 12}]))
    assert t.id == "12"


def test_trace_column_fills_what_the_row_lacks():
    a, b, c = list(open_dataset(FIX / "databricks_with_trace.jsonl"))
    # a: trace as an object; response, contexts, usage, tool calls all come from it
    assert a.id == "with-trace-dict" and a.ground_truth == "Let it cool and wipe it."
    assert a.response.startswith("Let the EcoFire Camping Stove cool completely")
    assert [d.doc_uri for d in a.contexts] == ["products/item_6.md", "c-31"]
    assert (a.usage.input_tokens, a.usage.output_tokens, a.usage.total_tokens) == (1410, 212, 1622)
    assert a.tool_calls[0]["name"] == "lookup_product"
    # b: trace as JSON text (what the seed's schema says the column holds)
    assert b.response == R and b.usage.latency_ms == 1873
    assert b.contexts[0].doc_uri == "https://spark.apache.org/docs/latest/rdd-programming-guide.html"
    assert b.id == sha("How does reduceByKey differ from groupByKey?")
    # c: columns given directly win over the trace
    assert c.response == "my own answer" and c.contexts == [Document(doc_uri="mine", content="my doc")]
    assert c.usage is not None  # still taken from the trace, the row has none


def test_trace_only_row_takes_query_and_id_from_the_trace():
    trace = json.loads((FIX / "mlflow_trace_v3.json").read_text())
    (r,) = list(open_dataset([{"trace": trace}]))
    assert r.query == "How do I clean the EcoFire Camping Stove?"
    assert r.id == "tr-e1f08a3c52b94d7f8c0e6a1b2d3c4e5f"


@pytest.mark.parametrize("row,field,needle", [
    ({"request": {"prompt": "x"}}, "request", "got an object with keys prompt"),
    ({"request": "q", "response": {"foo": "bar"}}, "response", "chat completion"),
    ({"request": "q", "retrieved_context": "one string"}, "retrieved_context", "expected a list of documents"),
    ({"request": "q", "expected_retrieved_context": [{"content": "no uri"}]}, "expected_retrieved_context[0]",
     "no 'doc_uri'"),
    ({"request": "q", "guidelines": "be nice"}, "guidelines", "expected a list of strings"),
    ({"request": "q", "guidelines": {"tone": "be nice"}}, "guidelines.tone", "expected a list of strings"),
    ({"request": "q", "expected_facts": ["ok", 3]}, "expected_facts[1]", "expected text, got a number"),
    ({"request": "q", "trace": "{not json"}, "trace", "not valid JSON"),
    ({"request": {"messages": [{"content": "no role"}]}}, "request.messages[0]", "no 'role'"),
])
def test_databricks_type_errors_name_the_users_field(row, field, needle):
    from assay.errors import InputError

    with pytest.raises(InputError) as ei:
        list(open_dataset([row]))
    assert ei.value.field == field and needle in str(ei.value)
    assert str(ei.value).startswith("<list>, line 1, field ")
