"""The ``assay`` command: one module per command group, mounted here.

Exit codes (the README's table): 0 finished (every gate passed); 1 a quality gate failed; 2 bad
input or usage, one line on stderr and never a traceback; 3 the work could not be completed as
asked (:class:`~assay.errors.RunIncomplete`); 130 interrupted by Ctrl-C, 143 by SIGTERM. An
interrupted run is left ``interrupted`` in the store and can be resumed.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import typer

from assay.cli import bench as bench_commands
from assay.cli import eval as eval_commands
from assay.cli import judge as judge_commands
from assay.cli import simulate as simulate_commands
from assay.cli import store as store_commands
from assay.cli import ui as ui_commands
from assay.cli.common import err, safe
from assay.errors import AssayError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate generative-AI applications and benchmark models.")
for group in (eval_commands.app, store_commands.app, ui_commands.app):
    app.registered_commands.extend(group.registered_commands)
app.add_typer(simulate_commands.app, name="simulate")
app.add_typer(bench_commands.app, name="bench")
app.add_typer(judge_commands.app, name="judge")

USAGE = 2
INTERRUPTED = 130          # 128 + SIGINT
TERMINATED = 143           # 128 + SIGTERM
# commands whose unfinished run is kept in the store and continued with --resume
RESUMABLE = (("eval",), ("bench", "quality"))

_terminated: list[int] = []


def _usage_errors() -> tuple[type[BaseException], ...]:
    """The exceptions of a bad command line: typer's own copy of click's (typer 0.2x carries
    one), and click's for the typer versions built on click."""
    found: list[type[BaseException]] = [t for t in (getattr(typer, "TyperException", None),) if t]
    try:
        import click
    except ImportError:
        return tuple(found)
    return (*found, click.ClickException)


def _on_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM stops a command the way Ctrl-C does, so an unfinished run is saved as
    ``interrupted``: it goes to the SIGINT handler in force (inside ``asyncio.run`` that one
    cancels the main task; elsewhere Python's, which raises KeyboardInterrupt)."""
    _terminated.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:   # SIGINT ignored (a background job of a non-interactive shell)
        raise KeyboardInterrupt


def _interrupted(args: list[str]) -> int:
    """The line and the exit code of an interrupted command (``args``: its command line)."""
    from assay.store import default_store_url

    terminated = bool(_terminated)
    words = [a for a in args if not a.startswith("-")]
    saved = any(a.startswith("--store") for a in args) or default_store_url() is not None
    resumable = saved and any(tuple(words[:len(c)]) == c for c in RESUMABLE)
    hint = ("; the run is kept as interrupted: run the same command with --resume to continue it"
            if resumable else "")
    err.print(("terminated (SIGTERM)" if terminated else "interrupted") + hint, highlight=False,
              markup=False, soft_wrap=True)
    return TERMINATED if terminated else INTERRUPTED


def run(args: list[str] | None = None) -> int:
    """Run the ``assay`` command (``args``: default ``sys.argv[1:]``) and return its exit code."""
    args = list(sys.argv[1:] if args is None else args)
    try:
        code: Any = app(args=args, standalone_mode=False)   # a typer.Exit(n) comes back as n
    except AssayError as exc:
        err.print(f"[red]error:[/red] {safe(exc)}", highlight=False, markup=True, soft_wrap=True)
        return getattr(exc, "exit_code", USAGE)
    except (KeyboardInterrupt, typer.Abort):     # Abort: Ctrl-C or end of input at a prompt
        return _interrupted(args)
    except Exception as exc:
        if not isinstance(exc, _usage_errors()):
            raise
        exc.show()                      # an unknown option, a bad value ...: click's message
        return USAGE
    if code == INTERRUPTED:             # typer turns a KeyboardInterrupt into Exit(130)
        return _interrupted(args)
    return code if isinstance(code, int) and not isinstance(code, bool) else 0


def main() -> None:
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = run()
    finally:
        signal.signal(signal.SIGTERM, previous)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
