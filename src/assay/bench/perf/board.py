"""The perf kind's columns on the leaderboard (:mod:`assay.bench.board`).

*latency index* (mean TTFT, s) and *throughput index* (mean GTPS, tok/s) of one point of the perf
run: comparable only at the same workload — API, streaming, token shape (input / output tokens,
shared prefix, burstiness) and load (the concurrency or the request rate). The workload most models
were measured at is picked for every model that has it; a model without it shows its lowest load in
a separate column pair, with a note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from assay.bench.board import Column, Group, Row, finite, keyed
from assay.bench.perf.compare import COMPARABLE_SETTINGS, point_key
from assay.bench.perf.summary import PerfPoint, PerfSummary


def workload(summary: PerfSummary | Mapping[str, Any], point: PerfPoint | Mapping[str, Any]) -> tuple[tuple, str]:
    """A perf point's workload: what must agree for two latency or throughput indexes to be
    comparable — ``(signature, label)``."""
    summary = PerfSummary.load_or_empty(summary)
    st = summary.settings
    load_kind, load = point_key(point)
    shape = tuple((k, st.get(k)) for k in COMPARABLE_SETTINGS if k != "burstiness" or load_kind == "rate")
    sig = (("api", summary.api), ("stream", summary.stream), *shape, (load_kind, load))
    tokens = f"{_n(st.input_tokens)}→{_n(st.output_tokens)} tokens"
    extra = [f"shared prefix {_n(st.shared_prefix)}"] if st.shared_prefix else []
    if st.get("workload"):
        extra.append(str(st.get("workload")))
    if load_kind == "rate" and st.burstiness not in (None, 1, 1.0):
        extra.append(f"burstiness {_n(st.burstiness)}")
    how = f"{summary.api or '?'}" + ("" if summary.stream in (None, True) else ", not streamed")
    at = f"concurrency {load:g}" if load_kind == "concurrency" else f"{load:g} req/s"
    return sig, ", ".join([at, tokens, *extra, how])


def _n(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def add_columns(recs: list[tuple[Any, dict[str, Any]]], rows: dict[Any, Row], columns: list[Column],
                groups: list[Group], notes: list[str]) -> None:
    """The latency and throughput index columns of the perf runs ``recs`` (oldest first), one pair per
    workload; the workload most models were measured at is picked for every model that has it."""
    cands: dict[Any, list[tuple[tuple, str, float, PerfPoint]]] = {}
    for rid, rec in recs:
        s = PerfSummary.load_or_empty(rec.get("details"))
        cands[rid] = []
        for p in s.points:
            sig, label = workload(s, p)
            cands[rid].append((sig, label, point_key(p)[1], p))
    # the workload the most models were measured at (ties: the lowest load), for everyone who has it
    count = Counter(sig for c in cands.values() for sig in {x[0] for x in c})
    load_of = {x[0]: x[2] for c in cands.values() for x in c}
    common = sorted(count, key=lambda g: (-count[g], load_of[g], str(g)))[0] if count else None
    chosen: dict[tuple, list[Any]] = {}
    labels: dict[tuple, str] = {}
    for rid, c in cands.items():
        if not c:
            rows[rid].flags.append("perf run has no points")
            continue
        hit = next((x for x in c if x[0] == common), None) or min(c, key=lambda x: x[2])
        sig, label, _, p = hit
        chosen.setdefault(sig, []).append((rid, p))
        labels[sig] = label
        rows[rid].workload = label
        if p.validity.valid is False:
            reasons = "; ".join(str(x) for x in p.validity.reasons)
            rows[rid].flags.append(f"the perf point ({label}) is not a valid measurement" +
                                   (f": {reasons}" if reasons else ""))
    ordered = sorted(chosen, key=lambda g: (g != common, -len(chosen[g]), load_of[g], str(g)))
    for n, sig in enumerate(ordered):
        lk, tk = keyed("latency_index", n), keyed("throughput_index", n)
        at = "" if len(ordered) == 1 else f" (workload {n + 1})"
        columns.append(Column(lk, "latency index" + at, "perf", "s", "low", lk,
                              f"mean TTFT at {labels[sig]}"))
        columns.append(Column(tk, "throughput index" + at, "perf", "tok/s", "high", lk,
                              f"mean GTPS (output tokens per second per request) at {labels[sig]}"))
        groups.append(Group("perf", lk, "workload: " + labels[sig], [rows[r].model for r, _ in chosen[sig]],
                            dict(sig)))
        for rid, p in chosen[sig]:
            for key, name, metric in ((lk, "latency_index", "ttft"), (tk, "throughput_index", "gtps")):
                v = getattr(p, name)
                if not finite(v):
                    v = p.metric(metric).mean
                rows[rid].values[key] = float(v) if finite(v) else None
                ci = p.metric(metric).interval("mean")
                if isinstance(ci, Sequence) and len(ci) == 2 and finite(ci[0]) and finite(ci[1]):
                    rows[rid].ci[key] = (float(ci[0]), float(ci[1]))
        if n:
            who = ", ".join(rows[r].model for r, _ in chosen[sig])
            notes.append(f"latency and throughput: workload {n + 1} ({who}) "
                         f"is shown apart from workload 1 because it was measured at {labels[sig]}, not at "
                         f"{labels[ordered[0]]}")


__all__ = ["add_columns", "workload"]
