"""The one row type: every input format is normalised to a :class:`Record`.

Field names are the union of Azure AI Evaluation's and Databricks Agent Evaluation's input
schemas. Adapters in :mod:`assay.formats` produce records; nothing downstream reads a source
format.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Message(_Model):
    """One OpenAI-style chat message. ``context`` keeps Azure's assistant citations."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | None = None
    context: Any = None
    tool_calls: list[dict[str, Any]] | None = None


class Document(_Model):
    """A retrieved chunk."""

    model_config = ConfigDict(extra="allow")
    content: str | None = None
    doc_uri: str | None = None
    title: str | None = None
    id: str | None = None


class Usage(_Model):
    """Token counts and latency of the application under test (not of a judge)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    latency_ms: float | None = None


#: the keys of one canonical tool call: ``type`` is ``"tool_call"``; ``tool_call_id`` when the
#: source names one; ``name``; ``arguments`` an object (JSON text parsed) or the raw text when it
#: is not JSON; ``result`` what the tool returned, when known; ``error`` the error's text when
#: the tool failed (an MLflow TOOL span with status ERROR, a result that is an error object)
TOOL_CALL_KEYS = ("type", "tool_call_id", "name", "arguments", "result", "error")

Guidelines = list[str] | dict[str, list[str]]


class Record(_Model):
    """One row of an evaluation set; every field is optional except what a metric needs.

    ``conversation_id`` and ``turn`` are set when the row is one assistant turn of a
    multi-turn conversation (evaluated per turn, aggregated per conversation); ``turns`` is
    then the conversation's number of turns (the last one is ``turn == turns - 1``).
    ``extra`` keeps the source columns that have no canonical name, so nothing the
    user supplied is lost from the result.

    Agent rows: ``query`` is the user's request as text (the last user message), ``history``
    the messages before it (a system message first when there is one), ``response`` the
    agent's final answer as text, ``steps`` every message the agent produced for this request
    in order -- assistant messages (with their ``tool_calls``) and tool results (role
    ``"tool"``, ``tool_call_id``, ``content``) -- ending with the final answer. ``tool_calls``
    lists each call made, in order, as a :data:`TOOL_CALL_KEYS` dict; ``tool_definitions``
    the tools the agent was offered (``name``, ``description``, ``parameters``);
    ``expected_tool_calls`` the calls a correct run makes (``name``, optional ``arguments``).
    """

    id: str | None = None
    query: str | None = None
    history: list[Message] | None = None
    response: str | None = None
    contexts: list[Document] | None = None
    ground_truth: str | None = None
    expected_facts: list[str] | None = None
    expected_doc_uris: list[str] | None = None
    guidelines: Guidelines | None = None
    steps: list[Message] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    expected_tool_calls: list[dict[str, Any]] | None = None
    usage: Usage | None = None
    conversation_id: str | None = None
    turn: int | None = None
    turns: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    def has(self, field: str) -> bool:
        """True when ``field`` holds a usable value (not None, not an empty string or list)."""
        value = getattr(self, field, None)
        if value is None:
            return False
        if isinstance(value, (str, list, dict)) and len(value) == 0:
            return False
        return True

    def context_text(self) -> str:
        """The retrieved contexts joined as one text (what Azure's string ``context`` is)."""
        if not self.contexts:
            return ""
        return "\n\n".join(d.content for d in self.contexts if d.content)


CANONICAL_FIELDS: tuple[str, ...] = tuple(
    f for f in Record.model_fields if f not in ("extra",)
)
