"""What every ``assay`` command shares: the consoles, option parsing, the store and target loaders."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from assay.errors import AssayError

# emoji=False: ":smile:" in a row or a run name is printed as typed, not turned into a picture.
err = Console(stderr=True, emoji=False)
# Piped output (CI logs, files) gets a wide console so tables are not cut.
out = Console(emoji=False) if sys.stdout.isatty() else Console(width=160, emoji=False)

STORE_HELP = "Store path or database URL, or off (default: $ASSAY_STORE, else .assay/assay.db)."
STORE_OPT = typer.Option(None, "--store", help=STORE_HELP)


# Terminal escape sequences: CSI (ESC [ or the C1 byte 0x9B, parameters, a final byte), OSC / DCS / SOS / PM /
# APC strings up to their terminator (BEL, ESC \ or 0x9C), and two-byte ESC sequences (ESC 7, ESC c ...).
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*?(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]")
# What is left after those: C0 controls but tab and newline, DEL, C1 controls, and the bidirectional
# embeddings, overrides and isolates (U+202A-202E, U+2066-2069) that make text read in another order.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# Lone surrogates: bytes that are not UTF-8 in a file or folder name (Python's surrogateescape) and broken
# UTF-16 pairs; neither can be written to a UTF-8 terminal.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def plain(text: Any) -> str:
    """``text`` (anything; ``str()`` of it) without what a terminal would act on rather than show: escape
    sequences, control characters (tab and newline stay), bidirectional overrides; bytes that were not UTF-8
    shown as ``\\xNN``. For output that is not Rich markup (prompts, ``Text`` objects)."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():                                   # the common case: nothing to take out
        return s
    s = _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", s))
    return _SURROGATE.sub(_surrogate, s)


def text_arg(value: str | None) -> str | None:
    """A text argument that names something to keep (a run's ``--name``): bytes in it that were not UTF-8
    written as ``\\xNN``, as :func:`plain` shows them, so that the store and JSON can hold it."""
    return value if value is None or value.isprintable() else _SURROGATE.sub(_surrogate, value)


def safe(text: Any) -> str:
    """``text`` made fit to print through Rich: :func:`plain`, then markup-escaped, so that ``[/b]``,
    ``[link=...]`` or ``[bold]`` in a row, a run name, a file name or an error message is shown as written and
    never read as markup. Every piece of data or name that reaches ``out``/``err``/a ``Table`` goes through it."""
    from rich.markup import escape

    return escape(plain(text))


def pairs(values: list[str], what: str) -> dict[str, str]:
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
    (``-``, a FIFO) is never touched here, since it can be read only once; nor are OTLP traces
    (``.otlp.jsonl``: a line is a batch of spans, not a row)."""
    p = Path(data)
    if data != "-" and p.is_file() and (data_format or p.suffix).lower().lstrip(".") in ("jsonl", "ndjson") \
            and ".otlp." not in p.name.lower():
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
    return safe(v)


def store_or_off(url: str | None) -> Any:
    """The store results are saved in, or None where saving is off (``--store off``, ``$ASSAY_STORE=off``)."""
    from assay.store import open_store as _open

    return _open(url or None)


def open_store(url: str | None) -> Any:
    """The store a command reads; saving turned off is an error naming how it was turned off."""
    st = store_or_off(url)
    if st is None:
        how = "--store off" if url and url.strip() else "$ASSAY_STORE=off"
        raise AssayError(f"the store is turned off ({how}); name a store with --store")
    return st


def when(ts: float | None) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "—"


@contextmanager
def progress_bar(label: str, total: int | None, quiet: bool) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr (off when ``quiet`` or not a terminal); yields ``advance(n)``."""
    if quiet or not err.is_terminal:        # no bar: rich.progress is not even imported
        yield lambda n: None
        return
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
                tasks[stage] = bar.add_task(safe(stage), total=total)     # a stage may name a task from a file
            bar.update(tasks[stage], completed=done, total=total)
            if total is not None and done >= total:
                bar.remove_task(tasks.pop(stage))

        yield update


# Characters JSON may carry raw but a terminal acts on: DEL, C1 controls, bidirectional overrides and isolates.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (numpy values and non-string keys allowed); the characters a terminal
    would act on are written as ``\\uXXXX`` escapes, so the JSON is the same once parsed."""
    import orjson

    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
                        default=str).decode()
    typer.echo(_JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def print_sides(cmp: dict[str, Any], *, mode: bool = False) -> None:
    """The two runs of a comparison (``cmp["a"]``, ``cmp["b"]``), one line each; ``mode``: with its mode."""
    for side in ("a", "b"):
        r = cmp[side]
        how = f" · {safe(r.get('mode') or '—')}" if mode else ""
        out.print(f"{side.upper()}: [bold]{safe(r['ref'])}[/bold] ({safe(r.get('name') or '')}) · model "
                  f"{safe(r.get('model') or '—')}{how} · {when(r.get('created_at'))}", highlight=False,
                  soft_wrap=True)
