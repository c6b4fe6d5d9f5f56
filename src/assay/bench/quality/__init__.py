"""The quality benchmark: a model on standard tasks (``assay bench quality``, docs/quality.md).

``run`` runs the tasks (:func:`~assay.bench.quality.run.run_quality`, an ordinary stored run),
``tasks`` reads them (lm-evaluation-harness YAML or ``@task`` functions), ``subject`` is the model
under benchmark, ``answers`` scores answers, ``sandbox`` runs generated code, ``report`` makes the
per-task figures and the quality index and compares two runs, ``summary`` is a run's summary typed,
``stored`` is what the store keeps of a run as a benchmark, ``board`` its columns on the
leaderboard. :data:`KIND` is the kind's row in the kind table (:mod:`assay.bench.kinds`).
"""

from __future__ import annotations

from typing import Any

from assay.bench.kinds import BenchKind
from assay.bench.quality import stored
from assay.bench.quality.summary import QualitySummary


def _board(*args: Any) -> None:
    from assay.bench.quality.board import add_columns

    add_columns(*args)


KIND = BenchKind(name="quality", schema=stored.SCHEMA, title="quality", headline=stored.headline, task=stored.task,
                 list_columns=("ref", "name", "model", "index", "tasks", "when"), check=stored.check, board=_board,
                 tokens=stored.tokens, summary=QualitySummary)

__all__ = ["KIND"]
