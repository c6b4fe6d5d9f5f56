"""Comparing runs metric by metric and row by row.

For each metric output the runs share, every run after the first is compared with the
first (the baseline). Rows are matched by position when both runs read the same data (the
same fingerprint), else by row id (by position when a row has no id). On the matched rows:
the difference of means and a 95% bootstrap interval of the mean
per-row difference (the paired bootstrap, :func:`assay.stats.confidence_interval`);
when no row matches (different data), the difference of the two means with a normal
interval ``±1.96·√(s₁²/n₁ + s₂²/n₂)``. A difference is *significant* when its interval
leaves out zero. "Worse" follows the metric's direction (lower is better for harms).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
from sqlalchemy import select

from assay.errors import AssayError
from assay.results.bounds import bound_fields
from assay.stats import confidence_interval
from assay.store import schema as S
from assay.store.store import Store


class _RunData:
    """One run's scores and row ids: from its compact columns when it finished (a few
    blobs), else from the score index (a run still going, or stopped)."""

    def __init__(self, store: Store, run: dict[str, Any]):
        self.store, self.run = store, run
        self.cols = store.columns(run["id"])
        if not self.cols and store.is_packed(run["id"]):   # a run still going keeps its scores in its rows
            self.cols = store.live_columns(run["id"], [o for _, outs in (run.get("config") or {}).get("layout") or []
                                                       for o in outs])
        self._keys: np.ndarray | None = None

    def scores(self, output: str) -> tuple[np.ndarray, np.ndarray]:
        """Positions and scores of the rows scored for ``output``, in position order (errored
        and skipped rows have no score: the aggregates count them, a comparison does not)."""
        v = self.cols.get(f"score:{output}")
        if v is not None:
            idx = np.nonzero(~np.isnan(v))[0]
            return idx, v[idx]
        got = self.store.fetch_raw("SELECT idx, score FROM scores WHERE run_id = ? AND output = ? "
                                   "AND score IS NOT NULL", (self.run["id"], output))
        idx = np.fromiter((r[0] for r in got), dtype=np.int64, count=len(got))
        val = np.fromiter((r[1] for r in got), dtype=np.float64, count=len(got))
        order = np.argsort(idx, kind="stable")
        return idx[order], val[order]

    def keys(self) -> np.ndarray:
        """Each row's id by position (``#position`` for a row without one), as strings."""
        if self._keys is None:
            ids = self.cols.get("row_id")
            if ids is None:
                got = self.store.fetch_raw("SELECT idx, row_id FROM rows WHERE run_id = ?", (self.run["id"],))
                ids = [None] * (max((r[0] for r in got), default=-1) + 1)
                for i, rid in got:
                    ids[i] = rid
            self._keys = np.array([rid if rid is not None else f"#{i}" for i, rid in enumerate(ids)], dtype=str)
        return self._keys


def _pairs(a: _RunData, b: _RunData, a_idx: np.ndarray, b_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices into ``a_idx`` and ``b_idx`` of the matched rows: by position when both runs
    read the same data (same fingerprint) or the same row ids in the same order, else by row
    id (the first row when ids repeat)."""
    fp = a.run.get("data_fingerprint")
    ids = a.cols.get("row_id")
    same = (fp and fp == b.run.get("data_fingerprint")) or (ids is not None and ids == b.cols.get("row_id"))
    if same or np.array_equal(a.keys(), b.keys()):
        _, ia, ib = np.intersect1d(a_idx, b_idx, assume_unique=True, return_indices=True)
        return ia, ib
    uniq, first = np.unique(a.keys()[a_idx], return_index=True)
    kb = b.keys()[b_idx]
    if not len(uniq):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    pos = np.minimum(np.searchsorted(uniq, kb), len(uniq) - 1)
    ib = np.nonzero(uniq[pos] == kb)[0]
    return first[pos[ib]], ib


def _difference(a: np.ndarray, b: np.ndarray, pa: np.ndarray, pb: np.ndarray) -> dict[str, Any]:
    """``b - a``: paired on the matched rows ``pa``/``pb`` when there are any, else unpaired."""
    if len(pa):
        d = b[pb] - a[pa]
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
    base, others = runs[0], runs[1:]
    data = [_RunData(store, r) for r in runs]
    out: list[dict[str, Any]] = []
    for output, agg in (base.get("aggregates") or {}).items():
        hib = agg.get("higher_is_better", True)
        entry: dict[str, Any] = {"output": output, "metric": agg.get("metric", output), "higher_is_better": hib,
                                 "runs": [], "deltas": [None]}
        for r in runs:
            a = (r.get("aggregates") or {}).get(output)
            entry["runs"].append(None if a is None else {
                "mean": a.get("mean"), "n": a.get("evaluated"), "pass_rate": a.get("pass_rate"),
                "defect_rate": a.get("defect_rate"), "ci95_low": a.get("ci95_low"), "ci95_high": a.get("ci95_high"),
                "errored": a.get("errored"), "skipped": a.get("skipped"), **bound_fields(a)})
        a_idx, a_val = data[0].scores(output)
        for r, d_other in zip(others, data[1:]):
            if output not in (r.get("aggregates") or {}):
                entry["deltas"].append(None)
                continue
            b_idx, b_val = d_other.scores(output)
            d = _difference(a_val, b_val, *_pairs(data[0], d_other, a_idx, b_idx))
            if d["delta"] is not None:
                d["better"] = None if not d["significant"] else (d["delta"] > 0) == hib
            entry["deltas"].append(d)
        out.append(entry)
    return {"runs": runs, "metrics": out}


def worse_rows(store: Store, base_ref: str, other_ref: str, output: str, limit: int = 50) -> list[dict[str, Any]]:
    """Matched rows whose ``output`` score got worse from the base run to the other, the
    biggest drops first, with both scores, results and reasons and the row's inputs."""
    base, other = store.get_run(base_ref), store.get_run(other_ref)
    agg = (base.get("aggregates") or {}).get(output) or (other.get("aggregates") or {}).get(output)
    if agg is None:
        raise AssayError(f"compare: neither run has the metric output {output!r}")
    hib = agg.get("higher_is_better", True)
    da, db = _RunData(store, base), _RunData(store, other)
    a_idx, a = da.scores(output)
    b_idx, b = db.scores(output)
    ia, ib = _pairs(da, db, a_idx, b_idx)
    worse = (a[ia] - b[ib]) if hib else (b[ib] - a[ia])
    top = [k for k in np.argsort(-worse, kind="stable")[:limit] if worse[k] > 0]
    if not top:
        return []
    picks = [(float(worse[k]), int(a_idx[ia[k]]), int(b_idx[ib[k]])) for k in top]
    base_rows = _rows_at(store, base["id"], output, [p[1] for p in picks])
    other_rows = _rows_at(store, other["id"], output, [p[2] for p in picks])
    result = []
    for drop, i, j in picks:
        br, orow = base_rows[i], other_rows[j]
        key = orow["row_id"] if orow["row_id"] is not None else f"#{j}"
        result.append({"key": key, "drop": drop, "inputs": orow["inputs"], "base": br["score"], "other": orow["score"],
                       "base_idx": i, "other_idx": j})
    return result


def _rows_at(store: Store, run_id: str, output: str, idxs: list[int]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    with store.engine.connect() as conn:
        scores = store.row_scores(conn, run_id, idxs)
        for idx, row_id, inputs in conn.execute(select(S.rows.c.idx, S.rows.c.row_id, S.rows.c.inputs)
                                                .where(S.rows.c.run_id == run_id, S.rows.c.idx.in_(idxs))):
            sc = next((s for _, o, s in scores.get(idx, ()) if o == output), None)
            if sc is None:
                continue
            out[idx] = {"row_id": row_id, "inputs": orjson.loads(inputs),
                        "score": {"value": sc.value, "score": sc.score, "result": sc.result,
                                  "reason": sc.reason, "status": sc.status}}
    return out
