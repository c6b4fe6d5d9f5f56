"""Ingest of `assay monitor serve`: spans per second with every batch committed before its
answer, the acknowledgement latency (p50 / p99 / max), spans lost, and the server's memory.

The server runs as a subprocess (``assay monitor serve --port 0``) over a fresh SQLite store (or
``--store URL``). ``--senders`` client threads each post ``--batches`` gzip'd OTLP protobuf
batches of ``--spans`` spans (traces of ``--per-trace`` spans: a root and its model calls, with
GenAI attributes of the size an instrumented chat app sends), each batch with its own trace ids.
A batch answered 429/503 is sent again after its ``Retry-After``, as the OTLP exporters do. At
the end the store is counted: every acknowledged span must be there once. The server's RSS is
read from ``/proc`` every half second (its peak and its last value: flat means memory does not
grow with the spans taken).

    python benchmarks/bench_monitor_ingest.py                     # 200 batches x 512 spans, 2 senders
    python benchmarks/bench_monitor_ingest.py --batches 2000 --senders 4   # 1,024,000 spans

The side-by-side with Arize Phoenix (its OTLP endpoint and SQLite, same span stream, same run)
is not written yet: the figures here are assay's alone.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = re.compile(rb"at (http://\S+/v1/traces)")


def batch(seq: int, spans: int, per_trace: int) -> bytes:
    """One ExportTraceServiceRequest of ``spans`` spans, gzip'd protobuf; trace ids from ``seq``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def kv(k: str, v: object) -> KeyValue:
        val = AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=str(v))
        return KeyValue(key=k, value=val)

    out = []
    now = time.time_ns()
    for i in range(spans):
        t, k = divmod(i, per_trace)
        trace_id = (seq * 1_000_003 + t + 1).to_bytes(16, "big")     # never all zeros (invalid)
        root = (t * per_trace + 1).to_bytes(8, "big")
        span_id = (t * per_trace + k + 1).to_bytes(8, "big")
        if k == 0:
            attrs = [kv("gen_ai.operation.name", "invoke_agent"), kv("gen_ai.agent.name", "shop")]
            out.append(Span(trace_id=trace_id, span_id=span_id, name="invoke_agent shop", kind=1,
                            start_time_unix_nano=now, end_time_unix_nano=now + 900_000_000, attributes=attrs))
            continue
        messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"Where is order {seq}-{t}?"}]}])
        answer = json.dumps([{"role": "assistant", "parts": [{"type": "text",
                                                              "content": "It left the warehouse today. " * 4}],
                              "finish_reason": "stop"}])
        attrs = [kv("gen_ai.operation.name", "chat"), kv("gen_ai.request.model", "gpt-4o-mini"),
                 kv("gen_ai.provider.name", "openai"), kv("gen_ai.input.messages", messages),
                 kv("gen_ai.output.messages", answer), kv("gen_ai.usage.input_tokens", 24),
                 kv("gen_ai.usage.output_tokens", 32)]
        out.append(Span(trace_id=trace_id, span_id=span_id, parent_span_id=root, name="chat gpt-4o-mini", kind=3,
                        start_time_unix_nano=now + 1000 * k, end_time_unix_nano=now + 800_000_000, attributes=attrs))
    req = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": [kv("service.name", "bench-app")]},
        scope_spans=[ScopeSpans(spans=out)])])
    return gzip.compress(req.SerializeToString(), compresslevel=1)


def post(url: str, body: bytes) -> tuple[int, float | None]:
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            res.read()
            return res.status, None
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code, float(exc.headers.get("Retry-After") or 1)


def sender(url: str, bodies: list[bytes], acks: list[float], retries: list[int]) -> None:
    for body in bodies:
        while True:
            t0 = time.perf_counter()
            status, wait = post(url, body)
            if status == 200:
                acks.append(time.perf_counter() - t0)
                break
            if status not in (429, 503):
                raise SystemExit(f"the receiver answered {status}")
            retries.append(status)
            time.sleep(wait or 1)


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def start(store: str) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "assay.cli", "monitor", "serve", "--port", "0", "--store", store],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    said = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        said += line
        m = ADDRESS.search(said)
        if m:
            return proc, m.group(1).decode()
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit(f"assay monitor serve did not start: {said.decode(errors='replace')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=200, help="batches per sender")
    ap.add_argument("--spans", type=int, default=512, help="spans per batch")
    ap.add_argument("--per-trace", type=int, default=4, help="spans per trace (a root and its model calls)")
    ap.add_argument("--senders", type=int, default=2)
    ap.add_argument("--store", default=None, help="a store URL (default: a fresh SQLite file)")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    store = args.store or str(Path(tmp.name) / "ingest.db")
    bodies = [[batch(s * args.batches + b, args.spans, args.per_trace) for b in range(args.batches)]
              for s in range(args.senders)]
    proc, url = start(store)
    peaks: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peaks.append(rss_kb(proc.pid))
            done.wait(0.5)

    threading.Thread(target=watch, daemon=True).start()
    acks: list[float] = []
    retries: list[int] = []
    threads = [threading.Thread(target=sender, args=(url, b, acks, retries)) for b in bodies]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    done.set()
    proc.terminate()
    proc.wait(timeout=60)
    from assay.store import Store

    st = Store(store)
    try:
        with st.engine.connect() as conn:
            from sqlalchemy import text

            stored = conn.execute(text("select count(*) from spans")).scalar()
    finally:
        st.close()
    sent = args.senders * args.batches * args.spans
    acks.sort()
    print(f"assay monitor serve, SQLite, {args.senders} senders x {args.batches} batches x {args.spans} spans "
          f"(gzip protobuf, {args.per_trace} spans a trace)")
    print(f"  spans acknowledged  {sent:,} in {wall:.1f} s: {sent / wall:,.0f} spans/s (every batch committed)")
    print(f"  acknowledgement     p50 {1000 * statistics.median(acks):.0f} ms, "
          f"p99 {1000 * acks[int(0.99 * (len(acks) - 1))]:.0f} ms, max {1000 * acks[-1]:.0f} ms; "
          f"{len(retries)} answers 429/503 (sent again)")
    print(f"  spans in the store  {stored:,} ({sent - stored:,} lost)")
    if peaks:
        print(f"  server RSS          peak {max(peaks) / 1024:.0f} MB, last {peaks[-1] / 1024:.0f} MB, "
              f"first {peaks[0] / 1024:.0f} MB")
    print("  beside Arize Phoenix: not measured yet")
    tmp.cleanup()


if __name__ == "__main__":
    main()
