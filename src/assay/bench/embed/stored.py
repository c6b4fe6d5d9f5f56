"""What is kept of an embedding run (docs/embed.md, schema ``assay.bench.embed/1``): the schema tag
(defined with the typed summary, :mod:`assay.bench.embed.summary`), the check of a summary (it reads as
one), the headline a list and the leaderboard read (the stored ``metrics`` column), the stored ``task``
column, and how many tasks its samples (the units of each task) are kept for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.bench.embed.summary import SCHEMA, EmbedSummary


def check(summary: Mapping[str, Any]) -> None:
    """An embedding summary reads as an :class:`EmbedSummary`."""
    EmbedSummary.load(summary)


def headline(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures a list and the leaderboard read: each task's main score and what makes it comparable."""
    s = EmbedSummary.load(summary)
    return {"tasks": {n: {"type": t.type, "metric": t.main_score, "value": t.value, "task_hash": t.task_hash,
                          "data_hash": t.data_hash, "metric_version": t.metric_version}
                      for n, t in s.tasks.items()}}


def task(summary: Mapping[str, Any]) -> str:
    """The stored ``task`` of an embedding run: its tasks' names, separated by commas."""
    return ",".join(summary["tasks"])


def tasks(summary: Mapping[str, Any]) -> int:
    """How many tasks an embedding run has (its samples are kept per task, in the summary's order)."""
    return len(summary["tasks"])


__all__ = ["SCHEMA", "check", "headline", "task", "tasks"]
