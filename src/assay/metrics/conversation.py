"""Conversation-level judges: each scores a whole transcript, not one turn.

``assay eval conv.jsonl --metrics conversation`` runs the group; each metric is one
:class:`~assay.judges.Judge` declaration (its template under ``metrics/prompts/``) on the one
judge path (:func:`~assay.judges.ask.run_judge`):

* ``conversation_completeness`` (1–5, threshold 3) — were the user's requests satisfied.
* ``knowledge_retention`` (1–5, threshold 3) — does the assistant keep what it was told (no
  fact asked twice, none changed or ignored).
* ``role_adherence`` (1–5, threshold 3) — does it stay in the role its system message sets.
* ``goal_met`` (yes/no) — against the goal attached to the conversation: the ``goal`` column
  that ``assay simulate users --goals`` writes (``goal`` and ``done``), or a text goal.
* ``user_frustration`` (1–5, lower is better, threshold 2) — how frustrated the user became.

**The transcript** is the row's ``history`` (the system message first when there is one, tool
steps included), its ``query`` and its ``response``. A conversation row (Azure's
``{"conversation": {"messages": [...]}}``) is read as one record per assistant turn, and the
last turn's record holds the whole transcript: a conversation-level metric scores that turn
once and is not applicable on the others. The last turn is the one whose ``turn`` is the
record's ``turns`` less one (the reader counts a conversation's turns; rows given one turn a line
with ``conversation_id`` and ``turn`` columns are grouped into conversations the same way:
:mod:`assay.formats.turn_rows`); a row that is not a turn of a conversation (a flat row with
``history``) is scored as it is. The
per-turn metrics and these sit side by side in a run: a conversation's turn-level figure is the
mean of its turns, its conversation-level figure the one judgment of its transcript.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from assay.formats.turn_rows import TURNS_COLUMN
from assay.judges import Judge, run_judge
from assay.metrics.base import EvalContext, Score, group
from assay.metrics.judged import register_judge
from assay.records import Message

__all__ = ["CONVERSATION_METRICS", "JUDGES", "TURNS_COLUMN", "goal_parts", "is_last_turn", "transcript_messages"]

ROW_FIELDS = ("query", "history", "conversation_id", "turn", "turns", "extra")
NOT_LAST = "a conversation-level metric: scored once per conversation, on its last turn"
NO_TURNS = ("a conversation-level metric scores a conversation once, on its last turn: a row given as one turn "
            f"needs a {TURNS_COLUMN} column (the conversation's number of turns)")
NO_GOAL = "no goal attached to the conversation (a goal column: text, or an object with goal and done)"

JUDGES: dict[str, Judge] = {}


def _declare(judge: Judge) -> Judge:
    JUDGES[judge.name] = judge
    register_judge(judge, _score)
    return judge


def is_last_turn(values: Mapping[str, Any]) -> str | None:
    """None when the row holds the whole conversation (its last turn, or not a turn at all),
    else why it is not scored."""
    if values.get("conversation_id") is None or values.get("turn") is None:
        return None
    turns = values.get("turns")
    if turns is None:
        turns = (values.get("extra") or {}).get(TURNS_COLUMN)
    if not isinstance(turns, int) or isinstance(turns, bool) or turns < 1:
        return NO_TURNS
    if values["turn"] != turns - 1:
        return NOT_LAST
    return None


def transcript_messages(values: Mapping[str, Any]) -> list[Message]:
    """The whole conversation: ``history``, then the ``query`` and the ``response``."""
    msgs = [m if isinstance(m, Message) else Message(**m) for m in (values.get("history") or ())]
    if values.get("query"):
        msgs.append(Message(role="user", content=values["query"]))
    if values.get("response"):
        msgs.append(Message(role="assistant", content=values["response"]))
    return msgs


def goal_parts(goal: Any) -> tuple[str, str] | None:
    """``(goal, done)`` of the goal attached to a conversation: an object with ``goal`` (and
    ``done``), or a text (its own condition for done); None when there is none."""
    if isinstance(goal, str) and goal.strip():
        return goal.strip(), "the goal above is achieved"
    if isinstance(goal, Mapping) and isinstance(goal.get("goal"), str) and goal["goal"].strip():
        done = goal.get("done")
        return goal["goal"].strip(), done.strip() if isinstance(done, str) and done.strip() else \
            "the goal above is achieved"
    return None


async def _score(judge: Judge, ctx: EvalContext | None, values: Mapping[str, Any]) -> Score:
    why = is_last_turn(values)
    if why is not None:
        return Score.skipped(why)
    filled: dict[str, Any] = {"transcript": transcript_messages(values)}
    if judge.name == "goal_met":
        parts = goal_parts((values.get("extra") or {}).get("goal"))
        if parts is None:
            return Score.skipped(NO_GOAL)
        filled["goal"], filled["done"] = parts
    return await run_judge(judge, ctx, filled)


def _conversation_judge(name: str, description: str, **kw: Any) -> Judge:
    return _declare(Judge(name, name, requires=("response",), optional=ROW_FIELDS, description=description, **kw))


_conversation_judge("conversation_completeness", """Were the user's requests over the whole conversation satisfied? 1–5.

A conversation-level judge: it reads the whole transcript once per conversation (on its last turn).""",
                    threshold=3)
_conversation_judge("knowledge_retention", """Does the assistant keep what the user told it (no fact asked twice, changed or ignored)? 1–5.

A conversation-level judge: it reads the whole transcript once per conversation (on its last turn).""",
                    threshold=3)
_conversation_judge("role_adherence", """Does the assistant stay in the role its system message sets, over the whole conversation? 1–5.

A conversation-level judge: it reads the whole transcript once per conversation (on its last turn).""",
                    threshold=3)
_conversation_judge("goal_met", """Was the goal attached to the conversation (its goal column) met? yes/no.

The goal and what counts as done come from the row's ``goal`` column, as ``assay simulate users
--goals`` writes it; a row without one is not applicable.""", scale="yes/no")
_conversation_judge("user_frustration", """How frustrated did the user become over the conversation? 1–5, lower is better.

A conversation-level judge: it reads the whole transcript once per conversation (on its last turn).""",
                    threshold=2, higher_is_better=False)

CONVERSATION_METRICS: Sequence[str] = tuple(JUDGES)
group("conversation", CONVERSATION_METRICS)
