"""How wrong is the serving benchmark's clock? Instrument error of ``assay bench perf``.

Set-up (issue 10): the scripted streaming endpoint (benchmarks/stream_endpoint.py) in its own
process on this machine, 200 input / 200 output tokens, 100 ms to the first token, 20 ms
between tokens. The endpoint logs, per request, when the request's bytes reached its socket
(the kernel's stamp) and when it wrote the first token: its own TTFT. The **instrument error**
at a percentile is the client's TTFT percentile minus the endpoint's for the same run.

Clients measured side by side, each against a fresh endpoint:

- ``assay``: ``assay.bench.perf.run_perf`` (kernel receive stamps, see assay/bench/stream.py);
- ``openai-sdk``: plain asyncio + the ``openai`` SDK's streaming client, stamping each chunk
  when the loop hands it over (what a hand-written benchmark does; the table's last peer).

The peers ``vllm bench serve``, ``aiperf`` and ``guidellm`` are not run by this script yet
(see benchmarks/RESULTS.md: their published figures on this set-up are in issue 10).

    .venv/bin/python benchmarks/bench_perf_accuracy.py                 # c=1 (25 requests) and c=256 (768)
    .venv/bin/python benchmarks/bench_perf_accuracy.py --levels 1,64 --clients assay
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from assay.bench.perf import PerfConfig, run_perf  # noqa: E402

TTFT, ITL, IN, OUT = 0.1, 0.02, 200, 200


class Endpoint:
    def __init__(self, log: Path, workers: int) -> None:
        self.log = log
        self.proc = subprocess.Popen([sys.executable, str(HERE / "stream_endpoint.py"), "--port", "0",
                                      "--ttft", str(TTFT), "--itl", str(ITL), "--log", str(log), "--tokenize",
                                      "--workers", str(workers)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("LISTENING"):
            raise SystemExit(f"the endpoint did not start: {line} {self.proc.stderr.read()}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> tuple[list[dict], str]:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        rows = [json.loads(x) for x in self.log.read_text().splitlines()]
        return [r for r in rows if r.get("i") is not None and r.get("first_write") is not None], self.proc.stderr.read()


def server_ttft(rows: list[dict], skip: int) -> np.ndarray:
    rows = sorted(rows, key=lambda r: r["i"])[skip:]            # warm-up requests left out, as the client does
    return np.array([r["first_write"] - r["arrival"] for r in rows])


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_assay(url: str, conc: int, n: int, warmup: int) -> tuple[np.ndarray, float, dict]:
    cfg = PerfConfig(endpoint=url, model="scripted", concurrency=[conc], requests=n, warmup=warmup,
                     input_tokens=IN, output_tokens=OUT)
    run = asyncio.run(run_perf(cfg))
    ttft = np.array([r["ttft"] for r in run.requests if r["status"] == "ok"])
    v = run.summary["points"][0]["validity"]
    return ttft, v["client_cpu_s"], v      # CPU while the point ran (not prompt building or statistics)


def run_openai_sdk(url: str, conc: int, n: int, warmup: int) -> tuple[np.ndarray, float, dict]:
    import openai

    prompt = " ".join(["the"] * IN)

    async def main() -> list[float]:
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, timeout=600)
        out: list[float] = []

        async def one() -> float:
            t0 = time.perf_counter()
            stream = await client.chat.completions.create(model="scripted", stream=True, max_tokens=OUT,
                                                          messages=[{"role": "user", "content": prompt}])
            first = None
            async for ch in stream:
                if first is None and ch.choices and ch.choices[0].delta.content:
                    first = time.perf_counter() - t0
            return first if first is not None else float("nan")

        for _ in range(warmup):
            await one()
        todo = iter(range(n))

        async def worker() -> None:
            for _ in todo:
                out.append(await one())

        await asyncio.gather(*(worker() for _ in range(conc)))
        await client.close()
        return out

    c0 = cpu()
    got = asyncio.run(main())
    return np.array(got), cpu() - c0, {}


CLIENTS = {"assay": run_assay, "openai-sdk": run_openai_sdk}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,256", help="concurrency levels")
    ap.add_argument("--clients", default="assay,openai-sdk")
    ap.add_argument("--runs", type=int, default=2, help="runs per client and level")
    ap.add_argument("--workers", type=int, default=1, help="endpoint processes")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    print(f"set-up: {IN} input / {OUT} output tokens, endpoint TTFT {TTFT * 1e3:.0f} ms, ITL {ITL * 1e3:.0f} ms, "
          f"endpoint workers {args.workers}; error = client TTFT percentile - endpoint's own, same run")
    print(f"{'client':<11} {'c':>4} {'n':>5} {'err p50 ms':>11} {'err p99 ms':>11} {'client p50':>11} "
          f"{'server p50':>11} {'client CPU s':>13} {'µs/token':>9}  verdict")
    for level in levels:
        n = 25 if level == 1 else 3 * level
        warmup = 2
        for name in args.clients.split(","):
            for k in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    ep = Endpoint(Path(tmp) / "log.jsonl", args.workers)
                    try:
                        client_ttft, used, validity = CLIENTS[name](ep.url, level, n, warmup)
                    finally:
                        rows, _ = ep.stop()
                srv = server_ttft(rows, warmup)
                c50, c99 = np.nanpercentile(client_ttft, [50, 99])
                s50, s99 = np.percentile(srv, [50, 99])
                tokens = len(client_ttft) * OUT
                verdict = ("valid" if validity.get("valid") else "INVALID: " + "; ".join(validity["reasons"])) \
                    if validity else "—"
                print(f"{name:<11} {level:>4} {len(client_ttft):>5} {(c50 - s50) * 1e3:>+11.2f} {(c99 - s99) * 1e3:>+11.2f} "
                      f"{c50 * 1e3:>11.2f} {s50 * 1e3:>11.2f} {used:>13.2f} {used / tokens * 1e6:>9.1f}  {verdict}",
                      flush=True)


if __name__ == "__main__":
    main()
