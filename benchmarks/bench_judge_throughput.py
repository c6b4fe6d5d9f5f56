"""Judge-call throughput through assay's model layer against a fake endpoint on loopback.

A separate process serves an OpenAI-compatible ``/v1/chat/completions`` that answers
every call after a fixed latency (500 ms by default). The client sends judge calls
through ``LimitedModel(OpenAICompat(...))`` and prints, for each concurrency:

* calls/s beside the limit (concurrency / latency) and the % of the limit reached,
* client CPU per call (process CPU time of the client / calls),

then a cached re-run: 10,000 calls made once (filling the call cache), then made again
with a fresh cache connection, timed, with the endpoint's request count checked to be
unchanged. ``--sdk`` adds a baseline: a plain asyncio loop over the ``openai`` SDK.
``--vs-azure`` times whole evaluations of ``--calls`` rows x 1 judge metric (coherence) on the
same endpoint: ``assay.evaluate`` beside azure-ai-evaluation's ``evaluate`` (run from
``.bench/azure-venv``, made by ``benchmarks/conformance_azure.py``) at its defaults and at
``PF_WORKER_COUNT`` = each concurrency.

Goals (issue 3): >= 95% of the limit at 64, >= 90% at 256, <= 1.5 ms client CPU per
call; the cached re-run of 10,000 calls in < 5 s with zero endpoint calls.

    python benchmarks/bench_judge_throughput.py [--calls 2000] [--latency 0.5] [--sdk] [--vs-azure]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from loopback import start_own_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

ANSWER = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "fake-judge",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": '{"score": 4, "reason": "The response is grounded."}'}}],
    "usage": {"prompt_tokens": 420, "completion_tokens": 14, "total_tokens": 434},
}).encode()


# -- the fake endpoint (a separate process) ---------------------------------------------------------
def serve(port: int, latency: float) -> None:
    """HTTP/1.1 keep-alive server on asyncio protocols: cheap enough to never be the bottleneck."""
    ok = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
          + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER)
    count = [0]

    class Proto(asyncio.Protocol):
        def connection_made(self, transport):  # type: ignore[no-untyped-def]
            self.t = transport
            self.buf = b""

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = self.buf[:end].lower()
                i = head.find(b"content-length:")
                n = int(head[i + 15:].split(b"\r\n", 1)[0]) if i >= 0 else 0
                if len(self.buf) < end + 4 + n:
                    return
                self.buf = self.buf[end + 4 + n:]
                if head.startswith(b"get /stats"):
                    body = json.dumps({"chat_requests": count[0]}).encode()
                    self.t.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)
                    continue
                count[0] += 1
                asyncio.get_running_loop().call_later(latency, self._reply)

        def _reply(self) -> None:
            if not self.t.is_closing():
                self.t.write(ok)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Proto, "127.0.0.1", port, backlog=4096)
        print("ready", flush=True)
        await server.serve_forever()

    asyncio.run(main())


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    return start_own_server(__file__, latency)


def endpoint_calls(root: str) -> int:
    with urllib.request.urlopen(f"{root}/stats", timeout=10) as r:
        return json.load(r)["chat_requests"]


# -- the client --------------------------------------------------------------------------------------
def judge_messages(i: int) -> list[dict[str, str]]:
    """A groundedness-sized judge prompt (~1.6 KB), distinct per row."""
    return [
        {"role": "system", "content": "You grade whether a response is supported by its context. "
                                      "Answer in JSON with keys score (1-5) and reason. " * 3},
        {"role": "user", "content": f"<context>Row {i}. " + "The Eiffel Tower is in Paris and was finished "
                                    "in 1889. " * 12 + f"</context>\n<response>Row {i}: It is in Paris."
                                    "</response>"},
    ]


async def run_assay(base_url: str, calls: int, concurrency: int, *, cache=None, offset: int = 0,
                    warm: bool = True) -> dict[str, float]:
    from assay.models import LimitedModel, Limiter, OpenAICompat

    model = OpenAICompat.endpoint(base_url, "fake-judge")
    judge = LimitedModel(model, Limiter(concurrency, timeout=60), cache)
    kw = dict(max_tokens=100, temperature=0.0, response_format={"type": "json_object"})
    if warm:  # open the connection pool, as any run's first calls do
        await asyncio.gather(*(judge.generate(judge_messages(-1 - i), **kw) for i in range(concurrency)))
    msgs = [judge_messages(offset + i) for i in range(calls)]
    c0, t0 = time.process_time(), time.perf_counter()
    out = await asyncio.gather(*(judge.generate(m, **kw) for m in msgs))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    await judge.aclose()
    assert all(g.text for g in out)
    return {"wall": wall, "cpu": cpu, "cached": sum(g.cached for g in out)}


async def run_sdk(base_url: str, calls: int, concurrency: int) -> dict[str, float]:
    """Baseline: a plain asyncio loop over the openai SDK (its retries off, one pooled client)."""
    import openai

    try:
        import httpx2 as httpx  # the transport newer openai SDKs are built on
    except ImportError:
        import httpx

    client = openai.AsyncOpenAI(api_key="none", base_url=base_url, max_retries=0, http_client=httpx.AsyncClient(
        limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency), timeout=60))
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> str:
        async with sem:
            r = await client.chat.completions.create(model="fake-judge", messages=judge_messages(i),
                                                     max_tokens=100, temperature=0.0,
                                                     response_format={"type": "json_object"})
            return r.choices[0].message.content or ""

    await asyncio.gather(*(one(-1 - i) for i in range(concurrency)))
    c0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    await client.close()
    return {"wall": wall, "cpu": cpu, "cached": 0}


# -- whole evaluations: assay.evaluate beside azure-ai-evaluation's evaluate ---------------------------
AZURE_VENV = Path(__file__).resolve().parents[1] / ".bench" / "azure-venv" / "bin" / "python"
AZURE_SCRIPT = r"""
import json, os, sys, tempfile, time
from azure.ai.evaluation import CoherenceEvaluator, OpenAIModelConfiguration, evaluate
base, path = sys.argv[1], sys.argv[2]
ev = CoherenceEvaluator(OpenAIModelConfiguration(type="openai", api_key="unused", base_url=base, model="fake-judge"))
c0, t0 = time.process_time(), time.perf_counter()
evaluate(data=path, evaluators={"coherence": ev}, output_path=os.path.join(tempfile.mkdtemp(), "out.json"))
print("RESULT " + json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
"""


def eval_rows(path: Path, n: int) -> None:
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"query": f"Row {i}: where is the Eiffel Tower?",
                                 "response": f"Row {i}: It is in Paris, finished in 1889."}) + "\n")


def run_assay_evaluate(base_url: str, path: Path, concurrency: int) -> dict[str, float]:
    import assay

    os.environ["ASSAY_CACHE"] = "off"
    c0, t0 = time.process_time(), time.perf_counter()
    res = assay.evaluate(str(path), metrics="coherence", judge=f"{base_url}#fake-judge", concurrency=concurrency,
                         store=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert res.metrics["coherence"]["evaluated"] == res.run["rows_read"]
    return {"wall": wall, "cpu": cpu}


def run_azure_evaluate(base_url: str, path: Path, workers: int | None) -> dict[str, float] | None:
    env = {**os.environ, "PF_LOGGING_LEVEL": "CRITICAL"}
    if workers:
        env["PF_WORKER_COUNT"] = str(workers)
    out = subprocess.run([str(AZURE_VENV), "-c", AZURE_SCRIPT, base_url, str(path)], capture_output=True,
                         text=True, env=env, timeout=3600)
    got = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not got:
        print(f"azure-ai-evaluation failed: {out.stderr[-500:]}")
        return None
    return json.loads(got[-1][7:])


def line(label: str, calls: int, concurrency: int, latency: float, r: dict[str, float]) -> dict[str, float]:
    """Print and return one measurement; ``concurrency`` 0 means the tool's own default."""
    rate = calls / r["wall"]
    row = {"calls_per_s": rate, "cpu_ms": 1000 * r["cpu"] / calls}
    c = str(concurrency) if concurrency else "dflt"
    vs = ""
    if concurrency:
        row["limit"] = limit = concurrency / latency
        row["pct"] = 100 * rate / limit
        vs = f"limit {limit:6.0f}  {row['pct']:5.1f}% of limit  "
    print(f"{label:<34} c={c:<4} {calls:>6} calls {r['wall']:7.2f} s  {rate:7.1f} calls/s  "
          f"{vs}client CPU {row['cpu_ms']:.3f} ms/call", flush=True)
    return row


def main() -> None:  # noqa: C901
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rerun", help=argparse.SUPPRESS)
    ap.add_argument("--base", help=argparse.SUPPRESS)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--cached-calls", type=int, default=10_000)
    ap.add_argument("--sdk", action="store_true", help="also time a plain asyncio loop over the openai SDK")
    ap.add_argument("--vs-azure", action="store_true",
                    help="also time whole evaluations, assay beside azure-ai-evaluation (.bench/azure-venv)")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args()
    if args.serve:
        serve(args.serve, args.latency)
        return
    if args.rerun:
        from assay.models import CallCache

        r = asyncio.run(run_assay(args.base, args.calls, 256, cache=CallCache(args.rerun), offset=10_000_000,
                                  warm=False))
        print(json.dumps(r))
        return

    from assay.models import CallCache

    proc, root = start_server(args.latency)
    base = f"{root}/v1"
    results: dict[str, object] = {"latency_s": args.latency, "cpus": os.cpu_count()}
    try:
        print(f"fake endpoint: {base}, {args.latency * 1000:.0f} ms a call, separate process; "
              f"{os.cpu_count()} CPUs shared by client and endpoint")
        for c in args.concurrency:
            r = asyncio.run(run_assay(base, args.calls, c, offset=c * 100_000))
            results[f"assay_c{c}"] = line("assay LimitedModel(OpenAICompat)", args.calls, c, args.latency, r)
        if args.sdk:
            for c in args.concurrency:
                r = asyncio.run(run_sdk(base, args.calls, c))
                results[f"sdk_c{c}"] = line("plain loop over openai SDK", args.calls, c, args.latency, r)

        if args.vs_azure:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "rows.jsonl"
                eval_rows(path, args.calls)
                for c in args.concurrency:
                    r = run_assay_evaluate(base, path, c)
                    results[f"evaluate_assay_c{c}"] = line("assay.evaluate, coherence", args.calls, c, args.latency, r)
                if not AZURE_VENV.exists():
                    print("azure-ai-evaluation: not installed (benchmarks/conformance_azure.py makes .bench/azure-venv)")
                else:
                    for label, w in [("defaults", 0)] + [(f"workers={c}", c) for c in args.concurrency]:
                        r = run_azure_evaluate(base, path, w)
                        if r is not None:
                            results[f"evaluate_azure_{label}"] = line(f"azure evaluate, {label}", args.calls, w,
                                                                      args.latency, r)

        n = args.cached_calls
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "cache.sqlite"
            cache = CallCache(db)
            r = asyncio.run(run_assay(base, n, 256, cache=cache, offset=10_000_000, warm=False))
            cache.close()
            results["fill_c256"] = line("assay, filling the cache", n, 256, args.latency, r)
            before = endpoint_calls(root)
            cache = CallCache(db)  # a fresh connection, as a re-run opens it
            r = asyncio.run(run_assay(base, n, 256, cache=cache, offset=10_000_000, warm=False))
            cache.close()
            made = endpoint_calls(root) - before
            print(f"{'assay, cached re-run':<34} c=256  {n:>6} calls {r['wall']:7.2f} s  "
                  f"{n / r['wall']:9.0f} calls/s  {int(r['cached'])} cache hits  {made} endpoint calls  "
                  f"client CPU {1000 * r['cpu'] / n:.3f} ms/call", flush=True)
            results["cached_rerun"] = {"calls": n, "wall_s": r["wall"], "hits": r["cached"], "endpoint_calls": made}
            # the same re-run as a new process, timed from interpreter start to exit
            before = endpoint_calls(root)
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, __file__, "--rerun", str(db), "--calls", str(n), "--base", base],
                                 capture_output=True, text=True, check=True)
            whole = time.perf_counter() - t0
            made = endpoint_calls(root) - before
            hits = json.loads(out.stdout)["cached"]
            print(f"{'assay, cached re-run, new process':<34} c=256  {n:>6} calls {whole:7.2f} s  (interpreter start "
                  f"to exit)  {int(hits)} cache hits  {made} endpoint calls", flush=True)
            results["cached_rerun_process"] = {"calls": n, "wall_s": whole, "hits": hits, "endpoint_calls": made}
        print()
        goals = [
            ("c=64 >= 95% of limit", results.get("assay_c64", {}).get("pct", 0) >= 95),  # type: ignore[union-attr]
            ("c=256 >= 90% of limit", results.get("assay_c256", {}).get("pct", 0) >= 90),  # type: ignore[union-attr]
            ("client CPU <= 1.5 ms/call", all(v["cpu_ms"] <= 1.5 for k, v in results.items()  # type: ignore[index]
                                             if k.startswith("assay_c"))),
            ("cached re-run of 10,000 < 5 s, 0 calls", all(
                results[k]["wall_s"] < 5 and results[k]["endpoint_calls"] == 0  # type: ignore[index]
                for k in ("cached_rerun", "cached_rerun_process"))),
        ]
        for name, ok in goals:
            print(f"goal {name:<40} {'met' if ok else 'NOT MET'}")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
