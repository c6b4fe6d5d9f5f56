"""The leaderboard: every model in the store on one table — quality, latency, throughput, cost and
embedding scores — and the Pareto frontier of any two of them.

**Rows.** One per model, built from the latest stored result of each kind (``quality``, ``perf``,
``embed``), or from the result the user *pins* for a kind (``pins``, ``--pin KIND=REF``); with
``runs="all"`` one row per stored result instead. A model is one row however the kinds spelled it:
its identity is :func:`assay.bench.kinds.model_identity` (the name given with ``--model-name``,
else the model the spec names: quality's ``http://HOST/v1#NAME`` and perf's ``NAME`` are one
model; then the user's ``aliases``). Each row says which stored run each kind's figures came from
(``refs``, ``sources``: ref, name, time, the model as that run spelled it, whether it was pinned),
and a note lists the rows that merged several spellings.

**Columns**: each kind with a ``board`` in its row (:mod:`assay.bench.kinds`) adds its own, and says
when two figures are comparable (``quality/board.py``: the quality index and per-task scores;
``perf/board.py``: the latency and throughput indexes at one workload; ``embed/board.py``: the
embedding main scores). This module adds the *cost index*: the 3:1 blended price in USD per 1M
tokens (:func:`assay.bench.cost.estimated_cost`), priced as ``assay bench cost`` prices the run of
a kind that says what it cost (perf: a price set when it ran, else the price table, else the price
recorded with it) or, with none, from the price table. Here are the board's types (columns, rows,
comparability groups), its order, the Pareto frontier and how figures are shown.

A figure that is missing is ``None`` (shown "—"), never 0. Nothing is averaged across runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from assay.bench.cost import benchmark_cost, estimated_cost
from assay.bench.kinds import BenchKind, get_kind, kind_names, model_identity
from assay.errors import AssayError
from assay.models.price_table import PriceTable, active_table

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
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> the run: ref, name, spelling, pinned
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
    kinds: tuple[str, ...] = ()

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
        have = [r for r in self.rows if finite(r.get(key))]
        missing = [r for r in self.rows if not finite(r.get(key))]
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
                if finite(r.get(x)) and finite(r.get(y))]

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
            why = [f"no {c}" for c, k in (("quality index", y), (_LABELS[x], x)) if not finite(r.get(k))]
            other = [k for k in r.values if finite(r.values[k]) and "@" in k and k.split("@")[0] in (x, y)]
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
                          "sources": r.sources,
                          "cost_source": r.cost_source, "workload": r.workload, "flags": r.flags} for r in rows],
                "groups": [asdict(g) for g in self.groups], "notes": self.notes}


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
    cand = [(i, sx * float(x), sy * float(y)) for i, (x, y) in enumerate(points) if finite(x) and finite(y)]
    front = []
    for i, x, y in cand:
        dominated = any(ox <= x and oy <= y and (ox < x or oy < y) for j, ox, oy in cand if j != i)
        if not dominated:
            front.append((x, y, i))
    return [i for _, _, i in sorted(front)]


# -- building the board ----------------------------------------------------------------------------

def build_leaderboard(store: Any, *, kinds: Iterable[str] | str = "all", runs: str = "latest",
                      table: PriceTable | None = None, aliases: Mapping[str, str] | None = None,
                      pins: Mapping[str, Iterable[str]] | None = None) -> Leaderboard:
    """The leaderboard of ``store`` (see the module docstring). ``kinds``: which kinds of result
    to read (``"all"``, or any of the kinds with columns on the board: ``quality``, ``perf``,
    ``embed``); ``runs``: ``latest`` (one row per model) or ``all`` (one row per stored result);
    ``table``: the price table (default: the one in force); ``aliases``: ``{spelling or name:
    model}`` (``--alias``); ``pins``: ``{kind: [ref, ...]}``, the stored results to use for their
    models instead of the latest (``--pin KIND=REF``; a ref, ref prefix or name)."""
    kinds = _kinds(kinds)
    if runs not in RUNS:
        raise AssayError(f"runs must be one of {', '.join(RUNS)}, not {runs!r}")
    prices = table or active_table()
    pinned = _pinned(store, pins or {}, kinds, runs)
    found = {k: pinned.get(k, []) + [r for r in store.list_benchmarks(kind=k)
                                     if r.get("id") not in {p.get("id") for p in pinned.get(k, [])}] for k in kinds}
    rows: dict[Any, Row] = {}
    priced_by: dict[Any, dict[str, Any]] = {}
    parts: dict[str, list[tuple[Any, dict[str, Any]]]] = {k: [] for k in kinds}
    for k in kinds:
        seen: set[str] = set()
        spends = get_kind(k).tokens is not None           # its runs say what they cost (perf)
        pinned_ids = {p.get("id") for p in pinned.get(k, [])}
        for rec in found[k]:                               # the pinned ones, then newest first
            model = _model(get_kind(k), rec, aliases)
            if runs == "latest":
                if model in seen:
                    continue
                seen.add(model)
                rid: Any = model
            else:
                rid = (k, rec.get("ref") or rec.get("id"))
            row = rows.setdefault(rid, Row(model=model))
            row.refs[k] = str(rec.get("ref") or rec.get("id"))
            row.sources[k] = {"ref": row.refs[k], "name": rec.get("name"), "created_at": rec.get("created_at"),
                              "spelling": _spelling(get_kind(k), rec), "pinned": rec.get("id") in pinned_ids}
            if rec.get("created_at") is not None:
                row.created_at[k] = float(rec["created_at"])
            parts[k].append((rid, rec))
            if spends:
                priced_by.setdefault(rid, rec)
    for k in kinds:
        parts[k].sort(key=lambda p: (p[1].get("created_at") or 0.0, p[1].get("id") or 0))   # oldest first: on a
        # tie, the earlier result is set 1
    columns: list[Column] = []
    groups: list[Group] = []
    notes: list[str] = []
    for k in board_kinds():                                # the kind table's order, whatever order was asked
        if k in kinds:
            get_kind(k).board(parts[k], rows, columns, groups, notes)
    _cost(rows, priced_by, prices, columns)
    _order(columns)
    notes += _identity_notes(rows.values(), runs)
    return Leaderboard(list(rows.values()), columns, groups, notes, runs, tuple(kinds))


def _pinned(store: Any, pins: Mapping[str, Iterable[str]], kinds: Sequence[str], runs: str
            ) -> dict[str, list[dict[str, Any]]]:
    """The stored results ``pins`` names, by kind; :class:`AssayError` (naming the pin) for a kind
    not on the board, a result not in the store or of another kind, two pins of one model, or
    ``runs="all"`` (every result is shown there)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for kind, refs in pins.items():
        for ref in ([refs] if isinstance(refs, str) else refs):
            where = f"--pin {kind}={ref}"
            if runs != "latest":
                raise AssayError(f"{where}: pins choose a model's result for --runs latest; --runs all shows every "
                                 "result")
            if kind not in kinds:
                raise AssayError(f"{where}: the kind must be one of {', '.join(kinds)}")
            try:
                rec = store.get_benchmark(str(ref), kind=kind)
            except AssayError as exc:
                raise AssayError(f"{where}: {exc}") from None
            out.setdefault(kind, []).append(rec)
    for kind, recs in out.items():
        models = [_model(get_kind(kind), r, None) for r in recs]
        twice = sorted({m for m in models if models.count(m) > 1})
        if twice:
            raise AssayError(f"--pin {kind}=...: two {kind} results pinned for {', '.join(twice)}; pin one per model")
    return out


def _identity_notes(rows: Iterable[Row], runs: str) -> list[str]:
    """Which rows merged results that spelled the model differently, and which figures are pinned."""
    notes = []
    for r in rows:
        spellings = {k: s["spelling"] for k, s in r.sources.items() if s.get("spelling")}
        if len(set(spellings.values())) > 1 or any(v != r.model for v in spellings.values()):
            notes.append(f"{r.model}: one model, spelled " + "; ".join(f"{v} ({k} {r.refs[k]})"
                                                                        for k, v in spellings.items())
                         + " (one identity: --model-name, else the model the spec names; --alias merges more)")
        pinned = [f"{k} {s['ref']}" for k, s in r.sources.items() if s.get("pinned")]
        if pinned:
            notes.append(f"{r.model}: pinned {', '.join(pinned)} (not necessarily the latest result)")
    if runs == "latest":
        notes.append("one row per model: each kind's figures from its latest result (or the one pinned with --pin "
                     "KIND=REF); the runs are named in each row's refs")
    return notes


def _model(kind: BenchKind, rec: Mapping[str, Any], aliases: Mapping[str, str] | None = None) -> str:
    """A stored result's model identity (:func:`assay.bench.kinds.model_identity`)."""
    details = rec.get("details")
    return model_identity(_spelling(kind, rec), details if isinstance(details, Mapping) else None, aliases)


def _spelling(kind: BenchKind, rec: Mapping[str, Any]) -> str:
    """The model as the result stored it: the stored name, else its summary's (read through its kind's
    typed summary)."""
    details = rec.get("details")
    raw = details.get("model") if isinstance(details, Mapping) else None
    return str(raw or rec.get("model") or getattr(kind.read(details), "model", None) or "").strip()


def board_kinds() -> tuple[str, ...]:
    """The kinds with columns on the board, in the kind table's order (:mod:`assay.bench.kinds`)."""
    return tuple(k for k in kind_names() if get_kind(k).board is not None)


def _kinds(kinds: Iterable[str] | str) -> tuple[str, ...]:
    known = board_kinds()
    if isinstance(kinds, str):
        kinds = known if kinds.strip().lower() in ("all", "") else [x.strip().lower() for x in kinds.split(",")]
    got = tuple(dict.fromkeys(kinds))
    bad = [k for k in got if k not in known]
    if bad or not got:
        raise AssayError(f"kind must be {', '.join(known)} or all, not {', '.join(bad) or 'nothing'}")
    return got


def _order(columns: list[Column]) -> None:
    """The figures of the whole model (no ``:`` in the key: the indexes) first, then those per task;
    each in the order the kinds added them (quality, perf, cost; then quality's tasks, embed's)."""
    columns.sort(key=lambda c: ":" in c.key)              # stable


def keyed(base: str, n: int) -> str:
    """The column key of the ``n``-th (from 0) comparability group of ``base``."""
    return base if n == 0 else f"{base}@{n + 1}"


def short_hash(h: Any) -> str:
    """A hash as a note shows it: its first 12 characters (``none`` for none)."""
    return str(h)[:12] if h else "none"


def by_size(sigs: Mapping[Any, list[Any]]) -> list[Any]:
    """Signatures, the one most results share first (ties: the first seen, i.e. the oldest)."""
    order = list(sigs)
    return sorted(order, key=lambda s: (-len(sigs[s]), order.index(s)))


def _cost(rows: dict[Any, Row], priced_by: Mapping[Any, Mapping[str, Any]], table: PriceTable,
          columns: list[Column]) -> None:
    """The cost index of every row: priced as ``assay bench cost`` prices the run that says what it
    cost (perf), else from the price table."""
    columns.append(Column("cost_index", "cost index", "cost", "USD/1M", "low", None,
                          "3:1 blended price: (3 × input + output) / 4 USD per 1M tokens"))
    for rid, r in rows.items():
        rec = priced_by.get(rid)
        if rec is not None:
            priced = benchmark_cost(rec, table)
            pair = priced["price_per_1m"]
            r.values["cost_index"] = estimated_cost(pair) if pair else None
            r.cost_source = priced["price_source"] if pair else "unknown"
        else:
            row = table.find(r.model)
            r.values["cost_index"] = estimated_cost(row)
            r.cost_source = table.label if row is not None else "unknown"


# -- showing figures -------------------------------------------------------------------------------

def format_value(column: Column, value: float | None) -> str:
    """A figure as the table shows it: quality on 0–100, latency in ms, throughput in tok/s, cost
    in USD per 1M tokens, embedding scores ×100; a missing figure is "—"."""
    if not finite(value):
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


def finite(v: Any) -> bool:
    """Whether ``v`` is a finite number (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


__all__ = ["MISSING", "RUNS", "TRADEOFFS", "Column", "Group", "Leaderboard", "Row", "board_kinds", "build_leaderboard",
           "by_size", "display_unit", "finite", "format_value", "keyed", "pareto_front", "short_hash"]
