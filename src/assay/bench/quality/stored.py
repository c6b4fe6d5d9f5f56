"""What is kept of a quality run as a benchmark (docs/quality.md, schema ``assay.bench.quality/1``):
the schema tag (defined with the typed summary, :mod:`assay.bench.quality.summary`), the check of a
summary (it reads as one), the headline a list and the leaderboard read (the stored ``metrics`` column)
and the stored ``task`` column."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.bench.quality.summary import SCHEMA, QualitySummary


def check(summary: Mapping[str, Any]) -> None:
    """A quality summary reads as a :class:`QualitySummary`."""
    QualitySummary.load(summary)


def headline(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures a benchmark list shows: the index and each task's primary score."""
    s = QualitySummary.load(summary)
    return {"quality_index": s.index.value,
            "tasks": {n: {"metric": t.primary, "value": t.primary_value, "items": t.items} for n, t in s.tasks.items()}}


def task(summary: Mapping[str, Any]) -> str:
    """The stored ``task`` of a quality run: its tasks' names, separated by commas."""
    return ",".join(summary["tasks"])


__all__ = ["SCHEMA", "check", "headline", "task"]
