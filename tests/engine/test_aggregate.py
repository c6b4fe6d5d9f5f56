"""Aggregates and the confidence interval."""

import numpy as np

from assay.engine.aggregate import Accumulator
from assay.metrics.base import Score
from assay.stats import BOOTSTRAP_MAX_N, confidence_interval


def test_bootstrap_interval_matches_normal_theory_roughly():
    rng = np.random.default_rng(1)
    v = rng.normal(3.0, 1.0, 2000)
    lo, hi, method = confidence_interval(v)
    assert method == "bootstrap"
    half = 1.96 / np.sqrt(2000)
    assert abs((hi - lo) / 2 - half) < 0.2 * half
    assert lo < v.mean() < hi


def test_few_distinct_values_bootstrap_exactly_at_any_size():
    # 0/1 values: the bootstrap of the mean has sd sqrt(p(1-p)/n)
    v = np.zeros(200_000)
    v[::4] = 1
    lo, hi, method = confidence_interval(v)
    assert method == "bootstrap"
    half = 1.96 * np.sqrt(0.25 * 0.75 / len(v))
    assert abs((hi - lo) / 2 - half) < 0.15 * half


def test_many_distinct_values_resample_or_use_the_normal_approximation():
    rng = np.random.default_rng(2)
    small = rng.random(BOOTSTRAP_MAX_N)
    assert confidence_interval(small)[2] == "bootstrap"
    big = rng.random(BOOTSTRAP_MAX_N + 1)
    lo, hi, method = confidence_interval(big)
    assert method == "normal" and lo < big.mean() < hi


def test_accumulator_counts_errors_apart_from_fails():
    acc = Accumulator(metric="m", output="m", defect_threshold=4)
    for s in (Score(value=5.0).judged(3, True), Score(value=1.0).judged(3, True),
              Score.error("judge timed out"), Score.skipped("missing input: contexts")):
        acc.add(s)
    r = acc.result()
    assert (r["evaluated"], r["skipped"], r["errored"], r["passed"], r["failed"]) == (2, 1, 1, 1, 1)
    assert r["pass_rate"] == 0.5 and r["mean"] == 3.0 and r["defect_rate"] == 0.5
    assert r["error_reasons"] == {"judge timed out": 1}
