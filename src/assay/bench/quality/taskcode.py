"""A task's own Python code (``!function module.name`` in lm-evaluation-harness task YAML), run only when trusted.

lm-evaluation-harness imports ``module`` from ``module.py`` in the folder of the YAML file the tag is written in,
executing that file, and hands the named function to the task (``process_docs``, ``process_results``,
``doc_to_text`` / ``doc_to_target`` / ``doc_to_choice``, custom filters, metrics and aggregations,
``fewshot_config.samples``). Executing a task folder's code is running a stranger's program, so assay does it only
with ``--trust-task-code`` (:class:`TaskCode` with ``trusted=True``); without it, the first hook met stops the load
with one line that names the task file, the ``!function`` and the flag, and nothing is imported. A trusted load
records the sha256 of every code file it imported (the module, and any module it imported from the task's folder),
so the run's summary and task hash say exactly which code scored it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import InputError

__all__ = ["FunctionRef", "TaskCode", "DocList", "TRUST_FLAG", "process_docs"]

TRUST_FLAG = "--trust-task-code"


@dataclass(frozen=True)
class FunctionRef:
    """A ``!function module.name`` tag from a task YAML: the name, and where it was written (the YAML file, its
    line), which is where lm-evaluation-harness looks for ``module.py``. Imported only by a trusted
    :class:`TaskCode`."""

    name: str
    yaml_file: str = ""
    line: int | None = None

    def __str__(self) -> str:
        return f"!function {self.name}"

    @property
    def module_name(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def function_name(self) -> str:
        return self.name.rpartition(".")[2]

    @property
    def module_file(self) -> Path:
        """The file lm-evaluation-harness imports: ``module.py`` beside the YAML that holds the tag."""
        return Path(self.yaml_file).parent / f"{self.module_name}.py"


class TaskCode:
    """Resolves a task's ``!function`` tags: refuses them (naming the flag) unless ``trusted``; when trusted,
    imports each module file once, as lm-evaluation-harness does, and records ``files``: path → sha256."""

    def __init__(self, trusted: bool, task: str, error: Callable[..., Exception]):
        self.trusted, self.task, self._error = trusted, task, error
        self.files: dict[str, str] = {}
        self._modules: dict[Path, Any] = {}

    def refuse(self, ref: FunctionRef, fieldname: str, what: str) -> Exception:
        return self._error(
            f"task {self.task}: {fieldname} is {ref}, {what} in {ref.module_file.name} beside the task file; "
            f"assay runs a task's code only with {TRUST_FLAG}", ref, fieldname)

    def resolve(self, ref: FunctionRef, fieldname: str, what: str = "Python code") -> Callable:
        """The function ``ref`` names, imported from its module file (only when trusted)."""
        if not self.trusted:
            raise self.refuse(ref, fieldname, what)
        if not ref.module_name or not ref.function_name:
            raise self._error(f"task {self.task}: {ref} must name module.function", ref, fieldname)
        module = self._import(ref, fieldname)
        fn = getattr(module, ref.function_name, None)
        if not callable(fn):
            raise self._error(f"task {self.task}: {ref.module_file} has no function {ref.function_name!r}",
                              ref, fieldname)
        return fn

    def _import(self, ref: FunctionRef, fieldname: str) -> Any:
        path = ref.module_file
        key = path.resolve()
        if key in self._modules:
            return self._modules[key]
        if not path.is_file():
            raise self._error(f"task {self.task}: {ref} needs {path}, which is not there", ref, fieldname)
        before = set(sys.modules)
        spec = importlib.util.spec_from_file_location(ref.module_name, str(path))
        if spec is None or spec.loader is None:
            raise self._error(f"task {self.task}: cannot import {path}", ref, fieldname)
        module = importlib.util.module_from_spec(spec)
        self.files[str(path)] = _sha_file(path)
        try:
            spec.loader.exec_module(module)
        except ModuleNotFoundError as exc:    # lm-eval's own task code imports lm_eval, datasets, evaluate ...
            raise self._error(missing_module(self.task, path, exc), ref, fieldname) from None
        except Exception as exc:   # the task's own code failed on import: say which file and how
            raise self._error(f"task {self.task}: importing {path} failed: {type(exc).__name__}: "
                              f"{' '.join(str(exc).split())[:200]}", ref, fieldname) from None
        self._record_siblings(path.parent, before)
        self._modules[key] = module
        return module

    def _record_siblings(self, folder: Path, before: set[str]) -> None:
        """The modules the task's module imported from the task's own folder are its code too."""
        root = folder.resolve()
        for name in set(sys.modules) - before:
            f = getattr(sys.modules.get(name), "__file__", None)
            if f and Path(f).resolve().is_relative_to(root) and str(f) not in self.files:
                self.files[str(f)] = _sha_file(Path(f))


# the pip names of modules lm-evaluation-harness's task code imports
PIP_NAMES = {"lm_eval": "lm-eval", "sklearn": "scikit-learn", "yaml": "pyyaml", "langdetect": "langdetect",
             "datasets": "datasets", "evaluate": "evaluate", "sacrebleu": "sacrebleu", "nltk": "nltk"}


def missing_module(task: str, path: Path, exc: ModuleNotFoundError) -> str:
    """One line for task code whose import needs a module this environment lacks: the file, the module, and
    what installs it (lm-eval's own task code imports ``lm_eval``, ``datasets``, ``evaluate``)."""
    top = (exc.name or str(exc)).split(".")[0]
    pip = PIP_NAMES.get(top, top)
    more = " (lm-evaluation-harness's own package, which its task code imports)" if top == "lm_eval" else ""
    return (f"task {task}: {path} imports {exc.name or top}, which is not installed here{more}; install it "
            f"into assay's environment (pip install {pip}) or rewrite that import")


def _sha_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class DocList(list):
    """A split's docs (a list of dicts) with the part of ``datasets.Dataset`` that ``process_docs`` hooks use:
    ``map`` (one doc or a batch at a time; a returned mapping updates the doc, as ``datasets`` does),
    ``filter``, ``select``, ``rename_column``, ``remove_columns``, ``column_names``, ``num_rows``."""

    @property
    def column_names(self) -> list[str]:
        return list(self[0]) if self else []

    @property
    def num_rows(self) -> int:
        return len(self)

    def map(self, function: Callable | None = None, with_indices: bool = False, batched: bool = False,
            batch_size: int | None = 1000, remove_columns: Iterable[str] | str | None = None,
            **_: Any) -> DocList:
        drop = {remove_columns} if isinstance(remove_columns, str) else set(remove_columns or ())
        if function is None:
            return DocList({k: v for k, v in d.items() if k not in drop} for d in self)
        if batched:
            return self._map_batched(function, with_indices, batch_size or len(self) or 1, drop)
        out = DocList()
        for i, doc in enumerate(self):
            got = function(doc, i) if with_indices else function(doc)
            new = {k: v for k, v in doc.items() if k not in drop}
            if got is not None:
                new.update(got)
            out.append(new)
        return out

    def _map_batched(self, function: Callable, with_indices: bool, size: int, drop: set) -> DocList:
        out = DocList()
        for start in range(0, len(self), size):
            chunk = self[start:start + size]
            cols = {k: [d.get(k) for d in chunk] for k in (chunk[0] if chunk else {})}
            got = function(cols, list(range(start, start + len(chunk)))) if with_indices else function(cols)
            merged = {k: v for k, v in cols.items() if k not in drop}
            merged.update(got or {})
            n = len(next(iter(merged.values()))) if merged else 0
            out.extend({k: v[j] for k, v in merged.items()} for j in range(n))
        return out

    def filter(self, function: Callable, with_indices: bool = False, **_: Any) -> DocList:
        return DocList(d for i, d in enumerate(self) if (function(d, i) if with_indices else function(d)))

    def select(self, indices: Iterable[int], **_: Any) -> DocList:
        return DocList(self[i] for i in indices)

    def rename_column(self, old: str, new: str) -> DocList:
        return DocList({(new if k == old else k): v for k, v in d.items()} for d in self)

    def remove_columns(self, columns: Iterable[str] | str) -> DocList:
        drop = {columns} if isinstance(columns, str) else set(columns)
        return DocList({k: v for k, v in d.items() if k not in drop} for d in self)


def process_docs(fn: Callable, docs: list[dict], where: str) -> list[dict]:
    """``fn`` (a task's ``process_docs``) applied to a split's docs, as the harness applies it to the split's
    dataset; what it returns (a :class:`DocList`, a list, a ``datasets.Dataset``) read back as dicts."""
    try:
        got = fn(DocList(dict(d) for d in docs))
        out = [dict(d) for d in got]
    except Exception as exc:
        raise InputError(f"{where} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    return out
