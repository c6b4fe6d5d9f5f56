"""Goal files for goal-driven simulated users (``assay simulate users --goals goals.yaml``).

A goal file is YAML (or JSON): a list of goals, or a mapping with a ``goals`` list. Each goal::

    - id: refund-late-order            # optional; default goal-1, goal-2, ...
      persona: A customer who is polite but busy.
      goal: Get a refund for order 4417, which arrived broken.
      facts:                           # what the user knows and tells when asked (a list or a mapping)
        order number: "4417"
        delivered: 3 May
      done: The assistant confirms that a refund for order 4417 has been started.
      max_turns: 8                     # optional; never more than --max-turns
      tools:                           # optional: tools the app may call, answered by the simulator
        - name: lookup_order
          description: Returns the status, items and delivery date of an order as JSON.

``goal`` and ``done`` are required. A problem is one :class:`~assay.errors.AssayError` line
naming the file, the line and the field (``goals.yaml:7: goals[1].max_turns: must be a whole
number of at least 1, got 0``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.errors import AssayError

KEYS = ("id", "persona", "goal", "facts", "done", "max_turns", "tools")
TOOL_KEYS = ("name", "description")
DEFAULT_PERSONA = "An ordinary user who writes short, natural messages."


@dataclass(frozen=True)
class Tool:
    """A tool the app may call; the simulating model answers it from ``description``."""

    name: str
    description: str


@dataclass(frozen=True)
class Goal:
    """One simulated user's goal (see the module docstring for the fields)."""

    id: str
    goal: str
    done: str
    persona: str = DEFAULT_PERSONA
    facts: tuple[str, ...] = ()
    max_turns: int | None = None
    tools: tuple[Tool, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        """The goal as the ``goal`` column of a simulated conversation row."""
        out: dict[str, Any] = {"id": self.id, "persona": self.persona, "goal": self.goal, "done": self.done,
                               "facts": list(self.facts)}
        if self.max_turns is not None:
            out["max_turns"] = self.max_turns
        if self.tools:
            out["tools"] = [{"name": t.name, "description": t.description} for t in self.tools]
        return out


class _Bad(Exception):
    def __init__(self, node: Any, where: str, message: str):
        super().__init__(message)
        self.line = node.start_mark.line + 1 if node is not None else None
        self.where = where
        self.message = message


def _text(node: Any, where: str) -> str:
    import yaml

    if not isinstance(node, yaml.ScalarNode) or node.tag.endswith(":null"):
        raise _Bad(node, where, "must be a text")
    value = str(node.value).strip()
    if not value:
        raise _Bad(node, where, "must not be empty")
    return value


def _facts(node: Any, where: str) -> tuple[str, ...]:
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return (_text(node, where),)
    if isinstance(node, yaml.SequenceNode):
        return tuple(_text(v, f"{where}[{i}]") for i, v in enumerate(node.value))
    if isinstance(node, yaml.MappingNode):
        return tuple(f"{_text(k, where)}: {_text(v, f'{where}.{k.value}')}" for k, v in node.value)
    raise _Bad(node, where, "must be a list of facts or a mapping of name: value")


def _max_turns(node: Any, where: str) -> int:
    import yaml

    raw = node.value if isinstance(node, yaml.ScalarNode) else None
    n = int(raw) if raw is not None and re.fullmatch(r"\s*-?\d+\s*", raw) else None
    if n is None or n < 1:
        raise _Bad(node, where, f"must be a whole number of at least 1, got {raw!r}" if raw is not None
                   else "must be a whole number of at least 1")
    return n


def _tools(node: Any, where: str) -> tuple[Tool, ...]:
    import yaml

    if not isinstance(node, yaml.SequenceNode):
        raise _Bad(node, where, "must be a list of {name, description}")
    out = []
    for i, t in enumerate(node.value):
        at = f"{where}[{i}]"
        if not isinstance(t, yaml.MappingNode):
            raise _Bad(t, at, "must be a mapping with name and description")
        vals = {}
        for k, v in t.value:
            if k.value not in TOOL_KEYS:
                raise _Bad(k, f"{at}.{k.value}", f"unknown field (a tool has {', '.join(TOOL_KEYS)})")
            vals[k.value] = _text(v, f"{at}.{k.value}")
        for need in TOOL_KEYS:
            if need not in vals:
                raise _Bad(t, f"{at}.{need}", "missing")
        out.append(Tool(vals["name"], vals["description"]))
    return tuple(out)


def _goal(node: Any, where: str, index: int) -> Goal:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        raise _Bad(node, where, "must be a mapping with at least goal and done")
    vals: dict[str, Any] = {}
    for k, v in node.value:
        key = str(k.value)
        at = f"{where}.{key}"
        if key not in KEYS:
            raise _Bad(k, at, f"unknown field (a goal has {', '.join(KEYS)})")
        if key == "facts":
            vals[key] = _facts(v, at)
        elif key == "max_turns":
            vals[key] = _max_turns(v, at)
        elif key == "tools":
            vals[key] = _tools(v, at)
        else:
            vals[key] = _text(v, at)
    for need in ("goal", "done"):
        if need not in vals:
            raise _Bad(node, f"{where}.{need}", "missing (what the user wants, and what counts as done)")
    vals.setdefault("id", f"goal-{index + 1}")
    return Goal(**vals)


def parse_goals(text: str, path: str = "goals.yaml") -> list[Goal]:
    """The goals of a goal file's ``text``; a problem raises one AssayError line naming
    ``path``, the line and the field."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise AssayError(f"{path}{line}: not YAML: {getattr(exc, 'problem', None) or exc}") from None
    try:
        return _goals(root)
    except _Bad as bad:
        line = f":{bad.line}" if bad.line is not None else ""
        raise AssayError(f"{path}{line}: {bad.where}: {bad.message}") from None


def _goals(root: Any) -> list[Goal]:
    import yaml

    seq, where = root, "goals"
    if isinstance(root, yaml.MappingNode):
        found = [v for k, v in root.value if k.value == "goals"]
        other = [k for k, _ in root.value if k.value != "goals"]
        if other:
            raise _Bad(other[0], str(other[0].value), "unknown field (the file has one field: goals)")
        seq = found[0] if found else None
    if root is None or seq is None:
        raise _Bad(root, where, "no goals in the file (a list of goals, or goals: [...])")
    if not isinstance(seq, yaml.SequenceNode):
        raise _Bad(seq, where, "must be a list of goals")
    if not seq.value:
        raise _Bad(seq, where, "the list is empty")
    goals = [_goal(g, f"goals[{i}]", i) for i, g in enumerate(seq.value)]
    seen: dict[str, int] = {}
    for i, g in enumerate(goals):
        if g.id in seen:
            raise _Bad(seq.value[i], f"goals[{i}].id", f"{g.id!r} is also the id of goals[{seen[g.id]}]")
        seen[g.id] = i
    return goals


def read_goals(path: str | Path) -> list[Goal]:
    """The goals of the goal file at ``path`` (see :func:`parse_goals`)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AssayError(f"--goals {p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AssayError(f"--goals {p}: cannot read it ({exc})") from None
    return parse_goals(text, str(p))


__all__ = ["DEFAULT_PERSONA", "Goal", "Tool", "parse_goals", "read_goals"]
