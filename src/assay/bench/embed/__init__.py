"""The embedding benchmark: an embedding model on MTEB-style tasks (``assay bench embed``, docs/embed.md).

``run`` embeds and scores (:func:`~assay.bench.embed.run.run_embed`), ``tasks`` reads the tasks
(the shipped ``samples/``, files and folders, ``hf:`` data sets), ``metrics`` scores a task as MTEB
does, ``stats`` resamples its units for the interval, ``compare`` compares two runs on the same
units, ``summary`` is a run's summary typed, ``stored`` is what the store keeps of a run, ``board``
its columns on the leaderboard. :data:`KIND` is the kind's row in the kind table
(:mod:`assay.bench.kinds`).
"""

from __future__ import annotations

from typing import Any

from assay.bench.embed import stored
from assay.bench.embed.summary import EmbedSummary
from assay.bench.kinds import BenchKind


def _board(*args: Any) -> None:
    from assay.bench.embed.board import add_columns

    add_columns(*args)


KIND = BenchKind(name="embed", schema=stored.SCHEMA, title="embedding", headline=stored.headline, task=stored.task,
                 list_columns=("ref", "name", "model", "tasks", "when"), check=stored.check, part="task",
                 parts=stored.tasks, board=_board, summary=EmbedSummary)

__all__ = ["KIND"]
