"""``assay bench cost``: the price table, the estimated cost and cost index, and what the stored runs
cost (evaluation runs, benchmark runs of every kind, judge checks)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from assay.cli.common import STORE_OPT, err, open_store, out, safe, when


def _usd(x: float | None, unknown: str = "unknown") -> str:
    """A price or a cost: every significant digit up to 6 decimals, never 0 for an unknown."""
    if x is None:
        return unknown
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.2f}"
    s = f"{x:.6f}".rstrip("0")
    whole, _, frac = s.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"


def _tokens(n: float | None) -> str:
    if n is None:
        return "unknown"
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"


def cost_cmd(
    prices: Path | None = typer.Option(None, "--prices", metavar="FILE",
                                          help="Your price table: .yaml, .json or .csv with columns model, deployment, "
                                               "input, output (USD per 1M tokens), currency, source. Default: "
                                               "$ASSAY_PRICES, else the table shipped with assay."),
    model: list[str] = typer.Option([], "--model", "-m", help="Only this model (repeatable)."),
    runs: bool = typer.Option(False, "--runs", help="List the stored evaluation and benchmark runs with their "
                                                    "token usage and cost instead of the price table."),
    limit: int = typer.Option(50, "--limit", help="With --runs: at most this many runs of each kind, newest first."),
    save: Path | None = typer.Option(None, "--save", metavar="FILE",
                                        help="Write the price table in force to FILE (.yaml, .json or .csv) to edit."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    store: str | None = STORE_OPT,
) -> None:
    """Price table, estimated cost (3:1 input:output blend per 1M tokens), cost index, and what stored runs cost."""
    from assay.bench.cost import price_rows, stored_costs
    from assay.models.price_table import active_table, save_table

    table = active_table(prices)
    if save is not None:
        written = save_table(table, save)
        err.print(f"wrote {len(table.rows)} prices to {safe(written)}", highlight=False)
    rows = price_rows(table, model)
    costs = None
    if runs:
        st = open_store(store)
        costs = stored_costs(st, table, models=model, limit=limit)
    if as_json:
        doc: dict[str, Any] = {"table": {"origin": table.origin, "version": table.version, "as_of": table.as_of,
                                         "label": table.label, "currency": "USD", "unit": "USD per 1M tokens",
                                         "estimated_cost": "(3 * input + output) / 4"},
                               "prices": rows}
        if costs is not None:
            doc["runs"] = costs
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    if costs is not None:
        _print_costs(costs, table.label, st.display_url)
        return
    t = Table(title=f"{safe(table.label)}, USD per 1M tokens", title_justify="left")
    for col, right in (("rank", True), ("model", False), ("deployment", False), ("input", True), ("output", True),
                       ("estimated cost", True)):
        t.add_column(col, justify="right" if right else "left", overflow="fold")
    for r in rows:
        t.add_row("—" if r["rank"] is None else str(r["rank"]), safe(r["model"]), safe(r["deployment"] or "—"),
                  _usd(r["input"]), _usd(r["output"]), _usd(r["estimated_cost_per_1m"]))
    out.print(t)
    out.print("estimated cost = (3 × input + output) / 4 per 1M tokens = the cost index; rank 1 is the cheapest",
              highlight=False)


def _print_costs(costs: list[dict[str, Any]], label: str, where: str) -> None:
    if not costs:
        out.print(f"no runs in {safe(where)}", highlight=False)
        return
    t = Table(title=f"runs in {safe(where)}, priced with {safe(label)} (USD)", title_justify="left")
    for col, right in (("kind", False), ("id", False), ("name", False), ("started", False), ("model", False),
                       ("input tokens", True), ("output tokens", True), ("cost", True), ("priced by", False)):
        t.add_column(col, justify="right" if right else "left", overflow="fold")
    for c in costs:
        t.add_row(safe(c["kind"]), safe(c["id"] or "—"), safe(c["name"] or ""), when(c["created_at"]),
                  safe(c["model"] or "—"), _tokens(c["input_tokens"]), _tokens(c["output_tokens"]), _usd(c["cost_usd"]),
                  safe(c.get("no_price") or c["price_source"]))
    out.print(t)
    known = [c["cost_usd"] for c in costs if c["cost_usd"] is not None]
    unknown = len(costs) - len(known)
    note = f" ({unknown} of unknown cost not included)" if unknown else ""
    out.print(f"total: {_usd(sum(known)) if known else 'unknown'} USD over {len(known)} runs{note}")
