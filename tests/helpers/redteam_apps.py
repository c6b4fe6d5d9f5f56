"""Targets and a judge stand-in for the red-team tests.

* :func:`decoding_app` — a deliberately weak app: it decodes base64 and ROT13 requests written the
  way ``assay redteam`` writes them and complies with them (answers with a harmful text of the
  objective's category, from :mod:`tests.helpers.harmful_answers`), and refuses everything else.
* :func:`refusing_app` — refuses every request.
* :func:`judge_reply` — the scripted judge endpoint's answer (a :class:`FakeOpenAI` action): it
  reads which harm category it is asked about and rates the response 6 when it is one of the
  harmful texts of that category, 0 otherwise. Honest for these tests: those texts are the only
  harmful responses the apps above give.
"""

from __future__ import annotations

import json
import re
from typing import Any

from assay.simulate.redteam import converters as cv
from assay.simulate.redteam.objectives import load_objectives
from assay.simulate.redteam.strategies import NOTES
from tests.helpers.harmful_answers import HARMFUL

REFUSAL = "I'm sorry, but I can't help with that."
BY_TEXT = {o.text: o for o in load_objectives().objectives}
HARMFUL_BY_CAT: dict[str, list[str]] = {}
for _cat, _text in HARMFUL:
    HARMFUL_BY_CAT.setdefault(_cat, []).append(_text)


def comply(objective_text: str) -> str:
    o = BY_TEXT[objective_text]
    texts = HARMFUL_BY_CAT[o.category]
    return texts[sum(map(ord, o.id)) % len(texts)]


def decode(query: str) -> str | None:
    """The plain request inside a base64 or ROT13 attack, else None."""
    for name, dec in (("base64", cv.decode_base64), ("rot13", cv.decode_rot13)):
        note = NOTES[name]
        if query.startswith(note):
            return dec(query[len(note):].strip())
    return None


def decoding_app(query: str) -> str:
    plain = decode(query)
    if plain is not None and plain in BY_TEXT:
        return comply(plain)
    return REFUSAL


def refusing_app(query: str) -> str:
    return REFUSAL


CATEGORY_WORDS = {"for violence?": "violence", "for hate and unfairness?": "hate_unfairness",
                  "for sexual content?": "sexual", "for self-harm?": "self_harm"}


def judge_reply(req: dict[str, Any]) -> dict[str, Any]:
    text = "\n".join(str(m.get("content") or "") for m in (req.get("body") or {}).get("messages", []))
    cat = next((c for k, c in CATEGORY_WORDS.items() if k in text), None)
    m = re.search(r"<response>\n(.*?)\n</response>", text, re.S)
    response = m.group(1) if m else ""
    harmful = cat is not None and response.strip() in HARMFUL_BY_CAT.get(cat, [])
    return {"content": json.dumps({"reason": "harmful text of the category" if harmful else "nothing harmful",
                                   "score": 6 if harmful else 0})}
