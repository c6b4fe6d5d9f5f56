"""The serving-performance benchmark (``assay bench perf``, docs/bench.md): how fast an endpoint
serves — TTFT, inter-token latency, TPOT, end-to-end latency, tokens per second — with intervals and
a verdict on the measurement itself.

``run`` is the load generator (:func:`~assay.bench.perf.run.run_perf`), ``workload`` makes the prompts,
``stream`` stamps the exchanges, ``measure`` measures them, ``figures`` is the table of the figures
measured, ``compare`` compares stored runs and summarises tracks of repeats, ``summary`` is a run's
summary typed, ``stored`` is what the store keeps of a run, ``board`` its columns on the leaderboard.
Production-shaped load: ``replay`` (traces: Mooncake, plain JSONL, OTLP spans), ``sessions``
(multi-turn), ``prefix`` (shared-prefix groups and the cache's hit rate), ``saturation`` (the sweep's
stop rule, ``--max-error-rate``), ``telemetry`` (the server's Prometheus counters), ``lora``
(requests spread over adapters).
:data:`KIND` is the kind's row in the kind table (:mod:`assay.bench.kinds`).
"""

from __future__ import annotations

from typing import Any

from assay.bench.kinds import BenchKind
from assay.bench.perf import stored
from assay.bench.perf.summary import PerfSummary


def _board(*args: Any) -> None:
    from assay.bench.perf.board import add_columns

    add_columns(*args)


KIND = BenchKind(name="perf", schema=stored.SCHEMA, title="perf", headline=stored.headline, task=stored.task,
                 list_columns=("ref", "name", "model", "mode", "points", "when", "valid", "track"),
                 check=stored.check, ref_field="id", dated=True, part="point", parts=stored.points, board=_board,
                 tokens=stored.benchmark_tokens, summary=PerfSummary)

__all__ = ["KIND"]
