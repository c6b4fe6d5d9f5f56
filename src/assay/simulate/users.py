"""The user simulator: a model plays an ordinary user, from a text and/or a list of tasks,
for N turns against the target, to make multi-turn evaluation sets.

Each conversation has a *task* (a line of the task list: what the user wants to get done)
and/or a *passage* of the text (what the user has read, or is asking about). With both, each
task gets the passage that shares the most words with it; with only a text, the passages are
taken in a seeded order, one per conversation. The simulating model writes every user
message, the first included, from a persona built from the task and passage; when its message
is unusable, the first turn falls back to the task put as a request (or a question about the
passage's first line) and later turns to a seeded choice of ordinary follow-ups.

Rows are Azure conversation rows (see :mod:`assay.simulate.conversation`), with the target's
citations on its messages when it returns contexts, and the columns ``simulator`` (``users``),
``task``, ``source_passage``, ``seed`` and ``user_model``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from assay.engine.evaluate import run_sync
from assay.engine.target import Target
from assay.errors import AssayError
from assay.simulate.conversation import (
    Player,
    SimulationResult,
    close_target,
    conversation_row,
    pick,
    resolve_model,
    run_all,
    run_conversation,
    write_jsonl,
)
from assay.simulate.templates import seeded

PASSAGE_CHARS = 700
FOLLOW_UPS = ("Thanks. Can you explain that in simpler words?", "What should I do next?",
              "Is there anything I should watch out for?", "Can you give me an example?",
              "How long does that usually take?", "And what if that does not work?")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the and or of to in on for is are be can i my me you your it this that with how what "
                  "do does did at by from as".split())


def passages(text: str, max_chars: int = PASSAGE_CHARS) -> list[str]:
    """The text cut at blank lines into passages of at most about ``max_chars`` characters; a
    Markdown heading starts a new passage and stays with the paragraphs after it."""
    blocks = [b.strip() for b in re.split(r"\n\s*\n", text or "") if b.strip()]
    out: list[str] = []
    cur = ""
    for b in blocks:
        only_heading = cur and all(line.lstrip().startswith("#") for line in cur.splitlines())
        new_section = b.lstrip().startswith("#")
        if cur and not only_heading and (new_section or len(cur) + len(b) + 2 > max_chars):
            out.append(cur)
            cur = b
        else:
            cur = f"{cur}\n\n{b}" if cur else b
    if cur:
        out.append(cur)
    return out


def read_tasks(text: str) -> list[str]:
    """One task a line; blank lines and lines starting with ``#`` are ignored."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _words(s: str) -> set[str]:
    return {w for w in _WORD.findall(s.lower()) if w not in _STOP}


def _best_passage(task: str, parts: Sequence[str]) -> str:
    tw = _words(task)
    scores = [len(tw & _words(p)) for p in parts]
    return parts[max(range(len(parts)), key=lambda i: (scores[i], -i))]


def _topic(passage: str) -> str:
    for line in passage.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            first = re.split(r"(?<=[.?!])\s", line)[0]
            return first[:120].rstrip(" .?!:")
    return "this"


def _opening(task: str) -> str:
    """The first message when the model's is unusable: the task, put as a request."""
    t = task.strip()
    if t.endswith("?") or not t[:1].islower():
        return t
    return f"I would like to {t.rstrip('.')}. Can you help me?"


def user_persona(task: str | None, passage: str | None) -> str:
    parts = ["An ordinary user is chatting with an AI assistant. The user writes short, natural messages, "
             "asks one thing at a time and follows up on the assistant's answers."]
    if task:
        parts.append(f"The user's task: {task}")
    if passage:
        parts.append(f"What the user has read and is asking about:\n{passage}")
    return "\n".join(parts)


async def simulate_users_async(
    target: Callable[..., Any] | str,
    *,
    text: str | None = None,
    tasks: Sequence[str] | None = None,
    max_conversations: int | None = None,
    turns: int = 4,
    seed: int = 0,
    model: Any = None,
    out: str | Path | None = None,
    concurrency: int = 4,
    progress: Callable[[int], None] | None = None,
    max_tokens: int = 96,
    temperature: float = 0.0,
) -> SimulationResult:
    """See :func:`simulate_users`."""
    task_list = [t.strip() for t in (tasks or []) if t and t.strip()]
    parts = passages(text or "")
    if not task_list and not parts:
        raise AssayError("the user simulator needs a text (--text) or a task list (--tasks); both were empty")
    if turns < 1:
        raise AssayError(f"turns must be at least 1, got {turns}")
    n = max_conversations if max_conversations is not None else (len(task_list) or min(5, len(parts)))
    if n < 1:
        raise AssayError(f"the number of conversations must be at least 1, got {n}")
    order = list(range(len(parts)))
    seeded(seed, "passages").shuffle(order)
    plan: list[tuple[str | None, str | None]] = []
    for i in range(n):
        task = task_list[i % len(task_list)] if task_list else None
        if parts:
            passage = _best_passage(task, parts) if task else parts[order[i % len(order)]]
        else:
            passage = None
        plan.append((task, passage))
    tgt = Target(target)
    player = Player(resolve_model(model), max_tokens=max_tokens, temperature=temperature)

    def job(i: int, task: str | None, passage: str | None) -> Callable[[], Any]:
        rng = seeded(seed, i, "users")
        persona = user_persona(task, passage)
        opening = _opening(task) if task else f"Can you tell me about {_topic(passage or '')}?"

        async def converse() -> Any:
            first, fell_back = await player.next_message(persona, [], lambda: opening)

            async def next_user(messages: list[dict[str, Any]]) -> tuple[str, bool]:
                return await player.next_message(persona, messages, lambda: pick(rng, FOLLOW_UPS, FOLLOW_UPS[0]))

            conv = await run_conversation(tgt, first, turns, next_user=next_user)
            conv.fallbacks += fell_back
            return conv

        return converse

    try:
        convs = await run_all([job(i, t, p) for i, (t, p) in enumerate(plan)], concurrency, progress)
    finally:
        await close_target(tgt)
    rows = []
    for i, ((task, passage), conv) in enumerate(zip(plan, convs)):
        meta = {"simulator": "users", "task": task, "source_passage": passage, "seed": seed, "user_model": player.name}
        rows.append(conversation_row(conv, f"user-{seed}-{i}", meta))
    paths = [write_jsonl(rows, out)] if out is not None else []
    return SimulationResult(rows=rows, paths=paths, conversations=len(rows),
                            target_errors=sum(1 for c in convs if c.error), model_calls=player.calls,
                            fallbacks=player.fallbacks, model=player.name)


def simulate_users(target: Callable[..., Any] | str, **kwargs: Any) -> SimulationResult:
    """Ordinary multi-turn conversations with ``target``: ``text`` (the content users ask
    about) and/or ``tasks`` (what each user wants to do), ``turns`` user messages each,
    played by ``model`` (a spec string or ChatModel; default the embedded model), seeded by
    ``seed``; written to ``out`` (JSONL) when given."""
    return run_sync(lambda: simulate_users_async(target, **kwargs))
