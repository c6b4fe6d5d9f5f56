"""A scripted model for the goal-driven user simulator and the conversation judges, served by the
loopback fake endpoint (:mod:`tests.helpers.fake_openai_server`), and planted apps to talk to.

Every answer is read off the prompt's content, never off a switch:

* **the simulated user** (persona with ``- name: value`` facts) states its facts one per turn
  (``My order number is 4417.``), then asks the assistant to recall the first one
  (``What is my order number?``), then asks for the goal itself;
* **the goal verdict** reads the ``<done>`` block: the phrase quoted in it, found in the last
  assistant message, is ``met``; ``cannot help`` in it is ``abandoned``; else ``open``;
* **a simulated tool** answers ``{"tool": NAME, "status": "shipped", "arguments": ...}``;
* **knowledge_retention** collects the user's ``My X is Y`` facts from the transcript and fails
  every later assistant message that asks for X again or gives X another value;
* **goal_met** looks for the ``<done>`` block's quoted phrase in the assistant's messages;
* the other conversation judges score on simple signs in the transcript (``sorry, I don't
  know``; ``as a pirate``; the user repeating ``again`` / ``already told you``).
"""

from __future__ import annotations

import json
import re
from typing import Any

_BLOCK = r"<{0}>\n(.*?)\n</{0}>"
_FACT_LINE = re.compile(r"^- ([^:\n]+): (.+)$", re.M)
_STATED = re.compile(r"\bmy ([a-z ]+?) is ([\w-]+)", re.I)
_QUOTED = re.compile(r'"([^"]+)"')


def _block(text: str, name: str) -> str:
    m = re.search(_BLOCK.format(name), text, re.S)
    return m.group(1) if m else ""


def _lines(transcript: str) -> list[tuple[str, str]]:
    """``(role, text)`` of each message of a judge's or the verdict's transcript."""
    out: list[tuple[str, str]] = []
    for line in transcript.splitlines():
        m = re.match(r"^(user|assistant|system|User|Assistant):\s?(.*)$", line)
        if m:
            out.append((m.group(1).lower(), m.group(2)))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + " " + line)
    return out


def _reply(obj: dict[str, Any]) -> dict[str, Any]:
    return {"content": json.dumps(obj)}


def _score(n: int, why: str) -> dict[str, Any]:
    return _reply({"reason": why, "score": n})


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


class Brain:
    """The scripted model; ``calls`` counts the prompts of each kind it answered."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def _count(self, kind: str) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1

    def __call__(self, req: dict[str, Any]) -> dict[str, Any]:
        msgs = (req["body"] or {})["messages"]
        system, last = _norm(msgs[0]["content"]), msgs[-1]["content"]
        if system.startswith("you are simulating a user"):
            self._count("user")
            return {"content": self._user(msgs[0]["content"], last)}
        if system.startswith("you watch a conversation"):
            self._count("verdict")
            return self._verdict(last)
        if system.startswith("you play the tool"):
            self._count("tool")
            name = re.search(r"`([^`]+)`", msgs[0]["content"]).group(1)
            args = json.loads(last.split("Arguments: ", 1)[1])
            return _reply({"tool": name, "status": "shipped", "arguments": args})
        for kind in ("kept what it had been told", "achieved the user's goal", "how completely",
                     "kept to its role", "how frustrated"):
            if kind in system:
                self._count(kind)
                return getattr(self, "_" + kind.split()[-1].strip("'"))(last)
        return _score(3, "not a prompt this brain knows")

    # -- the simulated user -----------------------------------------------------------------
    def _user(self, system: str, prompt: str) -> str:
        facts = _FACT_LINE.findall(system)
        said = sum(1 for role, _ in _lines(prompt.split("The conversation so far:", 1)[-1]) if role == "user")
        if said < len(facts):
            name, value = facts[said]
            return f"My {name} is {value}."
        if said == len(facts) and facts:
            return f"What is my {facts[0][0]}?"
        wants = re.search(r"What the user wants: (.+)", system).group(1)
        return f"Please help me: {wants} (asking for the {said + 1}. time)"

    def _verdict(self, prompt: str) -> dict[str, Any]:
        done = _QUOTED.findall(_block(prompt, "done"))
        said = [t for role, t in _lines(_block(prompt, "transcript")) if role == "assistant"]
        final = _norm(said[-1]) if said else ""
        if done and all(_norm(q) in final for q in done):
            return _reply({"status": "met", "reason": "the assistant did what counts as done"})
        if "cannot help" in final:
            return _reply({"status": "abandoned", "reason": "the assistant says it cannot help with this"})
        return _reply({"status": "open", "reason": "not done yet"})

    # -- the conversation judges --------------------------------------------------------------
    def _told(self, prompt: str) -> dict[str, Any]:
        """knowledge_retention: the user's facts, and every later assistant message checked against them."""
        known: dict[str, str] = {}
        lapses: list[str] = []
        for role, text in _lines(_block(prompt, "transcript")):
            if role == "user":
                known.update({k.lower(): v for k, v in _STATED.findall(text)})
                continue
            if role != "assistant":
                continue
            for name, value in known.items():
                low = text.lower()
                if f"what is your {name}" in low or f"what's your {name}" in low:
                    lapses.append(f"asks for the {name} again")
                for k, v in _STATED.findall(re.sub(r"\byour ", "my ", text, flags=re.I)):
                    if k.lower() == name and v != value:
                        lapses.append(f"gives the {name} as {v}, not {value}")
        if not known:
            return _score(3, "the user stated no facts")
        if not lapses:
            return _score(5, f"every fact kept ({', '.join(sorted(known))})")
        return _score(1 if len(lapses) > 1 else 2, "; ".join(lapses))

    def _goal(self, prompt: str) -> dict[str, Any]:
        done = _QUOTED.findall(_block(prompt, "done")) or [_block(prompt, "done")]
        said = " ".join(_norm(t) for role, t in _lines(_block(prompt, "transcript")) if role == "assistant")
        ok = all(_norm(q) in said for q in done)
        return _reply({"reason": "done" if ok else "the condition is not fulfilled", "rating": "yes" if ok else "no"})

    def _completely(self, prompt: str) -> dict[str, Any]:
        said = [t for role, t in _lines(_block(prompt, "transcript")) if role == "assistant"]
        misses = sum("i don't know" in t.lower() for t in said)
        return _score(max(1, 5 - 2 * misses), f"{misses} request(s) left unanswered")

    def _role(self, prompt: str) -> dict[str, Any]:
        said = [t for role, t in _lines(_block(prompt, "transcript")) if role == "assistant"]
        off = sum("as a pirate" in t.lower() for t in said)
        return _score(5 if not off else 2, "in role" if not off else "plays a pirate")

    def _frustrated(self, prompt: str) -> dict[str, Any]:
        users = [t.lower() for role, t in _lines(_block(prompt, "transcript")) if role == "user"]
        signs = sum(("again" in t or "already told you" in t) for t in users)
        return _score(min(5, 1 + signs), f"{signs} sign(s) of frustration")


# ------------------------------------------------------------------------------------------------
# planted apps


def _facts_in(history: list[dict[str, Any]] | None) -> dict[str, str]:
    known: dict[str, str] = {}
    for m in history or ():
        if m["role"] == "user":
            known.update({k.lower(): v for k, v in _STATED.findall(m["content"] or "")})
    return known


def _answer(query: str, known: dict[str, str]) -> str:
    stated = _STATED.findall(query)
    if stated:
        return "Noted: " + ", ".join(f"your {k} is {v}" for k, v in stated) + "."
    asked = re.search(r"what is my ([a-z ]+?)\?", query, re.I)
    if asked:
        name = asked.group(1).lower()
        return f"Your {name} is {known[name]}." if name in known else f"Sorry, what is your {name}?"
    if "refund" in query.lower():
        order = known.get("order number")
        if order:
            return f"Done: refund started for order {order}."
        return "Sorry, what is your order number?"
    return "How can I help?"


def remembering_app(query: str, history: list | None = None) -> str:
    """A support app that reads the whole conversation."""
    return _answer(query, _facts_in(history) | {k.lower(): v for k, v in _STATED.findall(query)})


def forgetful_app(query: str, history: list | None = None) -> str:
    """The same app, but it only sees the last two exchanges: facts told three turns ago are gone."""
    return _answer(query, _facts_in((history or [])[-4:]))


def unhelpful_app(query: str, history: list | None = None) -> str:
    """An app that cannot serve refunds at all."""
    return "I'm sorry, I cannot help with refunds; I only answer questions about opening hours."


def shipping_app(query: str, history: list | None = None, tools: dict | None = None) -> str:
    """A sync app that calls a tool it needs through ``tools``."""
    if tools and "where" in query.lower():
        got = json.loads(tools["track_parcel"](parcel="P-77"))
        return f"Your parcel is {got['status']}."
    return remembering_app(query, history)


async def async_shipping_app(query: str, history: list | None = None, tools: dict | None = None) -> str:
    """The async form: it awaits the tool's ``acall``."""
    if tools and "where" in query.lower():
        got = json.loads(await tools["track_parcel"].acall(parcel="P-78"))
        return f"Your parcel is {got['status']}."
    return remembering_app(query, history)
