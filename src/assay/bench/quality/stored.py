"""What is kept of a quality run as a benchmark (docs/quality.md, schema ``assay.bench.quality/1``):
the schema tag (defined with the typed summary, :mod:`assay.bench.quality.summary`), the check of a
summary (it reads as one), the headline a list and the leaderboard read (the stored ``metrics`` column),
the stored ``task`` column, and the tokens the model under test spent (what ``bench cost`` prices)."""

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


def tokens(details: Mapping[str, Any] | None) -> tuple[float | None, float | None, str]:
    """(input tokens, output tokens, how they were found) of a stored quality run: the model under
    test's paid tokens (calls made, not call-cache hits), as its call counts recorded them."""
    from assay.bench.cost import count

    d = details if isinstance(details, Mapping) else {}
    calls = d.get("calls") if isinstance(d.get("calls"), Mapping) else None
    if calls is None:
        why = "a Python pipeline reports none" if d.get("model_kind") == "python" else "the run kept no call counts"
        return None, None, f"not recorded: {why}"
    tin, tout = count(calls.get("prompt_tokens")), count(calls.get("completion_tokens"))
    if tin is None or tout is None:
        return None, None, "not recorded: the call counts hold no token counts"
    return tin, tout, "the model's usage (calls made, not cache hits)"


__all__ = ["SCHEMA", "check", "headline", "task", "tokens"]
