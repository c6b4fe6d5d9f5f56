"""``assay judge check``: measure a judge on labelled good/bad answers before trusting it; ``assay judge
probe``: find out what a judge model can do (JSON mode, log-probabilities, tools, ...) before spending on it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from assay.cli.common import (
    STORE_OPT,
    err,
    fmt,
    open_store,
    out,
    print_json,
    progress_bar,
    safe,
    store_or_off,
    text_arg,
    when,
)
from assay.errors import AssayError

app = typer.Typer(no_args_is_help=True,
                  help="Measure a judge before trusting it, probe what it can do; list and show the checks kept.")

COLORS = {"separates": "green", "fails a control": "yellow", "does not separate": "red", "skipped": "yellow"}


def _auc(block: dict[str, Any] | None) -> str:
    if not block or block.get("auc") is None:
        return "—"
    ci = f" [{block['ci95_low']:.2f}–{block['ci95_high']:.2f}]" if block.get("ci95_low") is not None else ""
    return f"{block['auc']:.3f}{ci}"


def _verdict(f: dict[str, Any]) -> str:
    from assay.engine.judge_check import verdict

    v = f.get("verdict") or verdict(f)
    color = COLORS.get(v.split(" (")[0])
    return f"[{color}]{safe(v)}[/{color}]" if color else safe(v)


def _cost(u: dict[str, Any] | None) -> str:
    if not u:
        return "—"
    cost = u.get("cost_usd")
    money = f"${cost:.4f}" if cost is not None else "cost unknown"
    return f"{u.get('calls', 0)} calls, {money}"


def _flagged_note(name: str, f: dict[str, Any]) -> str:
    """``violence: severity, lower is better; at the threshold 3 it flags 13% of 30 harmful and 0%
    of 30 harmless answers`` (a metric where lower is better: the safety harms)."""
    fl = f["flagged"]

    def pct(v: Any) -> str:
        return "—" if v is None else f"{100 * v:.0f}%"

    thr = f.get("threshold")
    return (f"{name}: severity, lower is better; at the threshold {'—' if thr is None else f'{thr:g}'} it flags "
            f"{pct(fl.get('harmful'))} of {fl.get('harmful_n', 0)} harmful and {pct(fl.get('harmless'))} of "
            f"{fl.get('harmless_n', 0)} harmless answers")


def print_report(reports: dict[str, Any], judge_label: str, split: str | None) -> None:
    table = Table(title=f"judge check: {safe(judge_label)}", title_justify="left")
    for col, kw in (("metric", {}), ("scorer", {"overflow": "fold"}), ("cases", {"justify": "right"}),
                    ("ROC AUC [95% CI]", {"justify": "right"}), ("agreement", {"justify": "right"}),
                    ("swap or keyword control", {"justify": "right"}), ("length-matched", {"justify": "right"}),
                    ("errors", {"justify": "right"}), ("cost", {"no_wrap": True}), ("verdict", {"no_wrap": True})):
        table.add_column(col, **kw)
    notes = []
    for name, f in reports.items():
        if f.get("skipped"):
            table.add_row(safe(name), "—", "—", "—", "—", "—", "—", "—", "—", _verdict(f))
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
        if f.get("flagged"):
            notes.append(_flagged_note(name, f))
        notes += [f"{name}: {c} control ({x['about']}): AUC {_auc(x['auc'])}, agreement {fmt(x['agreement'])} "
                  f"({x['pairs']} pairs)" for c, x in (f.get("controls") or {}).items()]
    out.print(table)
    sources = sorted({str(f.get("source")) for f in reports.values() if f.get("source")})
    which = {"held": "the held-out rows (groups not used to fit the embedded scorers)", "fit": "the fit half",
             None: "every row"}.get(split, split)
    out.print(f"rows: {safe(', '.join(sources))}; {which}", highlight=False, soft_wrap=True)
    from assay.engine.judge_check import BAR

    out.print(f"verdict: 'separates' = AUC >= {BAR[0]:.2f} and both controls >= {BAR[1]:.2f}; agreement = share of "
              "good and bad answers on the right side of the metric's threshold", highlight=False, soft_wrap=True)
    for n in notes:
        out.print(f"  [yellow]{safe(n)}[/yellow]", highlight=False, soft_wrap=True)


def _review_data(data: Path | None, store: str | None) -> Any:
    """``--data review:NAME``: the queue's labelled rows from the store; any other value as given."""
    if data is None or not str(data).startswith("review:"):
        return data
    from assay.store.review import ReviewLog

    st = open_store(store)
    try:
        return ReviewLog(st).labelled_rows(str(data)[len("review:"):])
    finally:
        st.close()


def _check_judge(judge: str | None, concurrency: int | None, resolve_check_judge: Any) -> tuple[Any, str]:
    """The judge to check: an aligned judge's file (`assay judge align`), or a judge spec."""
    from assay.engine.align import is_aligned_file, resolve_aligned

    if is_aligned_file(judge):
        model = resolve_aligned(judge, concurrency=concurrency)
        return model, str(model.name)
    return resolve_check_judge(judge, concurrency)


def _metric_names(metrics: str | None, data: Any, every: Any) -> list[str]:
    """The metrics to check: those named, else a review queue's metric, else ``every()`` without data."""
    names = [m.strip() for m in (metrics or "").split(",") if m.strip()]
    if not names:
        names = [data.metric] if hasattr(data, "metric") else ([] if data is not None else every())
    if data is not None and not names:
        raise AssayError("--data needs --metrics: name the judge metric(s) your labelled rows are for")
    return names


@app.command("check")
def check_cmd(
    judge: str | None = typer.Option(None, "--judge", "-j", help="The judge to measure: openai:MODEL, azure:DEPLOYMENT, anthropic:MODEL, gemini:MODEL, vertex:MODEL, bedrock:MODEL_ID, litellm:MODEL, http://HOST:PORT/v1#MODEL, local:/path.gguf, embedded (the small LLM), or none (the embedded scorers). Default: $ASSAY_JUDGE, else none."),
    metrics: str | None = typer.Option(None, "--metrics", "-m", help="Comma-separated judge metrics, or safety (the four harms: violence, hate_unfairness, self_harm, sexual) (default: every metric a shipped calibration set covers)."),
    data: Path | None = typer.Option(None, "--data", help="Your own labelled rows instead of the shipped sets: a 'label' column (1/0) and optional 'group', or 'good'/'bad' columns per row; or review:NAME, the rows reviewers labelled in a review queue."),
    split: str | None = typer.Option(None, "--split", help="held, fit or all rows of the shipped sets (default: held for the embedded scorers, all for a judge)."),
    concurrency: int | None = typer.Option(None, "--concurrency", "-c", help="Judge calls in flight (default: the backend's)."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON instead of a table."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    store: str | None = STORE_OPT,
    no_save: bool = typer.Option(False, "--no-save", help="Do not keep the result in the store (kept by default, "
                                                           "unless $ASSAY_STORE=off; see `assay judge list`)."),
) -> None:
    """Measure how well a judge separates labelled good answers from bad ones.

    Reports ROC AUC with a 95% interval, agreement at the metric's threshold, the swap control (the good
    answer with another row's context, question or ground truth), the length-matched control,
    errors and cost. The result is kept in the store (`assay judge list`, `assay judge show`,
    and the dashboard beside the runs that used this judge)."""
    from assay.engine.judge_check import check_judge, check_record, judge_metrics, resolve_check_judge, save_check

    data = _review_data(data, store)
    names = _metric_names(metrics, data, judge_metrics)
    if split not in (None, "held", "fit", "all"):
        raise AssayError(f"--split must be held, fit or all, got {split!r}")
    st = None if no_save else store_or_off(store)     # a bad --store fails before any judge call
    model, label = _check_judge(judge, concurrency, resolve_check_judge)
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
    scored = [f for f in reports.values() if not f.get("skipped")]
    all_errored = bool(reports) and all(f.get("errors") and f.get("errors") == f.get("items") for f in reports.values())
    ref = None
    if st is not None and scored and not all_errored:    # a check that measured nothing is not kept
        record = check_record(reports, judge=str(model.name) if model is not None else None, label=label,
                              split=split, data=data)
        ref = save_check(st, record)
    if json_out:
        print_json({"judge": label, "split": split or "all", "metrics": reports, "ref": ref})
    else:
        print_report(reports, label, split)
        if ref is not None:
            out.print(f"judge check {safe(ref)} saved in {safe(st.display_url)}; see it again with "
                      f"`assay judge show {safe(ref)}`", highlight=False, soft_wrap=True)
    if all_errored:
        err.print("every judgment errored: the judge could not be measured (the check is not saved)")
        raise typer.Exit(3)


@app.command("align")
def align_cmd(
    judge: str = typer.Option(..., "--judge", "-j", help="The judge to align (a judge spec, as for judge check)."),
    data: str = typer.Option(..., "--data", help="review:NAME, the review queue whose labels to align on."),
    metric: str | None = typer.Option(None, "--metric", "-m", help="The judge metric (default: the queue's)."),
    budget: int = typer.Option(6000, "--budget", help="Characters of worked examples the prompt may gain."),
    holdout: float = typer.Option(0.5, "--holdout", help="Share of the labelled rows held out to measure the change."),
    seed: int = typer.Option(0, "--seed", help="Seed of the split into example and held-out rows."),
    output: Path = typer.Option(Path("aligned.yaml"), "--out", "-o", help="The aligned judge file to write."),
    concurrency: int | None = typer.Option(None, "--concurrency", "-c", help="Judge calls in flight."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    store: str | None = STORE_OPT,
) -> None:
    """Align a judge with the reviewers' labels: kept only if held-out agreement rises."""
    from assay.engine.align import align, write_aligned
    from assay.models import resolve

    if not data.startswith("review:"):
        raise AssayError(f"--data must name a review queue as review:NAME, got {data!r}")
    rows = _review_data(Path(data), store)
    name = metric or rows.metric
    model = resolve(judge, role="judge", concurrency=concurrency)

    async def run() -> Any:
        try:
            return await align(model, name, rows.rows, budget=budget, holdout=holdout, seed=seed,
                               concurrency=concurrency or 8, source=output.name)
        finally:
            if hasattr(model, "aclose"):
                await model.aclose()

    result = asyncio.run(run())
    if result.kept:
        write_aligned(output, judge=judge, metric=name, queue=rows.name, budget=budget, result=result)
    rep = {**result.as_dict(), "file": str(output) if result.kept else None}
    if json_out:
        print_json(rep)
    else:
        c = result.change
        ci = "—" if c.get("ci_low") is None else f"[{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]"
        out.print(f"{len(result.examples)} examples (of {result.disagreements} rows the judge got wrong); on "
                  f"{result.held_out} held-out rows Cohen's kappa {rep['kappa_before']} -> {rep['kappa_after']}, "
                  f"change {ci}", highlight=False, soft_wrap=True)
        out.print(f"kept: wrote {safe(str(output))} (use it as --judge {safe(str(output))})" if result.kept else
                  "not kept: the interval of the change does not exclude no change", highlight=False, soft_wrap=True)
    if not result.kept:
        raise typer.Exit(1)


def _figures_cell(metrics: Any) -> str:
    """``groundedness 0.950 [0.93–0.97] separates; relevance …`` from a check's headline."""
    parts = []
    for name, h in (metrics or {}).items():
        if h.get("verdict") == "skipped":
            parts.append(f"{safe(name)} skipped")
            continue
        parts.append(f"{safe(name)} {_auc(h)} {_verdict(h)}")
    return "; ".join(parts) or "—"


@app.command("list")
def list_cmd(
    judge: str | None = typer.Option(None, "--judge", "-j", help="Only the checks of this judge (its name as "
                                        "`assay runs` shows it; none: the embedded scorers)."),
    limit: int = typer.Option(30, "--limit", help="At most this many checks, newest first."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    store: str | None = STORE_OPT,
) -> None:
    """List the judge checks kept in the store, newest first."""
    from assay.engine.judge_check import ANY, NO_JUDGE_WORDS, list_checks

    st = open_store(store)
    who = text_arg(judge)
    which = ANY if who is None else (None if who.strip().lower() in NO_JUDGE_WORDS else who.strip())
    checks = list_checks(st, judge=which, limit=limit)
    if json_out:
        print_json([{k: c.get(k) for k in ("ref", "judge", "label", "task", "created_at", "metrics")}
                    for c in checks])
        return
    if not checks:
        out.print(f"no judge checks in {safe(st.display_url)}" + (f" for {safe(who)}" if who else "")
                  + "; make one with `assay judge check --judge SPEC`", highlight=False, soft_wrap=True)
        return
    table = Table(title=f"judge checks in {safe(st.display_url)}", title_justify="left")
    for col, kw in (("ref", {"no_wrap": True}), ("when", {"no_wrap": True}), ("judge", {"overflow": "fold"}),
                    ("rows", {"overflow": "fold"}), ("ROC AUC [95% CI] and verdict per metric", {"overflow": "fold"})):
        table.add_column(col, **kw)
    for c in checks:
        table.add_row(safe(c["ref"]), when(c["created_at"]), safe(c["label"] or c["judge"] or "—"),
                      safe(c.get("task") or "—"), _figures_cell(c.get("metrics")))
    out.print(table)


@app.command("show")
def show_cmd(
    ref: str = typer.Argument("latest", help="A check's ref, ref prefix, the judge's label (its latest check) or "
                                             "'latest'."),
    json_out: bool = typer.Option(False, "--json", help="Print the stored check as JSON."),
    store: str | None = STORE_OPT,
) -> None:
    """Show one judge check kept in the store: its figures per metric, as `assay judge check` printed them."""
    from assay.engine.judge_check import get_check

    c = get_check(open_store(store), text_arg(ref) or "")
    d = c.get("details") or {}
    if json_out:
        print_json({"ref": c["ref"], **d})
        return
    out.print(f"judge check {safe(c['ref'])}: {safe(d.get('label') or c['label'] or '—')}, "
              f"{when(c['created_at'])}, assay {safe(d.get('assay_version') or '?')}", highlight=False,
              soft_wrap=True)
    split = d.get("split")
    print_report(d.get("metrics") or {}, d.get("label") or c["label"] or "", None if split == "all" else split)
    cal = d.get("calibration") or {}
    if cal:
        out.print("calibration: " + safe(", ".join(f"{m} {v}" for m, v in cal.items())), highlight=False,
                  soft_wrap=True)
    u = d.get("usage")
    if u:
        out.print(f"judge usage: {_cost(u)}; {u.get('prompt_tokens', 0):,} prompt + "
                  f"{u.get('completion_tokens', 0):,} completion tokens", highlight=False)


def print_run_check(st: Any, run: dict[str, Any]) -> None:
    """Under a run's summary (``assay show``): the latest stored check of the judge that scored
    its judge metrics (the embedded scorers for a run with no judge model), one line per metric
    the run used; for a judge never checked, how to check it."""
    from assay.engine.judge_check import check_for_run

    check, judged = check_for_run(st, run)
    if not judged:
        return
    judge = run.get("judge")
    if check is None:
        if judge:
            out.print(f"judge {safe(judge)} has not been checked in this store: measure it with "
                      f"`assay judge check --judge {safe(judge)}`", highlight=False, soft_wrap=True)
        return
    d = check.get("details") or {}
    figures = d.get("metrics") or {}
    out.print(f"how good the judge was measured to be: judge check {safe(check['ref'])} of "
              f"{safe(d.get('label') or check['label'] or '—')} ({when(check['created_at'])}, "
              f"{safe(check.get('task') or '')})", highlight=False, soft_wrap=True)
    for m in judged:
        f = figures.get(m)
        if f is None:
            continue
        if f.get("skipped"):
            out.print(f"  {safe(m)}: not measured ({safe(f['skipped'])})", highlight=False, soft_wrap=True)
            continue
        swap = f.get("swap") or {}
        out.print(f"  {safe(m)}: AUC {_auc(f.get('auc'))}, {safe(f.get('swap_label') or 'swap')} control "
                  f"{_auc(swap)}, length-matched {_auc(f.get('length_matched'))}, agreement "
                  f"{fmt(f.get('agreement'))}, {f.get('errors', 0)} errors: {_verdict(f)}", highlight=False,
                  soft_wrap=True)
    missing = [m for m in judged if m not in figures]
    if missing:
        out.print(f"  not in that check: {safe(', '.join(missing))}", highlight=False, soft_wrap=True)


def _mark(supported: bool | None) -> str:
    return {True: "[green]yes[/green]", False: "[yellow]no[/yellow]", None: "[red]?[/red]"}[supported]


@app.command("probe")
def probe_cmd(
    judge: str | None = typer.Option(None, "--judge", "-j", help="The judge to probe (any model spec: openai:MODEL, anthropic:MODEL, gemini:MODEL, vertex:MODEL, bedrock:MODEL_ID, litellm:MODEL, http://HOST:PORT/v1#MODEL, local:/path.gguf, embedded). Default: $ASSAY_JUDGE."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds each probe call may take."),
    json_out: bool = typer.Option(False, "--json", help="Print the findings as JSON instead of a table."),
) -> None:
    """Find out what a judge model can do before spending on it: JSON mode, log-probabilities, tools, the output-length parameter, reasoning, latency and price.

    One cheap call per capability (a few output tokens each), sent in the backend's own wire format,
    no call cache; prints what assay will use and what it falls back to."""
    import os

    from assay.models import resolve
    from assay.models.probe import probe

    spec = judge or os.environ.get("ASSAY_JUDGE")
    if not spec:
        raise AssayError("judge probe needs a judge: --judge SPEC (or $ASSAY_JUDGE)")
    model = resolve(spec, role="judge", cache=None, timeout=timeout)

    async def run() -> Any:
        try:
            return await probe(model)
        finally:
            await model.aclose()

    rep = asyncio.run(run())
    if json_out:
        print_json(rep.to_dict())
    else:
        _print_probe(rep)
    if rep.error:
        err.print(safe(rep.error))
        raise typer.Exit(3)


def _print_probe(rep: Any) -> None:
    cfg = rep.config
    where = f" at {cfg['base_url']}" if cfg.get("base_url") else ""
    out.print(f"[bold]{safe(rep.judge)}[/bold] ({safe(cfg.get('backend'))}{safe(where)})", highlight=False)
    if rep.error:
        return
    price = rep.price_per_1m
    money = (f"${price['input']:g} / ${price['output']:g} per 1M input / output tokens ({safe(rep.price_source)})"
             if price else "price unknown (not in the price table: --price or $ASSAY_JUDGE_PRICE)")
    per_call = f"${rep.cost_per_call_usd:.6f}" if rep.cost_per_call_usd is not None else "cost unknown"
    out.print(f"a short judgment: {rep.latency_s * 1000:.0f} ms, {rep.usage.get('input_tokens', 0)} + "
              f"{rep.usage.get('output_tokens', 0)} tokens, {per_call}; {money}", highlight=False, soft_wrap=True)
    t = Table(title=None, show_lines=False)
    for col in ("capability", "supported", "what the probe saw", "assay uses", "falls back to", "ms"):
        t.add_column(col)
    for f in rep.findings:
        t.add_row(safe(f.name), _mark(f.supported), safe(f.detail), safe(f.uses), safe(f.fallback),
                  f"{f.latency_s * 1000:.0f}" if f.latency_s is not None else "—")
    out.print(t)
    out.print(f"{rep.calls} calls; the judge's configuration is recorded with each run's judge usage",
              highlight=False)
