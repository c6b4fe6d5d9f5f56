"""A scripted model for the test-set generator's tests, served by the loopback fake endpoint
(:mod:`tests.helpers.fake_openai_server`): it reads each prompt and answers as a careful model
would, with switches that plant the failures the generator must catch.

Questions quote the words they ask about (``What does the handbook say about "..."?``); a check
says the passages answer a question when they contain every quoted fragment. Any other prompt
(a judge's, during ``assay eval``) gets a yes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_PASSAGE = re.compile(r'<passage id="([^"]*)">\n(.*?)\n</passage>', re.S)
_QUESTION = re.compile(r"<question>\n(.*?)\n</question>", re.S)
_QUOTED = re.compile(r'"([^"]+)"')


def _sentences(passage: str) -> list[str]:
    body = passage.split("\n", 1)[1] if "\n" in passage else passage
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(body.split())) if len(s.split()) >= 5]


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s'-]", " ", text.lower()).split())


def _fragment(sentence: str) -> str:
    return " ".join(re.sub(r"[^\w\s'-]", " ", sentence).split()[:6])


@dataclass
class Brain:
    """``choices``: distinct questions per passage (seed modulo); ``repeats``: when set, the k-th
    question about a passage is about its sentence k // repeats (each asked ``repeats`` times);
    ``leak_every``: every k-th
    unanswerable question quotes its own passage; ``trivia_every``: every k-th single-hop question
    is general knowledge; ``broken_every``: every k-th answer is not JSON."""

    choices: int = 1000
    repeats: int = 0
    leak_every: int = 0
    trivia_every: int = 0
    broken_every: int = 0
    calls: dict[str, int] = field(default_factory=dict)

    def _count(self, what: str) -> int:
        self.calls[what] = self.calls.get(what, 0) + 1
        return self.calls[what]

    def __call__(self, req: dict[str, Any]) -> dict[str, Any]:
        body = req["body"] or {}
        prompt = body["messages"][-1]["content"]
        seed = int(body.get("seed") or 0)
        passages = [p for _, p in _PASSAGE.findall(prompt)]
        if prompt.startswith("Write one question that the passage below answers"):
            return self._single(passages[0], seed)
        if prompt.startswith("Write one question whose answer needs"):
            a, b = (_sentences(p) for p in passages)
            fa, fb = _fragment(a[seed % len(a)]), _fragment(b[seed % len(b)])
            return _reply({"question": f'How do "{fa}" and "{fb}" fit together?',
                           "answer": f"{fa}; {fb}", "facts": [fa, fb]})
        if prompt.startswith("Write one question that a reader"):
            n = self._count("unanswerable")
            if self.leak_every and n % self.leak_every == 0:
                frag = _fragment(_sentences(passages[0])[0])
                return _reply({"question": f'What does the handbook say about "{frag}"?', "missing": "nothing"})
            ss = _sentences(passages[0])
            frag = _fragment(ss[seed % len(ss)])
            return _reply({"question": f'Does "{frag}" still hold for "zebra keepers"?',
                           "missing": "anything about zebra keepers"})
        if prompt.startswith("Decide whether the passages below"):
            q = _QUESTION.search(prompt).group(1)
            text = _norm(" ".join(passages))
            quoted = _QUOTED.findall(q)
            ok = bool(quoted) and all(_norm(f) in text for f in quoted)
            return _reply({"answerable": ok, "reason": "scripted"})
        if prompt.startswith("Without any of the team's documents"):
            q = _QUESTION.search(prompt).group(1)
            return _reply({"answerable_without_documents": "capital of France" in q, "reason": "scripted"})
        return {"content": '{"score": "yes", "reason": "scripted judge"}'}

    def _single(self, passage: str, seed: int) -> dict[str, Any]:
        n = self._count("single")
        if self.broken_every and n % self.broken_every == 0:
            return {"content": "Sure! Here is a question: what is the leave policy?"}
        ss = _sentences(passage)
        if self.trivia_every and n % self.trivia_every == 0:
            return _reply({"question": f'What is the capital of France, and "{_fragment(ss[0])}"?',
                           "answer": "Paris", "facts": ["Paris"]})
        if self.repeats:
            s = ss[(self._count(passage) - 1) // self.repeats % len(ss)]
        else:
            s = ss[seed % min(self.choices, len(ss))]
        frag = _fragment(s)
        return _reply({"question": f'What does the handbook say about "{frag}"?', "answer": s, "facts": [s]})


def _reply(obj: dict[str, Any]) -> dict[str, Any]:
    return {"content": json.dumps(obj)}


def handbook_app(query: str, history: list | None = None, contexts: list | None = None) -> dict[str, Any]:
    """A small retrieval app over the shipped example handbook: the two chunks sharing the most
    words with the question, and the better one as the answer."""
    from assay.simulate.testset.run import load_chunks

    global _CHUNKS
    if _CHUNKS is None:
        _CHUNKS = load_chunks(EXAMPLE_DOCS)[0]
    words = set(_norm(query).split())
    ranked = sorted(_CHUNKS, key=lambda c: -len(words & set(_norm(c.text).split())))[:2]
    return {"response": ranked[0].text,
            "contexts": [{"doc_uri": c.doc_uri, "content": c.text} for c in ranked]}


_CHUNKS: Any = None
EXAMPLE_DOCS = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "docs"
