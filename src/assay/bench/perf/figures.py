"""The perf figures: the one table of what a perf point measures (docs/bench.md), read by the
measurement, the comparison, ``bench show`` / ``compare`` / ``track`` and the dashboard's pages.

Each :class:`Figure` has its name (the key of a point's ``metrics`` and of its samples), its label,
the unit it is kept in (seconds, or tokens per second), which way is better, whether each request
gives one value (ITL gives one per gap between chunks), and whether ``compare`` and ``track`` show it.
The rows are in the order ``show`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str
    label: str
    unit: str                    # "s" | "tok/s"
    higher_is_better: bool
    per_request: bool            # one value per ok request (else per gap: ITL)
    compared: bool               # compare and track show it (the scheduled twins and TTFAT they do not)


FIGURES: tuple[Figure, ...] = (
    Figure("ttft", "TTFT", "s", False, True, True),
    Figure("ttft_sched", "TTFT sched", "s", False, True, False),
    Figure("ttfat", "TTFAT", "s", False, True, False),
    Figure("itl", "ITL", "s", False, False, True),
    Figure("tpot", "TPOT", "s", False, True, True),
    Figure("e2e", "E2E", "s", False, True, True),
    Figure("e2e_sched", "E2E sched", "s", False, True, False),
    Figure("gtps", "GTPS", "tok/s", True, True, True),
    Figure("ttps", "TTPS", "tok/s", True, True, True),
)
BY_NAME = {f.name: f for f in FIGURES}

SHOWN = tuple(f.name for f in FIGURES)                                  # what show lists per point
PER_REQUEST = tuple(f.name for f in FIGURES if f.per_request)           # one value per ok request
COMPARED = tuple(f.name for f in FIGURES if f.compared)                 # what compare and track show
HIGHER_IS_BETTER = frozenset(f.name for f in FIGURES if f.higher_is_better)
LABELS = {f.name: f.label for f in FIGURES}


def unit(name: str) -> str:
    """The unit a figure is kept in: ``"tok/s"`` for the token rates, else ``"s"``."""
    f = BY_NAME.get(name)
    return f.unit if f is not None else "s"


def label(name: str) -> str:
    """A figure's label (its name for one the table does not list)."""
    return LABELS.get(name, name)


__all__ = ["BY_NAME", "COMPARED", "FIGURES", "HIGHER_IS_BETTER", "LABELS", "PER_REQUEST", "SHOWN", "Figure", "label",
           "unit"]
