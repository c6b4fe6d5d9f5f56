"""``evaluate_case`` and ``assert_scores`` in-process: what passes, what fails and what the
message says (errors, skips, a case that checks nothing, a metric not evaluated)."""

from __future__ import annotations

import pytest

import assay
from assay.errors import AssayError
from assay.scores import Score
from assay.testing import CaseResult, assert_scores, evaluate_case
from assay.testing.session import RECORDER


@pytest.fixture(autouse=True)
def _not_recorded(monkeypatch):
    """These cases belong to no session run (the plugin may be on in this pytest)."""
    monkeypatch.setattr(RECORDER, "active", False)


@assay.metric(name="plugin_test_breaks")
def plugin_test_breaks(response):
    raise RuntimeError("the scorer fell over")


@assay.metric(name="plugin_test_length")
def plugin_test_length(response):
    return float(len(response))


@assay.metric(name="plugin_test_lower", higher_is_better=False, threshold=0.2)
def plugin_test_lower(response):
    return Score(value=0.9, reason="too many hedges")


def test_a_passing_case_gives_its_scores():
    case = evaluate_case(query="Capital of France?", response="Paris", ground_truth="Paris",
                         metrics="f1_score", thresholds={"f1_score": 0.5})
    assert isinstance(case, CaseResult)
    assert case["f1_score"].score == 1.0 and case["f1_score"].passed is True
    assert case.passed
    assert assert_scores(case) is case


def test_a_failing_case_names_metric_score_threshold_direction_and_reason():
    case = evaluate_case({"id": "q7", "query": "Capital of France?"}, response="Lyon", ground_truth="Paris",
                         metrics="f1_score,plugin_test_lower", thresholds={"f1_score": 0.5})
    with pytest.raises(AssertionError) as e:
        assert_scores(case)
    msg = str(e.value)
    assert msg.startswith("case 'q7' failed 2 check(s):")
    assert "f1_score: 0 below threshold 0.5" in msg
    assert "plugin_test_lower: 0.9 above threshold 0.2" in msg and "reason: too many hedges" in msg
    assert "query: 'Capital of France?'" in msg and "response: 'Lyon'" in msg
    # only the metrics asked for are checked
    with pytest.raises(AssertionError, match="plugin_test_lower"):
        assert_scores(case, "plugin_test_lower")
    with pytest.raises(AssertionError, match="bleu: not evaluated"):
        assert_scores(case, ["bleu"])


def test_an_error_fails_unless_allowed_and_a_case_that_checks_nothing_fails():
    case = evaluate_case(response="x", ground_truth="x", metrics="f1_score,plugin_test_breaks",
                         thresholds={"f1_score": 0.5})
    with pytest.raises(AssertionError, match="plugin_test_breaks: error\n.*the scorer fell over"):
        assert_scores(case)
    assert_scores(case, allow_errors=True)      # f1_score passed; the error is let through
    only_error = evaluate_case(response="x", metrics="plugin_test_breaks")
    with pytest.raises(AssertionError, match="nothing was checked"):
        assert_scores(only_error, allow_errors=True)
    no_threshold = evaluate_case(response="x", metrics="plugin_test_length")
    assert no_threshold["plugin_test_length"].score == 1.0 and no_threshold["plugin_test_length"].passed is None
    with pytest.raises(AssertionError, match="no metric gave a pass/fail verdict"):
        assert_scores(no_threshold)


def test_bad_calls_are_clear():
    with pytest.raises(AssayError, match="needs the case's fields"):
        evaluate_case(metrics="f1_score")
    with pytest.raises(AssayError, match="ground_truth"):
        evaluate_case(response="x", metrics="f1_score")
    with pytest.raises(TypeError, match="CaseResult"):
        assert_scores({"f1_score": 1.0})
