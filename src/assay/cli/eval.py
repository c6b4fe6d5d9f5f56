"""``assay eval`` and ``assay metrics``: evaluate a data set and print its summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.table import Table

from assay.cli.common import STORE_OPT, count_rows, fmt, load_target, out, pairs, progress_bar

app = typer.Typer()


def print_summary(result: Any) -> None:
    table = Table(title="assay results", title_justify="left")
    for col, kw in (("metric", {}), ("mean", {"justify": "right"}), ("95% CI", {"justify": "right"}),
                    ("pass rate", {"justify": "right"}), ("evaluated", {"justify": "right"}),
                    ("skipped", {"justify": "right"}), ("errored", {"justify": "right"})):
        table.add_column(col, **kw)
    for name, agg in result.metrics.items():
        ci = (f"{agg['ci95_low']:.3f}–{agg['ci95_high']:.3f}" if agg.get("ci95_low") is not None else "—")
        table.add_row(name, fmt(agg.get("mean")), ci, fmt(agg.get("pass_rate")),
                      str(agg["evaluated"]), str(agg["skipped"]), str(agg["errored"]))
    out.print(table)
    r = result.run
    if r.get("judge"):
        u = r.get("judge_usage") or r.get("judge_calls") or {}
        cost = u.get("cost_usd")
        money = (f"${cost:.4f}" if cost is not None else
                 "cost unknown (set ASSAY_JUDGE_PRICE=IN,OUT, USD per 1M tokens)") if "cost_usd" in u else ""
        out.print(f"judge: {r['judge']} ({r['judge_source']}); {u.get('calls', 0)} calls, "
                  f"{u.get('cache_hits', 0)} from cache, {u.get('errors', 0)} errors; "
                  f"{u.get('prompt_tokens', 0):,} prompt + {u.get('completion_tokens', 0):,} completion tokens"
                  + (f"; {money}" if money else "")
                  + (f" (over {u['sessions']} sessions of a resumed run)" if (u.get("sessions") or 1) > 1 else ""))
        if r.get("judge_note"):
            out.print(f"  [yellow]{r['judge_note']}[/yellow]")
    out.print(f"rows: {r['rows_read']} read, {r['rows_evaluated']} evaluated, "
              f"{r['rows_skipped']} skipped (bad input), {r['rows_errored']} with errors")
    if r["rows_evaluated"] > r["rows_read"] - r["rows_skipped"]:
        out.print("  [dim](each turn of a conversation is evaluated as a row of its own)[/dim]")
    for agg in result.metrics.values():
        for reason, n in (agg.get("skip_reasons") or {}).items():
            out.print(f"  [dim]{agg['metric']}: skipped {n} row(s): {reason}[/dim]")
        for reason, n in (agg.get("error_reasons") or {}).items():
            out.print(f"  [red]{agg['metric']}: {n} error(s): {reason}[/red]")
    print_defects(result.metrics)
    for bad in r["bad_rows"][:20]:
        out.print(f"  [yellow]skipped: {bad['error']}[/yellow]")
    if len(r["bad_rows"]) > 20:
        out.print(f"  [yellow]… and {len(r['bad_rows']) - 20} more bad rows[/yellow]")
    if r.get("jailbreak"):
        from assay.metrics.safety.jailbreak import format_jailbreak

        for line in format_jailbreak(r["jailbreak"]):
            out.print(line, highlight=False)


def print_defects(metrics: dict[str, Any]) -> None:
    """One line per metric with a defect rate (safety metrics), and the per-level rates when asked."""
    for name, agg in metrics.items():
        if agg.get("defect_rate") is None:
            continue
        t = agg.get("defect_threshold")
        zone = f"score < {t:g}" if agg.get("higher_is_better") else f"score >= {t:g}"
        line = f"{name}: defect rate {agg['defect_rate']:.3f} ({zone})"
        if agg.get("conversation_defect_rate") is not None:
            line += f"; per conversation (worst turn) {agg['conversation_defect_rate']:.3f}"
        out.print(line, highlight=False)
        if agg.get("defect_rates"):
            levels = ", ".join(f">={k}: {v:.3f}" for k, v in agg["defect_rates"].items())
            out.print(f"  {name} defect rate at each level: {levels}", highlight=False)


@app.command("eval")
def eval_cmd(
    data: str = typer.Argument(..., help="Evaluation set: .jsonl/.json/.csv/.parquet file or a folder of them."),
    metrics: str = typer.Option("auto", "--metrics", "-m", help="'auto' or a comma-separated list (see `assay metrics`)."),
    map_: List[str] = typer.Option([], "--map", help="Column mapping, e.g. query=question or response=${data.answer}."),
    threshold: List[str] = typer.Option([], "--threshold", "-t", help="Per-metric threshold, e.g. f1_score=0.7."),
    out_dir: Optional[Path] = typer.Option(None, "--out", "-o", help="Folder for rows.jsonl and summary.json."),
    target: Optional[str] = typer.Option(None, "--target", help="The app to call per row: module:function, or an OpenAI-compatible endpoint http://HOST:PORT/v1#MODEL."),
    on_bad_row: str = typer.Option("fail", "--on-bad-row", help="fail: stop at the first bad row; skip: report it and go on."),
    family: Optional[str] = typer.Option(None, "--family", help="Restrict 'auto' to 'azure' or 'databricks' metrics."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", help="Target and judge calls in flight at once (default: the judge backend's: 32 OpenAI, 16 Azure, 8 other endpoints, 2 in-process; 16 for a target)."),
    judge: Optional[str] = typer.Option(None, "--judge", "-j", help="Judge model: openai:MODEL, azure:DEPLOYMENT, http://HOST:PORT/v1#MODEL, local:/path.gguf (default: $ASSAY_JUDGE, else the embedded smoke-test judge)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Processes for CPU-bound metrics (default: every core for 1,000+ rows)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    name: Optional[str] = typer.Option(None, "--name", "-n", help="A name for this run in the store (see `assay runs`)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the latest unfinished run over the same data and options."),
    resume_from: Optional[str] = typer.Option(None, "--resume-from", help="Continue this unfinished run (id or name)."),
    store: Optional[str] = STORE_OPT,
    defect_threshold: Optional[str] = typer.Option(None, "--defect-threshold", help="Severity (0-7) from which a harm counts as a defect (default 4), or 'all' for the rate at every level 1-7."),
) -> None:
    """Evaluate a data set, save the run in the store and print a summary table."""
    from assay.engine.evaluate import evaluate

    mapping = pairs(map_, "--map")
    thresholds = pairs(threshold, "--threshold")
    tgt = load_target(target) if target else None
    total = count_rows(data)
    with progress_bar("evaluating", total, quiet) as advance:
        result = evaluate(data, metrics=metrics, mapping=mapping, thresholds=thresholds, out=out_dir,
                          target=tgt, on_bad_row=on_bad_row, family=family, concurrency=concurrency, workers=workers, judge=judge,
                          name=name, store=store, resume=resume_from or resume,
                          options={"defect_threshold": defect_threshold} if defect_threshold else None,
                          progress=advance)
    print_summary(result)
    if out_dir is not None:
        out.print(f"results written to {out_dir}/")
    run = result.run
    if run.get("run_id"):
        resumed = (f"; resumed with {run['resumed_rows']} rows already scored" if run.get("resumed")
                   else "; nothing unfinished to resume, so this was a new run" if resume or resume_from else "")
        label = f" ({run['name']})" if run.get("name") else ""
        out.print(f"run {run['run_id']}{label} saved in {run['store']}{resumed}")


@app.command("metrics")
def metrics_cmd() -> None:
    """List every metric with the fields it needs and its scale."""
    from assay.metrics.base import GROUPS, REGISTRY, load_builtin_metrics

    load_builtin_metrics()
    table = Table(title="metrics", title_justify="left")
    for col in ("name", "kind", "requires", "optional", "scale", "threshold", "auto", "about"):
        table.add_column(col, overflow="fold")
    for m in sorted(REGISTRY.values(), key=lambda m: (m.kind, m.name)):
        table.add_row(m.name, m.kind, m.describe_requires(), ", ".join(m.optional), m.scale,
                      fmt(m.threshold, 2), "/".join(m.family) if m.auto else "", m.description)
    out.print(table)
    for g, members in GROUPS.items():
        out.print(f"group [bold]{g}[/bold] = {', '.join(members)}")
