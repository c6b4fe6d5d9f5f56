"""MkDocs hook: the CLI reference page (docs/cli.md) gets every command's ``--help`` at build time.

The marker ``<!-- assay-cli-help -->`` in a page is replaced by one section per command of
``assay --help``, and one per subcommand of a command group (``assay bench perf``, ...), each
with the text ``assay ... --help`` prints, so the reference cannot drift from the code. The help
is rendered in this process through Click's test runner, 100 columns wide, without colour.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- assay-cli-help -->"
WIDTH = "100"


def help_text(runner: Any, app: Any, args: list[str]) -> str:
    """What ``assay ARGS --help`` prints (it must exit 0)."""
    result = runner.invoke(app, [*args, "--help"], prog_name="assay",
                           env={"COLUMNS": WIDTH, "NO_COLOR": "1", "TERM": "dumb"})
    if result.exit_code != 0:
        raise RuntimeError(f"assay {' '.join(args)} --help exited {result.exit_code}: {result.output}")
    return result.output.rstrip()


def section(level: int, args: list[str], text: str) -> str:
    return f"{'#' * level} `assay {' '.join(args)}`\n\n```text\n{text}\n```\n"


def reference() -> str:
    """Every command's help, in the order ``assay --help`` lists them."""
    import click
    import typer
    from typer.testing import CliRunner

    from assay.cli.main import app

    runner = CliRunner()
    root = typer.main.get_command(app)
    parts = [f"## `assay`\n\n```text\n{help_text(runner, app, [])}\n```\n"]
    for name in root.list_commands(click.Context(root)):
        parts.append(section(2, [name], help_text(runner, app, [name])))
        command = root.commands[name]          # loaded by the --help above
        if isinstance(command, click.Group):
            for sub in command.list_commands(click.Context(command)):
                parts.append(section(3, [name, sub], help_text(runner, app, [name, sub])))
    return "\n".join(parts)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())
