"""A run's figures per conversation, read the same way wherever they are shown: the Markdown
summary's "Per conversation" table (:mod:`assay.results.ci_report`) and the dashboard's
conversation view (:mod:`assay.ui.conversation_pages`).

On conversation data each metric has a figure per conversation. A **turn-level** metric scores
every turn; the conversation's figure is its turns rolled up by the run's own rule (the
aggregate's ``conversation_rollup``: the mean of the turns for quality, the worst turn for
harms). A **conversation-level** metric (the ``conversation`` group:
:mod:`assay.metrics.conversation`) judges the whole transcript once, on the last turn; its
figure is that one judgment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["LEVEL_LABELS", "conversation_figure", "is_conversation_level", "per_conversation", "rollup_of"]

#: how each level's figure per conversation is made, as the tables say it
LEVEL_LABELS = {"turn": "turn (mean of turns)", "conversation": "conversation (whole transcript)"}


def is_conversation_level(metric: str | None) -> bool:
    """Whether ``metric`` judges a whole transcript once (a member of the ``conversation`` group)."""
    from assay.metrics.base import GROUPS

    return metric in set(GROUPS.get("conversation", ()))


def per_conversation(metrics: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The run's figure per conversation, per metric output with one (harm metrics, reported as
    defect rates, left out): ``output``, ``metric``, ``level`` (``turn`` or ``conversation``),
    ``mean`` (the mean over conversations) and ``conversations``."""
    return [{"output": o, "metric": a.get("metric"),
             "level": "conversation" if is_conversation_level(a.get("metric")) else "turn",
             "mean": a["conversation_mean"], "conversations": a.get("conversations")}
            for o, a in metrics.items() if a.get("conversation_mean") is not None and a.get("defect_rate") is None]


def conversation_figure(scores: Iterable[float | None], agg: Mapping[str, Any] | None) -> float | None:
    """One conversation's figure from its turns' scores, by the run's rule for the output (``agg``:
    its aggregate): the mean, or the worst turn (lowest where higher is better); None unscored."""
    xs = [float(x) for x in scores if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x]
    if not xs:
        return None
    if rollup_of(agg) == "mean":
        return sum(xs) / len(xs)
    return min(xs) if (agg or {}).get("higher_is_better", True) is not False else max(xs)


def rollup_of(agg: Mapping[str, Any] | None) -> str:
    """How the run rolls an output's turns up into a conversation's figure: ``mean`` or ``worst``."""
    agg = agg or {}
    return agg.get("conversation_rollup") or ("mean" if agg.get("higher_is_better", True) is not False else "worst")
