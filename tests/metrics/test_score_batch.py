"""Metric.score_batch: a chunk scored metric by metric gives exactly what score_sync gives row by row."""

from __future__ import annotations

import math

import pytest

from assay.engine.run import score_rows
from assay.metrics.base import REGISTRY, EvalContext, Metric, Score, get_metric, load_builtin_metrics, metric
from assay.records import Record

ROWS = [
    Record(response="The cat sat on the mat.", ground_truth="A cat sat on a mat!"),
    Record(response="", ground_truth="empty response"),          # missing input: response
    Record(response="no reference"),                               # missing input: ground_truth
    Record(response="nan please", ground_truth="x"),
    Record(response="boom", ground_truth="x"),
    Record(response="int", ground_truth="x"),
    Record(response="bool", ground_truth="x"),
    Record(response="score", ground_truth="x"),
    Record(response="big", ground_truth="x"),
    Record(response="Mr. Smith didn't go, did he?", ground_truth="Mr. Smith did not go."),
]


def _odd(response: str, ground_truth: str):
    """A metric whose function returns every kind of thing a metric may return."""
    if response == "nan please":
        return float("nan")
    if response == "boom":
        raise ValueError("no luck")
    if response == "int":
        return 1
    if response == "bool":
        return True
    if response == "score":
        return Score(value=0.25, reason="because")
    if response == "big":
        return 10 ** 400          # float() overflows: an error, as in score_sync
    return len(response) / (len(response) + len(ground_truth))


def _many(response: str, ground_truth: str):
    if response == "score":
        return {"a": Score(value=0.9), "b": 0.1}
    if response == "boom":
        raise RuntimeError("bad row")
    if response == "nan please":
        return {"a": float("nan"), "b": 2}
    return {"a": len(response) / 40, "b": 0.5}


@pytest.fixture
def odd_metrics():
    names = ["batch_odd_t", "batch_odd_low_t", "batch_many_t", "batch_nothreshold_t"]
    metric("batch_odd_t", threshold=0.5)(_odd)
    metric("batch_odd_low_t", threshold=0.5, higher_is_better=False)(_odd)
    metric("batch_many_t", threshold=0.5, outputs=("a", "b"))(_many)
    metric("batch_nothreshold_t")(_odd)
    yield [REGISTRY[n] for n in names]
    for n in names:
        REGISTRY.pop(n, None)


def _same(a: Score, b: Score) -> bool:
    fields = ("value", "score", "passed", "result", "reason", "status", "threshold", "properties")
    for f in fields:
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            continue
        if x != y or type(x) is not type(y):
            return False
    return True


def _check(m: Metric, rows: list[Record], threshold=None, auto=False) -> None:
    ctx = EvalContext()
    batch = m.score_batch(rows, ctx, threshold, auto)
    one = [m.score_sync(r, ctx, threshold, auto) for r in rows]
    assert len(batch) == len(one)
    for r, got, want in zip(rows, batch, one):
        assert list(got) == list(want), (m.name, r.response)
        for k in want:
            assert _same(got[k], want[k]), (m.name, r.response, k, got[k], want[k])
        # every score is its own object (a later edit of one row must not show in another)
        assert all(got[k] is not want[k] for k in want)


def test_batch_equals_row_by_row_for_every_kind_of_return(odd_metrics):
    for m in odd_metrics:
        _check(m, ROWS)
        _check(m, ROWS, threshold=0.3)
        _check(m, ROWS, auto=True)
    # the cases the fast path must judge itself
    got = odd_metrics[0].score_batch(ROWS)
    assert got[0]["batch_odd_t"].result in ("pass", "fail") and got[0]["batch_odd_t"].properties == {}
    assert got[3]["batch_odd_t"].passed is None and got[3]["batch_odd_t"].result == "unknown"  # NaN
    assert got[4]["batch_odd_t"].status == "error" and "no luck" in got[4]["batch_odd_t"].reason
    assert got[6]["batch_odd_t"].score is None                       # a bool is not a number
    assert got[8]["batch_odd_t"].status == "error"                   # 10**400 does not fit a float
    assert got[1]["batch_odd_t"].status == "skipped"
    p0, p1 = got[0]["batch_odd_t"].properties, got[5]["batch_odd_t"].properties
    assert p0 is not p1


def test_batch_equals_row_by_row_for_the_classic_text_metrics():
    load_builtin_metrics()
    for name in ["f1_score", "exact_match", "bleu", "gleu", "meteor", "rougeL", "rouge2"]:
        _check(get_metric(name), ROWS)
        _check(get_metric(name), ROWS, threshold=0.9)


def test_score_rows_groups_the_columns_by_row(odd_metrics):
    ctx = EvalContext()
    rows = score_rows(odd_metrics, {"batch_odd_t": 0.1}, ctx, ROWS)
    assert [list(r) for r in rows] == [[m.name for m in odd_metrics]] * len(ROWS)
    assert rows[0]["batch_odd_t"]["batch_odd_t"].threshold == 0.1
    assert score_rows([], {}, ctx, ROWS) == [{}] * len(ROWS)
    assert score_rows(odd_metrics, {}, ctx, []) == []
