"""The ``assay`` command: one module per command group, mounted here.

Exit codes (the README's table): 0 finished (every gate passed); 1 a quality gate failed; 2 bad
input or usage, one line on stderr and never a traceback; 3 the work could not be completed as
asked (:class:`~assay.errors.RunIncomplete`); 130 interrupted by Ctrl-C, 143 by SIGTERM. An
interrupted run is left ``interrupted`` in the store and can be resumed.
"""

from __future__ import annotations

import signal
import sys
from importlib import import_module
from typing import Any

import typer
from typer.core import TyperGroup

from assay.cli.common import err, safe
from assay.errors import AssayError

# Every command, in the order ``assay --help`` lists them: (name, module, help line). A command's
# module is imported only when that command runs (or its own --help is asked), so ``assay --help``
# and each command start without loading the others' dependencies. A flat command is the command of
# that name in the module's ``app``; a group (simulate, bench, judge) is the module's ``app`` itself.
# The help lines are the commands' own docstrings / ``Typer(help=...)``; tests/test_cli_start.py
# checks that they agree.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("eval", "assay.cli.eval", "Evaluate a data set, save the run in the store and print a summary table."),
    ("metrics", "assay.cli.eval", "List every metric with the fields it needs and its scale."),
    ("runs", "assay.cli.store", "List the runs in the store, newest first."),
    ("show", "assay.cli.store", "Show one run's summary (or, with --errors, its errored rows)."),
    ("compare", "assay.cli.store",
     "Per-metric deltas with 95% confidence intervals, and the rows that got worse."),
    ("delete", "assay.cli.store", "Delete runs, their rows and scores."),
    ("export", "assay.cli.store", "Export a stored run's rows (and, for json, its aggregates)."),
    ("ui", "assay.cli.ui", "The local dashboard: runs, rows, reasons, comparisons and trends in the browser."),
    ("report", "assay.cli.ui", "Write one self-contained HTML report of a run (opens offline, no script)."),
    ("simulate", "assay.cli.simulate",
     "Simulate adversarial and ordinary users against an app, to build evaluation sets."),
    ("redteam", "assay.cli.redteam",
     "Attack an app with objectives per risk category and strategies; print the attack success rate."),
    ("bench", "assay.cli.bench",
     "Benchmark models: serving performance, cost, quality on tasks, embedding models."),
    ("judge", "assay.cli.judge", "Measure a judge before trusting it, probe what it can do; list and show the checks kept."),
    ("monitor", "assay.cli.monitor",
     "Watch a live app: receive its OpenTelemetry traces and keep them in the store."),
    ("review", "assay.cli.review",
     "Queues of a run's rows for people to label, and the agreement of reviewers and judge."),
)
GROUPS = frozenset({"simulate", "bench", "judge", "monitor", "review"})


def load_command(name: str) -> Any:
    """The click command of ``assay NAME``, its module imported now."""
    module = next(m for n, m, _ in COMMANDS if n == name)
    group = typer.main.get_group(import_module(module).app)
    if name in GROUPS:
        group.name = name
        return group
    return group.commands[name]


class _Unloaded(typer.core.TyperCommand):
    """What ``assay --help`` lists for a command whose module is not imported yet."""


class LazyGroup(TyperGroup):
    """The top-level ``assay`` group: it lists :data:`COMMANDS` from their help lines and imports a
    command's module only when the command line names it."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, _, help_line in COMMANDS:
            self.commands.setdefault(name, _Unloaded(name=name, help=help_line, callback=None))

    def real_command(self, name: str) -> Any:
        command = self.commands.get(name)
        if isinstance(command, _Unloaded):
            command = self.commands[name] = load_command(name)
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in self.commands:
            self.real_command(args[0])
        return super().resolve_command(ctx, args)


app = typer.Typer(cls=LazyGroup, add_completion=False, no_args_is_help=True,
                  help="Evaluate generative-AI applications and benchmark models.")


@app.callback()
def _root() -> None:
    pass


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
