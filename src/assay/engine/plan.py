"""The first stage of a run: from data and options to a :class:`Plan`.

The data is opened and read once from start to end, keeping only, per combination of record
fields, how many rows have it (and the first ``PLAN_WINDOW`` rows); ``auto`` expands to the
metrics that at least one row can take; and the request is checked before anything is
scored: a metric the user named whose input is in no row, a threshold for a metric not run,
an unknown ``on_bad_row`` or ``family``. The run then reads the data again from the start (a
file is read again, a stream from its spooled copy, a DataFrame or list again).

When nobody needs the plan's counts before scoring (``make_plan(upfront=False)``: no ``on_plan``)
and the first ``PLAN_WINDOW`` rows settle the request (the metrics are named, not ``auto``; their
inputs and every mapped column are among those rows), the data is read once only: the run goes
on from those rows, and the rest's fields are counted as they are scored (:meth:`Plan.records`),
so :meth:`Plan.summary` gives the same counts once every record has been read.

Per row, a metric ``auto`` chose runs only where the row's own fields call for it (its
inputs, its ``auto_requires`` fields, none of its ``auto_unless`` fields); other rows get a
skip with the reason. A metric the user named runs on every row that has its inputs.
:meth:`Plan.summary` says how many rows each metric will run on, and :func:`describe_plan`
puts that in a few lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import Any

from assay.engine.target import Target
from assay.errors import AssayError, InputError
from assay.formats import open_dataset
from assay.metrics.base import Metric, auto_candidates, plan_auto_rows, resolve, threshold_number
from assay.records import CANONICAL_FIELDS, Record

PLAN_WINDOW = 1000   # rows kept from the planning pass (the head; the worker-process decision)
TARGET_FIELDS = frozenset({"response", "usage"})   # what a target fills in on every row
TARGET_MAY_FILL = frozenset({"contexts"})          # what a target may return on some rows (what it retrieved)

NO_ROW_HAS = "no row has "   # the start of the reason a metric is left out for want of inputs


@dataclass
class Plan:
    """What a run will do: the data set (``dataset``, its first rows ``head`` and the rest,
    read again from the start, in ``rest``), the target if any, the ``metrics`` chosen, the
    record fields ``present`` in at least one row, ``shapes`` (how many rows have each
    combination of fields, a target's outputs included), ``by_auto`` (the metrics chosen by
    ``auto`` and not named, which run per row only where the row calls for them) and the
    checked per-metric ``thresholds``."""

    dataset: Any
    head: list[Record]
    rest: Iterator[Record]
    present: set[str]
    metrics: list[Metric]
    thresholds: dict[str, float]
    target: Target | None = None
    mapping: dict[str, str] | None = None
    family: str | None = None
    on_bad_row: str = "fail"
    shapes: dict[frozenset[str], int] = field(default_factory=dict)
    by_auto: frozenset[str] = frozenset()
    auto: bool = False
    counted: bool = True    # False: ``rest``'s shapes are counted as it is read (see the module's docstring)
    repeats: int = 1        # asks per row of each judged metric (``repeated``: set once the judge is known)
    repeated: frozenset[str] = frozenset()

    @property
    def layout(self) -> list[tuple[str, tuple[str, ...]]]:
        """``(metric, outputs)`` per metric: the result's columns."""
        return [(m.name, tuple(m.outputs)) for m in self.metrics]

    def records(self, start: int = 0) -> Iterator[Record]:
        """Every record, from the ``start``-th on (a resumed run skips those it has). Where the
        plan was made from the head alone, the records after it are counted into ``shapes``
        (and ``present``) as they go by, the ones skipped included."""
        rest = self.rest if self.counted else self._counting(self.rest)
        return islice(chain(self.head, rest), start, None)

    def _counting(self, rest: Iterator[Record]) -> Iterator[Record]:
        shapes, added = self.shapes, self.added
        for r in rest:
            shape = record_shape(r)
            if added:
                shape = shape | added
            n = shapes.get(shape)
            if n is None:
                shapes[shape] = 1
                self.present.update(shape)
            else:
                shapes[shape] = n + 1
            yield r
        self.counted = True

    @property
    def added(self) -> frozenset[str]:
        """The fields every row's shape gains: a target's outputs."""
        return TARGET_FIELDS if self.target is not None else frozenset()

    @property
    def rows(self) -> int:
        """Records in the data (a conversation's turns each counting as one)."""
        return sum(self.shapes.values())

    def summary(self) -> dict[str, Any]:
        """The plan as the run summary keeps it (``run["plan"]``): ``rows`` (records in the data),
        per metric ``{"rows": rows it will run on, "chosen": "auto" | "named", "not_on": {why:
        rows}}`` (``why``: ``"without contexts"``, ``"with ground_truth"``), and ``left_out``:
        the metrics ``auto`` could pick (of the family) but no row calls for, by why."""
        metrics: dict[str, Any] = {}
        for m in self.metrics:
            gated = m.name in self.by_auto
            runs, not_on = 0, Counter()
            for shape, n in self.shapes.items():
                why = shape_gap(m, shape, gated)
                if why is None:
                    runs += n
                else:
                    not_on[why] += n
            metrics[m.name] = {"rows": runs, "chosen": "auto" if gated else "named", "not_on": dict(not_on)}
        left_out: dict[str, list[str]] = {}
        if self.auto:
            chosen = {m.name for m in self.metrics}
            for m in auto_candidates(self.family):
                if m.name not in chosen:
                    left_out.setdefault(never_why(m, self.shapes), []).append(m.name)
        return {"rows": self.rows, "metrics": metrics, "left_out": left_out}


def make_plan(data: Any, *, target: Callable[..., Any] | None = None, metrics: str | Sequence[str] = "auto",
              thresholds: Mapping[str, float] | None = None, mapping: Mapping[str, str] | None = None,
              on_bad_row: str = "fail", family: str | None = None, format: str | None = None,
              upfront: bool = True) -> Plan:
    """Open ``data`` (``format``: see :func:`assay.formats.open_dataset`) and plan the run; raises
    :class:`AssayError` (or :class:`InputError`, naming the source and field) for a request that
    cannot run, a mapping to a column no row has among them. ``upfront=False``: the counts of
    :meth:`Plan.summary` may be taken as the run reads the data (see the module's docstring);
    a bad row after the first ``PLAN_WINDOW`` then stops the run when it is reached."""
    if data is None:
        raise AssayError("no data: pass a path, a DataFrame or a list of rows")
    if on_bad_row not in ("fail", "skip"):
        raise AssayError(f"on_bad_row must be 'fail' or 'skip', got {on_bad_row!r}")
    if family not in (None, "azure", "databricks"):
        raise AssayError(f"family must be 'azure' or 'databricks', got {family!r}")
    names = parse_metric_names(metrics)
    ds = open_dataset(data, mapping=mapping, on_bad_row=on_bad_row, format=format)
    tgt = Target(target) if target is not None else None
    added = TARGET_FIELDS if tgt is not None else frozenset()
    rows = iter(ds)
    head, shapes = survey(islice(rows, PLAN_WINDOW), added=added)
    rest: Iterator[Record] | None = None      # None: the data is read again from the start
    if not upfront and "auto" not in names and len(head) == PLAN_WINDOW and head_settles(ds, names, shapes, tgt):
        rest = rows       # the run goes on from the head; the rest is counted as it is scored
    else:
        survey(rows, added=added, shapes=shapes)
    ds.check_mapping(target=tgt is not None)
    if not head:
        raise InputError("no valid rows to evaluate", source=ds.source)
    present = set().union(*shapes)
    chosen = plan(names, list(shapes), family)
    check_columns(chosen, present | (TARGET_MAY_FILL if tgt is not None else set()), ds.source,
                  sum(shapes.values()))
    thr = check_thresholds(thresholds or {}, chosen)
    named = {m.name for m in resolve([n for n in names if n != "auto"])}
    by_auto = frozenset(m.name for m in chosen if m.name not in named)
    return Plan(dataset=ds, head=head, rest=islice(iter(ds), len(head), None) if rest is None else rest,
                present=present, metrics=chosen, thresholds=thr, target=tgt, mapping=dict(mapping or {}),
                family=family, on_bad_row=on_bad_row, shapes=shapes, by_auto=by_auto, auto="auto" in names,
                counted=rest is None)


def head_settles(ds: Any, names: list[str], shapes: Mapping[frozenset[str], int], tgt: Target | None) -> bool:
    """True when the rows read so far (the head) are enough to accept the request: every mapped
    column is among them, and so is every input of the metrics named. Otherwise the whole data
    is read first, so that what is refused is refused as before, with the same message."""
    try:
        ds.check_mapping(target=tgt is not None)
    except InputError:
        return False
    present = set().union(*shapes) | (TARGET_MAY_FILL if tgt is not None else set())
    for m in resolve(names):
        for req in m.requires:
            if not any(a in present for a in (req if isinstance(req, tuple) else (req,))):
                return False
    return True


def record_shape(r: Record) -> frozenset[str]:
    """The record fields ``r`` has (:meth:`~assay.records.Record.has`: set, and not an empty
    text, list or object)."""
    d = r.__dict__
    return frozenset([f for f in CANONICAL_FIELDS if (v := d.get(f)) is not None
                      and (not isinstance(v, _SIZED) or len(v))])


_SIZED = (str, list, dict)


def survey(dataset: Iterable[Record], added: frozenset[str] = frozenset(),
           shapes: dict[frozenset[str], int] | None = None) -> tuple[list[Record], dict[frozenset[str], int]]:
    """Read every record once: the first ``PLAN_WINDOW`` of them, and how many records have each
    combination of fields (with ``added``, the fields a target fills in), added to ``shapes``
    when given. Nothing else is kept, so a file of millions of rows costs a read, not its size
    in memory."""
    head: list[Record] = []
    shapes = {} if shapes is None else shapes
    for r in dataset:
        if len(head) < PLAN_WINDOW:
            head.append(r)
        shape = record_shape(r)
        if added:
            shape = shape | added
        shapes[shape] = shapes.get(shape, 0) + 1
    return head, shapes


def shape_gap(m: Metric, shape: frozenset[str], gated: bool) -> str | None:
    """Why ``m`` does not run on a row with the fields ``shape`` (None when it does), in a few words."""
    lacking = [" or ".join(r) if isinstance(r, tuple) else r for r in m.requires if not _met(r, shape)]
    if lacking:
        return "without " + ", ".join(lacking)
    return m.auto_gap(shape.__contains__) if gated else None


def _met(req: Any, shape: frozenset[str]) -> bool:
    return any(f in shape for f in req) if isinstance(req, tuple) else req in shape


def never_why(m: Metric, shapes: Mapping[frozenset[str], int]) -> str:
    """Why ``auto`` chose ``m`` for no row, in a few words: the fields no row has; else that no
    row has them all; else what every row with its inputs has (or lacks) that rules it out."""
    present = frozenset().union(*shapes)
    absent = [" or ".join(r) if isinstance(r, tuple) else r for r in m.requires if not _met(r, present)]
    absent += [" or ".join(r) if isinstance(r, tuple) else r for r in m.auto_requires if not _met(r, present)]
    if absent:
        return NO_ROW_HAS + ", ".join(dict.fromkeys(absent))
    with_inputs = [s for s in shapes if all(_met(r, s) for r in m.requires)]
    if not with_inputs:
        return NO_ROW_HAS + "all of " + ", ".join(" or ".join(r) if isinstance(r, tuple) else r for r in m.requires)
    has = [f for f in m.auto_unless if any(f in s for s in with_inputs)]
    lacks = [" or ".join(r) if isinstance(r, tuple) else r for r in m.auto_requires
             if any(not _met(r, s) for s in with_inputs)]
    parts = (["has " + " or ".join(has)] if has else []) + (["has no " + " or ".join(lacks)] if lacks else [])
    return "every row with its inputs " + " or ".join(parts)


def describe_plan(summary: Mapping[str, Any]) -> list[str]:
    """:meth:`Plan.summary` in a few lines of plain text (field and metric names are the data's
    own words: print them escaped)."""
    rows = summary.get("rows", 0)
    lines = [f"plan: {len(summary.get('metrics', {}))} metric(s) over {rows} row(s)"]
    for name, p in summary.get("metrics", {}).items():
        line = f"  {name}: {p['rows']} row{'' if p['rows'] == 1 else 's'}"
        if p.get("not_on"):
            line += " (" + "; ".join(f"not on {n} row{'' if n == 1 else 's'} {why}"
                                     for why, n in sorted(p["not_on"].items(), key=lambda kv: -kv[1])) + ")"
        lines.append(line)
    absent = []   # "no row has X" reasons share one line: on plain data they are many (the agent metrics)
    for why, names in (summary.get("left_out") or {}).items():
        if why.startswith(NO_ROW_HAS):
            absent.append(f"{', '.join(names)} ({why[len(NO_ROW_HAS):]})")
        else:
            lines.append(f"  left out, {why}: {', '.join(names)}")
    if absent:
        lines.append(f"  left out, their inputs are in no row: {'; '.join(absent)}")
    return lines


def parse_metric_names(metrics: str | Sequence[str]) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` as a list of names; at least one."""
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",")]
    names = [m for m in metrics if m]
    if not names:
        raise AssayError("no metric named; use 'auto' or a comma-separated list (see `assay metrics`)")
    return names


def plan(names: list[str], present: set[str] | Sequence[Iterable[str]], family: str | None = None) -> list[Metric]:
    """The metrics to run: ``auto`` expands to those that at least one row takes. ``present``:
    the fields of each kind of row (a list of sets), or one set of fields for every row."""
    chosen: list[Metric] = []
    explicit = [n for n in names if n != "auto"]
    shapes = [present] if isinstance(present, (set, frozenset)) else list(present)
    present = set().union(*shapes)
    if "auto" in names:
        chosen.extend(plan_auto_rows(shapes, family))
    for m in resolve(explicit):
        if m not in chosen:
            chosen.append(m)
    if not chosen:
        have = ", ".join(sorted(present)) or "none"
        raise AssayError(f"no metric applies to this data (fields present: {have}); "
                         "name metrics with --metrics, map columns with --map, or pass a target")
    return chosen


def check_columns(chosen: list[Metric], present: set[str], source: str, n: int) -> None:
    """A metric the user named whose input is in no row at all is a mistake, not a skip."""
    for m in chosen:
        for req in m.requires:
            alts = req if isinstance(req, tuple) else (req,)
            if not any(a in present for a in alts):
                field = " or ".join(alts)
                raise InputError(f"no row has this field, which metric {m.name!r} needs "
                                 f"(looked at all {n} rows); map a column to it with --map {alts[0]}=COLUMN",
                                 source=source, field=field)


def check_thresholds(thresholds: Mapping[str, float], metrics: list[Metric]) -> dict[str, float]:
    """The thresholds given, as finite numbers; each must name a metric that runs."""
    known = {m.name for m in metrics}
    out = {}
    for k, v in thresholds.items():
        if k not in known:
            raise AssayError(f"threshold given for {k!r}, which is not among the metrics run "
                             f"({', '.join(sorted(known))})")
        out[k] = threshold_number(v, f"threshold for {k!r}")
    return out
