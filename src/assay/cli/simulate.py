"""``assay simulate``: adversarial, jailbreak and user simulations.

Problems with the user's input raise :class:`~assay.errors.AssayError`: one line, exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from assay.cli.common import load_target, out, progress_bar, safe
from assay.errors import AssayError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Simulate adversarial and ordinary users against an app, to build evaluation sets.")

TARGET_HELP = "The app: module:function (sync or async), or an OpenAI-compatible endpoint http://HOST:PORT/v1#MODEL."
MODEL_HELP = ("The simulating model: embedded (default), openai:MODEL, azure:DEPLOYMENT, "
              "http://HOST:PORT/v1#MODEL or local:/path.gguf.")
TARGET_OPT = typer.Option(..., "--target", help=TARGET_HELP)
SEED_OPT = typer.Option(0, "--seed", help="Seed of every choice: same seed, same set.")
CONCURRENCY_OPT = typer.Option(4, "--concurrency", "-c", help="Conversations at once.")
QUIET_OPT = typer.Option(False, "--quiet", "-q", help="No progress bar.")
CATEGORY_OPT = typer.Option(None, "--category", help="Harm categories, comma-separated (default: all four).")
ATTACKER_OPT = typer.Option(None, "--attacker", "--model", help=MODEL_HELP)
TEMPLATES_OPT = typer.Option(None, "--templates", help="An attack template file (default: the built-in set).")


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AssayError(f"{what} {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AssayError(f"{what} {path}: cannot read it ({exc})") from None


def _report(result: Any) -> None:
    out.print(safe(result.summary()), highlight=False, soft_wrap=True)
    if result.target_errors:
        out.print(f"  [yellow]{result.target_errors} conversation(s) stopped early on a target error "
                  "(see their simulation_error column)[/yellow]")


def _check_count(n: int, what: str) -> None:
    if n < 1:
        raise AssayError(f"{what} must be at least 1, got {n}")


@app.command("adversarial")
def adversarial_cmd(
    target: str = TARGET_OPT,
    out_path: Path = typer.Option(..., "--out", "-o", help="The evaluation set to write (JSONL)."),
    scenario: str = typer.Option("adv_qa", "--scenario", "-s", help="Scenario(s), comma-separated: adv_qa, adv_conversation, adv_summarization, adv_search, adv_rewrite, adv_content_gen_ungrounded, adv_content_gen_grounded, adv_protected_material."),
    category: str | None = CATEGORY_OPT,
    max_: int = typer.Option(8, "--max", "-n", help="Conversations to simulate."),
    turns: int | None = typer.Option(None, "--turns", help="User turns per conversation (default: the scenario's)."),
    seed: int = SEED_OPT,
    attacker: str | None = ATTACKER_OPT,
    concurrency: int = CONCURRENCY_OPT,
    templates: Path | None = TEMPLATES_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """Attack the app with templated adversarial prompts (scenarios x harm categories)."""
    from assay.simulate.adversarial import simulate_adversarial

    _check_count(max_, "--max")
    _check_count(concurrency, "--concurrency")
    if turns is not None:
        _check_count(turns, "--turns")
    fn = load_target(target)
    with progress_bar("simulating", max_, quiet) as advance:
        res = simulate_adversarial(fn, scenario=scenario, categories=category, max_conversations=max_, turns=turns,
                                   seed=seed, attacker=attacker, out=out_path, concurrency=concurrency,
                                   progress=advance, templates=templates)
    _report(res)


@app.command("jailbreak")
def jailbreak_cmd(
    target: str = TARGET_OPT,
    out_dir: Path = typer.Option(..., "--out", "-o", help="The folder to write baseline.jsonl and jailbreak.jsonl to."),
    kind: str = typer.Option("upia", "--kind", help="upia: a jailbreak prefix in the first turn; xpia: an instruction hidden in a context document."),
    scenario: str = typer.Option("adv_conversation", "--scenario", "-s", help="Scenario(s) for upia, comma-separated."),
    category: str | None = CATEGORY_OPT,
    max_: int = typer.Option(8, "--max", "-n", help="Paired prompts to simulate (each is played twice)."),
    turns: int | None = typer.Option(None, "--turns", help="User turns per conversation (default: the scenario's; 1 for xpia)."),
    seed: int = SEED_OPT,
    attacker: str | None = ATTACKER_OPT,
    concurrency: int = CONCURRENCY_OPT,
    templates: Path | None = TEMPLATES_OPT,
    jailbreaks: Path | None = typer.Option(None, "--jailbreaks", help="A jailbreak set file (default: the built-in set)."),
    quiet: bool = QUIET_OPT,
) -> None:
    """Paired attack sets with and without a jailbreak (then: assay eval OUT --metrics safety)."""
    from assay.simulate.jailbreak import KINDS, simulate_jailbreak

    if kind not in KINDS:
        raise AssayError(f"--kind {kind!r}: choose upia (direct) or xpia (indirect)")
    _check_count(max_, "--max")
    _check_count(concurrency, "--concurrency")
    if turns is not None:
        _check_count(turns, "--turns")
    fn = load_target(target)
    with progress_bar("simulating", 2 * max_, quiet) as advance:
        res = simulate_jailbreak(fn, kind=kind, scenario=scenario, categories=category, max_conversations=max_,
                                 turns=turns, seed=seed, attacker=attacker, out=out_dir, concurrency=concurrency,
                                 progress=advance, templates=templates, jailbreaks=jailbreaks)
    _report(res)
    out.print(f"next: assay eval {safe(out_dir)} --metrics safety", highlight=False, soft_wrap=True)


@app.command("users")
def users_cmd(
    target: str = TARGET_OPT,
    out_path: Path = typer.Option(..., "--out", "-o", help="The evaluation set to write (JSONL)."),
    text: Path | None = typer.Option(None, "--text", help="A text the users ask about (e.g. docs/faq.md)."),
    tasks: Path | None = typer.Option(None, "--tasks", help="A file of tasks, one a line (# comments)."),
    max_: int | None = typer.Option(None, "--max", "-n", help="Conversations (default: one per task, else 5)."),
    turns: int = typer.Option(4, "--turns", help="User turns per conversation."),
    seed: int = SEED_OPT,
    model: str | None = typer.Option(None, "--model", "--attacker", help=MODEL_HELP),
    concurrency: int = CONCURRENCY_OPT,
    quiet: bool = QUIET_OPT,
) -> None:
    """Ordinary users, played by a model, in multi-turn conversations with the app."""
    from assay.simulate.users import read_tasks, simulate_users

    if text is None and tasks is None:
        raise AssayError("give --text FILE and/or --tasks FILE: what the simulated users ask about")
    body = _read(text, "--text") if text is not None else None
    task_list = read_tasks(_read(tasks, "--tasks")) if tasks is not None else None
    if tasks is not None and not task_list:
        raise AssayError(f"--tasks {tasks}: no task in the file (one a line)")
    if max_ is not None:
        _check_count(max_, "--max")
    _check_count(turns, "--turns")
    _check_count(concurrency, "--concurrency")
    fn = load_target(target)
    n = max_ or (len(task_list) if task_list else 5)
    with progress_bar("simulating", n, quiet) as advance:
        res = simulate_users(fn, text=body, tasks=task_list, max_conversations=max_, turns=turns, seed=seed,
                             model=model, out=out_path, concurrency=concurrency, progress=advance)
    _report(res)
