"""A quality run where nothing could be scored, and `--resume` with nothing to resume (issue 28 item
4): every item failing (errors, not wrong answers) exits 3 with one line and stores no benchmark;
`--resume` that finds no unfinished run says so in one line, and `--resume-from` a run that does
not exist is an error naming it."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from assay.store import Store
from tests.helpers.cli import run_assay

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks"


@pytest.fixture
def env(tmp_path: Path) -> dict:
    name = f"qfail_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("def nothing(prompt):\n    return None\n\n"
                                         "def right(prompt):\n    return '#### 7'\n")
    return {"name": name, "db": str(tmp_path / "s.db"), "cwd": tmp_path,
            "env": {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(tmp_path)]),
                    "ASSAY_CACHE": "off", "COLUMNS": "200"}}


def _quality(env: dict, model: str, *args: str) -> subprocess.CompletedProcess:
    return run_assay(["bench", "quality", "--model", model, "--tasks", str(TASKS / "arithmetic.yaml"), "--limit", "4",
                      "--store", env["db"], "-q", *args], cwd=env["cwd"], env=env["env"])


def _lines(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.strip()]


def test_every_item_failing_exits_3_with_one_line(env: dict) -> None:
    p = _quality(env, f"python:{env['name']}:nothing")
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and len(_lines(p.stderr)) == 1
    line = p.stderr.strip()
    assert "every item failed (4 of 4)" in line and "returned NoneType, not text" in line
    st = Store(env["db"])
    (run,) = st.list_runs()
    assert run["status"] == "failed" and run["id"] in line
    assert st.list_benchmarks(kind="quality") == []          # nothing scored: no benchmark to compare or rank
    st.close()


def test_a_server_refusing_every_call_exits_3(env: dict, fake) -> None:
    fake.models = ["m"]
    fake.default = {"status": 400, "json": {"error": {"message": "no such thing"}}}
    p = _quality(env, f"{fake.base_url}#m", "--api", "chat")
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and len(_lines(p.stderr)) == 1 and "every item failed" in p.stderr


def test_resume_with_nothing_to_resume_says_so(env: dict) -> None:
    p = _quality(env, f"python:{env['name']}:right", "--resume")
    assert p.returncode == 0, p.stderr
    notice = [x for x in _lines(p.stderr) if "nothing to resume" in x]
    assert len(notice) == 1 and "starting a new run" in notice[0]
    again = _quality(env, f"python:{env['name']}:right", "--resume-from", "feedfacecafe")
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "feedfacecafe" in again.stderr and len(_lines(again.stderr)) == 1
