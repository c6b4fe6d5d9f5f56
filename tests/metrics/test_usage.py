"""Token counts and latency."""

from assay.metrics.base import get_metric
from assay.metrics.usage import count_tokens
from assay.records import Record, Usage


def test_token_count_from_the_apps_usage():
    m = get_metric("token_count")
    s = m.score_sync(Record(response="hi", usage=Usage(input_tokens=10, output_tokens=5)))
    assert s["total_token_count"].value == 15
    assert s["total_input_token_count"].value == 10
    assert s["total_output_token_count"].value == 5
    assert s["total_token_count"].properties["source"] == "application usage"


def test_token_count_with_the_local_tokenizer():
    m = get_metric("token_count")
    s = m.score_sync(Record(query="Hello world", response="Hello there, world!"))
    assert s["total_input_token_count"].value == count_tokens("Hello world") == 2
    assert s["total_output_token_count"].value == count_tokens("Hello there, world!") == 5
    assert s["total_token_count"].value == 7
    assert s["total_token_count"].properties["tokenizer"] == "o200k_base"


def test_latency():
    m = get_metric("latency")
    assert m.score_sync(Record(usage=Usage(latency_ms=1500)))["latency_seconds"].value == 1.5
    assert m.score_sync(Record(usage=Usage(input_tokens=3)))["latency_seconds"].status == "skipped"
    assert m.score_sync(Record(response="x"))["latency_seconds"].status == "skipped"
