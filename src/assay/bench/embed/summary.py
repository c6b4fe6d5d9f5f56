"""An embedding run's summary, typed: what ``assay bench embed`` writes to ``summary.json`` and the
store keeps as the embed benchmark's ``details`` (schema ``assay.bench.embed/1``).

:class:`EmbedSummary` holds the model, its configuration and calls, and one :class:`EmbedTask`
per task: its main score with a 95% interval over its units, its other scores, and what makes it
comparable (task and data hashes, metric version); a task whose texts could not be embedded keeps
its ``error`` and no score. :class:`EmbedHeadline` is the few figures a list reads (the stored
benchmark's ``metrics``). Defaults are what the readers assumed when a key was missing (see
:mod:`assay.bench.summary`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from pydantic import Field

from assay.bench.summary import Num, Summary, SummaryModel

SCHEMA = "assay.bench.embed/1"       # the tag embed summaries are written and stored with (stored.SCHEMA)


class EmbedTask(SummaryModel):
    """One task of a run: its main score (``value``) and interval, its other scores, and its
    definition."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("scores",)
    type: Optional[str] = None
    main_score: Optional[str] = None
    value: Optional[Num] = None
    ci95_low: Optional[Num] = None
    ci95_high: Optional[Num] = None
    scores: dict[str, Optional[Num]] = {}
    n_units: Optional[int] = None
    task_hash: Optional[str] = None
    data_hash: Optional[str] = None
    metric_version: Optional[str] = None
    source: Optional[str] = None
    split: Optional[str] = None
    error: Optional[str] = None


class EmbedSummary(Summary):
    """An embedding run's summary (``assay.bench.embed/1``), keys in the order the runner writes them."""

    TAG: ClassVar[str] = SCHEMA
    KIND: ClassVar[str] = "embed"
    BLOCKS: ClassVar[tuple[str, ...]] = ("tasks",)

    schema_: str = Field(SCHEMA, alias="schema")
    ref: Optional[str] = None
    name: Optional[str] = None
    model: Optional[str] = None
    model_spec: Optional[str] = None
    note: Optional[str] = None
    dim: Optional[int] = None
    created_at: Optional[Num] = None
    duration_s: Optional[Num] = None
    config: Optional[dict[str, Any]] = None
    calls: Optional[dict[str, Any]] = None
    embed_s: Optional[Num] = None
    texts_per_s: Optional[Num] = None
    tasks: dict[str, EmbedTask] = {}


class EmbedHeadlineTask(SummaryModel):
    """A task's main score as a list and the leaderboard read it."""

    type: Optional[str] = None
    metric: Optional[str] = None
    value: Optional[Num] = None
    task_hash: Optional[str] = None
    data_hash: Optional[str] = None
    metric_version: Optional[str] = None


class EmbedHeadline(SummaryModel):
    """The stored ``metrics`` of an embed benchmark: each task's main score."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("tasks",)
    tasks: dict[str, EmbedHeadlineTask] = {}


__all__ = ["EmbedHeadline", "EmbedHeadlineTask", "EmbedSummary", "EmbedTask", "SCHEMA"]
