"""Prompts of an exact length in the endpoint model's tokens, and the tokenizer that counts them.

The counter is the server's own where it has one — vLLM's and llama.cpp's ``POST /tokenize``,
llama-cpp-python's ``POST /extras/tokenize`` — else a BPE encoding shipped inside the
``bpe-openai`` package (``o200k_base``; ``cl100k_base`` for GPT-4 / GPT-3.5 names), and the run
records which (``tokenizer.source``). A server's count of the empty string (a BOS token, say)
is subtracted, so the count is of the text alone.

A prompt is ``[shared prefix] + "Request <id>:" + filler words``: the id makes every prompt
differ from its first tokens, so a server's prefix cache cannot serve one request from
another's work (``shared_prefix = N`` puts the same N tokens first, to measure caching). The
filler is common English words drawn with a seeded generator; words are added or dropped
until the counter gives exactly the asked length (a few rounds at most; the rare text that
cannot hit it exactly is kept at the nearest length and flagged).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from assay.errors import AssayError
from assay.models.http import LeanHTTP

# Lower-case English words that are one token after a space in the o200k and cl100k
# encodings (and in the SentencePiece vocabularies of common open models).
WORDS = ("the of and to in is was for on that with as by at from his her they this had were which "
         "are but not be one have all their there been has more when will would who so no out up "
         "into can only other new some could time these two may then first any like now over such "
         "our man me even most made after also did many before must through back years where much "
         "your way well down should because each just those people how too little state good very "
         "make world still own see men work long get here between both life being under never day "
         "same another know while last might us great old year off come since against go came right "
         "used take three small place house end found part city water light river table garden "
         "window morning winter summer market school letter road music paper story voice").split()


@dataclass
class Counter:
    """Counts tokens of a text: ``count(texts) -> counts`` (awaitable), and says what it is."""

    source: str
    count: Callable[[list[str]], Awaitable[list[int]]]
    model_tokens: bool          # whether the counts are the endpoint model's own tokens


def bundled_encoding_name(model: str | None) -> str:
    m = (model or "").lower()
    return "cl100k_base" if m.startswith(("gpt-4-", "gpt-3.5")) or m == "gpt-4" else "o200k_base"


def bundled_counter(model: str | None) -> Counter:
    import bpe_openai

    name = bundled_encoding_name(model)
    enc = bpe_openai.get_encoding(name)

    async def count(texts: list[str]) -> list[int]:
        return [len(enc.encode_ordinary(t)) for t in texts]

    return Counter(f"bundled {name}", count, False)


# How long the probe waits for a tokenizer endpoint to answer before trying the next one (at most
# ``--timeout``): a server without one answers 404 at once, so only a silent server waits this long.
PROBE_TIMEOUT = 30.0


async def server_counter(http: LeanHTTP, root: str, model: str, headers: dict[str, str], *,
                         timeout: float = 600.0) -> Counter | None:
    """The server's tokenizer, if it serves one (probed with the empty string), else None.

    Every request is bounded: the probe by ``min(timeout, PROBE_TIMEOUT)`` (a silent endpoint is
    passed over), each count afterwards by ``timeout`` (``--timeout``; unanswered, an AssayError)."""
    probes = (
        # vLLM and llama.cpp's own server; each ignores the other's field names
        ("/tokenize", lambda t: {"model": model, "prompt": t, "content": t,
                                         "add_special_tokens": False, "add_special": False}),
        ("/extras/tokenize", lambda t: {"model": model, "input": t}),   # llama-cpp-python
    )
    for path, body in probes:
        head = http.head("POST", root + path, {**headers, "Content-Type": "application/json"})

        async def one(text: str, head: bytes = head, body: Any = body, path: str = path,
                      bound: float = timeout) -> int:
            try:
                resp = await asyncio.wait_for(http.request(head, orjson.dumps(body(text))), bound)
            except asyncio.TimeoutError:
                raise AssayError(f"{path}: no answer in {bound:g} s (--timeout)") from None
            if resp.status != 200:
                raise AssayError(f"{path}: HTTP {resp.status}")
            got = orjson.loads(resp.body)
            if isinstance(got, dict) and isinstance(got.get("count"), int):
                return int(got["count"])
            tokens = got.get("tokens") if isinstance(got, dict) else None
            if not isinstance(tokens, list):
                raise AssayError(f"{path}: no tokens in the answer")
            return len(tokens)

        probe_bound = min(timeout, PROBE_TIMEOUT)
        try:
            base = await one("", bound=probe_bound)
            probe = await one("hello world", bound=probe_bound)
        except (AssayError, OSError, ConnectionError, ValueError, orjson.JSONDecodeError):
            continue
        if probe <= base:
            continue

        async def count(texts: list[str], one: Any = one, base: int = base) -> list[int]:
            return [await one(t) - base for t in texts]

        return Counter(f"server {path}", count, True)
    return None


@dataclass
class Prompt:
    text: str
    tokens: int          # as counted by the counter
    exact: bool


def _words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(max(0, n))]


async def build_prompts(counter: Counter, n: int, tokens: int, *, shared_prefix: int = 0, seed: int = 0,
                        progress: Callable[[int], None] | None = None, groups: int = 1) -> list[Prompt]:
    """``n`` prompts of exactly ``tokens`` tokens each (see the module doc); with ``groups`` > 1,
    that many different shared prefixes, prompt ``i`` starting with prefix ``i % groups``."""
    if tokens < 4:
        raise AssayError(f"--input-tokens must be at least 4, got {tokens}")
    if shared_prefix >= tokens - 3:
        raise AssayError(f"--shared-prefix ({shared_prefix}) must leave room for a unique part "
                         f"(at most {tokens - 4} of {tokens} input tokens)")
    rng = random.Random(seed)
    prefixes = [""]
    if shared_prefix:
        prefixes = [await fit_text(counter, "", shared_prefix, rng) for _ in range(max(1, groups))]
    out: list[Prompt] = []
    filler: list[str] | None = None
    for i in range(n):
        shared = prefixes[i % len(prefixes)]
        head = f"{shared} Request {rng.getrandbits(40):010x}:" if shared else f"Request {rng.getrandbits(40):010x}:"
        if filler is None:
            text = await fit_text(counter, head, tokens, rng)
            filler = text[len(head):].split()
        text = head + " " + " ".join(filler)
        (c,) = await counter.count([text])
        if c != tokens:
            text = await fit_text(counter, head, tokens, rng, start=filler)
            (c,) = await counter.count([text])
        out.append(Prompt(text, c, c == tokens))
        if progress:
            progress(1)
    return out


async def fit_text(counter: Counter, head: str, target: int, rng: random.Random,
               start: list[str] | None = None) -> str:
    """``head`` + words, adjusted until the counter gives ``target`` tokens (or the nearest found)."""
    words = list(start) if start is not None else []
    if not words:
        (h,) = await counter.count([head]) if head else (0,)
        words = _words(rng, target - h)
    best: tuple[int, str] | None = None
    for _ in range(12):
        text = (head + " " + " ".join(words)).strip() if head else " ".join(words)
        (c,) = await counter.count([text])
        if best is None or abs(c - target) < abs(best[0] - target):
            best = (c, text)
        if c == target:
            return text
        if c < target:
            words += _words(rng, target - c)
        elif len(words) > 1 and c - target >= 1:
            drop = max(1, c - target)
            if drop >= len(words):
                drop = len(words) - 1
            words = words[:-drop]
            if c - target == 1 and rng.random() < 0.5:
                words[-1] = rng.choice(WORDS)     # break a merge that keeps the count one over
    return best[1] if best else head
