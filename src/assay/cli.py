"""The ``assay`` command. A thin view over :mod:`assay.engine`.

Problems with the user's input end with one line on stderr and exit code 2, never a
traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.table import Table

from assay.errors import AssayError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Evaluate generative-AI applications and benchmark models.")
err = Console(stderr=True)
# Piped output (CI logs, files) gets a wide console so tables are not cut.
out = Console() if sys.stdout.isatty() else Console(width=160)


def _pairs(values: List[str], what: str) -> dict[str, str]:
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


def _load_target(spec: str) -> Any:
    """``module:function`` (the current directory is importable), or an endpoint ``http(s)://HOST/v1#MODEL``."""
    if spec.strip().lower().startswith(("http://", "https://")):
        return spec.strip()  # an OpenAI-compatible endpoint: see assay.engine.target.EndpointApp
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise AssayError(f"--target {spec!r} must look like module:function")
    sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except Exception as exc:
        raise AssayError(f"--target: cannot import {mod_name!r}: {type(exc).__name__}: {exc}") from None
    try:
        fn = getattr(mod, attr)
    except AttributeError:
        raise AssayError(f"--target: module {mod_name!r} has no attribute {attr!r}") from None
    return fn


def _count_rows(data: str) -> int | None:
    p = Path(data)
    if p.is_file() and p.suffix.lower() == ".jsonl":
        n = 0
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 20):
                n += chunk.count(b"\n")
        return n
    return None


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def print_summary(result: Any) -> None:
    table = Table(title="assay results", title_justify="left")
    for col, kw in (("metric", {}), ("mean", {"justify": "right"}), ("95% CI", {"justify": "right"}),
                    ("pass rate", {"justify": "right"}), ("evaluated", {"justify": "right"}),
                    ("skipped", {"justify": "right"}), ("errored", {"justify": "right"})):
        table.add_column(col, **kw)
    for name, agg in result.metrics.items():
        ci = (f"{agg['ci95_low']:.3f}–{agg['ci95_high']:.3f}" if agg.get("ci95_low") is not None else "—")
        table.add_row(name, _fmt(agg.get("mean")), ci, _fmt(agg.get("pass_rate")),
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
                  + (f"; {money}" if money else ""))
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
        from assay.simulate.jailbreak import format_jailbreak

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
    store: Optional[str] = typer.Option(None, "--store", help="Store path or database URL (default: $ASSAY_STORE, else .assay/assay.db)."),
    defect_threshold: Optional[str] = typer.Option(None, "--defect-threshold", help="Severity (0-7) from which a harm counts as a defect (default 4), or 'all' for the rate at every level 1-7."),
) -> None:
    """Evaluate a data set, save the run in the store and print a summary table."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from assay.engine.evaluate import evaluate

    mapping = _pairs(map_, "--map")
    thresholds = _pairs(threshold, "--threshold")
    tgt = _load_target(target) if target else None
    total = _count_rows(data)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  disable=quiet or not err.is_terminal, transient=True) as bar:
        task = bar.add_task("evaluating", total=total)
        result = evaluate(data, metrics=metrics, mapping=mapping, thresholds=thresholds, out=out_dir,
                          target=tgt, on_bad_row=on_bad_row, family=family, concurrency=concurrency, workers=workers, judge=judge,
                          name=name, store=store, resume=resume_from or resume,
                          options={"defect_threshold": defect_threshold} if defect_threshold else None,
                          progress=lambda n: bar.advance(task, n))
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
                      _fmt(m.threshold, 2), "/".join(m.family) if m.auto else "", m.description)
    out.print(table)
    for g, members in GROUPS.items():
        out.print(f"group [bold]{g}[/bold] = {', '.join(members)}")


from assay.simulate.cli import app as _simulate_app  # noqa: E402
app.add_typer(_simulate_app, name="simulate")


def _open_store(url: Optional[str]) -> Any:
    from assay.store import open_store

    st = open_store(url or None)
    if st is None:
        raise AssayError("saving runs is turned off ($ASSAY_STORE=off); name a store with --store")
    return st


def _when(ts: float | None) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "—"


_STORE_OPT = typer.Option(None, "--store", help="Store path or database URL (default: $ASSAY_STORE, else .assay/assay.db).")


@app.command("runs")
def runs_cmd(
    name: Optional[str] = typer.Option(None, "--name", "-n", help="Only runs with this name."),
    status: Optional[str] = typer.Option(None, "--status", help="Only runs with this status (running, completed, interrupted, failed)."),
    limit: int = typer.Option(30, "--limit", help="At most this many runs, newest first."),
    store: Optional[str] = _STORE_OPT,
) -> None:
    """List the runs in the store, newest first."""
    st = _open_store(store)
    runs = st.list_runs(name=name, status=status, limit=limit)
    if not runs:
        out.print(f"no runs in {st.display_url}")
        return
    table = Table(title=f"runs in {st.display_url}", title_justify="left")
    for col in ("id", "name", "started", "status", "rows", "data", "metrics", "judge"):
        table.add_column(col, overflow="fold")
    for r in runs:
        aggs = r.get("aggregates") or {}
        means = ", ".join(f"{o}={_fmt(a.get('mean'), 2)}" for o, a in list(aggs.items())[:4])
        if len(aggs) > 4:
            means += f", +{len(aggs) - 4}"
        table.add_row(r["id"], r["name"] or "", _when(r["created_at"]), r["status"], str(r["rows_done"]),
                      Path(r["source"] or "").name or "—", means or ", ".join(r.get("metrics") or []), r["judge"] or "—")
    out.print(table)


@app.command("show")
def show_cmd(run: str = typer.Argument(..., help="Run id, id prefix, name (its latest run) or 'last'."),
             store: Optional[str] = _STORE_OPT) -> None:
    """Show one run's summary."""
    st = _open_store(store)
    r = st.get_run(run)
    label = f" ({r['name']})" if r["name"] else ""
    out.print(f"run {r['id']}{label}: {r['status']}, started {_when(r['created_at'])}, "
              f"{r['rows_done']} rows, data {r['source']}")
    if r["status"] != "completed":
        if r.get("error"):
            out.print(f"  [yellow]{r['error']}[/yellow]")
        out.print(f"  continue it with: assay eval {r['source']} --resume-from {r['id']} (and the same options)")
        return
    print_summary(st.load_result(r["id"]))


@app.command("compare")
def compare_cmd(
    runs: List[str] = typer.Argument(..., help="Two or more runs (id, prefix or name); the first is the baseline."),
    worst: int = typer.Option(5, "--worst", help="Rows that got worse to show per metric."),
    store: Optional[str] = _STORE_OPT,
) -> None:
    """Per-metric deltas with 95% confidence intervals, and the rows that got worse."""
    from assay.store.compare import compare_runs, worse_rows

    st = _open_store(store)
    cmp = compare_runs(st, runs)
    rs = cmp["runs"]
    table = Table(title="compare (deltas against the first run; * = significant at 95%)", title_justify="left")
    table.add_column("metric")
    for r in rs:
        table.add_column(f"{r['name'] or r['id']}", justify="right")
    for r in rs[1:]:
        table.add_column(f"Δ {r['name'] or r['id']} [95% CI]", justify="right")
    for m in cmp["metrics"]:
        cells = [_fmt(x["mean"]) if x else "—" for x in m["runs"]]
        for d in m["deltas"][1:]:
            if not d or d["delta"] is None:
                cells.append("—")
                continue
            mark = "*" if d["significant"] else ""
            color = "green" if d.get("better") else "red" if d.get("better") is False else ""
            txt = f"{d['delta']:+.3f}{mark} [{d['ci95_low']:+.3f}, {d['ci95_high']:+.3f}]"
            cells.append(f"[{color}]{txt}[/{color}]" if color else txt)
        arrow = "↑" if m["higher_is_better"] else "↓"
        table.add_row(f"{m['output']} {arrow}", *cells)
    out.print(table)
    if worst <= 0:
        return
    for other in rs[1:]:
        for m in cmp["metrics"]:
            rows = worse_rows(st, rs[0]["id"], other["id"], m["output"], limit=worst)
            if not rows:
                continue
            t = Table(title=f"{m['output']}: rows worse in {other['name'] or other['id']}", title_justify="left")
            for col in ("row", "query", f"{rs[0]['name'] or rs[0]['id']}", f"{other['name'] or other['id']}"):
                t.add_column(col, overflow="fold")
            for w in rows:
                q = str(w["inputs"].get("inputs.query") or w["inputs"].get("inputs.response") or "")[:80]
                t.add_row(w["key"], q, _score_cell(w["base"]), _score_cell(w["other"]))
            out.print(t)


def _score_cell(s: dict[str, Any]) -> str:
    from rich.markup import escape

    reason = escape(str(s.get("reason") or ""))[:160]
    return f"{_fmt(s.get('score'))} {s.get('result') or ''}" + (f" — {reason}" if reason else "")


@app.command("delete")
def delete_cmd(runs: List[str] = typer.Argument(..., help="Runs to delete (id, prefix or name)."),
               yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
               store: Optional[str] = _STORE_OPT) -> None:
    """Delete runs, their rows and scores."""
    st = _open_store(store)
    found = [st.get_run(r) for r in runs]
    if not yes:
        if not sys.stdin.isatty():
            raise AssayError("delete: add --yes to delete without a prompt")
        names = ", ".join(f"{r['id']} ({r['name']})" if r["name"] else r["id"] for r in found)
        if not typer.confirm(f"delete {names}?"):
            raise typer.Exit(1)
    for r in found:
        st.delete_run(r["id"])
        out.print(f"deleted run {r['id']}")


@app.command("export")
def export_cmd(run: str = typer.Argument(..., help="Run id, prefix, name or 'last'."),
               output: Path = typer.Option(..., "--output", "-o", help="File to write: .jsonl, .parquet or .json."),
               fmt: Optional[str] = typer.Option(None, "--format", "-f", help="jsonl, parquet or json (azure-ai-evaluation layout); default: from the file name."),
               store: Optional[str] = _STORE_OPT) -> None:
    """Export a stored run's rows (and, for json, its aggregates)."""
    fmt = (fmt or output.suffix.lstrip(".")).lower()
    if fmt not in ("jsonl", "parquet", "json"):
        raise AssayError(f"export: unknown format {fmt!r}; use jsonl, parquet or json")
    res = _open_store(store).load_result(run)
    getattr(res, f"to_{fmt}")(output)
    out.print(f"wrote {output}")


from assay.ui.commands import report_cmd, ui_cmd  # noqa: E402

app.command("ui")(ui_cmd)
app.command("report")(report_cmd)


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
