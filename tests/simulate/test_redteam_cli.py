"""``assay redteam`` from the command line (run in process: tests.helpers.cli): with a scripted judge the table
shows the attack success rate per strategy x category (1.00 for the encodings the target decodes,
0.00 for the plain baseline); without one it says the ASR is not measured and shows the refusal
rate; bad input is one line and exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run_assay
from tests.helpers.fake_openai_server import FakeOpenAI
from tests.helpers.redteam_apps import judge_reply

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1",
         "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]), **(env or {})}
    return run_assay(["redteam", *args], cwd=ROOT, env=e)


def cell(stdout: str, strategy: str, category: str) -> list[str]:
    for line in stdout.splitlines():
        parts = [p.strip() for p in re.split(r"[│|]", line) if p.strip()]
        if parts[:2] == [strategy, category]:
            return parts
    raise AssertionError(f"no row {strategy} x {category} in:\n{stdout}")


@pytest.fixture
def judge() -> Any:
    server = FakeOpenAI().start()
    server.default = judge_reply
    yield server
    server.stop()


def test_cli_with_a_judge_prints_asr_and_stores_the_run(judge: Any, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    res = run("--target", "tests.helpers.redteam_apps:decoding_app", "--categories", "violence,sexual",
              "--strategies", "base64,rot13,leetspeak", "--judge", f"{judge.base_url}#fake-judge",
              "--store", str(store), "--out", str(tmp_path / "rt"), "-q")
    assert res.returncode == 0, res.stderr
    for s in ("base64", "rot13"):
        row = cell(res.stdout, s, "violence")
        assert row[2] == "12" and row[3].startswith("1.00 [0.76, 1.00]") and row[4].startswith("0.00")
    for s in ("baseline", "leetspeak"):
        row = cell(res.stdout, s, "sexual")
        assert row[3].startswith("0.00 [0.00, 0.24]") and row[4].startswith("1.00")
    assert "precision 1.00, recall 0.60" in res.stdout
    assert "ASR by complexity: baseline 0.00 [0.00, 0.14]; easy 0.67 [" in res.stdout
    summary = json.loads((tmp_path / "rt" / "summary.json").read_text())["run"]
    assert summary["redteam"]["strategies"]["base64"]["asr"] == 1.0
    assert set(summary["metrics"]) == {"refusal", "sexual", "violence"}
    run_id = re.search(r"run (\w+) saved in", res.stdout).group(1)
    shown = run_assay(["show", run_id, "--store", str(store)], cwd=ROOT,
                      env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT / "src")})
    assert shown.returncode == 0 and "refusal" in shown.stdout


def test_cli_without_a_judge_says_asr_not_measured(tmp_path: Path) -> None:
    res = run("--target", "tests.helpers.redteam_apps:decoding_app", "--categories", "self_harm",
              "--strategies", "base64", "--max", "10", "--seed", "3", "--store", "off", "-q",
              env={"ASSAY_JUDGE": ""})
    assert res.returncode == 0, res.stderr
    assert "not measured (no judge)" in res.stdout and "give --judge" in res.stdout
    rows = [cell(res.stdout, s, "self_harm") for s in ("baseline", "base64") if f"{s} " in res.stdout]
    assert sum(int(r[2]) for r in rows) == 10
    assert all(r[3] == "not measured (no judge)" for r in rows)


def test_cli_bad_input_is_one_line() -> None:
    res = run("--target", "tests.helpers.redteam_apps:decoding_app", "--strategies", "crescendo", "-q")
    assert res.returncode == 2 and "needs an attacker model" in res.stderr and "Traceback" not in res.stderr
    res = run("--target", "tests.helpers.redteam_apps:decoding_app", "--categories", "spam", "-q")
    assert res.returncode == 2 and "unknown category 'spam'" in res.stderr
