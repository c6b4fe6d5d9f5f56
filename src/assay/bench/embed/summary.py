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

from typing import Any, ClassVar

from pydantic import Field

from assay.bench.summary import Num, Summary, SummaryModel

SCHEMA = "assay.bench.embed/1"       # the tag embed summaries are written and stored with (stored.SCHEMA)


class EmbedTask(SummaryModel):
    """One task of a run: its main score (``value``) and interval, its other scores, and its
    definition."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("scores",)
    type: str | None = None
    main_score: str | None = None
    value: Num | None = None
    ci95_low: Num | None = None
    ci95_high: Num | None = None
    scores: dict[str, Num | None] = {}
    n_units: int | None = None
    task_hash: str | None = None
    data_hash: str | None = None
    metric_version: str | None = None
    source: str | None = None
    split: str | None = None
    error: str | None = None


class EmbedSummary(Summary):
    """An embedding run's summary (``assay.bench.embed/1``), keys in the order the runner writes them."""

    TAG: ClassVar[str] = SCHEMA
    KIND: ClassVar[str] = "embed"
    BLOCKS: ClassVar[tuple[str, ...]] = ("tasks",)

    schema_: str = Field(SCHEMA, alias="schema")
    ref: str | None = None
    name: str | None = None
    model: str | None = None
    model_spec: str | None = None
    note: str | None = None
    dim: int | None = None
    created_at: Num | None = None
    duration_s: Num | None = None
    config: dict[str, Any] | None = None
    calls: dict[str, Any] | None = None
    embed_s: Num | None = None
    texts_per_s: Num | None = None
    tasks: dict[str, EmbedTask] = {}


class EmbedHeadlineTask(SummaryModel):
    """A task's main score as a list and the leaderboard read it."""

    type: str | None = None
    metric: str | None = None
    value: Num | None = None
    task_hash: str | None = None
    data_hash: str | None = None
    metric_version: str | None = None


class EmbedHeadline(SummaryModel):
    """The stored ``metrics`` of an embed benchmark: each task's main score."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("tasks",)
    tasks: dict[str, EmbedHeadlineTask] = {}


__all__ = ["EmbedHeadline", "EmbedHeadlineTask", "EmbedSummary", "EmbedTask", "SCHEMA"]
