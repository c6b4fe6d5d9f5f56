"""``assay bench ...``: model benchmarks (serving performance, cost) and their stored runs."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Benchmark models: serving performance and cost.")
