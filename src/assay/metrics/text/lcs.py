"""Longest common subsequence length and clipped n-gram matches, fast in pure Python.

* :func:`lcs_length_py` is the bit-parallel LCS of Allison & Dix (1986) in the form given by
  Hyyrö (2004): one machine word per 64 tokens of the shorter sequence, handled by
  Python's arbitrary-size ints, so a pair of 50-token texts costs ~50 int operations
  instead of rouge-score's 2,500-cell dynamic-programming table. It returns the same
  length as the table (``rouge_score.rouge_scorer._lcs_table(...)[-1][-1]``).
* :func:`clipped_matches` (:func:`clipped_count_py`) is BLEU's clipped n-gram count / ROUGE-N's intersection size
  ``sum(min(count_h[g], count_r[g]))``, computed with set operations and falling back
  to counting only when both sides repeat a shared n-gram.

The metrics call :func:`lcs_length`, :func:`clipped_counts` and :func:`clipped_count`,
which are the compiled functions of ``ngram_native.c`` when that extension is built (and
``ASSAY_NATIVE`` is not ``0``) and their pure-Python twins here otherwise:
:func:`lcs_length_py`, :func:`clipped_counts_py`, :func:`clipped_count_py`. Both give the
same integers (``tests/metrics/test_native_ngram.py``).
"""

from __future__ import annotations

from collections import _count_elements  # the C loop behind Counter.update
from collections.abc import Sequence

from assay.metrics.text import native

__all__ = ["lcs_length", "clipped_counts", "clipped_count", "NATIVE",
           "lcs_length_py", "clipped_counts_py", "clipped_count_py",
           "clipped_matches", "clipped_ngram_matches", "counted_matches", "counts", "ngrams"]


def lcs_length_py(a: Sequence, b: Sequence) -> int:
    """Length of a longest common subsequence of ``a`` and ``b`` (tokens compared by ==)."""
    if not a or not b:
        return 0
    common = set(a).intersection(b)
    if not common:
        return 0
    # tokens that occur in only one sequence cannot be in the LCS
    keep = common.__contains__
    a = list(filter(keep, a))
    b = list(filter(keep, b))
    # bits index the shorter sequence; iterate over the other one
    if len(a) > len(b):
        a, b = b, a
    masks: dict = {}
    get = masks.get
    bit = 1
    for tok in a:
        masks[tok] = get(tok, 0) | bit
        bit <<= 1
    v = bit - 1
    for tok in b:
        u = v & masks[tok]
        v = (v + u) | (v - u)
    # the zero bits among the low len(a) bits are the LCS
    return len(a) - (v & (bit - 1)).bit_count()


def ngrams(tokens: Sequence, n: int) -> list:
    """The n-grams of ``tokens`` as tuples (tokens themselves for n == 1)."""
    if n == 1:
        return list(tokens)
    return list(_grams(tokens, n))


def _grams(t: Sequence, n: int):
    if n == 2:
        return zip(t, t[1:])
    if n == 3:
        return zip(t, t[1:], t[2:])
    if n == 4:
        return zip(t, t[1:], t[2:], t[3:])
    return zip(*[t[i:] for i in range(n)])


def clipped_ngram_matches(h: Sequence, r: Sequence, n: int) -> int:
    """Clipped matches of the n-grams (n >= 2) of token sequences ``h`` and ``r``.

    The n-grams are never stored: a set of the hypothesis' n-grams is intersected with
    the reference's as they are generated; counts are taken only when both sides repeat
    an n-gram.
    """
    nh = len(h) - n + 1
    nr = len(r) - n + 1
    if nh <= 0 or nr <= 0:
        return 0
    hs = set(_grams(h, n))
    common = hs.intersection(_grams(r, n))
    if not common:
        return 0
    if len(hs) == nh or len(set(_grams(r, n))) == nr:
        return len(common)
    return counted_matches(list(_grams(h, n)), list(_grams(r, n)))


def clipped_matches(h: Sequence, r: Sequence) -> int:
    """``sum(min(Counter(h)[g], Counter(r)[g]) for g in set(h) & set(r))``."""
    if not h or not r:
        return 0
    hs = set(h)
    common = hs.intersection(r)
    if not common:
        return 0
    # min(count_h, count_r) is 1 for every shared item when either side has no repeats
    if len(hs) == len(h) or len(set(r)) == len(r):
        return len(common)
    return counted_matches(h, r)


def counted_matches(h: Sequence, r: Sequence) -> int:
    """Same as :func:`clipped_matches`, for inputs that usually repeat items (unigrams)."""
    if not h or not r:
        return 0
    ch: dict = {}
    _count_elements(ch, h)
    cr: dict = {}
    _count_elements(cr, r)
    total = 0
    for g in ch.keys() & cr.keys():
        x = ch[g]
        y = cr[g]
        total += x if x < y else y
    return total


def clipped_count_py(h: Sequence, r: Sequence, n: int) -> int:
    """Clipped matches of the n-grams of token sequences ``h`` and ``r`` (any n >= 1)."""
    if n == 1:
        return clipped_matches(h, r)
    return clipped_ngram_matches(h, r, n)


def clipped_counts_py(h: Sequence, r: Sequence, max_n: int) -> tuple[int, ...]:
    """:func:`clipped_count_py` for n = 1..max_n, as a tuple; from the first n with no
    match on the rest are 0 without being counted (no n-gram match, no longer one)."""
    num = counted_matches(h, r)
    out = [num]
    for n in range(2, max_n + 1):
        if num:
            num = clipped_ngram_matches(h, r, n)
        out.append(num)
    return tuple(out)


def counts(items: Sequence) -> dict:
    """``dict(Counter(items))`` without Counter's Python-level overhead."""
    d: dict = {}
    _count_elements(d, items)
    return d


_native = native.load("ngram_native")
#: True when the metrics use the compiled functions.
NATIVE = _native is not None
if _native is not None:
    lcs_length = _native.lcs_length
    clipped_counts = _native.clipped_counts
    clipped_count = _native.clipped_count
else:
    lcs_length = lcs_length_py
    clipped_counts = clipped_counts_py
    clipped_count = clipped_count_py
