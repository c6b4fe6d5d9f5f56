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
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Mapping, Sequence

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
    auto_requires: tuple[str, ...] = ()
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

    def score_sync(self, record: Record, ctx: EvalContext | None = None,
                   threshold: float | None = None) -> dict[str, Score]:
        """Score one row with a synchronous metric; never raises."""
        missing = self.missing(record)
        if missing:
            return self.skip_all(f"missing input: {', '.join(missing)}")
        try:
            args, kw = self._call_args(record, ctx)
            return self.finish(self.fn(*args, **kw), self.threshold if threshold is None else threshold)
        except Exception as exc:  # a metric never crashes a run
            return self.error_all(f"{type(exc).__name__}: {exc}")

    async def score(self, record: Record, ctx: EvalContext | None = None,
                    threshold: float | None = None) -> dict[str, Score]:
        """Score one row (sync or async metric); never raises."""
        if not self.is_async:
            return self.score_sync(record, ctx, threshold)
        missing = self.missing(record)
        if missing:
            return self.skip_all(f"missing input: {', '.join(missing)}")
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
    auto_requires: Sequence[str] = (),
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
            if p not in CANONICAL_FIELDS:
                raise TypeError(f"metric {mname!r}: parameter {p!r} is not a record field "
                                f"(fields: {', '.join(CANONICAL_FIELDS)})")
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
    load_builtin_metrics()
    try:
        return REGISTRY[name]
    except KeyError:
        choices = sorted(set(REGISTRY) | set(GROUPS))
        close = difflib.get_close_matches(name, choices, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known metrics: {', '.join(choices)}"
        raise UnknownMetricError(f"unknown metric {name!r}{hint}") from None


def resolve(names: Iterable[str]) -> list[Metric]:
    """Expand groups and look names up; unknown names raise :class:`UnknownMetricError`."""
    load_builtin_metrics()
    out: list[Metric] = []
    seen: set[str] = set()
    for n in names:
        for m in GROUPS.get(n, (n,)):
            if m not in seen:
                seen.add(m)
                out.append(get_metric(m))
    return out


def plan_auto(present: set[str], family: str | None = None) -> list[Metric]:
    """Metrics that ``auto`` runs given the fields present in at least one row.

    A metric is chosen when every requirement is met by some present field, every one of
    its ``auto_requires`` fields is present (Azure: relevance is planned for RAG data, the
    retrieval score for conversations), and none of its ``auto_unless`` fields is present
    (Databricks: correctness replaces relevance_to_query once an expected answer exists).
    """
    load_builtin_metrics()
    chosen = []
    for m in REGISTRY.values():
        if not m.auto or (family and family not in m.family):
            continue
        ok = all((any(f in present for f in r) if isinstance(r, tuple) else r in present)
                 for r in m.requires)
        ok = ok and all(f in present for f in m.auto_requires)
        if ok and not any(f in present for f in m.auto_unless):
            chosen.append(m)
    return chosen


# The modules that register the built-in metrics, imported by name on first use, as plugins
# are: the registry sits below the metric modules and never imports them statically.
BUILTIN_MODULES = ("assay.metrics.text.lexical", "assay.metrics.retrieval", "assay.metrics.usage",
                   "assay.metrics.quality", "assay.metrics.agent", "assay.metrics.tool_use",
                   "assay.metrics.safety.harms")
_loaded = False


def load_builtin_metrics() -> None:
    """Import the modules that register the built-in metrics (once)."""
    global _loaded
    if _loaded:
        return
    for name in BUILTIN_MODULES:
        importlib.import_module(name)
    _loaded = True
