"""What is kept of a quality run as a benchmark (docs/quality.md, schema ``assay.bench.quality/1``):
the schema tag, the headline a list and the leaderboard read (the stored ``metrics`` column) and the
stored ``task`` column."""

from __future__ import annotations

from typing import Any, Mapping

SCHEMA = "assay.bench.quality/1"


def headline(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The few figures a benchmark list shows: the index and each task's primary score."""
    return {"quality_index": (summary.get("index") or {}).get("value"),
            "tasks": {n: {"metric": t["primary"], "value": t.get("primary_value"), "items": t["items"]}
                      for n, t in summary["tasks"].items()}}


def task(summary: Mapping[str, Any]) -> str:
    """The stored ``task`` of a quality run: its tasks' names, separated by commas."""
    return ",".join(summary["tasks"])


__all__ = ["SCHEMA", "headline", "task"]
