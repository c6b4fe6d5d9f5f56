"""MLflow traces, schema v2 and v3, as files and as values."""

import json
from pathlib import Path

import pytest

from assay.errors import InputError
from assay.formats import open_dataset, trace_to_record

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_v2_trace_file():
    ds = open_dataset(FIX / "mlflow_trace_v2.json")
    (r,) = list(ds)
    assert ds.format == "json" and ds.rows_read == 1
    assert r.id == "tr-7f3c9e1a5b2d4c8e9f0a1b2c3d4e5f60"
    # root span inputs are an OpenAI chat request: last user message + history
    assert r.query == "How does reduceByKey differ from groupByKey?"
    assert [m.role for m in r.history] == ["user", "assistant"]
    # root span outputs are a chat completion
    assert r.response.startswith("reduceByKey aggregates data before shuffling")
    # the top-level RETRIEVER span's documents; the nested retriever inside it is ignored
    assert [d.doc_uri for d in r.contexts] == [
        "https://spark.apache.org/docs/latest/rdd-programming-guide.html",
        "https://spark.apache.org/docs/latest/api/python/reference/api/pyspark.RDD.groupByKey.html"]
    assert r.contexts[0].content == ("reduceByKey reduces the amount of data shuffled by merging values "
                                     "before shuffling.")
    # tokens: leaf LLM/CHAT_MODEL spans only (512+100 in, 64+20 out); the wrapping ChatOpenAI is not double counted
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (612, 84, 696)
    assert r.usage.latency_ms == 1873  # info.execution_time_ms
    assert r.tool_calls == [{"type": "tool_call", "name": "get_cluster_config",
                             "arguments": {"cluster_id": "0412-093155-abc123"},
                             "result": {"num_workers": 8, "spark_version": "14.3.x-scala2.12"}}]
    assert r.extra == {"trace_state": "OK"}


def test_v3_trace_file():
    (r,) = list(open_dataset(FIX / "mlflow_trace_v3.json"))
    assert r.id == "tr-e1f08a3c52b94d7f8c0e6a1b2d3c4e5f"
    assert r.query == "How do I clean the EcoFire Camping Stove?"  # {"question": ...} inputs
    assert r.response.startswith("Let the EcoFire Camping Stove cool completely")  # plain string outputs
    # two top-level retrievers: the last in time wins; doc_uri from metadata.source, else the id
    assert [d.doc_uri for d in r.contexts] == ["products/item_6.md", "c-31"]
    assert r.contexts[0].title == "Information about product item_number: 6"
    assert r.contexts[1].content == "Store the stove in a dry place when not in use."
    # usage from the CHAT_MODEL span's OpenAI usage; latency from execution_duration_ms
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (1410, 212, 1622)
    assert r.usage.latency_ms == 2416
    assert r.tool_calls[0]["tool_call_id"] == "call_Qm2x" and r.tool_calls[0]["arguments"] == {"item_number": 6}
    # expectations logged on the trace
    assert r.ground_truth == "Let it cool, wipe away ash with a brush or cloth, store it dry."
    assert r.expected_facts == ["cool the stove completely", "wipe away ash with a brush or cloth"]


def test_jsonl_of_traces_and_json_list_of_traces(tmp_path):
    recs = list(open_dataset(FIX / "mlflow_traces.jsonl"))
    assert [r.id for r in recs] == ["tr-7f3c9e1a5b2d4c8e9f0a1b2c3d4e5f60", "tr-e1f08a3c52b94d7f8c0e6a1b2d3c4e5f"]
    traces = [json.loads(line) for line in (FIX / "mlflow_traces.jsonl").read_text().splitlines()]
    p = tmp_path / "traces.json"
    p.write_text(json.dumps(traces))
    assert [r.id for r in open_dataset(p)] == [r.id for r in recs]
    assert [r.id for r in open_dataset(traces[1])] == ["tr-e1f08a3c52b94d7f8c0e6a1b2d3c4e5f"]  # a dict


def _trace(spans, **info):
    return {"info": {"trace_id": "tr-1", **info}, "data": {"spans": spans}}


def _span(sid, parent, stype, inputs=None, outputs=None, start=0, end=10):
    a = {"mlflow.spanType": json.dumps(stype)}
    if inputs is not None:
        a["mlflow.spanInputs"] = json.dumps(inputs)
    if outputs is not None:
        a["mlflow.spanOutputs"] = json.dumps(outputs)
    return {"span_id": sid, "parent_span_id": parent, "name": sid, "start_time_unix_nano": start,
            "end_time_unix_nano": end, "attributes": a}


def test_usage_falls_back_to_trace_metadata_and_latency_to_root_span():
    t = _trace([_span("root", "", "CHAIN", {"query": "q"}, {"content": "a"}, 1_000_000, 251_000_000)],
               trace_metadata={"mlflow.trace.tokenUsage": json.dumps(
                   {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10})})
    r = trace_to_record(t)
    assert (r.query, r.response) == ("q", "a")
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (7, 3, 10)
    assert r.usage.latency_ms == 250.0
    assert r.contexts is None and r.tool_calls is None


def test_proto_duration_text_and_string_trace():
    t = _trace([_span("root", None, "CHAIN", "hello", "world")], execution_duration="1.5s")
    r = trace_to_record(json.dumps(t))
    assert (r.query, r.response, r.usage.latency_ms) == ("hello", "world", 1500.0)


def test_retriever_documents_content_keys_and_uri_fallbacks():
    docs = [{"page_content": "a", "metadata": {"doc_uri": "u-a"}},
            {"content": "b", "metadata": {"source": "s-b"}},
            {"text": "c", "id": "id-c"},
            "d"]
    t = _trace([_span("root", None, "CHAIN", "q", "r"), _span("ret", "root", "RETRIEVER", "q", docs)])
    r = trace_to_record(t)
    assert [(d.content, d.doc_uri) for d in r.contexts] == [("a", "u-a"), ("b", "s-b"), ("c", "id-c"), ("d", None)]


def test_span_attributes_not_json_encoded_are_read_as_is():
    span = {"span_id": "s", "name": "root", "attributes": {"mlflow.spanType": "CHAIN", "mlflow.spanInputs": "plain q"}}
    r = trace_to_record({"info": {}, "data": {"spans": [span]}})
    assert r.query == "plain q"


def test_bad_trace_raises_input_error_naming_the_field():
    with pytest.raises(InputError) as ei:
        trace_to_record({"info": {}, "data": {"spans": "nope"}})
    assert ei.value.field == "trace.data.spans" and "expected a list of spans" in str(ei.value)
    with pytest.raises(InputError):
        trace_to_record("{broken")
