"""The :class:`Dataset`: a lazy stream of :class:`Record` over any supported input."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from assay.errors import InputError
from assay.formats.fields import FieldError, kind, translate
from assay.formats.normalize import ColumnMapping, Normalizer
from assay.formats.readers import (
    DataFrameSource,
    ListSource,
    Malformed,
    RayDatasetSource,
    Source,
    Spool,
    check_path,
    directory_sources,
    file_source,
    is_ray_dataset,
    stream_source,
    top_level_rows,
)
from assay.formats.turn_rows import TurnIndex, TurnRows, index_turns, is_turn_row
from assay.records import Record

ON_BAD_ROW = ("fail", "skip")


def _is_dataframe(obj: Any) -> bool:
    t = type(obj)
    return t.__name__ == "DataFrame" and t.__module__.startswith("pandas")


class Dataset:
    """Rows of an evaluation set, read lazily and normalised to :class:`Record`.

    Iterating streams the source (a JSONL file of a million rows is never held at once);
    iterating again reads it again. Attributes (updated as rows are read):

    - ``source``: the path as given, or ``"<DataFrame>"`` / ``"<ray.data.Dataset>"`` / ``"<list>"`` / ``"<dict>"``;
    - ``format``: ``jsonl``, ``json``, ``csv``, ``parquet``, ``otlp`` / ``otlp-calls`` (OpenTelemetry traces:
      a record per trace / per model call), ``dataframe``, ``ray_dataset``, ``list`` or
      ``dict`` (a directory: its files' format, or ``mixed``);
    - ``rows_read``: source rows read so far (a conversation row counts once, however many
      turns it gives; malformed rows count);
    - ``bad_rows``: the :class:`InputError` of each row skipped (``on_bad_row="skip"``);
    - ``columns_seen``: the source column names seen so far (before the mapping);
    - ``input``: the data as given; ``stream``: the :class:`~assay.formats.readers.Spool` of a
      stream (standard input as ``"-"``, a FIFO, ``/dev/fd/N``), whose ``sha256`` is taken
      while it is read, else None.

    A mapping to a column that no row read has is reported by :meth:`check_mapping`.

    Rows given one turn a line (``conversation_id`` and ``turn``) come out grouped into their
    conversations, each as soon as its last row is read (:mod:`.turn_rows`: the source is gone
    through once more, at the first such row, to find where each conversation ends).

    With ``on_bad_row="fail"`` the first bad row raises its :class:`InputError`; with
    ``"skip"`` it is recorded and reading goes on. A source with no rows at all raises in
    both modes.
    """

    def __init__(self, data: Any, mapping: Mapping[str, str] | None = None, on_bad_row: str = "fail",
                 format: str | None = None):
        if on_bad_row not in ON_BAD_ROW:
            raise InputError(f"on_bad_row must be 'fail' or 'skip', got {on_bad_row!r}")
        self.on_bad_row = on_bad_row
        self.mapping = ColumnMapping(mapping) if mapping else None
        self.rows_read = 0
        self.bad_rows: list[InputError] = []
        self.columns_seen: set[str] = set()
        self.input = data
        self.stream: Spool | None = None
        self._sources = self._resolve(data, format)
        self._turn_indexes: dict[int, TurnIndex] = {}   # per source with turn rows: where conversations end

    # ------------------------------------------------------------------ sources

    def _resolve(self, data: Any, fmt: str | None) -> list[Source]:
        if isinstance(data, (str, os.PathLike)):
            name = os.fspath(data)
            if name == "-":
                src = stream_source(None, "<stdin>", fmt)
            else:
                path = Path(name).expanduser()
                check_path(path, name)
                if path.is_dir():
                    if fmt is not None:
                        raise InputError("a folder's files are read by their extensions; the format is given "
                                         "for a file or a stream", source=name)
                    # bytes of the name that are not UTF-8 (surrogateescape) kept as \xNN: printable, storable
                    self.source = os.fsencode(name).decode("utf-8", "backslashreplace")
                    sources = directory_sources(path, name)
                    fmts = {s.format for s in sources}
                    self.format = fmts.pop() if len(fmts) == 1 else "mixed"
                    return sources
                # anything but a regular file (a FIFO, /dev/stdin, /dev/fd/N) can be read only once
                src = file_source(path, name, fmt) if path.is_file() else stream_source(path, name, fmt)
            self.format, self.stream = src.format, src.spool
            self.source = os.fsencode(src.name).decode("utf-8", "backslashreplace")
            return [src]
        if fmt is not None:
            raise InputError("the format is given for a file or a stream, not for rows in memory")
        if _is_dataframe(data):
            self.source, self.format = "<DataFrame>", "dataframe"
            return [DataFrameSource(data)]
        if is_ray_dataset(data):
            self.source, self.format = "<ray.data.Dataset>", "ray_dataset"
            return [RayDatasetSource(data)]
        if isinstance(data, dict):
            self.source, self.format = "<dict>", "dict"
            rows, _, _ = top_level_rows(data, "<dict>")
            return [ListSource(rows, "<dict>", "dict")]
        if isinstance(data, (list, tuple)):
            self.source, self.format = "<list>", "list"
            return [ListSource(list(data) if isinstance(data, tuple) else data)]
        raise InputError("expected a file or directory path, a pandas DataFrame, a ray.data.Dataset, a list of "
                         "rows or a dict, "
                         f"got {type(data).__name__}")

    # ------------------------------------------------------------------ iteration

    def __iter__(self) -> Iterator[Record]:
        self.rows_read = 0
        self.bad_rows = []
        for src in self._sources:
            yield from self._read(src)

    def _bad(self, src: Source, pos: int, field: str | None, message: str) -> None:
        if self.mapping is not None:
            field = self.mapping.user_name(field)
        err = InputError(message, source=src.name, line=src.line(pos), field=field)
        if self.on_bad_row == "fail":
            raise err
        self.bad_rows.append(err)

    def _read(self, src: Source) -> Iterator[Record]:
        norm = Normalizer(text_cells=src.text_cells)
        validate = Record.__pydantic_validator__.validate_python
        mapping = self.mapping
        seen = self.columns_seen
        turns = self._turn_rows(src, norm)
        n = 0
        for pos, row in src.rows():
            n += 1
            index = self.rows_read
            self.rows_read = index + 1
            if row.__class__ is not dict:
                if isinstance(row, Malformed):
                    self._bad(src, pos, None, row.message)
                else:
                    self._bad(src, pos, None, f"expected a row object with named fields, got {kind(row)}")
                continue
            seen.update(row)
            try:
                if mapping is not None:
                    row = mapping.apply(row)
                fields = norm.row(row, index)
                if fields.__class__ is dict:
                    record = validate(fields)
                else:
                    records = [validate(f) for f in fields]
            except FieldError as e:
                self._bad(src, pos, e.field, e.message)
                continue
            except ValidationError as e:
                field, message = translate(e, norm.origin)
                self._bad(src, pos, field, message)
                continue
            if fields.__class__ is not dict:
                yield from records
            elif is_turn_row(record):   # one turn of a conversation given a turn a line
                yield from turns.take(pos, record)
            else:
                if record.id is None:
                    record.id = str(index)  # stable across re-runs of the same file
                yield record
        yield from turns.finish()
        if n == 0:
            raise src.empty_error()

    def _turn_rows(self, src: Source, norm: Normalizer) -> TurnRows:
        """The grouping of ``src``'s turn rows into conversations (:mod:`.turn_rows`); the pass
        that finds where each conversation ends is made at the first turn row, once per dataset."""
        def index() -> TurnIndex:
            got = self._turn_indexes.get(id(src))
            if got is None:
                got = self._turn_indexes[id(src)] = index_turns(src, self.mapping, norm.table)
            return got

        return TurnRows(src, lambda pos, field, message: self._bad(src, pos, field, message), index)

    @property
    def summaries(self) -> list[Any]:
        """The reading summaries of the sources that keep one, after a reading: for OTLP traces a
        :class:`~assay.formats.genai_spans.Summary` (spans, traces, records, spans skipped for having
        no GenAI content, a line per value not read)."""
        return [s.summary for s in self._sources if getattr(s, "summary", None) is not None]

    def check_mapping(self, target: bool = False) -> None:
        """Raise :class:`InputError` for a mapped column that no row read so far has: the
        mapping is a mistake (a misspelt column would otherwise leave the field to a
        same-named column, or empty). With ``target``, columns written ``${target.x}`` are
        the target's outputs and not looked for in the data."""
        m = self.mapping
        if m is None or not m.unmatched or not self.rows_read:
            return
        for field, col, _ in m.pairs:
            if col in m.unmatched and col in m.target_refs and not target:
                raise InputError(f"the mapping {field}=${{target.{col}}} reads the target's output {col!r}, but "
                                 "there is no target: pass one (evaluate(target=...), or --target module:function), "
                                 f"or map a data column with '${{data.{col}}}'", source=self.source, field=field)
            if col in m.unmatched and not (target and col in m.target_refs):
                cols = sorted(self.columns_seen)
                have = ", ".join(cols[:30]) + (f" and {len(cols) - 30} more" if len(cols) > 30 else "")
                n = self.rows_read
                raise InputError(f"the mapping {field}={col} names column {col!r}, which no row has (looked at "
                                 f"the first {n} row{'' if n == 1 else 's'}; the columns are: {have or 'none'})",
                                 source=self.source, field=field)

    def __repr__(self) -> str:
        return (f"Dataset(source={self.source!r}, format={self.format!r}, rows_read={self.rows_read}, "
                f"bad_rows={len(self.bad_rows)})")


def open_dataset(data: Any, mapping: Mapping[str, str] | None = None, on_bad_row: str = "fail",
                 format: str | None = None) -> Dataset:
    """Open ``data`` for reading as records.

    ``data``: a path (``.jsonl``, ``.json``, ``.csv``, ``.parquet``, OpenTelemetry traces --
    ``.otlp.json``, ``.otlp.jsonl``, ``.pb``, or a ``.json`` / ``.jsonl`` file of OTLP JSON --, or a
    directory of them, read in name order; a FIFO or ``/dev/stdin``; ``"-"`` for standard input), a
    pandas DataFrame, a ``ray.data.Dataset`` (its batches streamed), a list of row dicts, or a dict (one MLflow trace, ``{"data": [...]}``,
    columns of equal length, or one row).
    ``mapping``: ``{canonical_field: user_column}``; ``"${data.col}"`` is accepted.
    ``on_bad_row``: ``"fail"`` (raise the first bad row's :class:`InputError`) or ``"skip"``.
    ``format``: ``jsonl``, ``json``, ``csv``, ``parquet``, ``otlp`` (OpenTelemetry traces, a record
    per trace) or ``otlp-calls`` (a record per model call), for a file or stream whose name has no
    (or another) extension, or to read traces per model call.

    Missing or unreadable paths, unknown extensions and a bad mapping raise here; rows are
    read (and checked) only when the dataset is iterated. A stream is read once: the first
    iteration copies it to a temporary file, and every iteration reads the copy.
    """
    return Dataset(data, mapping=mapping, on_bad_row=on_bad_row, format=format)
