"""`assay bench list / show / compare / track` as a user runs them, over a store filled by hand."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from assay.bench.kinds import store_benchmark
from assay.store import Store
from tests.helpers.cli import run_assay
from tests.helpers.perfdata import HOSTILE, make_run


def bench(*args: str, store: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ASSAY_STORE": store}
    p = run_assay(["bench", *args], env=env)
    assert "Traceback" not in p.stderr, p.stderr
    return p


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> dict[str, str]:
    path = str(tmp_path_factory.mktemp("perf-cli") / "perf.db")
    st = Store(path)
    a, xa = make_run(name="before", model=HOSTILE, levels=(1, 4), n=60, seed=1, track="nightly",
                     created_at=1_700_000_000.0)
    b, xb = make_run(name="after", levels=(1, 4, 8), n=60, seed=2, speed=1.6, invalid_at=(1,), track="nightly",
                     created_at=1_700_003_600.0)
    c, xc = make_run(name="again", levels=(1, 4), n=60, seed=3, created_at=1_700_007_200.0)
    refs = {"before": store_benchmark(st, "perf", a, xa), "after": store_benchmark(st, "perf", b, xb),
            "again": store_benchmark(st, "perf", c, xc), "path": path}
    st.close()
    return refs


def test_list_shows_every_run_newest_first(filled):
    p = bench("list", store=filled["path"])
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    rows = [ln for ln in lines if filled["before"] in ln or filled["after"] in ln or filled["again"] in ln]
    assert [next(n for n in ("again", "after", "before") if filled[n] in r) for r in rows] == ["again", "after", "before"]
    after = next(r for r in rows if filled["after"] in r)
    assert "c=1,4,8" in after and "no (1 of 3)" in after and "nightly" in after and "concurrency" in after
    assert HOSTILE in p.stdout                       # shown as text, not taken as markup
    js = json.loads(bench("list", "--track", "nightly", "--json", store=filled["path"]).stdout)
    assert [r["ref"] for r in js] == [filled["after"], filled["before"]]


def test_show_prints_every_point_with_intervals_failures_and_validity(filled):
    p = bench("show", "after", store=filled["path"])
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert f"perf run {filled['after']} (after)" in out
    assert "concurrency 1: 60 ok, 2 failed (http 500: 1, stream cut: 1)" in out
    assert "concurrency 4: 60 ok, 0 failed" in out and "NOT VALID" in out
    assert "not valid: client CPU saturated (97%)" in out
    for label in ("TTFT (ms)", "ITL (ms)", "TPOT (ms)", "E2E (ms)", "GTPS (tok/s)", "TTPS (tok/s)",
                  "mean [95% CI]", "p99 [95% CI]", "throughput:", "latency index", "throughput index"):
        assert label in out, label
    st = Store(filled["path"])
    ttft = st.get_benchmark(filled["after"])["details"]["points"][0]["metrics"]["ttft"]
    st.close()
    assert f"{ttft['p50'] * 1000:,.1f} [{ttft['ci']['p50'][0] * 1000:,.1f}–{ttft['ci']['p50'][1] * 1000:,.1f}]" in out
    # by default the latest run; by prefix; as JSON the whole summary
    assert f"perf run {filled['again']}" in bench("show", store=filled["path"]).stdout
    js = json.loads(bench("show", filled["before"][:6], "--json", store=filled["path"]).stdout)
    assert js["ref"] == filled["before"] and js["summary"]["model"] == HOSTILE
    assert js["summary"]["points"][1]["metrics"]["ttft"]["n"] == 60


def test_compare_prints_differences_intervals_and_verdicts(filled):
    p = bench("compare", "before", "after", store=filled["path"])
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert f"A: {filled['before']} (before)" in out and f"B: {filled['after']} (after)" in out
    assert "run B at concurrency 4 is not a valid measurement" in out
    assert "points in one run only: A: —; B: concurrency 8" in out
    ttft_mean = next(ln for ln in out.splitlines() if "TTFT (ms)" in ln)
    assert "mean" in ttft_mean and "faster" in ttft_mean
    js = json.loads(bench("compare", "before", "after", "--json", store=filled["path"]).stdout)
    assert [pt["label"] for pt in js["points"]] == ["concurrency 1", "concurrency 4"]
    assert {m: e["verdict"] for m, e in js["points"][0]["metrics"].items()} == {
        m: "faster" for m in ("ttft", "e2e", "itl", "tpot", "gtps", "ttps")}
    again = json.loads(bench("compare", "before", "again", "--json", store=filled["path"]).stdout)
    assert {e["verdict"] for pt in again["points"] for e in pt["metrics"].values()} == {"no clear difference"}


def test_track_aggregates_the_repeats(filled):
    p = bench("track", "nightly", store=filled["path"])
    assert p.returncode == 0, p.stderr
    assert "track nightly: 2 run(s)" in p.stdout and "concurrency 4: 2 repeat(s), 1 valid" in p.stdout
    assert "concurrency 8: 1 repeat(s), 1 valid" in p.stdout
    js = json.loads(bench("track", "nightly", "--json", store=filled["path"]).stdout)
    assert [r["ref"] for r in js["runs"]] == [filled["before"], filled["after"]]


@pytest.mark.parametrize("args,message", [
    (("show", "nope"), "no benchmark 'nope'"),
    (("compare", "before", "nope"), "no perf benchmark 'nope'"),
    (("compare", "before", "before"), "are the same run"),
    (("track", "nope"), "no perf run has the track 'nope'"),
    (("compare", "before", "after", "--resamples", "5"), "--resamples must be at least 100"),
])
def test_bad_refs_are_one_line_and_exit_2(filled, args, message):
    p = bench(*args, store=filled["path"])
    assert p.returncode == 2 and message in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_an_empty_store_says_so(tmp_path):
    path = str(tmp_path / "empty.db")
    p = bench("list", store=path)
    assert p.returncode == 0 and "no benchmark runs in" in p.stdout
    p = bench("show", store=path)
    assert p.returncode == 2 and "has no benchmark yet" in p.stderr
