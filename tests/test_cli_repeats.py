"""``assay eval --repeats`` as CI runs it (issue 32): real ``python -m assay.cli`` processes against a
loopback judge that is flaky on purpose. The gate on the pass rate's lower end fails (exit 1)
where the gate on the pass rate passes; summary.json, the Markdown step summary and JUnit carry
the repeats; ``assay show RUN --flaky`` (in process) lists the flaky rows with each repeat's score and reason;
the rerun asks the judge nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from tests.helpers.flaky_judge import FlakyJudge, rag_rows

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env.update(ASSAY_STORE=str(tmp_path / "store.db"), ASSAY_CACHE=str(tmp_path / "cache.sqlite"),
               PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), COLUMNS="200")
    p = subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


def test_eval_repeats_gates_ci_outputs_show_flaky_and_a_free_rerun(fake: Any, tmp_path: Path) -> None:
    judge = FlakyJudge()
    fake.default = judge
    data = tmp_path / "rag.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rag_rows(9, 3)), encoding="utf-8")
    args = ["eval", str(data), "-m", "groundedness", "--judge", f"{fake.base_url}#fake-judge", "--repeats", "5",
            "-q", "--name", "rep", "--gate", "groundedness.pass_rate>=0.8",
            "--gate", "groundedness.pass_rate_low>=0.8"]
    p = _cli(tmp_path, *args, "--out", "out", "--summary-md", "summary.md", "--junit", "junit.xml")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "groundedness: 5 repeats a row; 3 of 12 rows flaky (25%), 9 stable pass, 0 stable fail" in p.stdout
    assert "1 of 2 gates failed" in p.stdout and "--flaky" in p.stdout
    asked = len(fake.chat_requests)
    assert asked == 12 * 5

    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    agg = summary["metrics"]["groundedness"]
    assert summary["run"]["repeats"] == 5 and agg["rows_flaky"] == 3 and agg["interval_unit"] == "row"
    assert agg["pass_rate_ci95_low"] < 0.8 <= agg["pass_rate"]
    md = (tmp_path / "summary.md").read_text()
    assert "### Repeats" in md and "3 flaky rows: every repeat's score" in md and "| f1 |" in md
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert "groundedness.pass_rate_low>=0.8" in failed and "groundedness.pass_rate>=0.8" not in failed
    props = {q.get("name"): q.get("value") for q in suite.iter("property")}
    assert props["rows_flaky"] == "3" and props["repeats"] == "5"

    from typer.testing import CliRunner

    from assay.cli.main import app

    store = ["--store", str(tmp_path / "store.db")]
    shown = CliRunner().invoke(app, ["show", "rep", "--flaky", "--format", "json", *store])
    assert shown.exit_code == 0, shown.output
    flaky = json.loads(shown.output)
    assert sorted(x["row_id"] for x in flaky) == ["f0", "f1", "f2"]
    for x in flaky:
        scores = [e["score"] for e in x["repeats"]]
        assert len(scores) == 5 and min(scores) == 2.0 and max(scores) == 4.0
        assert all(e["reason"] == f"scored {int(e['score'])}" for e in x["repeats"])
    table = CliRunner().invoke(app, ["show", "rep", "--flaky", *store], env={"COLUMNS": "200"})
    assert "flaky rows of run" in table.output and "#4" in table.output and "scored 2" in table.output

    again = _cli(tmp_path, *args)
    assert again.returncode == 1
    assert len(fake.chat_requests) == asked                       # every repeat from the cache
    assert "60 calls, 60 from cache" in again.stdout
