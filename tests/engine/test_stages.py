"""The engine's stages (plan -> run -> evaluate), the versioned run summary and the registry of
run-level aggregations."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

import assay
from assay.engine.evaluate import evaluate, evaluate_async
from assay.engine.plan import PLAN_WINDOW, Plan, make_plan
from assay.errors import AssayError, InputError
from assay.metrics.aggregations import RUN_AGGREGATIONS, apply_run_aggregations, register_run_aggregation
from assay.results import EvalResult
from assay.results.summary import SCHEMA_VERSION, RunSummary
from assay.store import Store

ROWS = [
    {"id": "1", "query": "capital of France?", "response": "Paris is the capital.", "ground_truth": "Paris"},
    {"id": "2", "query": "2+2?", "response": "It is 4", "ground_truth": "4"},
    {"id": "3", "query": "no reference here", "response": "something"},
]
SUMMARY_KEYS = ["schema_version", "assay_version", "source", "format", "metrics", "thresholds", "target", "judge",
                "judge_source", "judge_note", "judge_calls", "judge_usage", "rows_read", "rows_evaluated",
                "rows_skipped", "rows_errored", "target_errors", "bad_rows", "started_at", "duration_s", "run_id",
                "name", "store", "resumed", "resumed_rows", "scorers", "plan", "repeats", "repeated"]


# -- plan -----------------------------------------------------------------------------------------

def test_make_plan_reads_the_head_and_checks_the_request():
    rows = ROWS * 400   # more than the planning window
    p = make_plan(rows, metrics="f1_score, exact_match", thresholds={"f1_score": "0.4"})
    assert isinstance(p, Plan)
    assert [m.name for m in p.metrics] == ["f1_score", "exact_match"]
    assert p.thresholds == {"f1_score": 0.4}
    assert {"query", "response", "ground_truth"} <= p.present
    assert len(p.head) == PLAN_WINDOW and p.target is None
    assert p.layout == [("f1_score", ("f1_score",)), ("exact_match", ("exact_match",))]
    assert len(list(p.records())) == len(rows)
    assert next(p.records(5)).id == rows[5]["id"]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(data=None), AssayError, "no data"),
    (dict(data=ROWS, on_bad_row="ignore"), AssayError, "on_bad_row"),
    (dict(data=ROWS, family="other"), AssayError, "family"),
    (dict(data=ROWS, metrics=" , "), AssayError, "no metric named"),
    (dict(data=ROWS, metrics="f1_score", thresholds={"bleu_score": 1}), AssayError, "not among the metrics"),
    (dict(data=ROWS, metrics="f1_score", thresholds={"f1_score": "high"}), AssayError, "must be a number"),
    (dict(data=[{"query": "q", "response": "r"}], metrics="f1_score"), InputError, "ground_truth"),
])
def test_make_plan_refuses_a_request_that_cannot_run(kwargs, error, match):
    data = kwargs.pop("data")
    with pytest.raises(error, match=match):
        make_plan(data, **kwargs)


def test_a_target_counts_as_a_response():
    p = make_plan([{"query": "q"}], target=lambda query: "an answer", metrics="auto")
    assert {"response", "usage"} <= p.present and p.target is not None


# -- evaluate's signature -------------------------------------------------------------------------

def test_evaluate_spells_out_the_parameters_of_evaluate_async():
    sync, coro = inspect.signature(evaluate), inspect.signature(evaluate_async)
    assert list(sync.parameters) == list(coro.parameters)
    for name, p in sync.parameters.items():
        assert p.kind != p.VAR_KEYWORD
        assert p.default == coro.parameters[name].default and p.kind == coro.parameters[name].kind
        if name != "data":
            assert name in (evaluate.__doc__ or "")
    with pytest.raises(TypeError):
        evaluate(ROWS, metric="f1_score")   # a misspelt keyword is an error, not ignored


# -- the run summary ------------------------------------------------------------------------------

def test_summary_json_and_the_store_hold_the_versioned_summary(tmp_path):
    st = Store(str(tmp_path / "s.db"))
    res = assay.evaluate(ROWS, metrics="f1_score", out=tmp_path / "out", store=st, name="v")
    assert isinstance(res.run, dict) and list(res.run) == SUMMARY_KEYS
    assert res.run["schema_version"] == SCHEMA_VERSION
    assert res.summary.rows_evaluated == 3 and res.summary.run_id == res.run["run_id"]
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["run"] == json.loads(json.dumps(res.run))
    stored = st.get_run("v")["summary"]
    assert stored["schema_version"] == SCHEMA_VERSION and stored["rows_evaluated"] == 3

    again = EvalResult.load(tmp_path / "out")
    assert again.run == written["run"] and again.metrics == written["metrics"]
    assert again.rows == res.rows


def test_summaries_written_before_the_schema_version_still_open(tmp_path):
    st = Store(str(tmp_path / "s.db"))
    res = assay.evaluate(ROWS, metrics="f1_score", out=tmp_path / "out", store=st, name="old")
    old = {k: v for k, v in res.run.items() if k != "schema_version"}   # as the previous version wrote it

    path = tmp_path / "out" / "summary.json"
    path.write_text(json.dumps({"metrics": res.metrics, "run": old}))
    loaded = EvalResult.load(tmp_path / "out")
    assert loaded.run["schema_version"] == SCHEMA_VERSION
    assert {k: v for k, v in loaded.run.items() if k != "schema_version"} == json.loads(json.dumps(old))

    st.finish_run(res.run["run_id"], "completed", aggregates=res.metrics, summary=old)
    from_store = st.load_result("old")
    assert from_store.run["rows_evaluated"] == 3 and from_store.summary.schema_version == SCHEMA_VERSION
    assert from_store.metrics == json.loads(json.dumps(res.metrics))
    assert len(from_store.rows) == 3


def test_a_summary_from_a_newer_version_is_refused():
    with pytest.raises(AssayError, match="newer"):
        RunSummary.load({"schema_version": SCHEMA_VERSION + 1})


def test_extra_figures_are_kept_in_the_summary():
    s = RunSummary.load({"rows_read": 2, "jailbreak": {"defect_threshold": 4.0}})
    assert s.as_dict()["jailbreak"] == {"defect_threshold": 4.0} and s.rows_read == 2


# -- run-level aggregations -----------------------------------------------------------------------

def test_a_registered_run_aggregation_adds_its_figures(tmp_path):
    seen = {}

    def count_long(run, aggregates, rows, options):
        seen["options"] = options
        run["long_responses"] = sum(len(r["inputs.response"]) > 8 for r in rows())

    register_run_aggregation("test_long_responses", count_long)
    try:
        res = assay.evaluate(ROWS, metrics="f1_score", out=tmp_path / "out", store=False, options={"k": 1})
    finally:
        del RUN_AGGREGATIONS["test_long_responses"]
    assert res.run["long_responses"] == 2 and seen["options"] == {"k": 1}
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["run"]["long_responses"] == 2


def test_the_jailbreak_figures_are_registered():
    run = {"metrics": ["f1_score"]}
    apply_run_aggregations(run, {}, lambda: iter(()))
    assert "jailbreak" in RUN_AGGREGATIONS and "jailbreak" not in run


def test_the_engine_imports_no_simulator():
    code = ("import sys, assay.engine.evaluate, assay.engine.run, assay.engine.plan; "
            "assay.evaluate([{'response': 'a', 'ground_truth': 'a'}], metrics='exact_match', store=False); "
            "bad = [m for m in sys.modules if m.startswith('assay.simulate')]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_large_runs_score_in_worker_processes_by_default():
    import multiprocessing as mp

    from assay.engine.run import worker_count
    from assay.metrics.base import resolve

    sync = resolve(["f1_score"])
    assert worker_count(None, sync, PLAN_WINDOW - 1) == 1
    assert worker_count(None, [], PLAN_WINDOW) == 1
    assert worker_count(1, sync, PLAN_WINDOW) == 1
    if "fork" in mp.get_all_start_methods():
        import os
        assert worker_count(None, sync, PLAN_WINDOW) == max(1, min(os.cpu_count() or 1, 8))
    with pytest.raises(AssayError, match="at least 1"):
        worker_count(0, sync, 10)
