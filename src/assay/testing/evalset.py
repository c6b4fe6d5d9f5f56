"""A data set evaluated once per test session, one test per row.

::

    from assay.testing import EvalSet, assert_scores

    rag = EvalSet("rag.jsonl", metrics="f1_score,groundedness", thresholds={"groundedness": 4})

    @rag.each_row
    def test_rag(assay_row):            # one test per row, named by the row's id
        assert_scores(assay_row)        # fails with each failed metric's score and reason

The rows are read when the tests are collected (to name them); the data set is evaluated the
first time a test needs it, once per session: under pytest-xdist the first worker evaluates
it while the others wait for it, and all read its rows from one shared folder.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from assay.errors import AssayError
from assay.testing.cases import CaseResult
from assay.testing.session import RECORDER, SETTINGS

__all__ = ["EvalSet", "RowRef"]

ERROR_FILE = "error.txt"


@dataclass(frozen=True)
class RowRef:
    """The parameter of one row's test: its data set and position."""

    evalset: EvalSet
    index: int

    def __repr__(self) -> str:
        return f"RowRef({self.evalset.label}, {self.index})"


class EvalSet:
    """A data set, its metrics and options, as :func:`assay.evaluate` takes them.

    ``data``: a path (relative paths are taken from the folder of the file that declares the
    EvalSet, else from the working directory), a DataFrame or a list of row dicts. ``name``:
    the run's name in the store (default: the file's stem). ``judge``: as in
    :func:`~assay.testing.evaluate_case`. The other arguments are those of :func:`assay.evaluate`.
    """

    def __init__(self, data: Any, *, metrics: str | Sequence[str] = "auto",
                 thresholds: Mapping[str, float] | None = None, mapping: Mapping[str, str] | None = None,
                 target: Callable[..., Any] | None = None, judge: Any = None, family: str | None = None,
                 options: Mapping[str, Any] | None = None, on_bad_row: str = "fail",
                 concurrency: int | None = None, name: str | None = None):
        frame = inspect.currentframe()
        caller = frame.f_back.f_code.co_filename if frame is not None and frame.f_back is not None else "."
        self.data = _locate(data, Path(caller).parent)
        self.kwargs: dict[str, Any] = dict(metrics=metrics, thresholds=dict(thresholds or {}),
                                           mapping=dict(mapping or {}), target=target, family=family,
                                           options=dict(options or {}), on_bad_row=on_bad_row,
                                           concurrency=concurrency)
        self.judge = judge
        self.name = name if name is not None else (Path(self.data).stem if isinstance(self.data, (str, Path)) else None)
        self._ids: list[str] | None = None
        self._fingerprint: str | None = None
        self._results: dict[str, Any] = {}      # key -> (EvalResult, its rows) or the AssayError

    @property
    def label(self) -> str:
        return self.name or "EvalSet"

    # -- collection -----------------------------------------------------------------------------
    def row_ids(self) -> list[str]:
        """A test id per row, in the order the rows are evaluated: the row's ``id`` (the
        conversation and turn for a conversation's turns), else ``row<N>``."""
        if self._ids is None:
            from assay.formats import open_dataset

            ds = open_dataset(self.data, mapping=self.kwargs["mapping"] or None,
                              on_bad_row=self.kwargs["on_bad_row"])
            ids = []
            for i, r in enumerate(ds):
                if r.id:
                    ids.append(str(r.id))
                elif r.conversation_id is not None:
                    ids.append(f"{r.conversation_id}-turn{r.turn}")
                else:
                    ids.append(f"row{i + 1}")
            if not ids:
                raise AssayError(f"{self.label}: no valid rows to evaluate")
            self._ids = ids
        return self._ids

    def params(self) -> list[Any]:
        """``pytest.param`` per row, for ``@pytest.mark.parametrize("assay_row", ..., indirect=True)``."""
        import pytest

        __tracebackhide__ = True
        try:
            ids, failure = self.row_ids(), None
        except AssayError as exc:
            ids, failure = [], f"{self.label}: {exc}"
        if failure is not None:        # a collection error of one line, not a traceback
            pytest.fail(failure, pytrace=False)
        return [pytest.param(RowRef(self, i), id=rid) for i, rid in enumerate(ids)]

    def each_row(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorate a test taking ``assay_row`` (a :class:`CaseResult`): one test per row."""
        import pytest

        __tracebackhide__ = True
        return pytest.mark.parametrize("assay_row", self.params(), indirect=True)(fn)

    # -- evaluation -----------------------------------------------------------------------------
    def judge_spec(self) -> Any:
        return self.judge if self.judge is not None else SETTINGS.judge

    def key(self) -> str:
        """What identifies this evaluation across the processes of one session (the data's
        fingerprint is taken once)."""
        from assay.store.fingerprint import data_fingerprint

        if self._fingerprint is None:
            self._fingerprint = data_fingerprint(self.data) or repr(self.data)
        target = self.kwargs["target"]
        desc = {**self.kwargs, "target": getattr(target, "__qualname__", repr(target)) if target else None,
                "data": self._fingerprint, "name": self.name, "judge": repr(self.judge_spec()),
                "store": SETTINGS.store}
        return hashlib.sha256(orjson.dumps(desc, option=orjson.OPT_SORT_KEYS, default=repr)).hexdigest()[:20]

    def result(self, workdir: Path) -> Any:
        """The :class:`~assay.results.EvalResult`, evaluated on first use. ``workdir``: a folder
        every process of the session shares; the first to get there evaluates into it, the
        others wait on its lock and read the rows it wrote."""
        return self._evaluated(workdir)[0]

    def row(self, workdir: Path, index: int) -> CaseResult:
        """Row ``index`` of the evaluated data set."""
        result, rows = self._evaluated(workdir)
        if index >= len(rows):
            raise AssayError(f"{self.label}: row {index + 1} was not evaluated (the run has {len(rows)} rows)")
        return CaseResult.from_row(rows[index], result.metrics, index)

    def _evaluated(self, workdir: Path) -> tuple[Any, list[dict[str, Any]]]:
        key = self.key()
        if key not in self._results:
            try:
                result = self._evaluate_shared(Path(workdir) / f"assay-{key}")
                self._results[key] = (result, list(result.iter_rows()))
            except AssayError as exc:
                self._results[key] = exc
        got = self._results[key]
        if isinstance(got, AssayError):
            raise got
        return got

    def _evaluate_shared(self, folder: Path) -> Any:
        from assay.engine.evaluate import evaluate
        from assay.results import SUMMARY_FILE, EvalResult

        folder.mkdir(parents=True, exist_ok=True)
        out = folder / "out"
        with _locked(folder / "lock"):
            if (folder / ERROR_FILE).exists():
                raise AssayError((folder / ERROR_FILE).read_text(encoding="utf-8"))
            if (out / SUMMARY_FILE).exists():       # written last: another process evaluated it
                return EvalResult.load(out)
            try:
                result = evaluate(self.data, **self.kwargs, judge=self.judge_spec(), out=out,
                                  name=self.name, store=SETTINGS.store or False)
            except AssayError as exc:
                message = f"{self.label}: {exc}"
                (folder / ERROR_FILE).write_text(message, encoding="utf-8")
                raise AssayError(message) from None
            RECORDER.record_run(self.label, result)
            return result


def _locate(data: Any, here: Path) -> Any:
    """A relative path from the declaring file's folder when it is there, else as given."""
    if isinstance(data, (str, Path)) and str(data) not in ("-", "") and not Path(data).is_absolute():
        beside = here / data
        if beside.exists():
            return str(beside)
        return str(Path(data).resolve())
    return data


class _locked:
    """An exclusive lock on a file, across processes (pytest-xdist's workers)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> _locked:
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            import fcntl
        except ImportError:    # Windows
            import msvcrt

            while True:
                try:
                    msvcrt.locking(self.fd, msvcrt.LK_LOCK, 1)   # retries for 10 s, then raises
                    break
                except OSError:
                    continue
        else:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is None:
            return
        try:
            import fcntl
        except ImportError:
            import msvcrt

            os.lseek(self.fd, 0, os.SEEK_SET)
            msvcrt.locking(self.fd, msvcrt.LK_UNLCK, 1)
        else:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None
