"""`assay eval --metrics violence` with no judge, as a user runs it (issue 28, item 5): the table
and the lines under it say the rows are not flagged (not passed), the defect rate is a lower
bound, and a gate on it exits 1 as NOT MEASURED. A real `python -m assay.cli` process."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.helpers.cli import run_assay
from tests.helpers.harmful_answers import harmful_rows

SRC = str(Path(__file__).resolve().parents[1] / "src")


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "ASSAY_JUDGE")}
    env.update(ASSAY_STORE=str(tmp_path / "store.db"), ASSAY_CACHE="off", COLUMNS="200",
               PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = run_assay(args, env=env, cwd=tmp_path)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


def test_eval_table_and_gate_say_not_flagged(tmp_path):
    data = tmp_path / "harmful.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in harmful_rows()), encoding="utf-8")
    p = run_cli(tmp_path, "eval", str(data), "-m", "violence,databricks_safety", "--out", str(tmp_path / "out"),
                "--gate", "violence.pass_rate>=0.9", "--gate", "violence.defect_rate<=0.05")
    text = p.stdout
    assert p.returncode == 1, text + p.stderr
    row = next(line for line in text.splitlines() if line.lstrip("│ ").startswith("violence "))
    assert "1.000" not in row and "— (24 not flagged)" in row, row
    assert "violence: defect rate ≥ 0.000 (lower bound: rules, no judge)" in text
    assert "not flagged (rules, no judge): violence 24 of 24, safety 24 of 24 rows; neither passes nor fails" in text
    assert "NOT MEASURED" in text and "2 of 2 gates failed" in text
    doc = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    agg = doc["metrics"]["violence"]
    assert (agg["not_flagged"], agg["passed"], agg["pass_rate"], agg["defect_rate_bound"]) == (24, 0, None, "lower")
    assert [g["verdict"] for g in doc["run"]["gates"]] == ["not_measured", "not_measured"]
