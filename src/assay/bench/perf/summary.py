"""A serving-performance run's summary, typed: what ``assay bench perf`` writes to ``summary.json``
and the store keeps as the perf benchmark's ``details`` (schema ``assay.bench.perf/1``; every
name is in docs/bench.md).

:class:`PerfSummary` is the run (endpoint, settings, instrument, cost) and its :class:`PerfPoint`
list; a point holds its requests, throughputs, one :class:`Distribution` per figure (``ttft``,
``itl``, ``e2e``, ...), its token counts, its SLO attainment and its :class:`Validity` verdict.
Defaults are what the readers assumed when a key was missing (see :mod:`assay.bench.summary`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from pydantic import Field

from assay.bench.summary import Num, Summary, SummaryModel

SCHEMA = "assay.bench.perf/1"       # the tag perf summaries are written and stored with (stored.SCHEMA)


class Distribution(SummaryModel):
    """One figure over a point's completed requests: count, mean, percentiles, extremes, and the
    95% intervals of the mean and the percentiles (``ci[stat] = [low, high]``)."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("ci",)
    n: Optional[int] = None
    mean: Optional[Num] = None
    p50: Optional[Num] = None
    p90: Optional[Num] = None
    p95: Optional[Num] = None
    p99: Optional[Num] = None
    min: Optional[Num] = None
    max: Optional[Num] = None
    ci: dict[str, Optional[list[Optional[Num]]]] = {}
    ci_method: Optional[dict[str, Any]] = None

    def stat(self, name: str) -> Num | None:
        """``mean``, ``p50`` ... by name (``None`` for a name it does not hold)."""
        v = getattr(self, name, None)          # a named field, or a key the model does not name
        return v if isinstance(v, (int, float)) else None

    def interval(self, name: str) -> list[Num | None] | None:
        """The 95% interval of ``name`` as stored, or ``None``."""
        return self.ci.get(name)


class Requests(SummaryModel):
    """What a point sent: ``ok`` and ``failed`` requests, failures counted by cause."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("failures",)
    sent: Optional[int] = None
    ok: Optional[int] = None
    failed: Optional[int] = 0
    failures: dict[str, int] = {}


class Tokens(SummaryModel):
    """A point's token counts: totals and means over completed requests, where the counts came
    from, and the requests whose counts disagree."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("examples",)
    input_total: Optional[Num] = None
    output_total: Optional[Num] = None
    input_mean: Optional[Num] = None
    output_mean: Optional[Num] = None
    usage_from: Optional[str] = None
    disagreements: Optional[int] = 0
    examples: list[dict[str, Any]] = []


class Lag(SummaryModel):
    """A client delay's spread, in ms."""

    p50: Optional[Num] = None
    p99: Optional[Num] = None
    max: Optional[Num] = None


class Validity(SummaryModel):
    """Whether the client, not the server, set a point's figures (``valid``), and why not."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("reasons",)
    valid: Optional[bool] = None
    reasons: list[str] = []
    clock: Optional[str] = None
    kernel_stamped: Optional[Num] = None
    schedule_lag_ms: Optional[Lag] = None
    turnaround_ms: Optional[Lag] = None
    loop_lag_ms: Optional[Lag] = None
    client_cpu_s: Optional[Num] = None
    cpu_per_token_us: Optional[Num] = None


class PerfPoint(SummaryModel):
    """One load point: a concurrency (closed loop) or a request rate (open loop); neither is a
    sequential point (concurrency 1)."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("requests", "metrics", "tokens", "validity")
    concurrency: Optional[Num] = None
    rate: Optional[Num] = None
    duration_s: Optional[Num] = None
    requests: Requests = Requests()
    request_throughput: Optional[Num] = None
    output_throughput: Optional[Num] = None
    total_token_throughput: Optional[Num] = None
    metrics: dict[str, Distribution] = {}
    latency_index: Optional[Num] = None
    throughput_index: Optional[Num] = None
    tokens: Tokens = Tokens()
    slo: Optional[dict[str, Any]] = None           # the objectives as given (in their order), attainment, goodput
    validity: Validity = Validity()

    def metric(self, name: str) -> Distribution:
        """The distribution of ``name`` (an empty one where the point has none)."""
        return self.metrics.get(name) or Distribution()

    def throughput(self, name: str) -> Num | None:
        """``request_throughput``, ``output_throughput`` or ``total_token_throughput``."""
        v = getattr(self, name, None)
        return v if isinstance(v, (int, float)) else None


class PerfSettings(SummaryModel):
    """The workload a run was asked for."""

    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    requests: Optional[int] = None
    duration: Optional[Num] = None
    warmup: Optional[int] = None
    shared_prefix: Optional[int] = None
    burstiness: Optional[Num] = None
    seed: Optional[int] = None
    timeout: Optional[Num] = None
    stall_timeout: Optional[Num] = None
    slo: Optional[dict[str, Any]] = None
    ignore_eos: Optional[bool] = None
    concurrency: Optional[list[int]] = None
    rates: Optional[list[Num]] = None
    sweep: Optional[dict[str, Any]] = None

    def get(self, name: str) -> Any:
        """A setting by name (``None`` where it was not recorded)."""
        return getattr(self, name, None)       # a named field, or a key the model does not name


class Tokenizer(SummaryModel):
    source: Optional[str] = None
    model_tokens: Optional[bool] = None


class Repeat(SummaryModel):
    """A scheduled repeat's place in its track."""

    index: Optional[int] = None
    of: Optional[int] = None
    every: Optional[Num] = None


class PerfCost(SummaryModel):
    """What the run cost when it ran: the price in force, its source, the tokens and the USD."""

    price_per_1m: Optional[list[Num]] = None
    source: Optional[str] = None
    estimated_cost_per_1m: Optional[Num] = None
    input_tokens: Optional[Num] = None
    output_tokens: Optional[Num] = None
    usd: Optional[Num] = None


class PerfSummary(Summary):
    """A perf run's summary (``assay.bench.perf/1``)."""

    TAG: ClassVar[str] = SCHEMA
    KIND: ClassVar[str] = "perf"
    BLOCKS: ClassVar[tuple[str, ...]] = ("settings", "tokenizer", "notes", "points")

    schema_: str = Field(SCHEMA, alias="schema")
    id: Optional[str] = None
    name: Optional[str] = None
    created_at: Optional[Num] = None
    endpoint: Optional[str] = None
    model: Optional[str] = None
    api: Optional[str] = None
    stream: Optional[bool] = None
    mode: Optional[str] = None
    settings: PerfSettings = PerfSettings()
    tokenizer: Tokenizer = Tokenizer()
    clock: Optional[str] = None
    client: Optional[dict[str, Any]] = None
    notes: list[str] = []
    track: Optional[str] = None
    repeat: Optional[Repeat] = None
    cost: Optional[PerfCost] = None
    points: list[PerfPoint] = []


__all__ = ["Distribution", "Lag", "PerfCost", "PerfPoint", "PerfSettings", "PerfSummary", "Repeat",
           "Requests", "SCHEMA", "Tokenizer", "Tokens", "Validity"]
