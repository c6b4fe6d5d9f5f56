"""``assay bench leaderboard``: every model in the store on one table — quality index and
per-task scores, latency, throughput and cost indexes, embedding main scores — sorted and
filtered, with trade-off charts (quality against cost, latency or throughput) and their Pareto
frontier (:mod:`assay.bench.board`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from assay.cli.common import STORE_OPT, err, open_store, out, print_json, safe
from assay.errors import AssayError

if TYPE_CHECKING:
    from assay.bench.board import Leaderboard

ALIASES = {"quality": "quality_index", "cost": "cost_index", "latency": "latency_index",
           "throughput": "throughput_index"}


def leaderboard_cmd(
    sort: str | None = typer.Option(None, "--sort", help="Column to sort by: quality_index (the default), "
                                       "latency_index, throughput_index, cost_index, quality:TASK, embed:TASK, "
                                       "model, or quality / latency / throughput / cost. Best first; missing last."),
    ascending: bool | None = typer.Option(None, "--asc/--desc", help="Force the order (default: best first)."),
    filter_text: str | None = typer.Option(None, "--filter", help="Only models whose name holds this text."),
    kind: str = typer.Option("all", "--kind", help="Which results: quality, perf, embed or all (the cost index "
                             "is always shown)."),
    runs: str = typer.Option("latest", "--runs", help="latest: one row per model, from its latest result of "
                             "each kind; all: one row per stored result."),
    plot: str | None = typer.Option(None, "--plot", help="Write a trade-off chart: quality-cost, "
                                       "quality-latency or quality-throughput (with -o FILE.svg)."),
    out_file: Path | None = typer.Option(None, "--out", "-o", help="The .svg file --plot writes."),
    prices: Path | None = typer.Option(None, "--prices", help="Price table file (default: $ASSAY_PRICES, "
                                          "else the shipped table)."),
    wide: bool = typer.Option(False, "--wide", help="Also show each task's score (quality:TASK, embed:TASK); "
                              "by default only the indexes are shown when there are any."),
    as_json: bool = typer.Option(False, "--json", help="Print the leaderboard as JSON (every column)."),
    pin: list[str] = typer.Option([], "--pin", help="KIND=REF: use this stored result (a ref, ref prefix or name; "
                                  "see `assay bench list`) for its model's KIND figures instead of the latest. "
                                  "Repeatable."),
    alias: list[str] = typer.Option([], "--alias", help="SPELLING=NAME: show the results of a model spelled "
                                    "SPELLING (or identified as it) as NAME, one row with NAME's. Repeatable."),
    store: str | None = STORE_OPT,
) -> None:
    """Rank the models in the store on quality, speed, cost and embedding scores side by side.

    Quality, latency, throughput, cost and embedding scores, one row a model; results that are not
    comparable are shown apart, with the reason."""
    from assay.bench.board import TRADEOFFS, build_leaderboard
    from assay.models.price_table import active_table

    if plot is not None and plot not in TRADEOFFS:
        raise AssayError(f"--plot must be one of {', '.join(TRADEOFFS)}, not {plot!r}")
    if plot is not None and out_file is None:
        raise AssayError("--plot needs -o FILE.svg: where to write the chart")
    if out_file is not None and plot is None:
        raise AssayError("-o writes a chart: name it with --plot (" + ", ".join(TRADEOFFS) + ")")
    table = active_table(prices) if prices is not None else None
    pins, aliases = _pairs(pin, "--pin", "KIND=REF"), _pairs(alias, "--alias", "SPELLING=NAME")
    st = open_store(store)
    board = build_leaderboard(st, kinds=kind, runs=runs, table=table, aliases=dict(aliases),
                              pins=_grouped(pins)).filtered(filter_text)
    key = ALIASES.get(sort or "", sort)
    descending = None if ascending is None else not ascending
    if key and key != "model":
        board.column(key)                                   # an unknown column: one clear error
    if plot is not None and out_file is not None:
        from assay.ui.leaderboard_charts import svg_file, tradeoff_chart

        data = board.tradeoff(plot)
        try:
            out_file.write_text(svg_file(tradeoff_chart(data)), encoding="utf-8")
        except OSError as exc:
            raise AssayError(f"cannot write {out_file}: {exc.strerror or exc}") from None
        on = sum(1 for p in data["points"] if p["pareto"])
        err.print(f"wrote {safe(plot)} to {safe(out_file)}: {len(data['points'])} model(s), {on} on the "
                  f"Pareto frontier" + ("; left out: " + "; ".join(safe(f"{x['model']} ({x['why']})")
                                                                     for x in data["left_out"])
                                        if data["left_out"] else ""), highlight=False, soft_wrap=True)
    if as_json:
        print_json(board.as_dict(key, descending))
        return
    if not board.rows:
        what = "benchmark results" if kind in ("all", "") else f"{kind} results"
        out.print(f"no {safe(what)} in {safe(st.display_url)}" + (" match" if filter_text else ""),
                  highlight=False)
        return
    render_leaderboard(board, key, descending, st.display_url, wide=wide)


def _pairs(values: list[str], opt: str, form: str) -> list[tuple[str, str]]:
    """``A=B`` options as pairs; :class:`AssayError` (one line, exit 2) for one that is not."""
    out = []
    for v in values:
        a, sep, b = str(v).partition("=")
        if not sep or not a.strip() or not b.strip():
            raise AssayError(f"{opt} {v!r}: write {form}")
        out.append((a.strip().lower() if opt == "--pin" else a.strip(), b.strip()))
    return out


def _grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in pairs:
        out.setdefault(k, []).append(v)
    return out


def _runs_cell(r: Any) -> str:
    """Which stored run each kind's figures of row ``r`` came from: ``quality 1a2b3c4d · perf 9f8e7d6c``."""
    return " · ".join(f"{k} {ref[:8]}" + (" (pinned)" if r.sources.get(k, {}).get("pinned") else "")
                     for k, ref in r.refs.items())


def render_leaderboard(board: Leaderboard, sort: str | None, descending: bool | None, where: str, *,  # noqa: C901
                       wide: bool = False) -> None:
    """The leaderboard as a table (the index columns, and the per-task ones when ``wide``, when
    sorted by one, or when there is no index), then what the columns are, why some figures are
    shown apart, and each row's flags."""
    from assay.bench.board import MISSING, display_unit, format_value

    rows = board.sorted(sort, descending=descending)
    per_task = [c for c in board.columns if c.kind in ("quality", "embed") and ":" in c.key]
    indexes = [c for c in board.columns if c not in per_task]
    shown = {c.key for c in per_task} if wide or not any(c.kind != "cost" for c in indexes) else \
        {c.key for c in per_task if c.key == sort}
    cols = [c for c in board.columns if (c in indexes or c.key in shown)
            and (c.key == sort or not ("@" in c.key or ":" in c.key)      # the main indexes, even all "—";
                 or any(r.get(c.key) is not None for r in rows))]          # the others only with a figure
    if sort and sort != "model":
        cols.sort(key=lambda c: c.key != sort)                                # the sort column first
    hidden = len(per_task) - len(shown)
    t = Table(title=f"leaderboard of {safe(where)}", title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("model", overflow="fold", min_width=min(40, max([len(r.model) for r in rows] + [5])))
    for c in cols:
        t.add_column(f"{safe(c.key)}\n[dim]{safe(display_unit(c))}[/dim]", justify="right", overflow="fold")
    t.add_column("runs\n[dim]kind ref[/dim]", no_wrap=True)
    ranked = sort or ("quality_index" if any(c.key == "quality_index" for c in cols) else None)
    for i, r in enumerate(rows, 1):
        have = ranked == "model" or ranked is None or r.get(ranked) is not None
        t.add_row(str(i) if have else MISSING, safe(r.model), *(format_value(c, r.get(c.key)) for c in cols),
                  safe(_runs_cell(r)))
    # piped output is not cut to a screen's width: the whole table, however wide
    if out.is_terminal:
        out.print(t)
    else:
        from rich.console import Console
        from rich.measure import Measurement

        need = Measurement.get(out, out.options.update(width=10_000), t).maximum
        Console(file=out.file, width=max(out.width, need), color_system=None, emoji=False).print(t)
    out.print(f"{MISSING} = no figure (not measured, or no price known); nothing is averaged across runs",
              highlight=False, soft_wrap=True, style="dim")
    if hidden:
        out.print(f"{hidden} per-task column(s) not shown: --wide shows them, --json has every figure",
                  highlight=False, soft_wrap=True, style="dim")
    out.print("columns:", highlight=False)
    for c in cols:
        out.print(f"  {safe(c.key)}: {safe(c.about or c.label)}", highlight=False, soft_wrap=True)
    apart = [n for n in board.notes if " shown apart " in n]
    if apart:
        out.print("shown apart (not comparable):", highlight=False)
        for note in apart:
            out.print(f"  - {safe(note)}", highlight=False, soft_wrap=True)
    for note in board.notes:
        if note not in apart:
            out.print(f"{safe(note)}", highlight=False, soft_wrap=True, style="dim")
    for r in rows:
        for flag in r.flags:
            out.print(f"[yellow]{safe(r.model)}: {safe(flag)}[/yellow]", highlight=False, soft_wrap=True)
