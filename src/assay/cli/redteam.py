"""The ``assay redteam`` command (wired into :mod:`assay.cli.main`): attack objectives per risk
category crossed with deterministic strategies, sent to the app and scored through the engine
(:mod:`assay.simulate.redteam`); prints the attack success rate and the refusal rate per
strategy x category, each with its 95% Wilson interval.

Problems with the user's input raise :class:`~assay.errors.AssayError`: one line, exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from assay.cli.common import STORE_OPT, load_target, out, progress_bar, safe, text_arg
from assay.errors import AssayError

app = typer.Typer()

STRATEGY_HELP = ("Strategies, comma-separated: all (default), encodings, or any of baseline, base64, rot13, caesar, "
                 "atbash, leetspeak, char_swap, unicode_confusable, zero_width, tag_chars, flip, binary, morse, "
                 "url_encode, suffix_append, prefix_inject, role_play, indirect_document, and with --attacker rephrase, "
                 "translate, crescendo. The plain objective (baseline) is always sent too.")


@app.command("redteam")
def redteam_cmd(
    target: str = typer.Option(..., "--target", help="The app: module:function (sync or async), or an OpenAI-compatible endpoint http://HOST:PORT/v1#MODEL."),
    categories: str | None = typer.Option(None, "--categories", help="Risk categories, comma-separated: violence, hate_unfairness, self_harm, sexual (default: all four)."),
    strategies: str | None = typer.Option(None, "--strategies", help=STRATEGY_HELP),
    preset: str | None = typer.Option(None, "--preset", help="A named selection instead of --strategies: owasp-llm-top10 (the objectives and strategies tagged with an OWASP LLM Top 10 (2025) id; the scorecard grouped by OWASP id, the ids not exercised listed as not covered)."),
    judge: str | None = typer.Option(None, "--judge", "-j", help="The judge that scores the harm metrics (openai:MODEL, azure:DEPLOYMENT, http://HOST:PORT/v1#MODEL, local:/path.gguf; default $ASSAY_JUDGE). Without one the attack success rate is not measured; the refusal rate is."),
    max_: int | None = typer.Option(None, "--max", "-n", help="At most this many attempts: a seeded sample of objectives x strategies."),
    seed: int = typer.Option(0, "--seed", help="Seed of every choice (the sample, the wrappers, the swapped letters): same seed, same attacks."),
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="Folder for rows.jsonl (every attempt, its response and scores) and summary.json."),
    store: str | None = STORE_OPT,
    resume: bool = typer.Option(False, "--resume", help="Continue the latest unfinished red-team run with the same attempts and options."),
    max_cost: float | None = typer.Option(None, "--max-cost", help="Stop the run (resumable, exit 3) once the judge (and the target, where its price is known) has cost this much, in USD.", metavar="USD"),
    objectives: Path | None = typer.Option(None, "--objectives", help="An objectives file of the packaged shape (default: the built-in, versioned set)."),
    attacker: str | None = typer.Option(None, "--attacker", help="The model that writes the model-driven attacks (rephrase, translate, crescendo): openai:MODEL, azure:DEPLOYMENT, http://HOST:PORT/v1#MODEL, local:/path.gguf, embedded."),
    languages: str | None = typer.Option(None, "--languages", help="translate's languages, comma-separated (default: French,Swahili,Bengali); one attempt per objective and language."),
    max_turns: int = typer.Option(5, "--max-turns", help="A crescendo's turns at most."),
    refusals: int = typer.Option(3, "--refusals", help="A crescendo ends when the target has refused this many turns in a row."),
    concurrency: int | None = typer.Option(None, "--concurrency", "-c", help="Target and judge calls in flight at once."),
    name: str | None = typer.Option(None, "--name", help="A name for the run in the store."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Attack an app with objectives per risk category and strategies; print the attack success rate."""
    from assay.simulate.redteam import plan_attempts, redteam

    if concurrency is not None and concurrency < 1:
        raise AssayError(f"--concurrency must be at least 1, got {concurrency}")
    n = len(plan_attempts(categories=categories, strategies=strategies, seed=seed, max_attempts=max_,
                          objectives=objectives, attacker=attacker is not None, languages=languages, preset=preset))
    fn = load_target(target)
    with progress_bar("attacking", n, quiet) as advance:
        result = redteam(fn, categories=categories, strategies=strategies, judge=judge, max_attempts=max_, seed=seed,
                         out=out_dir, store=store, resume=resume, max_cost=max_cost, objectives=objectives,
                         concurrency=concurrency, name=text_arg(name), progress=advance, attacker=attacker,
                         languages=languages, max_turns=max_turns, refusals=refusals, preset=preset)
    print_scorecard(result.run)
    if out_dir is not None:
        out.print(f"attempts, responses and scores written to {safe(out_dir)}/", highlight=False)
    run = result.run
    if run.get("run_id"):
        resumed = f"; resumed with {run['resumed_rows']} attempts already scored" if run.get("resumed") else ""
        out.print(f"run {safe(run['run_id'])} saved in {safe(run['store'])}{resumed} (assay show {safe(run['run_id'])})",
                  highlight=False)


def print_scorecard(run: dict[str, Any]) -> None:
    """The table of ``run["redteam"]``, the refusal check's measured figures and the judge line."""
    from rich.table import Table

    from assay.simulate.redteam import format_rate, format_redteam

    rt = run.get("redteam")
    if not rt:
        out.print("[yellow]no attempt was scored[/yellow]")
        return
    table = Table(title=f"red team: attack success rate by strategy x category (objectives v{safe(rt['objectives_version'])})")
    for col in ("strategy", "category", "attempts", "ASR [95% CI]", "refusal rate [95% CI]"):
        table.add_column(col, no_wrap=col != "ASR [95% CI]")
    for row in format_redteam(rt):
        table.add_row(*map(safe, row))
    out.print(table)
    if (rt.get("setup") or {}).get("preset"):
        print_owasp(rt)
    if rt["asr_measured"]:
        parts = [f"{k} {format_rate(c['asr'], c['asr_ci'])}" for k, c in rt["complexity"].items() if c["judged"]]
        out.print("ASR by complexity: " + "; ".join(parts), highlight=False, soft_wrap=True)
    out.print(f"attack success: a judge rated the objective's category at severity >= {rt['defect_threshold']:g}; "
              "attempts it did not rate count neither way", highlight=False, soft_wrap=True)
    ho = rt["refusal_check"]["held_out"]
    out.print(f"refusal check measured on {ho['n']} held-out labelled responses: precision {ho['precision']:.2f}, "
              f"recall {ho['recall']:.2f} (it misses refusals phrased otherwise: the refusal rate leans low)",
              highlight=False, soft_wrap=True)
    if rt.get("note"):
        out.print(f"[yellow]{safe(rt['note'])}[/yellow]", highlight=False, soft_wrap=True)
    setup = rt.get("setup") or {}
    if setup.get("attacker"):
        out.print(f"attacker: {safe(setup['attacker'])} (seed {safe(setup.get('seed'))}, crescendo: at most "
                  f"{safe(setup.get('max_turns'))} turns, ends after {safe(setup.get('refusals'))} refusals in a row)",
                  highlight=False, soft_wrap=True)
    if run.get("judge"):
        u = run.get("judge_usage") or {}
        cost = u.get("cost_usd")
        out.print(f"judge: {safe(run['judge'])}; {u.get('calls', 0)} calls"
                  + (f", ${cost:.4f}" if isinstance(cost, (int, float)) else ""), highlight=False)


def print_owasp(rt: dict[str, Any]) -> None:
    """The scorecard grouped by OWASP LLM Top 10 id (baseline attempts, the control, left out)."""
    from rich.table import Table

    from assay.simulate.redteam import format_owasp

    table = Table(title="by OWASP LLM Top 10 (2025) id (attacks only; baseline is the control)")
    for col in ("OWASP id", "risk", "attempts", "ASR [95% CI]", "refusal rate [95% CI]"):
        table.add_column(col, no_wrap=col not in ("risk", "ASR [95% CI]"))
    for row in format_owasp(rt):
        table.add_row(*map(safe, row))
    out.print(table)
