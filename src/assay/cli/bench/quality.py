"""``assay bench quality``: a model's quality on standard tasks, and how its stored runs are
shown, listed and compared (``bench show`` / ``list`` / ``compare`` hand quality runs here)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from assay.cli.common import (
    STORE_OPT,
    err,
    open_store,
    out,
    print_json,
    print_sides,
    safe,
    stage_progress,
    text_arg,
    when,
)
from assay.errors import AssayError

if TYPE_CHECKING:
    from assay.bench.quality.summary import QualityIndex, QualitySummary, ScoreStat


def _ints(text: str | None, what: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise AssayError(f"{what} takes whole numbers separated by commas, e.g. 1,5,10; got {text!r}") from None


def quality_cmd(
    model: str | None = typer.Option(None, "--model", help="openai:MODEL, azure:DEPLOYMENT, "
                                     "http://HOST:PORT/v1#MODEL, local:/path/model.gguf, embedded, or "
                                     "python:module:function (your pipeline). Required unless --list-tasks."),
    tasks: str | None = typer.Option(None, "--tasks", help="Task YAML files, folders of them, python:module:function, "
                                     "or (with --task-dir) task, group and tag names, separated by commas."),
    task_dir: list[str] = typer.Option([], "--task-dir", help="A folder of task YAML (lm-evaluation-harness's "
                                       "--include_path; repeatable): every task, group and tag in it may be named "
                                       "in --tasks; a group's figure is aggregated as it declares.", metavar="DIR"),
    list_tasks: bool = typer.Option(False, "--list-tasks", help="List the tasks, groups and tags of the --task-dir "
                                    "folders (with --json: as JSON) and exit."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N items of each task."),
    shots: int | None = typer.Option(None, "--shots", help="Few-shot examples per prompt (default: the task's)."),
    seed: int = typer.Option(1234, "--seed", help="Seed of the few-shot sampling (lm-evaluation-harness's default)."),
    samples: int | None = typer.Option(None, "--samples", help="Answers per code item (default: the task's "
                                          "repeats, else the largest k)."),
    pass_at: str | None = typer.Option(None, "--pass-at", help="The k of pass@k for code tasks, e.g. 1,5,10."),
    temperature: float | None = typer.Option(None, "--temperature", help="Overrides the tasks' temperature."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Overrides the tasks' max_gen_toks."),
    scoring: str = typer.Option("auto", "--scoring", help="Multiple choice: auto (log-likelihood where the model "
                                "gives it, else generation), loglik, or generate."),
    api: str = typer.Option("auto", "--api", help="auto, chat or completions (raw prompts, as lm-eval's "
                            "local-completions). auto: chat for openai/azure, completions otherwise."),
    judge: str | None = typer.Option(None, "--judge", help="Judge model for judged metrics (similarity ...)."),
    trust_task_code: bool = typer.Option(False, "--trust-task-code", help="Import and run the tasks' own Python "
                                         "code (!function hooks: process_docs, process_results, doc_to_*, "
                                         "filters, metrics, few-shot samples) from the task folders, as "
                                         "lm-evaluation-harness does; the summary records each file's sha256. "
                                         "Off: such a task stops with one line naming the file."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", help="Items in flight at once (with --engine ray: "
                                    "on each worker; the model's calls in flight stay under it cluster-wide)."),
    max_length: int = typer.Option(2048, "--max-length", help="Tokens per request of a loglikelihood_rolling "
                                   "window (lm-evaluation-harness's max_length; its default for API models): a "
                                   "longer document is scored over the harness's rolling windows on the "
                                   "in-process model and on a server with a tokenizer endpoint (llama.cpp's, "
                                   "vLLM's); elsewhere it fails with one line."),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help="The model's GGUF file, whose tokenizer cuts "
                                         "a loglikelihood_rolling document into --max-length windows on a server "
                                         "without a tokenizer endpoint (a hosted /v1/completions)."),
    sandbox_timeout: float = typer.Option(10.0, "--sandbox-timeout", help="Seconds each code sample may run."),
    name: str | None = typer.Option(None, "--name", help="A name for the run in the store."),
    model_name: str | None = typer.Option(None, "--model-name", help="The model's name on the leaderboard "
                                             "(default: the model the spec names, e.g. NAME of "
                                             "http://HOST/v1#NAME), so every kind's results share one row."),
    resume: bool = typer.Option(False, "--resume", help="Continue the latest unfinished run with the same tasks, "
                                "data and options (none: a new run, and a line says so)."),
    resume_from: str | None = typer.Option(None, "--resume-from", help="Continue this unfinished run (its id or "
                                             "name), with the same tasks, data and options.", metavar="RUN"),
    out_dir: Path | None = typer.Option(None, "--out", help="Write summary.json and items.jsonl here."),
    lm_eval_dir: Path | None = typer.Option(None, "--output-lm-eval", help="Also write lm-evaluation-harness's "
                                            "results JSON and per-task samples JSONL here (DIR/MODEL/results_DATE"
                                            ".json, samples_TASK_DATE.jsonl), as lm-eval 0.4 writes them.",
                                            metavar="DIR"),
    from_run: str | None = typer.Option(None, "--from-run", help="With --output-lm-eval: write those files for "
                                        "this stored run (its ref, name or 'latest') instead of running; its tasks "
                                        "are read again from their files and must be unchanged.", metavar="RUN"),
    store: str | None = STORE_OPT,
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    engine: str = typer.Option("local", "--engine", help="Where items are scored: local (this process) or ray (chunks "
                               "of items on a pool of Ray workers, the model loaded once per worker; needs pip "
                               "install 'assay[ray]'). Same items, store and summary either way."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="With --engine ray: the cluster to join "
                                              "(ray://HOST:10001, auto); default: a local Ray on every core.",
                                              metavar="ADDR"),
) -> None:
    """Score a model on standard tasks (lm-evaluation-harness task YAML) and the quality index.

    Accuracy by log-likelihood or generation, exact match with the task's filters, pass@k in a
    sandbox, and the quality index, each with its interval."""
    from assay.bench.quality.run import QualityConfig, run_quality

    if list_tasks:
        _list_tasks(task_dir, json_out)
        return
    if from_run is not None:
        _export(from_run, lm_eval_dir, store, trust_task_code)
        return
    if not model or not tasks:
        raise AssayError(f"{'--model' if not model else '--tasks'} is required (or --list-tasks --task-dir DIR)")
    cfg = QualityConfig(model=model, tasks=tasks, task_dirs=list(task_dir), trust_task_code=trust_task_code, limit=limit, shots=shots, seed=seed,
                        samples=samples,
                        pass_at=_ints(pass_at, "--pass-at"), temperature=temperature, max_tokens=max_tokens,
                        scoring=scoring, api=api, judge=judge, concurrency=concurrency, max_length=max_length,
                        tokenizer=text_arg(tokenizer),
                        sandbox_timeout=sandbox_timeout, name=text_arg(name), model_name=text_arg(model_name))
    cfg.check()
    with stage_progress(quiet) as progress:
        run = asyncio.run(run_quality(cfg, resume=text_arg(resume_from) or resume, store=store, out=out_dir,
                                      progress=progress, engine=engine, ray_address=ray_address,
                                      lm_eval_out=lm_eval_dir,
                                      notice=lambda m: err.print(safe(m), highlight=False, soft_wrap=True)))
    if json_out:
        print_json(run.summary)
        return
    render_quality(run.summary)
    if run.ref:
        err.print(f"stored as {safe(run.ref)} (run {safe(run.run_id)}; items: assay show {safe(run.run_id)})", highlight=False)


def _export(ref: str, lm_eval_dir: Path | None, store: str | None, trust: bool) -> None:
    from assay.bench.quality.run import export_lm_eval

    if lm_eval_dir is None:
        raise AssayError("--from-run writes lm-evaluation-harness's files: give --output-lm-eval DIR")
    files = export_lm_eval(open_store(store), text_arg(ref), lm_eval_dir, trust_task_code=trust)
    for f in files:
        out.print(safe(str(f)), highlight=False)


def _list_tasks(dirs: list[str], json_out: bool) -> None:
    """``--list-tasks``: what the ``--task-dir`` folders hold."""
    from assay.bench.quality.catalog import build_catalog

    if not dirs:
        raise AssayError("--list-tasks lists the tasks of --task-dir folders: name at least one")
    cat = build_catalog(dirs)
    if json_out:
        print_json({"tasks": {n: str(p) for n, p in sorted(cat.tasks.items())},
                    "groups": {n: {"tasks": cat.leaves(n), "entries": g.entries, "aggregate": g.aggregate,
                                   "source": g.source} for n, g in sorted(cat.groups.items())},
                    "tags": dict(sorted(cat.tags.items())), "unreadable": cat.broken})
        return
    t = Table(title=f"{len(cat.tasks)} tasks, {len(cat.groups)} groups, {len(cat.tags)} tags", title_justify="left")
    for col in ("name", "kind", "what", "file"):
        t.add_column(col, overflow="fold")
    for n, g in sorted(cat.groups.items()):
        how = "; ".join(f"{a['metric']} {'weighted by size' if a['weight_by_size'] else 'plain mean'}"
                        for a in g.aggregate) or "no figure of its own"
        t.add_row(safe(n), "group", safe(f"{len(cat.leaves(n))} tasks; {how}"), safe(g.source))
    for n, members in sorted(cat.tags.items()):
        t.add_row(safe(n), "tag", safe(f"{len(members)} tasks"), "")
    for n, p in sorted(cat.tasks.items()):
        t.add_row(safe(n), "task", "", safe(str(p)))
    out.print(t)
    if cat.broken:
        err.print(f"{len(cat.broken)} YAML file(s) could not be read and were skipped (first: "
                  f"{safe(next(iter(cat.broken.values())))})", highlight=False, soft_wrap=True)


def _pct(v: Any) -> str:
    return "—" if not isinstance(v, (int, float)) else f"{100 * v:.1f}"


def _ci(a: QualityIndex | ScoreStat) -> str:
    lo, hi = a.ci95_low, a.ci95_high
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
        method = a.ci_method or ""
        return safe(f" [{method}]") if method.startswith("too few") else ""
    return f" [{_pct(lo)}–{_pct(hi)}]"


def _stderr(output: str, a: ScoreStat) -> str:
    """lm-evaluation-harness's standard error, on the score's own scale (percentage points for 0–1)."""
    from assay.bench.quality.lmeval import PERPLEXITY_METRICS
    from assay.bench.quality.report import JUDGE_SCALES

    se = a.stderr
    if not isinstance(se, (int, float)):
        return "—"
    if output.split(",")[0] in PERPLEXITY_METRICS:     # lambada's perplexity: as its value is shown
        return f"{se:.4g}"
    return f"{se:.2f}" if output in JUDGE_SCALES else f"{100 * se:.1f}"


def _value(output: str, a: ScoreStat) -> str:
    """A score for the table: percentages for 0–1 scores, the judge's scale as it is."""
    from assay.bench.quality.lmeval import PERPLEXITY_METRICS
    from assay.bench.quality.report import JUDGE_SCALES

    m = a.mean
    if m is None:
        return "—"
    if output.split(",")[0] in PERPLEXITY_METRICS:     # a perplexity or bits per byte, as it is (no interval)
        return f"{m:.4g}"
    if output in JUDGE_SCALES:
        lo, hi = a.ci95_low, a.ci95_high
        return f"{m:.2f}" + (f" [{lo:.2f}–{hi:.2f}]" if isinstance(lo, (int, float)) and isinstance(hi, (int, float))
                             else _ci(a))
    return f"{_pct(m)}%{_ci(a)}"


def _groups(s: QualitySummary) -> None:
    groups = getattr(s, "groups", None) or {}
    for gname, g in groups.items():
        for key, f in (g.get("metrics") or {}).items():
            se = f.get("stderr")
            how = "weighted by size" if f.get("weight_by_size") else "plain mean"
            out.print(f"  group {safe(gname)}: {safe(key)} {_pct(f.get('mean'))}% ({how} over "
                      f"{len(f.get('tasks') or [])} tasks, {f.get('evaluated')} items; stderr "
                      f"{'—' if se is None else f'{100 * se:.1f}'})", highlight=False, soft_wrap=True)


def render_quality(s: QualitySummary | dict[str, Any], rec: dict[str, Any] | None = None) -> None:
    """A quality run's summary: the index, each task's scores with intervals, modes and notes."""
    from assay.bench.quality.summary import QualitySummary

    s = QualitySummary.load(s)
    rec = rec or {"ref": s.ref, "name": s.name, "model": s.model, "created_at": s.created_at}
    named = f" ({safe(rec['name'])})" if rec.get("name") and rec.get("name") != rec.get("ref") else ""
    out.print(f"quality run [bold]{safe(rec.get('ref') or '—')}[/bold]{named} · model "
              f"{safe(rec.get('model') or '—')} · api {safe(s.api or '—')} · "
              f"{when(rec.get('created_at'))}", highlight=False, soft_wrap=True)
    idx = s.index
    if idx.value is not None:
        out.print(f"  quality index [bold]{_pct(idx.value)}[/bold]{_ci(idx)} over {safe(idx.tasks)} task(s) "
                  "(mean of each task's primary score on 0–100; 95% interval)", highlight=False, soft_wrap=True)
    t = Table(title="tasks (95% CI: Wilson for right/wrong scores, else bootstrap; stderr as lm-evaluation-harness)",
              title_justify="left")
    for col in ("task", "items", "scored by", "score", "value [95% CI]", "stderr", "errors", "shots"):
        t.add_column(col, justify="right" if col in ("items", "stderr", "errors", "shots") else "left",
                     overflow="fold")
    for tname, tk in s.tasks.items():
        first = True
        for o, a in tk.metrics.items():
            primary = " (primary)" if o == tk.primary and len(tk.metrics) > 1 else ""
            t.add_row(safe(tname) if first else "", str(tk.items) if first else "",
                      safe(", ".join(tk.modes)) if first else "", safe(o) + primary,
                      _value(o, a), _stderr(o, a), str(tk.errors or 0) if first else "",
                      str(tk.num_fewshot) if first else "")
            first = False
    out.print(t)
    _groups(s)
    _task_notes(s)
    if s.judge:
        out.print(f"  judge metrics scored by {safe(s.judge)}", highlight=False, soft_wrap=True)
    if s.isolation:
        out.print(f"  code ran in a sandbox: {safe(s.isolation)}", highlight=False, soft_wrap=True)
    _calls_line(s)


def _calls_line(s: QualitySummary) -> None:
    """What the model under test was asked (calls; the call cache's share) and what was really sent
    (HTTP requests: a log-likelihood call sends one per choice), and what it cost."""
    calls = s.calls or {}
    if calls.get("calls"):
        sent = calls.get("requests")
        out.print(f"  model calls: {calls['calls']:,} ({calls.get('cache_hits', 0):,} from the call cache)"
                  + (f"; HTTP requests sent: {sent:,} (a log-likelihood call sends one per choice; retries "
                     "not counted)" if isinstance(sent, int) else ""), highlight=False, soft_wrap=True)
    cost = s.cost or {}
    if cost.get("usd") is not None:
        out.print(f"  cost: {cost['usd']:.6g} USD ({safe(cost.get('source'))})", highlight=False, soft_wrap=True)
    elif cost.get("no_price"):
        out.print(f"  cost: unknown, {safe(cost['no_price'])}", highlight=False, soft_wrap=True)


def _task_notes(s: QualitySummary) -> None:
    """Each task's notes: how it was run, what was ignored, unparsed answers, failed items."""
    for tname, tk in s.tasks.items():
        for note in tk.notes:
            out.print(f"  {safe(tname)}: {safe(note)}", highlight=False, soft_wrap=True)
        if tk.code_files:
            files = ", ".join(f"{Path(f).name} (sha256 {h[:12]})" for f, h in tk.code_files.items())
            out.print(f"  {safe(tname)}: ran the task's own code (--trust-task-code): {safe(files)}",
                      highlight=False, soft_wrap=True)
        if tk.unsupported:
            out.print(f"  {safe(tname)}: not supported, ignored: {safe(', '.join(tk.unsupported))}",
                      highlight=False, soft_wrap=True)
        if tk.unparsed:
            out.print(f"  {safe(tname)}: {tk.unparsed} answer(s) chose no single choice (unparsed: an echo of the "
                      "options, or several named); scored wrong", highlight=False, soft_wrap=True)
        if tk.first_error:
            out.print(f"  [red]{safe(tname)}: {tk.errors} item(s) failed; first: "
                      f"{safe(tk.first_error)}[/red]", highlight=False, soft_wrap=True)


def quality_list_table(runs: list[dict[str, Any]], where: str) -> Table:
    """The stored quality runs: index and each task's primary score."""
    from assay.bench.quality import KIND
    from assay.bench.quality.summary import QualityHeadline

    t = Table(title=f"{KIND.title} runs in {safe(where)}", title_justify="left")
    for col in KIND.list_columns:
        t.add_column(col, overflow="fold")
    for r in runs:
        m = QualityHeadline.read(r.get("metrics"))
        tasks = ", ".join(f"{safe(n)} {safe(x.metric)} {_pct(x.value)}" for n, x in m.tasks.items())
        t.add_row(safe(r["ref"] or r["id"]), safe(r.get("name") or ""), safe(r.get("model") or "—"),
                  _pct(m.quality_index), tasks, when(r["created_at"]))
    return t


def show_quality(rec: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json({**{k: rec.get(k) for k in ("ref", "id", "name", "model", "task", "created_at", "run_id")},
                    "summary": rec.get("details")})
        return
    render_quality(rec.get("details") or {}, rec)


def _index_header(idx: dict[str, Any]) -> None:
    """The quality index line of a comparison: on the items both runs have (the only ones compared),
    and each run's own index over all its items beside it when the runs hold different items."""
    if idx.get("diff") is None:
        return
    lo, hi = idx.get("diff_ci95") or (None, None)
    ci = (f"[{100 * lo:+.1f}, {100 * hi:+.1f}] (paired, stratified bootstrap)" if lo is not None and hi is not None
          else f"[too few items for an interval] (fewer than {_min_items()})")
    n = idx.get("items")
    out.print(f"quality index on the {n} items both runs have: A {_pct(idx['a'])}, B {_pct(idx['b'])}, "
              f"B − A {100 * idx['diff']:+.1f} {safe(ci)}", highlight=False, soft_wrap=True)
    a_n, b_n = idx.get("a_items"), idx.get("b_items")
    if (a_n, b_n) != (n, n) or (idx.get("a_own"), idx.get("b_own")) != (idx["a"], idx["b"]):
        out.print(f"  each run's own: A {_pct(idx.get('a_own'))} ({a_n} items), B {_pct(idx.get('b_own'))} "
                  f"({b_n} items); only the {n} shared items are compared", highlight=False, soft_wrap=True)


def _min_items() -> int:
    from assay.bench.quality.report import MIN_INTERVAL_ITEMS

    return MIN_INTERVAL_ITEMS


def compare_quality_cmd(ref_a: str, ref_b: str, *, seed: int, as_json: bool, store: str | None) -> None:
    """Two quality runs on the same items: per-task differences, McNemar's exact test, paired bootstrap."""
    from assay.bench.quality.report import JUDGE_SCALES, compare_quality

    cmp = compare_quality(open_store(store), ref_a, ref_b, seed=seed)
    if as_json:
        print_json(cmp)
        return
    print_sides(cmp)
    _index_header(cmp["index"])
    t = Table(title="B − A per task, on the items both runs have (McNemar's exact test for right/wrong scores, "
                    "paired bootstrap 95% interval)", title_justify="left")
    for col in ("task", "score", "items", "A", "B", "B − A [95% CI]", "only A right", "only B right", "p", "verdict"):
        t.add_column(col, justify="left" if col in ("task", "score", "verdict") else "right")
    for tname, tk in cmp["tasks"].items():
        for k, (o, e) in enumerate(tk["metrics"].items()):
            scale = 1.0 if o in JUDGE_SCALES else 100.0
            fmt = "{:+.2f}" if o in JUDGE_SCALES else "{:+.1f}"
            mc = e.get("mcnemar") or {}
            verdict = ("B better" if e["diff"] > 0 else "A better") if e["significant"] else "no clear difference"
            color = {"B better": "green", "A better": "red"}.get(verdict)
            t.add_row(safe(tname) if k == 0 else "", safe(o), str(e["items"]),
                      f"{e['a'] * scale:.1f}" if scale == 100 else f"{e['a']:.2f}",
                      f"{e['b'] * scale:.1f}" if scale == 100 else f"{e['b']:.2f}",
                      fmt.format(e["diff"] * scale) + f" [{fmt.format(e['diff_ci95'][0] * scale)}, "
                                                      f"{fmt.format(e['diff_ci95'][1] * scale)}]",
                      str(mc.get("only_a_right", "—")), str(mc.get("only_b_right", "—")),
                      f"{mc['p_value']:.3g}" if mc else "—",
                      f"[{color}]{verdict}[/{color}]" if color else verdict)
    out.print(t)
    if cmp["only_in_a"] or cmp["only_in_b"]:
        out.print(f"tasks in one run only: A: {safe(', '.join(cmp['only_in_a']) or '—')}; "
                  f"B: {safe(', '.join(cmp['only_in_b']) or '—')}", highlight=False, soft_wrap=True)
