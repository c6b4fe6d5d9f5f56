"""The leaderboard: every model in the store on one table — quality, latency, throughput, cost and
embedding scores — and the Pareto frontier of any two of them.

**Rows.** One per model (the stored ``model`` name, exactly: a model that two kinds of benchmark
name differently is two rows; nothing is merged by guess), built from the latest stored result of
each kind (``quality``, ``perf``, ``embed``); with ``runs="all"`` one row per stored result instead.

**Columns**, and when two figures are comparable:

- *quality index* (:mod:`assay.bench.quality_report`): comparable only between runs over the same
  tasks with the same definitions and data — the set of ``(task, task_hash, data_hash)``. Runs
  with another set get their own column (``quality_index@2``, ...), and a note says why. Set 1
  is the one most models share (on a tie, the one of the oldest result); so for every split below.
- *per-task quality* (the task's primary score): one column per ``(task, task_hash, data_hash,
  primary)``; a task with two definitions is two columns.
- *latency index* (mean TTFT, s) and *throughput index* (mean GTPS, tok/s) of one point of the
  perf run: comparable only at the same workload — API, streaming, token shape (input / output
  tokens, shared prefix, burstiness) and load (the concurrency or the request rate). The workload
  most models were measured at is picked for every model that has it; a model without it shows
  its lowest load in a separate column pair, with a note.
- *cost index*: the 3:1 blended price in USD per 1M tokens (:func:`assay.bench.cost.estimated_cost`),
  priced as ``assay bench cost`` prices the perf run (a price set when it ran, else the price
  table, else the price recorded with it) or, with no perf run, from the price table.
- *embedding main scores*: one column per ``(task, main score, task_hash, data_hash,
  metric_version)``.

A figure that is missing is ``None`` (shown "—"), never 0. Nothing is averaged across runs.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from assay.bench.cost import benchmark_cost, estimated_cost
from assay.bench.embed_summary import EmbedHeadline, EmbedSummary, EmbedTask
from assay.bench.perf_compare import COMPARABLE_SETTINGS, point_key
from assay.bench.perf_summary import PerfPoint, PerfSummary
from assay.bench.quality_summary import QualityHeadline, QualitySummary
from assay.errors import AssayError
from assay.models.price_table import PriceTable, active_table

KINDS = ("quality", "perf", "embed")
RUNS = ("latest", "all")
MISSING = "—"
TRADEOFFS = {                      # chart name -> (x column, x better, y column)
    "quality-cost": ("cost_index", "low", "quality_index"),
    "quality-latency": ("latency_index", "low", "quality_index"),
    "quality-throughput": ("throughput_index", "high", "quality_index"),
}


@dataclass
class Column:
    """One column: ``key`` (what ``--sort`` and the JSON use), a label, the unit its values are
    kept in, which way is better, and the comparability group it belongs to."""

    key: str
    label: str
    kind: str                     # quality | perf | cost | embed
    unit: str                     # "0-1" | "s" | "tok/s" | "USD/1M"
    better: str                   # "high" | "low"
    group: str | None = None      # a Group.key
    about: str | None = None      # a longer description (the metric, the hashes)


@dataclass
class Row:
    """One model (or one stored result, with ``runs="all"``): its figures by column key
    (``None`` = missing), the refs of the results they come from, and notes about them."""

    model: str
    values: dict[str, float | None] = field(default_factory=dict)
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)          # kind -> benchmark ref
    created_at: dict[str, float] = field(default_factory=dict)  # kind -> when the result was made
    cost_source: str | None = None
    workload: str | None = None                                # the perf point's workload label
    flags: list[str] = field(default_factory=list)

    def get(self, key: str) -> float | None:
        return self.values.get(key)


@dataclass
class Group:
    """Results that are comparable with each other: one column (or column pair) of the board."""

    kind: str                     # quality | quality-task | perf | embed-task
    key: str                      # the column key (perf: the latency column's)
    label: str
    models: list[str]
    signature: dict[str, Any]


@dataclass
class Leaderboard:
    rows: list[Row]
    columns: list[Column]
    groups: list[Group]
    notes: list[str]              # why figures are shown apart, and what is missing
    runs: str = "latest"
    kinds: tuple[str, ...] = KINDS

    def column(self, key: str) -> Column:
        for c in self.columns:
            if c.key == key:
                return c
        raise AssayError(f"no column {key!r} on the leaderboard; the columns are: "
                         + ", ".join(c.key for c in self.columns))

    def sorted(self, key: str | None = None, *, descending: bool | None = None) -> list[Row]:
        """The rows by ``key`` (default: the quality index, else the first column), best first
        unless ``descending`` says otherwise; missing figures always last, ties by model name."""
        if not self.columns and key in (None, "model"):
            return sorted(self.rows, key=lambda r: r.model)
        key = key or ("quality_index" if any(c.key == "quality_index" for c in self.columns) else self.columns[0].key)
        if key == "model":
            return sorted(self.rows, key=lambda r: r.model.lower(), reverse=bool(descending))
        col = self.column(key)
        desc = (col.better == "high") if descending is None else descending
        have = [r for r in self.rows if _finite(r.get(key))]
        missing = [r for r in self.rows if not _finite(r.get(key))]
        have.sort(key=lambda r: r.model)
        have.sort(key=lambda r: r.values[key], reverse=desc)       # stable: ties keep the name order
        return have + sorted(missing, key=lambda r: r.model)

    def filtered(self, text: str | None) -> Leaderboard:
        """Only the rows whose model name holds ``text`` (case-insensitive)."""
        if not text:
            return self
        t = text.lower()
        return Leaderboard([r for r in self.rows if t in r.model.lower()], self.columns, self.groups, self.notes,
                           self.runs, self.kinds)

    def points(self, x: str, y: str) -> list[tuple[Row, float, float]]:
        """The rows that have both figures, with them."""
        return [(r, float(r.values[x]), float(r.values[y])) for r in self.rows
                if _finite(r.get(x)) and _finite(r.get(y))]

    def tradeoff(self, name: str) -> dict[str, Any]:
        """One trade-off chart's data: ``name`` in :data:`TRADEOFFS`; each point with whether it
        is on the Pareto frontier, and which rows are left out (a missing figure, or a figure from
        another comparability group than the chart's)."""
        if name not in TRADEOFFS:
            raise AssayError(f"no chart {name!r}: choose one of {', '.join(TRADEOFFS)}")
        x, x_better, y = TRADEOFFS[name]
        have = {c.key for c in self.columns}
        pts = self.points(x, y) if x in have and y in have else []
        front = set(pareto_front([(px, py) for _, px, py in pts], x_better=x_better))
        used = {id(r) for r, _, _ in pts}
        left_out = []
        for r in self.rows:
            if id(r) in used:
                continue
            why = [f"no {c}" for c, k in (("quality index", y), (_LABELS[x], x)) if not _finite(r.get(k))]
            other = [k for k in r.values if _finite(r.values[k]) and "@" in k and k.split("@")[0] in (x, y)]
            if other:
                why.append("its figures are in another comparability group (" + ", ".join(sorted(other)) + ")")
            left_out.append({"model": r.model, "why": "; ".join(why)})
        return {"name": name, "x": x, "y": y, "x_better": x_better,
                "x_column": asdict(self.column(x)) if x in have else None,
                "y_column": asdict(self.column(y)) if y in have else None,
                "points": [{"model": r.model, "x": px, "y": py, "ref": r.refs, "pareto": i in front}
                           for i, (r, px, py) in enumerate(pts)],
                "left_out": left_out}

    def as_dict(self, sort: str | None = None, descending: bool | None = None) -> dict[str, Any]:
        """The board as JSON: columns, rows (sorted), groups and notes."""
        rows = self.sorted(sort, descending=descending)
        return {"runs": self.runs, "kinds": list(self.kinds), "columns": [asdict(c) for c in self.columns],
                "rows": [{"model": r.model, "values": {c.key: r.values.get(c.key) for c in self.columns},
                          "ci95": {k: list(v) for k, v in r.ci.items()}, "refs": r.refs, "created_at": r.created_at,
                          "cost_source": r.cost_source, "workload": r.workload, "flags": r.flags} for r in rows],
                "groups": [asdict(g) for g in self.groups], "notes": self.notes}


_SUMMARIES = {"quality": QualitySummary, "perf": PerfSummary, "embed": EmbedSummary}
_LABELS = {"cost_index": "cost index", "latency_index": "latency index", "throughput_index": "throughput index",
           "quality_index": "quality index"}


# -- the Pareto frontier ---------------------------------------------------------------------------

def pareto_front(points: Sequence[tuple[float | None, float | None]], *, x_better: str = "low",
                 y_better: str = "high") -> list[int]:
    """The indices of the points no other point dominates, in order of x (best x first).

    A point dominates another when it is at least as good on both axes and better on one.
    Equal points do not dominate each other: both are on the frontier. Points with a missing or
    non-finite coordinate are never on it."""
    if x_better not in ("low", "high") or y_better not in ("low", "high"):
        raise AssayError(f"x_better and y_better must be 'low' or 'high', got {x_better!r}, {y_better!r}")
    sx = 1.0 if x_better == "low" else -1.0          # compare on "lower is better" for both
    sy = 1.0 if y_better == "low" else -1.0
    cand = [(i, sx * float(x), sy * float(y)) for i, (x, y) in enumerate(points) if _finite(x) and _finite(y)]
    front = []
    for i, x, y in cand:
        dominated = any(ox <= x and oy <= y and (ox < x or oy < y) for j, ox, oy in cand if j != i)
        if not dominated:
            front.append((x, y, i))
    return [i for _, _, i in sorted(front)]


# -- building the board ----------------------------------------------------------------------------

def build_leaderboard(store: Any, *, kinds: Iterable[str] | str = KINDS, runs: str = "latest",
                      table: PriceTable | None = None) -> Leaderboard:
    """The leaderboard of ``store`` (see the module docstring). ``kinds``: which kinds of result
    to read (``"all"`` or any of ``quality``, ``perf``, ``embed``); ``runs``: ``latest`` (one row
    per model) or ``all`` (one row per stored result); ``table``: the price table (default: the
    one in force)."""
    kinds = _kinds(kinds)
    if runs not in RUNS:
        raise AssayError(f"runs must be one of {', '.join(RUNS)}, not {runs!r}")
    prices = table or active_table()
    found = {k: store.list_benchmarks(kind=k) for k in kinds}
    rows: dict[Any, Row] = {}
    perf_of: dict[Any, dict[str, Any]] = {}
    parts: dict[str, list[tuple[Any, dict[str, Any]]]] = {k: [] for k in kinds}
    for k in kinds:
        seen: set[str] = set()
        for rec in found[k]:                               # newest first
            model = str(rec.get("model") or _SUMMARIES[k].load_or_empty(rec.get("details")).model or "").strip() \
                or "(no model)"
            if runs == "latest":
                if model in seen:
                    continue
                seen.add(model)
                rid: Any = model
            else:
                rid = (k, rec.get("ref") or rec.get("id"))
            row = rows.setdefault(rid, Row(model=model))
            row.refs[k] = str(rec.get("ref") or rec.get("id"))
            if rec.get("created_at") is not None:
                row.created_at[k] = float(rec["created_at"])
            parts[k].append((rid, rec))
            if k == "perf":
                perf_of[rid] = rec
    for k in kinds:
        parts[k].reverse()                                 # oldest first: on a tie, the earlier result is set 1
    columns: list[Column] = []
    groups: list[Group] = []
    notes: list[str] = []
    if "quality" in kinds:
        _quality(parts["quality"], rows, columns, groups, notes)
    if "perf" in kinds:
        _perf(parts["perf"], rows, columns, groups, notes)
    _cost(rows, perf_of, prices, columns)
    if "embed" in kinds:
        _embed(parts["embed"], rows, columns, groups, notes)
    _order(columns)
    if runs == "latest" and len(rows) > 1:
        notes.append("one row per stored model name, from the latest result of each kind; a model that two kinds of "
                     "benchmark name differently shows as two rows (nothing is merged by guess)")
    return Leaderboard(list(rows.values()), columns, groups, notes, runs, tuple(kinds))


def _kinds(kinds: Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(kinds, str):
        kinds = KINDS if kinds.strip().lower() in ("all", "") else [x.strip().lower() for x in kinds.split(",")]
    got = tuple(dict.fromkeys(kinds))
    bad = [k for k in got if k not in KINDS]
    if bad or not got:
        raise AssayError(f"kind must be quality, perf, embed or all, not {', '.join(bad) or 'nothing'}")
    return got


def _order(columns: list[Column]) -> None:
    rank = {"quality": 0, "perf": 1, "cost": 2}

    def key(c: Column) -> tuple:
        if c.kind in rank and not c.key.startswith("quality:"):
            return (0, rank[c.kind])
        return (1, 0 if c.key.startswith("quality:") else 1)

    columns.sort(key=key)                                # stable: each kind keeps its own order


def _keyed(base: str, n: int) -> str:
    """The column key of the ``n``-th (from 0) comparability group of ``base``."""
    return base if n == 0 else f"{base}@{n + 1}"


def _short(h: Any) -> str:
    return str(h)[:12] if h else "none"


def _by_size(sigs: Mapping[Any, list[Any]]) -> list[Any]:
    """Signatures, the one most results share first (ties: the first seen, i.e. the oldest)."""
    order = list(sigs)
    return sorted(order, key=lambda s: (-len(sigs[s]), order.index(s)))


def _quality(recs: list[tuple[Any, dict[str, Any]]], rows: dict[Any, Row], columns: list[Column],
             groups: list[Group], notes: list[str]) -> None:
    sigs: dict[frozenset, list[Any]] = {}
    tasks_of: dict[Any, dict[str, Any]] = {}
    for rid, rec in recs:
        d = QualitySummary.load_or_empty(rec.get("details"))
        tasks = d.tasks
        tasks_of[rid] = tasks
        sig = frozenset((name, t.task_hash, t.data_hash) for name, t in tasks.items())
        sigs.setdefault(sig, []).append(rid)
        idx = d.index
        value = idx.value if "value" in idx.model_fields_set else QualityHeadline.read(rec.get("metrics")).quality_index
        rows[rid].values["__qi"] = value if _finite(value) else None
        if _finite(idx.ci95_low) and _finite(idx.ci95_high):
            rows[rid].ci["__qi"] = (float(idx.ci95_low), float(idx.ci95_high))
    ordered = _by_size(sigs)
    for n, sig in enumerate(ordered):
        key = _keyed("quality_index", n)
        names = sorted(t for t, _, _ in sig)
        label = "quality index" if len(ordered) == 1 else f"quality index (set {n + 1})"
        columns.append(Column(key, label, "quality", "0-1", "high", key,
                              "mean over tasks of each task's primary score on 0-1, tasks: " + ", ".join(names)))
        models = [rows[r].model for r in sigs[sig]]
        groups.append(Group("quality", key, label, models,
                            {"tasks": [{"task": t, "task_hash": th, "data_hash": dh} for t, th, dh in sorted(
                                sig, key=lambda s: (s[0], str(s[1]), str(s[2])))]}))
        for rid in sigs[sig]:
            r = rows[rid]
            r.values[key] = r.values.get("__qi")
            if "__qi" in r.ci:
                r.ci[key] = r.ci["__qi"]
    for r in rows.values():
        r.values.pop("__qi", None)
        r.ci.pop("__qi", None)
    if len(ordered) > 1:
        base = ordered[0]
        for n, sig in enumerate(ordered[1:], start=1):
            notes.append(f"quality index: set {n + 1} ({', '.join(rows[r].model for r in sigs[sig])}) is shown apart "
                         f"from set 1 because {_sig_diff(base, sig)}")
    # per task: one column per (task, task_hash, data_hash, primary)
    defs: dict[str, dict[tuple, list[Any]]] = {}
    for rid, tasks in tasks_of.items():
        for name, t in tasks.items():
            defs.setdefault(name, {}).setdefault((t.task_hash, t.data_hash, t.primary), []).append(rid)
    for name in sorted(defs):
        variants = _by_size(defs[name])
        for n, sig in enumerate(variants):
            th, dh, primary = sig
            key = _keyed(f"quality:{name}", n)
            label = f"{name} ({primary})" if len(variants) == 1 else f"{name} ({primary}, definition {n + 1})"
            columns.append(Column(key, label, "quality", "0-1", "high", key,
                                  f"{name}: primary score {primary}; task hash {_short(th)}, data hash {_short(dh)}"))
            groups.append(Group("quality-task", key, label, [rows[r].model for r in defs[name][sig]],
                                {"task": name, "task_hash": th, "data_hash": dh, "primary": primary}))
            modes = {rid: ", ".join(tasks_of[rid][name].modes) for rid in defs[name][sig]}
            if len({m for m in modes.values() if m}) > 1:       # e.g. log-likelihood for one, generation for another
                notes.append(f"task {name} ({key}): the models were scored differently (" + "; ".join(
                    f"{rows[r].model}: {m}" for r, m in modes.items() if m) + "): multiple choice by generation "
                    "reads the answer from text, by log-likelihood ranks the choices; compare with care")
            for rid in defs[name][sig]:
                t = tasks_of[rid][name]
                v = t.primary_value
                rows[rid].values[key] = float(v) if _finite(v) else None
                pm = t.metrics.get(primary) if primary is not None else None
                if pm is not None and primary not in _JUDGED and _finite(pm.ci95_low) and _finite(pm.ci95_high):
                    rows[rid].ci[key] = (float(pm.ci95_low), float(pm.ci95_high))
            if n:
                b_th, b_dh, b_pr = variants[0]
                why = [w for w, differs in ((f"the task definition differs (task hash {_short(th)} vs {_short(b_th)})",
                                             th != b_th),
                                            (f"the data differs (data hash {_short(dh)} vs {_short(b_dh)})",
                                             dh != b_dh),
                                            (f"the primary score differs ({primary} vs {b_pr})", primary != b_pr))
                       if differs]
                notes.append(f"task {name}: definition {n + 1} ({', '.join(rows[r].model for r in defs[name][sig])}) "
                             f"is shown apart from definition 1 because " + "; ".join(why))


_JUDGED = ("similarity", "groundedness", "coherence", "fluency", "relevance")   # primary_value is rescaled


def _sig_diff(a: frozenset, b: frozenset) -> str:
    """Why two quality runs' task sets are not comparable, in words."""
    ta = {t: (th, dh) for t, th, dh in a}
    tb = {t: (th, dh) for t, th, dh in b}
    why = []
    only_a, only_b = sorted(set(ta) - set(tb)), sorted(set(tb) - set(ta))
    if only_a or only_b:
        why.append("the tasks differ (" + "; ".join(x for x in (
            f"only in set 1: {', '.join(only_a)}" if only_a else "",
            f"only in this set: {', '.join(only_b)}" if only_b else "") if x) + ")")
    for t in sorted(set(ta) & set(tb)):
        if ta[t][0] != tb[t][0]:
            why.append(f"the definition of task {t} differs (task hash {_short(tb[t][0])} vs {_short(ta[t][0])})")
        if ta[t][1] != tb[t][1]:
            why.append(f"the data of task {t} differs (data hash {_short(tb[t][1])} vs {_short(ta[t][1])})")
    return "; ".join(why) or "the task sets differ"


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
    if load_kind == "rate" and st.burstiness not in (None, 1, 1.0):
        extra.append(f"burstiness {_n(st.burstiness)}")
    how = f"{summary.api or '?'}" + ("" if summary.stream in (None, True) else ", not streamed")
    at = f"concurrency {load:g}" if load_kind == "concurrency" else f"{load:g} req/s"
    return sig, ", ".join([at, tokens, *extra, how])


def _n(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _perf(recs: list[tuple[Any, dict[str, Any]]], rows: dict[Any, Row], columns: list[Column],
          groups: list[Group], notes: list[str]) -> None:
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
        valid = p.validity.valid
        if valid is False:
            reasons = "; ".join(str(x) for x in p.validity.reasons)
            rows[rid].flags.append(f"the perf point ({label}) is not a valid measurement" +
                                   (f": {reasons}" if reasons else ""))
    ordered = sorted(chosen, key=lambda g: (g != common, -len(chosen[g]), load_of[g], str(g)))
    for n, sig in enumerate(ordered):
        lk, tk = _keyed("latency_index", n), _keyed("throughput_index", n)
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
                if not _finite(v):
                    v = p.metric(metric).mean
                rows[rid].values[key] = float(v) if _finite(v) else None
                ci = p.metric(metric).interval("mean")
                if isinstance(ci, Sequence) and len(ci) == 2 and _finite(ci[0]) and _finite(ci[1]):
                    rows[rid].ci[key] = (float(ci[0]), float(ci[1]))
        if n:
            who = ", ".join(rows[r].model for r, _ in chosen[sig])
            notes.append(f"latency and throughput: workload {n + 1} ({who}) "
                         f"is shown apart from workload 1 because it was measured at {labels[sig]}, not at "
                         f"{labels[ordered[0]]}")


def _cost(rows: dict[Any, Row], perf_of: Mapping[Any, Mapping[str, Any]], table: PriceTable,
          columns: list[Column]) -> None:
    columns.append(Column("cost_index", "cost index", "cost", "USD/1M", "low", None,
                          "3:1 blended price: (3 × input + output) / 4 USD per 1M tokens"))
    for rid, r in rows.items():
        rec = perf_of.get(rid)
        if rec is not None:
            priced = benchmark_cost(rec, table)
            pair = priced["price_per_1m"]
            r.values["cost_index"] = estimated_cost(pair) if pair else None
            r.cost_source = priced["price_source"] if pair else "unknown"
        else:
            row = table.find(r.model)
            r.values["cost_index"] = estimated_cost(row)
            r.cost_source = table.label if row is not None else "unknown"


def _embed(recs: list[tuple[Any, dict[str, Any]]], rows: dict[Any, Row], columns: list[Column],
           groups: list[Group], notes: list[str]) -> None:
    defs: dict[str, dict[tuple, list[tuple[Any, Any]]]] = {}
    for rid, rec in recs:
        d = EmbedSummary.load_or_empty(rec.get("details"))
        # a summary's tasks, else (a result stored with its headline only) the headline's
        tasks: Mapping[str, Any] = d.tasks if "tasks" in d.model_fields_set else \
            EmbedHeadline.read(rec.get("metrics")).tasks
        for name, t in tasks.items():
            metric = t.main_score if isinstance(t, EmbedTask) else t.metric
            sig = (metric, t.task_hash, t.data_hash, t.metric_version)
            defs.setdefault(name, {}).setdefault(sig, []).append((rid, t))
    for name in sorted(defs):
        variants = _by_size(defs[name])
        for n, sig in enumerate(variants):
            metric, th, dh, mv = sig
            key = _keyed(f"embed:{name}", n)
            label = f"{name} ({metric})" if len(variants) == 1 else f"{name} ({metric}, definition {n + 1})"
            columns.append(Column(key, label, "embed", "score", "high", key,
                                  f"{name}: main score {metric}; task hash {_short(th)}, data hash {_short(dh)}, "
                                  f"metric version {mv}"))
            groups.append(Group("embed-task", key, label, [rows[r].model for r, _ in defs[name][sig]],
                                {"task": name, "main_score": metric, "task_hash": th, "data_hash": dh,
                                 "metric_version": mv}))
            for rid, t in defs[name][sig]:
                v = t.value
                rows[rid].values[key] = float(v) if _finite(v) else None
                lo, hi = (t.ci95_low, t.ci95_high) if isinstance(t, EmbedTask) else (None, None)
                if _finite(lo) and _finite(hi):
                    rows[rid].ci[key] = (float(lo), float(hi))
            if n:
                b = variants[0]
                why = [w for w, differs in ((f"the main score differs ({metric} vs {b[0]})", metric != b[0]),
                                            (f"the task definition differs (task hash {_short(th)} vs {_short(b[1])})",
                                             th != b[1]),
                                            (f"the data differs (data hash {_short(dh)} vs {_short(b[2])})",
                                             dh != b[2]),
                                            (f"the metric version differs ({mv} vs {b[3]})", mv != b[3])) if differs]
                notes.append(f"embedding task {name}: definition {n + 1} "
                             f"({', '.join(rows[r].model for r, _ in defs[name][sig])}) is shown apart from "
                             f"definition 1 because " + "; ".join(why))


# -- showing figures -------------------------------------------------------------------------------

def format_value(column: Column, value: float | None) -> str:
    """A figure as the table shows it: quality on 0–100, latency in ms, throughput in tok/s, cost
    in USD per 1M tokens, embedding scores ×100; a missing figure is "—"."""
    if not _finite(value):
        return MISSING
    v = float(value)   # type: ignore[arg-type]
    if column.unit == "0-1" or column.kind == "embed":
        return f"{100 * v:.1f}"
    if column.unit == "s":
        return f"{1000 * v:,.0f}" if v >= 10 else f"{1000 * v:,.1f}"
    if column.unit == "tok/s":
        return f"{v:,.1f}"
    if column.unit == "USD/1M":
        return f"{v:,.2f}" if v >= 1 else f"{v:.3g}"
    return f"{v:.4g}"


def display_unit(column: Column) -> str:
    """The unit :func:`format_value` shows a column's figures in."""
    if column.kind == "embed":
        return "×100"
    return {"0-1": "0–100", "s": "ms", "tok/s": "tok/s", "USD/1M": "USD/1M tokens"}.get(column.unit, column.unit)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


__all__ = ["KINDS", "MISSING", "RUNS", "TRADEOFFS", "Column", "Group", "Leaderboard", "Row", "build_leaderboard",
           "display_unit", "format_value", "pareto_front", "workload"]
