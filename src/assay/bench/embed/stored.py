"""What is kept of an embedding run (docs/embed.md, schema ``assay.bench.embed/1``): the schema tag,
the headline a list and the leaderboard read (the stored ``metrics`` column), the stored ``task``
column, and how many tasks its samples (the units of each task) are kept for."""

from __future__ import annotations

from typing import Any, Mapping

SCHEMA = "assay.bench.embed/1"


def headline(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures a list and the leaderboard read: each task's main score and what makes it comparable."""
    return {"tasks": {n: {"type": t["type"], "metric": t["main_score"], "value": t["value"],
                          "task_hash": t["task_hash"], "data_hash": t["data_hash"],
                          "metric_version": t["metric_version"]}
                      for n, t in summary["tasks"].items()}}


def task(summary: Mapping[str, Any]) -> str:
    """The stored ``task`` of an embedding run: its tasks' names, separated by commas."""
    return ",".join(summary["tasks"])


def tasks(summary: Mapping[str, Any]) -> int:
    """How many tasks an embedding run has (its samples are kept per task, in the summary's order)."""
    return len(summary["tasks"])


__all__ = ["SCHEMA", "headline", "task", "tasks"]
