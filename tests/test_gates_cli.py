"""Quality gates and CI outputs as CI runs them: real `python -m assay.cli` processes, their exit
codes (0 passed, 1 a gate failed, 2 bad input), the gate table, --summary-md, --junit and
`show` / `compare --format json`."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.helpers.cli import run_assay

SRC = str(Path(__file__).resolve().parents[1] / "src")

COUNTRIES = [("France", "Paris"), ("Japan", "Tokyo"), ("Kenya", "Nairobi"), ("Peru", "Lima"), ("Italy", "Rome"),
             ("Egypt", "Cairo"), ("Chile", "Santiago"), ("Norway", "Oslo"), ("Spain", "Madrid"),
             ("Cuba", "Havana"), ("Ghana", "Accra"), ("Nepal", "Kathmandu"), ("Poland", "Warsaw"),
             ("Greece", "Athens"), ("Austria", "Vienna"), ("Sweden", "Stockholm"), ("Ireland", "Dublin"),
             ("Portugal", "Lisbon"), ("Hungary", "Budapest"), ("Finland", "Helsinki")]


def write_qa(path: Path, n: int = 40, worse: int = 0) -> str:
    """``n`` question-answer rows; the first ``worse`` answers replaced by a hedge: a real drop."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            country, capital = COUNTRIES[i % len(COUNTRIES)]
            answer = (f"The capital of {country} is {capital}." if i % 3 else
                      f"{capital} is the capital city of {country}.")
            fh.write(json.dumps({"id": f"q{i}", "query": f"What is the capital of {country}? ({i})",
                                 "response": "I am not sure, sorry." if i < worse else answer,
                                 "ground_truth": f"{capital} is the capital of {country}."}) + "\n")
    return str(path)


@pytest.fixture
def cli(tmp_path):
    store = str(tmp_path / "store.db")

    def run(*args, env=None, cwd=None):
        e = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}   # the test's own, not CI's
        e.update(ASSAY_STORE=store, ASSAY_CACHE="off", PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
                 **(env or {}))
        p = run_assay(args, env=e, cwd=cwd or tmp_path)
        assert "Traceback" not in p.stderr + p.stdout, p.stderr
        return p

    return run


def test_gates_that_pass_exit_0_and_a_failed_gate_exits_1_with_the_table(cli, tmp_path):
    data = write_qa(tmp_path / "qa.jsonl", 40, worse=10)
    ok = cli("eval", data, "-m", "f1_score,rougeL", "-q", "--gate", "f1_score.mean>=0.5",
             "--gate", "rougeL_f1_score.p90>0.5", "--gate", "f1_score.errored<=0")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "all 3 gates passed" in ok.stdout
    bad = cli("eval", data, "-m", "f1_score,rougeL", "-q", "--gate", "f1_score.mean>=0.5",
              "--gate", "f1_score.pass_rate>=0.9")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    table = bad.stdout[bad.stdout.index("gates"):]
    assert "f1_score.pass_rate>=0.9" in table and "FAIL" in table and ">= 0.9" in table
    assert "0.7500" in table                       # the figure: 30 of 40 rows pass
    assert "1 of 2 gates failed" in bad.stdout


@pytest.mark.parametrize("args,says", [
    (["--gate", "f1_score.mean=>0.5"], "is not a gate"),
    (["--gate", "f1_scor.mean>=0.5"], "did you mean 'f1_score'"),
    (["--gate", "f1_score.mean>=nan"], "finite"),
    (["--gate", "no-regression"], "needs --baseline"),
    (["--baseline", "no-such-run"], "no run 'no-such-run'"),
    (["--gate", "f1_score.mean>=0", "--max-error-rate", "2"], "--max-error-rate"),
])
def test_bad_gate_options_exit_2_with_one_line_before_the_run(cli, tmp_path, args, says):
    data = write_qa(tmp_path / "qa.jsonl", 4)
    p = cli("eval", data, "-m", "f1_score", "-q", *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith("error:") and says in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "assay results" not in p.stdout       # refused before anything was evaluated
    assert cli("runs").stdout.startswith("no runs")


def test_regression_gate_fails_on_a_planted_drop_and_passes_on_a_rerun(cli, tmp_path):
    good = write_qa(tmp_path / "qa.jsonl", 40)
    assert cli("eval", good, "-m", "f1_score,rougeL", "-q", "--name", "main-nightly").returncode == 0
    again = cli("eval", good, "-m", "f1_score,rougeL", "-q", "--name", "pr", "--baseline", "main-nightly",
                "--gate", "no-regression")
    assert again.returncode == 0, again.stdout
    assert "all 4 gates passed" in again.stdout and "baseline: run" in again.stdout
    # a small change (one answer of 40 worse) is noise, not a regression
    one = cli("eval", write_qa(tmp_path / "one.jsonl", 40, worse=1), "-m", "f1_score,rougeL", "-q",
              "--baseline", "main-nightly")
    assert one.returncode == 0, one.stdout
    dropped = write_qa(tmp_path / "dropped.jsonl", 40, worse=12)
    drop = cli("eval", dropped, "-m", "f1_score,rougeL", "-q", "--name", "pr", "--baseline", "main-nightly",
               "--gate", "no-regression:f1_score", "--summary-md", str(tmp_path / "s.md"),
               "--junit", str(tmp_path / "j.xml"))
    assert drop.returncode == 1, drop.stdout
    assert "no-regression:f1_score" in drop.stdout and "f1_score got lower" in drop.stdout
    assert "the gate failed" in drop.stdout
    md = (tmp_path / "s.md").read_text()
    assert "❌" in md and "**FAIL**" in md and "Δ \\-" not in md and "Δ -0." in md
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert suite.get("failures") == "2" and suite.get("tests") == "5"    # 1 gate, 4 outputs; 2 fail: the gate, f1_score
    # the same drop, with a minimum effect larger than it, is tolerated
    tolerated = cli("eval", dropped, "-m", "f1_score", "-q", "--baseline", "main-nightly", "--min-effect", "0.9")
    assert tolerated.returncode == 0 and "tolerated" in tolerated.stdout
    # the baseline is still the nightly run, not the later runs named "pr"
    assert "main-nightly" in again.stdout and "main-nightly" in drop.stdout


FLAKY_APP = '''
def app(query):
    n = int(query.rsplit("(", 1)[1].rstrip(")"))
    if n % 4 == 0:
        raise RuntimeError("upstream timed out")
    return "Paris is the capital of France."
'''


def test_errored_rows_fail_a_gate_only_when_there_are_too_many(cli, tmp_path):
    (tmp_path / "flaky_app.py").write_text(FLAKY_APP)
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "query": f"capital? ({i})", "ground_truth": "Paris is the "
                                        "capital of France."}) + "\n" for i in range(20)))
    p = cli("eval", str(data), "--target", "flaky_app:app", "-m", "f1_score", "-q", "--gate", "f1_score.pass_rate>=0.9")
    assert p.returncode == 1 and "too many errored rows: 5 of 20 (25%)" in p.stdout.replace("\n", " ").replace("│", "")
    p = cli("eval", str(data), "--target", "flaky_app:app", "-m", "f1_score", "-q", "--gate", "f1_score.pass_rate>=0.9",
            "--max-error-rate", "0.3")
    assert p.returncode == 0, p.stdout      # the errored rows were not counted as fails: pass rate 1.0


def test_summary_md_and_junit_are_written_and_the_step_summary_appended(cli, tmp_path):
    data = write_qa(tmp_path / "qa.jsonl", 12, worse=3)
    step = tmp_path / "step_summary.md"
    step.write_text("earlier step output\n")
    junit = tmp_path / "reports" / "assay.xml"
    p = cli("eval", data, "-m", "f1_score,exact_match", "-q", "--gate", "f1_score.mean>=0.1",
            "--gate", "exact_match.pass_rate>=0.5", "--summary-md", str(step), "--junit", str(junit),
            "--out", str(tmp_path / "out"), env={"GITHUB_STEP_SUMMARY": str(step)})
    assert p.returncode == 1, p.stdout
    md = step.read_text()
    assert md.startswith("earlier step output\n## ❌ assay")   # appended, as GitHub expects
    assert "### Gates: 1 of 2 gates failed" in md and "### Metrics" in md and "### Worst rows" in md
    assert "I am not sure, sorry" in md and "](" not in md and "http" not in md
    suite = ET.parse(junit).getroot()
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == ["assay.gates", "assay.gates", "assay.metrics.f1_score",
                                                   "assay.metrics.exact_match"]
    assert suite.get("tests") == "4" and suite.get("failures") == "2"
    assert cases[1].find("failure") is not None and cases[0].find("failure") is None
    props = {e.get("name"): e.get("value") for e in cases[2].find("properties")}
    assert float(props["mean"]) > 0.1 and props["evaluated"] == "12"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [g["passed"] for g in summary["run"]["gates"]] == [True, False]
    # outside GitHub the file is written afresh
    again = cli("eval", data, "-m", "f1_score", "-q", "--summary-md", str(step))
    assert again.returncode == 0 and step.read_text().startswith("## assay")


def test_show_and_compare_as_json(cli, tmp_path):
    good = write_qa(tmp_path / "qa.jsonl", 20)
    cli("eval", good, "-m", "f1_score", "-q", "--name", "a")
    cli("eval", write_qa(tmp_path / "b.jsonl", 20, worse=8), "-m", "f1_score", "-q", "--name", "b")
    shown = cli("show", "a", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    run = json.loads(shown.stdout)
    assert run["name"] == "a" and run["status"] == "completed" and run["aggregates"]["f1_score"]["evaluated"] == 20
    cmp = cli("compare", "a", "b", "--format", "json", "--worst", "3")
    assert cmp.returncode == 0, cmp.stderr
    got = json.loads(cmp.stdout)
    assert [r["name"] for r in got["runs"]] == ["a", "b"]
    (m,) = got["metrics"]
    d = m["deltas"][1]
    assert m["output"] == "f1_score" and d["delta"] < 0 and d["significant"] and d["better"] is False
    worse = got["worse_rows"][got["runs"][1]["id"]]["f1_score"]
    assert len(worse) == 3 and worse[0]["key"].startswith("q")
    p = cli("show", "a", "--format", "yaml")
    assert p.returncode == 2 and "use table or json" in p.stderr
