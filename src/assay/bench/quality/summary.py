"""A quality run's summary, typed: what ``assay bench quality`` writes to ``summary.json`` and the
store keeps as the quality benchmark's ``details`` (schema ``assay.bench.quality/1``).

:class:`QualitySummary` holds one :class:`QualityTask` per task (what it is, how its items were
scored, its scores with 95% intervals, its primary score on 0–1), the :class:`QualityIndex` over
them, and the run's model, configuration and calls. :class:`QualityHeadline` is the few figures a
list reads (the stored benchmark's ``metrics``). Defaults are what the readers assumed when a key
was missing (see :mod:`assay.bench.summary`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from assay.bench.summary import Num, Summary, SummaryModel

SCHEMA = "assay.bench.quality/1"       # the tag quality summaries are written and stored with (stored.SCHEMA)


class ScoreStat(SummaryModel):
    """One score of a task: its mean over the items scored, with a 95% interval (``ci_method``:
    ``wilson`` for a proportion, ``bootstrap``, or ``too few (n < 5)`` with no interval) and
    lm-evaluation-harness's standard error (sample standard deviation / sqrt(n))."""

    mean: Num | None = None
    ci95_low: Num | None = None
    ci95_high: Num | None = None
    evaluated: int | None = None
    ci_method: str | None = None
    stderr: Num | None = None
    aggregation: str | None = None      # how the items' values were aggregated, when not a plain mean
    lm_eval: str | None = None          # lm-evaluation-harness's name for this score ("acc,none")


class QualityTask(SummaryModel):
    """One task of a run: its definition (hashes), how it was scored, and its figures."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("outputs", "modes", "data_files", "unsupported", "notes", "metrics")
    name: str | None = None
    output_type: str | None = None
    outputs: list[str] = []
    primary: str | None = None
    modes: list[str] = []
    items: int | None = None
    num_fewshot: int | None = None
    samples: int | None = None
    pass_at: list[int] | None = None
    temperature: Num | None = None
    source: str | None = None
    task_hash: str | None = None
    data_hash: str | None = None
    data_files: list[str] = []
    unsupported: list[str] = []
    notes: list[str] = []
    scored_items: int | None = None
    errors: int | None = None
    unparsed: int | None = None       # multiple choice by generation: answers that chose no single choice
    first_error: str | None = None
    killed: int | None = None           # code samples killed twice: not judged, outside pass@k
    metrics: dict[str, ScoreStat] = {}
    primary_value: Num | None = None
    primary_scale: str | None = None
    code_files: dict[str, str] = {}     # the task's own code imported (--trust-task-code): path -> sha256


class QualityIndex(SummaryModel):
    """The quality index: the mean over tasks of each task's primary score on 0–1, with its
    stratified 95% interval."""

    value: Num | None = None
    ci95_low: Num | None = None
    ci95_high: Num | None = None
    tasks: int | None = None
    ci_method: str | None = None
    definition: str | None = None


class QualitySummary(Summary):
    """A quality run's summary (``assay.bench.quality/1``), keys in the order the runner writes them."""

    TAG: ClassVar[str] = SCHEMA
    KIND: ClassVar[str] = "quality"
    BLOCKS: ClassVar[tuple[str, ...]] = ("tasks", "index")

    tasks: dict[str, QualityTask] = {}
    index: QualityIndex = QualityIndex()
    items: int | None = None
    schema_: str = Field(SCHEMA, alias="schema")
    name: str | None = None
    model: str | None = None
    model_kind: str | None = None
    api: str | None = None
    config: dict[str, Any] | None = None
    judge: str | None = None
    run_id: str | None = None
    created_at: Num | None = None
    duration_s: Num | None = None
    resumed: bool | None = None
    resumed_at_item: int | None = None
    isolation: str | None = None
    memory_limit: str | None = None     # what bounded a code sample's memory: "cgroup" (all its processes) or "rlimit"
    calls: dict[str, Any] | None = None
    engine: str | None = None
    trust_task_code: bool | None = None     # the tasks' !function hooks were imported and run
    groups: dict[str, Any] | None = None    # --task-dir groups named: their tasks and aggregated figures
    cost: dict[str, Any] | None = None
    ref: str | None = None


class HeadlineTask(SummaryModel):
    """A task's primary score as a list shows it."""

    metric: str | None = None
    value: Num | None = None
    items: int | None = None


class QualityHeadline(SummaryModel):
    """The stored ``metrics`` of a quality benchmark: the index and each task's primary score."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("tasks",)
    quality_index: Num | None = None
    tasks: dict[str, HeadlineTask] = {}


__all__ = ["HeadlineTask", "QualityHeadline", "QualityIndex", "QualitySummary", "QualityTask",
           "SCHEMA", "ScoreStat"]
