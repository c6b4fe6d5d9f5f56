"""GenAI spans → record fields: what an instrumented app's trace says it asked, got and used.

Reads the spans of :mod:`.otlp` (one :class:`~assay.formats.otlp.Trace` at a time) in three
vocabularies, span by span, into one view per span:

- **GenAI semantic conventions, current**: ``gen_ai.operation.name`` (``chat``,
  ``text_completion``, ``generate_content``: a model call; ``execute_tool``; ``retrieval``;
  ``invoke_agent``), ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON: ``role`` and
  ``parts`` -- ``text`` ``content``, ``tool_call`` ``id`` / ``name`` / ``arguments``,
  ``tool_call_response`` ``id`` / ``response``), ``gen_ai.system_instructions`` (parts),
  ``gen_ai.tool.definitions``, ``gen_ai.usage.input_tokens`` / ``output_tokens``,
  ``gen_ai.request.model`` / ``gen_ai.response.model``, ``gen_ai.provider.name``; a tool span's
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` /
  ``gen_ai.tool.call.result``; a retrieval span's ``gen_ai.retrieval.documents``. The messages
  may also sit on the span's ``gen_ai.client.inference.operation.details`` event;
- **GenAI, older**: ``gen_ai.system``; ``gen_ai.prompt.N.role`` / ``.content`` /
  ``.tool_call_id`` and ``gen_ai.completion.N.role`` / ``.content`` / ``.tool_calls.M.*``
  attributes; ``gen_ai.usage.prompt_tokens`` / ``completion_tokens``; the per-message span
  events ``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
  ``gen_ai.tool.message``, ``gen_ai.choice`` (the body in ``gen_ai.event.content``, or as the
  event's ``content`` / ``role`` / ``tool_calls`` / ``id`` / ``message`` attributes), and
  ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events (``gen_ai.prompt`` /
  ``gen_ai.completion``);
- **OpenInference**: ``openinference.span.kind`` (``LLM``, ``TOOL``, ``RETRIEVER``, ``CHAIN``,
  ``AGENT`` ...), ``llm.input_messages.N.message.role`` / ``.content`` / ``.contents.M.*`` /
  ``.tool_calls.M.tool_call.*`` / ``.tool_call_id``, ``llm.output_messages...``, ``input.value``
  / ``output.value`` (with ``input.mime_type``), ``retrieval.documents.N.document.id`` /
  ``.content`` / ``.score`` / ``.metadata``, ``tool.name``, ``tool_call.id``,
  ``llm.token_count.prompt`` / ``completion`` / ``total``, ``llm.model_name``, ``llm.provider``.

Then a trace gives one record (:func:`trace_records` with ``per="trace"``) or one per model call
(``per="call"``):

- per trace: ``query`` / ``history`` from the root span's request when it has one, else the
  first model call's; ``response`` and ``steps`` from the root span's answer, else the last
  model call's; ``tool_calls`` from the messages, each with its tool span's result and error
  (status ERROR: the status message, else the exception event's), and the tool spans no message
  names; ``contexts`` from the last retrieval span (not inside another); ``usage``: the tokens of
  the model calls (not counting a wrapper twice) and the root span's latency; ``id`` the trace id;
- per call: the call's own request, answer, tokens and latency; ``contexts`` from the last
  retrieval before it; ``id`` ``<trace id>-<span id>``.

``extra`` keeps ``trace_id``, ``span_id``, ``span_name``, ``model``, ``provider``, ``service``
(the resource's ``service.name``) and ``session_id``. A value that cannot be read (JSON that
does not parse, messages of an unknown shape) is kept as it is in ``extra["otlp_unread"]`` and
gives one line -- the span's name and id, the attribute, what was wrong -- in the
:class:`Summary`'s ``notes``. Text is taken as text: nothing in a value is run or rendered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from assay.formats import agent
from assay.formats.fields import FieldError, documents, json_text, request_fields, response_text
from assay.formats.otlp import Span, Trace

PER = ("trace", "call")

#: ``gen_ai.operation.name`` values, by what assay does with the span
LLM_OPS = frozenset(("chat", "text_completion", "generate_content", "completion"))
AUX_OPS = frozenset(("embeddings", "create_agent", "invoke_workflow"))
AUX_KINDS = frozenset(("EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR", "PROMPT", "UNKNOWN"))

_EVENT_ROLES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_INDEXED = re.compile(r"^(gen_ai\.(?:prompt|completion)|llm\.(?:input|output)_messages|retrieval\.documents)\.\d")


class Summary:
    """What a reading found: spans, traces and records; the spans with no GenAI content and the
    traces with none (skipped); ``notes``, one line per value that could not be read."""

    __slots__ = ("spans", "traces", "records", "spans_skipped", "traces_skipped", "notes")

    def __init__(self) -> None:
        self.spans = self.traces = self.records = self.spans_skipped = self.traces_skipped = 0
        self.notes: list[str] = []

    def line(self) -> str:
        s = (f"{self.spans} spans in {self.traces} traces: {self.records} records; "
             f"{self.spans_skipped} spans with no GenAI content skipped")
        if self.traces_skipped:
            s += f", {self.traces_skipped} traces with none"
        if self.notes:
            s += f"; {len(self.notes)} values not read"
        return s

    def __repr__(self) -> str:
        return f"Summary({self.line()})"


class _Unread(Exception):
    """A value of a known attribute in a shape this module does not read."""


# --------------------------------------------------------------------------- attribute values

def _json(v: Any, what: str) -> Any:
    """A structured attribute: the value itself, or its JSON text parsed."""
    if isinstance(v, (bytes, bytearray)):
        v = v.decode("utf-8", "replace")
    if isinstance(v, str):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            raise _Unread(f"expected {what} as JSON, got text that is not JSON") from None
    return v


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    raise _Unread(f"expected a whole number of tokens, got {v!r:.40}")


def unflatten(attrs: dict[str, Any], prefix: str) -> Any:
    """The attributes under ``prefix.`` as one nested value: ``llm.input_messages.0.message.role``
    → ``[{"message": {"role": ...}}]`` (objects whose keys are all indices become lists)."""
    root: dict[str, Any] = {}
    p = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(p):
            continue
        node = root
        parts = key[len(p):].split(".")
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        node.setdefault(parts[-1], value)
    return _lists(root) if root else None


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node):
        return [_lists(node[k]) for k in sorted(node, key=int)]
    return {k: _lists(v) for k, v in node.items()}


def _call(cid: Any, name: Any, args: Any) -> dict[str, Any]:
    """An OpenAI chat tool call (what :func:`assay.formats.agent.chat_messages` reads)."""
    if args is not None and not isinstance(args, (str, dict)):
        args = json_text(args)
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": args}}
    if cid is not None:
        call["id"] = cid
    return call


# --------------------------------------------------------------------------- messages, per vocabulary

def _parts_message(m: Any) -> list[dict[str, Any]]:  # noqa: C901 - one branch per part type
    """One GenAI message (``role`` + ``parts``) as OpenAI chat messages: text and calls in one,
    each ``tool_call_response`` part a ``role: "tool"`` message."""
    if not isinstance(m, dict):
        raise _Unread(f"expected a message object with 'role' and 'parts', got {type(m).__name__}")
    parts = m.get("parts")
    if parts is None and "content" in m:  # already a chat message
        return [m]
    if not isinstance(parts, list):
        raise _Unread("a message has no list of 'parts'")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    for part in parts:
        t = part.get("type") if isinstance(part, dict) else None
        if t == "text" or (t is None and isinstance(part, dict) and isinstance(part.get("content"), str)):
            if isinstance(part.get("content"), str):
                texts.append(part["content"])
        elif t == "tool_call":
            calls.append(_call(part.get("id"), part.get("name"), part.get("arguments")))
        elif t == "tool_call_response":
            answers.append({"role": "tool", "tool_call_id": part.get("id"),
                            "content": part.get("response", part.get("result"))})
        elif isinstance(part, str):
            texts.append(part)
    out: list[dict[str, Any]] = []
    if texts or calls or not answers:
        msg: dict[str, Any] = {"role": m.get("role"), "content": "\n".join(texts) if texts else None}
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out + answers


def _parts_messages(value: Any) -> list[dict[str, Any]]:
    value = _json(value, "a list of messages")
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise _Unread(f"expected a list of messages, got {type(value).__name__}")
    return [x for m in value for x in _parts_message(m)]


def _instructions(value: Any) -> dict[str, Any]:
    """``gen_ai.system_instructions`` (a list of parts, or text) as one system message."""
    if isinstance(value, str):
        if value.lstrip()[:1] not in ("[", "{"):
            return {"role": "system", "content": value}
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {"role": "system", "content": value}
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise _Unread(f"expected a list of parts, got {type(value).__name__}")
    texts = [p if isinstance(p, str) else p.get("content") for p in value if isinstance(p, (str, dict))]
    return {"role": "system", "content": "\n".join(t for t in texts if isinstance(t, str))}


def _old_message(m: Any) -> dict[str, Any]:
    """``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes (unflattened) as a chat message."""
    if not isinstance(m, dict):
        raise _Unread("expected role/content attributes under the index")
    msg: dict[str, Any] = {"role": m.get("role") or "assistant", "content": m.get("content")}
    if isinstance(msg["content"], (dict, list)):
        msg["content"] = json_text(msg["content"])
    if m.get("tool_call_id") is not None:
        msg["tool_call_id"] = m["tool_call_id"]
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        msg["tool_calls"] = [_call(c.get("id"), c.get("name"), c.get("arguments")) for c in calls if isinstance(c, dict)]
    fc = m.get("function_call")
    if isinstance(fc, dict):
        msg["tool_calls"] = [*msg.get("tool_calls", ()), _call(None, fc.get("name"), fc.get("arguments"))]
    return msg


def _oi_message(m: Any) -> dict[str, Any]:
    """``llm.*_messages.N.message.*`` (unflattened) as a chat message."""
    msg = m.get("message") if isinstance(m, dict) else None
    if not isinstance(msg, dict):
        raise _Unread("expected 'message.role' / 'message.content' attributes under the index")
    content = msg.get("content")
    if content is None and isinstance(msg.get("contents"), list):
        texts = [c["message_content"].get("text") for c in msg["contents"]
                 if isinstance(c, dict) and isinstance(c.get("message_content"), dict)]
        content = "\n".join(t for t in texts if isinstance(t, str)) or None
    out: dict[str, Any] = {"role": msg.get("role") or "user", "content": content}
    for k in ("tool_call_id", "name"):
        if msg.get(k) is not None:
            out[k] = msg[k]
    calls = msg.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = []
        for c in calls:
            tc = c.get("tool_call") if isinstance(c, dict) else None
            if isinstance(tc, dict):
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                out["tool_calls"].append(_call(tc.get("id"), fn.get("name"), fn.get("arguments")))
    return out


def _event_body(ev_attrs: dict[str, Any]) -> dict[str, Any]:
    """A per-message event's body: ``gen_ai.event.content`` (JSON), else the event's own attributes."""
    raw = ev_attrs.get("gen_ai.event.content")
    if raw is not None:
        body = _json(raw, "the event's body")
        return body if isinstance(body, dict) else {"content": body}
    body = {k: v for k, v in ev_attrs.items() if k in ("content", "role", "tool_calls", "id", "tool_call_id",
                                                        "message", "index", "finish_reason")}
    for k in ("tool_calls", "message"):
        if isinstance(body.get(k), str):
            body[k] = _json(body[k], k)
    return body


def _event_message(role: str, body: dict[str, Any]) -> dict[str, Any]:
    if role == "choice":
        inner = body.get("message")
        body = inner if isinstance(inner, dict) else body
        role = body.get("role") or "assistant"
    msg: dict[str, Any] = {"role": body.get("role") or role, "content": body.get("content")}
    if isinstance(msg["content"], (dict, list)) and msg["role"] != "tool":
        msg["content"] = json_text(msg["content"])
    cid = body.get("id", body.get("tool_call_id"))
    if msg["role"] == "tool" and cid is not None:
        msg["tool_call_id"] = cid
    if isinstance(body.get("tool_calls"), list):
        msg["tool_calls"] = body["tool_calls"]
    return msg


# --------------------------------------------------------------------------- one span

class View:
    """What one span says. ``role``: ``llm`` (a model call), ``tool``, ``retrieval``, ``agent`` (a
    span with a request or answer of its own: an agent, a chain), ``aux`` (GenAI, nothing to read:
    embeddings ...) or ``other`` (no GenAI content)."""

    def __init__(self, span: Span, summary: Summary):
        self.span, self.summary = span, summary
        self.role = "other"
        self.request: list[dict[str, Any]] | None = None
        self.produced: list[dict[str, Any]] | None = None
        self.request_from = self.produced_from = ""
        self.query: Any = None      # a request given as a value (input.value), not as messages
        self.answer: Any = None     # an answer given as a value (output.value)
        self.docs: list[dict[str, Any]] | None = None
        self.tool: dict[str, Any] | None = None
        self.tools_offered: Any = None
        self.tokens: tuple[int | None, int | None, int | None] | None = None
        self.model = self.provider = None
        self.unread: dict[str, Any] = {}

    def note(self, attr: str, message: str, raw: Any = None) -> None:
        self.summary.notes.append(f"{self.span.label()}: attribute {attr}: {message}")
        if raw is not None:
            self.unread[attr] = raw

    def read(self, attr: str, fn: Callable[[Any], Any], raw: Any) -> Any:
        """``fn(raw)``, or None with a note when ``raw`` is not in the shape ``fn`` reads."""
        try:
            return fn(raw)
        except _Unread as e:
            self.note(attr, str(e), raw)
            return None

    @property
    def asks(self) -> bool:
        return self.request is not None or self.query is not None

    @property
    def answers(self) -> bool:
        return self.produced is not None or self.answer is not None

    @property
    def genai(self) -> bool:
        """Whether the span gave anything a record holds."""
        return self.asks or self.answers or self.docs is not None or self.tool is not None \
            or self.tokens is not None or self.model is not None

    @property
    def start(self) -> int:
        return self.span.start or 0


def _role(span: Span, view: View) -> str:  # noqa: C901 - the vocabularies' span kinds side by side
    a = span.attributes
    op, oi = a.get("gen_ai.operation.name"), a.get("openinference.span.kind")
    oi = oi.upper() if isinstance(oi, str) else None
    if op in LLM_OPS or oi == "LLM":
        return "llm"
    if op == "execute_tool" or oi == "TOOL":
        return "tool"
    if op == "retrieval" or oi == "RETRIEVER" or "gen_ai.retrieval.documents" in a:
        return "retrieval"
    if op in AUX_OPS or oi in AUX_KINDS:
        return "aux"
    if op == "invoke_agent" or oi in ("AGENT", "CHAIN"):
        return "agent"
    if _has_messages(span):
        return "llm"
    if op is not None or oi is not None:
        what = "gen_ai.operation.name" if op is not None else "openinference.span.kind"
        view.note(what, f"unknown value {(op if op is not None else oi)!r:.60}: the span is not read")
        return "aux"
    if any(k.startswith(("gen_ai.", "llm.")) for k in a) or "input.value" in a:
        return "agent"
    return "other"


def _has_messages(span: Span) -> bool:
    a = span.attributes
    if any(k in a for k in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt", "gen_ai.completion")):
        return True
    if any(_INDEXED.match(k) for k in a):
        return True
    return any(e.name in _EVENT_ROLES or e.name in ("gen_ai.choice", _DETAILS_EVENT, "gen_ai.content.prompt")
               for e in span.events)


def _genai_current(view: View, a: dict[str, Any]) -> None:
    sys_raw = a.get("gen_ai.system_instructions")
    system = view.read("gen_ai.system_instructions", _instructions, sys_raw) if sys_raw is not None else None
    if a.get("gen_ai.input.messages") is not None:
        msgs = view.read("gen_ai.input.messages", _parts_messages, a["gen_ai.input.messages"])
        if msgs is not None:
            view.request, view.request_from = msgs, "gen_ai.input.messages"
    if system is not None:
        view.request = [system, *(view.request or ())]
        view.request_from = view.request_from or "gen_ai.system_instructions"
    if a.get("gen_ai.output.messages") is not None:
        msgs = view.read("gen_ai.output.messages", _parts_messages, a["gen_ai.output.messages"])
        if msgs is not None:
            view.produced, view.produced_from = msgs, "gen_ai.output.messages"
    if a.get("gen_ai.tool.definitions") is not None:
        view.tools_offered = view.read("gen_ai.tool.definitions", lambda v: _json(v, "tool definitions"),
                                       a["gen_ai.tool.definitions"])


def _genai_old(view: View, a: dict[str, Any]) -> None:
    for prefix, slot in (("gen_ai.prompt", "request"), ("gen_ai.completion", "produced")):
        if getattr(view, slot) is not None:
            continue
        indexed = unflatten(a, prefix)
        msgs = None
        if isinstance(indexed, list):
            msgs = view.read(f"{prefix}.N", lambda v: [_old_message(m) for m in v], indexed)
            src = f"{prefix}.N"
        elif a.get(prefix) is not None:  # the oldest form: the whole list as JSON text
            msgs = view.read(prefix, _any_messages, a[prefix])
            src = prefix
        if msgs is not None:
            setattr(view, slot, msgs)
            setattr(view, f"{slot}_from", src)


def _any_messages(v: Any) -> list[dict[str, Any]]:
    """A list of messages as JSON or a value: GenAI ``parts`` messages or OpenAI chat messages."""
    v = _json(v, "a list of messages")
    if isinstance(v, dict):
        v = v.get("messages", [v])
    if not isinstance(v, list):
        raise _Unread(f"expected a list of messages, got {type(v).__name__}")
    return [x for m in v for x in _parts_message(m)]


def _events(view: View, span: Span) -> None:
    request: list[dict[str, Any]] = []
    produced: list[dict[str, Any]] = []
    for ev in span.events:
        if ev.name == _DETAILS_EVENT and view.request is None and view.produced is None:
            _genai_current(view, ev.attributes)
        elif ev.name in _EVENT_ROLES or ev.name == "gen_ai.choice":
            role = _EVENT_ROLES.get(ev.name, "choice")
            body = view.read(f"{ev.name} event", _event_body, ev.attributes)
            if body is not None:
                (produced if role == "choice" else request).append(_event_message(role, body))
        elif ev.name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            key = "gen_ai.prompt" if ev.name.endswith("prompt") else "gen_ai.completion"
            if ev.attributes.get(key) is not None:
                msgs = view.read(f"{key} ({ev.name} event)", _any_messages, ev.attributes[key])
                (request if key == "gen_ai.prompt" else produced).extend(msgs or ())
    if request and view.request is None:
        view.request, view.request_from = request, "the span's message events"
    if produced and view.produced is None:
        view.produced, view.produced_from = produced, "the span's gen_ai.choice events"


def _io(view: View, a: dict[str, Any], side: str) -> Any:
    """``input.value`` / ``output.value``: JSON when its mime type says so (or, with no mime type, an
    object with ``messages``), else text as it is."""
    v = a.get(f"{side}.value")
    if v is None:
        return None
    mime = a.get(f"{side}.mime_type")
    if not isinstance(v, str):
        return v
    if isinstance(mime, str) and "json" in mime:
        if not v.strip():
            return None
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:  # said to be JSON, but is not: read as the text it is
            view.note(f"{side}.value", f"{side}.mime_type is {mime}, but the value is not JSON: read as text")
            return v
    if mime is None and v.lstrip().startswith("{") and '"messages"' in v:
        try:
            parsed = orjson.loads(v)
        except orjson.JSONDecodeError:
            return v
        return parsed if isinstance(parsed, dict) and isinstance(parsed.get("messages"), list) else v
    return v


def _openinference(view: View, a: dict[str, Any]) -> None:
    for prefix, slot in (("llm.input_messages", "request"), ("llm.output_messages", "produced")):
        indexed = unflatten(a, prefix) if getattr(view, slot) is None else None
        if isinstance(indexed, list):
            msgs = view.read(f"{prefix}.N", lambda v: [_oi_message(m) for m in v], indexed)
            if msgs is not None:
                setattr(view, slot, msgs)
                setattr(view, f"{slot}_from", f"{prefix}.N")
    inp, out = _io(view, a, "input"), _io(view, a, "output")
    if view.request is None and inp is not None:
        msgs = _value_messages(inp, "request")
        if msgs is not None:
            view.request, view.request_from = msgs, "input.value"
        else:
            view.query = inp
    if view.produced is None and out is not None:
        msgs = _value_messages(out, "answer")
        if msgs is not None:
            view.produced, view.produced_from = msgs, "output.value"
        else:
            view.answer = out
    tools = unflatten(a, "llm.tools")
    if view.tools_offered is None and isinstance(tools, list):
        view.tools_offered = [_json(t["tool"]["json_schema"], "a tool") if isinstance(t, dict)
                              and isinstance(t.get("tool"), dict) and "json_schema" in t["tool"] else t
                              for t in tools]


def _value_messages(v: Any, side: str) -> list[dict[str, Any]] | None:
    """Chat messages inside an ``input.value`` / ``output.value`` object: an OpenAI request's
    ``messages``, a completion's ``choices[0].message``; None for anything else."""
    if isinstance(v, dict):
        if side == "request" and isinstance(v.get("messages"), list) and \
                all(isinstance(m, dict) and "role" in m for m in v["messages"]):
            return v["messages"]
        choices = v.get("choices")
        if side == "answer" and isinstance(choices, list) and choices and isinstance(choices[0], dict) \
                and isinstance(choices[0].get("message"), dict):
            return [{"role": "assistant", **choices[0]["message"]}]
    if isinstance(v, list) and v and all(isinstance(m, dict) and "role" in m for m in v):
        return v
    return None


def _usage(view: View, a: dict[str, Any]) -> None:
    got = []
    for keys in (("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
                 ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
                 ("llm.token_count.total", "llm.usage.total_tokens", "gen_ai.usage.total_tokens")):
        key = next((k for k in keys if a.get(k) is not None), None)
        got.append(view.read(key, _int, a[key]) if key is not None else None)
    if any(x is not None for x in got):
        view.tokens = (got[0], got[1], got[2])
    for k in ("gen_ai.response.model", "gen_ai.request.model", "llm.response.model_name", "llm.model_name",
              "llm.request.model_name"):
        if isinstance(a.get(k), str) and a[k]:
            view.model = a[k]
            break
    for k in ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"):
        if isinstance(a.get(k), str) and a[k]:
            view.provider = a[k]
            break


def span_error(span: Span) -> str | None:
    """The error of a span whose status is ERROR: its status message, else its exception event's
    ``type: message``, else its ``error.type``, else ``"ERROR"``."""
    if span.status != "ERROR":
        return None
    if span.status_message:
        return span.status_message
    for ev in span.events:
        msg = ev.attributes.get("exception.message")
        if ev.name == "exception" and isinstance(msg, str):
            t = ev.attributes.get("exception.type")
            return f"{t}: {msg}" if isinstance(t, str) else msg
    t = span.attributes.get("error.type")
    return t if isinstance(t, str) and t else "ERROR"


def _tool(view: View, a: dict[str, Any]) -> None:
    span = view.span
    name = a.get("gen_ai.tool.name") or a.get("tool.name") or a.get("tool_call.function.name")
    if not isinstance(name, str) or not name:
        name = span.name.removeprefix("execute_tool ").strip() or span.name
    call: dict[str, Any] = {"type": "tool_call", "name": name}
    cid = a.get("gen_ai.tool.call.id") or a.get("tool_call.id") or a.get("tool.id")
    if cid is not None:
        call["tool_call_id"] = str(cid)
    args = a.get("gen_ai.tool.call.arguments")
    if args is None:
        args = a.get("tool_call.function.arguments")
    if args is None:
        args = _io(view, a, "input")
    call["arguments"] = agent.arguments(args if isinstance(args, (str, dict)) or args is None else json_text(args),
                                        "arguments")
    result = a.get("gen_ai.tool.call.result")
    if result is None:
        result = _io(view, a, "output")
    if result is not None:
        call["result"] = _result(result)
    err = span_error(span)
    if err is not None:
        call["error"] = err
    view.tool = call


def _result(v: Any) -> Any:
    """A tool's result: JSON text of an object or list parsed; other text kept as it is."""
    if isinstance(v, str) and v.lstrip()[:1] in ("{", "["):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return v
    return v


def _oi_document(d: Any) -> dict[str, Any]:
    doc = d.get("document") if isinstance(d, dict) else None
    if not isinstance(doc, dict):
        raise _Unread("expected 'document.*' attributes under the index")
    out = {k: doc[k] for k in ("content", "score", "metadata") if doc.get(k) is not None}
    if doc.get("id") is not None:
        out["id"] = str(doc["id"])
    return out


def _genai_documents(v: Any) -> list[dict[str, Any]]:
    v = _json(v, "a list of documents")
    if not isinstance(v, list):
        raise _Unread(f"expected a list of documents, got {type(v).__name__}")
    out = []
    for d in v:
        if not isinstance(d, dict):
            raise _Unread(f"expected documents (objects with 'id'), got {type(d).__name__}")
        d = dict(d)
        if d.get("id") is not None:
            d["id"] = str(d["id"])
        out.append(d)
    return out


def _retrieval(view: View, a: dict[str, Any]) -> None:
    indexed = unflatten(a, "retrieval.documents")
    if isinstance(indexed, list):
        view.docs = view.read("retrieval.documents.N", lambda v: [_oi_document(d) for d in v], indexed)
    elif a.get("gen_ai.retrieval.documents") is not None:
        view.docs = view.read("gen_ai.retrieval.documents", _genai_documents, a["gen_ai.retrieval.documents"])


def view_of(span: Span, summary: Summary) -> View:
    """What one span says, in whichever vocabulary it speaks."""
    view = View(span, summary)
    view.role = _role(span, view)
    if view.role in ("other", "aux"):
        return view
    a = span.attributes
    if view.role == "tool":
        _tool(view, a)
    elif view.role == "retrieval":
        _retrieval(view, a)
    else:
        _genai_current(view, a)
        _genai_old(view, a)
        _events(view, span)
        _openinference(view, a)
    _usage(view, a)
    return view


# --------------------------------------------------------------------------- views → fields

def _split(view: View) -> dict[str, Any]:
    """query / history / steps / response / tool_calls of one view's request and answer."""
    req = _chat(view, view.request, view.request_from)
    out = _chat(view, view.produced, view.produced_from)
    got = agent.split(req, out) if req or out else {}
    if req is None:
        got.pop("history", None)
    steps = got.get("steps")
    if steps is not None and not any(m.get("role") == "tool" or m.get("tool_calls") for m in steps):
        del got["steps"]  # a plain answer is not an agent's steps
    if "query" not in got and view.query is not None:
        q, hist = request_fields(view.query, "input.value", strict=False)
        if q is not None:
            got["query"] = q
        if hist and "history" not in got:
            got["history"] = hist
    if "response" not in got and view.answer is not None:
        r = response_text(view.answer, "output.value", strict=False)
        if r is not None:
            got["response"] = r
    return got


def _chat(view: View, msgs: list[dict[str, Any]] | None, src: str) -> list[dict[str, Any]] | None:
    if not msgs:
        return None
    try:
        return agent.chat_messages(msgs, "message", True)
    except FieldError as e:
        view.note(src, f"{e.field}: {e.message}", view.span.attributes.get(src, msgs))  # the value as it came
        return None


def _merge_calls(from_msgs: list[dict[str, Any]], spans: list[dict[str, Any]], append: bool) -> list[dict[str, Any]]:
    """The calls the messages name, each with its tool span's result and error (by call id, else by
    name in order); with ``append``, the tool spans no message names after them."""
    left = list(spans)
    out = []
    for c in from_msgs:
        hit = next((s for s in left if c.get("tool_call_id") is not None
                    and s.get("tool_call_id") == c["tool_call_id"]), None)
        if hit is None and c.get("tool_call_id") is None:
            hit = next((s for s in left if s.get("tool_call_id") is None and s["name"] == c["name"]), None)
        if hit is not None:
            left.remove(hit)
            c = {**c, **{k: hit[k] for k in ("result", "error") if k in hit}}
            if not c.get("arguments") and hit.get("arguments"):
                c["arguments"] = hit["arguments"]
        out.append(c)
    return out + left if append else out


def _wrappers(llms: list[View], by_id: dict[str, View]) -> set[str]:
    """The span ids of the spans above a model call (a framework's LLM span around the client's)."""
    wrapping = set()
    for v in llms:
        wrapping.update(a.span.span_id for a in _ancestors(v, by_id))
    return wrapping


def _leaf_tokens(llms: list[View], by_id: dict[str, View]) -> tuple[int | None, int | None, int | None]:
    """Tokens summed over the model calls with no model call below them (a wrapper is not counted twice)."""
    wrapping = _wrappers(llms, by_id)
    sums: list[int | None] = [None, None, None]
    for v in llms:
        if v.span.span_id in wrapping or v.tokens is None:
            continue
        i, o, t = v.tokens
        if t is None and i is not None and o is not None:
            t = i + o
        for k, x in enumerate((i, o, t)):
            if x is not None:
                sums[k] = (sums[k] or 0) + x
    return sums[0], sums[1], sums[2]


def _usage_fields(tokens: tuple[int | None, int | None, int | None] | None, latency: float | None
                  ) -> dict[str, Any] | None:
    i, o, t = tokens or (None, None, None)
    if t is None and i is not None and o is not None:
        t = i + o
    usage = {k: v for k, v in (("input_tokens", i), ("output_tokens", o), ("total_tokens", t),
                               ("latency_ms", latency)) if v is not None}
    return usage or None


def _contexts(view: View, path: str) -> list[dict[str, Any]] | None:
    try:
        return documents(view.docs, path, retriever=True)
    except FieldError as e:
        view.note("retrieval documents", f"{e.field}: {e.message}", view.docs)
        return None


def _last_retrieval(views: list[View], by_id: dict[str, View], before: int | None = None) -> View | None:
    found = [v for v in views if v.role == "retrieval" and v.docs is not None
             and (before is None or v.start <= before)]
    top = [v for v in found if not any(a.role == "retrieval" for a in _ancestors(v, by_id))]
    return max(top or found, key=lambda v: (v.span.end or v.start)) if found else None


def _ancestors(view: View, by_id: dict[str, View]) -> Iterable[View]:
    parent, seen = view.span.parent_id, 0
    while parent is not None and parent in by_id and seen <= len(by_id):
        yield by_id[parent]
        parent = by_id[parent].span.parent_id
        seen += 1


def _session(span: Span, views: list[View]) -> str | None:
    """The conversation / session id: the span's own, else the first its trace names."""
    return next((a[k] for a in [span.attributes, *(v.span.attributes for v in views)]
                 for k in ("gen_ai.conversation.id", "session.id") if isinstance(a.get(k), str)), None)


def _extra(span: Span, views: list[View], model: str | None, provider: str | None, session: str | None
           ) -> dict[str, Any]:
    extra: dict[str, Any] = {"trace_id": span.trace_id, "span_id": span.span_id, "span_name": span.name}
    for k, v in (("model", model), ("provider", provider), ("service", span.resource.get("service.name")),
                 ("session_id", session)):
        if v is not None:
            extra[k] = v
    unread = {f"{v.span.span_id}:{k}": x for v in views for k, x in v.unread.items()}
    if unread:
        extra["otlp_unread"] = unread
    return extra


def _tool_definitions(view: View | None) -> Any:
    if view is None or view.tools_offered is None:
        return None
    try:
        return agent.tool_definitions(view.tools_offered, "tools")
    except FieldError as e:
        view.note("tool definitions", f"{e.field}: {e.message}", view.tools_offered)
        return None


def _trace_fields(trace: Trace, views: list[View], by_id: dict[str, View]) -> dict[str, Any] | None:  # noqa: C901
    root = by_id[trace.root.span_id]
    llms = sorted((v for v in views if v.role == "llm"), key=lambda v: v.start)
    if not any(v.genai for v in views):
        return None
    asking = root if root.asks else (llms[0] if llms else None)
    answering = root if root.answers else (max(llms, key=lambda v: v.span.end or v.start) if llms else None)
    fields: dict[str, Any] = _split(answering) if answering is not None else {}
    if asking is not None and asking is not answering:
        first = _split(asking)
        if "query" in first:
            fields["query"] = first["query"]
            fields.pop("history", None)
            if "history" in first:
                fields["history"] = first["history"]
    tools = [v.tool for v in sorted(views, key=lambda v: v.start) if v.tool is not None]
    if tools or fields.get("tool_calls"):
        fields["tool_calls"] = _merge_calls(fields.get("tool_calls") or [], tools, append=True)
    ret = _last_retrieval(views, by_id)
    if ret is not None:
        docs = _contexts(ret, "retrieval.documents")
        if docs is not None:
            fields["contexts"] = docs
    defs = _tool_definitions(answering if answering is not None and answering.tools_offered else
                             next((v for v in llms if v.tools_offered is not None), None))
    if defs:
        fields["tool_definitions"] = defs
    usage = _usage_fields(_leaf_tokens(llms, by_id) if llms else root.tokens, root.span.latency_ms)
    if usage:
        fields["usage"] = usage
    model = next((v.model for v in reversed(llms) if v.model), root.model)
    provider = next((v.provider for v in reversed(llms) if v.provider), root.provider)
    fields["id"] = trace.trace_id
    fields["extra"] = _extra(root.span, views, model, provider, _session(root.span, views))
    return fields


def _call_fields(view: View, views: list[View], by_id: dict[str, View]) -> dict[str, Any]:
    fields = _split(view)
    if fields.get("tool_calls"):
        tools = [v.tool for v in views if v.tool is not None and v.start >= view.start]
        fields["tool_calls"] = _merge_calls(fields["tool_calls"], tools, append=False)
    ret = _last_retrieval(views, by_id, before=view.start)
    if ret is not None:
        docs = _contexts(ret, "retrieval.documents")
        if docs is not None:
            fields["contexts"] = docs
    defs = _tool_definitions(view)
    if defs:
        fields["tool_definitions"] = defs
    usage = _usage_fields(view.tokens, view.span.latency_ms)
    if usage:
        fields["usage"] = usage
    fields["id"] = f"{view.span.trace_id}-{view.span.span_id}"
    fields["extra"] = _extra(view.span, [view], view.model, view.provider, _session(view.span, views))
    return fields


def trace_records(trace: Trace, per: str = "trace", summary: Summary | None = None) -> list[dict[str, Any]]:
    """The record fields of one trace: one dict (``per="trace"``) or one per model call
    (``per="call"``); none when no span has GenAI content. ``summary`` counts what was read."""
    if per not in PER:
        raise ValueError(f"per must be 'trace' or 'call', got {per!r}")
    summary = summary if summary is not None else Summary()
    views = [view_of(s, summary) for s in trace.spans]
    by_id = {v.span.span_id: v for v in views}
    summary.traces += 1
    summary.spans += len(views)
    summary.spans_skipped += sum(1 for v in views if v.role == "other")
    if per == "trace":
        one = _trace_fields(trace, views, by_id)
        out = [one] if one is not None else []
    else:  # a model call inside another (a framework's span around the client's) is one call: the inner
        llms = sorted((v for v in views if v.role == "llm"), key=lambda v: v.start)
        outer = _wrappers(llms, by_id)
        out = [_call_fields(v, views, by_id) for v in llms if v.span.span_id not in outer]
    if not out:
        summary.traces_skipped += 1
    summary.records += len(out)
    return out
