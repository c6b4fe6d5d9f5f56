"""Repeats (issue 32): a judged metric asked N times per row against a scripted loopback judge.

A planted flaky judge is reported flaky row by row; a gate on the pass rate's lower end fails
where the gate on the pass rate passes; a stable judge gives stable verdicts; a rerun answers
every repeat from the call cache; the repeats round-trip through the store, and resume."""

from __future__ import annotations

from typing import Any

import pytest

from assay.engine.evaluate import evaluate
from assay.engine.gates import check_gates, parse_gates
from assay.errors import AssayError
from assay.store import open_store
from tests.helpers.flaky_judge import FlakyJudge, rag_rows

REPEATS = 5


@pytest.fixture
def cache(tmp_path: Any, monkeypatch: Any) -> Any:
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache.sqlite"))
    return tmp_path / "cache.sqlite"


def _run(fake: Any, rows: list[dict[str, Any]], store: Any, **kw: Any) -> Any:
    return evaluate(rows, metrics="groundedness", judge=f"{fake.base_url}#fake-judge", store=store,
                    **{"repeats": REPEATS, **kw})


def _by_id(result: Any) -> dict[str, dict[str, Any]]:
    return {r["inputs.id"]: r for r in result.iter_rows()}


def test_planted_flaky_judge_is_reported_flaky_and_the_low_gate_fails(fake: Any, cache: Any, tmp_path: Any) -> None:
    judge = FlakyJudge()
    fake.default = judge
    store = str(tmp_path / "runs.db")
    res = _run(fake, rag_rows(9, 3), store)
    rows = _by_id(res)
    flaky = {i for i, r in rows.items() if r["outputs.groundedness.groundedness_properties"]["verdict"] == "flaky"}
    # exactly the rows the judge answered both ways (each flaky row was: checked by the helper's seeds)
    assert judge.mixed() == 3 and flaky == {"f0", "f1", "f2"}
    for i in ("g0", "g5"):
        props = rows[i]["outputs.groundedness.groundedness_properties"]
        assert props["verdict"] == "stable_pass" and props["pass_share"] == 1.0 and props["score_stdev"] == 0.0
        assert [e["score"] for e in props["repeats"]] == [5.0] * REPEATS
    f = rows["f0"]["outputs.groundedness.groundedness_properties"]
    given = sorted(e["score"] for e in f["repeats"])
    assert given[0] == 2.0 and given[-1] == 4.0 and f["score_min"] == 2.0 and f["score_max"] == 4.0
    assert f["pass_share"] == pytest.approx(sum(s >= 3 for s in given) / REPEATS)
    # every row asked five times, nothing more
    assert len(fake.chat_requests) == 12 * REPEATS
    agg = res.metrics["groundedness"]
    assert agg["repeats"] == REPEATS and agg["rows_flaky"] == 3 and agg["rows_stable_pass"] == 9
    assert agg["flaky_share"] == pytest.approx(3 / 12)
    assert agg["passed"] + agg["failed"] == 12 * REPEATS       # the pass rate counts every repeat
    assert agg["pass_rate_ci95_low"] < agg["pass_rate"] < agg["pass_rate_ci95_high"]
    gates = check_gates(parse_gates(["groundedness.pass_rate>=0.8", "groundedness.pass_rate_low>=0.8",
                                     "groundedness.mean>=3", "groundedness.mean_low>=4.5"]), res,
                        store=open_store(store))
    verdicts = [g.verdict for g in gates]
    assert verdicts == ["pass", "fail", "pass", "fail"], [g.reason for g in gates]
    assert gates[1].figure == pytest.approx(agg["pass_rate_ci95_low"])
    # the run's summary says it was repeated, and which metrics were
    assert res.run["repeats"] == REPEATS and res.run["repeated"] == ["groundedness"]


def test_a_stable_judge_gives_stable_verdicts_and_a_rerun_costs_nothing(fake: Any, cache: Any, tmp_path: Any) -> None:
    fake.default = FlakyJudge()
    store = str(tmp_path / "runs.db")
    first = _run(fake, rag_rows(4, 0, 2), store)
    verdicts = {i: r["outputs.groundedness.groundedness_properties"]["verdict"] for i, r in _by_id(first).items()}
    assert verdicts == {"g0": "stable_pass", "g1": "stable_pass", "g2": "stable_pass", "g3": "stable_pass",
                        "b0": "stable_fail", "b1": "stable_fail"}
    assert first.metrics["groundedness"]["rows_flaky"] == 0 and first.metrics["groundedness"]["flaky_share"] == 0
    asked = len(fake.chat_requests)
    assert asked == 6 * REPEATS
    again = _run(fake, rag_rows(4, 0, 2), store)
    assert len(fake.chat_requests) == asked            # every repeat from the cache
    calls = again.run["judge_calls"]
    assert calls["calls"] == 6 * REPEATS and calls["cache_hits"] == 6 * REPEATS
    assert [r["outputs.groundedness.groundedness_score"] for r in again.iter_rows()] == \
        [r["outputs.groundedness.groundedness_score"] for r in first.iter_rows()]


def test_repeat_zero_keeps_the_key_of_a_run_without_repeats(fake: Any, cache: Any, tmp_path: Any) -> None:
    fake.default = FlakyJudge()
    store = str(tmp_path / "runs.db")
    evaluate(rag_rows(3), metrics="groundedness", judge=f"{fake.base_url}#fake-judge", store=store)
    assert len(fake.chat_requests) == 3
    _run(fake, rag_rows(3), store, repeats=3)
    assert len(fake.chat_requests) == 3 + 3 * 2      # repeat 0 came from the cache of the plain run


def test_repeats_round_trip_through_the_store(fake: Any, cache: Any, tmp_path: Any) -> None:
    fake.default = FlakyJudge()
    store = str(tmp_path / "runs.db")
    res = _run(fake, rag_rows(2, 2), store, name="rep")
    st = open_store(store)
    stored = {r.row_id: r.scores["groundedness"]["groundedness"] for r in st.iter_scored(res.run["run_id"])}
    mine = _by_id(res)
    assert set(stored) == set(mine)
    for i, s in stored.items():
        props = mine[i]["outputs.groundedness.groundedness_properties"]
        assert s.properties["verdict"] == props["verdict"] and s.properties["repeats"] == props["repeats"]
        assert s.score == pytest.approx(mine[i]["outputs.groundedness.groundedness_score"])
    assert st.get_run(res.run["run_id"])["aggregates"]["groundedness"]["repeats"] == REPEATS


def test_an_interrupted_repeated_run_resumes_to_the_uninterrupted_result(fake: Any, cache: Any, tmp_path: Any,
                                                                         monkeypatch: Any) -> None:
    from assay.engine import run as engine_run

    monkeypatch.setattr(engine_run, "CHUNK", 4)
    fake.default = FlakyJudge()
    rows = rag_rows(6, 4, 2)
    full = _run(fake, rows, str(tmp_path / "full.db"))
    store = str(tmp_path / "cut.db")

    def stop(_: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(fake, rows, store, name="cut", progress=stop)
    st = open_store(store)
    assert st.get_run("cut")["rows_done"] == 4
    with pytest.raises(AssayError, match="different configuration"):
        _run(fake, rows, store, name="cut", resume="cut", repeats=3)
    resumed = _run(fake, rows, store, name="cut", resume=True)
    assert resumed.run["resumed_rows"] == 4 and st.get_run("cut")["status"] == "completed"
    agg, want = resumed.metrics["groundedness"], full.metrics["groundedness"]
    for key in ("repeats", "rows_flaky", "rows_stable_pass", "rows_stable_fail", "passed", "failed", "mean",
                "pass_rate_ci95_low", "pass_rate_ci95_high"):
        assert agg[key] == want[key], key
    assert len(fake.chat_requests) == 12 * REPEATS        # the two runs' repeats, each asked once


def test_repeats_without_a_judge_model_is_an_error(cache: Any, tmp_path: Any) -> None:
    with pytest.raises(AssayError, match="no metric of this run is scored by a judge model"):
        evaluate([{"response": "a", "ground_truth": "a"}], metrics="exact_match", repeats=3, store=False)
    with pytest.raises(AssayError, match="repeats must be a whole number of at least 1"):
        evaluate([{"response": "a", "ground_truth": "a"}], metrics="exact_match", repeats=0, store=False)


def test_interval_end_gates_on_a_run_without_repeats(cache: Any) -> None:
    rows = [{"response": "a", "ground_truth": "a" if i % 4 else "b"} for i in range(20)]   # 15 of 20 match
    res = evaluate(rows, metrics="exact_match", store=False)
    agg = res.metrics["exact_match"]
    assert "repeats" not in agg and agg["pass_rate"] == 0.75
    low, high, mean_low = check_gates(parse_gates(["exact_match.pass_rate_low>=0.75", "exact_match.pass_rate_high>=0.75",
                                                   "exact_match.mean_low>0.5"]), res)
    assert low.verdict == "fail" and low.figure < 0.75 and low.figure == low.ci95_low
    assert high.verdict == "pass" and high.figure == high.ci95_high > 0.75
    assert mean_low.figure == agg["ci95_low"] and mean_low.verdict == "pass"
    with pytest.raises(AssayError, match="unknown statistic"):
        parse_gates(["exact_match.pass_rate_lo>=0.5"])
