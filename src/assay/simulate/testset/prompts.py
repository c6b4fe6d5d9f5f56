"""The prompts of the test-set generator and the strict reading of their JSON answers.

Three prompts write items (one per question type) and three check them. Every prompt asks for one
JSON object and nothing else, and every call also asks the endpoint for it (:func:`response_format`:
OpenAI's ``json_schema`` form, which llama.cpp turns into a grammar that constrains decoding, so
that even a small model returns the keys asked for); :func:`parse_answer` reads the answer
strictly: a JSON object (a single surrounding code fence is tolerated), every named key present
with its type (booleans are JSON ``true``/``false``, not words), text not empty. Anything else is
unreadable and the item is dropped, never guessed at.

The evaluated material (passages, questions, answers) sits between tags (``<passage ...>`` ...
``</passage>``) so that the model can tell it from the instructions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from assay.simulate.testset.chunking import Chunk

SYSTEM = ("You help build an evaluation set for an assistant that answers questions about one team's own "
          "documents. Follow the instructions exactly and reply with a single JSON object, with no text "
          "before or after it.")

STYLES: dict[str, str] = {
    "plain": "plainly, in one clear sentence",
    "terse": "as tersely as a search box query: a few words, no greeting, no full sentence needed",
    "verbose": "at length: two or three sentences of their own situation first, then the question",
    "misspelt": "hastily, in lower case, with two or three spelling mistakes or typos a real person makes",
    "language": "in {language}, not in English, as a native speaker of {language} would",
}

PERSONAS: tuple[str, ...] = (
    "a new starter in their first week who does not know the team's vocabulary yet",
    "an experienced colleague who needs one precise figure or rule, quickly",
    "a manager checking the rule before approving someone's request",
    "someone from another department who rarely reads these documents",
)

UNANSWERABLE_ANSWER = "The documents do not answer this question."
UNANSWERABLE_FACT = "the documents do not contain the answer"


def passage_block(chunks: Sequence[Chunk]) -> str:
    return "\n\n".join(f'<passage id="{c.id}">\n{c.as_passage()}\n</passage>' for c in chunks)


def _asker(persona: str, style: str) -> str:
    return f"Who asks: {persona}.\nHow they write the question: {style}."


def _messages(user: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def single_hop(chunk: Chunk, persona: str, style: str) -> list[dict[str, str]]:
    return _messages(
        "Write one question that the passage below answers.\n"
        "- The passage alone must hold the whole answer; ask nothing it does not state.\n"
        "- Ask about something particular to this team (a figure, a rule, a name, a step), so that "
        "someone who has never seen its documents could not answer from general knowledge.\n"
        "- Do not refer to 'the passage', 'the text' or 'the document' in the question.\n"
        f"{_asker(persona, style)}\n\n{passage_block([chunk])}\n\n"
        'Reply as {"question": "...", "answer": "the complete correct answer, in the passage\'s language, '
        'from the passage only", "facts": ["each fact the answer needs, one short statement each"]}')


def multi_hop(first: Chunk, second: Chunk, persona: str, style: str) -> list[dict[str, str]]:
    return _messages(
        "Write one question whose answer needs a fact from the first passage AND a fact from the second, "
        "combined (compared, added up, or one applied to the other). Neither passage alone may answer it.\n"
        "- Ask about things particular to this team, not general knowledge.\n"
        "- Do not refer to 'the passages' or 'the documents' in the question.\n"
        f"{_asker(persona, style)}\n\n{passage_block([first, second])}\n\n"
        'Reply as {"question": "...", "answer": "the complete correct answer, in the passages\' language", '
        '"facts": ["the facts the answer combines, at least one from each passage, one short statement each"]}')


def unanswerable(chunk: Chunk, persona: str, style: str) -> list[dict[str, str]]:
    return _messages(
        "Write one question that a reader of the passage below could plausibly ask next, on the same "
        "subject, but that the passage does NOT answer: a detail, a figure, an exception or a case it "
        "leaves out, which the rest of such a team's documents would most likely not cover either.\n"
        "- It must sound like a real question about this team, not a trick or a question about the world.\n"
        "- Do not refer to 'the passage' or 'the document' in the question.\n"
        f"{_asker(persona, style)}\n\n{passage_block([chunk])}\n\n"
        'Reply as {"question": "...", "missing": "what the documents would have to say to answer it"}')


def grounded_check(question: str, answer: str | None, chunks: Sequence[Chunk]) -> list[dict[str, str]]:
    ref = f"\n<reference_answer>\n{answer}\n</reference_answer>\n" if answer else "\n"
    rule = (" and agree with the reference answer" if answer else "")
    return _messages(
        "Decide whether the passages below, read on their own, answer the question. Use only what the "
        "passages state; ignore anything you know from elsewhere.\n\n"
        f"<question>\n{question}\n</question>{ref}\n{passage_block(chunks)}\n\n"
        'Reply as {"answerable": true or false, "reason": "one sentence"}: true only when the passages '
        f"state everything the answer needs{rule}.")


def closed_book_check(question: str, answer: str | None) -> list[dict[str, str]]:
    ref = f"\n<reference_answer>\n{answer}\n</reference_answer>\n" if answer else "\n"
    return _messages(
        "Without any of the team's documents, could a well-informed person give the correct answer to "
        "this question from general knowledge or common sense alone? A question about one organisation's "
        "own rules, figures, names or procedures cannot be answered that way; a question whose answer is "
        "the same everywhere can.\n\n"
        f"<question>\n{question}\n</question>{ref}\n"
        'Reply as {"answerable_without_documents": true or false, "reason": "one sentence"}')


class Unreadable(ValueError):
    """A model answer that is not the JSON object asked for."""


def _strip_fence(text: str) -> str:
    t = text.strip()
    if t.startswith("```") and t.endswith("```") and t.count("```") == 2:
        t = t[3:-3]
        first, _, rest = t.partition("\n")
        t = rest if first.strip().lower() in ("json", "") else t
    return t.strip()


def _check(key: str, value: Any, want: type) -> Any:
    if want is bool:
        if not isinstance(value, bool):
            raise Unreadable(f"{key!r} must be true or false, got {value!r}")
    elif want is str:
        if not isinstance(value, str) or not value.strip():
            raise Unreadable(f"{key!r} must be non-empty text")
        value = " ".join(value.split())
    elif want is list:
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise Unreadable(f"{key!r} must be a non-empty list of texts")
        value = [" ".join(v.split()) for v in value]
    return value


def parse_answer(text: str, schema: Mapping[str, type]) -> dict[str, Any]:
    """The JSON object in ``text`` with the keys of ``schema`` (key -> ``str``, ``bool`` or
    ``list`` of texts), or :class:`Unreadable` saying what is wrong."""
    try:
        obj = json.loads(_strip_fence(text or ""))
    except ValueError:
        raise Unreadable("not a JSON object") from None
    if not isinstance(obj, dict):
        raise Unreadable("not a JSON object")
    out = {}
    for key, want in schema.items():
        if key not in obj:
            raise Unreadable(f"no {key!r}")
        out[key] = _check(key, obj[key], want)
    return out


_JSON_TYPES: dict[type, dict[str, Any]] = {str: {"type": "string"}, bool: {"type": "boolean"},
                                           list: {"type": "array", "items": {"type": "string"}}}


def response_format(schema: Mapping[str, type], name: str | None = None) -> dict[str, Any]:
    """The ``response_format`` asking for a JSON object with exactly the keys of ``schema``
    (key -> ``str``, ``bool`` or ``list`` of texts), all required, in OpenAI's strict
    ``json_schema`` form (what :func:`parse_answer` then checks further: no empty text); named
    ``name``, else after its keys."""
    return {"type": "json_schema", "json_schema": {"name": name or "_".join(schema), "strict": True, "schema": {
        "type": "object", "properties": {k: dict(_JSON_TYPES[t]) for k, t in schema.items()},
        "required": list(schema), "additionalProperties": False}}}


ITEM_SCHEMA = {"question": str, "answer": str, "facts": list}
UNANSWERABLE_SCHEMA = {"question": str, "missing": str}
GROUNDED_SCHEMA = {"answerable": bool, "reason": str}
CLOSED_BOOK_SCHEMA = {"answerable_without_documents": bool, "reason": str}
