"""Online scoring lag of `assay monitor serve --config`: evaluation lag at a steady arrival rate
under the judge's rate limit, and the catch-up after a judge outage.

Three parts, all on loopback:

- **a scripted judge**: an asyncio HTTP server in this script that answers OpenAI chat completions
  (``POST /v1/chat/completions``) with ``{"score": 4, ...}`` after a fixed ``--latency`` (default
  200 ms), and enforces a rate limit of ``--rpm`` requests per minute (a token bucket holding one
  second of requests; over it, **429** with ``Retry-After`` / ``retry-after-ms``, as OpenAI and
  Azure answer). ``monitor.yaml`` has no requests-per-minute setting for the judge (nor has
  ``assay eval``): the judge's limiter keeps its backend's concurrency and follows the 429s and
  their ``Retry-After``, so the limit the scoring runs into is the endpoint's.
- **the monitor**: ``assay monitor serve --port 0 --config monitor.yaml`` as a subprocess over a
  fresh SQLite store (the real receiver and scoring loop), scoring ``coherence`` (a judged metric)
  on every trace (``sample: 1``) with the scripted judge.
- **an app**: traces of two spans (an ``invoke_agent`` root and a ``chat`` call with the question
  and the answer as GenAI messages) posted as OTLP/JSON at a steady ``--arrival`` traces per second
  (below the judge's limit); the root span completes each trace when it is stored.

First ``--steady`` seconds of steady traffic: the **evaluation lag** (from the trace's completion
to its score being stored, as the scoring loop records it per trace) p50 / p95 beside the judge's
latency (goal: p95 <= 2x the latency). Then a **judge outage** of ``--outage`` seconds (the
endpoint answers 503; the issue's figure is a 10-minute outage: the default here is scaled down
to 30 s so the run stays short, ``--outage 600`` runs the issue's), with the traffic going on;
then the **catch-up**: the scores stored per second from the judge's return until every trace
that arrived is scored, beside the endpoint's full rate (``--rpm`` / 60), and what the judge
answered per second meanwhile. At the end every trace sent must be scored once (nothing lost).

    python benchmarks/bench_monitor_lag.py                                  # ~2.5 minutes
    python benchmarks/bench_monitor_lag.py --steady 120 --outage 600 --arrival 5 --rpm 900
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import select
import signal
import sqlite3
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


class Judge:
    """The scripted judge: latency, a token-bucket rate limit, an outage switch, a log of answers."""

    def __init__(self, latency: float, rpm: float):
        self.latency, self.rate = latency, rpm / 60.0
        self.tokens, self.stamp = self.rate, time.monotonic()
        self.down = False
        self.answers: list[tuple[float, int]] = []      # (time.time(), status)
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Judge:
        ready = threading.Event()
        self._ready = ready
        self.thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._conn, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        server.close()

    def _take(self) -> float | None:
        """A request's token, or the seconds until one is there."""
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        return (1 - self.tokens) / self.rate

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                status, extra, payload = await self._answer(lines[0], body)
                data = json.dumps(payload).encode()
                hdrs = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
                writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                             f"{hdrs}\r\n".encode() + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(self, request_line: str, body: bytes) -> tuple[int, dict, dict]:
        if "/chat/completions" not in request_line:
            return 404, {}, {"error": {"message": "not found"}}
        if self.down:
            self.answers.append((time.time(), 503))
            return 503, {}, {"error": {"message": "the judge is down", "type": "server_error"}}
        wait = self._take()
        if wait is not None:
            self.answers.append((time.time(), 429))
            return 429, {"Retry-After": str(math.ceil(wait)), "retry-after-ms": str(int(wait * 1000) + 1)}, \
                {"error": {"message": "rate limit reached", "type": "rate_limit_exceeded"}}
        await asyncio.sleep(self.latency)
        self.answers.append((time.time(), 200))
        model = json.loads(body or b"{}").get("model", "bench-judge")
        content = json.dumps({"score": 4, "reason": "The answer is clear and on topic."})
        return 200, {}, {"id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
                         "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                                      "message": {"role": "assistant", "content": content}}],
                         "usage": {"prompt_tokens": 180, "completion_tokens": 16, "total_tokens": 196}}


def otlp_trace(rng: random.Random, i: int) -> tuple[str, bytes]:
    """One trace (a root and a chat call) as an OTLP/JSON request; its trace id."""
    tid = rng.getrandbits(128).to_bytes(16, "big").hex()
    root, call = (rng.getrandbits(64).to_bytes(8, "big").hex() for _ in range(2))
    now = time.time_ns()

    def kv(k: str, v: object) -> dict:
        return {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}}

    def msgs(role: str, text: str) -> str:
        return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])

    spans = [
        {"traceId": tid, "spanId": call, "parentSpanId": root, "name": "chat gpt-4o-mini", "kind": 3,
         "startTimeUnixNano": str(now - 700_000_000), "endTimeUnixNano": str(now - 1_000_000),
         "attributes": [kv("gen_ai.operation.name", "chat"), kv("gen_ai.request.model", "gpt-4o-mini"),
                        kv("gen_ai.input.messages", msgs("user", f"Where is my order {i}?")),
                        kv("gen_ai.output.messages", msgs("assistant", f"Order {i} left the Lyon warehouse today "
                                                                       "and arrives tomorrow.")),
                        kv("gen_ai.usage.input_tokens", 20), kv("gen_ai.usage.output_tokens", 14)]},
        {"traceId": tid, "spanId": root, "name": "invoke_agent shop", "kind": 1,
         "startTimeUnixNano": str(now - 800_000_000), "endTimeUnixNano": str(now),
         "attributes": [kv("gen_ai.operation.name", "invoke_agent")]}]
    req = {"resourceSpans": [{"resource": {"attributes": [kv("service.name", "shop-assistant")]},
                              "scopeSpans": [{"scope": {"name": "shop.app"}, "spans": spans}]}]}
    return tid, json.dumps(req).encode()


def post(url: str, body: bytes) -> None:
    while True:
        req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                res.read()
                return
        except urllib.error.HTTPError as exc:
            if exc.code not in (429, 503):
                raise SystemExit(f"the receiver answered {exc.code}") from exc
            time.sleep(float(exc.headers.get("Retry-After") or 1))


def start_monitor(store: str, config: Path, log: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ASSAY_CACHE": "off", "ASSAY_STORE": "off"}
    out = open(log, "wb")      # noqa: SIM115 - the server's output, read at the end
    proc = subprocess.Popen([sys.executable, "-m", "assay.cli", "monitor", "serve", "--port", "0", "--store", store,
                             "--config", str(config)], stdout=subprocess.PIPE, stderr=out, env=env)
    said, deadline = b"", time.monotonic() + 60
    while not ADDRESS.search(said) and time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            said += os.read(proc.stdout.fileno(), 4096)
    found = ADDRESS.search(said)
    if found is None:
        proc.kill()
        raise SystemExit(f"assay monitor serve did not start: {said.decode(errors='replace')} {log.read_text()}")
    return proc, found.group(1).decode()


def rows(db: str) -> list[dict]:
    con = sqlite3.connect(db, timeout=30)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(
            "select trace_id, status, completed_at, scored_at, lag_s, attempts from monitor_scores "
            "where metric = 'coherence'")]
    finally:
        con.close()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))] if xs else math.nan


def send_for(url: str, seconds: float, rate: float, rng: random.Random, sent: dict[str, float]) -> None:
    """Post traces at ``rate`` per second for ``seconds`` (steady: each on its own schedule)."""
    t0 = time.monotonic()
    k = 0
    while True:
        due = t0 + k / rate
        if due - t0 >= seconds:
            return
        time.sleep(max(0.0, due - time.monotonic()))
        tid, body = otlp_trace(rng, len(sent))
        post(url, body)
        sent[tid] = time.time()
        k += 1


def main() -> None:  # noqa: C901 - one script, its phases in order
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.2, help="the judge's latency, seconds")
    ap.add_argument("--rpm", type=float, default=600, help="the judge's rate limit, requests per minute")
    ap.add_argument("--arrival", type=float, default=4.0, help="traces per second (below --rpm / 60)")
    ap.add_argument("--steady", type=float, default=60, help="seconds of steady traffic measured for the lag")
    ap.add_argument("--outage", type=float, default=30, help="seconds the judge answers 503 (the issue: 600)")
    ap.add_argument("--interval", type=float, default=0.1, help="monitor.yaml interval: seconds between passes")
    ap.add_argument("--retry-after", type=float, default=5, help="monitor.yaml retry_after, seconds")
    ap.add_argument("--drain", type=float, default=120, help="at most this long for the catch-up, seconds")
    a = ap.parse_args()
    if a.arrival >= a.rpm / 60:
        raise SystemExit("--arrival must be below the judge's limit (--rpm / 60)")
    rng = random.Random(29)
    judge = Judge(a.latency, a.rpm).start()
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "monitor.db")
        config = Path(d) / "monitor.yaml"
        config.write_text(f"interval: {a.interval}\nretry_after: {a.retry_after}\nlookback: 1h\nsinks: {{log: true}}\n"
                          f"metrics:\n  coherence:\n    sample: 1\n    window: 1m\n"
                          f"    judge: \"http://127.0.0.1:{judge.port}/v1#bench-judge\"\n"
                          f"    timeout: 10\n    max_attempts: 3\n")
        proc, url = start_monitor(db, config, Path(d) / "serve.log")
        sent: dict[str, float] = {}
        try:
            print(f"judge: latency {a.latency * 1000:.0f} ms, limit {a.rpm:g} requests/min ({a.rpm / 60:g}/s); "
                  f"traces arriving at {a.arrival:g}/s; scoring pass every {a.interval:g} s; coherence on every trace",
                  flush=True)
            send_for(url, 5, a.arrival, rng, {})               # warm-up (imports, first run), not measured
            t_steady = time.time()
            send_for(url, a.steady, a.arrival, rng, sent)
            steady_ids = set(sent)
            judge.down = True
            t_down = time.time()
            send_for(url, a.outage, a.arrival, rng, sent)
            judge.down = False
            t_up = time.time()
            # the traffic goes on while the backlog is caught up: post on a thread, watch the store
            stop = threading.Event()
            tail: dict[str, float] = {}

            def keep_sending() -> None:
                while not stop.is_set():
                    send_for(url, 1.0, a.arrival, rng, tail)

            th = threading.Thread(target=keep_sending, daemon=True)
            th.start()
            backlog_ids = {t for t, at in sent.items() if at >= t_down}
            t_caught = None
            deadline = time.time() + a.drain
            while time.time() < deadline:
                done = {r["trace_id"] for r in rows(db) if r["status"] == "scored"}
                if backlog_ids <= done and t_caught is None:
                    t_caught = time.time()
                    break
                time.sleep(0.2)
            stop.set()
            th.join(10)
            sent.update(tail)
            deadline = time.time() + 60               # let the last ones be scored
            while time.time() < deadline:
                got = rows(db)
                if {r["trace_id"] for r in got if r["status"] == "scored"} >= set(sent):
                    break
                time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            judge.stop()
        got = rows(db)
        served = list(judge.answers)
        log_tail = (Path(d) / "serve.log").read_text(errors="replace").splitlines()[-8:]
    by_id = {r["trace_id"]: r for r in got}
    lost = [t for t in sent if by_id.get(t, {}).get("status") != "scored"]
    # the steady figure: the steady traces scored before the outage began (those in flight when the
    # judge went down were scored after it, and are counted below)
    steady_lags = [by_id[t]["lag_s"] for t in steady_ids if t in by_id and by_id[t]["lag_s"] is not None
                   and by_id[t]["scored_at"] < t_down]
    caught = len(steady_ids) - len(steady_lags)
    p50, p95 = pct(steady_lags, 0.5), pct(steady_lags, 0.95)
    print(f"\nsteady ({a.steady:g} s, {len(steady_ids)} traces): evaluation lag p50 {p50:.3f} s, p95 {p95:.3f} s, "
          f"max {max(steady_lags, default=math.nan):.3f} s; judge latency {a.latency:.3f} s; "
          f"p95 / latency = {p95 / a.latency:.2f} (goal <= 2)  {'MET' if p95 <= 2 * a.latency else 'NOT MET'}")
    if caught:
        print(f"  ({caught} steady trace(s) still in scoring when the judge went down: scored after it, not counted)")
    st_ans = [s for t, s in served if t_steady <= t < t_down]
    print(f"  judge answers while steady: {st_ans.count(200)} ok, {st_ans.count(429)} rate-limited (429)")
    backlog = [t for t in sent if t_down <= sent[t] < t_up]
    print(f"outage ({a.outage:g} s; the issue's is 600 s): {len(backlog)} traces arrived; the judge answered 503 "
          f"{sum(1 for t, s in served if t_down <= t < t_up and s == 503)} times; scored while down: "
          f"{sum(1 for t in backlog if by_id.get(t, {}).get('scored_at', math.inf) < t_up)}")
    if t_caught is None:
        print(f"catch-up: NOT caught up within {a.drain:g} s of the judge's return")
    else:
        scored_in = [r for r in got if r["status"] == "scored" and t_up <= r["scored_at"] <= t_caught]
        span = t_caught - t_up
        first_score = min((r["scored_at"] for r in scored_in), default=t_up)
        ok_in = [t for t, s in served if t_up <= t <= t_caught and s == 200]
        rate = len(scored_in) / span if span > 0 else math.nan
        busy = len(scored_in) / (t_caught - first_score) if t_caught > first_score else math.nan
        full = a.rpm / 60
        print(f"catch-up: the backlog ({len(backlog_ids)} traces, plus {len(scored_in) - len(backlog_ids)} arriving "
              f"meanwhile) scored {span:.1f} s after the judge's return (first score after "
              f"{first_score - t_up:.1f} s: errored traces wait retry_after = {a.retry_after:g} s)")
        print(f"  scores stored per second: {rate:.2f} over the whole catch-up, {busy:.2f} from the first score on; "
              f"the judge's full rate {full:.2f}/s ({busy / full:.0%} of it from the first score); "
              f"judge ok answers {len(ok_in) / span:.2f}/s, "
              f"429s {sum(1 for t, s in served if t_up <= t <= t_caught and s == 429)}")
    print(f"traces sent {len(sent)}, scored {len(sent) - len(lost)}, lost or unscored {len(lost)} (goal: 0)")
    errs = [line for line in log_tail if "failed" in line]
    if errs:
        print("server said:", *errs, sep="\n  ")


if __name__ == "__main__":
    main()
