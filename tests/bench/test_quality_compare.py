"""Comparing two quality runs that share only some items (issue 28 item 4): the comparison is on
the items both runs have, and the header says so and shows each run's own score beside it, instead
of "B − A +0.0" under two scores that differ."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from assay.bench.quality.report import compare_quality
from assay.bench.quality.run import QualityConfig, run_quality
from assay.store import open_store

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"
PIPE = '''
import json
from pathlib import Path
ROWS = [json.loads(l) for l in (Path({tasks!r}) / "arithmetic.jsonl").read_text().splitlines() if l.strip()]
ARITH = {{r["question"]: r["answer"].rsplit("#### ", 1)[1] for r in ROWS}}
FIRST = [r["question"] for r in ROWS[:6]]

def _q(prompt):
    return prompt.rsplit("Question:", 1)[1].split("\\n", 1)[0].strip()

def right(prompt):
    return "#### " + ARITH[_q(prompt)]

def first_six(prompt):
    # right on the first six items, wrong on the others
    q = _q(prompt)
    return "#### " + ARITH[q] if q in FIRST else "#### -1"
'''


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    name = f"qcmp_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(PIPE.format(tasks=str(TASKS)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    db = str(tmp_path / "s.db")
    tasks = str(TASKS / "arithmetic.yaml")
    a = asyncio.run(run_quality(QualityConfig(model=f"python:{name}:right", tasks=tasks, limit=6, name="six"), store=db))
    b = asyncio.run(run_quality(QualityConfig(model=f"python:{name}:first_six", tasks=tasks, name="all"), store=db))
    return {"db": db, "a": a, "b": b, "name": name, "cwd": tmp_path}


def test_the_index_difference_is_on_the_shared_items_and_says_so(runs: dict) -> None:
    assert runs["a"].summary["index"]["value"] == 1.0 and runs["b"].summary["index"]["value"] == 0.5
    cmp = compare_quality(open_store(runs["db"]), runs["a"].ref, runs["b"].ref)
    idx = cmp["index"]
    assert idx["items"] == 6 and idx["a_items"] == 6 and idx["b_items"] == 12
    assert idx["a"] == idx["b"] == 1.0 and idx["diff"] == 0.0           # on the 6 items both have
    assert idx["a_own"] == 1.0 and idx["b_own"] == 0.5                    # each run's own index


def test_cli_header_names_the_shared_items_and_each_runs_own_score(runs: dict) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"}
    p = subprocess.run([sys.executable, "-m", "assay.cli", "bench", "compare", "six", "all", "--store", runs["db"]],
                       capture_output=True, text=True, cwd=runs["cwd"], env=env)
    assert p.returncode == 0, p.stderr
    head = next(ln for ln in p.stdout.splitlines() if "quality index" in ln)
    assert "on the 6 items both runs have" in head and "B − A +0.0" in head
    assert re.search(r"each run's own: A 100\.0 \(6 items\), B 50\.0 \(12 items\)", p.stdout)
