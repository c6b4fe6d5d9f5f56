"""Agent data: a message list in any of the platforms' shapes → the agent fields of a record.

The one place that reads an agent's messages. Every shape that carries an agent's turns
(Azure's agent rows, OpenAI chat ``tool_calls`` / ``role: "tool"`` messages, the OpenAI
Responses API's ``input`` / ``output`` items, an MLflow ResponsesAgent trace) is first read
by :func:`chat_messages` into canonical chat messages, then split by :func:`split` /
:func:`steps_fields` into ``query``, ``history``, ``steps``, ``response`` and ``tool_calls``.

Message shapes read (each element of the list may be any of them):

- an OpenAI chat message ``{"role", "content", "tool_calls": [{"id", "type": "function",
  "function": {"name", "arguments"}}]}``; ``{"role": "tool", "tool_call_id", "content"}``;
- an Azure agent message: ``content`` a list of parts -- ``{"type": "text", "text"}``,
  ``{"type": "tool_call", "tool_call_id", "name", "arguments"}`` (or the older
  ``{"type": "tool_call", "tool_call": {"id", "function": {...}}}``), and in a ``role: "tool"``
  message ``{"type": "tool_result", "tool_result": ...}``;
- a Responses API item: ``{"type": "message", "role", "content": [{"type": "input_text" |
  "output_text", "text"}]}``, ``{"type": "function_call", "call_id", "name", "arguments"}``,
  ``{"type": "function_call_output", "call_id", "output"}``; a built-in tool's item
  (``web_search_call`` ...) is a call named after its type; ``reasoning`` items are not messages.

Canonical messages: an assistant message's ``tool_calls`` are canonical calls (``type``,
``tool_call_id``, ``name``, ``arguments``); a tool message has ``tool_call_id`` and
``content`` text (a result that is not text is its JSON text). Arguments given as JSON text
are parsed (the raw text is kept when it is not JSON). ``tool_calls`` of a record are the
calls of its ``steps`` in order, each with the ``result`` of the tool message that answers it
(matched by ``tool_call_id``) and ``error`` when that result is an error object.

This module is also a whole-row shape adapter (:func:`matches`, :func:`own_columns`,
:func:`to_fields`) for flat rows whose ``query`` / ``response`` are message lists (Azure's
agent rows), whose ``request`` / ``inputs`` is a Responses API request (``{"input": [...]}``)
and whose ``response`` / ``outputs`` is a Responses API response (``{"output": [...]}``) or a
list of its output items.
"""

from __future__ import annotations

from typing import Any

import orjson

from assay.formats.fields import (
    MISSING,
    FieldError,
    at,
    container,
    content_text,
    each,
    ident,
    json_text,
    kind,
    maybe_json,
    request_id,
)

_CALL = "tool_call"
_RESULT = "\x00result"  # a tool message's result object while this module works (never leaves it)
_MSG = "a chat message (an object with 'role' and 'content')"


# --------------------------------------------------------------------------- values

def arguments(value: Any, path: str) -> Any:
    """A call's arguments: an object; JSON text of one is parsed; other text is kept as it is."""
    if value is None:
        return {}
    if value.__class__ is dict:
        return value
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, dict) else value
    raise FieldError(path, f"expected an object of arguments or its JSON text, got {kind(value)}")


def _result(value: Any) -> tuple[str, Any]:
    """(the tool message's content text, the call's result): JSON text of an object or list is parsed."""
    if isinstance(value, str):
        parsed = maybe_json(value, "[{")
        return value, (value if parsed is MISSING else parsed)
    return json_text(value), value


def error_text(result: Any) -> str | None:
    """The error a tool's result reports: an object with a non-empty ``error`` (its text, or its ``message``)."""
    if not isinstance(result, dict):
        return None
    err = result.get("error")
    if not err:
        return None
    if isinstance(err, str):
        return err
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"]
    return json_text(err)


def _name(value: Any, path: str, what: str = "tool call") -> str:
    if value.__class__ is str and value:
        return value
    if value is None or value == "":
        raise FieldError(path, f"the {what} has no 'name'")
    raise FieldError(f"{path}.name", f"expected text, got {kind(value)}")


def _call_id(value: Any, path: str) -> str | None:
    return None if value is None else ident(value, path)


# --------------------------------------------------------------------------- tool calls

def tool_call(v: Any, path: str) -> dict[str, Any]:
    """One canonical call (``type``, ``tool_call_id``?, ``name``, ``arguments``, ``result``?,
    ``error``?) from an Azure ``tool_call`` part, an OpenAI tool call, a Responses API
    ``function_call`` item or a canonical call."""
    if v.__class__ is not dict:
        raise FieldError(path, f"expected a tool call (an object with 'name' and 'arguments'), got {kind(v)}")
    src, p = v, path
    if isinstance(v.get("tool_call"), dict):  # Azure's older part: {"type": "tool_call", "tool_call": {...}}
        src, p = v["tool_call"], f"{path}.tool_call"
    fn = src.get("function")
    if isinstance(fn, dict):  # OpenAI: {"id", "type": "function", "function": {"name", "arguments"}}
        name = _name(fn.get("name"), f"{p}.function")
        args = arguments(fn.get("arguments"), f"{p}.function.arguments")
    else:
        name = _name(src.get("name"), p)
        args = arguments(src.get("arguments"), f"{p}.arguments")
    cid = None
    for k in ("tool_call_id", "call_id", "id"):
        if src.get(k) is not None:
            cid = _call_id(src[k], f"{p}.{k}")
            break
    call: dict[str, Any] = {"type": _CALL}
    if cid is not None:
        call["tool_call_id"] = cid
    call["name"] = name
    call["arguments"] = args
    for k in ("result", "error"):
        if src.get(k) is not None:
            call[k] = src[k]
    if "error" in call and not isinstance(call["error"], str):
        call["error"] = json_text(call["error"])
    return call


def _builtin_call(v: dict[str, Any], path: str) -> dict[str, Any]:
    """A Responses API built-in tool item (``web_search_call`` ...): a call named after its type."""
    call: dict[str, Any] = {"type": _CALL}
    if v.get("id") is not None:
        call["tool_call_id"] = _call_id(v["id"], f"{path}.id")
    call["name"] = v["type"]
    call["arguments"] = {k: x for k, x in v.items() if k not in ("type", "id", "status")}
    return call


def _bare(call: dict[str, Any]) -> dict[str, Any]:
    """A call as it sits in an assistant message: without result and error."""
    return {k: x for k, x in call.items() if k not in ("result", "error")}


def tool_calls(value: Any, path: str) -> list[dict[str, Any]] | None:
    """The ``tool_calls`` column: a list of calls in any of :func:`tool_call`'s shapes, canonical."""
    return each(value, path, "a list of tool calls", lambda v, p, i: tool_call(v, at(p, i)))


def _expected(v: Any, path: str, i: int) -> dict[str, Any]:
    p = at(path, i)
    call = tool_call(v, p)
    out = {"name": call["name"]}
    src = v.get("function") if isinstance(v.get("function"), dict) else v
    if src.get("arguments") is not None:
        out["arguments"] = call["arguments"]
    return out


def expected_tool_calls(value: Any, path: str) -> list[dict[str, Any]] | None:
    """``expected_tool_calls``: ``{"name", "arguments"?}`` each (any call shape; arguments absent stay absent)."""
    return each(value, path, "a list of expected tool calls", _expected)


def _definition(v: Any, path: str, i: int) -> dict[str, Any]:
    p = at(path, i)
    if v.__class__ is not dict:
        raise FieldError(p, f"expected a tool definition (an object with 'name'), got {kind(v)}")
    if v.get("type") == "function" and isinstance(v.get("function"), dict):  # OpenAI chat's wrapper
        v, p = v["function"], f"{p}.function"
    elif v.get("type") == "function":  # the Responses API's flat form
        v = {k: x for k, x in v.items() if k != "type"}
    if v.get("name") is None and isinstance(v.get("type"), str):  # a built-in tool: {"type": "web_search"}
        return {"name": v["type"], **{k: x for k, x in v.items() if k != "type"}}
    _name(v.get("name"), p, "tool definition")
    return v


def tool_definitions(value: Any, path: str) -> list[dict[str, Any]] | None:
    """``tool_definitions``: ``{"name", "description"?, "parameters"?}`` each; OpenAI's ``{"type":
    "function", "function": {...}}`` wrapper is unwrapped; one object is read as a list of one."""
    if isinstance(value, dict):
        value = [value]
    elif isinstance(value, str):
        parsed = maybe_json(value, "{")
        if isinstance(parsed, dict):
            value = [parsed]
    return each(value, path, "a list of tool definitions", _definition)


# --------------------------------------------------------------------------- messages

def _parts(content: list[Any], path: str) -> tuple[str | None, list[dict[str, Any]], list[Any]]:
    """(text of the text parts, calls of the tool_call parts, values of the tool_result parts)."""
    texts: list[Any] = []
    calls: list[dict[str, Any]] = []
    results: list[Any] = []
    for k, part in enumerate(content):
        t = part.get("type") if part.__class__ is dict else None
        if t == _CALL:
            calls.append(_bare(tool_call(part, at(path, k))))
        elif t == "tool_result":
            results.append(part.get("tool_result", part.get("result", part.get("content"))))
        elif t == "refusal" and isinstance(part.get("refusal"), str):
            texts.append({"text": part["refusal"]})
        else:
            texts.append(part)
    text = content_text(texts, path) if texts else None
    return text or None, calls, results


def _tool_message(cid: Any, value: Any, path: str, base: dict[str, Any] | None = None) -> dict[str, Any]:
    content, result = _result(value)
    m = dict(base or {})
    m["role"] = "tool"
    if cid is not None:
        m["tool_call_id"] = _call_id(cid, f"{path}.tool_call_id")
    m["content"] = content
    m[_RESULT] = result
    return m


def _message(m: Any, path: str, out: list[dict[str, Any]]) -> None:  # noqa: C901
    """Append the canonical message(s) of one source element to ``out``."""
    if m.__class__ is not dict:
        raise FieldError(path, f"expected {_MSG}, got {kind(m)}")
    role = m.get("role")
    if role is None:
        t = m.get("type")
        if t == "function_call":
            call = _bare(tool_call(m, path))
            if out and out[-1]["role"] == "assistant":
                prev = out[-1]
                prev["tool_calls"] = [*(prev.get("tool_calls") or ()), call]
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            return
        if t == "function_call_output":
            if m.get("call_id") is None:
                raise FieldError(path, "the function_call_output has no 'call_id'")
            out.append(_tool_message(m["call_id"], m.get("output"), path))
            return
        if t == "reasoning":
            return
        if isinstance(t, str) and t.endswith("_call"):
            call = _builtin_call(m, path)
            if out and out[-1]["role"] == "assistant":
                out[-1]["tool_calls"] = [*(out[-1].get("tool_calls") or ()), call]
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            return
        raise FieldError(path, "the chat message has no 'role'")
    if role.__class__ is not str:
        raise FieldError(f"{path}.role", f"expected text, got {kind(role)}")
    msg = {k: v for k, v in m.items() if not (k in ("type", "status") and "type" in m and m["type"] == "message")}
    c = m.get("content")
    calls: list[dict[str, Any]] = []
    results: list[Any] = []
    if isinstance(c, list):
        text, calls, results = _parts(c, f"{path}.content")
        msg["content"] = text
    elif c is not None and c.__class__ is not str:
        if role == "tool":
            msg["content"], msg[_RESULT] = _result(c)
        else:
            msg["content"] = content_text(c, f"{path}.content")
    tc = m.get("tool_calls")
    if tc is not None:
        if not isinstance(tc, list):
            raise FieldError(f"{path}.tool_calls", f"expected a list of tool calls, got {kind(tc)}")
        calls = [_bare(tool_call(x, f"{path}.tool_calls[{k}]")) for k, x in enumerate(tc)] + calls
    if calls:
        msg["tool_calls"] = calls
    if role == "tool":
        cid = m.get("tool_call_id", m.get("call_id"))
        if results:
            value = results[0] if len(results) == 1 else results
            out.append(_tool_message(cid, value, path,
                                     {k: v for k, v in msg.items() if k not in ("content", "call_id")}))
            return
        if cid is not None:
            msg["tool_call_id"] = _call_id(cid, f"{path}.tool_call_id")
    out.append(msg)


def chat_messages(value: Any, path: str, results: bool = False) -> list[dict[str, Any]] | None:
    """A list of messages / items in any shape this module reads, as canonical chat messages.

    ``results``: tool messages also carry their result object, for :func:`split` /
    :func:`steps_fields` (which give the messages without it); :func:`public` removes it.
    """
    value = container(value, path, "a list of chat messages")
    if value is None:
        return None
    out: list[dict[str, Any]] = []
    for i, m in enumerate(value):
        _message(m, at(path, i), out)
    return out if results else public(out)


def public(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``msgs`` without the result objects :func:`chat_messages` keeps with ``results``."""
    if not any(_RESULT in m for m in msgs):
        return msgs
    return [{k: v for k, v in m.items() if k != _RESULT} if _RESULT in m else m for m in msgs]


def is_messages(value: Any) -> bool:
    """True for a non-empty list (or its JSON text) whose first element is an object (a message or an item)."""
    if value.__class__ is str:
        if value[:1] != "[":
            return False
        value = maybe_json(value, "[")
    if value.__class__ is not list or not value:
        return False
    return value[0].__class__ is dict


# --------------------------------------------------------------------------- splitting

def calls_with_results(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls of ``steps``' assistant messages, in order, each with its tool message's result."""
    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for m in steps:
        role = m.get("role")
        if role == "assistant":
            for c in m.get("tool_calls") or ():
                call = dict(c) if c.get("type") == _CALL else tool_call(c, "steps")
                calls.append(call)
                if call.get("tool_call_id") is not None:
                    by_id.setdefault(call["tool_call_id"], call)
        elif role == "tool":
            cid = m.get("tool_call_id")
            call = by_id.get(cid) if cid is not None else None
            if call is None:  # no id: the earliest call still without a result (of the same name, if named)
                name = m.get("name")
                call = next((c for c in calls if "result" not in c and (name is None or c["name"] == name)),
                            None)
            if call is None or "result" in call:
                continue
            if _RESULT in m:
                result = m[_RESULT]
            else:
                content = m.get("content")
                result = _result(content)[1] if content is not None else None
            call["result"] = result
            err = error_text(result)
            if err is not None:
                call["error"] = err
    return calls


def attach_results(calls: list[dict[str, Any]], found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``calls`` (a ``tool_calls`` column) with the result / error of the same-id call in ``found``."""
    by_id = {c["tool_call_id"]: c for c in found if c.get("tool_call_id") is not None}
    out = []
    for c in calls:
        f = by_id.get(c.get("tool_call_id")) if c.get("tool_call_id") is not None else None
        if f is not None:
            c = {**c, **{k: f[k] for k in ("result", "error") if k in f and k not in c}}
        out.append(c)
    return out


def final_answer(steps: list[dict[str, Any]]) -> str | None:
    """The text of the last message of ``steps`` when it is an assistant message with content."""
    for m in reversed(steps):
        if m.get("role") == "assistant":
            return m.get("content") or None
        if m.get("role") == "tool":
            return None
    return None


def steps_fields(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """``steps``, ``response`` and ``tool_calls`` of what the agent produced for one request."""
    out: dict[str, Any] = {}
    if not steps:
        return out
    out["steps"] = public(steps)
    r = final_answer(steps)
    if r is not None:
        out["response"] = r
    calls = calls_with_results(steps)
    if calls:
        out["tool_calls"] = calls
    return out


def last_user(msgs: list[dict[str, Any]]) -> int | None:
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].get("role") == "user":
            return i
    return None


def split(request: list[dict[str, Any]] | None, produced: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The agent fields of one request: ``request`` the messages up to and including the user's
    (its messages after the last user message are the agent's first steps), ``produced`` the
    messages the agent produced."""
    out: dict[str, Any] = {}
    steps: list[dict[str, Any]] = []
    if request:
        u = last_user(request)
        if u is None:
            out["history"] = public(request)
        else:
            out["query"] = request[u].get("content")
            if u:
                out["history"] = public(request[:u])
            steps = request[u + 1:]
    if produced:
        steps = steps + produced
    out.update(steps_fields(steps))
    return out


# --------------------------------------------------------------------------- Responses API objects

def request_items(value: Any) -> Any:
    """The ``input`` of a Responses API request (``{"input": ...}``, or ``{"request": {"input": ...}}``
    as a ResponsesAgent's root span logs it); ``None`` when ``value`` is not one."""
    if value.__class__ is dict and value.get("request").__class__ is dict and len(value) == 1:
        value = value["request"]
    if value.__class__ is dict and "input" in value and "messages" not in value and "query" not in value:
        inp = value["input"]
        if isinstance(inp, str):
            return [{"role": "user", "content": inp}]
        if isinstance(inp, list):
            return inp
    return None


def request_tools(value: Any) -> Any:
    """The ``tools`` of a Responses API request (the agent's tool definitions), or None."""
    if value.__class__ is dict and value.get("request").__class__ is dict and len(value) == 1:
        value = value["request"]
    return value.get("tools") if value.__class__ is dict else None


def response_items(value: Any) -> Any:
    """The output items of a Responses API response (``{"output": [...]}``), or None."""
    if value.__class__ is dict and isinstance(value.get("output"), list) and "choices" not in value:
        return value["output"]
    return None


# --------------------------------------------------------------------------- the row adapter

_REQUEST_SIDE = ("query", "request", "inputs")
_RESPONSE_SIDE = ("response", "outputs")


def _request_shaped(col: str, v: Any) -> bool:
    if col == "query":
        return is_messages(v)
    if v.__class__ is str:
        v = maybe_json(v, "{")
    return request_items(v) is not None


def _response_shaped(v: Any) -> bool:
    if v.__class__ is str:
        if v[:1] == "{":
            return response_items(maybe_json(v, "{")) is not None
        return is_messages(v)
    if v.__class__ is dict:
        return response_items(v) is not None
    if v.__class__ is list and v and v[0].__class__ is dict:
        # a list of messages / items; a one-message list without tool use is left to the flat reader
        return len(v) > 1 or "type" in v[0] or "tool_calls" in v[0] or isinstance(v[0].get("content"), list)
    return False


def matches(row: dict[str, Any]) -> bool:
    """A flat row whose request or response side is an agent's messages / Responses API items."""
    for col in _REQUEST_SIDE:
        v = row.get(col)
        if v is not None and _maybe_structured(v) and _request_shaped(col, v):
            return True
    for col in _RESPONSE_SIDE:
        v = row.get(col)
        if v is not None and _maybe_structured(v) and _response_shaped(v):
            return True
    return False


def _maybe_structured(v: Any) -> bool:
    """Cheap: a list or object, or text that opens like the JSON of one (a CSV cell)."""
    return v.__class__ is not str or v[:1] in ("[", "{")


def own_columns(row: dict[str, Any]) -> tuple[str, ...]:
    own = [c for c in _REQUEST_SIDE if row.get(c) is not None and _request_shaped(c, row[c])]
    own += [c for c in _RESPONSE_SIDE if row.get(c) is not None and _response_shaped(row[c])]
    return tuple(own)


def to_fields(row: dict[str, Any], base: dict[str, Any], index: int) -> dict[str, Any]:
    """The record fields of an agent row; ``base`` (the row's other columns, read flat) fills the rest."""
    own = own_columns(row)
    req_col = next((c for c in _REQUEST_SIDE if c in own), None)
    resp_col = next((c for c in _RESPONSE_SIDE if c in own), None)
    unused = {c: row[c] for c in own if c not in (req_col, resp_col)}
    request = produced = None
    tools = None
    if req_col is not None:
        raw = row[req_col]
        v = maybe_json(raw, "[{") if isinstance(raw, str) else raw
        if req_col == "query":
            request = chat_messages(v, req_col, True)
        else:
            request = chat_messages(request_items(v), f"{req_col}.input", True)
            tools = request_tools(v)
            if "id" not in base:
                base = {**base, "id": request_id(raw)}
    if resp_col is not None:
        raw = row[resp_col]
        v = maybe_json(raw, "[{") if isinstance(raw, str) else raw
        items = response_items(v)
        produced = chat_messages(v if items is None else items,
                                 resp_col if items is None else f"{resp_col}.output", True)
    fields = dict(base)
    got = split(request, produced)
    if req_col is None:
        got.pop("history", None)  # only the response side: the base's query and history stand
    if resp_col is None and "response" in base:
        got.pop("response", None)
    for k, v in got.items():
        if k == "tool_calls" and "tool_calls" in base:
            fields["tool_calls"] = attach_results(base["tool_calls"], v)
        elif k in ("query", "history") and k in base and req_col is None:
            continue
        else:
            fields[k] = v
    if tools is not None and "tool_definitions" not in fields:
        fields["tool_definitions"] = tool_definitions(tools, f"{req_col}.tools")
    if unused:
        fields["extra"] = {**(fields.get("extra") or {}), **unused}
    return fields
