"""A judge that is flaky on purpose, for the repeats tests: an answer function for the scripted
fake OpenAI endpoint (:mod:`tests.helpers.fake_openai_server`).

Rows whose text holds ``FLAKY`` get a score drawn at random on either side of the
groundedness threshold (2 or 4 against 3); rows holding ``BAD`` always get 1, the others always
5. The draw for the n-th ask of one prompt is seeded by the prompt and n, so a run's answers are
the same whatever order the concurrent asks arrive in; ``answers`` keeps, per prompt, every
score given, so a test knows which rows really were answered both ways.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any


class FlakyJudge:
    def __init__(self, low: int = 2, high: int = 4) -> None:
        self.low, self.high = low, high
        self.answers: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def __call__(self, req: dict[str, Any]) -> dict[str, Any]:
        messages = (req.get("body") or {}).get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        with self._lock:
            given = self.answers.setdefault(prompt, [])
            if "FLAKY" in prompt:
                score = random.Random(f"{prompt}|{len(given)}").choice((self.low, self.high))
            elif "BAD" in prompt:
                score = 1
            else:
                score = 5
            given.append(score)
        return {"content": json.dumps({"score": score, "reason": f"scored {score}"})}

    def mixed(self, marker: str = "FLAKY") -> int:
        """How many prompts holding ``marker`` were answered both ways."""
        return sum(1 for p, s in self.answers.items() if marker in p and len(set(s)) > 1)


def rag_rows(n_good: int, n_flaky: int = 0, n_bad: int = 0) -> list[dict[str, Any]]:
    """RAG rows (query, response, contexts): ``n_good`` plain ones, then ``n_flaky`` holding
    ``FLAKY`` and ``n_bad`` holding ``BAD`` in their response; each row's id is ``g3``,
    ``f0``, ``b1`` ..."""
    rows = []
    for kind, n, mark in (("g", n_good, ""), ("f", n_flaky, " FLAKY"), ("b", n_bad, " BAD")):
        for i in range(n):
            rows.append({"id": f"{kind}{i}", "query": f"What colour is item {kind}{i}?",
                         "response": f"Item {kind}{i} is blue.{mark}",
                         "contexts": [f"Item {kind}{i} is blue, as the catalogue says."]})
    return rows
