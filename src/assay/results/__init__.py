"""The result of a run: rows (``inputs.*``, ``outputs.<metric>.*``) plus aggregates.

Each metric output ``o`` of metric ``m`` gives eight row columns (the layout of
azure-ai-evaluation's ``evaluate()`` result rows):
``outputs.m.o`` (the value), ``o_score``, ``o_passed``, ``o_result``, ``o_reason``,
``o_status``, ``o_threshold``, ``o_properties``.

When the run has an output directory, rows are streamed to ``rows.jsonl`` there as
they are scored and read back only when asked for, so memory stays flat. The run's
summary (:class:`~assay.results.summary.RunSummary`) is written beside them as ``summary.json``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from assay.metrics.base import Score
from assay.records import CANONICAL_FIELDS, Record
from assay.results.summary import RunSummary

ROWS_FILE = "rows.jsonl"
#: export layouts: the rows as stored, or under azure-ai-evaluation's names (:mod:`assay.results.azure`)
LAYOUTS = ("assay", "azure")
SUMMARY_FILE = "summary.json"
SUFFIXES = ("", "_score", "_passed", "_result", "_reason", "_status", "_threshold", "_properties")
_OPTS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS

_NESTED = ("history", "steps", "contexts", "usage")


#: record field -> its ``inputs.*`` column where azure-ai-evaluation's name differs (``context``)
INPUT_NAMES = {"contexts": "context"}


def row_inputs(r: Record) -> dict[str, Any]:
    """The ``inputs.*`` columns of a row: every field the record has (under azure-ai-evaluation's
    name, :data:`INPUT_NAMES`), plus its extra columns (``inputs.extra.<name>`` where a name is taken)."""
    row: dict[str, Any] = {}
    for name in CANONICAL_FIELDS:
        v = getattr(r, name)
        if v is None:
            continue
        if name in _NESTED:
            v = [x.model_dump(exclude_none=True) for x in v] if isinstance(v, list) else v.model_dump(exclude_none=True)
        row["inputs." + INPUT_NAMES.get(name, name)] = v
    for k, v in r.extra.items():
        row[("inputs.extra." if "inputs." + k in row else "inputs.") + k] = v
    return row


def input_field(row: dict[str, Any], name: str) -> Any:
    """A record field's value in a result row's ``inputs.*`` columns (runs written before
    ``contexts`` was written as ``inputs.context`` included)."""
    col = "inputs." + INPUT_NAMES.get(name, name)
    if col in row:
        return row[col]
    return row.get("inputs." + name)


def _default(o: Any) -> Any:
    if hasattr(o, "model_dump"):
        return o.model_dump(exclude_none=True)
    return str(o)


def flat_row(inputs: dict[str, Any], scores: dict[str, dict[str, Score]],
             keys: dict[tuple[str, str], tuple[str, ...]]) -> dict[str, Any]:
    """``inputs`` extended in place with the eight ``outputs.<metric>.<output>*`` columns."""
    row = inputs
    for m, outs in scores.items():
        for o, s in outs.items():
            k = keys[(m, o)]
            row[k[0]] = s.value
            row[k[1]] = s.score
            row[k[2]] = s.passed
            row[k[3]] = s.result
            row[k[4]] = s.reason
            row[k[5]] = s.status
            row[k[6]] = s.threshold
            row[k[7]] = s.properties or None
    return row


def output_keys(layout: Sequence[tuple[str, Sequence[str]]]) -> dict[tuple[str, str], tuple[str, ...]]:
    return {(m, o): tuple(f"outputs.{m}.{o}{s}" for s in SUFFIXES) for m, outs in layout for o in outs}


@dataclass(slots=True)
class StoredRow:
    """One scored row as the engine hands it to the store (and the store gives it back)."""

    idx: int
    row_id: str | None
    conversation_id: str | None
    target_error: bool
    inputs: dict[str, Any]
    scores: dict[str, dict[str, Score]]


WRITE_BEHIND = 8   # store writes that may be under way before scoring waits
WRITE_ROWS = 4_096  # rows waiting that make a store write (one transaction) ...
WRITE_EVERY = 1.0   # ... or seconds since the last one began


class RowSink:
    """Where scored rows go: kept in memory, or streamed to ``<out>/rows.jsonl``; and,
    when the run is saved, committed to the store chunk by chunk (:meth:`commit`)."""

    def __init__(self, out: str | Path | None, layout: Sequence[tuple[str, Sequence[str]]],
                 store: Any = None, run_id: str | None = None):
        self.out = Path(out) if out is not None else None
        self.rows: list[dict[str, Any]] | None = None
        self._fh = None
        self._keys = output_keys(layout)
        self.store = store
        self.run_id = run_id
        self._pending: list[Any] = []
        # Store writes run on one background thread, in order, overlapping the scoring of the
        # next chunks: scoring waits only when the writer is WRITE_BEHIND chunks behind, and a
        # writer that fell behind writes every chunk waiting in one transaction. After a
        # failed write nothing more is written (the store keeps a prefix of the rows).
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="assay-store") if store is not None else None
        self._writing: deque[Future] = deque()
        self._queue: list[Any] = []
        self._lock = threading.Lock()
        self._failed = False
        self.batch_rows, self.batch_seconds = WRITE_ROWS, WRITE_EVERY   # see commit()
        self._last_write = time.monotonic()
        if self.out is None:
            self.rows = []
        else:
            self.out.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.out / ROWS_FILE, "wb")

    def add(self, inputs: dict[str, Any], scores: dict[str, dict[str, Score]], *, idx: int = 0,
            record: Record | None = None, target_error: bool = False, stored: bool = False) -> None:
        """One row. ``stored``: the row came back from the store (a resumed run)."""
        if self.store is not None and not stored:
            self._pending.append(StoredRow(idx, record.id if record else None,
                                           record.conversation_id if record else None,
                                           target_error, dict(inputs), scores))
        row = flat_row(inputs, scores, self._keys)
        if self._fh is not None:
            self._fh.write(orjson.dumps(row, default=_default, option=_OPTS))
        else:
            self.rows.append(row)  # type: ignore[union-attr]

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """The rows added so far: from memory, or read back from ``rows.jsonl`` (after
        :meth:`close`, or :meth:`commit`, every row added is there)."""
        if self.rows is not None:
            yield from self.rows
        elif self.out is not None:
            yield from read_rows(self.out / ROWS_FILE)

    def commit(self) -> None:
        """Make the rows added so far durable: flushed to the file, committed to the store
        once :data:`WRITE_ROWS` rows are waiting or :data:`WRITE_EVERY` seconds passed since
        the last store write began (fewer, larger transactions cost the store less; a run
        killed loses at most those rows, which ``--resume`` scores again). :meth:`close`
        writes the rest."""
        if self._fh is not None:
            self._fh.flush()
        if self._pending and (len(self._pending) >= self.batch_rows
                              or time.monotonic() - self._last_write >= self.batch_seconds):
            self._submit()

    def _submit(self) -> None:
        if self._pending:
            self._last_write = time.monotonic()
            with self._lock:
                self._queue.extend(self._pending)
            self._pending = []
            self._writing.append(self._writer.submit(self._drain))  # type: ignore[union-attr]
            while self._writing and (len(self._writing) > WRITE_BEHIND or self._writing[0].done()):
                self._writing.popleft().result()     # a failed write is raised here

    def _drain(self) -> None:
        """On the writer thread: write every row waiting, in one transaction."""
        with self._lock:
            batch, self._queue = self._queue, []
        if not batch or self._failed:
            return
        try:
            self.store.write_rows(self.run_id, batch)
        except BaseException:
            self._failed = True
            raise

    def _wait(self) -> None:
        """Wait for the writes under way; the first error, if any, is raised here."""
        while self._writing:
            self._writing.popleft().result()

    def close(self) -> None:
        """Finish the writes under way; the file is closed and the store is up to date."""
        try:
            if self._writer is not None:
                self._submit()
            self._wait()
        finally:
            if self._writer is not None:
                self._writer.shutdown(wait=True)
                self._writer = None
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def result(self, metrics: dict[str, dict[str, Any]], run: dict[str, Any]) -> EvalResult:
        res = EvalResult(metrics=metrics, run=run, rows=self.rows,
                         rows_path=(self.out / ROWS_FILE) if self.out else None)
        if self.out is not None:
            res.write_summary(self.out / SUMMARY_FILE)
        return res


def read_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """The rows of a ``rows.jsonl`` file, one dict a line."""
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                yield orjson.loads(line)


class EvalResult:
    """Rows and aggregates of one run.

    ``metrics`` maps each metric output to its aggregate (mean, median, p90, pass_rate,
    ci95_low/high, evaluated/skipped/errored counts ...); ``run`` holds the counts of
    rows read / evaluated / skipped / errored, the bad rows with their reasons, and the
    configuration.
    """

    def __init__(self, *, metrics: dict[str, dict[str, Any]], run: dict[str, Any],
                 rows: list[dict[str, Any]] | None = None, rows_path: Path | None = None,
                 row_source: Callable[[], Iterator[dict[str, Any]]] | None = None):
        self.metrics = metrics
        self.run = run
        self._rows = rows
        self.rows_path = rows_path
        self._row_source = row_source   # a stored run: rows read back from the store

    # -- rows ----------------------------------------------------------------------------
    def iter_rows(self) -> Iterator[dict[str, Any]]:
        if self._rows is not None:
            yield from self._rows
            return
        if self._row_source is not None:
            yield from self._row_source()
            return
        assert self.rows_path is not None
        yield from read_rows(self.rows_path)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """All rows as dicts (read back from disk when the run streamed them)."""
        if self._rows is None:
            return list(self.iter_rows())
        return self._rows

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.rows)

    def _layout_rows(self, layout: str) -> Iterator[dict[str, Any]]:
        """The rows as stored (``assay``) or under azure-ai-evaluation's column names (``azure``)."""
        if layout == "azure":
            from assay.results.azure import azure_rows

            return azure_rows(self.iter_rows())
        if layout != "assay":
            raise ValueError(f"unknown layout {layout!r}; use {' or '.join(LAYOUTS)}")
        return self.iter_rows()

    def to_jsonl(self, path: str | Path, layout: str = "assay") -> Path:
        """Rows, one JSON object a line; ``layout="azure"``: under azure-ai-evaluation's names."""
        path = Path(path)
        rows = self._layout_rows(layout)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            for row in rows:
                fh.write(orjson.dumps(row, default=_default, option=_OPTS))
        return path

    def to_parquet(self, path: str | Path, layout: str = "assay") -> Path:
        """Rows as Parquet; nested values (lists, dicts) are stored as JSON text.
        ``layout="azure"``: under azure-ai-evaluation's names."""
        import pandas as pd

        path = Path(path)
        rows = list(self._layout_rows(layout))
        path.parent.mkdir(parents=True, exist_ok=True)
        df = pd.DataFrame(rows)
        for col in df.columns:
            if df[col].map(lambda v: isinstance(v, (list, dict))).any():
                df[col] = df[col].map(lambda v: None if v is None else json.dumps(v, ensure_ascii=False))
        df.to_parquet(path, index=False)
        return path

    def to_dict(self, layout: str = "azure") -> dict[str, Any]:
        """``{"rows": [...], "metrics": {...}, "run": {...}}``. ``layout="azure"`` (the default):
        rows and aggregates under azure-ai-evaluation's names, as its ``evaluate()`` returns them
        (:meth:`azure`); ``"assay"``: the rows as stored and :meth:`flat_metrics`."""
        if layout == "azure":
            return {**self.azure(), "run": self.run}
        return {"rows": list(self._layout_rows(layout)), "metrics": self.flat_metrics(), "run": self.run}

    def azure(self) -> dict[str, Any]:
        """The same results as azure-ai-evaluation's ``evaluate()`` names them: ``{"rows", "metrics"}``
        (:mod:`assay.results.azure` lists where that differs from the stored rows)."""
        from assay.results.azure import azure_view

        return azure_view(self)

    def to_json(self, path: str | Path, layout: str = "azure") -> Path:
        """One JSON document (:meth:`to_dict`), in the azure-ai-evaluation layout by default."""
        path = Path(path)
        doc = self.to_dict(layout)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(doc, default=_default,
                                      option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
        return path

    def flat_metrics(self) -> dict[str, float | None]:
        """``{"<metric>.<output>": mean, "<metric>.<output>_pass_rate": ...}`` (assay's own aggregates,
        the ``metrics`` of ``to_dict(layout="assay")``; the Azure layout's are :meth:`azure`'s)."""
        flat: dict[str, float | None] = {}
        for o, agg in self.metrics.items():
            key = f"{agg['metric']}.{o}"
            flat[key] = agg.get("mean")
            if agg.get("pass_rate") is not None:
                flat[f"{key}_pass_rate"] = agg["pass_rate"]
            if agg.get("defect_rate") is not None:
                flat[f"{key}_defect_rate"] = agg["defect_rate"]
        return flat

    def write_summary(self, path: Path) -> None:
        path.write_bytes(orjson.dumps({"metrics": self.metrics, "run": self.run},
                                      default=_default, option=orjson.OPT_INDENT_2))

    def save_summary(self) -> None:
        """Rewrite ``summary.json`` beside ``rows.jsonl`` when the run has an output folder."""
        if self.rows_path is not None:
            self.write_summary(Path(self.rows_path).with_name(SUMMARY_FILE))

    @property
    def summary(self) -> RunSummary:
        """``run`` as a :class:`~assay.results.summary.RunSummary`."""
        return RunSummary.load(self.run)

    @classmethod
    def load(cls, folder: str | Path) -> EvalResult:
        """A run written to a folder (``evaluate(out=folder)``): its ``summary.json``, with
        rows streamed from its ``rows.jsonl``. Summaries of this version and earlier ones open."""
        folder = Path(folder)
        data = orjson.loads((folder / SUMMARY_FILE).read_bytes())
        run = RunSummary.load(data.get("run") or {}).as_dict()
        return cls(metrics=data.get("metrics") or {}, run=run, rows_path=folder / ROWS_FILE)

    # -- the Databricks view ---------------------------------------------------------------
    def databricks(self) -> dict[str, Any]:
        """The same results under Databricks Agent Evaluation's names.

        Rows: ``response/llm_judged/<judge>/rating`` (``yes``/``no``) and ``/rationale``
        for judges, ``retrieval/ground_truth/document_recall``, ``agent/total_token_count``
        ...; aggregates ``<name>/average`` for numbers and ``<name>/percentage`` for ratings.
        """
        from assay.results.databricks import databricks_view

        return databricks_view(self)

    def __repr__(self) -> str:
        r = self.run
        return (f"EvalResult(rows_evaluated={r.get('rows_evaluated')}, rows_skipped={r.get('rows_skipped')}, "
                f"rows_errored={r.get('rows_errored')}, metrics={list(self.metrics)})")
