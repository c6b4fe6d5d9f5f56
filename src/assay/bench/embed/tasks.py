"""Embedding-benchmark tasks: MTEB's seven task types read from local files in MTEB's (and BEIR's) layouts.

A task is one of :data:`TASK_TYPES`, recognised from its files, or declared by a small ``task.yaml``:

- ``retrieval``: a BEIR folder — ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
  (``_id``, ``text``) and ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score``; graded).
- ``sts``: rows ``sentence1``, ``sentence2``, ``score``.
- ``pair``: rows ``sentence1``, ``sentence2``, ``label`` (1 = same meaning, 0 = not).
- ``classification``: rows ``text``, ``label``; a ``train`` file beside the ``<split>`` file (``train.jsonl``
  + ``test.jsonl``), or a ``split`` column.
- ``clustering``: rows ``text``, ``label`` (declared: ``type: clustering``; the labels are the gold clusters).
- ``rerank``: rows ``query``, ``positive`` (list), ``negative`` (list).
- ``summarization``: rows ``text``, ``human_summaries`` (list), ``machine_summaries`` (list), ``relevance``
  (one number per machine summary).

Files are ``.jsonl``, ``.json`` (a list of objects), ``.csv``, ``.tsv`` or ``.parquet``; in CSV/TSV a list
cell is JSON. ``task.yaml`` (beside the data or inside the folder) may say ``type``, ``name``, ``split``,
``main_score``, ``columns`` (our field name -> the file's column name), ``data`` / ``train`` / ``test``
(file names), and the options ``samples_per_label``, ``n_experiments`` (classification) and
``ignore_identical_ids`` (retrieval). Builtin tasks are small samples written for this project and shipped
in ``samples/``. ``hf:DATASET_ID`` goes through the ``datasets`` package when it is installed and can
reach the Hub; otherwise one line says to download the files and pass the folder.

Every task carries two hashes so results can be compared only where they mean the same thing:
``task_hash`` (type, columns, split, main score, options, metric version) and ``data_hash`` (the normalised
data). Bad input stops loading with one line naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import hashlib
import json
import stat
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from assay.bench.embed.metrics import (
    DEFAULT_MAIN_SCORES,
    MAIN_SCORE_CHOICES,
    METRIC_VERSION,
    N_EXPERIMENTS,
    SAMPLES_PER_LABEL,
)
from assay.errors import InputError

__all__ = ["TASK_TYPES", "BUILTIN_TASKS", "EmbedTask", "EmbedTaskError", "load_embed_tasks", "StsData", "PairData",
           "ClassificationData", "ClusteringData", "RerankData", "RetrievalData", "SummarizationData"]

TASK_TYPES = ("classification", "clustering", "pair", "rerank", "retrieval", "sts", "summarization")
BUILTIN_TASKS = {
    "sts": "81 sentence pairs scored 0-5 for closeness of meaning (Spearman of cosine vs gold)",
    "retrieval": "BEIR layout: 186 short passages, many of them near misses, 36 queries, graded qrels (nDCG@10)",
    "classification": "4 topics, 100 training and 60 test texts (logistic regression accuracy)",
    "clustering": "100 texts from 5 topics (k-means V-measure)",
    "pair": "78 sentence pairs, paraphrase or not, with hard negatives (max average precision)",
    "rerank": "25 queries, each with 1-3 relevant and 7 near-miss candidates (same topic or words) (MAP)",
    "summarization": "8 texts, 2 reference and 4 scored machine summaries each (Spearman of cosine vs scores)",
}
SAMPLES = Path(__file__).resolve().parent / "samples"
DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet")
TASK_FILE = "task.yaml"
MAX_DECL_BYTES = 1 << 16        # a task.yaml is a few lines
# The fields each row type needs, in our names (task.yaml ``columns`` maps them to the file's names).
FIELDS = {
    "sts": ("sentence1", "sentence2", "score"),
    "pair": ("sentence1", "sentence2", "label"),
    "classification": ("text", "label"),
    "clustering": ("text", "label"),
    "rerank": ("query", "positive", "negative"),
    "summarization": ("text", "human_summaries", "machine_summaries", "relevance"),
    "retrieval": ("_id", "title", "text", "query-id", "corpus-id", "score"),
}
YAML_KEYS = {"type", "name", "split", "main_score", "columns", "data", "train", "test", "samples_per_label",
             "n_experiments", "ignore_identical_ids", "description"}


class EmbedTaskError(InputError):
    """A task that cannot be loaded: one line naming the file, the line where known, and the field."""


# --------------------------------------------------------------------------------------------- typed data
@dataclass(frozen=True)
class StsData:
    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    score: tuple[float, ...]


@dataclass(frozen=True)
class PairData:
    sentence1: tuple[str, ...]
    sentence2: tuple[str, ...]
    label: tuple[int, ...]


@dataclass(frozen=True)
class ClassificationData:
    train_text: tuple[str, ...]
    train_label: tuple[str, ...]
    test_text: tuple[str, ...]
    test_label: tuple[str, ...]
    samples_per_label: int = SAMPLES_PER_LABEL
    n_experiments: int = N_EXPERIMENTS


@dataclass(frozen=True)
class ClusteringData:
    text: tuple[str, ...]
    label: tuple[str, ...]


@dataclass(frozen=True)
class RerankData:
    query: tuple[str, ...]
    positive: tuple[tuple[str, ...], ...]
    negative: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class RetrievalData:
    corpus_ids: tuple[str, ...]
    corpus_texts: tuple[str, ...]       # title + " " + text, stripped (as MTEB joins them)
    query_ids: tuple[str, ...]
    query_texts: tuple[str, ...]
    qrels: tuple[tuple[str, str, int], ...]   # (query id, doc id, relevance) for the task's split
    ignore_identical_ids: bool = True


@dataclass(frozen=True)
class SummarizationData:
    text: tuple[str, ...]
    human_summaries: tuple[tuple[str, ...], ...]
    machine_summaries: tuple[tuple[str, ...], ...]
    relevance: tuple[tuple[float, ...], ...]


# --------------------------------------------------------------------------------------------- the task
@dataclass(frozen=True)
class EmbedTask:
    """One embedding task, loaded and checked: what to embed (:meth:`texts`) and what to score it against."""

    name: str
    type: str
    source: str
    data: Any = field(repr=False)
    main_score: str
    task_hash: str
    data_hash: str
    split: str
    n_units: int

    def texts(self) -> list[tuple[str, str | None]]:
        """The distinct ``(text, input_type)`` the task needs embedded, in first-use order. Retrieval and
        rerank embed queries as ``"query"`` and passages as ``"document"``; the symmetric types use None."""
        d, out = self.data, []
        if self.type == "retrieval":
            qrel_queries = {q for q, _, _ in d.qrels}
            out += [(t, "query") for qid, t in zip(d.query_ids, d.query_texts) if qid in qrel_queries]
            out += [(t, "document") for t in d.corpus_texts]
        elif self.type == "rerank":
            for q, pos, neg in zip(d.query, d.positive, d.negative):
                out += [(q, "query")] + [(t, "document") for t in (*pos, *neg)]
        elif self.type in ("sts", "pair"):
            out += [(t, None) for pair in zip(d.sentence1, d.sentence2) for t in pair]
        elif self.type == "classification":
            out += [(t, None) for t in (*d.train_text, *d.test_text)]
        elif self.type == "clustering":
            out += [(t, None) for t in d.text]
        elif self.type == "summarization":
            for hs, ms in zip(d.human_summaries, d.machine_summaries):
                out += [(t, None) for t in (*hs, *ms)]
        return list(dict.fromkeys(out))


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
                          ).hexdigest()


def _n_units(kind: str, d: Any) -> int:
    if kind in ("sts", "pair"):
        return len(d.score if kind == "sts" else d.label)
    if kind == "classification":
        return len(d.test_text)
    if kind == "clustering":
        return len(d.text)
    if kind == "rerank":
        return sum(1 for p, n in zip(d.positive, d.negative) if p and n)
    if kind == "retrieval":
        return len({q for q, _, _ in d.qrels} & set(d.query_ids))
    return sum(1 for r in d.relevance if len(set(r)) > 1)


def _make_task(*, name: str, kind: str, source: str, data: Any, split: str, main_score: str | None,
               columns: dict[str, str], err: Callable[..., EmbedTaskError]) -> EmbedTask:
    main = main_score or DEFAULT_MAIN_SCORES[kind]
    if main not in MAIN_SCORE_CHOICES[kind]:
        raise err(f"main_score {main!r} is not one of {', '.join(MAIN_SCORE_CHOICES[kind])} for {kind}",
                  field="main_score")
    options = {k: v for k, v in asdict(data).items() if k in ("samples_per_label", "n_experiments",
                                                               "ignore_identical_ids")}
    definition = {"type": kind, "columns": {f: columns.get(f, f) for f in FIELDS[kind]}, "split": split,
                  "main_score": main, "options": options, "metric_version": METRIC_VERSION}
    content = {k: v for k, v in asdict(data).items() if k not in options}
    task = EmbedTask(name=name, type=kind, source=source, data=data, main_score=main, task_hash=_sha(definition),
                     data_hash=_sha(content), split=split, n_units=_n_units(kind, data))
    if task.n_units == 0:
        what = "queries with a qrels line" if kind == "retrieval" else f"{kind} items"
        raise err(f"task {name}: no {what} to score in split {split!r}")
    return task


# --------------------------------------------------------------------------------------------- reading files
def _rows(path: Path) -> Iterator[tuple[int, dict]]:  # noqa: C901
    """``(line, row)`` for every row of a data file; line = the file line (jsonl, csv, tsv) or row number."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            with path.open(encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise EmbedTaskError(f"not valid JSON ({exc.msg})", source=str(path), line=n) from None
                    if not isinstance(row, dict):
                        raise EmbedTaskError("a row must be a JSON object", source=str(path), line=n)
                    yield n, row
        elif suffix == ".json":
            try:
                rows = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise EmbedTaskError(f"not valid JSON ({exc.msg})", source=str(path), line=exc.lineno) from None
            if not isinstance(rows, list):
                raise EmbedTaskError("a .json task file must hold a list of objects", source=str(path))
            for n, row in enumerate(rows, 1):
                if not isinstance(row, dict):
                    raise EmbedTaskError(f"item {n} is not an object", source=str(path))
                yield n, row
        elif suffix in (".csv", ".tsv"):
            with path.open(encoding="utf-8", newline="") as fh:
                reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",")
                for row in reader:
                    yield reader.line_num, {k: v for k, v in row.items() if k is not None}
        elif suffix == ".parquet":
            import pandas as pd

            for n, row in enumerate(pd.read_parquet(path).to_dict(orient="records"), 1):
                yield n, {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()}
        else:
            raise EmbedTaskError(f"unsupported file type {suffix or '(none)'!r}; use one of {', '.join(DATA_SUFFIXES)}",
                                 source=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise EmbedTaskError(f"cannot read ({exc.__class__.__name__}: {exc})", source=str(path)) from None


def _columns_of(path: Path) -> set[str]:
    for _, row in _rows(path):
        return set(row)
    return set()


class _Fields:
    """Typed access to the fields of one row, raising one-line errors that name file, line and field."""

    def __init__(self, path: Path, line: int, row: dict, columns: dict[str, str]):
        self.path, self.line, self.row, self.columns = path, line, row, columns

    def err(self, message: str, name: str) -> EmbedTaskError:
        return EmbedTaskError(message, source=str(self.path), line=self.line, field=self.columns.get(name, name))

    def raw(self, name: str, *, required: bool = True) -> Any:
        col = self.columns.get(name, name)
        value = self.row.get(col)
        if value is None or (isinstance(value, float) and value != value):      # absent, null or NaN
            if required:
                raise self.err("is missing", name)
            return None
        return self.row[col]

    def text(self, name: str, *, required: bool = True) -> str:
        v = self.raw(name, required=required)
        if v is None:
            return ""
        if isinstance(v, (int, float)) and not isinstance(v, bool) and name in ("_id", "query-id", "corpus-id"):
            v = str(v)
        if not isinstance(v, str):
            raise self.err("is not a string", name)
        if required and not v.strip() and name not in ("title",):
            raise self.err("is empty", name)
        return v

    def number(self, name: str) -> float:
        v = self.raw(name)
        if isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                raise self.err("is not a number", name) from None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            raise self.err("is not a number", name)
        return float(v)

    def label(self, name: str) -> str:
        v = self.raw(name)
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise self.err("is not a label (a string or a number)", name)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        v = str(v).strip()
        if not v:
            raise self.err("is empty", name)
        return v

    def binary(self, name: str) -> int:
        v = self.raw(name)
        if isinstance(v, str) and v.strip() in ("0", "1", "0.0", "1.0"):
            v = float(v)
        if isinstance(v, bool):
            v = int(v)
        if not isinstance(v, (int, float)) or v not in (0, 1):
            raise self.err("is not 0 or 1", name)
        return int(v)

    def _list(self, name: str) -> list:
        v = self.raw(name)
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                raise self.err("is not a list (in CSV/TSV write a JSON list)", name) from None
        if isinstance(v, tuple):
            v = list(v)
        if not isinstance(v, list):
            raise self.err("is not a list", name)
        return v

    def texts(self, name: str) -> tuple[str, ...]:
        v = self._list(name)
        if not all(isinstance(x, str) and x.strip() for x in v):
            raise self.err("must be a list of non-empty strings", name)
        return tuple(v)

    def numbers(self, name: str) -> tuple[float, ...]:
        v = self._list(name)
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x == x for x in v):
            raise self.err("must be a list of numbers", name)
        return tuple(float(x) for x in v)


def _fields(path: Path, columns: dict[str, str]) -> Iterator[_Fields]:
    for line, row in _rows(path):
        yield _Fields(path, line, row, columns)


# --------------------------------------------------------------------------------------------- per type
def _read_sts(path: Path, columns: dict[str, str]) -> StsData:
    s1, s2, score = [], [], []
    for f in _fields(path, columns):
        s1.append(f.text("sentence1"))
        s2.append(f.text("sentence2"))
        score.append(f.number("score"))
    return StsData(tuple(s1), tuple(s2), tuple(score))


def _read_pair(path: Path, columns: dict[str, str]) -> PairData:
    s1, s2, label = [], [], []
    for f in _fields(path, columns):
        s1.append(f.text("sentence1"))
        s2.append(f.text("sentence2"))
        label.append(f.binary("label"))
    return PairData(tuple(s1), tuple(s2), tuple(label))


def _read_labelled(path: Path, columns: dict[str, str], split_value: str | None = None
                   ) -> tuple[list[str], list[str], list[str]]:
    """Texts, labels and (when the file has one) the ``split`` column of text + label rows."""
    texts, labels, splits = [], [], []
    for f in _fields(path, columns):
        texts.append(f.text("text"))
        labels.append(f.label("label"))
        s = f.raw("split", required=False)
        splits.append(str(s) if s is not None else "")
    return texts, labels, splits


def _read_rerank(path: Path, columns: dict[str, str]) -> RerankData:
    q, pos, neg = [], [], []
    for f in _fields(path, columns):
        q.append(f.text("query"))
        pos.append(f.texts("positive"))
        neg.append(f.texts("negative"))
    return RerankData(tuple(q), tuple(pos), tuple(neg))


def _read_summarization(path: Path, columns: dict[str, str]) -> SummarizationData:
    text, human, machine, rel = [], [], [], []
    for f in _fields(path, columns):
        text.append(f.text("text"))
        human.append(f.texts("human_summaries"))
        machine.append(f.texts("machine_summaries"))
        r = f.numbers("relevance")
        if len(r) != len(machine[-1]):
            raise f.err(f"has {len(r)} scores for {len(machine[-1])} machine summaries", "relevance")
        if not human[-1]:
            raise f.err("is empty", "human_summaries")
        rel.append(r)
    return SummarizationData(tuple(text), tuple(human), tuple(machine), tuple(rel))


def _find(folder: Path, stem: str) -> Path | None:
    for suffix in DATA_SUFFIXES:
        p = folder / f"{stem}{suffix}"
        if p.is_file():
            return p
    return None


def _id_texts(path: Path, columns: dict[str, str], what: str, task: str) -> tuple[list[str], list[str]]:
    """The ids and texts of a BEIR corpus (``what`` = "document": title and text joined) or queries file; an
    empty one is an error naming the task."""
    ids, texts, seen = [], [], set()
    for f in _fields(path, columns):
        key = f.text("_id")
        if key in seen:
            raise f.err(f"duplicate {what} id {key!r}", "_id")
        seen.add(key)
        ids.append(key)
        texts.append(f"{f.text('title', required=False)} {f.text('text')}".strip() if what == "document"
                     else f.text("text"))
    if not ids:
        raise EmbedTaskError(f"task {task}: " + ("the corpus has no documents" if what == "document" else
                                                 "the queries file has no queries"), source=str(path))
    return ids, texts


def _read_retrieval(folder: Path, split: str, columns: dict[str, str], ignore_identical_ids: bool,
                    files: dict[str, str], name: str) -> RetrievalData:
    def locate(key: str, stem: str, base: Path) -> Path:
        if key in files:
            return folder / files[key]
        p = _find(base, stem)
        if p is None:
            raise EmbedTaskError(f"retrieval task needs {base.relative_to(folder) if base != folder else ''}"
                                 f"{'/' if base != folder else ''}{stem}.jsonl (or .json/.csv/.tsv/.parquet)",
                                 source=str(folder))
        return p

    corpus_path, queries_path = locate("corpus", "corpus", folder), locate("queries", "queries", folder)
    qrels_path = locate("qrels", split, folder / "qrels")
    ids, texts = _id_texts(corpus_path, columns, "document", name)
    qids, qtexts = _id_texts(queries_path, columns, "query", name)
    qseen = set(qids)
    qrels: dict[tuple[str, str], int] = {}
    for f in _fields(qrels_path, columns):
        qid, did = f.text("query-id"), f.text("corpus-id")
        rel = f.number("score")
        if not rel.is_integer():
            raise f.err("is not a whole number (trec_eval relevance is an integer)", "score")
        if qid not in qseen:
            raise f.err(f"query {qid!r} is not in {queries_path.name}", "query-id")
        qrels[(qid, did)] = int(rel)
    return RetrievalData(tuple(ids), tuple(texts), tuple(qids), tuple(qtexts),
                         tuple((q, d, r) for (q, d), r in qrels.items()), ignore_identical_ids)


# --------------------------------------------------------------------------------------------- recognition
def _type_from_columns(cols: set[str], columns: dict[str, str]) -> str | None:
    named = {k for k, v in columns.items() if v in cols} | cols
    for kind in ("summarization", "rerank", "sts", "pair"):
        if set(FIELDS[kind]) <= named:
            return kind
    if {"text", "label"} <= named:
        return "classification"
    return None


class _DeclLoader(yaml.SafeLoader):
    """Safe YAML without aliases, nested at most 20 levels: a task.yaml is a few plain keys, and an alias chain
    of nine lines expands to a billion values when the name is made a string."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not allowed in a task.yaml",
                                              self.peek_event().start_mark)
        if self._depth >= 20:
            raise yaml.composer.ComposerError(None, None, "nested more than 20 levels deep",
                                              self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _decl_text(path: Path) -> str:
    """The text of a task.yaml: a regular file (never a device or a pipe) of at most :data:`MAX_DECL_BYTES`."""
    try:
        regular = stat.S_ISREG(path.stat().st_mode)
    except OSError as exc:
        raise EmbedTaskError(f"cannot read ({exc.__class__.__name__}: {exc.strerror or exc})",
                             source=str(path)) from None
    if not regular:
        raise EmbedTaskError("not a regular file", source=str(path))
    with path.open("rb") as fh:
        raw = fh.read(MAX_DECL_BYTES + 1)
    if len(raw) > MAX_DECL_BYTES:
        raise EmbedTaskError(f"larger than {MAX_DECL_BYTES} bytes, too large for a task.yaml", source=str(path))
    return raw.decode("utf-8")


def _read_decl(path: Path) -> dict:
    try:
        decl = yaml.load(_decl_text(path), Loader=_DeclLoader) or {}      # a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise EmbedTaskError(f"not valid YAML ({exc.problem})", source=str(path),
                             line=mark.line + 1 if mark else None) from None
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        raise EmbedTaskError(f"cannot read ({exc})", source=str(path)) from None
    if not isinstance(decl, dict):
        raise EmbedTaskError("must be a mapping of keys (type, name, split, ...)", source=str(path))
    unknown = sorted(set(decl) - YAML_KEYS)
    if unknown:
        raise EmbedTaskError(f"unknown key; known keys: {', '.join(sorted(YAML_KEYS))}", source=str(path),
                             field=unknown[0])
    if "type" in decl and decl["type"] not in TASK_TYPES:
        raise EmbedTaskError(f"{decl['type']!r} is not one of {', '.join(TASK_TYPES)}", source=str(path),
                             field="type")
    cols = decl.get("columns") or {}
    if not isinstance(cols, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in cols.items()):
        raise EmbedTaskError("must map our field names to your column names", source=str(path), field="columns")
    for key in ("samples_per_label", "n_experiments"):
        if key in decl and (not isinstance(decl[key], int) or isinstance(decl[key], bool) or decl[key] < 1):
            raise EmbedTaskError("must be a whole number >= 1", source=str(path), field=key)
    if "ignore_identical_ids" in decl and not isinstance(decl["ignore_identical_ids"], bool):
        raise EmbedTaskError("must be true or false", source=str(path), field="ignore_identical_ids")
    return decl


def _load_path(path: Path, *, forced_type: str | None = None, source: str | None = None,  # noqa: C901
               default_name: str | None = None) -> EmbedTask:
    """One task from a folder, a data file or a task.yaml."""
    if not path.exists():
        raise EmbedTaskError("no such file or folder", source=str(path))
    decl: dict = {}
    decl_path: Path | None = None
    if path.is_dir():
        folder = path
        if (path / TASK_FILE).is_file():
            decl_path = path / TASK_FILE
    elif path.suffix.lower() in (".yaml", ".yml"):
        folder, decl_path = path.parent, path
    else:
        folder = path.parent
        if (folder / TASK_FILE).is_file():
            decl_path = folder / TASK_FILE
    if decl_path is not None:
        decl = _read_decl(decl_path)
    yaml_err_path = str(decl_path) if decl_path else str(path)

    def err(message: str, field: str | None = None) -> EmbedTaskError:
        return EmbedTaskError(message, source=yaml_err_path, field=field)

    columns = dict(decl.get("columns") or {})
    split = str(decl.get("split", "test"))
    kind = forced_type or decl.get("type")
    files = {k: str(decl[k]) for k in ("data", "train", "test", "corpus", "queries", "qrels") if k in decl}
    data_file = path if path.is_file() and path.suffix.lower() in DATA_SUFFIXES else \
        (folder / files["data"] if "data" in files else None)
    if data_file is not None and not data_file.is_file():
        raise err(f"data file {data_file.name!r} not found", "data")
    test_file = folder / files["test"] if "test" in files else None
    train_file = folder / files["train"] if "train" in files else None
    for p, key in ((test_file, "test"), (train_file, "train")):
        if p is not None and not p.is_file():
            raise err(f"file {p.name!r} not found", key)

    if kind is None:
        if data_file is None and (folder / "qrels").is_dir() and _find(folder, "corpus"):
            kind = "retrieval"
        else:
            probe = data_file or test_file or _find(folder, split) or _find(folder, "data")
            if probe is None:
                raise EmbedTaskError(f"cannot tell the task type: no {split}.jsonl / data.jsonl / corpus.jsonl + "
                                     f"qrels/; add a {TASK_FILE} with 'type: ...'", source=str(path))
            kind = _type_from_columns(_columns_of(probe), columns)
            if kind is None:
                raise EmbedTaskError(f"cannot tell the task type from the columns {sorted(_columns_of(probe))}; "
                                     f"add a {TASK_FILE} with 'type: ...' and 'columns:'", source=str(probe))
    name = str(decl.get("name") or default_name or (path.stem if path.is_file() and path.suffix.lower() in
                                                    DATA_SUFFIXES else folder.name))
    main_score = decl.get("main_score")

    def main_file() -> Path:
        p = data_file or test_file or _find(folder, split) or _find(folder, "data")
        if p is None:
            raise EmbedTaskError(f"no data file: expected {split}.jsonl or data.jsonl (or .json/.csv/.tsv/.parquet)",
                                 source=str(folder))
        return p

    if kind == "retrieval":
        data: Any = _read_retrieval(folder, split, columns, bool(decl.get("ignore_identical_ids", True)), files,
                                    name)
    elif kind == "sts":
        data = _read_sts(main_file(), columns)
    elif kind == "pair":
        data = _read_pair(main_file(), columns)
    elif kind == "rerank":
        data = _read_rerank(main_file(), columns)
    elif kind == "summarization":
        data = _read_summarization(main_file(), columns)
    elif kind == "clustering":
        texts, labels, _ = _read_labelled(main_file(), columns)
        data = ClusteringData(tuple(texts), tuple(labels))
    else:
        data = _classification(folder, split, columns, decl, main_file(), train_file, path)
    return _make_task(name=name, kind=kind, source=source or str(path), data=data, split=split,
                      main_score=main_score, columns=columns, err=err)


def _classification(folder: Path, split: str, columns: dict, decl: dict, test_path: Path, train_file: Path | None,
                    path: Path) -> ClassificationData:
    train_path = train_file or (_find(folder, "train") if test_path.stem != "train" else None)
    texts, labels, splits = _read_labelled(test_path, columns)
    if train_path is not None and train_path != test_path:
        tr_texts, tr_labels, _ = _read_labelled(train_path, columns)
        te_texts, te_labels = texts, labels
        if any(splits):
            keep = [i for i, s in enumerate(splits) if s in ("", split)]
            te_texts, te_labels = [texts[i] for i in keep], [labels[i] for i in keep]
    elif any(splits):
        tr = [i for i, s in enumerate(splits) if s == "train"]
        te = [i for i, s in enumerate(splits) if s == split]
        if not tr or not te:
            raise EmbedTaskError(f"the 'split' column needs rows 'train' and {split!r}", source=str(test_path),
                                 field=columns.get("split", "split"))
        tr_texts, tr_labels = [texts[i] for i in tr], [labels[i] for i in tr]
        te_texts, te_labels = [texts[i] for i in te], [labels[i] for i in te]
    else:
        raise EmbedTaskError("classification needs training data: train.jsonl beside the test file, or a 'split' "
                             "column; for clustering say 'type: clustering' in task.yaml", source=str(test_path))
    unseen = sorted(set(te_labels) - set(tr_labels))
    if unseen:
        raise EmbedTaskError(f"test label {unseen[0]!r} never occurs in the training data", source=str(test_path),
                             field=columns.get("label", "label"))
    if len(set(tr_labels)) < 2:
        raise EmbedTaskError("the training data needs at least two labels", source=str(train_path or test_path),
                             field=columns.get("label", "label"))
    return ClassificationData(tuple(tr_texts), tuple(tr_labels), tuple(te_texts), tuple(te_labels),
                              int(decl.get("samples_per_label", SAMPLES_PER_LABEL)),
                              int(decl.get("n_experiments", N_EXPERIMENTS)))


# --------------------------------------------------------------------------------------------- hf:
def _load_hf(dataset_id: str, forced_type: str | None) -> EmbedTask:
    """A task from the Hugging Face Hub through ``datasets`` (installed and online only)."""
    hint = f"download its files and pass the folder (--tasks ./{dataset_id.rsplit('/', 1)[-1]}/)"
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise EmbedTaskError(f"the 'datasets' package is not installed; {hint}", source=f"hf:{dataset_id}") from None
    import tempfile

    try:
        ds = datasets.load_dataset(dataset_id)
    except Exception as exc:   # offline, unknown id, gated: all end the same way for the user
        raise EmbedTaskError(f"cannot load from the Hub ({exc.__class__.__name__}); {hint}",
                             source=f"hf:{dataset_id}") from None
    with tempfile.TemporaryDirectory() as tmp:
        for split_name, part in ds.items():
            part.to_json(str(Path(tmp) / f"{split_name}.jsonl"), force_ascii=False)
        if forced_type:
            Path(tmp, TASK_FILE).write_text(yaml.safe_dump({"type": forced_type}))
        return _load_path(Path(tmp), source=f"hf:{dataset_id}", default_name=dataset_id)


# --------------------------------------------------------------------------------------------- entry point
def load_embed_tasks(spec: str, *, data: str | None = None) -> list[EmbedTask]:
    """Tasks named by ``spec``: comma-separated builtin names (or ``all``), paths to task folders / files /
    ``task.yaml``, and ``hf:DATASET_ID``. ``data`` is the user's own folder or file read as the one builtin
    type named in ``spec`` (``--tasks retrieval --data my_corpus/``)."""
    parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    if not parts:
        raise EmbedTaskError("no tasks named; give builtin names (" + ", ".join(BUILTIN_TASKS) + "), 'all' or paths")
    if data is not None:
        if len(parts) != 1 or parts[0] not in TASK_TYPES:
            raise EmbedTaskError(f"--data is read as one task type: pass exactly one of {', '.join(TASK_TYPES)} "
                                 f"as the task (got {spec!r})")
        return [_load_path(Path(data), forced_type=parts[0])]
    out: list[EmbedTask] = []
    for part in parts:
        if part == "all":
            out.extend(_load_builtin(name) for name in BUILTIN_TASKS)
        elif part in BUILTIN_TASKS:
            out.append(_load_builtin(part))
        elif part.startswith("hf:"):
            out.append(_load_hf(part[3:], None))
        else:
            p = Path(part).expanduser()
            if not p.exists():
                raise EmbedTaskError(f"not a builtin task ({', '.join(BUILTIN_TASKS)}, all) nor an existing file "
                                     "or folder", source=part)
            out.append(_load_path(p))
    names = [t.name for t in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise EmbedTaskError(f"two tasks are named {dup!r}; give one a 'name:' in its {TASK_FILE}")
    return out


def _load_builtin(name: str) -> EmbedTask:
    return _load_path(SAMPLES / name, source=f"builtin:{name}", default_name=name)
