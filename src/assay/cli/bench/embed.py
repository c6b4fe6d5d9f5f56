"""``assay bench embed``: an embedding model on MTEB-style tasks, and how its stored runs are
shown, listed and compared (``bench show`` / ``list`` / ``compare`` hand embed runs here)."""

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

if TYPE_CHECKING:
    from assay.bench.embed.summary import EmbedSummary


def embed_cmd(
    model: str = typer.Option(..., "--model", help="embedded (offline, in-process), openai:MODEL, azure:DEPLOYMENT, "
                              "http://HOST:PORT/v1#MODEL (any OpenAI-compatible /embeddings) or local:/path.gguf."),
    tasks: str = typer.Option("all", "--tasks", help="Shipped tasks by name (sts, retrieval, classification, "
                              "clustering, pair, rerank, summarization, all), task files or folders (recognised by "
                              "their layout or a task.yaml), or hf:DATASET; separated by commas."),
    data: str | None = typer.Option(None, "--data", help="Your own data for the task type named in --tasks "
                                       "(e.g. --tasks retrieval --data my_corpus/, a BEIR folder)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Texts per request (default: the backend's)."),
    concurrency: int | None = typer.Option(None, "--concurrency", "-c", help="Requests in flight at once "
                                              "(default: the backend's)."),
    query_prefix: str = typer.Option("", "--query-prefix", help="Put before every query (a model's retrieval "
                                     "prompt, e.g. 'query: ')."),
    document_prefix: str = typer.Option("", "--document-prefix", help="Put before every document."),
    input_type_field: str | None = typer.Option(None, "--input-type-field", help="The request field an endpoint "
                                                   "reads 'query' / 'document' from (e.g. input_type), for servers "
                                                   "that embed the two differently."),
    seed: int = typer.Option(42, "--seed", help="Seed of the classification experiments, k-means and bootstrap."),
    name: str | None = typer.Option(None, "--name", help="A name for the run in the store."),
    model_name: str | None = typer.Option(None, "--model-name", help="The model's name on the leaderboard "
                                             "(default: the model the spec names, e.g. NAME of "
                                             "http://HOST/v1#NAME), so every kind's results share one row."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write summary.json here."),
    store: str | None = STORE_OPT,
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Score an embedding model on MTEB-style tasks, with 95% intervals.

    STS (Spearman), retrieval (nDCG@10), classification (logistic regression accuracy), clustering
    (V-measure), pair classification (AP), reranking (MAP), summarization; 95% bootstrap intervals;
    stored for compare and the leaderboard."""
    from assay.bench.embed.run import EmbedConfig, run_embed

    cfg = EmbedConfig(model=model, tasks=tasks, data=data, batch_size=batch_size, concurrency=concurrency,
                      query_prefix=query_prefix, document_prefix=document_prefix, input_type_field=input_type_field,
                      seed=seed, name=text_arg(name), model_name=text_arg(model_name))
    cfg.check()
    with stage_progress(quiet) as progress:
        # --store off (or $ASSAY_STORE=off): the run is scored and printed, and nothing is stored
        run = asyncio.run(run_embed(cfg, store=store, out=out_dir, progress=progress))
    if json_out:
        print_json(run.summary)
        return
    render_embed(run.summary)
    if run.ref:
        err.print(f"stored as {safe(run.ref)} (assay bench show {safe(run.ref)}; assay bench compare {safe(run.ref)} OTHER)",
                  highlight=False)
    else:
        err.print("not stored (the store is off)", highlight=False)


def _num(v: Any) -> str:
    return "—" if not isinstance(v, (int, float)) else f"{v:.4f}"


def _others(scores: dict[str, Any], main: str, limit: int = 6) -> str:
    shown = [f"{safe(k)} {_num(v)}" for k, v in scores.items() if k != main][:limit]
    more = len(scores) - 1 - len(shown)
    return ", ".join(shown) + (f", … {more} more (--json)" if more > 0 else "")


def render_embed(s: EmbedSummary | dict[str, Any], rec: dict[str, Any] | None = None) -> None:
    """An embedding run's summary: each task's main score with its interval, and its other scores."""
    from assay.bench.embed.summary import EmbedSummary

    s = EmbedSummary.load(s)
    rec = rec or {"ref": s.ref, "name": s.name, "model": s.model, "created_at": s.created_at}
    named = f" ({safe(rec['name'])})" if rec.get("name") and rec.get("name") != rec.get("ref") else ""
    out.print(f"embedding run [bold]{safe(rec.get('ref') or '—')}[/bold]{named} · model "
              f"{safe(rec.get('model') or '—')} · dim {safe(s.dim or '—')} · {when(rec.get('created_at'))}",
              highlight=False, soft_wrap=True)
    t = Table(title="tasks (main score as MTEB names it; 95% bootstrap interval over the task's units)",
              title_justify="left")
    for col in ("task", "type", "main score", "value [95% CI]", "units", "other scores"):
        t.add_column(col, justify="right" if col == "units" else "left", overflow="fold")
    for tname, tk in s.tasks.items():
        lo, hi = tk.ci95_low, tk.ci95_high
        ci = f" [{lo:.4f}–{hi:.4f}]" if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else ""
        value = "[red]failed[/red]" if tk.error else _num(tk.value) + ci
        t.add_row(safe(tname), safe(tk.type), safe(tk.main_score), value,
                  str(tk.n_units or "—"), _others(tk.scores, tk.main_score))
    out.print(t)
    for tname, tk in s.tasks.items():
        if tk.error:
            out.print(f"  [red]{safe(tname)}: {safe(tk.error)}[/red]", highlight=False, soft_wrap=True)
    if s.note:
        out.print(f"  model: {safe(s.note)}", highlight=False, soft_wrap=True)
    calls = s.calls or {}
    tps = s.texts_per_s
    facts = []
    if calls.get("embed_texts"):
        facts.append(f"texts {calls['embed_texts']:,}: sent to the model {calls.get('texts_embedded', 0):,} in "
                     f"{calls.get('embed_batches', 0):,} request(s), from the call cache {calls.get('texts_cached', 0):,}")
    if isinstance(tps, (int, float)):
        facts.append(f"{tps:,.0f} texts/s")
    if facts:
        out.print("  " + " · ".join(facts), highlight=False, soft_wrap=True)


def embed_list_table(runs: list[dict[str, Any]], where: str) -> Table:
    """The stored embedding runs: each task's main score."""
    from assay.bench.embed import KIND
    from assay.bench.embed.summary import EmbedHeadline

    t = Table(title=f"{KIND.title} runs in {safe(where)}", title_justify="left")
    for col in KIND.list_columns:
        t.add_column(col, overflow="fold")
    for r in runs:
        tasks = ", ".join(f"{safe(n)} {safe(x.metric)} {_num(x.value)}"
                          for n, x in EmbedHeadline.read(r.get("metrics")).tasks.items())
        t.add_row(safe(r["ref"] or r["id"]), safe(r.get("name") or ""), safe(r.get("model") or "—"), tasks,
                  when(r["created_at"]))
    return t


def show_embed(rec: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json({**{k: rec.get(k) for k in ("ref", "id", "name", "model", "task", "created_at")},
                    "summary": rec.get("details")})
        return
    render_embed(rec.get("details") or {}, rec)


def compare_embed_cmd(ref_a: str, ref_b: str, *, seed: int, resamples: int, as_json: bool,
                      store: str | None) -> None:
    """Two embedding runs on the same units: per-task B − A, paired bootstrap interval and p-value."""
    from assay.bench.embed.compare import compare_embed

    cmp = compare_embed(open_store(store), ref_a, ref_b, seed=seed, resamples=resamples)
    if as_json:
        print_json(cmp)
        return
    print_sides(cmp)
    t = Table(title=f"B − A per task on the same units (paired bootstrap, {cmp['resamples']:,} resamples, "
                    f"seed {cmp['seed']})", title_justify="left")
    for col in ("task", "main score", "units", "A", "B", "B − A [95% CI]", "p", "verdict"):
        t.add_column(col, justify="left" if col in ("task", "main score", "verdict") else "right")
    for tname, e in cmp["tasks"].items():
        ci = e.get("diff_ci95")
        diff = f"{e['diff']:+.4f}" + (f" [{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else "")
        verdict = ("B better" if e["diff"] > 0 else "A better") if e.get("significant") else "no clear difference"
        color = {"B better": "green", "A better": "red"}.get(verdict)
        t.add_row(safe(tname), safe(e["main_score"]), str(e["units"]), _num(e["a"]), _num(e["b"]), diff,
                  "—" if e.get("p_value") is None else f"{e['p_value']:.3g}",
                  f"[{color}]{verdict}[/{color}]" if color else verdict)
    out.print(t)
    for tname, why in cmp["apart"].items():
        out.print(f"  not compared: {safe(tname)}: {safe(why)}", highlight=False, soft_wrap=True)
    if cmp["only_in_a"] or cmp["only_in_b"]:
        out.print(f"tasks in one run only: A: {safe(', '.join(cmp['only_in_a']) or '—')}; "
                  f"B: {safe(', '.join(cmp['only_in_b']) or '—')}", highlight=False, soft_wrap=True)
