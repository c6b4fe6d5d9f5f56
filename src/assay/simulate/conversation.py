"""What every simulator shares: the simulating model, the turn loop against the target, and
the evaluation-set rows it writes.

**The simulating model** (:class:`Player`) writes the user's next message. A chat model gets
an instruction ("you play a user whose goal is ...; write only the next message") and the
conversation so far as a transcript. An in-process llama.cpp model (the embedded default is a
*base* model, not a chat model) instead continues the transcript itself from ``User:``, which
is what a base model does well. Its text is cleaned (first message only, role labels and
quotes removed); an empty or repeated message is replaced by a fallback drawn with the
conversation's seeded generator, and the row records how many fallbacks were used.

**The turn loop** (:func:`run_conversation`) calls the target as the engine does
(:class:`~assay.engine.target.Target`): ``query`` is the user message, ``history`` the
conversation before it, ``contexts`` the document the scenario hands to the target.

**Rows** are Azure conversation rows, which ``assay eval`` reads directly::

    {"conversation": {"messages": [{"role": "user", ...}, {"role": "assistant", ...,
                                    "context": {"citations": [...]}}],
                      "context": "<document handed to the target>"},
     "conversation_id": "...", "scenario": ..., "category": ..., "seed": ..., ...}
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from assay.engine.target import Target, TargetError
from assay.errors import AssayError
from assay.records import Document, Record

MAX_MESSAGE_CHARS = 1200
_ROLES = r"(?:\*\*)?(?:user|assistant|ai|model|bot|human|system|me|you)(?:\*\*)?\s*:(?:\*\*)?"
_ROLE_LABEL = re.compile(r"^\s*" + _ROLES + r"\s*", re.I)
_NEXT_TURN = re.compile(r"\n\s*" + _ROLES, re.I)


def resolve_model(spec: Any) -> Any:
    """The simulating model: ``None``, ``""``, ``"default"`` or ``"embedded"`` -> the embedded
    Gemma model; a spec string (``openai:MODEL``, ``azure:DEPLOYMENT``,
    ``http://HOST:PORT/v1#MODEL``, ``local:/path.gguf``) -> that backend; a ChatModel -> itself.
    Every one goes behind one :class:`~assay.models.limited.LimitedModel` (concurrency, retries,
    call cache): :func:`assay.models.resolve` with ``role="simulator"``."""
    from assay.models import resolve

    return resolve(spec, role="simulator")


def _is_base_completion_model(model: Any) -> bool:
    inner = getattr(model, "model", model)
    try:
        from assay.models.local import LlamaCppModel
    except Exception:  # pragma: no cover
        return False
    return isinstance(inner, LlamaCppModel)


def clean_message(text: str) -> str:
    """The first message in a model's continuation: cut at the next role label, drop a
    leading label and wrapping quotes, collapse runs of blank lines, cap the length."""
    t = _ROLE_LABEL.sub("", (text or "").replace("\r", "").strip(), count=1)
    m = _NEXT_TURN.search(t)
    if m:
        t = t[:m.start()]
    t = t.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        t = t[1:-1].strip()
    t = re.sub(r"\n{3,}", "\n\n", t)
    if len(t) > MAX_MESSAGE_CHARS:
        cut = t[:MAX_MESSAGE_CHARS]
        t = cut[:cut.rfind(" ")] if " " in cut else cut
    return t


def transcript(messages: Sequence[dict[str, Any]]) -> str:
    lines = []
    for m in messages:
        who = "User" if m["role"] == "user" else "Assistant"
        lines.append(f"{who}: {' '.join(str(m.get('content') or '').split())}")
    return "\n".join(lines)


@dataclass
class Player:
    """A model that plays the user. ``persona`` says who the user is and what they want."""

    model: Any
    max_tokens: int = 96
    temperature: float = 0.0
    calls: int = 0
    fallbacks: int = 0

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name", type(self.model).__name__))

    def prompt(self, persona: str, messages: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
        convo = transcript(messages)
        if _is_base_completion_model(self.model):
            head = f"{persona}\n\n{convo}\nUser:" if convo else f"{persona}\n\nUser:"
            return [{"role": "user", "content": "Continue the conversation with the user's next message."},
                    {"role": "assistant", "content": head}]
        system = (f"You are simulating a user who talks to an AI assistant, to test it. {persona}\n"
                  "Write only the user's next message: no role label, no quotes, no commentary.")
        user = ("The conversation so far:\n\n" + convo + "\n\nWrite the user's next message."
                if convo else "Write the user's first message.")
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def next_message(self, persona: str, messages: Sequence[dict[str, Any]],
                           fallback: Callable[[], str]) -> tuple[str, bool]:
        """(the user's next message, whether the fallback was used)."""
        from assay.models.base import ModelCallError

        self.calls += 1
        try:
            gen = await self.model.generate(self.prompt(persona, messages), max_tokens=self.max_tokens,
                                            temperature=self.temperature)
            text = clean_message(gen.text)
        except ModelCallError:
            text = ""
        if _unusable(text, persona, messages):
            self.fallbacks += 1
            return fallback(), True
        return text, False


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def _unusable(text: str, persona: str, messages: Sequence[dict[str, Any]]) -> bool:
    """Empty, a (near) repeat of an earlier message, or an echo of the instructions (base models
    do all three)."""
    t = _norm(text)
    if len(t) < 3:
        return True
    words = set(t.split())
    for m in messages:
        other = _norm(str(m.get("content") or ""))
        if t == other:
            return True
        ow = set(other.split())
        if len(words) >= 3 and len(words & ow) >= 0.7 * len(words | ow):  # a near-repeat
            return True
    return len(t) >= 12 and t in _norm(persona)


@dataclass
class Conversation:
    """The messages of one simulated conversation, and what went wrong, if anything."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    fallbacks: int = 0


def _citations(docs: Sequence[Document]) -> dict[str, Any]:
    out = []
    for d in docs:
        c: dict[str, Any] = {"content": d.content}
        if d.title:
            c["title"] = d.title
        if d.doc_uri:
            c["url"] = d.doc_uri
        if d.id:
            c["id"] = d.id
        out.append(c)
    return {"citations": out}


async def run_conversation(target: Target, first_message: str, turns: int, *,
                           next_user: Callable[[list[dict[str, Any]]], Awaitable[tuple[str, bool]]] | None = None,
                           documents: Sequence[Document] | None = None) -> Conversation:
    """``turns`` user messages, each answered by the target. The first message is given; the
    later ones come from ``next_user(messages)``. A target failure ends the conversation
    there and is recorded (the messages so far are kept)."""
    conv = Conversation()
    user = first_message
    for turn in range(max(1, turns)):
        if turn > 0:
            if next_user is None:
                break
            user, fell_back = await next_user(conv.messages)
            conv.fallbacks += fell_back
        history = [{"role": m["role"], "content": m["content"]} for m in conv.messages]
        rec = Record(query=user, history=history or None, contexts=list(documents) if documents else None)
        conv.messages.append({"role": "user", "content": user})
        try:
            filled = await target.call(rec)
        except TargetError as exc:
            conv.error = f"turn {turn}: {exc}"
            break
        if filled.response is None:
            conv.error = f"turn {turn}: the target returned no response"
            break
        msg: dict[str, Any] = {"role": "assistant", "content": filled.response}
        if filled.contexts and filled.contexts is not rec.contexts:
            msg["context"] = _citations(filled.contexts)
        conv.messages.append(msg)
    return conv


def conversation_row(conv: Conversation, conversation_id: str, meta: dict[str, Any],
                     document: str | None = None) -> dict[str, Any]:
    """One Azure conversation row with the simulation's metadata columns."""
    body: dict[str, Any] = {"messages": conv.messages}
    if document:
        body["context"] = document
    row: dict[str, Any] = {"conversation": body, "conversation_id": conversation_id}
    row.update(meta)
    row["simulation_fallbacks"] = conv.fallbacks
    if conv.error:
        row["simulation_error"] = conv.error
    return row


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".part")
        with open(tmp, "wb") as fh:
            for r in rows:
                fh.write(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE))
        os.replace(tmp, path)
    except OSError as exc:
        raise AssayError(f"cannot write {path}: {exc}") from None
    return path


async def run_all(jobs: Sequence[Callable[[], Awaitable[Any]]], concurrency: int,
                  progress: Callable[[int], None] | None = None) -> list[Any]:
    """Run ``jobs`` with at most ``concurrency`` at once; results in the jobs' order."""
    if concurrency < 1:
        raise AssayError(f"concurrency must be at least 1, got {concurrency}")
    sem = asyncio.Semaphore(concurrency)

    async def one(job: Callable[[], Awaitable[Any]]) -> Any:
        async with sem:
            res = await job()
        if progress is not None:
            progress(1)
        return res

    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def close_target(target: Target) -> None:
    close = getattr(target.fn, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # pragma: no cover - closing is best effort
            pass


def pick(rng: random.Random, options: Sequence[str], default: str) -> str:
    return rng.choice(list(options)) if options else default


@dataclass
class SimulationResult:
    """What a simulator made: the rows (also written to ``paths``) and its counts."""

    rows: list[dict[str, Any]]
    paths: list[Path]
    conversations: int
    target_errors: int
    model_calls: int
    fallbacks: int
    model: str
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        where = ", ".join(str(p) for p in self.paths) or "(not written)"
        return (f"{self.conversations} conversation(s) written to {where}; {self.target_errors} ended by a "
                f"target error; simulating model {self.model}: {self.model_calls} call(s), "
                f"{self.fallbacks} fallback message(s)")
