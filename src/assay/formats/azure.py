"""The Azure AI Evaluation data format (the JSONL input of the ``azure-ai-evaluation`` SDK's
``evaluate()``): single-turn QA rows and multi-turn conversations.

Single turn (one record per row)::

    {"question": ..., "answer": ..., "context": "...", "ground_truth": ...}
    {"query": ..., "response": ..., "context": "...", "ground_truth": ...}

``question``/``answer`` are the older names of ``query``/``response`` (the canonical
names win when a row has both). ``context`` is one text, so it becomes one document.

Conversation (one record per assistant turn)::

    {"messages": [{"role": "user", "content": ...},
                  {"role": "assistant", "content": ..., "context": {"citations": [...]}}, ...]}
    {"conversation": {"messages": [...], "context": "..."}}

For the assistant message at position *j*: ``query`` is the user message before it,
``history`` the messages before that user message, ``response`` its content, ``contexts``
its own ``context`` (a string: one document; ``{"citations": [{id, title, content,
url, filepath}]}``: one document per citation, ``url``/``filepath`` as ``doc_uri``),
else the conversation's ``context``. Records get ``conversation_id`` (the row's
``conversation_id`` or ``id``, else the row's 0-based index in the data set), ``turn``
(0-based) and ``id = "<conversation_id>#<turn>"``. An assistant message that only calls
tools (no content), or whose calls' results follow it, is not a turn but a step of the next
answered turn: each record's ``steps`` are the messages from the turn's user message (or the
previous answer) to its answer, and its ``tool_calls`` the calls made in them, with their
results (:mod:`.agent`; OpenAI ``tool_calls`` / ``role: "tool"`` messages and Azure's content
parts alike). A
conversation ending in an unanswered user message gives a last record without a
response (for a target to answer). Row-level ``ground_truth`` / ``expected_facts`` /
``expected_doc_uris`` describe the final answer and go to the last turn only; other
columns go to every turn.
"""

from __future__ import annotations

from typing import Any

from assay.formats import agent
from assay.formats.fields import (
    FieldError,
    decoded,
    documents,
    ident,
    kind,
    text,
)

#: source name -> (canonical field, converter); priority 1 (a canonical name wins)
ALIASES = {
    "question": ("query", text),
    "answer": ("response", text),
    "context": ("contexts", lambda v, p: documents(v, p, string_ok=True)),
}

_LAST_TURN_ONLY = ("ground_truth", "expected_facts", "expected_doc_uris")


def _turn(base: dict[str, Any], conv_id: str, turn: int) -> dict[str, Any]:
    return {**base, "id": f"{conv_id}#{turn}", "conversation_id": conv_id, "turn": turn}


def _is_answer(msgs: list[dict[str, Any]], j: int) -> bool:
    """An assistant message with content that no tool message follows before the next user message
    (a message that calls tools and then hears their results is a step, not the turn's answer)."""
    if not msgs[j].get("content"):
        return False
    if not msgs[j].get("tool_calls"):
        return True
    for m in msgs[j + 1:]:
        if m["role"] == "user":
            return True
        if m["role"] == "tool":
            return False
    return True


def matches(row: dict[str, Any]) -> bool:
    """A conversation row: it has ``messages`` or ``conversation``."""
    return "messages" in row or "conversation" in row


def own_columns(row: dict[str, Any]) -> tuple[str, ...]:
    """The columns :func:`to_fields` reads itself; the others are the row's shared ``base`` fields."""
    return ("messages" if "messages" in row else "conversation", "conversation_id", "id")


def to_fields(row: dict[str, Any], base: dict[str, Any], index: int) -> list[dict[str, Any]]:  # noqa: C901
    """The record fields of one conversation row, one dict per assistant turn.

    ``base``: the canonical fields of the row's other columns (shared by the turns);
    ``index``: the row's 0-based position in the data set (the default conversation id).
    """
    conv_context = None
    if "messages" in row:
        raw, path = row["messages"], "messages"
    else:
        conv, path = decoded(row["conversation"], "{"), "conversation"
        if not isinstance(conv, dict):
            raise FieldError(path, f"expected an object with 'messages', got {kind(conv)}")
        if conv.get("messages") is None:
            raise FieldError(path, "the conversation has no 'messages'")
        raw, path = conv["messages"], "conversation.messages"
        conv_context = conv.get("context")
    msgs = agent.chat_messages(raw, path, True)
    if not msgs:
        raise FieldError(path, "expected at least one chat message, got an empty list")

    cid, rid = row.get("conversation_id"), row.get("id")
    conv_id = ident(cid, "conversation_id") if cid is not None else ident(rid, "id")
    if conv_id is None:
        conv_id = str(index)
    base = {k: v for k, v in base.items() if k != "id"}
    last_only = {k: base.pop(k) for k in _LAST_TURN_ONLY if k in base}
    shared_docs = base.pop("contexts", None)
    if conv_context is not None:
        shared_docs = documents(conv_context, "conversation.context", string_ok=True)

    records: list[dict[str, Any]] = []
    last_user: int | None = None
    answered = True
    start = 0  # where the current turn's steps begin
    for j, m in enumerate(msgs):
        role = m["role"]
        if role == "user":
            last_user, answered, start = j, False, j + 1
            continue
        if role != "assistant" or not _is_answer(msgs, j):
            continue
        rec = _turn(base, conv_id, len(records))
        if last_user is not None:
            rec["query"] = msgs[last_user].get("content")
            history = msgs[:last_user]
        else:
            history = msgs[:j]
        if history:
            rec["history"] = agent.public(history)
        fields = agent.steps_fields(msgs[start:j + 1])
        rec["steps"] = fields["steps"]
        rec["response"] = m.get("content")
        cx = m.get("context")
        docs = documents(cx, f"{path}[{j}].context", string_ok=True) if cx is not None else shared_docs
        if docs is not None:
            rec["contexts"] = docs
        if "tool_calls" in fields:
            rec["tool_calls"] = fields["tool_calls"]
        records.append(rec)
        answered = True
        start = j + 1
    if last_user is not None and not answered:
        rec = _turn(base, conv_id, len(records))
        rec["query"] = msgs[last_user].get("content")
        if last_user:
            rec["history"] = agent.public(msgs[:last_user])
        if shared_docs is not None:
            rec["contexts"] = shared_docs
        records.append(rec)
    if not records:
        raise FieldError(path, "the conversation has no user or assistant message")
    records[-1].update(last_only)
    for rec in records:
        rec["turns"] = len(records)
    return records
