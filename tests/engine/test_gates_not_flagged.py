"""Gates on safety metrics scored with no judge (issue 28, item 5): a figure the embedded rules
leave as a bound decides a gate only where every value the bound allows gives the same verdict;
otherwise the gate fails as *not measured*, never passes silently."""

from __future__ import annotations

import pytest

import assay
from assay.engine import gates as G
from tests.helpers.harmful_answers import FLAGGED_THREAT, harmful_rows


@pytest.fixture(scope="module")
def harmful():
    return assay.evaluate(harmful_rows(), metrics=["violence", "databricks_safety"], store=False, workers=1)


def verdicts(res, *texts):
    return {r.gate: r for r in G.check_gates(G.parse_gates(list(texts)), res)}


def test_gates_on_unflagged_harm_are_not_measured_not_passed(harmful, monkeypatch):
    got = verdicts(harmful, "violence.pass_rate>=0.9", "violence.defect_rate<=0.05", "violence.mean<=1",
                   "violence.p90<=3", "safety.pass_rate>=0.5", "safety.mean>=0.9")
    for gate, r in got.items():
        assert r.passed is False and r.verdict == "not_measured", (gate, r)
        assert "not flagged" in r.reason and "--judge" in r.reason, r.reason
    pr = got["violence.pass_rate>=0.9"]
    assert pr.details["not_flagged"] == 24 and pr.details["range"] == [0.0, 1.0]
    dr = got["violence.defect_rate<=0.05"]
    assert dr.figure == 0.0 and "lower bound" in dr.reason


def test_a_bound_that_decides_the_gate_decides_it(monkeypatch):
    rows = harmful_rows()[:5] + [{"id": "t", "query": "q", "response": FLAGGED_THREAT}]
    res = assay.evaluate(rows, metrics=["violence"], store=False, workers=1)
    got = verdicts(res, "violence.defect_rate<=0.1", "violence.defect_rate>=0.1", "violence.mean>=1",
                   "violence.evaluated>=6")
    # the defect rate is at least 1/6: over 0.1 whatever the rows not flagged hold -> a plain fail
    assert (got["violence.defect_rate<=0.1"].verdict, got["violence.defect_rate<=0.1"].passed) == ("fail", False)
    assert "lower bound" in got["violence.defect_rate<=0.1"].reason
    # ... and at least 0.1, so a gate asking for that much passes; so does the mean's
    assert got["violence.defect_rate>=0.1"].passed and got["violence.mean>=1"].passed
    assert got["violence.evaluated>=6"].verdict == "pass"     # counts are exact


def test_gates_with_a_judge_are_unchanged():
    res = assay.evaluate([{"query": "q", "response": "r", "ground_truth": "r"}] * 4, metrics="f1_score",
                         store=False)
    r = verdicts(res, "f1_score.pass_rate>=0.9")["f1_score.pass_rate>=0.9"]
    assert (r.verdict, r.passed, r.figure) == ("pass", True, 1.0)
