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


@contextmanager
def _as_a_process_would(env: Mapping[str, str] | None, cwd: str | Path | None, stdin: str) -> Iterator[None]:
    """``os.environ`` set to ``env`` (the whole of it), ``cwd`` the working directory and ``stdin``
    the standard input while the command runs; all three put back afterwards."""
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.StringIO(stdin)
        yield
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


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
