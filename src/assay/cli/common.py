"""What every ``assay`` command shares: the consoles, option parsing, the store and target loaders."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import typer
from rich.console import Console

from assay.errors import AssayError

err = Console(stderr=True)
# Piped output (CI logs, files) gets a wide console so tables are not cut.
out = Console() if sys.stdout.isatty() else Console(width=160)

STORE_HELP = "Store path or database URL (default: $ASSAY_STORE, else .assay/assay.db)."
STORE_OPT = typer.Option(None, "--store", help=STORE_HELP)


def pairs(values: List[str], what: str) -> dict[str, str]:
    result = {}
    for v in values:
        for part in v.split(","):
            if not part.strip():
                continue
            if "=" not in part:
                raise AssayError(f"{what} {part!r} must look like name=value")
            k, _, val = part.partition("=")
            result[k.strip()] = val.strip()
    return result


def load_target(spec: str) -> Any:
    """``module:function`` (the current directory is importable), or an endpoint ``http(s)://HOST/v1#MODEL``:
    :func:`assay.engine.target.load_target`."""
    from assay.engine.target import load_target as load

    return load(spec)


def count_rows(data: str, data_format: str | None = None) -> int | None:
    """Lines of a regular JSONL file (the progress bar's total), else None: a stream
    (``-``, a FIFO) is never touched here, since it can be read only once."""
    p = Path(data)
    if data != "-" and p.is_file() and (data_format or p.suffix).lower().lstrip(".") in ("jsonl", "ndjson"):
        n = 0
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                n += chunk.count(b"\n")
        return n
    return None


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def open_store(url: Optional[str]) -> Any:
    from assay.store import open_store as _open

    st = _open(url or None)
    if st is None:
        raise AssayError("saving runs is turned off ($ASSAY_STORE=off); name a store with --store")
    return st


def when(ts: float | None) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "—"


@contextmanager
def progress_bar(label: str, total: int | None, quiet: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (off when ``quiet`` or not a terminal); yields ``advance(n)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, disable=quiet or not err.is_terminal, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


@contextmanager
def stage_progress(quiet: bool) -> Iterator[Callable[[str, int, int | None], None]]:
    """Progress bars on stderr, one per stage (none when ``quiet`` or not a terminal); yields
    ``update(stage, done, total)``; a stage's bar goes when it is done."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, disable=quiet or not err.is_terminal, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int | None) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)
            if total is not None and done >= total:
                bar.remove_task(tasks.pop(stage))

        yield update


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (numpy values and non-string keys allowed)."""
    import orjson

    typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
                            default=str).decode())


def print_sides(cmp: dict[str, Any], *, mode: bool = False) -> None:
    """The two runs of a comparison (``cmp["a"]``, ``cmp["b"]``), one line each; ``mode``: with its mode."""
    from rich.markup import escape

    for side in ("a", "b"):
        r = cmp[side]
        how = f" · {escape(str(r.get('mode') or '—'))}" if mode else ""
        out.print(f"{side.upper()}: [bold]{escape(str(r['ref']))}[/bold] ({escape(str(r.get('name') or ''))}) · model "
                  f"{escape(str(r.get('model') or '—'))}{how} · {when(r.get('created_at'))}", highlight=False,
                  soft_wrap=True)
