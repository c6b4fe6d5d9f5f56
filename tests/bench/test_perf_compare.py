"""Comparing perf runs: the bootstrap of a difference, verdicts on runs that clearly differ
and on runs that do not, matching points by load, and the aggregate of scheduled repeats."""

from __future__ import annotations

import numpy as np
import pytest

from assay.bench.kinds import store_benchmark
from assay.bench.perf.compare import (
    FASTER,
    SLOWER,
    STATS,
    UNCLEAR,
    compare_perf,
    compare_points,
    point_key,
    point_label,
    track_aggregate,
    verdict,
)
from assay.bench.perf.figures import COMPARED as METRICS
from assay.errors import AssayError
from assay.stats import BOOTSTRAP_MAX_N, bootstrap_diff, bootstrap_draws
from assay.store import Store
from tests.helpers.perfdata import make_run


# -- the statistics -----------------------------------------------------------------------------
@pytest.mark.parametrize("stat,q", [("p50", 50), ("p90", 90), ("p99", 99), ("median", 50)])
def test_percentile_draws_match_resampling_the_values(stat, q):
    """The order-statistic draw has the same distribution as percentiles of real resamples."""
    x = np.random.default_rng(7).lognormal(0, 1, 301)
    fast, method = bootstrap_draws(x, stat, np.random.default_rng(1), resamples=20_000)
    idx = np.random.default_rng(2).integers(0, len(x), size=(20_000, len(x)))
    slow = np.percentile(x[idx], q, axis=1)
    assert method == "bootstrap"
    for p in (2.5, 25, 50, 75, 97.5):
        assert np.percentile(fast, p) == pytest.approx(np.percentile(slow, p), rel=0.03)
    assert fast.mean() == pytest.approx(slow.mean(), rel=0.02)


def test_bootstrap_diff_is_deterministic_and_consistent():
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(0, 0.5, 400), rng.lognormal(-0.5, 0.5, 300)
    d1 = bootstrap_diff(a, b, "p99")
    assert d1 == bootstrap_diff(a, b, "p99")                     # fixed seed
    assert d1 != bootstrap_diff(a, b, "p99", seed=1)
    assert d1["a"] == pytest.approx(np.percentile(a, 99)) and d1["b"] == pytest.approx(np.percentile(b, 99))
    assert d1["diff"] == pytest.approx(d1["b"] - d1["a"]) and d1["ratio"] == pytest.approx(d1["b"] / d1["a"])
    m = bootstrap_diff(a, b)
    assert m["diff_low"] < m["diff"] < m["diff_high"] < 0 and m["ratio_low"] < m["ratio"] < m["ratio_high"] < 1
    assert (m["n_a"], m["n_b"], m["method"]) == (400, 300, "bootstrap")
    # any vectorised statistic; a mean over many values uses the normal limit
    med = bootstrap_diff(a, b, np.median, resamples=200)
    assert med["a"] == pytest.approx(np.median(a)) and med["diff_high"] < 0
    big = rng.lognormal(0, 0.5, BOOTSTRAP_MAX_N + 1)
    assert bootstrap_diff(big, big)["method"] == "normal"
    with pytest.raises(ValueError, match="unknown statistic"):
        bootstrap_diff(a, b, "p101")


def test_the_verdict_follows_the_direction_of_the_metric():
    assert verdict(-0.2, -0.1, higher_is_better=False) == FASTER      # latency went down
    assert verdict(0.1, 0.2, higher_is_better=False) == SLOWER
    assert verdict(10, 20, higher_is_better=True) == FASTER           # tokens per second went up
    assert verdict(-20, -10, higher_is_better=True) == SLOWER
    assert verdict(-0.1, 0.1, higher_is_better=False) == UNCLEAR
    assert verdict(None, None, higher_is_better=False) is None


def test_points_are_keyed_by_load():
    assert point_key({"concurrency": 4, "rate": None}) == ("concurrency", 4.0)
    assert point_key({"concurrency": None, "rate": 2.5}) == ("rate", 2.5)
    assert point_key({"concurrency": None, "rate": None}) == ("concurrency", 1.0)   # sequential
    assert point_label({"concurrency": 1}) == "concurrency 1"
    assert point_label({"concurrency": None, "rate": 2.5}) == "rate 2.5 req/s"


# -- comparing runs -----------------------------------------------------------------------------
def test_a_clearly_faster_run_is_faster_on_every_metric():
    a, sa = make_run(seed=1, levels=(1, 4))
    b, sb = make_run(seed=2, levels=(1, 4), speed=1.6)
    cmp = compare_points(a, sa, b, sb)
    assert [p["label"] for p in cmp["points"]] == ["concurrency 1", "concurrency 4"]
    assert cmp["unmatched"] == {"a": [], "b": []} and cmp["warnings"] == []
    for p in cmp["points"]:
        assert sorted(p["metrics"]) == sorted(METRICS)
        for m, e in p["metrics"].items():
            assert e["verdict"] == FASTER, (p["label"], m)
            assert e["samples"] and e["n"]["a"] == len(sa[p["a_index"]][m])
            mean = e["stats"]["mean"]
            lo, hi = mean["diff_ci"]
            assert lo <= mean["diff"] <= hi and mean["ratio_ci"][0] <= mean["ratio"] <= mean["ratio_ci"][1]
            if m in ("gtps", "ttps"):
                assert lo > 0 and mean["ratio"] > 1.3          # higher is better: B produces faster
            else:
                assert hi < 0 and mean["ratio"] < 0.8
            for s in STATS:
                assert e["stats"][s]["a"] == pytest.approx(
                    np.mean(sa[p["a_index"]][m]) if s == "mean" else np.percentile(sa[p["a_index"]][m], int(s[1:])))
        assert p["throughput"]["request_throughput"]["ratio"] > 1
    # the other way round, the same runs are slower
    back = compare_points(b, sb, a, sa)
    assert {e["verdict"] for p in back["points"] for e in p["metrics"].values()} == {SLOWER}


def test_runs_from_the_same_server_show_no_clear_difference():
    a, sa = make_run(seed=11, levels=(1, 8))
    b, sb = make_run(seed=12, levels=(1, 8))
    cmp = compare_points(a, sa, b, sb)
    for p in cmp["points"]:
        for m, e in p["metrics"].items():
            assert e["verdict"] == UNCLEAR, (p["label"], m, e["stats"]["mean"])
            lo, hi = e["stats"]["mean"]["diff_ci"]
            assert lo < 0 < hi


def test_points_are_matched_by_load_and_the_rest_listed():
    a, sa = make_run(levels=(1, 4, 16), n=40)
    seq, sseq = make_run(mode="sequential", n=40, seed=3)
    cmp = compare_points(a, sa, seq, sseq)
    assert [(p["label"], p["a_index"], p["b_index"]) for p in cmp["points"]] == [("concurrency 1", 0, 0)]
    assert cmp["unmatched"] == {"a": ["concurrency 4", "concurrency 16"], "b": []}
    rate, srate = make_run(mode="rate", levels=(1, 4), n=40)
    none = compare_points(a, sa, rate, srate)
    assert none["points"] == [] and "share no load point" in " ".join(none["warnings"])
    rate2, srate2 = make_run(mode="rate", levels=(4, 8), n=40, seed=5)
    both = compare_points(rate, srate, rate2, srate2)
    assert [p["label"] for p in both["points"]] == ["rate 4 req/s"]
    assert both["unmatched"] == {"a": ["rate 1 req/s"], "b": ["rate 8 req/s"]}


def test_without_samples_the_summary_values_are_compared_without_a_verdict():
    a, sa = make_run(seed=1, levels=(2,), n=30)
    b, _ = make_run(seed=2, levels=(2,), n=30, speed=2)
    cmp = compare_points(a, sa, b, {})
    e = cmp["points"][0]["metrics"]["ttft"]
    assert not e["samples"] and e["verdict"] is None
    p99 = e["stats"]["p99"]
    assert p99["a"] == a["points"][0]["metrics"]["ttft"]["p99"] and p99["b"] == b["points"][0]["metrics"]["ttft"]["p99"]
    assert p99["diff"] == pytest.approx(p99["b"] - p99["a"]) and p99["diff_ci"] is None
    assert any("no samples" in w for w in cmp["warnings"])


def test_differing_settings_and_invalid_points_are_warned_about():
    a, sa = make_run(seed=1, levels=(1, 4), n=30)
    b, sb = make_run(seed=2, levels=(1, 4), n=30, output_tokens=100, invalid_at=(1,))
    warnings = " | ".join(compare_points(a, sa, b, sb)["warnings"])
    assert "differ in output_tokens: 200 against 100" in warnings
    assert "run B at concurrency 4 is not a valid measurement: client CPU saturated" in warnings


# -- through the store ----------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path):
    st = Store(str(tmp_path / "cmp.db"))
    yield st
    st.close()


def test_compare_perf_reads_both_runs_from_the_store(store):
    a = store_benchmark(store, "perf", *make_run(name="before", seed=1, levels=(1,), n=60))
    b = store_benchmark(store, "perf", *make_run(name="after", seed=2, levels=(1,), n=60, speed=2))
    cmp = compare_perf(store, "before", b[:5])
    assert cmp["a"]["ref"] == a and cmp["b"]["ref"] == b and cmp["a"]["name"] == "before"
    assert cmp["points"][0]["metrics"]["e2e"]["verdict"] == FASTER
    assert cmp == compare_perf(store, a, b)                       # the same answer every time
    with pytest.raises(AssayError, match="same run"):
        compare_perf(store, a, "before")
    with pytest.raises(AssayError, match="no perf benchmark 'nope'"):
        compare_perf(store, a, "nope")
    store.add_benchmark(kind="cost", name="prices")
    with pytest.raises(AssayError, match="no perf benchmark 'prices'"):
        compare_perf(store, a, "prices")


def test_scheduled_repeats_are_aggregated_per_point(store):
    day = 86_400.0
    refs = []
    for k in range(6):   # six repeats a day apart, the server a little slower every day
        s, x = make_run(name="hourly", seed=100 + k, levels=(1, 8), n=30, speed=1 / (1 + 0.05 * k),
                        track="gpt-serving", created_at=1_700_000_000.0 + k * day,
                        repeat={"index": k, "of": 6, "every": day})
        refs.append(store_benchmark(store, "perf", s, x))
    store_benchmark(store, "perf", *make_run(name="other", seed=9, track="elsewhere"))
    agg = track_aggregate(store, "gpt-serving")
    assert [r["ref"] for r in agg["runs"]] == refs                  # oldest first, only this track
    assert agg["first"] == 1_700_000_000.0 and agg["last"] == 1_700_000_000.0 + 5 * day
    assert [p["label"] for p in agg["points"]] == ["concurrency 1", "concurrency 8"]
    c8 = agg["points"][1]
    assert c8["repeats"] == 6 and c8["valid"] == 6 and len(c8["series"]) == 6
    runs = [store.get_benchmark(r)["details"]["points"][1] for r in refs]
    means = [p["metrics"]["ttft"]["mean"] for p in runs]
    ttft = c8["metrics"]["ttft"]["mean"]
    assert ttft["n"] == 6 and ttft["mean"] == pytest.approx(np.mean(means))
    assert ttft["std"] == pytest.approx(np.std(means, ddof=1)) and ttft["min"] == min(means) and ttft["max"] == max(means)
    assert ttft["ci95_low"] <= ttft["mean"] <= ttft["ci95_high"] and ttft["cv"] == pytest.approx(ttft["std"] / ttft["mean"])
    assert [s["ttft_mean"] for s in c8["series"]] == means
    assert c8["throughput"]["request_throughput"]["n"] == 6
    assert [r["ref"] for r in track_aggregate(store, "gpt-serving", limit=2)["runs"]] == refs[-2:]
    with pytest.raises(AssayError, match="no perf run has the track 'nope'"):
        track_aggregate(store, "nope")
