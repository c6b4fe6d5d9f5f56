"""Code metrics of an agent's tool use: no judge, read from the row's ``tool_calls`` and ``steps``.

**Matching a call to an expectation.** An expected call (``expected_tool_calls``: ``name`` and
optional ``arguments``) is met by a call made when the names are equal and every argument the
expectation names has an equal value in the call (JSON equality: ``1`` equals ``1.0``, the text
``"1"`` does not; arguments the expectation does not name are free). A call whose arguments
were not JSON (kept as raw text) meets only an expectation that names no argument. Each call
meets at most one expectation and each expectation is met by at most one call: the pairing is
a maximum matching (so a vague expectation never takes the call a precise one needs).

* ``tool_call_precision`` = matched calls / calls made (0 when the agent made no call but
  calls were expected).
* ``tool_call_recall`` = matched expectations / expected calls.
* ``tool_call_exact_match`` = 1 when the calls made are the expected calls *in the expected
  order*: as many calls as expectations and call *i* meets expectation *i*; else 0.
  Threshold 1. Order-free agreement is what precision and recall measure.

Each reason names the expected calls that were missed and the calls made that were not
expected (``name(arguments)``). The calls made are ``tool_calls``; a row without them but with
``steps`` takes the calls from its assistant messages, and a row with neither but with a
response made no call.

* ``agent_steps`` — the number of assistant messages in ``steps`` (each model turn: the tool
  calling turns and the final answer). Lower is better; no threshold.
* ``tool_errors`` — the number of calls that ended in an error (``error`` set on the call).
  Lower is better; threshold 0, so a row with any failed call fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from assay.judges.prompt import call_parts
from assay.metrics.base import Score, metric
from assay.records import Message

__all__ = ["arguments_of", "calls_made", "call_label", "match_calls", "meets"]

BOTH = ("azure", "databricks")
_MISSING = object()


def arguments_of(call: Mapping[str, Any]) -> Any:
    """The call's arguments as an object when they are (or their text is) a JSON object; else
    the raw value (text that is not JSON, or None)."""
    _, _, args = call_parts(call)
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except ValueError:
            return args
        return parsed if isinstance(parsed, dict) else args
    return args


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def meets(call: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
    """True when ``call`` meets ``expected`` (see the module docstring)."""
    _, name, _ = call_parts(call)
    if name != str(expected.get("name")):
        return False
    want = expected.get("arguments")
    if not want:
        return True
    if not isinstance(want, Mapping):   # an expectation written as text: compare the parsed object
        want = arguments_of({"name": name, "arguments": want})
        if not isinstance(want, Mapping):
            return False
    got = arguments_of(call)
    if not isinstance(got, Mapping):
        return False
    return all(_equal(got.get(k, _MISSING), v) for k, v in want.items())


def match_calls(calls: Sequence[Mapping[str, Any]],
                expected: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    """A maximum one-to-one pairing ``{expected index: call index}`` (augmenting paths, trying
    calls in order, so that equal choices pair calls and expectations in their order)."""
    edges = [[j for j, c in enumerate(calls) if meets(c, e)] for e in expected]
    call_of: dict[int, int] = {}      # call index -> expected index

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in call_of or augment(call_of[j], seen):
                call_of[j] = i
                return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    return {i: j for j, i in call_of.items()}


def call_label(call: Mapping[str, Any]) -> str:
    """``name(arguments)`` for reasons (arguments as compact JSON, cut at 120 characters)."""
    _, name, _ = call_parts(call)
    args = arguments_of(call)
    if args in (None, "", {}):
        return f"{name}()"
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True,
                                                           separators=(",", ":"), default=str)
    return f"{name}({text if len(text) <= 120 else text[:119] + '…'})"


def calls_made(tool_calls: list[dict[str, Any]] | None, steps: list[Message] | None) -> list[dict[str, Any]]:
    """The calls the agent made: ``tool_calls``, else those in the assistant messages of ``steps``."""
    if tool_calls:
        return list(tool_calls)
    out: list[dict[str, Any]] = []
    for m in steps or ():
        if m.role == "assistant":
            out.extend(c for c in (m.tool_calls or ()) if isinstance(c, Mapping))
    return out


def _compare(tool_calls: list[dict[str, Any]] | None, steps: list[Message] | None,
             expected: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, int], str, dict[str, Any]]:
    calls = calls_made(tool_calls, steps)
    pairs = match_calls(calls, expected)
    used = set(pairs.values())
    missed = [call_label(e) for i, e in enumerate(expected) if i not in pairs]
    extra = [call_label(c) for j, c in enumerate(calls) if j not in used]
    parts = [f"{len(pairs)} of {len(expected)} expected call(s) made; {len(calls)} call(s) in all"]
    if missed:
        parts.append("missing: " + ", ".join(missed))
    if extra:
        parts.append("not expected: " + ", ".join(extra))
    props = {"n_calls": len(calls), "n_expected": len(expected), "n_matched": len(pairs),
             "missing_calls": missed, "extra_calls": extra}
    return calls, pairs, "; ".join(parts), props


AGENT_OUTPUT = ("tool_calls", "steps", "response")


@metric(auto=True, family=BOTH, scale="0-1", requires=("expected_tool_calls", AGENT_OUTPUT))
def tool_call_precision(expected_tool_calls: list[dict[str, Any]], tool_calls: list[dict[str, Any]] | None = None,
                        steps: list[Message] | None = None, response: str | None = None) -> Score:
    """Share of the tool calls made that were expected (name and expected arguments equal). 0–1.

    No call made while calls were expected: 0. The reason names the missing and the extra calls."""
    calls, pairs, reason, props = _compare(tool_calls, steps, expected_tool_calls)
    value = len(pairs) / len(calls) if calls else 0.0
    return Score(value=value, reason=reason, properties=props)


@metric(auto=True, family=BOTH, scale="0-1", requires=("expected_tool_calls", AGENT_OUTPUT))
def tool_call_recall(expected_tool_calls: list[dict[str, Any]], tool_calls: list[dict[str, Any]] | None = None,
                     steps: list[Message] | None = None, response: str | None = None) -> Score:
    """Share of the expected tool calls that the agent made. 0–1; the reason names the missing calls."""
    _, pairs, reason, props = _compare(tool_calls, steps, expected_tool_calls)
    return Score(value=len(pairs) / len(expected_tool_calls), reason=reason, properties=props)


@metric(auto=True, family=BOTH, scale="0-1", threshold=1, requires=("expected_tool_calls", AGENT_OUTPUT))
def tool_call_exact_match(expected_tool_calls: list[dict[str, Any]], tool_calls: list[dict[str, Any]] | None = None,
                          steps: list[Message] | None = None, response: str | None = None) -> Score:
    """1 when the calls made are the expected calls in the expected order, else 0. Threshold 1.

    As many calls as expectations, and call *i* meets expectation *i* (same name, expected
    arguments equal). The reason says where the sequences part."""
    calls, pairs, reason, props = _compare(tool_calls, steps, expected_tool_calls)
    exact = len(calls) == len(expected_tool_calls) and all(meets(c, e) for c, e in zip(calls, expected_tool_calls))
    if exact:
        return Score(value=1, reason=f"the {len(calls)} call(s) made are the expected ones, in order",
                     properties=props)
    if len(calls) == len(expected_tool_calls) and len(pairs) == len(calls):
        first = next(i for i, (c, e) in enumerate(zip(calls, expected_tool_calls)) if not meets(c, e))
        reason = (f"the expected calls were made but not in the expected order: call {first + 1} is "
                  f"{call_label(calls[first])}, expected {call_label(expected_tool_calls[first])}")
    return Score(value=0, reason=reason, properties=props)


@metric(auto=True, family=BOTH, higher_is_better=False)
def agent_steps(steps: list[Message]) -> Score:
    """Number of assistant messages in the agent's steps (tool-calling turns and the final answer). Lower is better.

    ``properties``: ``n_tool_calls`` (calls in those messages) and ``n_tool_results``."""
    assistant = [m for m in steps if m.role == "assistant"]
    n_calls = sum(len(m.tool_calls or ()) for m in assistant)
    n_results = sum(1 for m in steps if m.role == "tool")
    return Score(value=len(assistant), reason=f"{len(assistant)} assistant message(s), {n_calls} tool call(s)",
                 properties={"n_tool_calls": n_calls, "n_tool_results": n_results})


@metric(auto=True, family=BOTH, higher_is_better=False, threshold=0, requires=(("tool_calls", "steps"),))
def tool_errors(tool_calls: list[dict[str, Any]] | None = None, steps: list[Message] | None = None) -> Score:
    """Number of tool calls that ended in an error. Lower is better; threshold 0 (any error fails).

    The reason names the failed calls and their errors; an agent that made no call has 0."""
    tool_calls = calls_made(tool_calls, steps)
    failed = [c for c in tool_calls if isinstance(c, Mapping) and c.get("error") not in (None, "")]
    if not failed:
        return Score(value=0, reason=f"none of the {len(tool_calls)} call(s) failed",
                     properties={"n_calls": len(tool_calls), "failed_calls": []})
    listed = "; ".join(f"{call_label(c)}: {str(c['error'])[:200]}" for c in failed)
    return Score(value=len(failed), reason=f"{len(failed)} of {len(tool_calls)} call(s) failed — {listed}",
                 properties={"n_calls": len(tool_calls), "failed_calls": [call_label(c) for c in failed]})
