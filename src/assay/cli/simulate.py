"""``assay simulate``: adversarial, jailbreak and user simulations, and test sets from documents.

Problems with the user's input raise :class:`~assay.errors.AssayError`: one line, exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from assay.cli.common import err, load_target, out, progress_bar, safe
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
DEFAULT_TURNS = 4          # user turns of a --text/--tasks conversation
DEFAULT_MAX_TURNS = 12     # the cap of a goal-driven conversation


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
    turns: int | None = typer.Option(None, "--turns", help="Without --goals: user turns per conversation "
                                     "(default 4; every conversation has exactly this many)."),
    seed: int = SEED_OPT,
    model: str | None = typer.Option(None, "--model", "--attacker", help=MODEL_HELP),
    concurrency: int = CONCURRENCY_OPT,
    quiet: bool = QUIET_OPT,
    goals: Path | None = typer.Option(None, "--goals", help="A goal file (YAML): per goal persona, goal, facts, "
                                      "done, max_turns, tools. Each conversation stops when its goal is met or "
                                      "abandoned."),
    max_turns: int | None = typer.Option(None, "--max-turns", help="With --goals: user turns at most per "
                                         "conversation (default 12)."),
) -> None:
    """Ordinary users, played by a model, in multi-turn conversations with the app."""
    from assay.simulate.users import read_tasks, simulate_users

    _check_turn_options(goals is not None, turns, max_turns)
    if goals is not None:
        if text is not None or tasks is not None:
            raise AssayError("--goals replaces --text and --tasks: give the goal file alone")
        _goal_users(target, goals, out_path, DEFAULT_MAX_TURNS if max_turns is None else max_turns, seed, model,
                    concurrency, quiet)
        return
    turns = DEFAULT_TURNS if turns is None else turns
    if text is None and tasks is None:
        raise AssayError("give --goals FILE, or --text FILE and/or --tasks FILE: what the simulated users want")
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


def _check_turn_options(with_goals: bool, turns: int | None, max_turns: int | None) -> None:
    """``--turns`` is the fixed length of --text/--tasks conversations, ``--max-turns`` the cap of
    goal-driven ones (which stop early): each given in the other mode is an error, not ignored."""
    if with_goals and turns is not None:
        raise AssayError("--turns sets the length of --text/--tasks conversations; a goal-driven one (--goals) "
                         "stops when its goal is met or abandoned: cap it with --max-turns N")
    if not with_goals and max_turns is not None:
        raise AssayError("--max-turns caps goal-driven conversations (--goals); without --goals every conversation "
                         "has exactly --turns user turns: give --turns N")


def _goal_users(target: str, goals_path: Path, out_path: Path, max_turns: int, seed: int, model: str | None,
                concurrency: int, quiet: bool) -> None:
    from assay.simulate.goals import read_goals
    from assay.simulate.users import simulate_goals

    goal_list = read_goals(goals_path)
    _check_count(max_turns, "--max-turns")
    _check_count(concurrency, "--concurrency")
    fn = load_target(target)
    with progress_bar("goals", len(goal_list), quiet) as advance:
        res = simulate_goals(fn, goal_list, max_turns=max_turns, seed=seed, model=model, out=out_path,
                             concurrency=concurrency, progress=advance)
    _report(res)
    stops = ", ".join(f"{n} {r}" for r, n in res.extra["stops"].items() if n)
    out.print(f"stopped: {stops}", highlight=False, soft_wrap=True)
    if res.extra["unreadable_verdicts"]:
        err.print(f"[yellow]{res.extra['unreadable_verdicts']} verdict(s) of the simulating model could not be "
                  "read (taken as open)[/yellow]")
    out.print(f"next: assay eval {safe(out_path)} --metrics conversation --judge MODEL", highlight=False,
              soft_wrap=True)


@app.command("testset")
def testset_cmd(
    docs: Path = typer.Option(..., "--docs", help="A folder (or file) of Markdown, text, HTML and PDF documents."),
    n: int = typer.Option(50, "--n", "-n", help="Items to make: exactly this many, or a line saying why fewer."),
    mix: str = typer.Option("single_hop=0.6,multi_hop=0.3,unanswerable=0.1", "--mix",
                            help="Shares of the question types single_hop, multi_hop, unanswerable."),
    out_path: Path | None = typer.Option(None, "--out", "-o", help="The evaluation set to write (JSONL)."),
    model: str | None = typer.Option(None, "--model", help=MODEL_HELP.replace("simulating", "writing and checking")),
    embedder: str | None = typer.Option(None, "--embedder", help="Embeddings for near-duplicates and neighbours: "
                                        "embedded (default), an embedder spec, or 'words' (hashed word counts)."),
    estimate: bool = typer.Option(False, "--estimate", help="Print the calls, tokens, cost and time; call nothing."),
    seed: int = SEED_OPT,
    styles: str | None = typer.Option(None, "--styles", help="Question styles, comma-separated: plain, terse, "
                                      "verbose, misspelt, language (default: all)."),
    language: str = typer.Option("French", "--language", help="The language of the 'language' style."),
    personas: Path | None = typer.Option(None, "--personas", help="A file of personas who ask, one a line."),
    shape: str = typer.Option("databricks", "--shape", help="Row shape: databricks (request, expected_response) "
                              "or azure (query, ground_truth); both with expected_facts and expected_retrieved_context."),
    max_tries: int | None = typer.Option(None, "--max-tries", help="Items tried at most (default 4 per item, "
                                         "at least 20)."),
    chunk_chars: int = typer.Option(1000, "--chunk-chars", help="Characters per chunk, about."),
    duplicate_threshold: float | None = typer.Option(None, "--duplicate-threshold", help="Cosine similarity "
                                                     "from which a question is a near-duplicate (default 0.93)."),
    price: str | None = typer.Option(None, "--price", help="For --estimate: USD per 1M input,output tokens."),
    seconds_per_call: float | None = typer.Option(None, "--seconds-per-call", help="For --estimate: seconds a call."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", help="Items tried at once."),
    quiet: bool = QUIET_OPT,
) -> None:
    """Questions, reference answers and sources from your own documents (checked before kept)."""
    from assay.simulate.testset import estimate as estimate_fn
    from assay.simulate.testset import generate_testset
    from assay.simulate.testset.run import read_personas

    _check_count(n, "--n")
    _check_count(concurrency, "--concurrency")
    if max_tries is not None:
        _check_count(max_tries, "--max-tries")
    persona_list = read_personas(personas) if personas is not None else None
    if estimate:
        est, skipped = estimate_fn(docs, n=n, mix=mix, model=model, chunk_chars=chunk_chars, styles=styles,
                                   personas=persona_list, seed=seed, language=language, max_tries=max_tries,
                                   concurrency=concurrency, price=price, seconds_per_call=seconds_per_call)
        for line in skipped:
            err.print(f"[yellow]{safe(line)}[/yellow]", highlight=False, soft_wrap=True)
        for line in est.lines():
            out.print(safe(line), highlight=False, soft_wrap=True)
        return
    if out_path is None:
        raise AssayError("give --out FILE (the evaluation set to write), or --estimate to see what it would cost")
    with progress_bar("items", n, quiet) as advance:
        res = generate_testset(docs, n=n, mix=mix, model=model, embedder=embedder, seed=seed, styles=styles,
                               personas=persona_list, language=language, max_tries=max_tries,
                               concurrency=concurrency, shape=shape, chunk_chars=chunk_chars,
                               duplicate_threshold=duplicate_threshold, out=out_path, progress=advance)
    for line in res.skipped_files + res.notes:
        err.print(f"[yellow]{safe(line)}[/yellow]", highlight=False, soft_wrap=True)
    out.print(safe(res.summary()), highlight=False, soft_wrap=True)
    short = res.shortfall()
    if short:
        err.print(f"[yellow]{safe(short)}[/yellow]", highlight=False, soft_wrap=True)
        raise typer.Exit(3)
    out.print(f"next: assay eval {safe(out_path)} --target YOUR_APP --metrics document_recall,correctness",
              highlight=False, soft_wrap=True)
