"""Comparing runs metric by metric and row by row (SPEC §4).

For each metric output the runs share, every run after the first is compared with the
first (the baseline). Rows are matched by row id (by position when a run has no ids):
on the matched rows, the difference of means and a 95% bootstrap interval of the mean
per-row difference (the paired bootstrap, :func:`assay.engine.aggregate.confidence_interval`);
when no row matches (different data), the difference of the two means with a normal
interval ``±1.96·√(s₁²/n₁ + s₂²/n₂)``. A difference is *significant* when its interval
leaves out zero. "Worse" follows the metric's direction (lower is better for harms).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import orjson
from sqlalchemy import and_, or_, select

from assay.engine.aggregate import confidence_interval
from assay.errors import AssayError
from assay.store import schema as S
from assay.store.store import Store, _load_value


def _scores(store: Store, run_id: str, output: str) -> tuple[list[str], np.ndarray]:
    """Keys (row id, else position) and scores of the run's completed rows for ``output``."""
    q = (select(S.rows.c.idx, S.rows.c.row_id, S.scores.c.score)
         .join(S.scores, and_(S.scores.c.run_id == S.rows.c.run_id, S.scores.c.idx == S.rows.c.idx))
         .where(S.rows.c.run_id == run_id, S.scores.c.output == output, S.scores.c.status == "completed",
                S.scores.c.score.is_not(None))
         .order_by(S.rows.c.idx))
    keys: list[str] = []
    vals: list[float] = []
    with store.engine.connect() as conn:
        for idx, row_id, score in conn.execute(q):
            keys.append(row_id if row_id is not None else f"#{idx}")
            vals.append(score)
    return keys, np.asarray(vals, dtype=np.float64)


def _match(a_keys: list[str], a: np.ndarray, b_keys: list[str], b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos = {k: i for i, k in enumerate(a_keys)}
    ia, ib = [], []
    for j, k in enumerate(b_keys):
        i = pos.get(k)
        if i is not None:
            ia.append(i)
            ib.append(j)
    return a[ia], b[ib]


def _difference(a_keys: list[str], a: np.ndarray, b_keys: list[str], b: np.ndarray) -> dict[str, Any]:
    pa, pb = _match(a_keys, a, b_keys, b)
    if len(pa):
        d = pb - pa
        lo, hi, method = confidence_interval(d)
        delta = float(d.mean())
        paired, n = True, len(d)
        method = f"paired {method}"
    elif len(a) and len(b):
        delta = float(b.mean() - a.mean())
        se = math.sqrt((a.var(ddof=1) if len(a) > 1 else 0.0) / len(a) + (b.var(ddof=1) if len(b) > 1 else 0.0) / len(b))
        lo, hi = delta - 1.96 * se, delta + 1.96 * se
        paired, n, method = False, 0, "normal (unpaired)"
    else:
        return {"delta": None, "ci95_low": None, "ci95_high": None, "significant": None, "paired": False,
                "matched": 0, "ci_method": None}
    return {"delta": delta, "ci95_low": lo, "ci95_high": hi, "significant": bool(lo > 0 or hi < 0),
            "paired": paired, "matched": n, "ci_method": method}


def compare_runs(store: Store, refs: Sequence[str]) -> dict[str, Any]:
    """``{"runs": [run, ...], "metrics": [{output, metric, higher_is_better, runs: [{mean, n,
    pass_rate, defect_rate}], deltas: [None, {delta, ci95_low, ci95_high, significant, paired,
    matched, better}]}]}`` — one entry per output the first run has."""
    if len(refs) < 2:
        raise AssayError("compare needs at least two runs")
    runs = [store.get_run(r) for r in refs]
    ids = [r["id"] for r in runs]
    if len(set(ids)) < len(ids):
        raise AssayError("compare: the same run is named twice")
    base = runs[0]
    out: list[dict[str, Any]] = []
    for output, agg in (base.get("aggregates") or {}).items():
        hib = agg.get("higher_is_better", True)
        entry: dict[str, Any] = {"output": output, "metric": agg.get("metric", output), "higher_is_better": hib,
                                 "runs": [], "deltas": []}
        base_keys, base_vals = _scores(store, base["id"], output)
        for r in runs:
            a = (r.get("aggregates") or {}).get(output)
            entry["runs"].append(None if a is None else {
                "mean": a.get("mean"), "n": a.get("evaluated"), "pass_rate": a.get("pass_rate"),
                "defect_rate": a.get("defect_rate"), "ci95_low": a.get("ci95_low"), "ci95_high": a.get("ci95_high"),
                "errored": a.get("errored"), "skipped": a.get("skipped")})
            if r is base:
                entry["deltas"].append(None)
                continue
            if a is None:
                entry["deltas"].append(None)
                continue
            keys, vals = _scores(store, r["id"], output)
            d = _difference(base_keys, base_vals, keys, vals)
            if d["delta"] is not None:
                d["better"] = None if not d["significant"] else (d["delta"] > 0) == hib
            entry["deltas"].append(d)
        out.append(entry)
    return {"runs": runs, "metrics": out}


def worse_rows(store: Store, base_ref: str, other_ref: str, output: str, limit: int = 50) -> list[dict[str, Any]]:
    """Rows matched by id whose ``output`` score got worse from the base run to the other,
    the biggest drops first, with both scores, results and reasons and the row's inputs."""
    base, other = store.get_run(base_ref), store.get_run(other_ref)
    agg = (base.get("aggregates") or {}).get(output) or (other.get("aggregates") or {}).get(output)
    if agg is None:
        raise AssayError(f"compare: neither run has the metric output {output!r}")
    hib = agg.get("higher_is_better", True)
    a_keys, a = _scores(store, base["id"], output)
    b_keys, b = _scores(store, other["id"], output)
    pos = {k: i for i, k in enumerate(a_keys)}
    drops: list[tuple[float, str]] = []
    for j, k in enumerate(b_keys):
        i = pos.get(k)
        if i is None:
            continue
        change = b[j] - a[i]
        worse = -change if hib else change
        if worse > 0:
            drops.append((worse, k))
    drops.sort(key=lambda t: -t[0])
    picked = [k for _, k in drops[:limit]]
    if not picked:
        return []
    base_rows = _rows_by_key(store, base["id"], output, picked)
    other_rows = _rows_by_key(store, other["id"], output, picked)
    result = []
    for worse, k in drops[:limit]:
        br, orow = base_rows.get(k), other_rows.get(k)
        if br is None or orow is None:
            continue
        result.append({"key": k, "drop": worse, "inputs": orow["inputs"], "base": br["score"], "other": orow["score"],
                       "base_idx": br["idx"], "other_idx": orow["idx"]})
    return result


def _rows_by_key(store: Store, run_id: str, output: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    ids = [k for k in keys if not k.startswith("#")]
    idxs = [int(k[1:]) for k in keys if k.startswith("#")]
    cond = []
    if ids:
        cond.append(S.rows.c.row_id.in_(ids))
    if idxs:
        cond.append(and_(S.rows.c.row_id.is_(None), S.rows.c.idx.in_(idxs)))
    q = (select(S.rows.c.idx, S.rows.c.row_id, S.rows.c.inputs, S.scores.c.value, S.scores.c.score,
                S.scores.c.result, S.scores.c.reason, S.scores.c.status)
         .join(S.scores, and_(S.scores.c.run_id == S.rows.c.run_id, S.scores.c.idx == S.rows.c.idx))
         .where(S.rows.c.run_id == run_id, S.scores.c.output == output, or_(*cond)))
    out: dict[str, dict[str, Any]] = {}
    with store.engine.connect() as conn:
        for idx, row_id, inputs, value, score, result, reason, status in conn.execute(q):
            key = row_id if row_id is not None else f"#{idx}"
            out[key] = {"idx": idx, "inputs": orjson.loads(inputs),
                        "score": {"value": _load_value(value), "score": score, "result": result,
                                  "reason": reason, "status": status}}
    return out
