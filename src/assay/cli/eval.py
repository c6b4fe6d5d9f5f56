"""``assay eval`` and ``assay metrics``: evaluate a data set and print its summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from assay.cli.common import STORE_OPT, count_rows, err, fmt, load_target, out, pairs, progress_bar, safe, text_arg

app = typer.Typer()


def print_summary(result: Any) -> None:  # noqa: C901
    from assay.results import bounds

    r = result.run
    scorers = r.get("scorers") or {}
    table = Table(title="assay results", title_justify="left")
    for col, kw in (("metric", {}), ("mean", {"justify": "right"}), ("95% CI", {"justify": "right"}),
                    ("pass rate", {"justify": "right"}), ("evaluated", {"justify": "right"}),
                    ("skipped", {"justify": "right"}), ("errored", {"justify": "right"}),
                    ("scored by", {"overflow": "fold"})):
        table.add_column(col, **kw)
    for name, agg in result.metrics.items():
        ci = (f"{agg['ci95_low']:.3f}–{agg['ci95_high']:.3f}" if agg.get("ci95_low") is not None else "—")
        by = (scorers.get(agg.get("metric", name)) or {}).get("label", "")
        table.add_row(safe(name), bounds.bounded_mean(agg, fmt), ci, bounds.pass_rate_text(agg, fmt),
                      str(agg["evaluated"]), str(agg["skipped"]), str(agg["errored"]), safe(by))
    out.print(table)
    print_scorers(scorers)
    if r.get("judge"):
        u = r.get("judge_usage") or r.get("judge_calls") or {}
        cost = u.get("cost_usd")
        money = (f"${cost:.4f}" if cost is not None else
                 "cost unknown (set ASSAY_JUDGE_PRICE=IN,OUT, USD per 1M tokens)") if "cost_usd" in u else ""
        out.print(f"judge: {safe(r['judge'])} ({safe(r['judge_source'])}); {u.get('calls', 0)} calls, "
                  f"{u.get('cache_hits', 0)} from cache, {u.get('errors', 0)} errors; "
                  f"{u.get('prompt_tokens', 0):,} prompt + {u.get('completion_tokens', 0):,} completion tokens"
                  + (f"; {money}" if money else "")
                  + (f" (over {u['sessions']} sessions of a resumed run)" if (u.get("sessions") or 1) > 1 else ""))
        if r.get("judge_note"):
            out.print(f"  [yellow]{safe(r['judge_note'])}[/yellow]")
        print_batch(r.get("batch"))
    out.print(f"rows: {r['rows_read']} read, {r['rows_evaluated']} evaluated, "
              f"{r['rows_skipped']} skipped (bad input), {r['rows_errored']} with errors")
    if r["rows_evaluated"] > r["rows_read"] - r["rows_skipped"]:
        out.print("  [dim](each turn of a conversation is evaluated as a row of its own)[/dim]")
    for agg in result.metrics.values():
        for reason, n in (agg.get("skip_reasons") or {}).items():
            if scorers.get(agg["metric"], {}).get("kind") == "skipped" and reason.startswith("needs a judge"):
                continue                       # listed once, by print_scorers
            out.print(f"  [dim]{safe(agg['metric'])}: skipped {n} row(s): {safe(reason)}[/dim]")
        for reason, n in (agg.get("error_reasons") or {}).items():
            out.print(f"  [red]{safe(agg['metric'])}: {n} error(s): {safe(reason)}[/red]")
    print_repeats(result)
    line = bounds.notes_line(result.metrics)
    if line:
        out.print(f"[yellow]{safe(line)}[/yellow]", highlight=False)
    print_defects(result.metrics)
    print_conversations(result.metrics)
    for bad in r["bad_rows"][:20]:
        out.print(f"  [yellow]skipped: {safe(bad['error'])}[/yellow]")
    if len(r["bad_rows"]) > 20:
        out.print(f"  [yellow]… and {len(r['bad_rows']) - 20} more bad rows[/yellow]")
    if r.get("jailbreak"):
        from assay.metrics.safety.jailbreak import format_jailbreak

        for line in format_jailbreak(r["jailbreak"]):
            out.print(safe(line), highlight=False)


def print_repeats(result: Any) -> None:
    """A line per repeated output: repeats, flaky rows, the pass rate's interval over rows."""
    from assay.results.repeats import repeats_line

    lines = [line for name, agg in result.metrics.items() if (line := repeats_line(name, agg))]
    for line in lines:
        out.print(safe(line), highlight=False)
    run_id = result.run.get("run_id")
    if run_id and any(agg.get("rows_flaky") for agg in result.metrics.values()):
        out.print(f"  [dim]the flaky rows, each repeat's score and reason: assay show {safe(run_id)} --flaky[/dim]")


def print_plan(plan: dict[str, Any]) -> None:
    """Before the run: each metric chosen and on how many rows it runs, and what ``auto`` left out."""
    from assay.engine.plan import describe_plan

    for line in describe_plan(plan):
        out.print(safe(line), highlight=False, soft_wrap=True)


def print_scorers(scorers: dict[str, Any]) -> None:
    """Under the table: each embedded scorer that scored a column with its measured figures, and
    once, the judge metrics skipped for want of a judge."""
    by_scorer: dict[str, list[str]] = {}
    fidelity: dict[str, str] = {}
    skipped: dict[str, list[str]] = {}
    for metric, s in scorers.items():
        if s.get("kind") == "embedded scorer":
            by_scorer.setdefault(s["by"], []).append(metric)
            fidelity[s["by"]] = s.get("fidelity", "")
        elif s.get("kind") == "skipped":
            skipped.setdefault(s.get("reason", ""), []).append(metric)
    for name, metrics in by_scorer.items():
        out.print(f"{safe(', '.join(metrics))}: {safe(name)} (no judge model); measured {safe(fidelity[name])}",
                  highlight=False)
    for reason, metrics in skipped.items():
        out.print(f"[yellow]skipped on every row, {safe(reason)}: {', '.join(metrics)}[/yellow]", highlight=False)


def print_conversations(metrics: dict[str, Any]) -> None:
    """On conversation data: each metric's figure per conversation, turn-level (the mean of a
    conversation's turns) and conversation-level (one judgment of the whole transcript) side by side."""
    from assay.results.conversations import per_conversation

    figures = per_conversation(metrics)
    if not figures:
        return
    levels = {lvl: [f"{safe(f['output'])} {f['mean']:.3f}" for f in figures if f["level"] == lvl]
              for lvl in ("turn", "conversation")}
    n = max(f.get("conversations") or 0 for f in figures)
    parts = ([f"turn-level (mean of its turns): {', '.join(levels['turn'])}"] if levels["turn"] else []) + \
            ([f"conversation-level (the whole transcript): {', '.join(levels['conversation'])}"]
             if levels["conversation"] else [])
    out.print(f"per conversation ({n}): " + "; ".join(parts), highlight=False, soft_wrap=True)


def print_defects(metrics: dict[str, Any]) -> None:
    """One line per metric with a defect rate (safety metrics), and the per-level rates when asked;
    a rate from rows left not flagged reads ``≥ x (lower bound: rules, no judge)``."""
    from assay.results.bounds import bounded_rate

    for name, agg in metrics.items():
        if agg.get("defect_rate") is None:
            continue
        t = agg.get("defect_threshold")
        zone = f"score < {t:g}" if agg.get("higher_is_better") else f"score >= {t:g}"
        line = f"{safe(name)}: defect rate {bounded_rate(agg)} ({zone})"
        if agg.get("conversation_defect_rate") is not None:
            line += f"; per conversation (worst turn) {bounded_rate(agg, 'conversation_defect_rate')}"
        out.print(line, highlight=False)
        if agg.get("defect_rates"):
            ge = "≥ " if agg.get("not_flagged") and agg.get("defect_rate_bound") == "lower" else ""
            levels = ", ".join(f">={safe(k)}: {ge}{v:.3f}" for k, v in agg["defect_rates"].items())
            out.print(f"  {safe(name)} defect rate at each level: {levels}", highlight=False)


@app.command("eval")
def eval_cmd(
    data: str = typer.Argument(..., help="Evaluation set: .jsonl/.json/.csv/.parquet file, OpenTelemetry traces (.otlp.json/.otlp.jsonl/.pb), or a folder of them; - for standard input (with --format)."),
    metrics: str = typer.Option("auto", "--metrics", "-m", help="'auto' or a comma-separated list (see `assay metrics`)."),
    map_: list[str] = typer.Option([], "--map", help="Column mapping, e.g. query=question or response=${data.answer}."),
    threshold: list[str] = typer.Option([], "--threshold", "-t", help="Per-metric threshold, e.g. f1_score=0.7."),
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="Folder for rows.jsonl and summary.json."),
    target: str | None = typer.Option(None, "--target", help="The app to call per row: module:function, or an OpenAI-compatible endpoint http://HOST:PORT/v1#MODEL."),
    on_bad_row: str = typer.Option("fail", "--on-bad-row", help="fail: stop at the first bad row; skip: report it and go on."),
    family: str | None = typer.Option(None, "--family", help="Restrict 'auto' to 'azure' or 'databricks' metrics."),
    concurrency: int | None = typer.Option(None, "--concurrency", "-c", help="Target and judge calls in flight at once (default: the judge backend's: 32 OpenAI, 16 Azure, 8 other endpoints, 2 in-process; 16 for a target)."),
    judge: str | None = typer.Option(None, "--judge", "-j", help="Judge model: openai:MODEL, azure:DEPLOYMENT, http://HOST:PORT/v1#MODEL, local:/path.gguf, or 'embedded' (a small LLM, a smoke test). Default: $ASSAY_JUDGE, else none: judge metrics with a measured embedded scorer use it, the others are skipped."),
    workers: int | None = typer.Option(None, "--workers", "-w", help="Processes for CPU-bound metrics (default: every core for 1,000+ rows)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no plan printed before the run."),
    name: str | None = typer.Option(None, "--name", "-n", help="A name for this run in the store (see `assay runs`)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the latest unfinished run over the same data and options."),
    resume_from: str | None = typer.Option(None, "--resume-from", help="Continue this unfinished run (id or name)."),
    store: str | None = STORE_OPT,
    defect_threshold: str | None = typer.Option(None, "--defect-threshold", help="Severity (0-7) from which a harm counts as a defect (default 4), or 'all' for the rate at every level 1-7."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds to wait for one judge call (default: $ASSAY_JUDGE_TIMEOUT, else 120). A call that times out is tried at most twice.", metavar="SECONDS"),
    max_attempts: int | None = typer.Option(None, "--max-attempts", help="Tries per judge call on 429, 5xx and connection errors (default: $ASSAY_JUDGE_MAX_ATTEMPTS, else 6).", metavar="N"),
    max_consecutive_failures: int | None = typer.Option(None, "--max-consecutive-failures", help="Stop the run (resumable, exit 3) after this many judge or target requests in a row timed out or could not connect (default 5; 0: never).", metavar="N"),
    max_cost: float | None = typer.Option(None, "--max-cost", help="Stop the run (resumable, exit 3) once it has spent this much, in USD: the judge's calls at its price (ASSAY_JUDGE_PRICE=IN,OUT when it is not in the price table) and the target's tokens at ASSAY_TARGET_PRICE. Resume with a higher cap.", metavar="USD"),
    max_errors: int | None = typer.Option(None, "--max-errors", help="Stop the run (resumable, exit 3) once this many rows have errored (a target error or a metric error). With --out the errored rows are in errors.jsonl.", metavar="N"),
    data_format: str | None = typer.Option(None, "--format", help="The data's format when its name does not say: jsonl, json, csv, parquet, otlp (OpenTelemetry traces, a record per trace) or otlp-calls (a record per model call) (for -, /dev/stdin, a FIFO or <(...); a stream is read once)."),
    gate: list[str] = typer.Option([], "--gate", help="A quality gate; exit 1 when one fails. METRIC.STAT OP NUMBER (STAT: mean, median, p90, pNN, pass_rate, defect_rate, error_rate, errored, evaluated, skipped, or an end of the 95% interval: pass_rate_low, pass_rate_high, mean_low, mean_high; OP: >=, <=, >, <), e.g. 'groundedness.mean>=4' or 'groundedness.pass_rate_low>=0.8'; or 'no-regression[:METRIC]' against --baseline."),
    baseline: str | None = typer.Option(None, "--baseline", help="Compare with this stored run (a name: its latest completed run; or an id): fail on a significant worsening (implies --gate no-regression)."),
    min_effect: list[str] = typer.Option([], "--min-effect", help="A significant worsening smaller than this (metric units; X or METRIC=X) is tolerated by regression gates."),
    max_error_rate: float = typer.Option(0.1, "--max-error-rate", help="A gated metric with a larger share of errored rows fails its gate."),
    summary_md: Path | None = typer.Option(None, "--summary-md", help="Write a Markdown summary (aggregates, gates, worst rows) here; appended when it is $GITHUB_STEP_SUMMARY."),
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML here: a test case per gate and per metric."),
    engine: str = typer.Option("local", "--engine", help="Where rows are scored: local (this machine) or ray (a pool of Ray workers; needs pip install 'assay[ray]'). Same rows, store and result either way."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="With --engine ray: the cluster to join (ray://HOST:10001, auto); default: a local Ray on every core.", metavar="ADDR"),
    repeats: int = typer.Option(1, "--repeats", help="Ask each judged metric N times per row: per row the share of passing repeats, the spread and a verdict (stable pass, stable fail, flaky); pass rates and intervals over all repeats with the row as the unit. Each repeat is cached, so a rerun costs nothing. Rules and text metrics run once.", metavar="N"),
    batch: bool = typer.Option(False, "--batch", help="Send the judge's calls through its provider's batch API (openai:MODEL, anthropic:MODEL): half the list price, answers within 24 h. The batch is polled until it ends; a killed run started again polls the same batch. Scores are those of an online run; requests the batch failed are asked online."),
    batch_poll: float = typer.Option(30.0, "--batch-poll", help="With --batch: seconds between two polls of the batch's status.", metavar="SECONDS"),
    mlflow: str | None = typer.Option(None, "--mlflow", help="Also log the run to MLflow at this tracking URI (file:./mlruns, http://HOST:5000), in the experiment named by --name (default 'assay'). Needs assay[mlflow]."),
) -> None:
    """Evaluate a data set, save the run in the store and print a summary table."""
    from assay.cli import gates as ci
    from assay.engine.evaluate import evaluate

    mapping = pairs(map_, "--map")
    thresholds = pairs(threshold, "--threshold")
    tgt = load_target(target) if target else None
    gating = ci.prepare(gate, baseline, min_effect, max_error_rate, summary_md, junit, store)
    total = count_rows(data, data_format)
    ml = open_mlflow(mlflow, name)
    with progress_bar("evaluating", total, quiet) as advance:
        result = evaluate(data, metrics=metrics, mapping=mapping, thresholds=thresholds, out=out_dir,
                          target=tgt, on_bad_row=on_bad_row, family=family, concurrency=concurrency, workers=workers, judge=judge,
                          name=text_arg(name), store=store, resume=text_arg(resume_from) or resume,
                          options={"defect_threshold": defect_threshold} if defect_threshold else None,
                          progress=advance, format=data_format, timeout=timeout, max_attempts=max_attempts,
                          max_consecutive_failures=max_consecutive_failures, max_cost=max_cost, max_errors=max_errors,
                          on_plan=None if quiet else print_plan, engine=engine, ray_address=ray_address,
                          repeats=repeats, batch=batch_options(batch, batch_poll, quiet))
    print_summary(result)
    if out_dir is not None:
        out.print(f"results written to {safe(out_dir)}/", highlight=False)
        if r_errored(result):
            out.print(f"  errored rows, with their reasons: {safe(out_dir)}/errors.jsonl", highlight=False)
    run = result.run
    if run.get("run_id"):
        resumed = (f"; resumed with {run['resumed_rows']} rows already scored" if run.get("resumed")
                   else "; nothing unfinished to resume, so this was a new run" if resume or resume_from else "")
        label = f" ({safe(run['name'])})" if run.get("name") else ""
        out.print(f"run {safe(run['run_id'])}{label} saved in {safe(run['store'])}{resumed}")
    gates_failed = ci.finish(gating, result, store)   # the CI outputs are written first, whatever follows
    log_mlflow(ml, result, data, store)
    refuse_all_errored(result.metrics)
    if gates_failed:
        raise typer.Exit(1)


def print_batch(b: dict[str, Any] | None) -> None:
    """The ``--batch`` line: the batches, what they answered, and their cost at the batch price."""
    if not b:
        return
    cost = b.get("cost_usd")
    money = f"${cost:.4f} at the batch price" if cost is not None else "cost unknown"
    ids = ", ".join(b.get("batches") or []) or "none needed"
    failed = f"; {b['failed']} not answered, asked online" if b.get("failed") else ""
    out.print(f"batch: {safe(ids)}; {b.get('answered', 0)} of {b.get('requests', 0)} requests answered{failed}; "
              f"{b.get('prompt_tokens', 0):,} prompt + {b.get('completion_tokens', 0):,} completion tokens; "
              f"{money}", highlight=False)


def batch_options(batch: bool, poll: float, quiet: bool) -> dict[str, Any] | None:
    """``--batch`` / ``--batch-poll``: the batch settings of :func:`assay.evaluate`, with a status line
    per poll on standard error (unless ``--quiet``)."""
    if not batch:
        return None
    if not poll > 0:
        from assay.errors import AssayError

        raise AssayError(f"--batch-poll must be a positive number of seconds, got {poll}")

    def progress(status: str, done: int, total: int) -> None:
        if not quiet:
            err.print(f"batch: {safe(status)}, {done} of {total} requests done", highlight=False)

    return {"poll": poll, "progress": progress}


def r_errored(result: Any) -> int:
    """The rows of a finished run that errored or were left out as unreadable."""
    r = result.run
    return int(r.get("rows_errored") or 0) + int(r.get("rows_skipped") or 0)


def refuse_all_errored(metrics: dict[str, Any]) -> None:
    """Exit 3 (:class:`RunIncomplete`) when a metric errored on every row it applied to: the run
    finished, but that metric's figures are empty, and a script must not read it as a success."""
    from assay.engine.aggregate import all_errored
    from assay.errors import RunIncomplete

    broken = all_errored(metrics)
    if broken:
        rows = max(metrics[o]["errored"] for o in broken)
        what = f"metric {broken[0]} errored on every row it" if len(broken) == 1 else \
            f"metrics {', '.join(broken)} errored on every row they"
        raise RunIncomplete(f"{what} applied to ({rows} rows), so there is no score to report; "
                            "the errors are listed above")


def open_mlflow(uri: str | None, name: str | None) -> Any:
    """``--mlflow``: the tracking URI and experiment, checked before the run costs anything."""
    if uri is None:
        return None
    from assay.engine.mlflow_log import MlflowLog

    return MlflowLog.open(uri, name)


def log_mlflow(ml: Any, result: Any, data: str, store: str | None) -> None:
    """Log the finished run to MLflow; a failure is one line and exit 3 (the run itself is saved)."""
    if ml is None:
        return
    from assay.errors import AssayError

    try:
        rid = ml.log(result, data=data, store=store)
    except AssayError as exc:
        err.print(f"[red]error:[/red] {safe(exc)}", highlight=False, soft_wrap=True)
        raise typer.Exit(3) from None
    out.print(f"logged to MLflow at {safe(ml.uri)}: experiment {safe(repr(ml.experiment))}, run {safe(rid)}", highlight=False)


@app.command("metrics")
def metrics_cmd() -> None:
    """List every metric with the fields it needs and its scale."""
    from assay.metrics.base import GROUPS, REGISTRY, load_builtin_metrics

    load_builtin_metrics()
    table = Table(title="metrics", title_justify="left")
    for col in ("name", "kind", "requires", "optional", "scale", "threshold", "auto", "about"):
        table.add_column(col, overflow="fold")
    for m in sorted(REGISTRY.values(), key=lambda m: (m.kind, m.name)):
        table.add_row(safe(m.name), safe(m.kind), safe(m.describe_requires()), safe(", ".join(m.optional)),
                      safe(m.scale), fmt(m.threshold, 2), safe("/".join(m.family)) if m.auto else "",
                      safe(m.description))
    out.print(table)
    for g, members in GROUPS.items():
        out.print(f"group [bold]{safe(g)}[/bold] = {safe(', '.join(members))}")
