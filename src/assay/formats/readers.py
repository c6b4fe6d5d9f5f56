"""Readers: where rows come from. Each yields ``(position, row)`` pairs lazily.

``row`` is whatever the source holds there — normally a dict; a :class:`Malformed` marks
a row that could not be parsed (a bad JSON line, a CSV row with too many cells) so that
the dataset can report it and, in skip mode, go on. ``position`` is the 1-based file line
for JSONL and CSV (where the row starts), the 1-based row number for Parquet, DataFrames
and lists, and the element index for a JSON array (:meth:`Source.line` turns it into the
file line where that element starts, computed only when an error needs it).

Text files are UTF-8, or UTF-16/UTF-32 recognised by :mod:`.encoding`; a byte not valid in
the file's encoding is reported with its byte offset. A stream (standard input, a FIFO,
``/dev/fd/N`` from a shell's ``<(...)``) is read once, into a temporary copy, by a
:class:`Spool`, which takes its fingerprint on the way.

Problems with the file as a whole (missing, unreadable, not valid JSON/Parquet) raise
:class:`InputError` naming the file.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import os
import re
import sys
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from assay.errors import InputError
from assay.formats.encoding import bad_bytes, open_lines, sniff, utf8_problem
from assay.formats.fields import FieldError, kind

EXTENSIONS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet",
              ".pq": "parquet", ".pb": "otlp"}
#: OpenTelemetry traces (:class:`OtlpSource`): a record per trace (``otlp``) or per model call (``otlp-calls``)
OTLP_FORMATS = {"otlp": "trace", "otlp-traces": "trace", "otlp-calls": "call"}
FORMATS = ("jsonl", "json", "csv", "parquet", "otlp", "otlp-calls")
_OTLP_NAME = re.compile(r"\.otlp\.(?:jsonl?|ndjson|pb|proto|json\.gz|jsonl\.gz|pb\.gz)$|\.pb(?:\.gz)?$", re.I)
_OTLP_HEAD = re.compile(rb'^(?:\xef\xbb\xbf)?\s*\[?\s*\{\s*"resource_?spans"\s*:', re.I)


class Malformed:
    """A row that could not be parsed; ``message`` says why."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message


def _json_error(e: orjson.JSONDecodeError) -> str:
    msg = getattr(e, "msg", None) or str(e)
    msg = re.sub(r":?\s*line \d+ column \d+ \(char \d+\)$", "", msg).strip()
    col = getattr(e, "colno", None)
    return f"malformed JSON ({msg}{f' at column {col}' if col else ''})"


class Source:
    """One place rows come from. ``name`` is how errors name it."""

    name: str
    format: str
    text_cells = False

    def rows(self) -> Iterator[tuple[int, Any]]:  # pragma: no cover - interface
        raise NotImplementedError

    def line(self, pos: int) -> int | None:
        return pos

    def empty_error(self) -> InputError:
        return InputError("the file is empty: no rows", source=self.name)


def _open_check(path: Path, name: str) -> None:
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError("no such file or directory", source=name) from None
    except OSError as e:
        raise InputError(f"cannot read it: {e.strerror or e}", source=name) from None
    if not os.access(path, os.R_OK):
        raise InputError("cannot read it: permission denied", source=name)
    if path.is_file() and st.st_size == 0:
        raise InputError("the file is empty: no rows", source=name)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class Spool:
    """A stream (standard input, a FIFO, ``/dev/fd/N``) copied to a temporary file the first
    time its rows are read, its fingerprint taken on the way: a pipe can be read only once, so
    the rows (and a second pass, if any) are read from the copy. ``sha256`` is None until then;
    the copy is removed when the spool is collected or the interpreter exits.

    ``path`` None is standard input.
    """

    def __init__(self, path: Path | None, name: str):
        self.path, self.name = path, name
        self.sha256: str | None = None
        self._copy: str | None = None

    def file(self) -> Path:
        if self._copy is None:
            if self.path is None and sys.stdin is None:
                raise InputError("there is no standard input to read", source=self.name)
            fd, copy = tempfile.mkstemp(prefix="assay-stream-")
            weakref.finalize(self, _unlink, copy)
            h = hashlib.sha256(b"\0")  # the file fingerprint's name\0bytes, with no name
            size, reading = 0, True
            try:
                with os.fdopen(fd, "wb") as out:
                    src: IO[bytes] = sys.stdin.buffer if self.path is None else open(self.path, "rb")
                    try:
                        while block := src.read(1 << 20):
                            reading = False
                            h.update(block)
                            out.write(block)
                            size += len(block)
                            reading = True
                    finally:
                        if self.path is not None:
                            src.close()
                    reading = False  # closing the copy flushes it
            except OSError as e:
                what = "cannot read it" if reading else f"cannot copy it to a temporary file in {tempfile.gettempdir()}"
                raise InputError(f"{what}: {e.strerror or e}", source=self.name) from None
            if size == 0:
                raise InputError("the stream is empty: no rows", source=self.name)
            self._copy, self.sha256 = copy, h.hexdigest()
        return Path(self._copy)


class FileSource(Source):
    """A file read by path, or a stream read through its :class:`Spool`."""

    def __init__(self, path: Path, name: str, spool: Spool | None = None):
        self.path, self.name, self.spool = path, name, spool

    def file(self) -> Path:
        return self.spool.file() if self.spool is not None else self.path

    def _open_binary(self):
        try:
            return open(self.file(), "rb")
        except OSError as e:
            raise InputError(f"cannot read it: {e.strerror or e}", source=self.name) from None


class JsonlSource(FileSource):
    format = "jsonl"

    def rows(self) -> Iterator[tuple[int, Any]]:
        loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
        with self._open_binary() as f:
            _, offset, lines = open_lines(f, self.name)
            for lineno, line in enumerate(lines, 1):
                at, offset = offset, offset + len(line)
                try:
                    row = loads(line)
                except JSONDecodeError as e:
                    if line.isspace() or not line:
                        continue  # blank lines are allowed
                    bad = utf8_problem(line, at)
                    yield lineno, Malformed(bad[0] if bad else _json_error(e))
                    continue
                yield lineno, row


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{},:]')
_NON_SPACE = re.compile(r"\S")


def _element_lines(text: str, key: str | None) -> list[int]:  # noqa: C901
    """File line where each element of the top-level array (or of top-level ``key``'s array) starts."""
    offsets: list[int] = []
    depth, target, last_key, prev = 0, None, None, None
    for m in _TOKENS.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if tok == "[" and target is None and (
                    (key is None and depth == 1) or (key is not None and depth == 2 and last_key == key)):
                target = depth
                nxt = _NON_SPACE.search(text, m.end())
                if nxt and nxt.group() != "]":
                    offsets.append(nxt.start())
        elif tok in "]}":
            if target is not None and depth == target:
                break
            depth -= 1
        elif tok == ",":
            if target is not None and depth == target:
                nxt = _NON_SPACE.search(text, m.end())
                if nxt:
                    offsets.append(nxt.start())
        elif tok[0] == '"' and depth == 1 and prev in ("{", ","):
            last_key = tok[1:-1]
        if tok != ":":
            prev = tok if tok[0] != '"' else '"'
    lines, line, at = [], 1, 0
    for off in offsets:
        line += text.count("\n", at, off)
        at = off
        lines.append(line)
    return lines


class JsonSource(FileSource):
    """A JSON file: a list of rows, ``{"data": [...]}``, one MLflow trace, a list of traces,
    an object of columns (``{"request": [...], "expected_response": [...]}``) or one row."""

    format = "json"

    def __init__(self, path: Path, name: str):
        super().__init__(path, name)
        self._key: str | None = None
        self._lines: list[int] | None = None
        self._single = False
        self._text = b""

    def rows(self) -> Iterator[tuple[int, Any]]:
        with self._open_binary() as f:
            raw = f.read()
        codec, bom = sniff(raw[:4])
        if codec == "utf-8":
            raw = raw[bom:]
        else:
            try:
                raw = raw[bom:].decode(codec).encode("utf-8")
            except UnicodeDecodeError as e:
                line = e.object[:e.start].decode(codec, "replace").count("\n") + 1
                raise InputError(bad_bytes(codec, e.object, e.start, e.reason, bom + e.start), source=self.name,
                                 line=line) from None
        if not raw.strip():
            raise self.empty_error()
        try:
            top = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            bad = utf8_problem(raw, bom) if codec == "utf-8" else None
            if bad:
                raise InputError(bad[0], source=self.name, line=raw.count(b"\n", 0, bad[1]) + 1) from None
            raise InputError(_json_error(e), source=self.name, line=getattr(e, "lineno", None)) from None
        rows, self._key, self._single = top_level_rows(top, self.name)
        self._text, self._lines = raw, None  # kept only while reading, to place an error on its line
        try:
            yield from enumerate(rows)
        finally:
            self._text = b""

    def line(self, pos: int) -> int | None:
        if self._single:
            return 1
        if self._key == "<columns>":
            return None
        if self._lines is None:
            try:
                self._lines = _element_lines(self._text.decode("utf-8", "replace"), self._key)
            except Exception:  # noqa: BLE001 - a line number is a courtesy, never a new failure
                self._lines = []
        return self._lines[pos] if pos < len(self._lines) else None


_ROW_SCALARS = frozenset(("query", "question", "request", "response", "answer", "ground_truth",
                          "expected_response", "id", "request_id", "context"))


def _agent_row(top: dict[str, Any]) -> bool:
    """One agent row (Azure's ``query`` / ``response`` message lists), not a table of columns:
    a column of queries or responses holds text, not message objects."""
    for k in ("query", "response"):
        v = top.get(k)
        if isinstance(v, list) and v and isinstance(v[0], dict):
            return True
    return False


def top_level_rows(top: Any, name: str) -> tuple[list[Any], str | None, bool]:
    """(rows, key of the array they came from, whether the top is a single row)."""
    if isinstance(top, list):
        return top, None, False
    if isinstance(top, dict):
        data = top.get("data")
        if isinstance(data, dict) and isinstance(top.get("info"), dict):
            return [top], None, True  # one MLflow trace
        if isinstance(data, list):
            return data, "data", False
        values = list(top.values())
        if values and all(isinstance(v, list) for v in values) and not _ROW_SCALARS.isdisjoint(top) \
                and not _agent_row(top):
            n = len(values[0])
            if all(len(v) == n for v in values):
                keys = list(top)
                return [dict(zip(keys, cells)) for cells in zip(*values)], "<columns>", False
            raise InputError("the columns have different lengths", source=name)
        return [top], None, True
    raise InputError(f"expected a list of rows or an object, got {kind(top)}", source=name, line=1)


class _BadText(Exception):
    """A CSV line that is not valid UTF-8 (the message names the byte offset)."""


_LONE_CR = re.compile(r"(?<=\r)(?!\n)")


class _Lines:
    """A CSV file's lines for :func:`csv.reader`: decoded, counted (``num``: the last line
    handed out), and those of the row being read kept in ``row``, so that reading can start
    again on the line after a quote that is never closed (:meth:`reread`)."""

    __slots__ = ("raw", "offset", "num", "row", "back")

    def __init__(self, raw: Iterator[bytes], offset: int):
        self.raw, self.offset, self.num = raw, offset, 0
        self.row: list[str] = []
        self.back: list[str] = []  # lines to hand out before the file's next (last first)

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        if self.back:
            line = self.back.pop()
        else:
            b = next(self.raw)
            try:
                line = b.decode("utf-8")
            except UnicodeDecodeError as e:
                self.num += 1
                msg = bad_bytes("utf-8", b, e.start, e.reason, self.offset + e.start)
                self.offset += len(b)
                raise _BadText(msg) from None
            self.offset += len(b)
            if "\r" in line.rstrip("\r\n"):  # lines ended by a lone \r (classic Mac): one at a time
                first, *more = [part for part in _LONE_CR.split(line) if part]
                self.back.extend(reversed(more))
                line = first
        self.num += 1
        self.row.append(line)
        return line

    def reread(self) -> None:
        """Hand out the current row's lines again, but its first."""
        self.back.extend(reversed(self.row[1:]))
        self.num -= len(self.row) - 1


def _cells(n: int) -> str:
    return f"{n} cell{'' if n == 1 else 's'}"


class CsvSource(FileSource):
    """CSV with a header row. Empty cells are missing values; list and object fields may
    hold JSON text (``["a", "b"]``).

    A row must have as many cells as the header has columns (fewer or more is a bad row).
    Quotes are read strictly: a quoted cell must be closed, and followed by a comma or the
    end of the line. A quote never closed is a bad row on the line where it opens, and
    reading goes on from the next line (in skip mode), so it cannot swallow the rows after it.
    """

    format = "csv"
    text_cells = True

    def rows(self) -> Iterator[tuple[int, Any]]:  # noqa: C901
        with self._open_binary() as f:
            csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
            _, offset, raw = open_lines(f, self.name)
            lines = _Lines(raw, offset)
            reader = csv.reader(lines, strict=True)
            try:
                header = next(reader, None)
            except _BadText as e:
                raise InputError(str(e), source=self.name, line=lines.num) from None
            except csv.Error as e:
                raise InputError(f"malformed CSV header ({e})", source=self.name, line=1) from None
            if header is None:
                return
            header = [h.strip() for h in header]
            seen: set[str] = set()
            for i, h in enumerate(header, 1):
                if not h:
                    raise InputError(f"the header's column {i} of {len(header)} has no name "
                                     "(name it, or remove the column)", source=self.name, line=1)
                if h in seen:
                    raise InputError(f"the header names column {h!r} twice", source=self.name, line=1)
                seen.add(h)
            width = len(header)
            while True:
                lines.row = []
                start = lines.num + 1
                try:
                    cells = next(reader)
                except StopIteration:
                    return
                except _BadText as e:
                    yield lines.num, Malformed(str(e))
                    continue
                except csv.Error as e:
                    yield start, Malformed(self._malformed(e, start, lines))
                    continue
                if not cells or (width > 1 and len(cells) == 1 and not cells[0].strip()):
                    continue  # a blank line
                if len(cells) != width:
                    msg = f"the row has {_cells(len(cells))} but the header has {width} columns"
                    if lines.num > start:
                        msg += (f" (the row runs from line {start} to line {lines.num}: "
                                "is a quote in it not closed where it should be?)")
                    yield start, Malformed(msg)
                    continue
                yield start, {h: c for h, c in zip(header, cells) if c != ""}

    @staticmethod
    def _malformed(e: csv.Error, start: int, lines: _Lines) -> str:
        end = lines.num
        if "end of data" in str(e):  # the file ended inside a quoted cell
            lines.reread()
            return (f"unterminated quote: a quoted cell opened on this line is never closed "
                    f"(it would run to the end of the file, line {end})")
        if end > start:
            return f"malformed CSV on line {end}, in the row that starts on this line ({e})"
        return f"malformed CSV ({e})"

    def empty_error(self) -> InputError:
        return InputError("the file is empty: no rows after the header", source=self.name)


class ParquetSource(FileSource):
    format = "parquet"
    batch_size = 8192

    def rows(self) -> Iterator[tuple[int, Any]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(self.file())
        except (pa.ArrowInvalid, OSError) as e:
            raise InputError(f"not a readable Parquet file ({e})", source=self.name) from None
        pos = 0
        for batch in pf.iter_batches(batch_size=self.batch_size):
            for row in batch.to_pylist():
                pos += 1
                yield pos, row


class ListSource(Source):
    format = "list"

    def __init__(self, rows: list[Any], name: str = "<list>", fmt: str = "list"):
        self._rows, self.name, self.format = rows, name, fmt

    def rows(self) -> Iterator[tuple[int, Any]]:
        return enumerate(self._rows, 1)

    def empty_error(self) -> InputError:
        return InputError("no rows", source=self.name)


def _clean(v: Any) -> Any:
    """A pandas cell as plain Python: NaN/NA → None, numpy arrays → lists, numpy scalars → Python.

    Python lists and dicts a user put in the frame are taken as they are; what numpy gives
    (``pd.read_parquet`` makes list columns arrays of dicts that hold arrays) is cleaned deeply.
    """
    c = v.__class__
    if c is str or c is int or c is bool or c is list or c is dict or v is None:
        return v
    if c is float:
        return None if v != v else v
    tolist = getattr(v, "tolist", None)
    if tolist is not None and hasattr(v, "dtype"):  # numpy array or scalar
        return _deep(tolist())
    if c.__name__ in ("NAType", "NaTType"):
        return None
    return v


def _deep(v: Any) -> Any:
    c = v.__class__
    if c is list:
        return [_deep(x) for x in v]
    if c is dict:
        return {k: _deep(x) for k, x in v.items()}
    if c is str or c is int or c is bool or v is None:
        return v
    return _clean(v)


class DataFrameSource(Source):
    format = "dataframe"
    chunk = 10000

    def __init__(self, df: Any, name: str = "<DataFrame>"):
        self.df, self.name = df, name

    def rows(self) -> Iterator[tuple[int, Any]]:
        df = self.df
        cols = [str(c) for c in df.columns]
        if len(set(cols)) != len(cols):
            raise InputError("the DataFrame has duplicate column names", source=self.name)
        # integer and boolean columns come out of Series.tolist() as plain Python already
        dirty = [c for c, t in zip(cols, df.dtypes) if t.kind not in "biu"]
        pos = 0
        for start in range(0, len(df), self.chunk):
            part = df.iloc[start:start + self.chunk]
            columns = [part.iloc[:, i].tolist() for i in range(len(cols))]
            for values in zip(*columns):
                pos += 1
                row = dict(zip(cols, values))
                for k in dirty:
                    v = row[k]
                    if v.__class__ is not str:
                        row[k] = _clean(v)
                yield pos, row

    def empty_error(self) -> InputError:
        return InputError("the DataFrame has no rows", source=self.name)


def is_ray_dataset(obj: Any) -> bool:
    """Whether ``obj`` is a Ray Data dataset (``ray.data.Dataset`` or a materialised one),
    recognised without importing Ray."""
    t = type(obj)
    return t.__module__.startswith("ray.data") and hasattr(obj, "iter_batches")


class RayDatasetSource(Source):
    """The rows of a ``ray.data.Dataset``, streamed batch by batch (``iter_batches``): Ray
    executes the dataset's pipeline as the batches are taken, so the whole dataset is never held
    in this process. Each batch is read as a DataFrame is (:class:`DataFrameSource`), in the
    dataset's order. Reading again executes the pipeline again (a run reads its data twice: the
    plan, then the scoring)."""

    format = "ray_dataset"
    batch = 4096

    def __init__(self, ds: Any, name: str = "<ray.data.Dataset>"):
        self.ds, self.name = ds, name

    def rows(self) -> Iterator[tuple[int, Any]]:
        # in the dataset's order (Ray Data's own default lets blocks finish out of order: rows
        # would then come in another order on each reading) and without Ray's progress bars
        # (assay shows its own); the dataset's settings are put back afterwards
        ctx = getattr(self.ds, "context", None)
        saved = None
        if ctx is not None:
            saved = (ctx.execution_options.preserve_order, getattr(ctx, "enable_progress_bars", None))
            ctx.execution_options.preserve_order = True
            if saved[1] is not None:
                ctx.enable_progress_bars = False
        try:
            pos = 0
            batches = iter(self.ds.iter_batches(batch_size=self.batch, batch_format="pandas"))
            while True:
                try:
                    part = next(batches)
                except StopIteration:
                    break
                except Exception as exc:     # the pipeline failed: a stage raised, a block unreadable
                    msg = " ".join(str(exc).split())
                    msg = msg if len(msg) <= 300 else msg[:300] + "..."
                    raise InputError(f"the Ray dataset could not be read after row {pos}: "
                                     f"{type(exc).__name__}: {msg}", source=self.name) from None
                for _, row in DataFrameSource(part, self.name).rows():
                    pos += 1
                    yield pos, row
        finally:
            if ctx is not None and saved is not None:
                ctx.execution_options.preserve_order = saved[0]
                if saved[1] is not None:
                    ctx.enable_progress_bars = saved[1]

    def empty_error(self) -> InputError:
        return InputError("the Ray dataset has no rows", source=self.name)


class OtlpSource(FileSource):
    """OpenTelemetry traces (:mod:`.otlp`: OTLP JSON lines or document, OTLP protobuf, gzip'd or
    not), read whole and grouped into traces, then one row of record fields per trace (``otlp``)
    or per model call (``otlp-calls``) by :mod:`.genai_spans`. ``summary`` (after a reading) counts
    the spans, traces and records and the spans skipped for having no GenAI content, and holds a
    line per value that could not be read; those lines are logged once (``assay.formats.otlp``)."""

    format = "otlp"
    per = "trace"

    def __init__(self, path: Path, name: str, spool: Spool | None = None):
        super().__init__(path, name, spool)
        self.summary: Any = None
        self._lines: dict[int, int | None] = {}
        self._told = False

    def rows(self) -> Iterator[tuple[int, Any]]:
        from assay.formats import genai_spans, otlp

        traces = otlp.read_file(self.file(), self.name)
        summary = genai_spans.Summary()
        self.summary, self._lines, n = summary, {}, 0
        for trace in traces:
            try:
                got: list[Any] = genai_spans.trace_records(trace, self.per, summary)
            except FieldError as e:  # a shape no reader anticipated: this trace is a bad row, not the file
                got = [Malformed(f"trace {trace.trace_id}: {e.field}: {e.message}")]
            for fields in got:
                n += 1
                self._lines[n] = trace.root.line
                yield n, fields
        if summary.notes and not self._told:
            self._told = True
            log = logging.getLogger("assay.formats.otlp")
            for note in summary.notes[:20]:
                log.warning("%s: %s", self.name, note)
            if len(summary.notes) > 20:
                log.warning("%s: ... and %d more values not read", self.name, len(summary.notes) - 20)

    def line(self, pos: int) -> int | None:
        return self._lines.get(pos)

    def empty_error(self) -> InputError:
        s = self.summary
        read = f"{s.spans} spans in {s.traces} traces" if s is not None else "no spans"
        what = "model call" if self.per == "call" else "span"
        return InputError(f"no {what} with GenAI content ({read} read; the GenAI semantic conventions, the older "
                          "gen_ai.* attributes and events, and OpenInference are read)", source=self.name)


class OtlpCallsSource(OtlpSource):
    """:class:`OtlpSource` with a record per model call."""

    format = "otlp-calls"
    per = "call"


def _looks_otlp(path: Path) -> bool:
    """A JSON / JSONL file whose first object starts with ``resourceSpans`` (OTLP JSON)."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    return bool(_OTLP_HEAD.match(head))


def format_of(path: Path, name: str, fmt: str | None = None) -> str:
    """The format ``fmt`` names (``jsonl``, ``json``, ``csv``, ``parquet``, ``otlp``, ``otlp-calls``;
    ``ndjson`` and ``pq`` too), else the one the file name's extension says (``.otlp.json``,
    ``.otlp.jsonl``, ``.pb``, ``.otlp.pb``, each also ``.gz``: OTLP traces)."""
    if fmt is not None:
        f = str(fmt).strip().lower().lstrip(".")
        f = EXTENSIONS.get("." + f, f)
        f = "otlp" if f == "otlp-traces" else f
        if f not in FORMATS:
            raise InputError(f"unknown format {fmt!r}: expected jsonl, json, csv, parquet, otlp (a record per "
                             "trace) or otlp-calls (a record per model call)", source=name)
        return f
    if _OTLP_NAME.search(path.name):
        return "otlp"
    f = EXTENSIONS.get(path.suffix.lower())
    if f is None:
        known = ", ".join(sorted(set(EXTENSIONS)))
        raise InputError(f"unsupported file type {path.suffix or '(no extension)'!r}: expected one of {known}, "
                         "or name the format with --format jsonl|json|csv|parquet|otlp", source=name)
    return f


_CLASSES: dict[str, Any] = {"jsonl": JsonlSource, "json": JsonSource, "csv": CsvSource, "parquet": ParquetSource,
                             "otlp": OtlpSource, "otlp-calls": OtlpCallsSource}


def file_source(path: Path, name: str, fmt: str | None = None) -> FileSource:
    """The reader of the regular file ``path``, by ``fmt`` or its extension; a ``.json`` / ``.jsonl``
    file that holds OTLP traces (``{"resourceSpans": ...``) is read as traces."""
    f = format_of(path, name, fmt)
    if fmt is None and f in ("json", "jsonl") and _looks_otlp(path):
        f = "otlp"
    return _CLASSES[f](path, name)


def stream_source(path: Path | None, name: str, fmt: str | None = None) -> FileSource:
    """The reader of a stream (``path`` None: standard input), by ``fmt`` or its name's extension;
    its rows are read from a :class:`Spool`."""
    f = format_of(path if path is not None else Path(""), name, fmt)
    return _CLASSES[f](Path(name), name, Spool(path, name))


def directory_sources(path: Path, name: str) -> list[Source]:
    try:
        entries = sorted(p for p in path.iterdir()
                         if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in EXTENSIONS)
    except OSError as e:
        raise InputError(f"cannot read the directory: {e.strerror or e}", source=name) from None
    if not entries:
        raise InputError("the directory has no .jsonl, .json, .csv or .parquet files", source=name)
    out = []
    for p in entries:
        pname = os.path.join(name, p.name)
        _open_check(p, pname)
        out.append(file_source(p, pname))
    return out


def check_path(path: Path, name: str) -> None:
    _open_check(path, name)
