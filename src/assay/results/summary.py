"""The run summary: what a run read, scored and used, as one versioned record.

It is ``result.run`` (as a plain dict), the ``run`` half of ``summary.json`` and the
``summary`` column of the store. Run-level aggregations (:mod:`assay.metrics.aggregations`)
add their figures under keys of their own (``jailbreak`` ...), kept as extra fields.

Versions: ``schema_version`` 1 is the first versioned summary; a summary without the field
was written before it existed, with the same keys, and reads as version 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from assay.errors import AssayError

SCHEMA_VERSION = 1


class RunSummary(BaseModel):
    """One run's summary. Counts: ``rows_read`` (valid and bad rows read), ``rows_evaluated``
    (rows scored, a conversation's turns each counting as one), ``rows_skipped`` (bad rows left
    out, with ``bad_rows`` saying why), ``rows_errored`` (rows with at least one metric error,
    never counted as fails) and ``target_errors``."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    assay_version: str | None = None
    source: str | None = None
    format: str | None = None
    metrics: list[str] = []
    thresholds: dict[str, Any] = {}
    target: str | None = None
    judge: str | None = None
    judge_source: str | None = None
    judge_note: Any = None
    judge_calls: Any = None
    judge_usage: Any = None
    rows_read: int = 0
    rows_evaluated: int = 0
    rows_skipped: int = 0
    rows_errored: int = 0
    target_errors: int = 0
    bad_rows: list[dict[str, Any]] = []
    started_at: float | None = None
    duration_s: float | None = None
    run_id: str | None = None
    name: str | None = None
    store: str | None = None
    resumed: bool = False
    resumed_rows: int = 0
    # metric -> who scored it (formula, judge, embedded scorer, skipped) and its measured figures
    scorers: dict[str, Any] = {}
    # the plan: rows in the data, per metric the rows it runs on and why not on the others
    # (:meth:`assay.engine.plan.Plan.summary`); empty in a summary written before it existed
    plan: dict[str, Any] = {}
    # asks per row of each judged metric (``repeated``: those metrics); 1 in a summary written before
    repeats: int = 1
    repeated: list[str] = []

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> RunSummary:
        """A summary read back from ``summary.json`` or the store, of this version or an
        earlier one (one without ``schema_version`` reads as version 1)."""
        d = dict(data)
        version = d.setdefault("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise AssayError(f"this run summary has schema version {version!r}, newer than this assay "
                             f"reads ({SCHEMA_VERSION}); upgrade assay to open it")
        return cls.model_validate(d)

    def as_dict(self) -> dict[str, Any]:
        """The summary as the plain dict of ``result.run``: every field, extras included."""
        return self.model_dump()
