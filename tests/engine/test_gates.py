"""Quality gates (engine/gates.py): parsing, threshold verdicts and intervals, errored rows,
baselines and the paired regression gate, in-process."""

from __future__ import annotations

import numpy as np
import pytest

import assay
from assay.engine import gates as G
from assay.errors import AssayError
from assay.store import open_store

COUNTRIES = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Italy", "Rome"),
             ("Egypt", "Cairo"), ("Chile", "Santiago"), ("Norway", "Oslo"), ("Spain", "Madrid"),
             ("Cuba", "Havana"), ("Ghana", "Accra"), ("Nepal", "Kathmandu"), ("Poland", "Warsaw"),
             ("Greece", "Athens"), ("Austria", "Vienna"), ("Sweden", "Stockholm"), ("Ireland", "Dublin"),
             ("Portugal", "Lisbon"), ("Hungary", "Budapest"), ("Finland", "Helsinki")]


def qa_rows(n: int = 40, worse: int = 0) -> list[dict]:
    """``n`` question-answer rows; the first ``worse`` answers replaced by a hedge (a real drop in F1)."""
    rows = []
    for i in range(n):
        country, capital = COUNTRIES[i % len(COUNTRIES)]
        answer = f"The capital of {country} is {capital}." if i % 3 else f"{capital} is the capital city of {country}."
        rows.append({"id": f"q{i}", "query": f"What is the capital of {country}? ({i})",
                     "response": "I am not sure, sorry." if i < worse else answer,
                     "ground_truth": f"{capital} is the capital of {country}."})
    return rows


# -- parsing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expect", [
    ("groundedness.mean>=4", ("threshold", "groundedness", "mean", ">=", 4.0)),
    (" rougeL_f1_score.p95 < 0.3 ", ("threshold", "rougeL_f1_score", "p95", "<", 0.3)),
    ("f1_score.errors<=0", ("threshold", "f1_score", "errored", "<=", 0.0)),
    ("hate_unfairness.defect_rate<=0.01", ("threshold", "hate_unfairness", "defect_rate", "<=", 0.01)),
    ("my.dotted.metric.pass_rate>0.5", ("threshold", "my.dotted.metric", "pass_rate", ">", 0.5)),
    ("no-regression", ("regression", None, None, None, None)),
    ("no-regression:f1_score", ("regression", "f1_score", None, None, None)),
])
def test_gates_parse(text, expect):
    g = G.parse_gate(text)
    assert (g.kind, g.name, g.stat, g.op, g.bound) == expect


@pytest.mark.parametrize("text,says", [
    ("f1_score.mean=>4", "is not a gate"),
    ("f1_score.mean==4", "is not a gate"),
    ("f1_score>=0.5", "is not a gate"),
    ("f1_score.avg>=0.5", "unknown statistic 'avg'"),
    ("f1_score.p100>=0.5", "unknown statistic"),
    ("f1_score.mean>=high", "is not a number"),
    ("f1_score.mean>=nan", "finite"),
    ("f1_score.mean>=inf", "finite"),
    ("f1_score.mean>=-1e309", "finite"),
    ("", "empty gate"),
    ("no-regression:", "name a metric"),
])
def test_bad_gates_are_one_clear_error(text, says):
    with pytest.raises(AssayError) as e:
        G.parse_gate(text)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_names_are_checked_before_a_run():
    G.check_names(G.parse_gates(["f1_score.mean>=0.5", "rougeL_f1_score.p90>0.1", "rouge.mean>0"]))
    with pytest.raises(AssayError, match="unknown metric 'f1_scor'.*did you mean 'f1_score'"):
        G.check_names(G.parse_gates(["f1_scor.mean>=0.5"]))
    with pytest.raises(AssayError, match="f1_score has no defect rate"):
        G.check_names(G.parse_gates(["f1_score.defect_rate<=0.1"]))
    G.check_names(G.parse_gates(["violence.defect_rate<=0.1"]))
    with pytest.raises(AssayError, match="--min-effect groundednes=0.2: unknown metric"):
        G.check_names([], G.parse_min_effect(["groundednes=0.2"]))


def test_min_effect_and_max_error_rate_are_checked():
    assert G.parse_min_effect(["0.05", "groundedness=0.3"]) == {None: 0.05, "groundedness": 0.3}
    for bad in ("-0.1", "nan", "inf", "x=abc"):
        with pytest.raises(AssayError, match="--min-effect"):
            G.parse_min_effect([bad])
    for bad in (-0.1, 1.5, float("nan"), float("inf")):
        with pytest.raises(AssayError, match="--max-error-rate"):
            G.check_max_error_rate(bad)


# -- threshold gates ------------------------------------------------------------------------------
def test_threshold_gates_compare_the_figure_and_report_its_interval(tmp_path):
    res = assay.evaluate(qa_rows(40, worse=10), metrics="f1_score,rougeL", store=str(tmp_path / "s.db"))
    st = open_store(str(tmp_path / "s.db"))
    agg = res.metrics["f1_score"]
    mean = agg["mean"]
    texts = [f"f1_score.mean>={mean}", f"f1_score.mean>{mean}", f"f1_score.mean<={mean + 0.01}",
             "f1_score.pass_rate>=0.75", "f1_score.pass_rate>0.75", "f1_score.median>=0.5", "f1_score.p90<=1",
             "rougeL_f1_score.evaluated>=40", "f1_score.errored<1",
             "f1_score.error_rate<=0"]
    got = G.check_gates(G.parse_gates(texts), res, store=st)
    verdicts = [r.passed for r in got]
    assert verdicts == [True, False, True, True, False, True, True, True, True, True]
    by = {r.gate: r for r in got}
    m = by[f"f1_score.mean>={mean}"]
    assert (m.figure, m.ci95_low, m.ci95_high) == (mean, agg["ci95_low"], agg["ci95_high"])
    assert by[f"f1_score.mean>{mean}"].reason.startswith("f1_score mean is")
    pr = by["f1_score.pass_rate>=0.75"]
    assert pr.figure == pytest.approx(30 / 40) and pr.ci95_low < pr.figure < pr.ci95_high
    med = by["f1_score.median>=0.5"]
    v = np.array([r["outputs.f1_score.f1_score_score"] for r in res.rows])
    assert med.figure == pytest.approx(np.median(v)) and med.ci95_low <= med.figure <= med.ci95_high
    assert by["f1_score.errored<1"].ci95_low is None   # counts have no interval
    # the same figures without a store (read from the rows)
    again = G.check_gates(G.parse_gates(texts), res, store=None)
    assert [(r.figure, r.ci95_low, r.ci95_high) for r in again] == [(r.figure, r.ci95_low, r.ci95_high) for r in got]


def test_a_metric_with_several_outputs_must_name_one():
    res = assay.evaluate(qa_rows(6), metrics="rougeL", store=False)
    with pytest.raises(AssayError, match="rougeL has several outputs"):
        G.check_gates(G.parse_gates(["rougeL.mean>=0.1"]), res)
    with pytest.raises(AssayError, match="this run has no metric output 'bleu'"):
        G.check_gates(G.parse_gates(["bleu.mean>=0.1"]), res)
    assert G.check_gates(G.parse_gates(["rougeL_recall.mean>=0.1"]), res)[0].passed


def flaky(query: str) -> str:
    """A target that fails on every fourth row."""
    n = int(query.rsplit("(", 1)[1].rstrip(")"))
    if n % 4 == 0:
        raise RuntimeError("upstream timed out")
    return "Paris is the capital of France."


def test_errored_rows_are_never_passes_or_fails_and_too_many_fail_the_gate():
    rows = [{"id": r["id"], "query": r["query"], "ground_truth": "Paris is the capital of France."}
            for r in qa_rows(20)]
    res = assay.evaluate(rows, target=flaky, metrics="f1_score", store=False)
    agg = res.metrics["f1_score"]
    assert (agg["evaluated"], agg["errored"], agg["passed"], agg["failed"]) == (15, 5, 15, 0)
    gates = G.parse_gates(["f1_score.pass_rate>=0.9", "f1_score.errored<=5", "f1_score.error_rate<=0.3"])
    got = G.check_gates(gates, res)
    assert got[0].figure == 1.0 and not got[0].passed      # the errors did not count as fails ...
    assert "too many errored rows: 5 of 20 (25%)" in got[0].reason   # ... but there are too many of them
    assert got[1].passed and got[1].figure == 5             # count and share gates on errors themselves
    assert got[2].passed and got[2].figure == pytest.approx(0.25)
    relaxed = G.check_gates(gates, res, max_error_rate=0.25)
    assert relaxed[0].passed and relaxed[0].reason == ""


def _down(query: str) -> str:
    raise ConnectionError("connection refused")


def test_a_gate_on_an_output_no_row_scored_fails_with_the_reason():
    rows = [{"id": str(i), "query": "q", "ground_truth": "Paris"} for i in range(5)]
    res = assay.evaluate(rows, target=_down, metrics="f1_score", store=False)
    gates = G.parse_gates(["f1_score.mean>=0", "f1_score.pass_rate>=0", "f1_score.errored<=5"])
    got = G.check_gates(gates, res, max_error_rate=1.0)
    assert [g.passed for g in got] == [False, False, True]
    assert "no row has a score" in got[0].reason and "5 errored" in got[0].reason
    assert "too many errored rows" in G.check_gates(gates, res)[0].reason


# -- baselines and regression gates ------------------------------------------------------------
def test_the_baseline_is_the_latest_completed_run_of_that_name(tmp_path):
    url = str(tmp_path / "s.db")
    first = assay.evaluate(qa_rows(6), metrics="f1_score", store=url, name="nightly").run["run_id"]
    second = assay.evaluate(qa_rows(6), metrics="f1_score", store=url, name="nightly").run["run_id"]
    st = open_store(url)
    broken = st.start_run(name="nightly", source="x", fingerprint=None, config={}, config_hash="h",
                          metrics=["f1_score"], judge=None)
    st.finish_run(broken, "interrupted", error="stopped")
    assert G.resolve_baseline(st, "nightly")["id"] == second     # not the later, interrupted one
    assert G.resolve_baseline(st, first)["id"] == first
    with pytest.raises(AssayError, match="is interrupted, not completed"):
        G.resolve_baseline(st, broken)
    with pytest.raises(AssayError, match="no run 'nope'"):
        G.resolve_baseline(st, "nope")


def _regress(tmp_path, base_rows, new_rows, gates=("no-regression",), **kw):
    url = str(tmp_path / "s.db")
    assay.evaluate(base_rows, metrics="f1_score,rougeL", store=url, name="base")
    st = open_store(url)
    baseline = G.resolve_baseline(st, "base")
    res = assay.evaluate(new_rows, metrics="f1_score,rougeL", store=url, name="new")
    return G.check_gates(G.parse_gates(list(gates)), res, store=st, baseline=baseline, **kw)


def test_a_rerun_of_the_same_data_passes_the_regression_gate(tmp_path):
    got = _regress(tmp_path, qa_rows(40), qa_rows(40))
    assert {g.output for g in got} == {"f1_score", "rougeL_precision", "rougeL_recall", "rougeL_f1_score"}
    assert all(g.passed and g.figure == 0 and g.details["matched"] == 40 for g in got)


def test_a_planted_drop_fails_and_noise_does_not(tmp_path):
    got = _regress(tmp_path, qa_rows(40), qa_rows(40, worse=12), gates=["no-regression:f1_score"])
    (g,) = got
    assert not g.passed and g.verdict == "fail" and g.figure < 0 and g.ci95_high < 0
    assert "f1_score got lower" in g.reason and g.details["paired"] is True
    # one worse row of 40 is not a significant drop
    (g1,) = _regress(tmp_path / "one", qa_rows(40), qa_rows(40, worse=1), gates=["no-regression:f1_score"])
    assert g1.passed and g1.figure < 0 and g1.ci95_high >= 0


def test_min_effect_tolerates_a_small_significant_drop(tmp_path):
    (tmp_path / "a").mkdir()
    (g,) = _regress(tmp_path / "a", qa_rows(40), qa_rows(40, worse=12), gates=["no-regression:f1_score"],
                    min_effect={None: 0.9})
    assert g.passed and g.verdict == "tolerated" and "smaller than the minimum effect 0.9" in g.reason
    (tmp_path / "b").mkdir()
    (g,) = _regress(tmp_path / "b", qa_rows(40), qa_rows(40, worse=12), gates=["no-regression:f1_score"],
                    min_effect={"f1_score": 0.01, None: 0.9})   # the metric's own effect wins
    assert not g.passed


@assay.metric(name="gate_test_length", higher_is_better=False)
def _length(response: str) -> float:
    """Lower is better: the length of the answer in words."""
    return float(len(response.split()))


def test_the_metric_direction_decides_which_side_is_worse(tmp_path):
    url = str(tmp_path / "s.db")
    short = [dict(r, response="Paris.") for r in qa_rows(30)]
    long_ = [dict(r, response="Well, let me think about it for a while: it is Paris.") for r in qa_rows(30)]
    assay.evaluate(short, metrics="gate_test_length", store=url, name="short")
    st = open_store(url)
    longer = assay.evaluate(long_, metrics="gate_test_length", store=url, name="long")
    (g,) = G.check_gates([G.parse_gate("no-regression")], longer, store=st, baseline=G.resolve_baseline(st, "short"))
    assert not g.passed and g.figure > 0 and "got higher" in g.reason   # longer answers are worse here
    shorter = assay.evaluate(short, metrics="gate_test_length", store=url, name="short-again")
    (g,) = G.check_gates([G.parse_gate("no-regression")], shorter, store=st, baseline=G.resolve_baseline(st, "long"))
    assert g.passed and g.figure < 0 and "significantly better" in g.reason


def test_regression_gates_need_a_baseline_with_the_metric(tmp_path):
    url = str(tmp_path / "s.db")
    assay.evaluate(qa_rows(6), metrics="f1_score", store=url, name="base")
    st = open_store(url)
    res = assay.evaluate(qa_rows(6), metrics="f1_score,rougeL", store=url, name="new")
    with pytest.raises(AssayError, match="needs a baseline"):
        G.check_gates([G.parse_gate("no-regression")], res)
    with pytest.raises(AssayError, match="the baseline run .* has no rougeL_precision"):
        G.check_gates([G.parse_gate("no-regression:rougeL")], res, store=st,
                      baseline=G.resolve_baseline(st, "base"))
    got = G.check_gates([G.parse_gate("no-regression")], res, store=st, baseline=G.resolve_baseline(st, "base"))
    assert [g.output for g in got] == ["f1_score"]       # only what both runs have
