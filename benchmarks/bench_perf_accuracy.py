"""How wrong is the serving benchmark's clock? Instrument error of ``assay bench perf``.

Set-up (issue 10): the scripted streaming endpoint (benchmarks/stream_endpoint.py) in its own
process on this machine, 200 input / 200 output tokens, 100 ms to the first token, 20 ms
between tokens. The endpoint logs, per request, when the request's bytes reached its socket
(the kernel's stamp) and when it wrote the first token: its own TTFT. The **instrument error**
at a percentile is the client's TTFT percentile minus the endpoint's for the same run.

Clients measured side by side, each against a fresh endpoint:

- ``assay``: ``assay.bench.perf.run.run_perf`` (kernel receive stamps, see assay/bench/perf/stream.py);
- ``openai-sdk``: plain asyncio + the ``openai`` SDK's streaming client, stamping each chunk
  when the loop hands it over (what a hand-written benchmark does);
- ``aiperf`` (0.13.0) and ``guidellm`` (0.8.1): the tools themselves, each run as a subprocess from
  its own venv under benchmarks/.venvs/<name> (``--setup`` makes them: ``python -m venv`` + pip,
  pinned). Streaming chat, concurrency c, n requests, 200/200 tokens; each request's TTFT is read
  back from the tool's own export (aiperf: profile_export.jsonl, profiling phase only; guidellm:
  the JSON report's successful requests). aiperf runs the same 2 warm-up requests and sends
  X-Request-Id, so its server figure is over exactly the requests it counted; guidellm has no
  warm-up by count, so its server figure skips none. Client CPU is the tool's process tree
  (RUSAGE_CHILDREN delta), start-up and reporting included;
- ``vllm`` (``vllm bench serve``, 0.33.0): wired up, but its install is not practical here (pip
  cannot resolve it: it wants a certifi newer than the index has, and pulls torch); ``--setup``
  tries and reports; run_vllm (flags from the vLLM docs) is untested for that reason.

Offline: the peers need a Hugging Face tokenizer. ``--setup`` builds one: a WordLevel tokenizer
over the endpoint's WORDS (each one o200k token, so counts agree with the endpoint's), any other
word read as WORDS[0], stored as a Hugging Face cache entry ``local/wordtok`` in
benchmarks/.venvs/hf-cache; the peers run with HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1 and
HF_HUB_CACHE pointing there.

    .venv/bin/python benchmarks/bench_perf_accuracy.py                 # c=1 (25 requests) and c=256 (768)
    .venv/bin/python benchmarks/bench_perf_accuracy.py --levels 1,64 --clients assay
    .venv/bin/python benchmarks/bench_perf_accuracy.py --setup --levels 1 --runs 1 --requests 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from assay.bench.perf.run import PerfConfig, run_perf  # noqa: E402

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


def server_ttft(rows: list[dict], skip: int, ids: set | None = None) -> np.ndarray:
    if ids is not None:                                           # the very requests the client counted
        rows = [r for r in rows if r.get("request_id") in ids]
    else:
        rows = sorted(rows, key=lambda r: r["i"])[skip:]        # warm-up requests left out, as the client does
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


VENVS = HERE / ".venvs"
PEERS = {"aiperf": (["aiperf==0.13.0", "tokenizers"], "aiperf"),
         "guidellm": (["guidellm==0.8.1", "tokenizers"], "guidellm"),
         "vllm": (["vllm==0.33.0"], "vllm")}
TOKENIZER = "local/wordtok"                # a repository id in VENVS/hf-cache (aiperf offline wants an id)
SNAPSHOT = "0" * 40
MKTOK = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
out, words = sys.argv[1], sys.argv[2].split(",")
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token=words[0]))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
fast = PreTrainedTokenizerFast(tokenizer_object=tok)     # no special tokens: decode keeps every word
fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
fast.save_pretrained(out)
"""


def peer_bin(name: str) -> Path:
    return VENVS / name / "bin" / PEERS[name][1]


def setup(name: str) -> bool:
    """Create VENVS/<name> from PyPI (pinned) and the shared word-level tokenizer; True if usable."""
    pkgs, _ = PEERS[name]
    venv = VENVS / name
    if not peer_bin(name).exists():
        print(f"setup {name}: python -m venv {venv} && pip install {' '.join(pkgs)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        try:
            r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *pkgs], capture_output=True,
                               text=True, timeout=600)
            ok = r.returncode == 0
            why = "\n".join(x for x in r.stderr.splitlines() if x.startswith("ERROR"))[-2000:]
        except subprocess.TimeoutExpired:
            ok, why = False, "pip install ran past 10 minutes"
        if not ok or not peer_bin(name).exists():
            print(f"setup {name}: FAILED: {why}", flush=True)
            shutil.rmtree(venv, ignore_errors=True)
            return False
    snap = VENVS / "hf-cache" / "models--local--wordtok" / "snapshots" / SNAPSHOT
    if not (snap / "tokenizer.json").exists():
        # A word-level tokenizer over the endpoint's WORDS (a word of WORDS is one o200k token, so
        # counts agree with the endpoint's); any other word reads as WORDS[0]. Saved as a Hugging
        # Face cache entry so that it loads with HF_HUB_OFFLINE=1 by repository id.
        from stream_endpoint import WORDS
        subprocess.run([str(venv / "bin" / "python"), "-c", MKTOK, str(snap), ",".join(WORDS)], check=True,
                       capture_output=True)
        (snap.parent.parent / "refs").mkdir(exist_ok=True)
        (snap.parent.parent / "refs" / "main").write_text(SNAPSHOT)
    return True


def peer_env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_HUB_CACHE": str(VENVS / "hf-cache"), "HF_HUB_DISABLE_TELEMETRY": "1"}


def run_child(cmd: list[str], log: Path) -> float:
    """Run a peer to completion; its CPU seconds (user + system, it and its children)."""
    def kids() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    c0 = kids()
    with log.open("w") as f:
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=peer_env(), timeout=3600).returncode
    if rc:
        raise RuntimeError(f"{cmd[0]} exited {rc}; see the tail of its log:\n" + log.read_text()[-3000:])
    return kids() - c0


def run_aiperf(url: str, conc: int, n: int, warmup: int) -> tuple[np.ndarray, float, dict]:
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    try:
        used = run_child([str(peer_bin("aiperf")), "profile", "--model", "scripted", "--url", url.removesuffix("/v1"),
                          "--endpoint-type", "chat", "--streaming", "--tokenizer", TOKENIZER,
                          "--concurrency", str(conc), "--request-count", str(n),
                          "--warmup-request-count", str(warmup), "--warmup-concurrency", str(min(conc, warmup)),
                          "--prompt-input-tokens-mean", str(IN), "--prompt-input-tokens-stddev", "0",
                          "--output-tokens-mean", str(OUT), "--osl-stddev", "0", "--random-seed", "1",
                          "--artifact-dir", str(out), "--ui-type", "none", "--export-level", "records",
                          "--no-server-metrics", "--no-gpu-telemetry"], out / "stdout.log")
        ttft, ids = [], set()
        for line in (out / "profile_export.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r["metadata"].get("benchmark_phase") != "profiling":
                continue
            m = r["metrics"].get("time_to_first_token")
            ttft.append(m["value"] / 1e3 if m else float("nan"))
            ids.add(r["metadata"]["x_request_id"])    # aiperf sends X-Request-Id; the endpoint logs it
        return np.array(ttft), used, {"ids": ids}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_guidellm(url: str, conc: int, n: int, warmup: int) -> tuple[np.ndarray, float, dict]:
    out = Path(tempfile.mkdtemp(prefix="guidellm-"))
    try:
        snap = VENVS / "hf-cache" / "models--local--wordtok" / "snapshots" / SNAPSHOT
        used = run_child([str(peer_bin("guidellm")), "run",
                          "--backend", f"kind=openai_http,target={url.removesuffix('/v1')},model=scripted,"
                                       "request_format=/v1/chat/completions,validate_backend=false",
                          "--tokenizer", f"kind=hf_auto,model={snap}",
                          "--profile", f"kind=concurrent,streams={conc}",
                          "--constraint", f"kind=max_requests,count={n}",
                          "--data", f"kind=synthetic_text,prompt_tokens={IN},output_tokens={OUT}",
                          "--output", f"kind=json,path={out / 'out.json'}", "--disable-console-interactive"],
                         out / "stdout.log")
        bench = json.loads((out / "out.json").read_text())["benchmarks"][0]["requests"]
        ttft = [r["time_to_first_token_ms"] / 1e3 for r in bench["successful"]]
        ttft += [float("nan")] * (len(bench["errored"]) + len(bench["incomplete"]))
        return np.array(ttft), used, {"skip": 0}        # no warm-up: the endpoint's figure skips none
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_vllm(url: str, conc: int, n: int, warmup: int) -> tuple[np.ndarray, float, dict]:
    out = Path(tempfile.mkdtemp(prefix="vllm-"))
    try:
        used = run_child([str(peer_bin("vllm")), "bench", "serve", "--backend", "openai-chat",
                          "--base-url", url.removesuffix("/v1"), "--endpoint", "/v1/chat/completions",
                          "--model", "scripted", "--tokenizer", TOKENIZER, "--dataset-name", "random",
                          "--random-input-len", str(IN), "--random-output-len", str(OUT), "--ignore-eos",
                          "--num-prompts", str(n), "--max-concurrency", str(conc), "--num-warmups", str(warmup),
                          "--save-result", "--save-detailed", "--result-dir", str(out),
                          "--result-filename", "r.json"], out / "stdout.log")
        ttft = json.loads((out / "r.json").read_text())["ttfts"]
        return np.array(ttft, dtype=float), used, {}
    finally:
        shutil.rmtree(out, ignore_errors=True)


CLIENTS = {"assay": run_assay, "openai-sdk": run_openai_sdk, "aiperf": run_aiperf, "guidellm": run_guidellm,
           "vllm": run_vllm}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,256", help="concurrency levels")
    ap.add_argument("--clients", default=None,
                    help="comma-separated, of " + ",".join(CLIENTS) + " (default: all that are set up)")
    ap.add_argument("--setup", action="store_true", help="create the peers' venvs under benchmarks/.venvs")
    ap.add_argument("--requests", type=int, default=None, help="requests per point (default 25 at c=1, 3c else)")
    ap.add_argument("--runs", type=int, default=2, help="runs per client and level")
    ap.add_argument("--workers", type=int, default=1, help="endpoint processes")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    names = args.clients.split(",") if args.clients else list(CLIENTS)
    if bad := [x for x in names if x not in CLIENTS]:
        raise SystemExit(f"unknown client(s) {bad}; known: {list(CLIENTS)}")
    if args.setup:
        names = [x for x in names if x not in PEERS or setup(x)]
    missing = [x for x in names if x in PEERS and not peer_bin(x).exists()]
    if missing and args.clients:
        print(f"not set up (run with --setup): {', '.join(missing)}", flush=True)
    names = [x for x in names if x not in missing]
    print(f"set-up: {IN} input / {OUT} output tokens, endpoint TTFT {TTFT * 1e3:.0f} ms, ITL {ITL * 1e3:.0f} ms, "
          f"endpoint workers {args.workers}; error = client TTFT percentile - endpoint's own, same run")
    print(f"{'client':<11} {'c':>4} {'n':>5} {'err p50 ms':>11} {'err p99 ms':>11} {'client p50':>11} "
          f"{'server p50':>11} {'client CPU s':>13} {'µs/token':>9}  verdict")
    for level in levels:
        n = args.requests or (25 if level == 1 else 3 * level)
        warmup = 2
        for name in names:
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    ep = Endpoint(Path(tmp) / "log.jsonl", args.workers)
                    try:
                        client_ttft, used, validity = CLIENTS[name](ep.url, level, n, warmup)
                    except Exception as exc:                    # a peer that failed: say so, go on
                        print(f"{name:<11} {level:>4} FAILED: {exc}", flush=True)
                        continue
                    finally:
                        rows, _ = ep.stop()
                srv = server_ttft(rows, validity.pop("skip", warmup), validity.pop("ids", None))
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
