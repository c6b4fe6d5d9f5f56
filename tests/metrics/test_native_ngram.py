"""The compiled n-gram clipping / LCS (``ngram_native``) against its pure-Python twins.

Both paths run here: the twins (``lcs.*_py``) always, the compiled functions when the
extension is built (skipped otherwise), and the metrics themselves once with each path.
Counts are also checked against plain ``Counter`` intersections and the LCS against the
textbook dynamic-programming table, so neither path can drift alone.
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from test_text import lcs_dp  # the textbook LCS table

from assay.metrics.text import lcs, lexical, native

ROOT = Path(__file__).resolve().parents[2]
C = native.load("ngram_native")
needs_c = pytest.mark.skipif(C is None, reason="ngram_native is not built (or ASSAY_NATIVE=0)")


def _counter_clip(h, r, n):
    return sum((Counter(lcs.ngrams(h, n)) & Counter(lcs.ngrams(r, n))).values())


def _expected_counts(h, r, max_n):
    out = []
    for n in range(1, max_n + 1):
        out.append(_counter_clip(h, r, n) if not out or out[-1] else 0)
    return tuple(out)


VOCABS = {
    "ascii": [f"w{i}" for i in range(40)],
    "non_ascii": ["café", "naïve", "straße", "猫", "が", "好き", "😀", "👍🏽", "é", "e\u0301",
                  "", " ", "\x00"],
    "mixed": ["the", "The", "THE", ".", ",", "'s", "n't", "São", "中文", "1,000", "3.5"],
}


def _sequences(seed: int, count: int):
    """Random token pairs: empty, one token, short, repeated, long (several 64-bit words
    for the LCS, more than the stack tables hold), from small and large vocabularies."""
    rng = random.Random(seed)
    lengths = [0, 1, 2, 3, 4, 5, 8, 20, 50, 63, 64, 65, 130, 300, 700]
    for _ in range(count):
        vocab = list(rng.choice(list(VOCABS.values())))
        vocab = vocab[: rng.randint(1, len(vocab))]  # 1 word: everything repeats
        # tokens rebuilt from parts: equal to, but not the same objects as, the vocabulary's
        a = tuple("".join(list(rng.choice(vocab))) for _ in range(rng.choice(lengths)))
        if rng.random() < 0.3 and a:
            b = list(a)
            for _ in range(rng.randint(0, len(b))):
                b[rng.randrange(len(b))] = rng.choice(vocab)
            b = tuple(b)
        else:
            b = tuple(rng.choice(vocab) for _ in range(rng.choice(lengths)))
        yield a, b


@pytest.fixture(params=["python", pytest.param("compiled", marks=needs_c)])
def impl(request):
    if request.param == "python":
        return lcs.lcs_length_py, lcs.clipped_counts_py, lcs.clipped_count_py
    return C.lcs_length, C.clipped_counts, C.clipped_count


def test_counts_and_lcs_match_counter_and_dp(impl):
    lcs_length, clipped_counts, clipped_count = impl
    for a, b in _sequences(1, 400):
        assert clipped_counts(a, b, 4) == _expected_counts(a, b, 4), (a, b)
        for n in (1, 2, 3, 5):
            assert clipped_count(a, b, n) == _counter_clip(a, b, n), (a, b, n)
        if len(a) * len(b) <= 40_000:
            assert lcs_length(a, b) == lcs_dp(a, b), (a, b)


@needs_c
def test_compiled_equals_python_on_many_sequences():
    for a, b in _sequences(2, 3000):
        assert C.clipped_counts(a, b, 4) == lcs.clipped_counts_py(a, b, 4), (a, b)
        assert C.clipped_counts(a, b, 6) == lcs.clipped_counts_py(a, b, 6), (a, b)
        for n in (1, 2, 4, 7):
            assert C.clipped_count(a, b, n) == lcs.clipped_count_py(a, b, n), (a, b, n)
        assert C.lcs_length(a, b) == lcs.lcs_length_py(a, b) == C.lcs_length(b, a), (a, b)


@needs_c
def test_long_texts_many_words():
    rng = random.Random(3)
    vocab = [f"t{i}" for i in range(300)]
    for la, lb in [(1000, 1200), (2500, 40), (129, 4000), (5000, 5000)]:
        a = tuple(rng.choice(vocab) for _ in range(la))
        b = tuple(rng.choice(vocab) for _ in range(lb))
        assert C.lcs_length(a, b) == lcs.lcs_length_py(a, b)
        assert C.clipped_counts(a, b, 4) == lcs.clipped_counts_py(a, b, 4)
    a = tuple(rng.choice(vocab) for _ in range(700))
    assert C.lcs_length(a, a) == 700
    assert C.clipped_counts(a, a, 4) == (700, 699, 698, 697)
    assert C.lcs_length(a[:400], a[150:]) == lcs_dp(a[:400], a[150:]) == 250
    # 20,000 distinct tokens each side: 313 words per step, masks built per token
    a = tuple(f"d{i}" for i in range(20_000))
    b = a[::-1][:10_000] + a[:10_000]
    assert C.lcs_length(a, b) == lcs.lcs_length_py(a, b) == 10_000
    assert C.lcs_length(b, a[:15_000]) == 10_000


class SameHash(str):
    """A str whose hash collides with every other SameHash (== is str's)."""

    def __hash__(self):
        return 7


@needs_c
def test_token_hash_collisions_do_not_merge_tokens():
    rng = random.Random(4)
    for _ in range(300):
        vocab = [SameHash(f"x{i}") for i in range(rng.randint(1, 12))]
        a = tuple(rng.choice(vocab) for _ in range(rng.randint(0, 90)))
        b = tuple(rng.choice(vocab) for _ in range(rng.randint(0, 90)))
        assert C.clipped_counts(a, b, 4) == _expected_counts(a, b, 4)
        assert C.clipped_count(a, b, 3) == _counter_clip(a, b, 3)
        assert C.lcs_length(a, b) == lcs_dp(a, b)
    assert C.clipped_counts((SameHash("a"),), (SameHash("b"),), 2) == (0, 0)


@needs_c
def test_all_hashes_colliding_inside_the_extension():
    """The test hook masks every token and n-gram hash to 0: lookups must still compare."""
    old = C._set_hash_mask(0)
    try:
        for a, b in _sequences(5, 300):
            assert C.clipped_counts(a, b, 5) == lcs.clipped_counts_py(a, b, 5), (a, b)
            assert C.clipped_count(a, b, 2) == lcs.clipped_count_py(a, b, 2), (a, b)
            assert C.lcs_length(a, b) == lcs.lcs_length_py(a, b), (a, b)
    finally:
        C._set_hash_mask(old)
    assert old == 2 ** 64 - 1


class BadEq(str):
    def __hash__(self):
        return 1

    def __eq__(self, other):
        raise RuntimeError("no comparing")


@needs_c
def test_errors_propagate():
    with pytest.raises(TypeError):
        C.lcs_length((["unhashable"],), ("a",))
    with pytest.raises(TypeError):
        C.clipped_counts(("a",), ("a", {}), 4)
    with pytest.raises(RuntimeError, match="no comparing"):
        C.clipped_count((BadEq("a"),), (BadEq("b"),), 1)
    with pytest.raises(ValueError):
        C.clipped_counts(("a",), ("a",), 0)
    with pytest.raises(ValueError):
        C.clipped_count(("a",), ("a",), 0)
    with pytest.raises(TypeError):
        C.lcs_length(("a",))
    # lists and other iterables are accepted as well as tuples
    assert C.clipped_counts(["a", "b"], iter(["a", "b"]), 2) == (2, 1)
    assert C.clipped_count(("a",), ("a",), 100) == 0


def _load_bench(name):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _text_pairs():
    gen = _load_bench("gen_pairs")
    rng = random.Random(7)
    pairs = [gen.pair(rng) for _ in range(300)]
    conf = _load_bench("conformance_azure")
    pairs += [(p["response"], p["ground_truth"]) for p in conf.make_pairs(400, 11)]
    return pairs


METRICS = ("f1_score", "bleu", "gleu", "rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL")


def _values(pairs):
    return [[getattr(lexical, m)(a, b) for m in METRICS] for a, b in pairs]


@pytest.mark.parametrize("path", ["python", pytest.param("compiled", marks=needs_c)])
def test_metric_values_identical_on_generated_texts(path, monkeypatch):
    pairs = _text_pairs()
    # the values the metrics give with the twins, computed the pre-native way
    monkeypatch.setattr(lexical, "lcs_length", lcs.lcs_length_py)
    monkeypatch.setattr(lexical, "clipped_counts", lcs.clipped_counts_py)
    monkeypatch.setattr(lexical, "clipped_count", lcs.clipped_count_py)
    monkeypatch.setattr(lexical, "_f1", lexical._f1_dicts)
    python = _values(pairs)
    # F1 through the clipped count (what runs when it is compiled), here with the twin
    monkeypatch.setattr(lexical, "_f1", lexical._f1_clipped)
    assert _values(pairs) == python
    if path == "compiled":
        monkeypatch.setattr(lexical, "lcs_length", C.lcs_length)
        monkeypatch.setattr(lexical, "clipped_counts", C.clipped_counts)
        monkeypatch.setattr(lexical, "clipped_count", C.clipped_count)
        assert _values(pairs) == python
    # cross-check against the definitions on the metrics' own tokens
    for (a, b), row in zip(pairs[:200], python):
        h, r = lexical.nltk_tokenize(a), lexical.nltk_tokenize(b)
        grams = lambda t: [g for n in range(1, 5) for g in lcs.ngrams(t, n)]  # noqa: E731
        n_all = max(len(grams(h)), len(grams(r)))
        want = sum((Counter(grams(h)) & Counter(grams(r))).values()) / n_all if n_all else 0.0
        assert row[METRICS.index("gleu")] == want
        p, t = lexical.rouge_tokens(a), lexical.rouge_tokens(b)
        if p and t:
            assert row[-1]["rougeL_precision"] == lcs_dp(t, p) / len(p)


ARTICLE_TEXTS = ["", "a", "the", "a an the", "The cat, the hat.", "a a a b", "b a a", "an apple a day",
                 "The THE the", "l’a the", "x\x01 the a", "théâtre the a", "a\tan\nthe", "the. a, an!",
                 "b b b the", "b", "A B", "a b c d e the the"]


@pytest.mark.parametrize("path", ["python", pytest.param("compiled", marks=needs_c)])
def test_f1_through_the_clipped_count_keeps_every_value(path, monkeypatch):
    monkeypatch.setattr(lexical, "clipped_count", C.clipped_count if path == "compiled" else lcs.clipped_count_py)
    rng = random.Random(9)
    texts = ARTICLE_TEXTS + [" ".join(rng.choice(ARTICLE_TEXTS) for _ in range(rng.randint(1, 6)))
                             for _ in range(200)]
    for a in texts:
        for b in texts[:60]:
            assert lexical._f1_clipped(a, b) == lexical._f1_dicts(a, b), (a, b)


def test_metrics_use_the_compiled_functions_when_built():
    assert lcs.NATIVE is (C is not None)
    if C is None:
        assert lcs.lcs_length is lcs.lcs_length_py
    else:
        assert lcs.lcs_length is C.lcs_length
        assert lexical.clipped_counts is C.clipped_counts
        assert lexical.clipped_count is C.clipped_count
        assert lexical._f1 is lexical._f1_clipped


def test_assay_native_0_switches_to_the_python_twins():
    code = ("from assay.metrics.text import lcs, lexical\n"
            "assert not lcs.NATIVE\n"
            "assert lexical.lcs_length is lcs.lcs_length_py\n"
            "assert lexical.clipped_counts is lcs.clipped_counts_py\n"
            "assert lexical.clipped_count is lcs.clipped_count_py\n"
            "assert lexical._f1 is lexical._f1_dicts\n"
            "print(lexical.bleu('the cat sat on the mat', 'the cat sat on a mat'))\n")
    env = dict(os.environ, ASSAY_NATIVE="0", PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == lexical.bleu("the cat sat on the mat", "the cat sat on a mat")
