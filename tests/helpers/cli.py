"""The ``assay`` command run in the test's own process, for the tests that check what a command
prints, returns and stores rather than the process itself (its start-up, signals, a terminal):
the same command line, environment and working directory a ``python -m assay.cli`` subprocess
would get, without starting an interpreter and importing assay again for each command.

What it gives back is what the subprocess gave (a ``CompletedProcess`` with the exit code and the
text of stdout and stderr); an exception the command does not handle ends it with status 1 and
its traceback on stderr, as it would end the process."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path


def _fresh_dirs(env: Mapping[str, str] | None, cwd: str | Path | None) -> list[str]:
    """The folders a process started with ``env`` in ``cwd`` could import from that this one
    cannot: its ``PYTHONPATH`` entries and its working directory, less those on ``sys.path``."""
    known = {os.path.realpath(p or ".") for p in sys.path}
    given = [*((env or {}).get("PYTHONPATH", "").split(os.pathsep)), *([str(cwd)] if cwd is not None else [])]
    return [d for d in dict.fromkeys(os.path.realpath(g) for g in given if g) if d not in known]


def _under(module: object, dirs: list[str]) -> bool:
    f = getattr(module, "__file__", None)
    return bool(f) and any(os.path.realpath(f).startswith(d + os.sep) for d in dirs)


@contextmanager
def _as_a_process_would(env: Mapping[str, str] | None, cwd: str | Path | None, stdin: str) -> Iterator[None]:
    """``os.environ`` set to ``env`` (the whole of it), ``cwd`` the working directory, its
    ``PYTHONPATH`` importable and ``stdin`` the standard input while the command runs; afterwards
    all of it put back, and the modules imported from those folders forgotten (a process of its
    own would not have kept them for the next command)."""
    saved_env, saved_cwd, saved_stdin, saved_path = dict(os.environ), os.getcwd(), sys.stdin, list(sys.path)
    fresh, before = _fresh_dirs(env, cwd), set(sys.modules)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.path[:0] = fresh
        sys.stdin = io.StringIO(stdin)
        yield
    finally:
        sys.stdin = saved_stdin
        sys.path[:] = saved_path
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for name in set(sys.modules) - before:
            if _under(sys.modules[name], fresh):
                del sys.modules[name]


def run_assay(args: list[str] | tuple[str, ...], *, env: Mapping[str, str] | None = None,
              cwd: str | Path | None = None, input: str = "") -> subprocess.CompletedProcess[str]:
    """``assay ARGS`` as ``subprocess.run([python, "-m", "assay.cli", *ARGS], capture_output=True,
    text=True, env=env, cwd=cwd, input=input)`` would run it, in this process."""
    from assay.cli.main import run

    args = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with _as_a_process_would(env, cwd, input), redirect_stdout(out), redirect_stderr(err):
        try:
            code = run(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["assay", *args], code, out.getvalue(), err.getvalue())
