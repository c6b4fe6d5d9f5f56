"""The metric contract: scores, pass/fail, skipping, errors, registry and planning."""

import pytest

from assay.metrics.base import REGISTRY, Score, UnknownMetricError, get_metric, metric, plan_auto, resolve
from assay.records import Record


def test_pass_fail_compares_floats_not_ints():
    # Azure's int(score) >= threshold bug: 2.9 would pass a threshold of 2 there... and 0.49 >= 0 too.
    assert Score(value=2.9).judged(3, True).passed is False
    assert Score(value=3.0).judged(3, True).result == "pass"
    assert Score(value=0.49).judged(0.5, True).result == "fail"
    # harms: lower is better
    assert Score(value=3.5).judged(3, False).passed is False
    assert Score(value=3.0).judged(3, False).passed is True


def test_no_threshold_is_not_applicable():
    s = Score(value=0.7).judged(None, True)
    assert s.score == 0.7 and s.passed is None and s.result == "not_applicable"


def test_skipped_and_error_scores_are_left_alone():
    s = Score.skipped("missing input: context").judged(3, True)
    assert (s.status, s.result, s.passed) == ("skipped", "not_applicable", None)
    e = Score.error("boom").judged(3, True)
    assert (e.status, e.result, e.passed) == ("error", "unknown", None)


def test_metric_parameters_must_be_record_fields():
    with pytest.raises(TypeError, match="not a record field"):
        @metric(name="bad_metric_for_test")
        def bad(answer: str) -> float:  # 'answer' is not a canonical field
            return 1.0


def test_registered_metric_skips_rows_missing_inputs_and_catches_errors():
    @metric(name="len_ratio_for_test", threshold=0.5)
    def len_ratio(response: str, ground_truth: str) -> float:
        return len(response) / len(ground_truth)

    m = REGISTRY["len_ratio_for_test"]
    assert m.requires == ("response", "ground_truth")
    got = m.score_sync(Record(response="abcd", ground_truth="ab"))["len_ratio_for_test"]
    assert (got.value, got.passed, got.result, got.threshold) == (2.0, True, "pass", 0.5)
    skipped = m.score_sync(Record(response="abcd"))["len_ratio_for_test"]
    assert skipped.status == "skipped" and "ground_truth" in skipped.reason
    errored = m.score_sync(Record(response="abcd", ground_truth="x" * 0 + " "))  # has() is true for " "
    assert errored["len_ratio_for_test"].status == "completed"
    boom = m.score_sync(Record(response="a", ground_truth="b"), threshold=9.0)["len_ratio_for_test"]
    assert boom.passed is False and boom.threshold == 9.0
    del REGISTRY["len_ratio_for_test"]


def test_metric_exception_becomes_error_score():
    @metric(name="raises_for_test")
    def raises(response: str) -> float:
        raise ValueError("bad value")

    s = REGISTRY.pop("raises_for_test").score_sync(Record(response="x"))["raises_for_test"]
    assert s.status == "error" and s.reason == "ValueError: bad value"


def test_unknown_metric_suggests_close_names():
    with pytest.raises(UnknownMetricError, match="did you mean f1_score"):
        get_metric("f1_scor")


def test_groups_expand():
    names = [m.name for m in resolve(["rouge"])]
    assert names == ["rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL"]


def test_auto_planning_follows_the_fields_present():
    got = {m.name for m in plan_auto({"query", "response", "ground_truth"})}
    assert "f1_score" in got and "document_recall" not in got
    got = {m.name for m in plan_auto({"query", "response", "contexts", "expected_doc_uris"})}
    assert "document_recall" in got and "f1_score" not in got
    assert {m.name for m in plan_auto({"query", "response", "ground_truth"}, family="databricks")} >= {"token_count"}
    assert "f1_score" not in {m.name for m in plan_auto({"response", "ground_truth"}, family="databricks")}


def test_scores_live_at_the_bottom_and_are_re_exported():
    import assay
    from assay import scores
    from assay.metrics import base

    assert base.Score is scores.Score is assay.Score and base.EvalContext is scores.EvalContext
    assert base.SCORE_KEYS == scores.SCORE_KEYS
