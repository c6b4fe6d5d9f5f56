"""Comparing stored serving-performance runs, and summarising the scheduled repeats of one.

:func:`compare_perf` matches the points of two perf runs (docs/bench.md) by their load: the
same concurrency (a sequential run is concurrency 1) or the same request rate. For each
matched point and each figure compared (:data:`assay.bench.perf.figures.COMPARED`: ``ttft``, ``itl``,
``tpot``, ``e2e``, ``gtps`` and ``ttps``) it gives
run A's and run B's mean, p50 and p99, the difference ``B - A`` and the ratio ``B / A``, each
with a 95% bootstrap interval (:func:`assay.stats.bootstrap_diff`: the two runs' samples are
resampled independently, fixed seed), and a verdict:

- ``"faster"``: the interval of the difference leaves out 0 on the good side (lower for the
  latencies, higher for the token rates ``gtps`` and ``ttps``);
- ``"slower"``: it leaves out 0 on the bad side;
- ``"no clear difference"``: it holds 0.

Each statistic has its verdict; a metric's verdict is its mean's. Without stored samples a
statistic gets the two summary values and no interval (verdict None). A point where either run
completed fewer than :data:`MIN_COMPARED` requests gets its values and no intervals or verdicts,
with a warning: one request is no ground for "slower". A point that is not valid (too many
failures among the reasons) is warned about.

:func:`track_aggregate` summarises the runs that share a ``track`` (scheduled repeats of one
benchmark, as a public leaderboard runs one every hour for two weeks): per point and metric,
the mean, p50 and p99 of every repeat, and across repeats their mean, spread (standard
deviation, min, max, coefficient of variation), the standard error of their mean and its 95%
interval (Student's t; "too few", no interval, under :data:`~assay.bench.perf.measure.MIN_INTERVAL_N`
repeats). A track is the runs stored with that track (``--track``, or ``--repeat`` under one
``--name``) and the runs named so (``--name nightly`` run every night makes the track ``nightly``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from assay.bench.perf.figures import COMPARED, HIGHER_IS_BETTER, unit
from assay.bench.perf.measure import MIN_INTERVAL_N, t_interval
from assay.bench.perf.summary import Distribution, PerfPoint, PerfSummary
from assay.errors import AssayError
from assay.stats import BOOTSTRAP_RESAMPLES, bootstrap_diff
from assay.store import Store

STATS = ("mean", "p50", "p99")
THROUGHPUTS = ("request_throughput", "output_throughput", "total_token_throughput")
# Settings that must agree for two runs' latencies to be comparable.
COMPARABLE_SETTINGS = ("input_tokens", "output_tokens", "shared_prefix", "burstiness", "workload")
FASTER, SLOWER, UNCLEAR = "faster", "slower", "no clear difference"
# The fewest completed requests a point of each run needs for compare to give intervals and verdicts.
MIN_COMPARED = 10


def point_key(point: PerfPoint | Mapping[str, Any]) -> tuple[str, float]:
    """A point's load: ``("concurrency", c)`` or ``("rate", r)``; a sequential point (or one
    with neither set) is concurrency 1."""
    p = point if isinstance(point, PerfPoint) else PerfPoint.read(point)
    if p.concurrency is not None:
        return "concurrency", float(p.concurrency)
    if p.rate is not None:
        return "rate", float(p.rate)
    return "concurrency", 1.0


def workload_name(settings: Any) -> str:
    """A run's workload fingerprint (``settings.workload``): ``synthetic`` for the fixed-length prompts
    of ``--input-tokens`` (runs before the fingerprint was recorded included), else what the run
    wrote (``replay mooncake sha256:… x1``, ``sessions …``, ``lora …``)."""
    return str(settings.get("workload") or "synthetic")


def point_label(point: PerfPoint | Mapping[str, Any]) -> str:
    kind, v = point_key(point)
    n = f"{v:g}"
    return f"concurrency {n}" if kind == "concurrency" else f"rate {n} req/s"


def describe_points(headline: Any) -> str:
    """``c=1,4,16`` or ``rate=2,4`` from a perf benchmark's headline per point (its ``metrics``)."""
    pts = [p for p in (headline if isinstance(headline, list) else []) if isinstance(p, dict)]
    conc = [float(p["concurrency"]) for p in pts if p.get("concurrency") is not None]
    rate = [float(p["rate"]) for p in pts if p.get("rate") is not None]
    parts = (["c=" + ",".join(f"{c:g}" for c in conc)] if conc else []) + \
            (["rate=" + ",".join(f"{r:g}" for r in rate)] if rate else [])
    return " ".join(parts) or str(len(pts))


def validity_text(headline: Any) -> str:
    """``yes``, ``no (k of n)`` (points not valid) or ``—`` (not recorded)."""
    pts = [p for p in (headline if isinstance(headline, list) else []) if isinstance(p, dict)]
    if not pts or all(p.get("valid") is None for p in pts):
        return "—"
    bad = sum(1 for p in pts if p.get("valid") is False)
    return "yes" if not bad else f"no ({bad} of {len(pts)})"


def verdict(low: float | None, high: float | None, higher_is_better: bool) -> str | None:
    """``faster`` / ``slower`` / ``no clear difference`` from the interval of ``B - A``."""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    if low > 0 or high < 0:
        return FASTER if (low > 0) == higher_is_better else SLOWER
    return UNCLEAR


def load_perf(store: Store, ref: str) -> dict[str, Any]:
    """A stored perf run: its store record (``ref``, ``name``, ``model``, ``created_at``,
    ``track``, ...), ``summary`` (the docs/bench.md dict) and ``samples`` (per point)."""
    rec = store.get_benchmark(ref, kind="perf")
    summary = rec.get("details") or {}
    if not isinstance(summary.get("points"), list):
        raise AssayError(f"benchmark {rec['ref']} holds no perf points")
    return {**{k: v for k, v in rec.items() if k not in ("details", "metrics")}, "summary": summary,
            "samples": store.benchmark_samples(rec["id"])}


def _finite(v: Any) -> np.ndarray | None:
    if v is None:
        return None
    a = np.asarray(v, dtype=np.float64)
    a = a[np.isfinite(a)]
    return a if len(a) else None


def _stat_entry(metric: str, stat: str, a_dist: Distribution, b_dist: Distribution,
                a_samples: np.ndarray | None, b_samples: np.ndarray | None, *, seed: int,
                resamples: int, too_few: bool = False) -> dict[str, Any]:
    hib = metric in HIGHER_IS_BETTER
    if too_few:
        a = statistic_of(a_samples, stat) if a_samples is not None else getattr(a_dist, stat)
        b = statistic_of(b_samples, stat) if b_samples is not None else getattr(b_dist, stat)
        diff = None if a is None or b is None else b - a
        return {"a": a, "b": b, "diff": diff, "diff_ci": None, "ratio": None if diff is None or not a else b / a,
                "ratio_ci": None, "verdict": None, "method": f"too few (under {MIN_COMPARED} completed requests)"}
    if a_samples is not None and b_samples is not None:
        d = bootstrap_diff(a_samples, b_samples, stat, seed=seed, resamples=resamples)
        return {"a": d["a"], "b": d["b"], "diff": d["diff"], "diff_ci": [d["diff_low"], d["diff_high"]],
                "ratio": d["ratio"], "ratio_ci": None if d["ratio_low"] is None else [d["ratio_low"], d["ratio_high"]],
                "verdict": verdict(d["diff_low"], d["diff_high"], hib), "method": d["method"]}
    a, b = getattr(a_dist, stat), getattr(b_dist, stat)
    diff = None if a is None or b is None else b - a
    ratio = None if diff is None or not a else b / a
    return {"a": a, "b": b, "diff": diff, "diff_ci": None, "ratio": ratio, "ratio_ci": None, "verdict": None,
            "method": "no samples stored"}


def statistic_of(v: np.ndarray, stat: str) -> float:
    """``mean`` or ``pNN`` of ``v``."""
    return float(v.mean()) if stat == "mean" else float(np.percentile(v, float(stat[1:])))


def _completed(point: PerfPoint, samples: Mapping[str, Any]) -> int | None:
    """A point's completed requests: as its summary says, else as many as its TTFT / E2E samples."""
    if isinstance(point.requests.ok, int):
        return point.requests.ok
    for m in ("e2e", "ttft"):
        if samples.get(m) is not None:
            return len(samples[m])
    return None


def _point_warnings(label: str, counts: dict[str, int | None], points: dict[str, PerfPoint]) -> list[str]:
    """What to say of a matched point: too few completed requests; not valid (too many failures among
    the reasons)."""
    out: list[str] = []
    few = {k: n for k, n in counts.items() if n is not None and n < MIN_COMPARED}
    if few:
        who = ", ".join(f"run {k} {n}" for k, n in few.items())
        out.append(f"{label}: fewer than {MIN_COMPARED} completed requests ({who}): values shown, "
                   "no intervals or verdicts")
    for side, point in points.items():
        val = point.validity
        if val.valid is False:
            why = "; ".join(str(r) for r in val.reasons) or "no reason given"
            out.append(f"run {side} at {label} is not a valid measurement: {why}")
    return out


def compare_points(summary_a: PerfSummary | Mapping[str, Any], samples_a: Mapping[int, Mapping[str, Any]],  # noqa: C901
                   summary_b: PerfSummary | Mapping[str, Any], samples_b: Mapping[int, Mapping[str, Any]], *,
                   seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """The comparison of two perf summaries and their samples (see the module docstring):
    ``{"points": [...], "unmatched": {"a": [labels], "b": [labels]}, "warnings": [...]}``."""
    summary_a, summary_b = PerfSummary.load(summary_a), PerfSummary.load(summary_b)
    pa = list(summary_a.points)
    pb = list(summary_b.points)
    b_at: dict[tuple[str, float], int] = {}
    for j, p in enumerate(pb):
        b_at.setdefault(point_key(p), j)
    points: list[dict[str, Any]] = []
    warnings: list[str] = []
    matched_b: set[int] = set()
    for i, p in enumerate(pa):
        j = b_at.get(point_key(p))
        if j is None or j in matched_b:
            continue
        matched_b.add(j)
        q = pb[j]
        kind, load = point_key(p)
        entry: dict[str, Any] = {"label": point_label(p), "kind": kind, "load": load, "a_index": i, "b_index": j,
                                 "valid": {"a": p.validity.valid, "b": q.validity.valid},
                                 "requests": {"a": p.raw("requests"), "b": q.raw("requests")},
                                 "throughput": {}, "metrics": {}}
        for t in THROUGHPUTS:
            x, y = getattr(p, t), getattr(q, t)
            entry["throughput"][t] = {"a": x, "b": y, "diff": None if x is None or y is None else y - x,
                                      "ratio": None if x is None or y is None or not x else y / x}
        sa, sb = samples_a.get(i) or {}, samples_b.get(j) or {}
        counts = {"A": _completed(p, sa), "B": _completed(q, sb)}
        too_few = any(n is not None and n < MIN_COMPARED for n in counts.values())
        for m in COMPARED:
            da, db = p.metric(m), q.metric(m)
            xa, xb = _finite(sa.get(m)), _finite(sb.get(m))
            if da.is_empty() and db.is_empty() and xa is None and xb is None:
                continue
            stats = {s: _stat_entry(m, s, da, db, xa, xb, seed=seed, resamples=resamples, too_few=too_few)
                     for s in STATS}
            entry["metrics"][m] = {
                "unit": unit(m), "higher_is_better": m in HIGHER_IS_BETTER,
                "n": {"a": len(xa) if xa is not None else da.n, "b": len(xb) if xb is not None else db.n},
                "samples": xa is not None and xb is not None, "verdict": stats["mean"]["verdict"], "stats": stats}
        entry["too_few"] = too_few
        warnings += _point_warnings(entry["label"], counts, {"A": p, "B": q})
        if not too_few and not any(e["samples"] for e in entry["metrics"].values()):
            warnings.append(f"{entry['label']}: no samples stored for both runs, so no intervals or verdicts")
        points.append(entry)
    unmatched = {"a": [point_label(p) for i, p in enumerate(pa) if i not in {e["a_index"] for e in points}],
                 "b": [point_label(p) for j, p in enumerate(pb) if j not in matched_b]}
    if not points:
        warnings.append("the runs share no load point (the same concurrency or the same rate): nothing to compare")
    sa_, sb_ = summary_a.settings, summary_b.settings
    for k in COMPARABLE_SETTINGS:
        if sa_.get(k) != sb_.get(k):
            warnings.append(f"the runs differ in {k}: {sa_.get(k)!r} against {sb_.get(k)!r}")
    for k in ("api", "stream", "clock"):
        if getattr(summary_a, k) != getattr(summary_b, k):
            warnings.append(f"the runs differ in {k}: {getattr(summary_a, k)!r} against {getattr(summary_b, k)!r}")
    return {"points": points, "unmatched": unmatched, "warnings": warnings}


def _run_facts(run: Mapping[str, Any]) -> dict[str, Any]:
    s = PerfSummary.load(run.get("summary"))
    return {"ref": run.get("ref"), "id": run.get("id"), "name": run.get("name"), "model": run.get("model"),
            "endpoint": s.endpoint, "mode": s.mode, "created_at": run.get("created_at"),
            "track": run.get("track"), "settings": s.raw("settings")}


def compare_perf(store: Store, ref_a: str, ref_b: str, *, seed: int = 0,
                 resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """Two stored perf runs compared point by point: ``{"a": run, "b": run, "seed",
    "resamples", "level", "points", "unmatched", "warnings"}`` (see :func:`compare_points`)."""
    a, b = load_perf(store, ref_a), load_perf(store, ref_b)
    if a["id"] == b["id"]:
        raise AssayError(f"compare: {ref_a!r} and {ref_b!r} are the same run ({a['ref']})")
    wa, wb = (workload_name(PerfSummary.load(x["summary"]).settings) for x in (a, b))
    if wa != wb:
        raise AssayError(f"compare: {a['ref']} and {b['ref']} ran different workloads ({wa} against {wb}); "
                         "their figures are not comparable")
    cmp = compare_points(a["summary"], a["samples"], b["summary"], b["samples"], seed=seed, resamples=resamples)
    return {"a": _run_facts(a), "b": _run_facts(b), "seed": seed, "resamples": resamples, "level": 0.95, **cmp}


# -- scheduled repeats --------------------------------------------------------------------------
def _spread(values: Sequence[float]) -> dict[str, Any]:
    """Repeats' values: count, mean, standard deviation, standard error, min, max, CV, and the mean's
    95% Student's t interval (None, "too few", under ``MIN_INTERVAL_N`` repeats)."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    if not len(v):
        return {"n": 0, "mean": None, "std": None, "se": None, "min": None, "max": None, "cv": None,
                "ci95_low": None, "ci95_high": None}
    mean = float(v.mean())
    std = float(v.std(ddof=1)) if len(v) > 1 else None
    se = std / math.sqrt(len(v)) if std is not None else None
    lo = hi = None
    if len(v) >= MIN_INTERVAL_N:
        lo, hi, se = t_interval(v)
    return {"n": int(len(v)), "mean": mean, "std": std, "se": se, "min": float(v.min()), "max": float(v.max()),
            "cv": std / abs(mean) if mean and std is not None else None, "ci95_low": lo, "ci95_high": hi}


def aggregate_repeats(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per load point of ``runs`` (records with ``summary``, oldest first): every repeat's
    values and their spread. See :func:`track_aggregate`."""
    by_key: dict[tuple[str, float], dict[str, Any]] = {}
    for r_i, run in enumerate(runs):
        for p in PerfSummary.load(run.get("summary")).points:
            key = point_key(p)
            agg = by_key.setdefault(key, {"label": point_label(p), "kind": key[0], "load": key[1],
                                          "series": [], "metrics": {}, "throughput": {}})
            row: dict[str, Any] = {"run": r_i, "ref": run.get("ref"), "created_at": run.get("created_at"),
                                   "valid": p.validity.valid}
            for m in COMPARED:
                dist = p.metric(m)
                for s in STATS:
                    row[f"{m}_{s}"] = getattr(dist, s)
            for t in THROUGHPUTS:
                row[t] = getattr(p, t)
            agg["series"].append(row)
    out = []
    for key in sorted(by_key, key=lambda k: (k[0] != "concurrency", k[1])):
        agg = by_key[key]
        rows = agg["series"]
        agg["repeats"] = len(rows)
        agg["valid"] = sum(1 for r in rows if r["valid"])
        for m in COMPARED:
            if any(r[f"{m}_{s}"] is not None for r in rows for s in STATS):
                agg["metrics"][m] = {s: _spread([r[f"{m}_{s}"] for r in rows]) for s in STATS}
        for t in THROUGHPUTS:
            agg["throughput"][t] = _spread([r[t] for r in rows])
        out.append(agg)
    return out


def track_runs(store: Store, track: str, *, limit: int | None = None) -> list[dict[str, Any]]:
    """The perf runs of ``track``, newest first: those stored with the track and those named so."""
    by_track = store.list_benchmarks(kind="perf", track=track)
    seen = {r["id"] for r in by_track}
    named = [r for r in store.list_benchmarks(kind="perf", details=False)
             if r.get("name") == track and r["id"] not in seen]
    recs = by_track + [store.get_benchmark(r["ref"], kind="perf") if r.get("ref") else r for r in named]
    recs.sort(key=lambda r: (r.get("created_at") or 0.0, r["id"]), reverse=True)
    return recs[:limit] if limit is not None else recs


def _track_warnings(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Where the runs of a track differ in what makes their figures comparable."""
    out = []
    summaries = [PerfSummary.load_or_empty(r.get("summary")) for r in runs]
    for what, get in (("model", lambda s: s.model), ("api", lambda s: s.api), ("stream", lambda s: s.stream),
                      *((k, lambda s, k=k: s.settings.get(k)) for k in COMPARABLE_SETTINGS)):
        vals = sorted({repr(get(s)) for s in summaries})
        if len(vals) > 1:
            out.append(f"the runs differ in {what}: {', '.join(vals)}")
    return out


def track_aggregate(store: Store, track: str, *, limit: int | None = None) -> dict[str, Any]:
    """The perf runs of ``track`` (:func:`track_runs`; the newest ``limit`` of them), oldest first,
    and per load point the metrics across them: ``{"track", "runs": [{ref, name, model, created_at,
    track}], "first", "last", "warnings", "points": [{label, kind, load, repeats, valid, series: [per
    run], metrics: {metric: {stat: {n, mean, std, se, min, max, cv, ci95_low, ci95_high}}},
    throughput: {...}}]}``."""
    recs = track_runs(store, track, limit=limit)
    if not recs:
        raise AssayError(f"no perf run has the track {track!r}, nor the name (see `assay bench list`)")
    recs.reverse()
    runs = [{"ref": r["ref"], "name": r["name"], "model": r["model"], "created_at": r["created_at"],
             "track": r.get("track"), "summary": r.get("details") or {}} for r in recs]
    return {"track": track, "runs": [{k: v for k, v in r.items() if k != "summary"} for r in runs],
            "first": runs[0]["created_at"], "last": runs[-1]["created_at"], "warnings": _track_warnings(runs),
            "points": aggregate_repeats(runs)}
