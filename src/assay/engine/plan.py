"""The first stage of a run: from data and options to a :class:`Plan`.

The data is opened, the first ``PLAN_WINDOW`` rows are read to see which record fields are
present, ``auto`` expands to the metrics whose inputs are there, and the request is checked
before anything is scored: a metric the user named whose input is in no row, a threshold for
a metric not run, an unknown ``on_bad_row`` or ``family``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, islice
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from assay.engine.target import Target
from assay.errors import AssayError, InputError
from assay.formats import open_dataset
from assay.metrics.base import Metric, plan_auto, resolve, threshold_number
from assay.records import CANONICAL_FIELDS, Record

PLAN_WINDOW = 1000   # rows looked at to decide which metrics `auto` runs


@dataclass
class Plan:
    """What a run will do: the data set (``dataset``, its first rows ``head`` and the rest
    still unread in ``rest``), the target if any, the ``metrics`` chosen, the record fields
    ``present`` in the head, and the checked per-metric ``thresholds``."""

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

    @property
    def sync_metrics(self) -> list[Metric]:
        return [m for m in self.metrics if not m.is_async]

    @property
    def async_metrics(self) -> list[Metric]:
        return [m for m in self.metrics if m.is_async]

    @property
    def layout(self) -> list[tuple[str, tuple[str, ...]]]:
        """``(metric, outputs)`` per metric: the result's columns."""
        return [(m.name, tuple(m.outputs)) for m in self.metrics]

    def records(self, start: int = 0) -> Iterator[Record]:
        """Every record, from the ``start``-th on (a resumed run skips those it has)."""
        return islice(chain(self.head, self.rest), start, None)


def make_plan(data: Any, *, target: Callable[..., Any] | None = None, metrics: str | Sequence[str] = "auto",
              thresholds: Mapping[str, float] | None = None, mapping: Mapping[str, str] | None = None,
              on_bad_row: str = "fail", family: str | None = None, format: str | None = None) -> Plan:
    """Open ``data`` (``format``: see :func:`assay.formats.open_dataset`) and plan the run; raises
    :class:`AssayError` (or :class:`InputError`, naming the source and field) for a request that
    cannot run, a mapping to a column no row has among them."""
    if data is None:
        raise AssayError("no data: pass a path, a DataFrame or a list of rows")
    if on_bad_row not in ("fail", "skip"):
        raise AssayError(f"on_bad_row must be 'fail' or 'skip', got {on_bad_row!r}")
    if family not in (None, "azure", "databricks"):
        raise AssayError(f"family must be 'azure' or 'databricks', got {family!r}")
    names = parse_metric_names(metrics)
    ds = open_dataset(data, mapping=mapping, on_bad_row=on_bad_row, format=format)
    tgt = Target(target) if target is not None else None
    rest = iter(ds)
    head = list(islice(rest, PLAN_WINDOW))
    ds.check_mapping(target=tgt is not None)
    if not head:
        raise InputError("no valid rows to evaluate", source=ds.source)
    present = fields_present(head)
    if tgt is not None:
        present |= {"response", "usage"}
    chosen = plan(names, present, family)
    check_columns(chosen, present, ds.source, len(head))
    thr = check_thresholds(thresholds or {}, chosen)
    return Plan(dataset=ds, head=head, rest=rest, present=present, metrics=chosen, thresholds=thr, target=tgt,
                mapping=dict(mapping or {}), family=family, on_bad_row=on_bad_row)


def parse_metric_names(metrics: str | Sequence[str]) -> list[str]:
    """``"a, b"`` or ``["a", "b"]`` as a list of names; at least one."""
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",")]
    names = [m for m in metrics if m]
    if not names:
        raise AssayError("no metric named; use 'auto' or a comma-separated list (see `assay metrics`)")
    return names


def plan(names: list[str], present: set[str], family: str | None = None) -> list[Metric]:
    """The metrics to run: ``auto`` expands to those whose inputs are present."""
    chosen: list[Metric] = []
    explicit = [n for n in names if n != "auto"]
    if "auto" in names:
        chosen.extend(plan_auto(present, family))
    for m in resolve(explicit):
        if m not in chosen:
            chosen.append(m)
    if not chosen:
        have = ", ".join(sorted(present)) or "none"
        raise AssayError(f"no metric applies to this data (fields present: {have}); "
                         "name metrics with --metrics, map columns with --map, or pass a target")
    return chosen


def fields_present(records: Iterable[Record]) -> set[str]:
    """The record fields that at least one of ``records`` has."""
    out: set[str] = set()
    for r in records:
        for f in CANONICAL_FIELDS:
            if f not in out and r.has(f):
                out.add(f)
    return out


def check_columns(chosen: list[Metric], present: set[str], source: str, n: int) -> None:
    """A metric the user named whose input is in no row at all is a mistake, not a skip."""
    for m in chosen:
        for req in m.requires:
            alts = req if isinstance(req, tuple) else (req,)
            if not any(a in present for a in alts):
                field = " or ".join(alts)
                raise InputError(f"no row has this field, which metric {m.name!r} needs "
                                 f"(looked at the first {n} rows); map a column to it with --map {alts[0]}=COLUMN",
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
