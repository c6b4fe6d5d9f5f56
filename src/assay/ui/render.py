"""The Jinja2 environment shared by the dashboard and the report, and its helpers.

Autoescaping is on for every template: whatever a row holds (responses, contexts, inputs,
reasons, run names) is escaped where it is shown. Only two kinds of value are inserted
unescaped, both built by assay itself: the SVG of :mod:`assay.ui.charts` (which escapes the
text it draws) and the stylesheet.
"""

from __future__ import annotations

import datetime as dt
import math
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from assay.bench.perf.compare import point_label
from assay.bench.perf.figures import HIGHER_IS_BETTER as TOKEN_RATES
from assay.judges.prompt import call_parts
from assay.metrics.tool_use import arguments_of, call_label, match_calls
from assay.results import bounds, input_field

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"

# Fields of a row shown as text blocks, in this order; the rest are shown as JSON.
TEXT_FIELDS = ("query", "response", "ground_truth")
RESULT_CLASS = {"pass": "pass", "fail": "fail", "unknown": "unknown", "not_applicable": "na",
                "not_flagged": "not-flagged"}
RESULT_LABEL = {"not_applicable": "n/a", "not_flagged": "not flagged"}


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def pct(v: Any) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def signed(v: Any, digits: int = 3) -> str:
    return "—" if v is None else f"{v:+.{digits}f}"


def when(ts: Any) -> str:
    if not ts:
        return "—"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def duration(s: Any) -> str:
    if s is None:
        return "—"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def trunc(v: Any, n: int = 120) -> str:
    if v is None:
        return ""
    s = v if isinstance(v, str) else as_json(v, indent=False)
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def as_json(v: Any, indent: bool = True) -> str:
    opt = orjson.OPT_INDENT_2 if indent else 0
    try:
        return orjson.dumps(v, option=opt | orjson.OPT_NON_STR_KEYS, default=str).decode()
    except TypeError:
        return str(v)


def safe_href(uri: Any) -> str | None:
    """A document URI as a link target only when it is http(s); anything else (``javascript:``,
    ``data:``, relative paths) is shown as text, never linked."""
    if not isinstance(uri, str):
        return None
    try:
        parts = urlsplit(uri.strip())
    except ValueError:
        return None
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return uri.strip()
    return None


def result_class(score: dict[str, Any] | None) -> str:
    if not score:
        return "na"
    if score.get("status") == "error":
        return "error"
    if score.get("status") == "skipped":
        return "skipped"
    return RESULT_CLASS.get(score.get("result") or "", "unknown")


def result_label(score: dict[str, Any] | None) -> str:
    if not score:
        return "—"
    if score.get("status") in ("error", "skipped"):
        return score["status"]
    return RESULT_LABEL.get(score.get("result") or "", score.get("result") or "—")


def field(inputs: dict[str, Any], name: str) -> Any:
    return input_field(inputs, name)


def other_inputs(inputs: dict[str, Any]) -> list[tuple[str, Any]]:
    shown = {"inputs." + f for f in (*TEXT_FIELDS, *AGENT_FIELDS, "history", "contexts", "context", "id")}
    return [(k[len("inputs."):] if k.startswith("inputs.") else k, v) for k, v in inputs.items() if k not in shown]


# -- an agent's turn as a transcript ----------------------------------------------------------------
#: the agent fields a row page shows as a transcript (not as JSON blocks)
AGENT_FIELDS = ("steps", "tool_calls", "tool_definitions", "expected_tool_calls")
#: characters of a long text shown before its "show all"
PREVIEW_CHARS = 1500


def message_text(content: Any) -> str | None:
    """A message's content as text: a string as it is; a list of content parts as their ``text``
    (other parts as JSON); anything else as JSON."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) and isinstance(p.get("text"), str) else as_json(p)
                 for p in content]
        return "\n".join(parts)
    return as_json(content)


def value_text(v: Any) -> str | None:
    """A tool's arguments, result or error as shown: text as it is, anything else as indented JSON."""
    if v is None:
        return None
    return v if isinstance(v, str) else as_json(v)


def json_pretty(text: str) -> str:
    """Text that is a JSON object or array, indented; any other text as it is."""
    t = text.strip()
    if t[:1] in ("{", "[") and t[-1:] in ("}", "]"):
        try:
            return as_json(orjson.loads(t))
        except orjson.JSONDecodeError:
            pass
    return text


def _call_item(call: Any, n: int, known: dict[str, Any] | None) -> dict[str, Any]:
    cid, name, _ = call_parts(call)
    source = known if known is not None else (call if isinstance(call, dict) else {})
    args = arguments_of(call)
    item = {"kind": "call", "n": n, "id": cid, "name": name,
            "arguments": None if args in (None, "", {}) else value_text(args),
            "result": None, "error": None, "expected": [], "unexpected": False}
    if source.get("error") not in (None, ""):
        item["error"] = value_text(source["error"])
    if "result" in source and source["result"] is not None:
        item["result"] = value_text(source["result"])
    return item


def _transcript(messages: list[Any], known: list[dict[str, Any]], final: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The items of ``messages`` in order (assistant text, each tool call with its result or
    error, tool results no call claims, other messages) and the call items. A call's result is
    the tool message answering its id (else the next unanswered tool message without an id,
    else the ``result`` of the matching ``known`` call); its error is the known call's ``error``.
    ``final``: the last message, when it is an assistant answer without calls, is the final answer."""
    by_id = {str(c["tool_call_id"]): c for c in known if isinstance(c, dict) and c.get("tool_call_id") is not None}
    msgs = [m for m in messages if isinstance(m, dict)]
    used: set[int] = set()
    items: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    last = len(msgs) - 1
    for i, m in enumerate(msgs):
        role = str(m.get("role") or "?")
        text = message_text(m.get("content"))
        if role == "tool":
            if i not in used:
                items.append({"kind": "result", "id": m.get("tool_call_id"), "text": json_pretty(text or "")})
            continue
        tool_calls = [c for c in (m.get("tool_calls") or ()) if c is not None] if role == "assistant" else []
        if final and i == last and role == "assistant" and not tool_calls:
            items.append({"kind": "final", "text": text or ""})
            continue
        if text:
            items.append({"kind": "message", "role": role, "text": text})
        for c in tool_calls:
            cid = call_parts(c)[0]
            ordinal = len(calls)
            k = by_id.get(cid) if cid is not None else (
                known[ordinal] if ordinal < len(known) and call_parts(known[ordinal])[1] == call_parts(c)[1] else None)
            item = _call_item(c, ordinal + 1, k)
            for j in range(i + 1, len(msgs)):
                r = msgs[j]
                if j in used or r.get("role") != "tool":
                    continue
                rid = r.get("tool_call_id")
                if (cid is not None and rid is not None and str(rid) == cid) or (cid is None and rid is None):
                    used.add(j)
                    item["result"] = json_pretty(message_text(r.get("content")) or "")
                    break
            calls.append(item)
            items.append(item)
    return items, calls


def agent_view(inputs: dict[str, Any]) -> dict[str, Any] | None:  # noqa: C901
    """What a row page shows of an agent's turn, or None when the row has no agent data:
    ``history`` (the system message and earlier turns, as transcript items), ``query``,
    ``steps`` (the agent's messages: text, each tool call with pretty-printed arguments and its
    result or error, and the final answer), ``definitions``, ``expected`` (each expected call,
    met or missed, paired with the calls made by the rule of :mod:`assay.metrics.tool_use`) and
    ``extra`` (calls made that no expectation asked for). Values stay text: the template escapes them."""
    steps = field(inputs, "steps")
    known = field(inputs, "tool_calls")
    defs = field(inputs, "tool_definitions")
    expected = field(inputs, "expected_tool_calls")
    if not (steps or known or defs or expected):
        return None
    known = [c for c in known if isinstance(c, dict)] if isinstance(known, list) else []
    response = field(inputs, "response")
    if isinstance(steps, list) and steps:
        items, calls = _transcript(steps, known, final=True)
        if response and not any(it["kind"] == "final" for it in items):
            items.append({"kind": "final", "text": message_text(response) or ""})
    else:
        calls = [_call_item(c, n, c) for n, c in enumerate(known, 1)]
        items = list(calls)
        if response is not None:
            items.append({"kind": "final", "text": message_text(response) or ""})
    history = field(inputs, "history")
    hist_items = _transcript(history, [], final=False)[0] if isinstance(history, list) else []
    view: dict[str, Any] = {"history": hist_items, "query": message_text(field(inputs, "query")),
                            "steps": items, "n_calls": len(calls), "expected": [], "extra": [],
                            "definitions": []}
    for d in defs if isinstance(defs, list) else ():
        if isinstance(d, dict):
            view["definitions"].append({"name": str(d.get("name") or "(unnamed tool)"),
                                        "description": message_text(d.get("description")),
                                        "parameters": value_text(d.get("parameters"))})
        else:
            view["definitions"].append({"name": value_text(d), "description": None, "parameters": None})
    if isinstance(expected, list) and expected:
        expected = [e for e in expected if isinstance(e, dict)]
        made = known or [{"name": c["name"], "tool_call_id": c["id"], "arguments": arguments_of_item(c)} for c in calls]
        pairs = match_calls(made, expected)
        by_id = {c["id"]: c for c in calls if c["id"] is not None}
        matched: set[int] = set()
        for i, e in enumerate(expected):
            item = None
            if i in pairs:
                j = pairs[i]
                cid = call_parts(made[j])[0]
                item = by_id.get(cid) if cid is not None else (calls[j] if j < len(calls) else None)
                if item is not None:
                    item["expected"].append(i + 1)
                    matched.add(item["n"])
            args = e.get("arguments")
            view["expected"].append({"n": i + 1, "name": str(e.get("name") or "(unnamed tool)"),
                                     "arguments": None if args in (None, "", {}) else value_text(args),
                                     "label": call_label(e), "met": i in pairs,
                                     "by": item["n"] if item is not None else None})
        used_made = set(pairs.values())
        for c in calls:
            if c["n"] not in matched:
                c["unexpected"] = True
        view["extra"] = [call_label(c) for j, c in enumerate(made) if j not in used_made]
    return view


def arguments_of_item(item: dict[str, Any]) -> Any:
    """A call item's arguments back as an object (for matching) when they are JSON."""
    text = item.get("arguments")
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def long_text(text: Any, limit: int = PREVIEW_CHARS) -> tuple[str, str | None]:
    """``(preview, full)``: the text itself and None when short; else its first ``limit``
    characters and the whole text (revealed by a ``<details>``, no script)."""
    s = "" if text is None else text if isinstance(text, str) else as_json(text)
    if len(s) <= limit:
        return s, None
    return s[:limit] + "…", s


def rate_line(agg: dict[str, Any] | None) -> tuple[str, str] | None:
    """The rate a metric card leads with: the defect rate for harms (``≥ x% (lower bound: rules,
    no judge)`` when rows were not flagged), else the pass rate (with the rows not flagged)."""
    if not agg:
        return None
    if agg.get("defect_rate") is not None:
        return "defect rate", bounds.bounded_rate(agg, percent=True) or "—"
    if agg.get("pass_rate") is not None or bounds.not_flagged(agg):
        return "pass rate", bounds.pass_rate_text(agg, pct)
    return None


def pass_rate_line(agg: dict[str, Any] | None) -> str | None:
    """The pass rate a harm's card shows under its defect rate, or None."""
    if not agg or agg.get("defect_rate") is None:
        return None
    if agg.get("pass_rate") is None and not bounds.not_flagged(agg):
        return None
    return bounds.pass_rate_text(agg, pct)


def pass_rate_text(agg: dict[str, Any] | None) -> str:
    """A pass rate cell: ``62.5%``, ``— (6 not flagged)``, ``0.0% (1 judged; 6 not flagged)``."""
    return bounds.pass_rate_text(agg or {}, pct)


def defect_rate_text(agg: dict[str, Any] | None) -> str:
    """A defect rate cell: ``14.3%``, or ``≥ 14.3% (lower bound: rules, no judge)``; ``—`` without one."""
    return bounds.bounded_rate(agg or {}, percent=True) or "—"


def not_flagged_line(agg: dict[str, Any] | None) -> str | None:
    """``6 of 7 rows (rules, no judge): neither passes nor fails ...``, or None."""
    a = agg or {}
    nf = bounds.not_flagged(a)
    if not nf:
        return None
    total = int(a.get("passed") or 0) + int(a.get("failed") or 0) + nf
    return (f"{nf} of {total} rows ({bounds.by(a)}): neither passes nor fails; the embedded rules cannot "
            "clear a response, so the figures are bounds (score with --judge)")


def mean_text(agg: dict[str, Any] | None, key: str = "mean") -> str:
    """The mean (``median``, ``p90``) a card shows, with ``≥``/``≤`` when rows not flagged make it a bound."""
    return bounds.bounded_mean(agg or {}, fmt, key)


# Benchmark values: latencies are kept in seconds and shown in ms; token rates as they are.


def perf(v: Any, metric: str = "ttft") -> str:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "—"
    v = float(v) * (1 if metric in TOKEN_RATES else 1000)
    return f"{v:,.1f}" if abs(v) < 10_000 else f"{v:,.0f}"


def perf_signed(v: Any, metric: str = "ttft") -> str:
    if not isinstance(v, (int, float)):
        return "—"
    return ("+" if v >= 0 else "−") + perf(abs(v), metric)


def perf_unit(metric: str) -> str:
    return "tok/s" if metric in TOKEN_RATES else "ms"


def rate(v: Any) -> str:
    """A throughput: requests or tokens per second."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "—"
    return f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}"


@lru_cache(maxsize=1)
def stylesheet() -> str:
    return (STATIC / "app.css").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(fmt=fmt, pct=pct, signed=signed, when=when, trunc=trunc, as_json=as_json,
                       duration=duration, result_class=result_class, result_label=result_label,
                       perf=perf, perf_signed=perf_signed, perf_unit=perf_unit, rate=rate, point_label=point_label)
    env.globals.update(safe_href=safe_href, field=field, other_inputs=other_inputs, rate_line=rate_line,
                       pass_rate_line=pass_rate_line, not_flagged_line=not_flagged_line, mean_text=mean_text,
                       pass_rate_text=pass_rate_text, defect_rate_text=defect_rate_text,
                       TEXT_FIELDS=TEXT_FIELDS, agent_view=agent_view, long_text=long_text)
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def inline_stylesheet() -> Markup:
    """The stylesheet for a ``<style>`` element: assay's own file, never user text."""
    css = stylesheet()
    assert "</" not in css
    return Markup(css)
