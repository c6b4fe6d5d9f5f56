"""A serving-performance run's summary, typed: what ``assay bench perf`` writes to ``summary.json``
and the store keeps as the perf benchmark's ``details`` (schema ``assay.bench.perf/1``; every
name is in docs/bench.md).

:class:`PerfSummary` is the run (endpoint, settings, instrument, cost) and its :class:`PerfPoint`
list; a point holds its requests, throughputs, one :class:`Distribution` per figure (``ttft``,
``itl``, ``e2e``, ...), its token counts, its SLO attainment and its :class:`Validity` verdict.
Defaults are what the readers assumed when a key was missing (see :mod:`assay.bench.summary`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from assay.bench.summary import Num, Summary, SummaryModel

SCHEMA = "assay.bench.perf/1"       # the tag perf summaries are written and stored with (stored.SCHEMA)


class Distribution(SummaryModel):
    """One figure over a point's completed requests: count, mean, its standard error, percentiles,
    extremes, and the 95% intervals of the mean and the percentiles (``ci[stat] = [low, high]``, or
    ``None`` where the values were too few for one: ``ci_method`` says so)."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("ci",)
    n: int | None = None
    mean: Num | None = None
    se: Num | None = None
    p50: Num | None = None
    p90: Num | None = None
    p95: Num | None = None
    p99: Num | None = None
    min: Num | None = None
    max: Num | None = None
    ci: dict[str, list[Num | None] | None] = {}
    ci_method: dict[str, Any] | None = None

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
    sent: int | None = None
    ok: int | None = None
    failed: int | None = 0
    failures: dict[str, int] = {}


class Tokens(SummaryModel):
    """A point's token counts: totals and means over completed requests, where the counts came
    from (``input_from``: the prompt's count, by which tokenizer; ``input_server_mean``: the server's
    own count where it gave one), the requests whose counts disagree, and those whose server usage
    was not a plausible count (``usage_rejected``, why)."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("examples", "usage_rejected_why")
    input_total: Num | None = None
    output_total: Num | None = None
    input_mean: Num | None = None
    output_mean: Num | None = None
    usage_from: str | None = None
    input_from: str | None = None
    input_server_mean: Num | None = None
    usage_rejected: int | None = 0
    usage_rejected_why: list[str] = []
    disagreements: int | None = 0
    examples: list[dict[str, Any]] = []


class Lag(SummaryModel):
    """A client delay's spread, in ms."""

    p50: Num | None = None
    p99: Num | None = None
    max: Num | None = None


class Validity(SummaryModel):
    """Whether a point's figures measure the server (``valid``), and why not: the client set them,
    too many requests failed, none completed, the point stopped early. ``failed`` and
    ``failure_rate`` count the failures; ``notes`` says what did not make the point invalid."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("reasons", "notes")
    valid: bool | None = None
    reasons: list[str] = []
    failed: int | None = None
    failure_rate: Num | None = None
    notes: list[str] = []
    clock: str | None = None
    kernel_stamped: Num | None = None
    schedule_lag_ms: Lag | None = None
    turnaround_ms: Lag | None = None
    loop_lag_ms: Lag | None = None
    client_cpu_s: Num | None = None
    cpu_per_token_us: Num | None = None


class PerfPoint(SummaryModel):
    """One load point: a concurrency (closed loop) or a request rate (open loop); neither is a
    sequential point (concurrency 1)."""

    BLOCKS: ClassVar[tuple[str, ...]] = ("requests", "metrics", "tokens", "validity")
    concurrency: Num | None = None
    rate: Num | None = None
    duration_s: Num | None = None
    requests: Requests = Requests()
    request_throughput: Num | None = None
    output_throughput: Num | None = None
    total_token_throughput: Num | None = None
    metrics: dict[str, Distribution] = {}
    latency_index: Num | None = None
    throughput_index: Num | None = None
    tokens: Tokens = Tokens()
    slo: dict[str, Any] | None = None           # the objectives as given (in their order), attainment, goodput
    stopped: str | None = None                  # why the point ended before sending all its requests
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

    input_tokens: int | None = None
    output_tokens: int | None = None
    requests: int | None = None
    duration: Num | None = None
    warmup: int | None = None
    shared_prefix: int | None = None
    burstiness: Num | None = None
    seed: int | None = None
    timeout: Num | None = None
    stall_timeout: Num | None = None
    slo: dict[str, Any] | None = None
    ignore_eos: bool | None = None
    concurrency: list[int] | None = None
    rates: list[Num] | None = None
    sweep: dict[str, Any] | None = None
    max_error_rate: Num | None = None           # --max-error-rate: a point failing more stops the run
    max_time: Num | None = None
    prefix_groups: int | None = None            # --prefix-groups (with --shared-prefix)
    lora: dict[str, Any] | None = None          # --lora / --lora-mix
    workload: str | None = None                 # the fingerprint of a non-synthetic workload (compare.workload_name)
    sessions: dict[str, Any] | None = None      # --sessions / --turns / --think-time
    replay: dict[str, Any] | None = None        # --replay: the trace, its layout and digest, the speed

    def get(self, name: str) -> Any:
        """A setting by name (``None`` where it was not recorded)."""
        return getattr(self, name, None)       # a named field, or a key the model does not name


class Tokenizer(SummaryModel):
    source: str | None = None
    model_tokens: bool | None = None


class Repeat(SummaryModel):
    """A scheduled repeat's place in its track."""

    index: int | None = None
    of: int | None = None
    every: Num | None = None


class PerfCost(SummaryModel):
    """What the run cost when it ran: the price in force, its source, the tokens and the USD."""

    price_per_1m: list[Num] | None = None
    source: str | None = None
    estimated_cost_per_1m: Num | None = None
    input_tokens: Num | None = None
    output_tokens: Num | None = None
    usd: Num | None = None


class PerfSummary(Summary):
    """A perf run's summary (``assay.bench.perf/1``)."""

    TAG: ClassVar[str] = SCHEMA
    KIND: ClassVar[str] = "perf"
    BLOCKS: ClassVar[tuple[str, ...]] = ("settings", "tokenizer", "notes", "points")

    schema_: str = Field(SCHEMA, alias="schema")
    id: str | None = None
    name: str | None = None
    created_at: Num | None = None
    endpoint: str | None = None
    model: str | None = None
    api: str | None = None
    stream: bool | None = None
    mode: str | None = None
    settings: PerfSettings = PerfSettings()
    tokenizer: Tokenizer = Tokenizer()
    clock: str | None = None
    client: dict[str, Any] | None = None
    notes: list[str] = []
    track: str | None = None
    repeat: Repeat | None = None
    cost: PerfCost | None = None
    stopped: dict[str, Any] | None = None       # the run ended early: reason, message (the time limit)
    stop_rule: dict[str, Any] | None = None     # --stop-at-saturation: the rule and the evidence
    telemetry: dict[str, Any] | None = None     # --server-metrics: the scraped counters per point
    points: list[PerfPoint] = []


__all__ = ["Distribution", "Lag", "PerfCost", "PerfPoint", "PerfSettings", "PerfSummary", "Repeat",
           "Requests", "SCHEMA", "Tokenizer", "Tokens", "Validity"]
