"""The one price table: USD per 1M input and per 1M output tokens, by model and deployment type.

The table shipped with assay is ``assay/models/prices.json`` (OpenAI's list prices, standard
tier). A user's own table is a YAML, JSON or CSV file with the same columns:

``model``      the model's name as the provider spells it (case does not matter);
``deployment`` how it is bought: ``standard`` (the default), ``batch``, ``global-standard``,
               ``data-zone-standard``, ``self-hosted``, ... (free text, compared case-blind);
``input``      USD per 1M input (prompt) tokens;
``output``     USD per 1M output (completion) tokens;
``currency``   ``USD`` (the only one; may be left out);
``source``     where the figure comes from (free text, may be left out);
``notes``      free text, ignored.

A YAML or JSON table is either a list of such rows or a mapping with ``prices`` (the rows) and
optionally ``version``, ``as_of``, ``currency``, ``schema`` and ``notes``. The table in force is
the one named (``assay bench cost --prices FILE``), else ``$ASSAY_PRICES``, else the shipped
one; a user's table replaces the shipped one, it is not merged with it.

A bad file fails with one line naming the file, the line (or row) and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from assay.errors import AssayError

PRICES_ENV = "ASSAY_PRICES"
BUILTIN_FILE = Path(__file__).with_name("prices.json")
SCHEMA = "assay.prices/1"
COLUMNS = ("model", "deployment", "input", "output", "currency", "source")
DEFAULT_DEPLOYMENT = "standard"
_ROW_KEYS = frozenset(COLUMNS) | {"notes"}
_TOP_KEYS = frozenset({"schema", "version", "as_of", "currency", "notes", "prices"})
_MARKS = ("\0line", "\0lines")   # where a YAML or JSON mapping sits in its file (added while reading)
_SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".csv": "csv"}
# A dated snapshot of a listed model costs what the model costs: gpt-4o-2024-08-06, gpt-4-0613.
_SNAPSHOT = re.compile(r"^(?:-\d{4}-\d{2}-\d{2}|-\d{4})$")


@dataclass(frozen=True)
class Price:
    """One row of the table: USD per 1M input and per 1M output tokens."""

    model: str
    deployment: str
    input: float
    output: float
    currency: str = "USD"
    source: str = ""

    @property
    def per_1m(self) -> tuple[float, float]:
        return self.input, self.output

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "deployment": self.deployment, "input": self.input, "output": self.output,
                "currency": self.currency, "source": self.source}


@dataclass(frozen=True)
class PriceTable:
    rows: tuple[Price, ...]
    version: str | None = None
    as_of: str | None = None
    origin: str = "built-in"          # "built-in" or the file's path

    @property
    def builtin(self) -> bool:
        return self.origin == "built-in"

    @property
    def label(self) -> str:
        """How a price from this table is attributed: ``price table (2025-08)`` for the shipped one."""
        tag = ", ".join(str(x) for x in (self.as_of, None if self.builtin else _version(self.version)) if x)
        where = "" if self.builtin else f" {self.origin}"
        return f"price table{where}" + (f" ({tag})" if tag else "")

    def find(self, model: str | None, deployment: str | None = None) -> Price | None:
        """The row for ``model`` (also ``openai/MODEL`` and a dated snapshot such as
        ``gpt-4o-2024-08-06``) and ``deployment``. With no deployment: the ``standard`` row, else
        the model's only row; None when the table has none (or, unasked, several but no standard)."""
        if not model:
            return None
        name = _norm(model)
        if name.startswith("openai/"):
            name = name[len("openai/"):]
        rows = self._by_model().get(name)
        if rows is None:
            for key in sorted(self._by_model(), key=len, reverse=True):
                if name.startswith(key) and _SNAPSHOT.match(name[len(key):]):
                    rows = self._by_model()[key]
                    break
        if not rows:
            return None
        if deployment is not None:
            dep = _norm(deployment)
            return next((r for r in rows if r.deployment == dep), None)
        std = next((r for r in rows if r.deployment == DEFAULT_DEPLOYMENT), None)
        return std if std is not None else (rows[0] if len(rows) == 1 else None)

    def _by_model(self) -> dict[str, list[Price]]:
        idx = self.__dict__.get("_idx")
        if idx is None:
            idx = {}
            for r in self.rows:
                idx.setdefault(_norm(r.model), []).append(r)
            object.__setattr__(self, "_idx", idx)
        return idx

    def as_dict(self) -> dict[str, Any]:
        version = int(self.version) if self.version is not None and self.version.isdigit() else self.version
        return {"schema": SCHEMA, "version": version, "as_of": self.as_of, "currency": "USD",
                "prices": [r.as_dict() for r in self.rows]}


def _version(v: Any) -> str | None:
    return None if v is None else f"v{v}" if str(v).isdigit() else str(v)


def _norm(s: str) -> str:
    return " ".join(str(s).split()).lower()


# -- loading ---------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def builtin_table() -> PriceTable:
    """The table shipped with assay."""
    return _load(BUILTIN_FILE, "built-in")


def load_table(path: str | os.PathLike[str]) -> PriceTable:
    """A user's table from a ``.yaml``/``.yml``, ``.json`` or ``.csv`` file."""
    p = Path(path).expanduser()
    if p.suffix.lower() not in _SUFFIXES:
        raise AssayError(f"{p}: a price table is a .yaml, .yml, .json or .csv file")
    try:
        st = p.stat()
    except OSError as exc:
        raise AssayError(f"{p}: cannot read the price table: {exc.strerror or exc}") from None
    return _load_cached(str(p), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=8)
def _load_cached(path: str, mtime_ns: int, size: int) -> PriceTable:
    return _load(Path(path), path)


def active_table(path: str | os.PathLike[str] | None = None) -> PriceTable:
    """The table in force: ``path`` if given, else ``$ASSAY_PRICES``, else the shipped one."""
    if path is not None and str(path).strip():
        return load_table(path)
    env = os.environ.get(PRICES_ENV, "").strip()
    if env:
        return load_table(env)
    return builtin_table()


def _load(p: Path, origin: str) -> PriceTable:
    kind = _SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise AssayError(f"{p}: a price table is a .yaml, .yml, .json or .csv file")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise AssayError(f"{p}: cannot read the price table: {getattr(exc, 'strerror', None) or exc}") from None
    if kind == "csv":
        raw_rows, meta = _read_csv(p, text), {}
    else:
        doc = _read_yaml(p, text) if kind == "yaml" else _read_json(p, text, lines=origin != "built-in")
        raw_rows, meta = _split(p, doc)
    rows = _rows(p, raw_rows)
    if not rows:
        raise AssayError(f"{p}: the price table has no rows")
    version = meta.get("version")
    as_of = meta.get("as_of")
    return PriceTable(tuple(rows), None if version is None else str(version),
                      None if as_of is None else str(as_of), origin)


@dataclass(frozen=True)
class _Where:
    """Where a row (or one of its fields) is in its file, for messages: ``line 12 (row 3)``."""

    row: int | None = None
    line: int | None = None
    lines: Mapping[str, int] | None = None    # field -> its line

    def __call__(self, field: str | None = None) -> str:
        line = (self.lines or {}).get(field or "", self.line)
        if line is None:
            return f"row {self.row}"
        return f"line {line}" + (f" (row {self.row})" if self.row is not None else "")


# A row read from a file: its fields, and where it is.
_Raw = tuple[Mapping[str, Any], _Where]


def _read_csv(p: Path, text: str) -> list[_Raw]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader, None)
        if header is None:
            raise AssayError(f"{p}: the price table is empty (expected a header: {', '.join(COLUMNS)})")
        header = [h.strip().lower() for h in header]
        for h in header:
            if h not in _ROW_KEYS:
                raise AssayError(f"{p}: line 1: column {h!r} is not one of {', '.join(COLUMNS)}")
        out: list[_Raw] = []
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            where = _Where(line=reader.line_num)
            if len(cells) > len(header):
                raise AssayError(f"{p}: {where()}: {len(cells)} cells but the header names {len(header)} columns")
            out.append(({h: c for h, c in zip(header, cells) if c.strip() != ""}, where))
        return out
    except csv.Error as exc:
        raise AssayError(f"{p}: line {reader.line_num}: not valid CSV: {exc}") from None


def _read_json(p: Path, text: str, lines: bool = True) -> Any:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AssayError(f"{p}: line {exc.lineno}: not valid JSON: {exc.msg}") from None
    rows = doc.get("prices") if isinstance(doc, dict) else doc
    if lines and isinstance(rows, list):
        for r, (line, keys) in zip(rows, _json_row_lines(text)):
            if isinstance(r, dict):
                r["\0line"], r["\0lines"] = line, keys
    return doc


def _json_row_lines(text: str) -> list[tuple[int, dict[str, int]]]:
    """Best effort: the line each row of a JSON table starts on, and its fields' lines (YAML
    reads JSON's structure with positions)."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except Exception:  # noqa: BLE001 - only a nicety for messages
        return []
    if isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if getattr(k, "value", None) == "prices"), None)
    if not isinstance(node, yaml.SequenceNode):
        return []
    return [(item.start_mark.line + 1, _key_lines(item)) for item in node.value]


def _key_lines(node: Any) -> dict[str, int]:
    pairs = node.value if isinstance(getattr(node, "value", None), list) else []
    return {str(getattr(k, "value", "")): k.start_mark.line + 1 for k, _ in pairs if hasattr(k, "start_mark")}


def _read_yaml(p: Path, text: str) -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            m = super().construct_mapping(node, deep=deep)
            m["\0line"], m["\0lines"] = node.start_mark.line + 1, _key_lines(node)
            return m

    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}: " if mark is not None else ""
        raise AssayError(f"{p}: {at}not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise AssayError(f"{p}: not valid YAML: {exc}") from None


def _split(p: Path, doc: Any) -> tuple[list[_Raw], dict[str, Any]]:
    """(rows with where they are, the table's own fields) of a parsed YAML or JSON table."""
    meta: dict[str, Any] = {}
    if isinstance(doc, Mapping):
        for k in doc:
            if k in _MARKS:
                continue
            if k not in _TOP_KEYS:
                raise AssayError(f"{p}: field {k!r} is not one of {', '.join(sorted(_TOP_KEYS))}")
        meta = {k: v for k, v in doc.items() if k not in _MARKS}
        if "prices" not in meta:
            raise AssayError(f"{p}: field 'prices' is missing (the list of rows)")
        cur = str(meta.get("currency", "USD")).strip().upper()
        if cur != "USD":
            raise AssayError(f"{p}: field 'currency': only USD prices are supported, got {meta['currency']!r}")
        doc = meta["prices"]
    if not isinstance(doc, list):
        raise AssayError(f"{p}: expected a list of price rows, or a mapping with a 'prices' list")
    out: list[_Raw] = []
    for i, r in enumerate(doc, 1):
        if not isinstance(r, Mapping):
            raise AssayError(f"{p}: row {i}: expected a mapping of {', '.join(COLUMNS)}, got {r!r}")
        where = _Where(row=i, line=r.get("\0line"), lines=r.get("\0lines"))
        out.append(({k: v for k, v in r.items() if k not in _MARKS}, where))
    return out, meta


def _rows(p: Path, raw: Iterable[_Raw]) -> list[Price]:
    rows: list[Price] = []
    seen: dict[tuple[str, str], str] = {}
    for fields, where in raw:
        for k in fields:
            if k not in _ROW_KEYS:
                raise AssayError(f"{p}: {where(k)}: field {k!r} is not one of {', '.join(COLUMNS)}")
        model = fields.get("model")
        if model is None or not str(model).strip():
            raise AssayError(f"{p}: {where()}: field 'model' is missing")
        model = " ".join(str(model).split())
        dep = fields.get("deployment")
        dep = _norm(dep) if dep is not None and str(dep).strip() else DEFAULT_DEPLOYMENT
        pin = _usd(fields, "input", p, where)
        pout = _usd(fields, "output", p, where)
        cur = fields.get("currency")
        if cur is not None and str(cur).strip() and str(cur).strip().upper() != "USD":
            raise AssayError(f"{p}: {where('currency')}: field 'currency': only USD prices are supported, got {cur!r}")
        source = fields.get("source")
        key = (_norm(model), dep)
        if key in seen:
            raise AssayError(f"{p}: {where('model')}: field 'model': {model} ({dep}) is already priced "
                             f"at {seen[key]}")
        seen[key] = where()
        rows.append(Price(model, dep, pin, pout, "USD", "" if source is None else str(source).strip()))
    return rows


def _usd(fields: Mapping[str, Any], key: str, p: Path, where: _Where) -> float:
    at = f"{p}: {where(key)}"
    v = fields.get(key)
    if v is None or (isinstance(v, str) and not v.strip()):
        raise AssayError(f"{at}: field {key!r} is missing (USD per 1M {key} tokens)")
    try:
        if isinstance(v, bool):
            raise ValueError
        x = float(v.strip().lstrip("$") if isinstance(v, str) else v)
    except (TypeError, ValueError):
        raise AssayError(f"{at}: field {key!r}: expected a number of USD per 1M {key} tokens, got {v!r}") from None
    if not math.isfinite(x) or x < 0:
        raise AssayError(f"{at}: field {key!r}: expected a non-negative number, got {v!r}")
    return x


# -- writing ---------------------------------------------------------------------------------------

def save_table(table: PriceTable, path: str | os.PathLike[str]) -> Path:
    """Write ``table`` as YAML, JSON or CSV (by the file's suffix): a copy to edit."""
    p = Path(path).expanduser()
    kind = _SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise AssayError(f"{p}: a price table is a .yaml, .yml, .json or .csv file")
    doc = table.as_dict()
    if kind == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
        w.writeheader()
        w.writerows(doc["prices"])
        text = buf.getvalue()
    elif kind == "json":
        text = json.dumps(doc, indent=2) + "\n"
    else:
        import yaml

        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)
    try:
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise AssayError(f"{p}: cannot write the price table: {exc.strerror or exc}") from None
    return p


__all__ = ["BUILTIN_FILE", "COLUMNS", "DEFAULT_DEPLOYMENT", "PRICES_ENV", "Price", "PriceTable", "active_table",
           "builtin_table", "load_table", "save_table"]
