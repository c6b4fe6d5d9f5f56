"""``assay judge check``: measure a judge on labelled good/bad answers before trusting it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from assay.cli.common import err, fmt, out, print_json, progress_bar, safe
from assay.errors import AssayError

app = typer.Typer(no_args_is_help=True, help="Measure a judge before trusting it.")

BAR = (0.80, 0.75)   # AUC, and each control's AUC, for the verdict column


def _auc(block: Optional[dict[str, Any]]) -> str:
    if not block or block.get("auc") is None:
        return "—"
    ci = f" [{block['ci95_low']:.2f}–{block['ci95_high']:.2f}]" if block.get("ci95_low") is not None else ""
    return f"{block['auc']:.3f}{ci}"


def _verdict(f: dict[str, Any]) -> str:
    auc = (f.get("auc") or {}).get("auc")
    swap = (f.get("swap") or {}).get("auc")
    lm = (f.get("length_matched") or {}).get("auc")
    if auc is None:
        return "not measured"
    controls = [x for x in (swap, lm) if x is not None]
    if auc >= BAR[0] and all(x >= BAR[1] for x in controls):
        return "[green]separates[/green]" + ("" if len(controls) == 2 else " (controls missing)")
    if auc >= BAR[0]:
        return "[yellow]fails a control[/yellow]"
    return "[red]does not separate[/red]"


def _cost(u: Optional[dict[str, Any]]) -> str:
    if not u:
        return "—"
    cost = u.get("cost_usd")
    money = f"${cost:.4f}" if cost is not None else "cost unknown"
    return f"{u.get('calls', 0)} calls, {money}"


def print_report(reports: dict[str, Any], judge_label: str, split: Optional[str]) -> None:
    table = Table(title=f"judge check: {safe(judge_label)}", title_justify="left")
    for col, kw in (("metric", {}), ("scorer", {"overflow": "fold"}), ("cases", {"justify": "right"}),
                    ("ROC AUC [95% CI]", {"justify": "right"}), ("agreement", {"justify": "right"}),
                    ("swap control", {"justify": "right"}), ("length-matched", {"justify": "right"}),
                    ("errors", {"justify": "right"}), ("cost", {"no_wrap": True}), ("verdict", {"no_wrap": True})):
        table.add_column(col, **kw)
    notes = []
    for name, f in reports.items():
        if f.get("skipped"):
            table.add_row(name, "—", "—", "—", "—", "—", "—", "—", "—", "[yellow]skipped[/yellow]")
            notes.append(f"{name}: {f['skipped']}")
            continue
        lm = f["length_matched"]
        lm_cell = _auc(lm) + (f" ({lm['groups']} pairs)" if lm.get("groups") else "")
        swap = f["swap"]
        table.add_row(safe(name), safe(str(f["scorer"])), str(f["cases"]), _auc(f["auc"]), fmt(f["agreement"]),
                      _auc(swap) + (f" {f.get('swap_label')}" if f.get("swap_label") and swap.get("auc") is not None
                                    else ""),
                      lm_cell, str(f["errors"]), _cost(f.get("usage")), _verdict(f))
        for reason, n in (f.get("error_reasons") or {}).items():
            notes.append(f"{name}: {n} error(s): {reason}")
    out.print(table)
    sources = sorted({str(f.get("source")) for f in reports.values() if f.get("source")})
    which = {"held": "the held-out half (groups not used to fit the embedded scorers)", "fit": "the fit half",
             None: "every row"}.get(split, split)
    out.print(f"rows: {safe(', '.join(sources))}; {which}", highlight=False, soft_wrap=True)
    out.print(f"verdict: 'separates' = AUC >= {BAR[0]:.2f} and both controls >= {BAR[1]:.2f}; agreement = share of "
              "good and bad answers on the right side of the metric's threshold", highlight=False, soft_wrap=True)
    for n in notes:
        out.print(f"  [yellow]{safe(n)}[/yellow]", highlight=False, soft_wrap=True)


@app.command("check")
def check_cmd(
    judge: Optional[str] = typer.Option(None, "--judge", "-j", help="The judge to measure: openai:MODEL, azure:DEPLOYMENT, http://HOST:PORT/v1#MODEL, local:/path.gguf, embedded (the small LLM), or none (the embedded scorers). Default: $ASSAY_JUDGE, else none."),
    metrics: Optional[str] = typer.Option(None, "--metrics", "-m", help="Comma-separated judge metrics (default: every metric a shipped calibration set covers)."),
    data: Optional[Path] = typer.Option(None, "--data", help="Your own labelled rows instead of the shipped sets: a 'label' column (1/0) and optional 'group', or 'good'/'bad' columns per row."),
    split: Optional[str] = typer.Option(None, "--split", help="held, fit or all rows of the shipped sets (default: held for the embedded scorers, all for a judge)."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", help="Judge calls in flight (default: the backend's)."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON instead of a table."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Score labelled good and bad answers with a judge and report how well it separates them:
    ROC AUC with a 95% interval, agreement at the metric's threshold, the swap control (the good
    answer with another row's context, question or ground truth), the length-matched control,
    errors and cost."""
    from assay.engine.judge_check import check_judge, judge_metrics, resolve_check_judge

    names = [m.strip() for m in (metrics or "").split(",") if m.strip()] or judge_metrics()
    if data is not None and not metrics:
        raise AssayError("--data needs --metrics: name the judge metric(s) your labelled rows are for")
    if split not in (None, "held", "fit", "all"):
        raise AssayError(f"--split must be held, fit or all, got {split!r}")
    model, label = resolve_check_judge(judge, concurrency)
    if data is not None:
        split = None
    elif split is None:
        split = "held" if model is None else None
    elif split == "all":
        split = None
    async def measure(advance: Any) -> dict[str, Any]:
        try:
            return await check_judge(model, names, data=data, concurrency=concurrency, split=split,
                                     progress=advance)
        finally:
            if model is not None and hasattr(model, "aclose"):
                await model.aclose()

    with progress_bar("judging", None, quiet or json_out) as advance:
        reports = asyncio.run(measure(advance))
    if json_out:
        print_json({"judge": label, "split": split or "all", "metrics": reports})
        return
    print_report(reports, label, split)
    if reports and all(f.get("errors") and f.get("errors") == f.get("items") for f in reports.values()):
        err.print("every judgment errored: the judge could not be measured")
        raise typer.Exit(3)
