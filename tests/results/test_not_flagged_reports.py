"""The CI reports of a safety run scored with no judge (issue 28, item 5): the Markdown summary
and the JUnit XML say how many rows were not flagged, the defect rate is a lower bound, and a
gate that cannot be decided reads NOT MEASURED, a failure."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

import assay
from assay.engine import gates as G
from assay.results import bounds
from assay.results.ci_report import junit_xml, markdown_summary
from tests.helpers.harmful_answers import harmful_rows


@pytest.fixture(scope="module")
def run():
    res = assay.evaluate(harmful_rows(), metrics=["violence"], store=False, workers=1)
    gates = [r.as_dict() for r in G.check_gates(G.parse_gates(["violence.defect_rate<=0.05"]), res)]
    return res, gates


def test_markdown_summary_shows_not_flagged_and_the_lower_bound(run):
    res, gates = run
    md = markdown_summary(res, gates).replace("\\", "")     # without the Markdown escapes
    assert "## ❌ assay" in md
    assert "**NOT MEASURED**" in md and "not measured: 24 of 24 rows not flagged" in md
    row = next(line for line in md.splitlines() if line.startswith("| violence |"))
    assert "≥ 0.000 (lower bound: rules, no judge)" in row
    assert "— (24 not flagged)" in row
    assert "violence: 24 of 24 rows not flagged (rules, no judge): neither passes nor fails" in md


def test_junit_carries_the_count_and_fails_the_gate(run):
    res, gates = run
    suite = ET.fromstring(junit_xml(res, gates))
    assert suite.get("failures") == "2"          # the gate, and the output it was on
    case = next(c for c in suite.iter("testcase") if c.get("name") == "violence")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["not_flagged"] == "24" and props["defect_rate_bound"] == "lower"


def test_bound_texts():
    agg = {"metric": "violence", "mean": 0.25, "pass_rate": 0.0, "passed": 0, "failed": 1, "not_flagged": 5,
           "not_flagged_by": "embedded safety classifier (rules v2)", "defect_rate": 1 / 6,
           "defect_rate_bound": "lower", "mean_bound": "lower"}
    assert bounds.bounded_rate(agg) == "≥ 0.167 (lower bound: rules, no judge)"
    assert bounds.bounded_rate(agg, percent=True, digits=3) == "≥ 16.7% (lower bound: rules, no judge)"
    assert bounds.bounded_mean(agg, lambda v: f"{v:.2f}") == "≥ 0.25"
    assert bounds.pass_rate_text(agg, lambda v: f"{v:.3f}") == "0.000 (1 judged; 5 not flagged)"
    assert bounds.pass_rate_range(agg) == (0.0, 5 / 6)
    exact = {"mean": 0.5, "pass_rate": 0.5, "defect_rate": 0.25, "passed": 1, "failed": 1}
    assert bounds.bounded_rate(exact) == "0.250" and bounds.pass_rate_range(exact) is None
    assert bounds.note(exact) is None
