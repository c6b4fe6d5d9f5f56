"""Read-side queries for the dashboard and the report, answered by the database.

Everything a page shows of a large run is computed in SQL and paged there, so a page over a
100,000-row run reads a page of rows, not the run:

- :func:`query_rows`: one page of a run's rows, sorted by any metric output's score (rows
  without a score last, in either direction), filtered by a metric output's result
  (``pass`` / ``fail`` / ``error`` / ``skipped``) and by a text search (the full-text index of
  the row's inputs and reasons, :mod:`assay.store.search`; a ``LIKE`` scan where the index
  cannot answer), with the total count of matching rows. A run written since store version 6
  keeps its scores with its rows: it is sorted and filtered from its score and result columns
  (numpy, a few milliseconds over 100,000 rows).
- :func:`histograms`: each output's score distribution: one bar per value when an output
  has few distinct values (judge scales, pass/fail), else equal-width bins.
- :func:`trend`: an output's mean (and 95% interval, pass and defect rates) across runs over
  time, read from ``runs.aggregates``.
- :func:`list_runs`: the runs list with filters (name contains, status, date range), paged.
- :func:`get_row`, :func:`worst_rows`, :func:`run_outputs`.

The queries lean on the indexes of :mod:`assay.store.schema`: ``rows``' primary key
``(run_id, idx)``, ``ix_scores_run_output_score_idx`` and ``ix_scores_run_output_result_idx``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from sqlalchemy import and_, func, or_, select

from assay.errors import AssayError
from assay.results.bounds import bound_fields
from assay.store import schema as S
from assay.store import search as T
from assay.store.sessions import shown_status
from assay.store.store import RESULT_CODES, Store, load_json

RESULTS = ("pass", "fail", "error", "skipped")
MAX_PER_PAGE = 500
DISCRETE_MAX = 30           # at most this many distinct values: one bar per value
HIST_BINS = 20
SEARCH_COUNT_CAP = 10_000   # a search counts its matches up to this many
SEARCH_KEEP = 2_000         # ... and keeps them when there are at most this many

_R = S.rows
_S = S.scores


def _like_pattern(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _like(store: Store, col: Any, pattern: str) -> Any:
    # SQLite's LIKE ignores ASCII case; PostgreSQL needs ILIKE for the same behaviour.
    if store.engine.dialect.name == "sqlite":
        return col.like(pattern, escape="\\")
    return col.ilike(pattern, escape="\\")


def _result_condition(t: Any, result: str) -> Any:
    """A metric output's result as the dashboard names it: pass, fail, error, skipped."""
    if result == "pass":
        return t.c.result == "pass"
    if result == "fail":
        return t.c.result == "fail"
    if result == "error":
        return and_(t.c.result == "unknown", t.c.status == "error")
    if result == "skipped":
        return and_(t.c.result == "not_applicable", t.c.status == "skipped")
    raise AssayError(f"unknown result filter {result!r}; use one of {', '.join(RESULTS)}")


# -- runs -----------------------------------------------------------------------------------
_RUN_LIST_COLS = (S.runs.c.id, S.runs.c.name, S.runs.c.status, S.runs.c.created_at, S.runs.c.finished_at,
                  S.runs.c.source, S.runs.c.judge, S.runs.c.rows_done, S.runs.c.metrics, S.runs.c.aggregates,
                  S.runs.c.error, S.runs.c.updated_at, S.runs.c.owner_pid, S.runs.c.owner_host,
                  S.runs.c.heartbeat_at)


def parse_day(text: str | None, *, end: bool = False) -> float | None:
    """``YYYY-MM-DD`` (local time) as a timestamp: the start of that day, or with ``end`` its end."""
    if not text:
        return None
    try:
        d = dt.datetime.strptime(text.strip(), "%Y-%m-%d")
    except ValueError:
        raise AssayError(f"a date must look like YYYY-MM-DD, got {text!r}") from None
    if end:
        d += dt.timedelta(days=1)
    return d.timestamp()


def list_runs(store: Store, *, name: str | None = None, status: str | None = None,
              since: float | None = None, until: float | None = None,
              limit: int = 100, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Runs newest first, and how many match: ``name`` matches any part of the run's name
    (or the start of its id), ``status`` exactly, ``since``/``until`` bound ``created_at``.

    ``status`` is the one shown: a run stored as running whose process is gone is ``stale``
    (:mod:`assay.store.sessions`); ``running`` and ``stale`` are told apart over the runs
    stored as running (few at any time), then paged."""
    conds = []
    if name:
        pat = _like_pattern(name.strip())
        conds.append(or_(_like(store, S.runs.c.name, pat),
                         S.runs.c.id.like(pat[1:], escape="\\")))
    live = status in ("running", "stale")
    if status:
        conds.append(S.runs.c.status == ("running" if live else status))
    if since is not None:
        conds.append(S.runs.c.created_at >= since)
    if until is not None:
        conds.append(S.runs.c.created_at < until)
    q = select(*_RUN_LIST_COLS).where(*conds).order_by(S.runs.c.created_at.desc())
    with store.engine.connect() as conn:
        if live:
            rows = [r for r in conn.execute(q).mappings().all() if shown_status(r) == status]
            total = len(rows)
            rows = rows[max(0, offset):max(0, offset) + max(1, limit)]
        else:
            total = conn.execute(select(func.count()).select_from(S.runs).where(*conds)).scalar_one()
            rows = conn.execute(q.limit(max(1, limit)).offset(max(0, offset))).mappings().all()
    out = []
    for r in rows:
        d = dict(r)
        d["status"] = shown_status(d)
        d["metrics"] = load_json(d["metrics"]) or []
        d["aggregates"] = load_json(d["aggregates"]) or {}
        out.append(d)
    return out, total


def run_outputs(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's metric outputs in order: ``{output, metric, higher_is_better, agg}``.

    From the aggregates of a finished run; from the configured layout of one still running
    (its aggregates are not written yet, so ``agg`` is None)."""
    aggs = run.get("aggregates") or {}
    out = [{"output": o, "metric": a.get("metric", o), "higher_is_better": a.get("higher_is_better", True),
            "agg": a} for o, a in aggs.items()]
    if out:
        return out
    layout = (run.get("config") or {}).get("layout") or []
    return [{"output": o, "metric": m, "higher_is_better": True, "agg": None} for m, outs in layout for o in outs]


def output_names(run: dict[str, Any]) -> list[str]:
    return [o["output"] for o in run_outputs(run)]


# -- rows -----------------------------------------------------------------------------------
@dataclass
class RowQuery:
    """A page of a run's rows: ``sort`` names a metric output (None: input order)."""

    page: int = 1
    per_page: int = 50
    sort: str | None = None
    desc: bool = False
    filter_output: str | None = None
    filter_result: str | None = None
    search: str | None = None
    filter_metric: str | None = None     # set by checked(): the metric of filter_output

    def checked(self, outputs: Sequence[str] | dict[str, str]) -> RowQuery:
        """Validated against the run's outputs; raises :class:`AssayError` for a bad value."""
        if self.sort and self.sort not in outputs:
            raise AssayError(f"cannot sort by {self.sort!r}: the run has no such metric output")
        if self.filter_result and self.filter_result not in RESULTS:
            raise AssayError(f"unknown result filter {self.filter_result!r}; use one of {', '.join(RESULTS)}")
        if self.filter_result and not self.filter_output:
            raise AssayError("a result filter needs the metric output it applies to")
        if self.filter_output and self.filter_output not in outputs:
            raise AssayError(f"cannot filter on {self.filter_output!r}: the run has no such metric output")
        if self.filter_output and isinstance(outputs, dict):
            self.filter_metric = outputs[self.filter_output]
        self.page = max(1, int(self.page))
        self.per_page = min(MAX_PER_PAGE, max(1, int(self.per_page)))
        self.search = (self.search or "").strip() or None
        return self


def _row_conditions(store: Store, run_id: str, q: RowQuery, row_idx: Any) -> list[Any]:
    """Conditions on a row position ``row_idx`` (a column of the outer query) for the
    filter and the search, as correlated ``EXISTS`` so that a page stops reading early."""
    conds = []
    if q.filter_output and q.filter_result:
        f = _S.alias("f")
        # run_id, idx, metric, output: the primary key, so one lookup per row
        conds.append(select(f.c.idx).where(f.c.run_id == run_id, f.c.idx == row_idx,
                                           f.c.metric == q.filter_metric, f.c.output == q.filter_output,
                                           _result_condition(f, q.filter_result)).exists())
    if q.search:
        pat = _like_pattern(q.search)
        g = _S.alias("g")
        if row_idx is _R.c.idx:
            r = _R          # the outer query reads rows: test its inputs directly
        else:
            r = _R.alias("r")
        if store.is_packed(run_id):
            in_reasons = _like(store, r.c.reasons, pat)
        else:
            in_reasons = select(g.c.idx).where(g.c.run_id == run_id, g.c.idx == r.c.idx,
                                               _like(store, g.c.reason, pat)).exists()
        match = or_(_like(store, r.c.inputs, pat), in_reasons)
        if r is _R:
            conds.append(match)
        else:
            conds.append(select(r.c.idx).where(r.c.run_id == run_id, r.c.idx == row_idx, match).exists())
    return conds


# Searches of finished runs: (number of matches, every match when at most SEARCH_KEEP), for paging
_SEARCH_CACHE: OrderedDict[tuple, tuple[int, list[int] | None]] = OrderedDict()


def _tiebreak(store: Store, t: Any) -> Any:
    # Rows with equal scores keep input order: idx is the last column of the score index, so
    # the index alone gives a sorted page, with no sort step, on SQLite and PostgreSQL alike.
    return t.c.idx


def query_rows(store: Store, run: dict[str, Any], q: RowQuery) -> dict[str, Any]:
    """One page of the run's rows: ``{total, total_capped, page, pages, per_page, rows: [{idx,
    row_id, conversation_id, target_error, inputs, scores: {output: {metric, value, score,
    passed, result, reason, status}}}]}``.

    A text search is answered by the full-text index (every match, counted exactly); where it
    cannot answer (:mod:`assay.store.search`) by a scan whose count stops at
    ``SEARCH_COUNT_CAP`` (``total_capped`` is then true)."""
    run_id = run["id"]
    q.checked({o["output"]: o["metric"] for o in run_outputs(run)})
    offset = (q.page - 1) * q.per_page
    packed = store.is_packed(run_id)
    with store.engine.connect() as conn:
        found = _search(conn, store, run, q, packed) if q.search else None
        if packed and (q.sort or q.filter_output and q.filter_result):
            idxs, total = _packed_page(store, run, q, offset, None if found is None else found[1])
            capped = found is not None and found[0] > SEARCH_COUNT_CAP and found[1] is None
        else:
            idxs, total, capped = _page(conn, store, run, q, offset, found)
        rows = _load_rows(conn, store, run_id, idxs)
    pages = max(1, math.ceil(total / q.per_page))
    return {"total": total, "total_capped": capped, "page": q.page, "pages": pages, "per_page": q.per_page,
            "rows": rows}


def _search(conn: Any, store: Store, run: dict[str, Any], q: RowQuery, packed: bool) -> tuple[int, Any]:
    """``(number of matches, their positions in order or None)`` of the run's rows for the
    search (and, on a run written before version 6, the result filter), kept for a finished run.

    The full-text index gives every match; where it cannot answer (no words, no index) or
    finds nothing, one scan finds the matches up to the cap (and keeps them when few)."""
    run_id = run["id"]
    filt = None if packed else (q.filter_output, q.filter_result)
    key = (store.url, run_id, run.get("updated_at"), run.get("rows_done"), q.search, filt)
    found = _SEARCH_CACHE.get(key) if run.get("status") != "running" else None
    if found is not None:
        return found
    hits = T.find(conn, run, q.search or "")
    if hits and not T.plain_words(q.search or ""):
        hits = _verify(conn, store, run_id, hits, q.search or "")
    if hits and not packed and q.filter_output and q.filter_result:
        f = _S.alias("f")
        keep = {i for (i,) in conn.execute(select(f.c.idx).where(f.c.run_id == run_id, f.c.output == q.filter_output,
                                                                 _result_condition(f, q.filter_result)))}
        hits = [i for i in hits if i in keep]
        if not hits:
            found = (0, np.zeros(0, dtype=np.int64))
    if found is None and hits and (packed or len(hits) <= SEARCH_KEEP):
        found = (len(hits), np.asarray(hits, dtype=np.int64))
    if found is None:
        # A scan: up to the cap; few matches are kept whole, so the next pages of a rare
        # word read no more than their rows.
        sq = q if not packed else RowQuery(search=q.search)
        conds = _row_conditions(store, run_id, sq, _R.c.idx)
        scan = [i for (i,) in conn.execute(select(_R.c.idx).where(_R.c.run_id == run_id, *conds)
                                           .order_by(_R.c.idx).limit(SEARCH_COUNT_CAP + 1))]
        found = (len(scan), np.asarray(scan, dtype=np.int64) if len(scan) <= SEARCH_KEEP else None)
    # kept for a finished run when small (a common word's every match is asked of the index again)
    if run.get("status") != "running" and (found[1] is None or len(found[1]) <= SEARCH_KEEP):
        _SEARCH_CACHE[key] = found
        while len(_SEARCH_CACHE) > 256:
            _SEARCH_CACHE.popitem(last=False)
    return found


def _verify(conn: Any, store: Store, run_id: str, hits: list[int], text: str) -> list[int]:
    """The rows found by the index whose inputs (as stored, JSON) or reasons hold the search
    as it is typed (case aside): the index matches words, whatever is between them, and a
    search with punctuation means it."""
    needle = text.lower()
    packed = store.is_packed(run_id)
    keep: set[int] = set()
    for lo in range(0, len(hits), 900):
        part = hits[lo:lo + 900]
        if packed:
            got = conn.execute(select(_R.c.idx, _R.c.inputs, _R.c.reasons)
                               .where(_R.c.run_id == run_id, _R.c.idx.in_(part)))
            keep.update(i for i, inp, rs in got if needle in inp.lower() or (rs and needle in rs.lower()))
            continue
        for i, inp in conn.execute(select(_R.c.idx, _R.c.inputs).where(_R.c.run_id == run_id, _R.c.idx.in_(part))):
            if needle in inp.lower():
                keep.add(i)
        for i, why in conn.execute(select(_S.c.idx, _S.c.reason).where(_S.c.run_id == run_id, _S.c.idx.in_(part),
                                                                      _S.c.reason.is_not(None))):
            if needle in why.lower():
                keep.add(i)
    return [i for i in hits if i in keep]


def _page(conn: Any, store: Store, run: dict[str, Any], q: RowQuery, offset: int,
          found: tuple[int, Any] | None) -> tuple[list[int], int, bool]:
    """A page by SQL: a run written before version 6, or any run without sort and filter."""
    run_id = run["id"]
    capped = False
    only: list[int] | None = None    # every matching row, when a search found few
    if found is not None:
        total = found[0]
        only = None if found[1] is None else [int(i) for i in found[1]]
        if total > SEARCH_COUNT_CAP and only is None:
            total, capped = SEARCH_COUNT_CAP, True
    elif q.filter_output and q.filter_result:
        f = _S.alias("f")
        total = conn.execute(select(func.count()).select_from(f).where(
            f.c.run_id == run_id, f.c.output == q.filter_output,
            _result_condition(f, q.filter_result))).scalar_one()
    else:
        total = conn.execute(select(func.count()).select_from(_R).where(_R.c.run_id == run_id)).scalar_one()
    if q.sort:
        idxs = _sorted_page(conn, store, run_id, q, offset, total, only)
    elif only is not None:
        idxs = only[offset:offset + q.per_page]
    elif q.filter_output and q.filter_result and not q.search:
        f = _S.alias("f")
        idxs = [i for (i,) in conn.execute(
            select(f.c.idx).where(f.c.run_id == run_id, f.c.output == q.filter_output,
                                  _result_condition(f, q.filter_result))
            .order_by(_tiebreak(store, f)).limit(q.per_page).offset(offset))]
    else:
        sel = (select(_R.c.idx).where(_R.c.run_id == run_id, *_row_conditions(store, run_id, q, _R.c.idx))
               .order_by(_R.c.idx).limit(q.per_page).offset(offset))
        idxs = [i for (i,) in conn.execute(sel)]
    return idxs, total, capped


_COLS_CACHE: OrderedDict[tuple, dict[str, Any]] = OrderedDict()


def _columns(store: Store, run: dict[str, Any]) -> dict[str, Any]:
    """A run's score and result columns (written since version 6): those kept when it finished
    (read once, then from memory), else read from its rows."""
    key = (store.url, run["id"], run.get("updated_at"), run.get("rows_done"))
    hit = _COLS_CACHE.get(key) if run.get("status") != "running" else None
    if hit is not None:
        return hit
    cols = store.columns(run["id"]) if run.get("status") == "completed" else {}
    if not any(k.startswith("result:") for k in cols):
        cols = store.live_columns(run["id"], output_names(run))
    if run.get("status") != "running":
        _COLS_CACHE[key] = cols
        while len(_COLS_CACHE) > 8:
            _COLS_CACHE.popitem(last=False)
    return cols


def _packed_page(store: Store, run: dict[str, Any], q: RowQuery, offset: int,
                 hits: Any) -> tuple[list[int], int]:
    """A sorted and/or filtered page of a run written since version 6, from its columns: the
    same order as :func:`_sorted_page` (equal scores in input order, reversed when descending;
    rows without a score last, in input order)."""
    cols = _columns(store, run)
    n = len(cols["row_id"])
    mask = np.ones(n, dtype=bool)
    if hits is not None:
        m = np.zeros(n, dtype=bool)
        h = np.asarray(hits, dtype=np.int64)
        m[h[h < n]] = True
        mask &= m
    if q.filter_output and q.filter_result:
        mask &= cols[f"result:{q.filter_output}"] == RESULT_CODES[q.filter_result]
    sel = np.nonzero(mask)[0]
    if q.sort:
        s = cols[f"score:{q.sort}"][sel]
        has = ~np.isnan(s)
        a, sa = sel[has], s[has]
        order = np.lexsort((a, sa))
        if q.desc:
            order = order[::-1]
        sel = np.concatenate([a[order], sel[~has]])
    return [int(i) for i in sel[offset:offset + q.per_page]], int(len(sel))


def _sorted_page(conn: Any, store: Store, run_id: str, q: RowQuery, offset: int, total: int,
                 only: list[int] | None = None) -> list[int]:
    """Row positions of one page sorted by an output's score; rows without a score come last.

    Rows with a score are read in order from ``ix_scores_run_output_score_idx`` (the filter and
    the search checked row by row until the page is full); the few rows without one
    (skipped, errored) follow in input order."""
    o = _S.alias("o")
    if only is not None:
        base = [o.c.run_id == run_id, o.c.output == q.sort, o.c.idx.in_(only)]
    else:
        base = [o.c.run_id == run_id, o.c.output == q.sort, *_row_conditions(store, run_id, q, o.c.idx)]
    unscored = conn.execute(select(func.count()).select_from(o).where(*base, o.c.score.is_(None))).scalar_one()
    scored_n = max(0, total - unscored)
    out: list[int] = []
    if offset < scored_n:
        tb = _tiebreak(store, o)
        order = (o.c.score.desc(), tb.desc()) if q.desc else (o.c.score.asc(), tb.asc())
        sel = (select(o.c.idx).where(*base, o.c.score.is_not(None)).order_by(*order)
               .limit(q.per_page).offset(offset))
        out = [i for (i,) in conn.execute(sel)]
    need = q.per_page - len(out)
    if need > 0 and unscored:
        rest = (select(o.c.idx).where(*base, o.c.score.is_(None)).order_by(o.c.idx)
                .limit(need).offset(max(0, offset - scored_n)))
        out += [i for (i,) in conn.execute(rest)]
    return out


def _load_rows(conn: Any, store: Store, run_id: str, idxs: list[int]) -> list[dict[str, Any]]:
    if not idxs:
        return []
    by_idx: dict[int, dict[str, Any]] = {}
    for r in conn.execute(select(_R.c.idx, _R.c.row_id, _R.c.conversation_id, _R.c.target_error, _R.c.inputs)
                          .where(_R.c.run_id == run_id, _R.c.idx.in_(idxs))):
        by_idx[r.idx] = {"idx": r.idx, "row_id": r.row_id, "conversation_id": r.conversation_id,
                         "target_error": bool(r.target_error), "inputs": orjson.loads(r.inputs), "scores": {}}
    for i, scores in store.row_scores(conn, run_id, idxs).items():
        row = by_idx.get(i)
        if row is not None:
            for m, o, s in scores:
                row["scores"][o] = {"metric": m, "value": s.value, "score": _stored_score(s), "passed": s.passed,
                                    "result": s.result, "reason": s.reason, "status": s.status}
    return [by_idx[i] for i in idxs if i in by_idx]


def _stored_score(s: Any) -> float | None:
    # a NaN score reads as none (as the score column stores it)
    return None if s.score is None or s.score != s.score else s.score


def first_rows(store: Store, run_id: str, limit: int) -> list[dict[str, Any]]:
    """The run's first ``limit`` rows in input order, with their scores (as :func:`query_rows`)."""
    if limit <= 0:
        return []
    with store.engine.connect() as conn:
        idxs = [i for (i,) in conn.execute(select(_R.c.idx).where(_R.c.run_id == run_id)
                                           .order_by(_R.c.idx).limit(limit))]
        out: list[dict[str, Any]] = []
        for start in range(0, len(idxs), 900):   # stay under SQLite's bound-parameter limit
            out += _load_rows(conn, store, run_id, idxs[start:start + 900])
        return out


def get_row(store: Store, run_id: str, idx: int) -> dict[str, Any]:
    """One row with every score (all eight keys) and the positions of its neighbours."""
    with store.engine.connect() as conn:
        r = conn.execute(select(_R).where(_R.c.run_id == run_id, _R.c.idx == idx)).mappings().first()
        if r is None:
            raise AssayError(f"run {run_id} has no row {idx}")
        scores = [{"metric": m, "output": o, "value": s.value, "score": _stored_score(s), "passed": s.passed,
                   "result": s.result, "reason": s.reason, "status": s.status, "threshold": s.threshold,
                   "properties": s.properties or {}}
                  for m, o, s in store.row_scores(conn, run_id, [idx]).get(idx, [])]
        prev_idx = conn.execute(select(func.max(_R.c.idx)).where(_R.c.run_id == run_id, _R.c.idx < idx)).scalar()
        next_idx = conn.execute(select(func.min(_R.c.idx)).where(_R.c.run_id == run_id, _R.c.idx > idx)).scalar()
    return {"idx": r["idx"], "row_id": r["row_id"], "conversation_id": r["conversation_id"],
            "target_error": bool(r["target_error"]), "inputs": orjson.loads(r["inputs"]), "scores": scores,
            "prev": prev_idx, "next": next_idx}


def worst_rows(store: Store, run: dict[str, Any], output: str, limit: int = 20) -> list[dict[str, Any]]:
    """The rows with the worst scores of ``output`` (lowest, or highest for harms)."""
    info = {o["output"]: o for o in run_outputs(run)}.get(output)
    if info is None:
        raise AssayError(f"the run has no metric output {output!r}")
    if store.is_packed(run["id"]):
        v = _columns(store, run)[f"score:{output}"]
        at = np.nonzero(~np.isnan(v))[0]
        vals = v[at] if info["higher_is_better"] else -v[at]
        picks = [int(i) for i in at[np.lexsort((at, vals))][:limit]]
        with store.engine.connect() as conn:
            return _load_rows(conn, store, run["id"], picks)
    order = _S.c.score.asc() if info["higher_is_better"] else _S.c.score.desc()
    with store.engine.connect() as conn:
        idxs = [i for (i,) in conn.execute(
            select(_S.c.idx).where(_S.c.run_id == run["id"], _S.c.output == output, _S.c.score.is_not(None))
            .order_by(order, _S.c.idx).limit(limit))]
        return _load_rows(conn, store, run["id"], idxs)


# -- charts ---------------------------------------------------------------------------------
def histograms(store: Store, run_id: str, outputs: Sequence[str], bins: int = HIST_BINS) -> dict[str, dict[str, Any]]:
    """``{output: {kind: "values" | "bins", bars: [{lo, hi, count}], n, missing}}``.

    ``values``: one bar per distinct score (``lo == hi``); ``bins``: ``bins`` equal-width bins
    from the lowest to the highest score. ``missing`` counts rows without a score."""
    out: dict[str, dict[str, Any]] = {}
    if store.is_packed(run_id):
        run = store.get_run(run_id)
        cols = _columns(store, run)
        for output in outputs:
            v = cols.get(f"score:{output}")
            out[output] = _histogram(v if v is not None else np.zeros(0), bins)
        return out
    with store.engine.connect() as conn:
        for output in outputs:
            where = (_S.c.run_id == run_id, _S.c.output == output)
            missing = conn.execute(select(func.count()).select_from(_S)
                                   .where(*where, _S.c.score.is_(None))).scalar_one()
            distinct = conn.execute(select(_S.c.score, func.count()).where(*where, _S.c.score.is_not(None))
                                    .group_by(_S.c.score).order_by(_S.c.score).limit(DISCRETE_MAX + 1)).all()
            if len(distinct) <= DISCRETE_MAX:
                bars = [{"lo": v, "hi": v, "count": c} for v, c in distinct]
                out[output] = {"kind": "values", "bars": bars, "n": sum(c for _, c in distinct), "missing": missing}
                continue
            lo, hi = conn.execute(select(func.min(_S.c.score), func.max(_S.c.score)).where(*where)).one()
            width = (hi - lo) / bins if hi > lo else 1.0
            b = func.min(bins - 1, func.cast((_S.c.score - lo) / width, S.Integer)) \
                if store.engine.dialect.name == "sqlite" else \
                func.least(bins - 1, func.floor((_S.c.score - lo) / width))
            counts = dict(conn.execute(select(b.label("b"), func.count()).where(*where, _S.c.score.is_not(None))
                                       .group_by("b")).all())
            bars = [{"lo": lo + i * width, "hi": lo + (i + 1) * width, "count": int(counts.get(i, 0))}
                    for i in range(bins)]
            out[output] = {"kind": "bins", "bars": bars, "n": sum(x["count"] for x in bars), "missing": missing}
    return out


def _histogram(v: Any, bins: int) -> dict[str, Any]:
    """:func:`histograms` of one output from its score column (NaN: no score)."""
    s = v[~np.isnan(v)]
    missing = int(len(v) - len(s))
    vals, counts = np.unique(s, return_counts=True)
    if len(vals) <= DISCRETE_MAX:
        bars = [{"lo": float(x), "hi": float(x), "count": int(c)} for x, c in zip(vals, counts)]
        return {"kind": "values", "bars": bars, "n": int(counts.sum()), "missing": missing}
    lo, hi = float(s.min()), float(s.max())
    width = (hi - lo) / bins if hi > lo else 1.0
    b = np.minimum(bins - 1, ((s - lo) / width).astype(np.int64))
    got = np.bincount(b, minlength=bins)
    bars = [{"lo": lo + i * width, "hi": lo + (i + 1) * width, "count": int(got[i])} for i in range(bins)]
    return {"kind": "bins", "bars": bars, "n": int(got.sum()), "missing": missing}


_HIST_CACHE: OrderedDict[tuple, dict[str, dict[str, Any]]] = OrderedDict()
_HIST_CACHE_SIZE = 64


def run_histograms(store: Store, run: dict[str, Any], bins: int = HIST_BINS) -> dict[str, dict[str, Any]]:
    """:func:`histograms` of every output of ``run``, kept in memory for a run that has
    finished (keyed by its last update, so a run still being written is always read anew)."""
    outputs = tuple(output_names(run))
    if run.get("status") == "running":
        return histograms(store, run["id"], outputs, bins)
    key = (store.url, run["id"], run.get("updated_at"), outputs, bins)
    hit = _HIST_CACHE.get(key)
    if hit is not None:
        _HIST_CACHE.move_to_end(key)
        return hit
    result = histograms(store, run["id"], outputs, bins)
    _HIST_CACHE[key] = result
    while len(_HIST_CACHE) > _HIST_CACHE_SIZE:
        _HIST_CACHE.popitem(last=False)
    return result


def trend(store: Store, output: str, *, name: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """An output's mean across completed runs, oldest first: ``[{id, name, created_at, mean,
    ci95_low, ci95_high, pass_rate, defect_rate, evaluated}]`` for runs that have it."""
    conds = [S.runs.c.status == "completed"]
    if name:
        conds.append(S.runs.c.name == name)
    q = (select(S.runs.c.id, S.runs.c.name, S.runs.c.created_at, S.runs.c.aggregates).where(*conds)
         .order_by(S.runs.c.created_at.desc()).limit(limit))
    points = []
    with store.engine.connect() as conn:
        for r in conn.execute(q):
            agg = (load_json(r.aggregates) or {}).get(output)
            if not agg or agg.get("mean") is None:
                continue
            points.append({"id": r.id, "name": r.name, "created_at": r.created_at, "mean": agg.get("mean"),
                           "ci95_low": agg.get("ci95_low"), "ci95_high": agg.get("ci95_high"),
                           "pass_rate": agg.get("pass_rate"), "defect_rate": agg.get("defect_rate"),
                           "evaluated": agg.get("evaluated"), "higher_is_better": agg.get("higher_is_better", True),
                           **bound_fields(agg)})
    points.reverse()
    return points


def known_outputs(store: Store, limit: int = 200) -> list[str]:
    """Metric outputs of the latest ``limit`` completed runs, for the trend page's chooser."""
    seen: dict[str, None] = {}
    with store.engine.connect() as conn:
        for (aggs,) in conn.execute(select(S.runs.c.aggregates).where(S.runs.c.status == "completed")
                                    .order_by(S.runs.c.created_at.desc()).limit(limit)):
            for o in (load_json(aggs) or {}):
                seen.setdefault(o, None)
    return sorted(seen)


def run_names(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        return [n for (n,) in conn.execute(select(S.runs.c.name).where(S.runs.c.name.is_not(None))
                                           .group_by(S.runs.c.name).order_by(S.runs.c.name))]


__all__ = ["RESULTS", "RowQuery", "first_rows", "get_row", "histograms", "known_outputs", "list_runs", "output_names",
           "parse_day", "query_rows", "run_histograms", "run_names", "run_outputs", "trend", "worst_rows"]
