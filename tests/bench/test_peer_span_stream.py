"""The span stream of benchmarks/bench_monitor_ingest.py, fed to assay and to Arize Phoenix alike:
span ids never repeat across batches (Phoenix keeps one span per span id, so repeated ids would
read as lost spans), each model call's parent is its trace's root, and the stream is well formed."""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_monitor_ingest.py"


def spans_of(body: bytes) -> list:
    req = ExportTraceServiceRequest()
    req.ParseFromString(gzip.decompress(body))
    return [s for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_monitor_ingest", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_span_ids_are_unique_over_the_stream() -> None:
    bench = load_bench()
    spans = [s for seq in range(3) for s in spans_of(bench.batch(seq, 16, 4))]
    assert len(spans) == 48
    assert len({s.span_id for s in spans}) == 48
    assert len({s.trace_id for s in spans}) == 12
    assert all(len(s.span_id) == 8 and any(s.span_id) for s in spans)


def test_each_model_call_hangs_under_its_traces_root() -> None:
    bench = load_bench()
    spans = spans_of(bench.batch(7, 8, 4))
    roots = {s.trace_id: s.span_id for s in spans if not s.parent_span_id}
    assert len(roots) == 2
    children = [s for s in spans if s.parent_span_id]
    assert len(children) == 6
    assert all(s.parent_span_id == roots[s.trace_id] for s in children)
    assert {s.name for s in children} == {"chat gpt-4o-mini"}
