"""Intervals of quality scores (issue 28 item 4): a proportion gets an interval that is right at 0
and 1 (Wilson's score interval), too few items say "too few" instead of an interval, and the
standard error is lm-evaluation-harness's (sample standard deviation / sqrt(n))."""

from __future__ import annotations

import asyncio
import math
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest

from assay.bench.quality.report import MIN_INTERVAL_ITEMS, stratified_index
from assay.bench.quality.run import QualityConfig, run_quality
from assay.stats import mean_stderr, wilson_interval
from tests.helpers.cli import run_assay

TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks"


def test_wilson_interval_is_right_at_zero_and_one() -> None:
    z = 1.959963984540054
    lo, hi = wilson_interval(0, 6)
    assert lo == 0.0 and hi == pytest.approx(z * z / (6 + z * z))      # 0.3903: the closed form at k = 0
    lo, hi = wilson_interval(6, 6)
    assert hi == 1.0 and lo == pytest.approx(6 / (6 + z * z))
    assert lo == pytest.approx(0.6097, abs=1e-4)
    # the textbook example (Newcombe 1998, table I): 81 of 263 -> 0.2553 to 0.3662
    lo, hi = wilson_interval(81, 263)
    assert (lo, hi) == (pytest.approx(0.2553, abs=1e-4), pytest.approx(0.3662, abs=1e-4))
    with pytest.raises(ValueError):
        wilson_interval(7, 6)


def test_standard_error_is_lm_evaluation_harness_s() -> None:
    v = np.array([1, 1, 1, 0, 0, 0], dtype=float)
    # lm-eval: sample_stddev (n - 1 in the denominator) / sqrt(n); for 0/1 scores sqrt(p(1-p)/(n-1))
    assert mean_stderr(v) == pytest.approx(math.sqrt(0.25 / 5))
    assert mean_stderr(np.ones(6)) == 0.0
    assert mean_stderr(np.ones(1)) is None


def test_a_stratified_index_of_all_right_tasks_has_width() -> None:
    idx = stratified_index([np.ones(6), np.ones(12)], binary=[True, True])
    assert idx["value"] == 1.0 and idx["ci95_high"] == 1.0 and idx["ci95_low"] < 0.97


PIPE = '''
import json
from pathlib import Path
TASKS = Path({tasks!r})
ROWS = [json.loads(l) for l in (TASKS / "arithmetic.jsonl").read_text().splitlines() if l.strip()]
ARITH = {{r["question"]: r["answer"].rsplit("#### ", 1)[1] for r in ROWS}}

def _q(prompt):
    return prompt.rsplit("Question:", 1)[1].split("\\n", 1)[0].strip()

def right(prompt):
    return "#### " + ARITH[_q(prompt)]

def wrong(prompt):
    return "#### -1"
'''


@pytest.fixture
def pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"qint_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PIPE.format(tasks=str(TASKS)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _metric(summary: dict) -> dict:
    return summary["tasks"]["arithmetic"]["metrics"]["exact_match,strict-match"]


def test_all_right_and_all_wrong_on_six_items_have_an_interval_of_width(pipe: str) -> None:
    tasks = str(TASKS / "arithmetic.yaml")
    good = asyncio.run(run_quality(QualityConfig(model=f"python:{pipe}:right", tasks=tasks, limit=6), store=None))
    m = _metric(good.summary)
    assert m["mean"] == 1.0 and m["ci95_high"] == 1.0 and m["ci95_low"] == pytest.approx(0.6097, abs=1e-4)
    assert m["ci_method"] == "wilson" and m["stderr"] == 0.0
    idx = good.summary["index"]
    assert idx["value"] == 1.0 and idx["ci95_low"] == pytest.approx(0.6097, abs=1e-4) and idx["ci95_high"] == 1.0
    bad = asyncio.run(run_quality(QualityConfig(model=f"python:{pipe}:wrong", tasks=tasks, limit=6), store=None))
    m = _metric(bad.summary)
    assert m["mean"] == 0.0 and m["ci95_low"] == 0.0 and m["ci95_high"] == pytest.approx(0.3903, abs=1e-4)


def test_too_few_items_say_so_instead_of_an_interval(pipe: str, tmp_path: Path) -> None:
    tasks = str(TASKS / "arithmetic.yaml")
    n = MIN_INTERVAL_ITEMS - 1
    r = asyncio.run(run_quality(QualityConfig(model=f"python:{pipe}:right", tasks=tasks, limit=n), store=None))
    m = _metric(r.summary)
    assert m["mean"] == 1.0 and m["ci95_low"] is None and m["ci95_high"] is None
    assert m["ci_method"].startswith("too few")
    assert r.summary["index"]["ci95_low"] is None

    def cli(*args: str) -> subprocess.CompletedProcess:
        return run_assay(["bench", "quality", "--model", f"python:{pipe}:right",
                          "--tasks", tasks, *args, "--store", str(tmp_path / "s.db"), "-q"], cwd=tmp_path)

    few = cli("--limit", str(n))
    assert few.returncode == 0, few.stderr
    assert f"too few ({n} < {MIN_INTERVAL_ITEMS})" in few.stdout and "[100.0–100.0]" not in few.stdout
    six = cli("--limit", "6")
    assert six.returncode == 0, six.stderr
    assert "100.0% [61.0–100.0]" in six.stdout and "stderr" in six.stdout
