"""A quality run's summary, typed: what ``assay bench quality`` writes to ``summary.json`` and the
store keeps as the quality benchmark's ``details`` (schema ``assay.bench.quality/1``).

:class:`QualitySummary` holds one :class:`QualityTask` per task (what it is, how its items were
scored, its scores with 95% intervals, its primary score on 0–1), the :class:`QualityIndex` over
them, and the run's model, configuration and calls. :class:`QualityHeadline` is the few figures a
list reads (the stored benchmark's ``metrics``). Defaults are what the readers assumed when a key
was missing (see :mod:`assay.bench.summary`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from pydantic import Field

from assay.bench.summary import Num, Summary, SummaryModel

SCHEMA = "assay.bench.quality/1"       # the tag quality summaries are written and stored with (stored.SCHEMA)


class ScoreStat(SummaryModel):
    """One score of a task: its mean over the items scored, with a 95% interval."""

    mean: Optional[Num] = None
    ci95_low: Optional[Num] = None
    ci95_high: Optional[Num] = None
    evaluated: Optional[int] = None
    ci_method: Optional[str] = None


class QualityTask(SummaryModel):
    """One task of a run: its definition (hashes), how it was scored, and its figures."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("outputs", "modes", "data_files", "unsupported", "notes", "metrics")
    name: Optional[str] = None
    output_type: Optional[str] = None
    outputs: list[str] = []
    primary: Optional[str] = None
    modes: list[str] = []
    items: Optional[int] = None
    num_fewshot: Optional[int] = None
    samples: Optional[int] = None
    pass_at: Optional[list[int]] = None
    temperature: Optional[Num] = None
    source: Optional[str] = None
    task_hash: Optional[str] = None
    data_hash: Optional[str] = None
    data_files: list[str] = []
    unsupported: list[str] = []
    notes: list[str] = []
    scored_items: Optional[int] = None
    errors: Optional[int] = None
    first_error: Optional[str] = None
    metrics: dict[str, ScoreStat] = {}
    primary_value: Optional[Num] = None
    primary_scale: Optional[str] = None


class QualityIndex(SummaryModel):
    """The quality index: the mean over tasks of each task's primary score on 0–1, with its
    stratified 95% interval."""

    value: Optional[Num] = None
    ci95_low: Optional[Num] = None
    ci95_high: Optional[Num] = None
    tasks: Optional[int] = None
    definition: Optional[str] = None


class QualitySummary(Summary):
    """A quality run's summary (``assay.bench.quality/1``), keys in the order the runner writes them."""

    TAG: ClassVar[str] = SCHEMA
    KIND: ClassVar[str] = "quality"
    BLOCKS: ClassVar[tuple[str, ...]] = ("tasks", "index")

    tasks: dict[str, QualityTask] = {}
    index: QualityIndex = QualityIndex()
    items: Optional[int] = None
    schema_: str = Field(SCHEMA, alias="schema")
    name: Optional[str] = None
    model: Optional[str] = None
    model_kind: Optional[str] = None
    api: Optional[str] = None
    config: Optional[dict[str, Any]] = None
    judge: Optional[str] = None
    run_id: Optional[str] = None
    created_at: Optional[Num] = None
    duration_s: Optional[Num] = None
    resumed: Optional[bool] = None
    resumed_at_item: Optional[int] = None
    isolation: Optional[str] = None
    calls: Optional[dict[str, Any]] = None
    engine: Optional[str] = None
    ref: Optional[str] = None


class HeadlineTask(SummaryModel):
    """A task's primary score as a list shows it."""

    metric: Optional[str] = None
    value: Optional[Num] = None
    items: Optional[int] = None


class QualityHeadline(SummaryModel):
    """The stored ``metrics`` of a quality benchmark: the index and each task's primary score."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("tasks",)
    quality_index: Optional[Num] = None
    tasks: dict[str, HeadlineTask] = {}


__all__ = ["HeadlineTask", "QualityHeadline", "QualityIndex", "QualitySummary", "QualityTask",
           "SCHEMA", "ScoreStat"]
