"""Decoding a streamed answer after the exchange (`assay bench perf`'s ``decode``), and the
per-read cost of spotting its end on the hot path, here and in another checkout side by side.

The answer is ``--mb`` MB of chunked SSE (OpenAI-style delta events) cut into ``--piece-kb``
KB reads, in three shapes: one event per chunk (what vLLM and llama.cpp send), 64 events per
chunk, and one event that never ends (a hostile server). ``decode`` is timed on each (best of
``--repeat``); the hot path (``_answer_ended``, run on every read) is timed on a stream of one
small chunk per read. Each figure is the best of ``--rounds`` child processes, this checkout's
and the baseline's taking turns (the machine is shared: turns keep a slow spell from landing on
one side only). With ``--baseline-src DIR`` (a ``src`` folder of another checkout, e.g.
``git archive d981bdf src | tar -x -C /tmp/base``) the same figures come from it, in a child
process, for a before/after in one run::

    python benchmarks/bench_stream_decode.py --baseline-src /tmp/base/src
    python benchmarks/bench_stream_decode.py --mb 2 --mb 8 --repeat 1 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE_SRC = Path(__file__).resolve().parents[1] / "src"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENT = (b"data: " + json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                                  "choices": [{"index": 0, "delta": {"content": " word"}, "finish_reason": None}]
                                  }).encode() + b"\n\n")
SHAPES = ("event per chunk", "64 events per chunk", "one endless event")


def answer(shape: str, n: int) -> bytes:
    if shape == "one endless event":
        chunk = b"data: " + b"x" * (0xFFFF - 6)
        framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        return HEAD + framed * (n // len(framed))
    chunk = EVENT * (64 if shape.startswith("64") else 1)
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    return HEAD + framed * (n // len(framed)) + b"0\r\n\r\n"


def figures(mbs: list[float], piece: int, repeat: int) -> dict:
    """Seconds per decode (shape, MB) and microseconds per read on the hot path, from the
    ``assay`` this interpreter imports."""
    from assay.bench.perf import stream

    out: dict = {"decode": {}, "hot_path_us_per_read": None}
    for shape in SHAPES:
        for mb in mbs:
            raw = answer(shape, int(mb * 1e6))
            ex = stream.Exchange(sent=0.0, reads=[(i / 1e6, raw[i:i + piece]) for i in range(0, len(raw), piece)])
            if shape == "one endless event":
                ex.error = "stream cut"
            best = float("inf")
            for _ in range(repeat):
                t0 = time.perf_counter()
                d = stream.decode(ex)
                best = min(best, time.perf_counter() - t0)
            out["decode"][f"{shape}, {mb:g} MB"] = {"s": best, "events": len(d.events),
                                                    "work": getattr(d, "work", None)}
    framed = b"%x\r\n" % len(EVENT) + EVENT + b"\r\n"
    reads = [HEAD] + [framed] * 100_000
    best = float("inf")
    for _ in range(repeat):
        ex = stream.Exchange()
        t0 = time.perf_counter()
        for data in reads:
            stream._answer_ended(ex, data)
        best = min(best, time.perf_counter() - t0)
    out["hot_path_us_per_read"] = best / len(reads) * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, action="append", help="answer size in MB (repeatable; default 2 and 8)")
    ap.add_argument("--piece-kb", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3, help="decodes per child process (the best counts)")
    ap.add_argument("--rounds", type=int, default=3, help="child processes per side, taking turns")
    ap.add_argument("--baseline-src", help="another checkout's src folder, timed beside this one")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    mbs = args.mb or [2.0, 8.0]
    piece = args.piece_kb << 10
    if args.child:
        print(json.dumps(figures(mbs, piece, args.repeat)))
        return
    rows: dict = {}
    cmd = [sys.executable, __file__, "--child", "--piece-kb", str(args.piece_kb), "--repeat", str(args.repeat)]
    cmd += [a for mb in mbs for a in ("--mb", str(mb))]
    for _ in range(args.rounds):
        for name, src in (("this checkout", str(HERE_SRC)), ("baseline", args.baseline_src)):
            if src is None:
                continue
            got = json.loads(subprocess.run(cmd, env={**os.environ, "PYTHONPATH": src}, capture_output=True,
                                            text=True, check=True).stdout)
            best = rows.setdefault(name, got)
            for key, fig in got["decode"].items():
                best["decode"][key]["s"] = min(best["decode"][key]["s"], fig["s"])
            best["hot_path_us_per_read"] = min(best["hot_path_us_per_read"], got["hot_path_us_per_read"])
    names = list(rows)
    print(f"decode, {args.piece_kb} KB reads, best of {args.rounds} x {args.repeat} (s):")
    print(f"  {'answer':<34}" + "".join(f"{n:>16}" for n in names) + ("    ratio" if len(names) == 2 else ""))
    for key in rows[names[0]]["decode"]:
        vals = [rows[n]["decode"][key]["s"] for n in names]
        ratio = f"  {vals[1] / vals[0]:7.1f}x" if len(vals) == 2 else ""
        print(f"  {key:<34}" + "".join(f"{v:16.3f}" for v in vals) + ratio)
    print("hot path, one small chunk per read (us per read):")
    print("  " + "  ".join(f"{n}: {rows[n]['hot_path_us_per_read']:.3f}" for n in names))


if __name__ == "__main__":
    main()
