"""Evaluations as tests: single cases, data sets row by row, and assay's pytest plugin.

::

    from assay.testing import EvalSet, assert_scores, evaluate_case

    def test_capital():
        assert_scores(evaluate_case(query="Capital of France?", response="Paris.",
                                    ground_truth="Paris", metrics="f1_score",
                                    thresholds={"f1_score": 0.5}))

    rag = EvalSet("rag.jsonl", metrics="f1_score,groundedness")

    @rag.each_row                      # one test per row, the data set evaluated once
    def test_rag(assay_row):
        assert_scores(assay_row)       # a failure names the metric, its score and its reason

The plugin (:mod:`assay.testing.plugin`) is on whenever assay is installed; see
docs/pytest-plugin.md.
"""

from assay.testing.cases import CaseResult, assert_scores, evaluate_case
from assay.testing.evalset import EvalSet

__all__ = ["CaseResult", "EvalSet", "assert_scores", "evaluate_case"]
