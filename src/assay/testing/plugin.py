"""assay's pytest plugin: on whenever assay is installed (the ``pytest11`` entry point ``assay``).

Options (each also an ini value in ``pytest.ini`` / ``[tool.pytest.ini_options]``):

* ``--assay-judge SPEC`` (``assay_judge``): the judge for every case and data set that names
  none; without it ``$ASSAY_JUDGE``, else the embedded default.
* ``--assay-store PATH|URL`` (``assay_store``): save the results there: each data set as a run
  of its own, and the session's single cases (:func:`~assay.testing.evaluate_case`) as one
  run named ``--assay-name`` (default ``pytest``). Without it, ``$ASSAY_STORE`` when set;
  otherwise nothing is saved.

Fixtures: ``assay_eval`` (session): ``assay_eval(evalset)`` is the data set's
:class:`~assay.results.EvalResult`, evaluated once per session (across pytest-xdist workers
too); ``assay_row``: one row of an :class:`~assay.testing.EvalSet` as a
:class:`~assay.testing.CaseResult`, for tests decorated with ``@evalset.each_row``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assay.errors import AssayError
from assay.testing.evalset import EvalSet, RowRef
from assay.testing.session import RECORDER, SETTINGS, save_cases

_OFF = {"off", "0", "false", "no", "none", "disabled"}
_SAVED: dict[str, Any] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "assay evaluations")
    group.addoption("--assay-judge", default=None, metavar="SPEC",
                    help="Judge model for assay evaluations (default: $ASSAY_JUDGE, else the embedded default).")
    group.addoption("--assay-store", default=None, metavar="PATH|URL",
                    help="Save assay results to this store (default: $ASSAY_STORE when set; else not saved).")
    group.addoption("--assay-name", default=None, metavar="NAME",
                    help="Name of the run that keeps the session's evaluate_case cases (default: pytest).")
    parser.addini("assay_judge", "Judge model for assay evaluations (as --assay-judge).")
    parser.addini("assay_store", "Store for assay results (as --assay-store).")
    parser.addini("assay_name", "Name of the run of the session's single cases (as --assay-name).")


def _setting(config: pytest.Config, name: str) -> str | None:
    v = config.getoption(name) or config.getini(name)
    return v.strip() if isinstance(v, str) and v.strip() else None


def pytest_configure(config: pytest.Config) -> None:
    SETTINGS.judge = _setting(config, "assay_judge")
    store = _setting(config, "assay_store")
    if store is None and os.environ.get("ASSAY_STORE", "").strip():
        from assay.store.store import default_store_url

        store = default_store_url()
    elif store is not None and store.lower() in _OFF:
        store = None
    if store is not None and "://" not in store:
        store = str(Path(store).expanduser().resolve())     # the same file from every worker
    SETTINGS.store = store
    SETTINGS.name = _setting(config, "assay_name") or "pytest"
    RECORDER.active = True
    RECORDER.cases = []
    RECORDER.runs = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
    RECORDER.current_test = item.nodeid     # a case's default id
    yield
    RECORDER.current_test = None


@pytest.fixture(scope="session")
def assay_workdir(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A folder every process of the session shares (the data sets' results are kept there)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(request.config, "workerinput") else base


@pytest.fixture(scope="session")
def assay_eval(assay_workdir: Path) -> Callable[[EvalSet], Any]:
    """``assay_eval(evalset)``: the data set's EvalResult, evaluated once per session."""

    def run(evalset: EvalSet) -> Any:
        __tracebackhide__ = True
        try:
            return evalset.result(assay_workdir)
        except AssayError as exc:
            pytest.fail(str(exc), pytrace=False)

    return run


@pytest.fixture
def assay_row(request: pytest.FixtureRequest, assay_workdir: Path) -> Any:
    """One row of an EvalSet, scored (a CaseResult); the test must be decorated with ``@evalset.each_row``."""
    ref = getattr(request, "param", None)
    if not isinstance(ref, RowRef):
        pytest.fail("the assay_row fixture is one row of an EvalSet: decorate the test with @EVALSET.each_row",
                    pytrace=False)
    try:
        return ref.evalset.row(assay_workdir, ref.index)
    except AssayError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist, on the controller: a worker finished; keep the cases it evaluated."""
    got = getattr(node, "workeroutput", None) or {}
    RECORDER.cases.extend(got.get("assay_cases") or [])
    RECORDER.runs.extend(got.get("assay_runs") or [])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):          # an xdist worker: the controller saves
        config.workeroutput["assay_cases"] = RECORDER.cases
        config.workeroutput["assay_runs"] = RECORDER.runs
        return
    _SAVED.clear()
    if RECORDER.cases and SETTINGS.store:
        try:
            _SAVED["run"] = save_cases(RECORDER.cases, SETTINGS.store, SETTINGS.name)
        except AssayError as exc:
            _SAVED["error"] = str(exc)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return
    lines = [f"{r['label']}: {r['rows']} rows evaluated; run {r['run_id']} saved in {r['store']}"
             for r in RECORDER.runs if r.get("run_id")]
    if "run" in _SAVED:
        run_id, where = _SAVED["run"]
        lines.append(f"{len(RECORDER.cases)} case(s) saved as run {run_id} ({SETTINGS.name}) in {where}")
    if lines:
        terminalreporter.section("assay")
        for line in lines:
            terminalreporter.write_line(line)
    if "error" in _SAVED:
        terminalreporter.write_line(f"assay: the session's cases were not saved: {_SAVED['error']}", red=True)
