"""Alert quality of `assay monitor`: false alerts over 24 simulated hours of an unchanged app, and
how many windows a planted drop takes to fire.

Per seed, a fresh SQLite store receives the spans of a simulated app whose traces start over
``--hours`` hours (default 24) of an unchanged app and then ``--after`` more hours in which, from
a random moment (``--drop-at`` hours into that period, plus a random offset inside its window), the
app's tool calls fail far more often (``--bad-rate`` instead of ``--good-rate``). Each trace is an
``invoke_agent`` root, a ``chat`` call with the question and answer as GenAI messages and
``--tools`` ``execute_tool`` spans (status ``ERROR`` for a failed call), as the OpenTelemetry SDK
sends them.

The spans go into the store through the receiver's own decoding and writing path
(:func:`assay.monitor.decode.span_row` and :meth:`assay.store.spans.SpanLog.write`, one
transaction per simulated minute), not over HTTP: the receiver marks a trace complete when its
root arrives (now), which is all the scoring needs, and posting a day of traces over loopback would
only make the script slow. They are then scored as ``assay monitor backfill --config`` scores
them (:meth:`assay.monitor.scoring.OnlineScorer.run_pass`: the hash sample at ``--sample``, the
engine of ``assay eval``) with ``tool_errors`` (the number of failed tool calls of a trace: no
judge model), and the alert rules are decided window by window by the same
:class:`assay.monitor.alerts.AlertChecker` that ``assay monitor check`` runs, once per window as it
closes (``now`` at each window's end, over the last ``--since`` as a cron job running
``assay monitor check --since 1h`` would; a rule's state carries over through the recorded alerts).

The rules (``--rules``, default ``tool_errors.mean<=0.3`` and ``no-regression``) are those of a
monitor.yaml; the sample rate's noise is what differs between seeds (the trace ids, hence the
sample, and the failures are drawn from the seed).

    python benchmarks/bench_monitor_alerts.py                          # 5 seeds, 24 h + 6 h, 15m windows
    python benchmarks/bench_monitor_alerts.py --window 5m --rate 8 --seeds 10
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

NS = 1_000_000_000


def messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def trace_spans(rng: random.Random, start_ns: int, fail_rate: float, tools: int) -> list:
    """One trace of the app: a root, a chat call, ``tools`` tool calls that fail at ``fail_rate``."""
    from assay.formats.otlp import Span

    tid = rng.getrandbits(128).to_bytes(16, "big").hex()
    ids = [rng.getrandbits(64).to_bytes(8, "big").hex() for _ in range(2 + tools)]
    res = {"service.name": "shop-assistant"}
    q = rng.randrange(10_000)
    end = start_ns + 1_500_000_000
    out = [Span(tid, ids[0], None, "invoke_agent shop", "INTERNAL", start_ns, end, "UNSET", "",
                {"gen_ai.operation.name": "invoke_agent"}, [], res, "shop.app"),
           Span(tid, ids[1], ids[0], "chat gpt-4o-mini", "CLIENT", start_ns + 1000, end - 1000, "UNSET", "",
                {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                 "gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 12,
                 "gen_ai.input.messages": messages("user", f"Where is my order {q}?"),
                 "gen_ai.output.messages": messages("assistant", f"Order {q} ships tomorrow.")}, [], res, "shop.app")]
    for k in range(tools):
        failed = rng.random() < fail_rate
        out.append(Span(tid, ids[2 + k], ids[1], "execute_tool search", "INTERNAL", start_ns + 2000 + k,
                        start_ns + 500_000_000, "ERROR" if failed else "UNSET",
                        "search backend timed out" if failed else "",
                        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                         "gen_ai.tool.call.arguments": json.dumps({"order": q})}, [], res, "shop.app"))
    return out


def simulate(store, a: argparse.Namespace, seed: int, t0_ns: int) -> tuple[int, int]:
    """Write the day and the period after it; returns (traces, drop start in ns)."""
    from assay.monitor.decode import span_row
    from assay.store.spans import SpanLog

    rng = random.Random(seed)
    log = SpanLog(store)
    w = int(a.window_s * NS)
    day_end = t0_ns + int(a.hours * 3600 * NS)
    drop_ns = day_end + int(a.drop_at * 3600 * NS) // w * w + rng.randrange(w)
    end = day_end + int(a.after * 3600 * NS)
    minute, n, t = 60 * NS, 0, t0_ns
    while t < end:
        rows = []
        k = _poisson(rng, a.rate)     # traces per simulated minute
        for _ in range(k):
            start = t + rng.randrange(minute)
            rate = a.bad_rate if start >= drop_ns else a.good_rate
            rows.extend(span_row(s) for s in trace_spans(rng, start, rate, a.tools))
        if rows:
            log.write(rows, time.time())
        n += k
        t += minute
    return n, drop_ns


def _poisson(rng: random.Random, lam: float) -> int:
    """A Poisson draw (Knuth; lam is small)."""
    import math

    limit, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def config_text(a: argparse.Namespace) -> str:
    rules = "".join(f"      - {r}\n" for r in a.rules)
    return (f"metrics:\n  tool_errors:\n    sample: {a.sample}\n    window: {a.window}\n"
            f"    min_traces: {a.min_traces}\n    alerts:\n{rules}")


def run_seed(a: argparse.Namespace, seed: int, tmp: Path) -> dict:
    from assay.monitor.alerts import AlertChecker
    from assay.monitor.config import parse_config
    from assay.monitor.scoring import OnlineScorer
    from assay.store import Store

    cfg = parse_config(config_text(a), "monitor.yaml")
    w = int(a.window_s * NS)
    t0_ns = (time.time_ns() - int((a.hours + a.after + 1) * 3600 * NS)) // (24 * 3600 * NS) * (24 * 3600 * NS)
    store = Store(str(tmp / f"seed{seed}.db"))
    try:
        c0 = time.perf_counter()
        traces, drop_ns = simulate(store, a, seed, t0_ns)
        c1 = time.perf_counter()
        scorer = OnlineScorer(store, cfg)
        got = scorer.run_pass(everything=True)["tool_errors"]
        c2 = time.perf_counter()
        checker = AlertChecker(store, cfg)
        day_end = t0_ns + int(a.hours * 3600 * NS)
        end = day_end + int(a.after * 3600 * NS)
        events = []
        look = max(int(a.since_s * NS), 2 * w)
        for k in range(1, (end - t0_ns) // w + 1):   # `check --since` run as each window closes
            now = t0_ns + k * w
            rep = checker.check(max(t0_ns, now - look), now_ns=now)
            events.extend(ev for ev in rep["events"] if ev["state"] == "firing")
        c3 = time.perf_counter()
        wins = AlertChecker(store, cfg, record=False).check(t0_ns, now_ns=end)["metrics"]["tool_errors"]["windows"]
    finally:
        store.close()
    false = [ev for ev in events if ev["window_start_ns"] < day_end]
    drop_win = drop_ns // w * w
    before = [ev for ev in events if day_end <= ev["window_start_ns"] < drop_win]   # unchanged still, after the day
    after = [ev for ev in events if ev["window_start_ns"] >= drop_win]
    first = min((ev["window_start_ns"] for ev in after), default=None)
    scored = [x["traces"] for x in wins]
    return {"seed": seed, "traces": traces, "scored": got["scored"], "errored": got["errored"],
            "windows_day": sum(1 for x in wins if x["start_ns"] < day_end),
            "scored_per_window": (min(scored), sum(scored) / len(scored), max(scored)) if scored else (0, 0, 0),
            "false": len(false), "false_before_drop": len(before), "false_rules": sorted({ev["rule"] for ev in false}),
            "false_detail": [(ev["rule"], ev["window_start_ns"], ev["figure"], ev["ci_low"], ev["ci_high"], ev["n"])
                             for ev in false + before],
            "to_first": None if first is None else (first - drop_win) // w + 1,
            "first_rule": sorted({ev["rule"] for ev in after if ev["window_start_ns"] == first}),
            "times": (c1 - c0, c2 - c1, c3 - c2)}


def main() -> None:
    from assay.monitor.alerts import when
    from assay.monitor.config import duration

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--hours", type=float, default=24.0, help="hours of the unchanged app")
    ap.add_argument("--after", type=float, default=6.0, help="hours simulated after the day (the drop is in them)")
    ap.add_argument("--drop-at", type=float, default=2.0, help="hours into the period after the day the drop starts")
    ap.add_argument("--rate", type=float, default=4.0, help="traces per simulated minute (Poisson)")
    ap.add_argument("--tools", type=int, default=2, help="tool calls per trace")
    ap.add_argument("--good-rate", type=float, default=0.05, help="a tool call's failure rate, unchanged app")
    ap.add_argument("--bad-rate", type=float, default=0.4, help="a tool call's failure rate after the drop")
    ap.add_argument("--sample", type=float, default=0.25)
    ap.add_argument("--window", default="15m")
    ap.add_argument("--min-traces", type=int, default=5)
    ap.add_argument("--since", default="1h", help="the period each `check` looks at (as --since; at least 2 windows)")
    ap.add_argument("--rules", nargs="+", default=["tool_errors.mean<=0.3", "no-regression"])
    a = ap.parse_args()
    a.window_s, a.since_s = duration(a.window), duration(a.since)
    print(f"tool_errors, sample {a.sample:g}, window {a.window}, rules {a.rules}; {a.rate:g} traces/min, "
          f"{a.tools} tool calls per trace failing at {a.good_rate:g} (unchanged) / {a.bad_rate:g} (after the drop); "
          f"{a.hours:g} h unchanged, then the drop {a.drop_at:g} h (+ a random offset) into {a.after:g} h more")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for seed in range(1, a.seeds + 1):
            r = run_seed(a, seed, Path(d))
            rows.append(r)
            lo, mean, hi = r["scored_per_window"]
            print(f"  seed {seed}: {r['traces']} traces, {r['scored']} scored ({r['errored']} errored), scored per "
                  f"window {lo}/{mean:.1f}/{hi} (min/mean/max); write {r['times'][0]:.1f} s, score "
                  f"{r['times'][1]:.1f} s, check {r['times'][2]:.1f} s", flush=True)
            for rule, ws, fig, lo_, hi_, n in r["false_detail"]:
                print(f"    false alert: {rule} in the window from {when(ws)}: {fig:.3g} [{lo_:.3g}, {hi_:.3g}] over {n}")
    print()
    print(f"{'seed':>4}  {'windows (24 h)':>14}  {'false alerts (24 h)':>19}  {'false, day to drop':>18}  "
          f"{'windows to first alert':>22}  first rule")
    for r in rows:
        first = "never" if r["to_first"] is None else str(r["to_first"])
        print(f"{r['seed']:>4}  {r['windows_day']:>14}  {r['false']:>19}  {r['false_before_drop']:>18}  {first:>22}  "
              f"{','.join(r['first_rule'])}")
    total = sum(r["false"] + r["false_before_drop"] for r in rows)
    worst = [r["to_first"] for r in rows]
    ok = all(x is not None and x <= 2 for x in worst)
    print(f"false alerts over {len(rows)} unchanged days (and the hours before the drop): {total} (goal: 0)  "
          f"{'MET' if total == 0 else 'NOT MET'}")
    print(f"windows to the first alert after the drop: {worst} (goal: <= 2; 1 = the window the drop starts in)  "
          f"{'MET' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main()
