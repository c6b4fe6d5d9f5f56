#!/usr/bin/env python3
"""Serving-benchmark clocks against the wire: TTFT error per request, and trace-replay arrival error.

The truth is a packet capture of the loopback (tcpdump, kernel timestamps), read by
benchmarks/peers/wire.py: per request, from its first payload packet to the packet that completes
the first server-sent event carrying content. It does not depend on the endpoint's clock or on
any instrument's.

1. **TTFT error** (``--part ttft``): benchmarks/stream_endpoint.py (scripted: 100 ms to the first
   token, 20 ms between tokens, 200 input / 200 output tokens) under tcpdump; each instrument runs
   c concurrent streams; error = the instrument's TTFT of a request - the wire's, per request,
   p50 / p99. Instruments: ``assay`` (run_perf, what ``assay bench perf`` runs), ``openai-sdk`` (the
   ``openai`` streaming client in assay's venv, time to the first content chunk), ``aiperf`` and
   ``guidellm`` (their own venvs, made by ``--setup``). Matching an instrument's request to the
   wire's: by the ``X-Request-Id`` header where the instrument sends one and records it (aiperf;
   the SDK client here sends one); else by order of start (assay, guidellm): the instrument's
   timed requests sorted by their own start stamps against the capture's completions requests
   sorted by first packet, its warm-up requests (the first on the wire) left out. Order is exact
   at c=1; at c=256 requests started within the same instant may pair with a neighbour, so the
   match-free figure (instrument p50 - wire p50 over the same requests) is printed beside it.
   ``--repeats N``: each instrument runs N times at each level (a fresh endpoint and capture each
   time); every run's line, then the median and range [min, max] of each figure over the runs.
2. **Arrival error of trace replay** (``--part replay``): one seeded Mooncake-layout trace
   (bench_perf_replay.make_trace) replayed by ``assay bench perf --replay`` and by aiperf's
   fixed-schedule trace replay (``--custom-dataset-type mooncake_trace --fixed-schedule``), each
   against a fresh endpoint; arrival error = |(arrival_i - scheduled_i) - their median| on the
   endpoint's kernel receive stamps, p50 / p99 (the median is when the schedule began).

``--setup`` (root) installs tcpdump with ``apt-get install -y tcpdump`` when it is missing and makes
the aiperf and guidellm venvs (benchmarks/peers/venv.py) and their offline word-level tokenizer.

    python benchmarks/bench_perf_wire.py --setup
    python benchmarks/bench_perf_wire.py --part ttft --levels 1,256 --requests-256 512
    python benchmarks/bench_perf_wire.py --part ttft --repeats 3 --requests-1 10 --requests-256 256
    python benchmarks/bench_perf_wire.py --part replay --trace-requests 300 --rate 20
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))
sys.path.insert(0, str(HERE.parent / "src"))

import wire  # noqa: E402  (benchmarks/peers/wire.py)
from bench_perf_accuracy import IN, OUT, SNAPSHOT, TOKENIZER, VENVS, Endpoint, peer_bin, run_child  # noqa: E402
from bench_perf_accuracy import setup as make_tokenizer  # noqa: E402
from bench_perf_replay import make_trace  # noqa: E402

from assay.bench.perf.run import PerfConfig, run_perf  # noqa: E402

WARMUP = 2
_spec = importlib.util.spec_from_file_location("peer_venv", HERE / "peers" / "venv.py")  # not the stdlib venv
peer_venv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer_venv)


class Capture:
    """tcpdump on lo for one TCP port, kernel stamps at nanosecond precision, written to a file."""

    def __init__(self, path: Path, port: int) -> None:
        self.path = path
        self.proc = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-B", "65536", "-U", "-n",
                                      "--time-stamp-precision=nano", "-w", str(path), "tcp", "port", str(port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        if "listening on" not in line:
            raise SystemExit(f"tcpdump did not start: {line.strip()} {self.proc.stderr.read().strip()}")

    def stop(self) -> str:
        """Stop it; its closing words (packets captured / dropped by kernel)."""
        time.sleep(0.3)                            # the last segments reach the file
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        rest = self.proc.stderr.read().strip().splitlines()
        return "; ".join(x for x in rest if "packets" in x)


# --- instruments: each returns (key kind, [(key, ttft s)], note) with key an id or a start stamp ---

def run_assay(url: str, conc: int, n: int) -> tuple[str, list, str]:
    cfg = PerfConfig(endpoint=url, model="scripted", concurrency=[conc], requests=n, warmup=WARMUP,
                     input_tokens=IN, output_tokens=OUT)
    run = asyncio.run(run_perf(cfg))
    v = run.summary["points"][0]["validity"]
    rows = [(r["sent"], r["ttft"]) for r in run.requests if r["status"] == "ok"]
    return "order", rows, "valid" if v["valid"] else "NOT VALID: " + "; ".join(v["reasons"])


def run_openai_sdk(url: str, conc: int, n: int) -> tuple[str, list, str]:
    import openai

    prompt = " ".join(["the"] * IN)

    async def main() -> list:
        client = openai.AsyncOpenAI(base_url=url, api_key="x", max_retries=0, timeout=600)
        out: list = []

        async def one(rid: str) -> tuple[str, float]:
            t0 = time.perf_counter()
            stream = await client.chat.completions.create(
                model="scripted", stream=True, max_tokens=OUT, extra_headers={"X-Request-Id": rid},
                messages=[{"role": "user", "content": prompt}])
            first = float("nan")
            async for ch in stream:
                if first != first and ch.choices and ch.choices[0].delta.content:
                    first = time.perf_counter() - t0
            return rid, first

        for k in range(WARMUP):
            await one(f"warm-{k}")
        todo = iter(range(n))

        async def worker() -> None:
            for k in todo:
                out.append(await one(f"sdk-{k}"))

        await asyncio.gather(*(worker() for _ in range(conc)))
        await client.close()
        return out

    return "id", asyncio.run(main()), ""


def run_aiperf(url: str, conc: int, n: int) -> tuple[str, list, str]:
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    try:
        run_child([str(peer_bin("aiperf")), "profile", "--model", "scripted", "--url", url.removesuffix("/v1"),
                   "--endpoint-type", "chat", "--streaming", "--tokenizer", TOKENIZER,
                   "--concurrency", str(conc), "--request-count", str(n),
                   "--warmup-request-count", str(WARMUP), "--warmup-concurrency", str(min(conc, WARMUP)),
                   "--prompt-input-tokens-mean", str(IN), "--prompt-input-tokens-stddev", "0",
                   "--output-tokens-mean", str(OUT), "--osl-stddev", "0", "--random-seed", "1",
                   "--artifact-dir", str(out), "--ui-type", "none", "--export-level", "records",
                   "--no-server-metrics", "--no-gpu-telemetry"], out / "stdout.log")
        rows = []
        for line in (out / "profile_export.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r["metadata"].get("benchmark_phase") != "profiling":
                continue
            m = r["metrics"].get("time_to_first_token")
            rows.append((r["metadata"]["x_request_id"], m["value"] / 1e3 if m else float("nan")))
        return "id", rows, ""
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_guidellm(url: str, conc: int, n: int) -> tuple[str, list, str]:
    out = Path(tempfile.mkdtemp(prefix="guidellm-"))
    try:
        snap = VENVS / "hf-cache" / "models--local--wordtok" / "snapshots" / SNAPSHOT
        run_child([str(peer_bin("guidellm")), "run",
                   "--backend", f"kind=openai_http,target={url.removesuffix('/v1')},model=scripted,"
                                "request_format=/v1/chat/completions,validate_backend=false",
                   "--tokenizer", f"kind=hf_auto,model={snap}",
                   "--profile", f"kind=concurrent,streams={conc}",
                   "--constraint", f"kind=max_requests,count={n}",
                   "--data", f"kind=synthetic_text,prompt_tokens={IN},output_tokens={OUT}",
                   "--output", f"kind=json,path={out / 'out.json'}", "--disable-console-interactive"],
                  out / "stdout.log")
        reqs = json.loads((out / "out.json").read_text())["benchmarks"][0]["requests"]["successful"]
        rows = [(guidellm_start(r), r["time_to_first_token_ms"] / 1e3) for r in reqs]
        return "order", rows, ""
    finally:
        shutil.rmtree(out, ignore_errors=True)


def guidellm_start(r: dict) -> float:
    """A guidellm request's start stamp (its report keeps timings under a few names by version)."""
    for where in (r, r.get("info") or {}, (r.get("info") or {}).get("timings") or {}, r.get("timings") or {}):
        for k in ("request_start", "request_start_time", "start_time", "resolve_start"):
            if isinstance(where.get(k), (int, float)):
                return float(where[k])
    raise SystemExit(f"guidellm's report has no start stamp per request; its fields: {sorted(r)}")


CLIENTS = {"assay": run_assay, "openai-sdk": run_openai_sdk, "aiperf": run_aiperf, "guidellm": run_guidellm}


def match(kind: str, rows: list, ex: list[wire.Exchange]) -> list[tuple[float, float]]:
    """(instrument TTFT, wire TTFT) per request the two agree is the same."""
    ex = [e for e in ex if "completions" in e.path]
    if kind == "id":
        by_id = {e.request_id: e for e in ex}
        return [(t, by_id[k].wire_ttft) for k, t in rows if k in by_id and by_id[k].wire_ttft is not None]
    rows = sorted(rows)
    ex = ex[len(ex) - len(rows):] if len(ex) >= len(rows) else ex   # the warm-ups came first
    return [(t, e.wire_ttft) for (_, t), e in zip(rows, ex) if e.wire_ttft is not None]


def ttft_once(name: str, level: int, n: int) -> tuple[dict | None, str]:
    """One instrument's run at one level under its own capture: its figures (ms) and the capture's
    and the verdict's words; None with the reason when it failed or nothing matched."""
    with tempfile.TemporaryDirectory() as tmp:
        ep = Endpoint(Path(tmp) / "log.jsonl", 1)
        cap = Capture(Path(tmp) / "lo.pcap", ep.port)
        try:
            kind, rows, note = CLIENTS[name](ep.url, level, n)
        except Exception as exc:                    # a peer that failed: say so, go on
            return None, f"FAILED: {str(exc)[-600:]}"
        finally:
            said = cap.stop()
            ep.stop()
        pairs = np.array(match(kind, rows, wire.exchanges(cap.path, ep.port)), dtype=float)
    if not len(pairs):
        return None, f"no request matched ({len(rows)} recorded; {said})"
    pairs = pairs[~np.isnan(pairs).any(axis=1)]
    err = (pairs[:, 0] - pairs[:, 1]) * 1e3
    e50, e99 = np.percentile(err, [50, 99])
    return {"n": len(rows), "matched": len(pairs), "err p50": e50, "err p99": e99, "|err| max": np.abs(err).max(),
            "p50-p50": (np.median(pairs[:, 0]) - np.median(pairs[:, 1])) * 1e3,
            "wire p50": np.median(pairs[:, 1]) * 1e3}, f"{said} {note}".rstrip()


FIGURES = ("err p50", "err p99", "|err| max", "p50-p50", "wire p50")


def ttft_part(args: argparse.Namespace) -> None:
    print(f"set-up: {IN} input / {OUT} output tokens; endpoint TTFT 100 ms, ITL 20 ms, 1 process; "
          f"error = instrument TTFT - wire TTFT per request (ms); {args.repeats} run(s) each")
    print(f"{'instrument':<11} {'c':>4} {'n':>5} {'matched':>8} " + " ".join(f"{f:>9}" for f in FIGURES)
          + "  capture / verdict")
    for level in [int(x) for x in args.levels.split(",")]:
        n = args.requests_1 if level == 1 else args.requests_256
        for name in args.clients.split(","):
            runs = []
            for _ in range(args.repeats):
                got, words = ttft_once(name, level, n)
                if got is None:
                    print(f"{name:<11} {level:>4} {words}", flush=True)
                    continue
                runs.append(got)
                print(f"{name:<11} {level:>4} {got['n']:>5} {got['matched']:>8} "
                      + " ".join(f"{got[f]:>+9.2f}" for f in FIGURES) + f"  {words}", flush=True)
            if len(runs) > 1:
                cells = []
                for f in FIGURES:
                    v = np.array([r[f] for r in runs])
                    cells.append(f"{np.median(v):+.2f} [{v.min():+.2f}, {v.max():+.2f}]")
                print(f"{name:<11} {level:>4} median [range] of {len(runs)} runs: "
                      + "; ".join(f"{f} {c}" for f, c in zip(FIGURES, cells)), flush=True)


def arrival_error(served: list[dict], rows: list[dict], speed: float) -> np.ndarray:
    served = sorted((r for r in served if "completions" in (r.get("path") or "")), key=lambda r: r["arrival"])
    arrivals = np.array([r["arrival"] for r in served])
    sched = np.sort(np.array([r["timestamp"] for r in rows]) / 1000 / speed)[:len(arrivals)]
    off = arrivals[:len(sched)] - sched
    return np.abs(off - np.median(off)) * 1e3


def replay_assay(url: str, trace: Path, speed: float) -> str:
    run = asyncio.run(run_perf(PerfConfig(endpoint=url, model="scripted", replay=str(trace), speed=speed, warmup=0)))
    lag = run.summary["points"][0]["replay"]["schedule_lag_ms"]
    return f"stated schedule lag p50 {lag['p50']:.2f} / p99 {lag['p99']:.2f} ms"


def replay_aiperf(url: str, trace: Path, speed: float) -> str:
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    try:
        if speed != 1.0:
            raise SystemExit("aiperf's fixed schedule replays at the trace's own speed here: use --speed 1")
        run_child([str(peer_bin("aiperf")), "profile", "--model", "scripted", "--url", url.removesuffix("/v1"),
                   "--endpoint-type", "chat", "--streaming", "--tokenizer", TOKENIZER,
                   "--input-file", str(trace), "--custom-dataset-type", "mooncake_trace", "--fixed-schedule",
                   "--random-seed", "1", "--artifact-dir", str(out), "--ui-type", "none",
                   "--no-server-metrics", "--no-gpu-telemetry"], out / "stdout.log")
        return ""
    finally:
        shutil.rmtree(out, ignore_errors=True)


def replay_part(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        rows = make_trace(trace, args.trace_requests, args.rate, args.seed)
        print(f"trace: {args.trace_requests} requests, Poisson {args.rate:g} req/s, Mooncake layout, x{args.speed:g}; "
              "arrival error = |(arrival - scheduled) - median| on the endpoint's kernel stamps (ms)")
        print(f"{'replayer':<9} {'arrived':>8} {'err p50':>8} {'err p99':>8} {'err max':>8}  note")
        for name, fn in (("assay", replay_assay), ("aiperf", replay_aiperf)):
            if name not in args.clients.split(","):
                continue
            ep = Endpoint(Path(tmp) / f"log-{name}.jsonl", 1)
            try:
                note = fn(ep.url, trace, args.speed)
            except (Exception, SystemExit) as exc:
                print(f"{name:<9} FAILED: {str(exc)[-600:]}", flush=True)
                continue
            finally:
                served, _ = ep.stop()
            err = arrival_error(served, rows, args.speed)
            p50, p99 = np.percentile(err, [50, 99])
            print(f"{name:<9} {len(err):>8} {p50:>8.2f} {p99:>8.2f} {err.max():>8.2f}  {note}", flush=True)


def setup() -> None:
    if shutil.which("tcpdump") is None:
        subprocess.run(["apt-get", "install", "-y", "tcpdump"], check=True)
    for peer in ("aiperf", "guidellm"):
        try:
            peer_venv.make(peer, root=VENVS)
            make_tokenizer(peer)
        except SystemExit as exc:
            print(f"setup {peer}: FAILED: {exc}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="install tcpdump (apt, root) and the peers' venvs")
    ap.add_argument("--part", choices=("ttft", "replay", "both"), default="both")
    ap.add_argument("--clients", default="assay,openai-sdk,aiperf,guidellm")
    ap.add_argument("--levels", default="1,256")
    ap.add_argument("--requests-1", type=int, default=25, help="timed requests at c=1")
    ap.add_argument("--requests-256", type=int, default=512, help="timed requests at any c > 1")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each instrument at each level: median and range")
    ap.add_argument("--trace-requests", type=int, default=300)
    ap.add_argument("--rate", type=float, default=20.0, help="the trace's mean arrival rate, req/s")
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.setup:
        setup()
    if shutil.which("tcpdump") is None and args.part != "replay":
        raise SystemExit("tcpdump is not installed: run with --setup (as root) or apt-get install -y tcpdump")
    if args.part in ("ttft", "both"):
        ttft_part(args)
    if args.part in ("replay", "both"):
        replay_part(args)


if __name__ == "__main__":
    main()
