"""Fresh set-up time: `make demo` on a clean clone with empty caches, beside `pip install ragas`.

    python benchmarks/bench_setup.py [--repeat 1] [--no-anchor] [--rev HEAD] [--target demo]

Each round, in a new temporary folder:

1. ``git clone`` of this repository at ``--rev`` (committed files only, as a user gets them);
2. ``make demo`` in it with ``PIP_NO_CACHE_DIR=1``, ``ASSAY_WHEEL_CACHE`` and ``XDG_CACHE_HOME``
   pointed at empty folders (so no pip cache and no llama.cpp wheel built earlier can help):
   the wall time of the whole command, and of its install part (the ``assay setup: ... ready
   in N s`` lines of scripts/install_assay.sh);
3. the anchor: a new venv with the same Python and ``pip install ragas`` with no pip cache
   (what a user of another evaluation library waits for).

It prints each figure beside its anchor, best of ``--repeat``. Needs the network (or the index
pip is configured with) and ``make``; run on an idle machine for figures to compare.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READY = re.compile(r"^assay setup: (\w+) profile ready in (\d+) s$", re.M)


def timed(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, str]:
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
    took = time.perf_counter() - t0
    text = log.read_text(errors="replace")
    if proc.returncode != 0:
        sys.exit(f"bench_setup: {' '.join(cmd)} failed (exit {proc.returncode}); see {log}")
    return took, text


def fresh_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "ASSAY_STORE"):
        env.pop(name, None)
    env.update(PIP_NO_CACHE_DIR="1", ASSAY_WHEEL_CACHE=str(tmp / "wheel-cache"),
               XDG_CACHE_HOME=str(tmp / "xdg-cache"))
    (tmp / "wheel-cache").mkdir()
    (tmp / "xdg-cache").mkdir()
    return env


def one_setup(rev: str, target: str, keep: bool) -> tuple[float, dict[str, int], Path]:
    tmp = Path(tempfile.mkdtemp(prefix="assay-setup-"))
    env = fresh_env(tmp)
    clone = tmp / "assay"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", rev], check=True)
    took, text = timed(["make", target, f"PYTHON={sys.executable}"], clone, env, tmp / "make.log")
    profiles = {name: int(s) for name, s in READY.findall(text)}
    if not keep:
        subprocess.run(["rm", "-rf", str(clone / ".venv")], check=False)
    return took, profiles, tmp


def one_anchor() -> float:
    tmp = Path(tempfile.mkdtemp(prefix="assay-setup-anchor-"))
    env = fresh_env(tmp)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, env=env)
    timed([str(tmp / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "ragas"], tmp, env,
          tmp / "pip.log")
    took = time.perf_counter() - t0
    subprocess.run(["rm", "-rf", str(tmp / "venv")], check=False)
    return took


def mmss(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:04.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="rounds; the best of each is printed")
    ap.add_argument("--no-anchor", action="store_true", help="skip `pip install ragas`")
    ap.add_argument("--rev", default="HEAD", help="the commit to clone (default HEAD)")
    ap.add_argument("--target", default="demo", help="the make target to time (default demo)")
    ap.add_argument("--keep", action="store_true", help="keep the clones' venvs (else removed)")
    args = ap.parse_args()
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.rev], check=True,
                         capture_output=True, text=True).stdout.strip()

    best_setup, best_profiles, best_anchor = None, {}, None
    for i in range(args.repeat):
        if not args.no_anchor:
            a = one_anchor()
            print(f"round {i + 1}: pip install ragas (fresh venv, no cache): {mmss(a)}", flush=True)
            best_anchor = a if best_anchor is None else min(best_anchor, a)
        took, profiles, tmp = one_setup(args.rev, args.target, args.keep)
        shown = ", ".join(f"{k} install {v} s" for k, v in profiles.items())
        print(f"round {i + 1}: make {args.target} (clean clone {rev}, empty caches): {mmss(took)} "
              f"({shown}); log {tmp / 'make.log'}", flush=True)
        if best_setup is None or took < best_setup:
            best_setup, best_profiles = took, profiles

    print()
    print(f"{'what':<52} {'time':>16}")
    line = f"make {args.target}, clean clone, empty pip and wheel caches"
    print(f"{line:<52} {mmss(best_setup):>16}")
    for name, secs in best_profiles.items():
        print(f"{'  of which installing, ' + name + ' profile':<52} {mmss(secs):>16}")
    if best_anchor is not None:
        print(f"{'anchor: pip install ragas, fresh venv, no cache':<52} {mmss(best_anchor):>16}")
        print(f"{'ratio (make ' + args.target + ' / anchor)':<52} {best_setup / best_anchor:>16.2f}")
    print(f"best of {args.repeat}; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
