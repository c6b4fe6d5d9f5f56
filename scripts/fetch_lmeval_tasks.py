#!/usr/bin/env python3
"""Fetch lm-evaluation-harness's own task files for the tests that run them unchanged (issue 30).

assay does not ship lm-eval's task YAML or their ``utils.py`` (their prompts and code are lm-eval's). This
downloads lm-eval's published wheel with pip (``pip download lm_eval==VERSION --no-deps``, PyPI, into
``.cache/wheels/``) and extracts only the task folders the tests read into ``.cache/lm_eval_tasks/lm_eval/tasks/``,
leaving out ``lm_eval/__init__.py`` and ``lm_eval/tasks/__init__.py``: ``.cache/lm_eval_tasks`` on ``sys.path``
then makes ``lm_eval.tasks.ifeval`` importable (as ifeval's own code imports it) without importing the harness.

Idempotent: a stamp names the version, the wheel's sha256 and the folders; when it matches, nothing is done.

    python scripts/fetch_lmeval_tasks.py [--dest DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

VERSION = "0.4.13"
# the task folders under lm_eval/tasks/ that the 16 tasks of tests/bench/test_lmeval_tasks16.py read
FOLDERS = ("arc", "mmlu/default", "gsm8k", "truthfulqa", "piqa", "super_glue/boolq", "humaneval",
           "bbh/cot_fewshot", "lambada", "mbpp", "ifeval", "winogrande", "hellaswag")
ROOT = Path(__file__).resolve().parent.parent
STAMP = ".fetched.json"


def wanted(member: str) -> bool:
    if not member.startswith("lm_eval/tasks/") or member.endswith("/"):
        return False
    rel = member[len("lm_eval/tasks/"):]
    return any(rel.startswith(f + "/") for f in FOLDERS)


def download(wheels: Path) -> Path:
    name = f"lm_eval-{VERSION}-py3-none-any.whl"
    wheel = wheels / name
    if not wheel.is_file():
        wheels.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", f"lm_eval=={VERSION}", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", str(wheels)]
        if subprocess.run(cmd).returncode != 0 or not wheel.is_file():
            sys.exit(f"fetch_lmeval_tasks: pip could not download {name} (needs PyPI): {' '.join(cmd)}")
    return wheel


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", default=str(ROOT / ".cache" / "lm_eval_tasks"))
    ap.add_argument("--wheels", default=str(ROOT / ".cache" / "wheels"))
    args = ap.parse_args()
    dest = Path(args.dest)
    stamp = dest / STAMP
    if stamp.is_file():
        try:
            got = json.loads(stamp.read_text())
        except ValueError:
            got = {}
        if got.get("version") == VERSION and got.get("folders") == list(FOLDERS) and \
                all((dest / "lm_eval" / "tasks" / f).is_dir() for f in FOLDERS):
            return 0
    wheel = download(Path(args.wheels))
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if wanted(m)]
        missing = [f for f in FOLDERS if not any(m.startswith(f"lm_eval/tasks/{f}/") for m in members)]
        if missing:
            sys.exit(f"fetch_lmeval_tasks: {wheel.name} has no task folder {', '.join(missing)}")
        for m in members:
            zf.extract(m, tmp)
    (tmp / STAMP).write_text(json.dumps({"version": VERSION, "wheel": wheel.name, "sha256": sha,
                                         "folders": list(FOLDERS)}, indent=1) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    print(f"fetch_lmeval_tasks: {len(members)} files of {wheel.name} (sha256 {sha[:12]}) in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
