"""Run-level aggregations: figures computed over a whole run once its rows are scored.

Per-output aggregates (mean, pass rate, defect rate ...) come from each metric's own
settings. Some figures need more than one output or more than one row at a time: the
jailbreak defect rate compares the two variants of a paired prompt. A module that defines
such a figure registers a function with :func:`register_run_aggregation`; the engine calls
every registered function at the end of a run, without knowing what any of them computes.

A run-level aggregation is called as ``fn(run, aggregates, rows, options)``:

* ``run``: the run summary as a dict (``metrics``, ``thresholds``, counts ...); the function
  adds its figures to it under a key of its own;
* ``aggregates``: ``{output: aggregate}`` as in ``EvalResult.metrics``;
* ``rows``: a function of no arguments returning an iterator over the result rows
  (``inputs.*`` and ``outputs.<metric>.*`` columns), called only by aggregations that need them;
* ``options``: the run's options (``evaluate(options=...)``), or None.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

Rows = Callable[[], Iterable[Mapping[str, Any]]]
RunAggregation = Callable[[dict[str, Any], Mapping[str, Any], Rows, "Mapping[str, Any] | None"], None]

RUN_AGGREGATIONS: dict[str, RunAggregation] = {}


def register_run_aggregation(name: str, fn: RunAggregation | None = None) -> Any:
    """Register ``fn`` as the run-level aggregation ``name`` (a later registration under the
    same name replaces it). Usable as ``register_run_aggregation(name, fn)`` or as a decorator
    ``@register_run_aggregation(name)``; returns ``fn``."""
    def add(f: RunAggregation) -> RunAggregation:
        RUN_AGGREGATIONS[name] = f
        return f

    return add if fn is None else add(fn)


# Modules that register the built-in run-level aggregations, imported by name (as plugins are,
# so that this registry never imports the modules that register with it).
BUILTIN_MODULES = ("assay.metrics.safety.jailbreak",)


def load_run_aggregations() -> None:
    """Import the modules that register the built-in run-level aggregations."""
    for name in BUILTIN_MODULES:
        importlib.import_module(name)


def apply_run_aggregations(run: dict[str, Any], aggregates: Mapping[str, Any], rows: Rows,
                           options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run every registered run-level aggregation over a finished run; returns ``run``."""
    load_run_aggregations()
    for fn in list(RUN_AGGREGATIONS.values()):
        fn(run, aggregates, rows, options)
    return run
