"""assay's pytest plugin as a user runs it: a test project written to a temporary folder and run
by pytest in a subprocess, on its own and with pytest-xdist (``-n 2``).

The project has a data set of six rows (two of them wrong) evaluated with a classic metric, a
metric of its own that gives a reason, and a judged metric asked of the scripted fake endpoint;
and two single cases. The JUnit report says which tests failed and with what message; the fake
endpoint counts the judge calls (the data set is evaluated once, also with two workers); the
store holds one run for the data set and one for the session's cases.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from assay.store import open_store

SRC = Path(__file__).resolve().parents[2] / "src"

ROWS = [
    ("paris", "Capital of France?", "Paris is the capital of France.", "Paris is the capital of France."),
    ("berlin", "Capital of Germany?", "It is Munich.", "Berlin is the capital of Germany."),
    ("rome", "Capital of Italy?", "Rome is the capital of Italy.", "Rome is the capital of Italy."),
    ("madrid", "Capital of Spain?", "Madrid is the capital of Spain.", "Madrid is the capital of Spain."),
    ("vienna", "Capital of Austria?", "Salzburg, I think.", "Vienna is the capital of Austria."),
    ("oslo", "Capital of Norway?", "Oslo is the capital of Norway.", "Oslo is the capital of Norway."),
]
FAILING_ROWS = {"berlin", "vienna"}
JUDGE_REASON = "the ideas jump from one place to another"

TEST_FILE = '''
import assay
from assay.scores import Score
from assay.testing import EvalSet, assert_scores, evaluate_case


@assay.metric(name="names_capital", threshold=1.0)
def names_capital(response):
    ok = "capital" in response.lower()
    return Score(value=1.0 if ok else 0.0,
                 reason="calls it the capital" if ok else "never calls the city the capital")


capitals = EvalSet("data/capitals.jsonl", metrics="f1_score,names_capital,coherence",
                   thresholds={"f1_score": 0.6, "coherence": 2}, name="capitals")


@capitals.each_row
def test_capital(assay_row):
    assert_scores(assay_row)


def test_whole_set(assay_eval):
    result = assay_eval(capitals)
    assert result.metrics["f1_score"]["evaluated"] == 6
    assert result.metrics["names_capital"]["pass_rate"] == 4 / 6


def test_case_passes():
    case = evaluate_case(query="Capital of Peru?", response="Lima is the capital of Peru.",
                         ground_truth="Lima is the capital of Peru.", metrics="f1_score,names_capital")
    assert_scores(case)
    assert case["f1_score"].score == 1.0


def test_case_judged_fails():
    assert_scores(evaluate_case(query="Capital of Chile?", response="Santiago. Also, penguins.",
                                metrics="coherence"))
'''


def plugin_registered() -> bool:
    return any(ep.name == "assay" for ep in entry_points(group="pytest11"))


def plugin_args() -> list[str]:
    """Load the plugin by name when this environment has not registered its entry point yet
    (an editable install made before the entry point existed); never both, which pytest refuses."""
    return [] if plugin_registered() else ["-p", "assay.testing.plugin"]


def make_project(root: Path) -> None:
    import json

    (root / "data").mkdir()
    with open(root / "data" / "capitals.jsonl", "w", encoding="utf-8") as fh:
        for rid, q, r, gt in ROWS:
            fh.write(json.dumps({"id": rid, "query": q, "response": r, "ground_truth": gt}) + "\n")
    (root / "test_quality.py").write_text(textwrap.dedent(TEST_FILE), encoding="utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")


def run_pytest(root: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider",
                           "--junitxml", str(root / "report.xml"), *args],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)


def outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """``{test name: (outcome, failure message)}`` from a JUnit report."""
    got = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failure = case.find("failure")
        error = case.find("error")
        if failure is not None:
            got[case.get("name")] = ("failed", (failure.get("message") or "") + "\n" + (failure.text or ""))
        elif error is not None:
            got[case.get("name")] = ("error", (error.get("message") or "") + "\n" + (error.text or ""))
        elif case.find("skipped") is not None:
            got[case.get("name")] = ("skipped", "")
        else:
            got[case.get("name")] = ("passed", "")
    return got


@pytest.mark.parametrize("workers,judge_from", [(None, "option"), ("2", "env")],
                         ids=["one-process-judge-option", "xdist-2-judge-env"])
def test_plugin_runs_a_test_project(tmp_path, fake, workers, judge_from):
    fake.default = {"content": '{"score": 2, "reason": "%s"}' % JUDGE_REASON}
    project = tmp_path / "project"
    project.mkdir()
    make_project(project)
    store = tmp_path / "results.db"
    judge = f"{fake.base_url}#fake-judge"
    env = {k: v for k, v in os.environ.items() if k not in ("ASSAY_JUDGE", "ASSAY_STORE", "PYTEST_ADDOPTS")}
    env.update(PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]), ASSAY_CACHE="off")
    args = ["--assay-store", str(store)]
    if judge_from == "option":
        args += ["--assay-judge", judge]
    else:
        env["ASSAY_JUDGE"] = judge
    if workers:
        args += ["-n", workers]

    p = run_pytest(project, args, env)

    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]    # tests failed, nothing else went wrong
    got = outcomes(project / "report.xml")
    for rid, *_ in ROWS:
        want = "failed" if rid in FAILING_ROWS else "passed"
        assert got[f"test_capital[{rid}]"][0] == want, (rid, got[f"test_capital[{rid}]"])
    berlin = got["test_capital[berlin]"][1]
    assert "case 'berlin' failed 2 check(s)" in berlin
    assert "f1_score:" in berlin and "below threshold 0.6" in berlin
    assert "names_capital: 0 below threshold 1" in berlin and "never calls the city the capital" in berlin
    assert "response: 'It is Munich.'" in berlin
    assert got["test_whole_set"][0] == "passed"
    assert got["test_case_passes"][0] == "passed"
    judged = got["test_case_judged_fails"]
    assert judged[0] == "failed" and "coherence: 2 below threshold 3" in judged[1] and JUDGE_REASON in judged[1]

    # the data set was evaluated once (six judge calls), whichever worker ran its rows, plus one case
    assert len(fake.chat_requests) == len(ROWS) + 1
    if workers:
        assert "2 workers" in p.stdout, p.stdout[-2000:]

    st = open_store(str(store))
    runs = st.list_runs()
    assert sorted(r["name"] for r in runs) == ["capitals", "pytest"]
    by_name = {r["name"]: r for r in runs}
    assert by_name["capitals"]["status"] == "completed" and by_name["capitals"]["rows_done"] == len(ROWS)
    cases = list(st.iter_scored(by_name["pytest"]["id"]))
    assert sorted(c.row_id for c in cases) == ["test_quality.py::test_case_judged_fails",
                                               "test_quality.py::test_case_passes"]
    judged_case = next(c for c in cases if c.row_id.endswith("judged_fails"))
    assert judged_case.scores["coherence"]["coherence"].reason == JUDGE_REASON
    assert judged_case.scores["coherence"]["coherence"].passed is False
    shown = st.load_result(by_name["pytest"]["id"])
    assert shown.metrics["f1_score"]["evaluated"] == 1 and shown.metrics["coherence"]["failed"] == 1
    assert "case(s) saved as run" in p.stdout and "capitals: 6 rows evaluated" in p.stdout


def test_a_bad_data_set_fails_its_tests_with_one_line(tmp_path):
    """A metric the data cannot feed: every row's test errors with the planner's message, once."""
    project = tmp_path / "project"
    project.mkdir()
    make_project(project)
    (project / "test_quality.py").write_text(textwrap.dedent('''
        from assay.testing import EvalSet, assert_scores

        bad = EvalSet("data/capitals.jsonl", metrics="groundedness")

        @bad.each_row
        def test_row(assay_row):
            assert_scores(assay_row)
    '''), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("ASSAY_JUDGE", "ASSAY_STORE", "PYTEST_ADDOPTS")}
    env.update(PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]), ASSAY_CACHE="off")
    p = run_pytest(project, [], env)
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-3000:]
    got = outcomes(project / "report.xml")
    assert len(got) == len(ROWS)
    for outcome, message in got.values():
        assert outcome == "error" and "capitals" in message and "contexts" in message, message
    assert "Traceback" not in p.stdout


def test_a_missing_data_file_is_a_one_line_collection_error(tmp_path):
    (tmp_path / "test_missing.py").write_text(textwrap.dedent('''
        from assay.testing import EvalSet, assert_scores

        gone = EvalSet("nowhere.jsonl", metrics="f1_score")

        @gone.each_row
        def test_row(assay_row):
            assert_scores(assay_row)
    '''), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    p = run_pytest(tmp_path, [], env)
    assert p.returncode == 2, p.stdout[-3000:]          # pytest: interrupted by a collection error
    assert f"nowhere: {tmp_path / 'nowhere.jsonl'}: no such file or directory" in p.stdout
    assert "evalset.py" not in p.stdout and "Traceback" not in p.stdout


def test_the_declared_entry_point_turns_the_plugin_on(tmp_path):
    """pyproject's pytest11 entry point, installed as a distribution's metadata would be (so the
    test does not wait for a reinstall): pytest loads the plugin with no -p."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml here needs Python 3.11's tomllib")
    declared = tomllib.loads((SRC.parent / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert declared == {"assay": "assay.testing.plugin"}
    dist = tmp_path / "site" / "assay_entry_point_probe-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: assay-entry-point-probe\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(tmp_path / "site"), env.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "--assay-judge" in p.stdout and "--assay-store" in p.stdout and "assay_store" in p.stdout
