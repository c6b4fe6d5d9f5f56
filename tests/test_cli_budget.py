"""``assay eval --max-errors / --max-cost`` and ``assay show RUN --errors``, as a shell sees
them: a capped run prints one line and exits 3, keeps its rows (rows.jsonl, errors.jsonl, the
store), and the same command with ``--resume`` and a raised cap finishes it; bad caps exit 2."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from assay.store import Store
from tests.helpers.cli import run_assay
from tests.test_exit_codes import one_error_line  # the one-line error check the exit-code tests use

SRC = Path(__file__).resolve().parents[1] / "src"
N = 1200                      # three chunks of the engine's 512 rows (the last one shorter)

TARGET = '''
def answer(query):
    n = int(query.split()[1])
    if n % 2:
        raise ValueError(f"no answer for row {n}")
    return f"answer {n}"
'''


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ASSAY_STORE": str(tmp_path / "store.db"), "ASSAY_CACHE": "off"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    for k in ("ASSAY_JUDGE", "ASSAY_JUDGE_PRICE", "ASSAY_TARGET_PRICE"):
        env.pop(k, None)
    p = run_assay(args, env=env, cwd=tmp_path)
    assert "Traceback" not in p.stdout + p.stderr, p.stderr
    return p


def setup(tmp_path: Path) -> Path:
    (tmp_path / "flaky.py").write_text(TARGET)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"query": f"question {i}", "ground_truth": f"answer {i}"}) + "\n"
                            for i in range(N)))
    return data


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_max_errors_stops_eval_with_exit_3_and_resume_with_a_raised_cap_finishes(tmp_path):
    data = setup(tmp_path)
    args = ["eval", str(data), "--target", "flaky:answer", "-m", "f1_score", "-q", "-w", "1", "--name", "capped",
            "--out", "out"]
    p = cli(tmp_path, *args, "--max-errors", "100")
    assert p.returncode == 3, p.stderr
    line = one_error_line(p)
    assert "256 rows errored, reaching --max-errors 100" in line and "--resume" in line
    run = Store(str(tmp_path / "store.db")).get_run("capped")
    assert run["status"] == "interrupted" and run["rows_done"] == 512
    assert len(lines(tmp_path / "out" / "rows.jsonl")) == 512
    letters = lines(tmp_path / "out" / "errors.jsonl")
    assert len(letters) == 256 and letters[0]["row"] == 1
    assert "no answer for row 1" in letters[0]["errors"][0]["reason"]

    shown = cli(tmp_path, "show", "capped", "--errors", "--format", "json")
    assert shown.returncode == 0
    assert json.loads(shown.stdout) == letters          # the store's dead-letter is the file's
    table = cli(tmp_path, "show", "capped", "--errors", "--limit", "3")
    assert table.returncode == 0 and "no answer for row 1" in table.stdout and "253 more" in table.stdout

    p = cli(tmp_path, *args, "--resume", "--max-errors", "10000")
    assert p.returncode == 0, p.stderr
    said = " ".join(p.stdout.split())     # lines are wrapped at 160 columns (the store's path is long)
    assert "resumed with 512 rows already scored" in said and "errors.jsonl" in said
    assert [x["row"] for x in lines(tmp_path / "out" / "errors.jsonl")] == list(range(1, N, 2))
    assert Store(str(tmp_path / "store.db")).get_run("capped")["status"] == "completed"


def test_bad_caps_exit_2_with_one_line(tmp_path):
    data = setup(tmp_path)
    for flag, value in (("--max-cost", "0"), ("--max-cost", "nan"), ("--max-errors", "0")):
        p = cli(tmp_path, "eval", str(data), "-m", "f1_score", "-q", "--target", "flaky:answer", flag, value)
        assert p.returncode == 2, (flag, value, p.stderr)
        assert flag in one_error_line(p)


def test_show_errors_of_a_run_without_any(tmp_path):
    data = tmp_path / "ok.jsonl"
    data.write_text(json.dumps({"response": "a b", "ground_truth": "a b"}) + "\n")
    assert cli(tmp_path, "eval", str(data), "-m", "f1_score", "-q", "--name", "clean").returncode == 0
    p = cli(tmp_path, "show", "clean", "--errors")
    assert p.returncode == 0 and "has no errored rows" in p.stdout
