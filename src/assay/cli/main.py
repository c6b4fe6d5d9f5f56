"""The ``assay`` command: one module per command group, mounted here.

Problems with the user's input end with one line on stderr and exit code 2, never a
traceback.
"""

from __future__ import annotations

import typer

from assay.cli import bench as bench_commands
from assay.cli import eval as eval_commands
from assay.cli import judge as judge_commands
from assay.cli import simulate as simulate_commands
from assay.cli import store as store_commands
from assay.cli import ui as ui_commands
from assay.cli.common import err
from assay.errors import AssayError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate generative-AI applications and benchmark models.")
for group in (eval_commands.app, store_commands.app, ui_commands.app):
    app.registered_commands.extend(group.registered_commands)
app.add_typer(simulate_commands.app, name="simulate")
app.add_typer(bench_commands.app, name="bench")
app.add_typer(judge_commands.app, name="judge")


def main() -> None:
    try:
        app(standalone_mode=False)
    except AssayError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False, markup=True, soft_wrap=True)
        raise SystemExit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        raise SystemExit(130)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code)
    except Exception as exc:  # click usage errors and the like
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            raise SystemExit(2)
        if isinstance(exc, click.exceptions.Abort):
            raise SystemExit(130)
        raise


if __name__ == "__main__":
    main()
