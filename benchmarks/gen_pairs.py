"""Deterministic (response, ground_truth) pairs of about 50 words for speed benchmarks."""

from __future__ import annotations

import random
from pathlib import Path

import orjson

WORDS = ("the a an model answer question retrieval context document evaluation metric score "
         "judge response user system data water river mountain city capital country president "
         "year number people language history science energy light speed sound music art book "
         "novel author wrote published century war peace market price growth rate bank money "
         "computer network server request latency token cost quality index benchmark test "
         "result value error failure success average median percentile table row column file "
         "Paris London Berlin Tokyo Canberra Melville Phobos Deimos 1851 1989 42 3.14 100").split()
PUNCT = (",", ".", ";", ":", "!", "?", "'s", "n't", "(", ")", '"')


def sentence(rng: random.Random, n: int) -> str:
    out = []
    for i in range(n):
        w = rng.choice(WORDS)
        if i == 0:
            w = w.capitalize()
        out.append(w)
        if rng.random() < 0.08:
            out[-1] += rng.choice(PUNCT[:3])
    return " ".join(out) + rng.choice((".", ".", "?", "!"))


def pair(rng: random.Random, words: int = 50) -> tuple[str, str]:
    resp = " ".join(sentence(rng, max(3, words // 3 + rng.randint(-3, 3))) for _ in range(3))
    toks = resp.split()
    ref = [t for t in toks if rng.random() > 0.25]
    for _ in range(len(toks) // 6):
        ref.insert(rng.randrange(len(ref) + 1), rng.choice(WORDS))
    return resp, " ".join(ref)


def write_jsonl(path: Path, n: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for i in range(n):
            resp, ref = pair(rng)
            fh.write(orjson.dumps({"id": str(i), "response": resp, "ground_truth": ref}) + b"\n")
    return path
