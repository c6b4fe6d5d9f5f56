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
    python benchmarks/bench_monitor_ingest.py --phoenix           # the same stream into Arize Phoenix too

``--phoenix`` makes ``benchmarks/.venvs/phoenix`` (``benchmarks/peers/venv.py``), starts
``phoenix serve`` on loopback over a fresh ``PHOENIX_WORKING_DIR`` (its SQLite file) and posts the
same batches (the very bytes) with the same senders to its OTLP/HTTP ``/v1/traces``, after
assay's run. Phoenix answers a batch before it is written (a background task queues it; 503 when
the queue is full), so its rate is given twice: acknowledged, and stored (until its SQLite
``spans`` count stops rising). Lost = sent - stored; the RSS is the server's process tree.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import socket
import sqlite3
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
    """One ExportTraceServiceRequest of ``spans`` spans, gzip'd protobuf; trace and span ids from ``seq``
    (Phoenix keeps one span per span id, so ids must not repeat across traces)."""
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
        base = seq * spans + t * per_trace + 1       # span ids unique over the whole stream, as random ones are
        root = base.to_bytes(8, "big")
        span_id = (base + k).to_bytes(8, "big")
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
    """The resident memory of ``pid`` and its descendants, in kB (0 once it is gone)."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += rss_kb(int(child))
    except OSError:
        pass
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def start_phoenix(workdir: Path) -> tuple[subprocess.Popen, str]:
    """``phoenix serve`` from its own venv on free loopback ports over ``workdir``: the process and its OTLP URL."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from peers.venv import make, venv_bin

    make("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_TELEMETRY_ENABLED": "false"}
    env.pop("PHOENIX_SQL_DATABASE_URL", None)
    log = (workdir / "serve.log").open("wb")
    proc = subprocess.Popen([str(venv_bin("phoenix", "phoenix")), "serve"], stdout=log, stderr=subprocess.STDOUT,
                            env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as res:
                if res.status == 200:
                    return proc, f"http://127.0.0.1:{port}/v1/traces"
        except OSError:
            time.sleep(1)
    proc.kill()
    said = (workdir / "serve.log").read_text(errors="replace").strip().splitlines()[-5:]
    raise SystemExit("phoenix serve did not start: " + "\n".join(said))


class Watch:
    """Reads a server's RSS (its process tree) every half second until stopped."""

    def __init__(self, pid: int) -> None:
        self.pid, self.samples, self.done = pid, [], threading.Event()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append(rss_kb(self.pid))
            self.done.wait(0.5)

    def stop(self) -> list[int]:
        self.done.set()
        return [kb for kb in self.samples if kb]


def feed(url: str, bodies: list[list[bytes]]) -> tuple[float, list[float], list[int]]:
    """Post every sender's batches (one thread each): the wall time, the ack latencies, the retries."""
    acks: list[float] = []
    retries: list[int] = []
    threads = [threading.Thread(target=sender, args=(url, b, acks, retries)) for b in bodies]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, sorted(acks), retries


def count_assay(store: str) -> int:
    from sqlalchemy import text

    from assay.store import Store

    st = Store(store)
    try:
        with st.engine.connect() as conn:
            return int(conn.execute(text("select count(*) from spans")).scalar() or 0)
    finally:
        st.close()


def count_sqlite(db: Path) -> int:
    """``select count(*) from spans`` in a SQLite file another process is writing (read-only)."""
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("select count(*) from spans").fetchone()[0])
    except sqlite3.OperationalError:        # the table is not there yet
        return 0
    finally:
        conn.close()


def wait_stored(db: Path, sent: int, t0: float, settle: float = 30.0, limit: float = 900.0) -> tuple[int, float]:
    """Poll Phoenix's span count until it reaches ``sent`` or stops rising for ``settle`` s: the count
    and the seconds from ``t0`` to the last rise."""
    last, last_rise = -1, time.perf_counter()
    while time.perf_counter() - t0 < limit:
        n = count_sqlite(db)
        if n != last:
            last, last_rise = n, time.perf_counter()
        if n >= sent or time.perf_counter() - last_rise > settle:
            break
        time.sleep(0.5)
    return last, last_rise - t0


def rss_line(samples: list[int]) -> str:
    if not samples:
        return "not read"
    return f"peak {max(samples) / 1024:.0f} MB, last {samples[-1] / 1024:.0f} MB, first {samples[0] / 1024:.0f} MB"


def ack_line(acks: list[float], retries: list[int]) -> str:
    return (f"p50 {1000 * statistics.median(acks):.0f} ms, p99 {1000 * acks[int(0.99 * (len(acks) - 1))]:.0f} ms, "
            f"max {1000 * acks[-1]:.0f} ms; {len(retries)} answers 429/503 (sent again)")


def run_assay(bodies: list[list[bytes]], store: str) -> dict:
    proc, url = start(store)
    watch = Watch(proc.pid)
    wall, acks, retries = feed(url, bodies)
    rss = watch.stop()
    proc.terminate()
    proc.wait(timeout=60)
    stored = count_assay(store)
    return {"wall": wall, "stored_wall": wall, "acks": acks, "retries": retries, "rss": rss, "stored": stored}


def run_phoenix(bodies: list[list[bytes]], workdir: Path, sent: int) -> dict:
    proc, url = start_phoenix(workdir)
    try:
        watch = Watch(proc.pid)
        t0 = time.perf_counter()
        wall, acks, retries = feed(url, bodies)
        stored, stored_wall = wait_stored(workdir / "phoenix.db", sent, t0)
        rss = watch.stop()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    stored = max(stored, count_sqlite(workdir / "phoenix.db"))    # what it flushed on its way out counts
    if stored < sent:
        said = (workdir / "serve.log").read_text(errors="replace").strip().splitlines()[-5:]
        print("phoenix serve's last lines:\n  " + "\n  ".join(said))
    return {"wall": wall, "stored_wall": max(stored_wall, wall), "acks": acks, "retries": retries, "rss": rss,
            "stored": stored}


def show(name: str, r: dict, sent: int) -> None:
    print(name)
    print(f"  spans acknowledged  {sent:,} in {r['wall']:.1f} s: {sent / r['wall']:,.0f} spans/s")
    print(f"  spans stored        {r['stored']:,} ({sent - r['stored']:,} lost), all stored after "
          f"{r['stored_wall']:.1f} s: {r['stored'] / r['stored_wall']:,.0f} spans/s stored")
    print(f"  acknowledgement     {ack_line(r['acks'], r['retries'])}")
    print(f"  server RSS          {rss_line(r['rss'])}")


def side_by_side(a: dict, p: dict, sent: int) -> None:
    def p99(r: dict) -> float:
        return 1000 * r["acks"][int(0.99 * (len(r["acks"]) - 1))]

    rows = [("spans/s acknowledged", f"{sent / a['wall']:,.0f}", f"{sent / p['wall']:,.0f}",
             f"{p['wall'] / a['wall']:.2f}x"),
            ("spans/s stored", f"{a['stored'] / a['stored_wall']:,.0f}", f"{p['stored'] / p['stored_wall']:,.0f}",
             f"{(a['stored'] / a['stored_wall']) / max(p['stored'] / p['stored_wall'], 1e-9):.2f}x"),
            ("ack p99 (ms)", f"{p99(a):.0f}", f"{p99(p):.0f}", f"{p99(p) / max(p99(a), 1e-9):.2f}x lower"),
            ("spans lost", f"{sent - a['stored']:,}", f"{sent - p['stored']:,}", ""),
            ("peak RSS (MB)", f"{max(a['rss'] or [0]) / 1024:.0f}", f"{max(p['rss'] or [0]) / 1024:.0f}", "")]
    print(f"\nside by side ({sent:,} spans, same batches, same senders)  goal: assay >= 2x Phoenix, 0 lost")
    print(f"  {'':22}{'assay':>12}{'Phoenix':>12}  assay/Phoenix")
    for label, x, y, ratio in rows:
        print(f"  {label:22}{x:>12}{y:>12}  {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=200, help="batches per sender")
    ap.add_argument("--spans", type=int, default=512, help="spans per batch")
    ap.add_argument("--per-trace", type=int, default=4, help="spans per trace (a root and its model calls)")
    ap.add_argument("--senders", type=int, default=2)
    ap.add_argument("--store", default=None, help="a store URL (default: a fresh SQLite file)")
    ap.add_argument("--phoenix", action="store_true", help="feed the same stream to Arize Phoenix after assay")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    store = args.store or str(Path(tmp.name) / "ingest.db")
    bodies = [[batch(s * args.batches + b, args.spans, args.per_trace) for b in range(args.batches)]
              for s in range(args.senders)]
    sent = args.senders * args.batches * args.spans
    stream = (f"{args.senders} senders x {args.batches} batches x {args.spans} spans "
              f"(gzip protobuf, {args.per_trace} spans a trace)")
    a = run_assay(bodies, store)
    show(f"assay monitor serve, SQLite, {stream} (every batch committed before its answer)", a, sent)
    if not args.phoenix:
        print("  beside Arize Phoenix: run with --phoenix")
    else:
        workdir = Path(tmp.name) / "phoenix"
        workdir.mkdir()
        p = run_phoenix(bodies, workdir, sent)
        show(f"Arize Phoenix (phoenix serve, SQLite), the same {stream}", p, sent)
        side_by_side(a, p, sent)
    tmp.cleanup()


if __name__ == "__main__":
    main()
