"""The byte-level fast paths of the text tokenizers give the str paths' tokens, character by character."""

from __future__ import annotations

import random
import re
import string
import subprocess
import sys

from assay.metrics.text import lexical
from assay.metrics.text import word_tokenize as wt

ASCII = [chr(c) for c in range(128)]


def _squad_str(text: str) -> tuple[str, ...]:
    """azure-ai-evaluation's normalize_text, then split: lower, drop punctuation, drop articles."""
    t = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    return tuple(re.sub(r"\b(a|an|the)\b", " ", t).split())


def _rouge_str(text: str) -> list[str]:
    """rouge-score's tokenizer: lower, [^a-z0-9] -> space, split."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def _texts(seed: int = 3, n: int = 3000) -> list[str]:
    rng = random.Random(seed)
    out = ["", " ", "A", "Mr. Smith's CAT, 3.5% (yes)!", "\x1c\x1d\x1e\x1f split", "tab\there\x0bv\x0cf",
           "nul\x00inside", "ctl\x07bell the", "\x7fdel", "a an the", "The A An", "K\u212a kelvin"]
    for _ in range(n):
        out.append("".join(rng.choice(ASCII) for _ in range(rng.randint(1, 40))))
        out.append(" ".join(rng.choice(["the", "A", "cat's", "x-ray", "U.S.", "\x1c", "\x01", "42", ",", "an"])
                            for _ in range(rng.randint(1, 12))))
    return out


def test_the_byte_tables_treat_every_ascii_character_as_the_str_path_does():
    for ch in ASCII:
        text = f"x{ch}Y{ch}"
        assert lexical.squad_tokens(text) == _squad_str(text), repr(ch)
        assert list(lexical.rouge_tokens(text)) == _rouge_str(text), repr(ch)
        assert text.encode().translate(None, wt._PLAIN_BYTES).decode() == text.translate(wt._PLAIN), repr(ch)


def test_fast_tokens_equal_the_reference_tokens_on_many_texts():
    for text in _texts():
        assert lexical.squad_tokens(text) == _squad_str(text), repr(text)
        c, n = lexical._squad_counts(text)
        assert n == len(_squad_str(text)) and sum(c.values()) == n
        if text.lower().isascii():   # rouge-score's tokens (other scripts differ on purpose)
            assert list(lexical.rouge_tokens(text)) == _rouge_str(text), repr(text)


def test_non_ascii_text_still_takes_the_unicode_paths():
    assert lexical.rouge_tokens("Café CRÈME 東京") == ("café", "crème", "東", "京")
    assert lexical.squad_tokens("L’Été, à Paris!") == ("l’été", "à", "paris")
    assert wt.word_tokenize("naïve café.") == ["naïve", "café", "."]


def test_a_worker_process_freezes_what_it_inherits():
    code = ("import gc; from assay.engine.run import _init_worker; assert gc.get_freeze_count() == 0; "
            "_init_worker(['f1_score'], {}, {}); print(gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(out) > 1000
