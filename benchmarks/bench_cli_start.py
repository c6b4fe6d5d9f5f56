"""How fast the ``assay`` command starts, beside anchors, side by side in one run.

Prints, best of N (the runs of every command interleaved, so machine load hits them alike), the
wall time and the CPU time (user + system of the child) of:

* ``python -c pass``                       the interpreter alone (anchor)
* ``ruff --version`` / ``uv --version``    compiled CLIs, when installed (anchors)
* ``assay --help``                         goal < 0.25 s
* ``assay eval ONE_ROW --metrics f1_score`` goal < 0.5 s: one row, the run saved in a new SQLite store

how many modules ``import assay.cli.main`` and ``assay --help`` load, with any heavy package
among them, and where a one-row eval's start goes: the CPU time of importing, in a fresh
interpreter and in this order, what it needs (each figure without what an earlier line loaded). With ``--baseline-src DIR`` (a ``src`` folder of another checkout, e.g.
``git archive 166134e src | tar -x -C /tmp/base``) the assay commands are also run from it, for a before/after
ratio in the same run. Run::

    python benchmarks/bench_cli_start.py                  # best of 7
    python benchmarks/bench_cli_start.py -n 11 --baseline-src /tmp/base/src
    python -X importtime -m assay.cli --help 2> imports.txt   # what each module costs
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "pandas", "pyarrow", "sqlalchemy", "pydantic", "jinja2", "assay.engine", "assay.store",
         "assay.metrics", "assay.models")
ROW = {"query": "What is the boiling point of water at sea level?",
       "response": "Water boils at 100 degrees Celsius at sea level.",
       "ground_truth": "100 degrees Celsius (212 °F)."}


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``cmd`` (which must exit 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def modules(src: str, code: str) -> list[str]:
    probe = code + "\nimport json, sys\nprint('\\nMODULES=' + json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], env=env_for(src), capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.rsplit("MODULES=", 1)[1])


def env_for(src: str | None) -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "100"}
    # an installed package runs from bytecode: let the first run write it (the best of N is then a warm one)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src:
        env["PYTHONPATH"] = src
    return env


def main() -> None:  # noqa: C901
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--repeat", type=int, default=7, help="runs of each command; the best is kept (default 7)")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the assay source to time (default: this checkout's)")
    ap.add_argument("--baseline-src", help="another checkout's src folder, timed beside it")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="assay-cli-start-"))
    data = work / "one.jsonl"
    data.write_text(json.dumps(ROW) + "\n")
    py = sys.executable
    commands: list[tuple[str, list[str], dict[str, str]]] = [("python -c pass (anchor)", [py, "-c", "pass"],
                                                              env_for(None))]
    for tool in ("ruff", "uv"):
        exe = shutil.which(tool)
        if exe:
            commands.append((f"{tool} --version (anchor)", [exe, "--version"], env_for(None)))
    sources = [("", str(Path(args.src).resolve()))]          # absolute: the commands run in a temporary folder
    if args.baseline_src:
        sources.append((" [baseline]", str(Path(args.baseline_src).resolve())))
    stores: list[Path] = []
    for tag, src in sources:
        commands.append((f"assay --help{tag}", [py, "-m", "assay.cli", "--help"], env_for(src)))
    for tag, src in sources:
        store = work / f"store{len(stores)}.db"
        stores.append(store)
        commands.append((f"assay eval (1 row, f1_score, SQLite store){tag}",
                         [py, "-m", "assay.cli", "eval", str(data), "--metrics", "f1_score", "--store", str(store),
                          "-q"], env_for(src)))

    best: dict[str, tuple[float, float]] = {}
    for i in range(args.repeat):
        for label, cmd, env in commands:
            wall, cpu = timed(cmd, env, str(work))
            w, c = best.get(label, (float("inf"), float("inf")))
            best[label] = (min(w, wall), min(c, cpu))
        print(f"  run {i + 1}/{args.repeat} done", file=sys.stderr, flush=True)
        for s in stores:                      # every eval run opens a fresh store
            for p in s.parent.glob(s.name + "*"):
                p.unlink()

    print(f"best of {args.repeat} (seconds; wall and CPU = user + system of the process); "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'command':<58} {'wall':>7} {'cpu':>7}")
    for label, _, _ in commands:
        w, c = best[label]
        print(f"{label:<58} {w:7.3f} {c:7.3f}")
    if args.baseline_src:
        for what in ("assay --help", "assay eval (1 row, f1_score, SQLite store)"):
            (w, c), (bw, bc) = best[what], best[what + " [baseline]"]
            print(f"{what}: baseline / this = {bw / w:.2f}x wall, {bc / c:.2f}x cpu")
    for label, code in (("import assay.cli.main", "import assay.cli.main"),
                        ("assay --help", "from assay.cli.main import run\nrun(['--help'])")):
        for tag, src in sources:
            mods = modules(src, code)
            heavy = sorted({h for h in HEAVY for m in mods if m == h or m.startswith(h + ".")})
            print(f"{label}{tag}: {len(mods)} modules loaded; heavy: {', '.join(heavy) or 'none'}")
    parts = ("typer", "rich.console", "numpy", "pydantic", "sqlalchemy", "assay.store", "assay.engine.evaluate")
    probe = ("import time, json\nout = {}\nfor m in %r:\n    t = time.process_time()\n    __import__(m)\n"
             "    out[m] = time.process_time() - t\nprint(json.dumps(out))" % (parts,))
    costs: dict[str, float] = {}
    for _ in range(args.repeat):
        got = json.loads(subprocess.run([py, "-c", probe], env=env_for(sources[0][1]), capture_output=True, text=True,
                                        check=True).stdout)
        costs = {m: min(costs.get(m, float("inf")), s) for m, s in got.items()}
    print("CPU ms to import, best of %d: " % args.repeat + ", ".join(f"{m} {s * 1000:.0f}" for m, s in costs.items()))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
