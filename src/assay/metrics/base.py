"""The metric contract: :class:`Metric`, the registry and ``auto`` planning.

A metric is one function registered with :func:`metric`. Its parameters name the
record fields it reads (``response``, ``ground_truth``, ``contexts`` ...); parameters
without a default are the fields it *requires*. A parameter named ``ctx`` receives
the :class:`EvalContext` instead (judge model, options). The function returns a
number, a :class:`Score`, or a mapping ``output name -> number | Score`` for metrics
with several outputs (ROUGE's precision, recall and F1). It may be ``async``.

:class:`Score` and :class:`EvalContext` live in :mod:`assay.scores` (below the judges, which
build scores too) and are re-exported here.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import math
import operator
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from assay.errors import AssayError
from assay.records import CANONICAL_FIELDS, Record
from assay.scores import SCORE_KEYS, EvalContext, Result, Score, Status  # noqa: F401  (re-exported)

Kind = Literal["classic", "judge", "safety", "custom"]

# A requirement is a field name, or a tuple of alternatives of which one is enough.
Requirement = str | tuple[str, ...]


def threshold_number(value: Any, what: str) -> float:
    """``value`` (a number or its text) as a threshold. Anything but a finite number is refused
    with an :class:`AssayError` naming ``what``: ``nan``, ``inf`` or ``-1e309`` would make every
    row fail (or pass)."""
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise AssayError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise AssayError(f"{what} must be a finite number, got {value!r}")
    return number


_SIZED = (str, list, dict)   # an empty one is a missing input (Record.has)
_NUMBER = (float, int)      # exact classes: bool (an int subclass) is not judged as a number


def _judged_number(value: float | int, threshold: Any, tf: float | None, higher_is_better: bool) -> Score:
    """``Score(value=value).judged(threshold, higher_is_better)`` for a plain number
    (``tf``: the threshold as a float), without the general path."""
    score = float(value)
    if tf is None:
        return Score(value, score, None, "not_applicable", None, "completed", threshold, {})
    if score != score:  # NaN: neither pass nor fail
        return Score(value, score, None, "unknown", None, "completed", threshold, {})
    passed = score >= tf if higher_is_better else score <= tf
    return Score(value, score, passed, "pass" if passed else "fail", None, "completed", threshold, {})


@dataclass
class Metric:
    name: str
    fn: Callable[..., Any]
    requires: tuple[Requirement, ...]
    optional: tuple[str, ...]
    kind: Kind = "classic"
    higher_is_better: bool = True
    threshold: float | None = None
    scale: str = ""
    auto: bool = False
    family: tuple[str, ...] = ("azure", "databricks")
    auto_unless: tuple[str, ...] = ()
    auto_requires: tuple[Requirement, ...] = ()
    outputs: tuple[str, ...] = ()
    description: str = ""
    # safety metrics: a row is a defect at score >= defect_threshold (< when defect_below);
    # defect_levels are the levels a run reports a rate for when asked ("--defect-threshold all")
    defect_threshold: float | None = None
    defect_levels: tuple[float, ...] = ()
    defect_below: bool = False
    is_async: bool = False
    uses_ctx: bool = False
    _getter: Callable[[Record], Any] | None = None

    def __post_init__(self) -> None:
        if self.threshold is not None:
            self.threshold = threshold_number(self.threshold, f"the threshold of metric {self.name!r}")
        if self.defect_threshold is not None:
            self.defect_threshold = threshold_number(self.defect_threshold,
                                                     f"the defect threshold of metric {self.name!r}")
        self.outputs = self.outputs or (self.name,)
        self.is_async = inspect.iscoroutinefunction(self.fn)
        params = [p for p in inspect.signature(self.fn).parameters if p != "ctx"]
        self.uses_ctx = "ctx" in inspect.signature(self.fn).parameters
        self._params = tuple(params)
        if len(params) == 1:
            get = operator.attrgetter(params[0])
            self._getter = lambda r: (get(r),)
        elif params:
            self._getter = operator.attrgetter(*params)
        else:
            self._getter = lambda r: ()

    # -- applicability ---------------------------------------------------------------
    def missing(self, record: Record) -> list[str]:
        """The requirements this record does not meet (empty when the metric applies)."""
        out = []
        for req in self.requires:
            if isinstance(req, tuple):
                if not any(record.has(f) for f in req):
                    out.append(" or ".join(req))
            elif not record.has(req):
                out.append(req)
        return out

    def auto_gap(self, has: Callable[[str], bool]) -> str | None:
        """Why ``auto`` does not give this metric to a row (``has(field)``: the row has that
        field), in a few words (``"without contexts"``, ``"with ground_truth"``), or None when
        it does: a row lacking one of the ``auto_requires`` fields, or having one of the
        ``auto_unless`` fields, is left to other metrics. The inputs the metric needs are
        :meth:`missing`'s business."""
        lacking = [" or ".join(r) if isinstance(r, tuple) else r for r in self.auto_requires
                   if not (any(has(f) for f in r) if isinstance(r, tuple) else has(r))]
        if lacking:
            return "without " + " or ".join(lacking)
        extra = [f for f in self.auto_unless if has(f)]
        if extra:
            return "with " + " and ".join(extra)
        return None

    def auto_skip_reason(self, record: Record) -> str | None:
        """The skip reason of a row that :meth:`auto_gap` leaves out, or None."""
        gap = self.auto_gap(record.has)
        if gap is None:
            return None
        if gap.startswith("with "):
            why = f"it has {gap[5:]}, and auto runs {self.name} only on rows without {' or '.join(self.auto_unless)}"
        else:
            wanted = " and ".join(" or ".join(r) if isinstance(r, tuple) else r for r in self.auto_requires)
            why = f"it has no {gap[8:]}, and auto runs {self.name} only on rows with {wanted}"
        return f"not planned for this row: {why} (name the metric to run it on every row that has its inputs)"

    # -- scoring -----------------------------------------------------------------------
    def _call_args(self, record: Record, ctx: EvalContext | None) -> tuple[tuple, dict]:
        args = self._getter(record)
        return args, ({"ctx": ctx} if self.uses_ctx else {})

    def finish(self, raw: Any, threshold: float | None) -> dict[str, Score]:
        """Turn what the function returned into named, judged scores."""
        if isinstance(raw, Mapping):
            items = raw.items()
        else:
            items = ((self.name, raw),)
        out: dict[str, Score] = {}
        for name, value in items:
            s = value if isinstance(value, Score) else Score(value=value)
            out[name] = s.judged(threshold, self.higher_is_better)
        return out

    def skip_all(self, reason: str) -> dict[str, Score]:
        return {name: Score.skipped(reason) for name in self.outputs}

    def error_all(self, reason: str, **props: Any) -> dict[str, Score]:
        return {name: Score.error(reason, **props) for name in self.outputs}

    def skip_reason(self, record: Record, auto: bool = False) -> str | None:
        """Why this row is not scored: an input it needs is missing, or (``auto``: the metric was
        chosen by ``auto`` planning, not named) ``auto`` does not give it this row; else None."""
        missing = self.missing(record)
        if missing:
            return f"missing input: {', '.join(missing)}"
        return self.auto_skip_reason(record) if auto else None

    def score_sync(self, record: Record, ctx: EvalContext | None = None,
                   threshold: float | None = None, auto: bool = False) -> dict[str, Score]:
        """Score one row with a synchronous metric; never raises. ``auto``: see :meth:`skip_reason`."""
        why = self.skip_reason(record, auto)
        if why is not None:
            return self.skip_all(why)
        try:
            args, kw = self._call_args(record, ctx)
            return self.finish(self.fn(*args, **kw), self.threshold if threshold is None else threshold)
        except Exception as exc:  # a metric never crashes a run
            return self.error_all(f"{type(exc).__name__}: {exc}")

    def score_batch(self, records: Sequence[Record], ctx: EvalContext | None = None,
                    threshold: float | None = None, auto: bool = False) -> list[dict[str, Score]]:
        """:meth:`score_sync` over many rows (the same scores, in order), with the per-row
        overhead taken out of the loop: the common row (every required field a non-empty
        value, the function returning numbers or a mapping of numbers) is checked and judged
        inline; any other row (a missing input, ``auto`` planning, a Score, an error) takes
        :meth:`score_sync`."""
        if auto or self.is_async or not records:
            return [self.score_sync(r, ctx, threshold, auto) for r in records]
        t = self.threshold if threshold is None else threshold
        hib = self.higher_is_better
        tf = None if t is None else float(t)
        simple = tuple(self.requires) if all(isinstance(q, str) for q in self.requires) else None
        fn, get = self.fn, self._getter
        kw = {"ctx": ctx} if self.uses_ctx else {}
        slow, name = self.score_sync, self.name
        out: list[dict[str, Score]] = []
        append = out.append
        for r in records:
            if simple is None:
                append(slow(r, ctx, threshold))
                continue
            ok = True
            for f in simple:
                v = getattr(r, f, None)
                if v is None or (not v and isinstance(v, _SIZED)):
                    ok = False
                    break
            if not ok:
                append(slow(r, ctx, threshold))
                continue
            try:
                raw = fn(*get(r), **kw)
                if raw.__class__ in _NUMBER:
                    append({name: _judged_number(raw, t, tf, hib)})
                elif raw.__class__ is dict and all(v.__class__ in _NUMBER for v in raw.values()):
                    append({k: _judged_number(v, t, tf, hib) for k, v in raw.items()})
                else:
                    append(self.finish(raw, t))
            except Exception as exc:  # a metric never crashes a run
                append(self.error_all(f"{type(exc).__name__}: {exc}"))
        return out

    async def score(self, record: Record, ctx: EvalContext | None = None,
                    threshold: float | None = None, auto: bool = False) -> dict[str, Score]:
        """Score one row (sync or async metric); never raises. ``auto``: see :meth:`skip_reason`."""
        if not self.is_async:
            return self.score_sync(record, ctx, threshold, auto)
        why = self.skip_reason(record, auto)
        if why is not None:
            return self.skip_all(why)
        try:
            args, kw = self._call_args(record, ctx)
            raw = await self.fn(*args, **kw)
            return self.finish(raw, self.threshold if threshold is None else threshold)
        except Exception as exc:
            return self.error_all(f"{type(exc).__name__}: {exc}")

    def describe_requires(self) -> str:
        return ", ".join(" | ".join(r) if isinstance(r, tuple) else r for r in self.requires)


REGISTRY: dict[str, Metric] = {}
GROUPS: dict[str, tuple[str, ...]] = {}


class UnknownMetricError(AssayError):
    pass


def metric(
    name: str | None = None,
    *,
    kind: Kind = "classic",
    higher_is_better: bool = True,
    threshold: float | None = None,
    scale: str = "",
    auto: bool = False,
    family: Sequence[str] = ("azure", "databricks"),
    requires: Sequence[Requirement] | None = None,
    auto_unless: Sequence[str] = (),
    auto_requires: Sequence[Requirement] = (),
    outputs: Sequence[str] = (),
    defect_threshold: float | None = None,
    defect_levels: Sequence[float] = (),
    defect_below: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a metric function (see the module docstring)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        mname = name or fn.__name__
        sig = inspect.signature(fn)
        params = {p: v for p, v in sig.parameters.items() if p != "ctx"}
        for p in params:
            if p not in CANONICAL_FIELDS and p != "extra":  # extra: the row's other columns, read as they are
                raise TypeError(f"metric {mname!r}: parameter {p!r} is not a record field "
                                f"(fields: {', '.join(CANONICAL_FIELDS)}, extra)")
        req = tuple(requires) if requires is not None else tuple(
            p for p, v in params.items() if v.default is inspect.Parameter.empty)
        opt = tuple(p for p, v in params.items() if v.default is not inspect.Parameter.empty)
        doc = inspect.getdoc(fn) or ""
        REGISTRY[mname] = Metric(
            name=mname, fn=fn, requires=req, optional=opt, kind=kind,
            higher_is_better=higher_is_better, threshold=threshold, scale=scale, auto=auto,
            family=tuple(family), auto_unless=tuple(auto_unless), auto_requires=tuple(auto_requires),
            outputs=tuple(outputs),
            description=doc.split("\n\n")[0].replace("\n", " "),
            defect_threshold=defect_threshold, defect_levels=tuple(defect_levels), defect_below=defect_below,
        )
        return fn

    return wrap


def group(name: str, members: Iterable[str]) -> None:
    """Register a name that expands to several metrics (``rouge`` -> rouge1..rougeL)."""
    GROUPS[name] = tuple(members)


def get_metric(name: str) -> Metric:
    load_builtin_metrics((name,))
    try:
        return REGISTRY[name]
    except KeyError:
        choices = sorted(set(REGISTRY) | set(GROUPS))
        close = difflib.get_close_matches(name, choices, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known metrics: {', '.join(choices)}"
        raise UnknownMetricError(f"unknown metric {name!r}{hint}") from None


def resolve(names: Iterable[str]) -> list[Metric]:
    """Expand groups and look names up; unknown names raise :class:`UnknownMetricError`."""
    names = list(names)
    load_builtin_metrics(names)
    out: list[Metric] = []
    seen: set[str] = set()
    for n in names:
        for m in GROUPS.get(n, (n,)):
            if m not in seen:
                seen.add(m)
                out.append(get_metric(m))
    return out


def fits(m: Metric, fields: Collection[str]) -> bool:
    """Whether a row with ``fields`` meets every requirement of ``m``."""
    return all((any(f in fields for f in r) if isinstance(r, tuple) else r in fields) for r in m.requires)


def auto_candidates(family: str | None = None) -> list[Metric]:
    """The metrics ``auto`` may pick (of ``family`` when given), in registry order."""
    load_builtin_metrics()
    return [m for m in REGISTRY.values() if m.auto and (not family or family in m.family)]


def plan_auto_rows(shapes: Iterable[Collection[str]], family: str | None = None) -> list[Metric]:
    """Metrics that ``auto`` runs on rows of these ``shapes`` (each: the fields one row, or one
    kind of row, has): those that at least one shape takes, i.e. whose requirements it meets,
    that has every ``auto_requires`` field and none of the ``auto_unless`` fields. The run
    then gives each row only the chosen metrics its own fields call for (``auto=True`` in
    :meth:`Metric.score`): with some rows labelled and others not, Databricks' correctness
    judges the labelled ones and relevance_to_query the others."""
    shapes = [s if isinstance(s, (set, frozenset)) else set(s) for s in shapes]
    return [m for m in auto_candidates(family)
            if any(fits(m, s) and m.auto_gap(s.__contains__) is None for s in shapes)]


def plan_auto(present: Collection[str], family: str | None = None) -> list[Metric]:
    """Metrics that ``auto`` runs on a row with the fields ``present``: every requirement met,
    every ``auto_requires`` field present (Azure's safety metrics: a query), and none of the
    ``auto_unless`` fields (Databricks: correctness replaces relevance_to_query once an
    expected answer exists). For a data set of rows of several shapes, see :func:`plan_auto_rows`.
    """
    return plan_auto_rows([present], family)


# The modules that register the built-in metrics, imported by name on first use, as plugins
# are: the registry sits below the metric modules and never imports them statically.
BUILTIN_MODULES = ("assay.metrics.text.lexical", "assay.metrics.retrieval", "assay.metrics.usage",
                   "assay.metrics.quality", "assay.metrics.agent", "assay.metrics.tool_use",
                   "assay.metrics.safety.harms", "assay.metrics.safety.refusal", "assay.metrics.conversation")
_loaded = 0       # how many of BUILTIN_MODULES are imported (in order)


def load_builtin_metrics(names: Iterable[str] | None = None) -> None:
    """Import the modules that register the built-in metrics: every one (once), or, given
    ``names``, in order only until each of those names is registered (a metric or a group), so
    that a run of a few classic metrics does not load the judged and safety metrics."""
    global _loaded
    wanted = None if names is None else set(names)
    while _loaded < len(BUILTIN_MODULES):
        if wanted is not None and all(n in REGISTRY or n in GROUPS for n in wanted):
            return
        importlib.import_module(BUILTIN_MODULES[_loaded])
        _loaded += 1
