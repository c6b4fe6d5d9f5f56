"""The embedded groundedness scorer: how much of a response the context supports, word by word.

No model and no network: a response's *terms* — its content words, numbers and names, after
dropping function words — are looked up in the retrieved context. The support of a response is
the share of its terms that the context contains. The query is not read: a response that
restates the question is held to the context like any other claim (so the right answer paired
with another question's context loses its support: the context-swap control).

Terms are matched after case folding, folding of accents, Porter stemming (nltk's stemmer, no
data files) and normalising numbers (``1,000`` = ``1000``; ``6.213`` stays one term); a term
whose stem occurs anywhere in the context counts as found. The response is also split into
sentences and each sentence gets its own support, so that the unsupported ones can be listed
(the sentence-level groundedness variant).

What it cannot do: read meaning. A response that recombines words of the context into a false
statement ("Lincoln was born in 1865" against a context giving 1809 and 1865) is scored as
supported; an answer that gives another fact of the context than the one asked (the context
names the singer and her nationality, the question asks the nationality, the answer gives the
name) is scored fully supported: on such pairs written for it
(``calibration/groundedness_context_words*.jsonl``; the held-out 30 are the ``context_words``
control of ``assay judge check``) this share's AUC is 0.50, chance (the support scorer v2 reads the
question's type on top of it: :mod:`assay.judges.typed`); a correct paraphrase in other words is
scored as unsupported;
negation is ignored.
Its measured figures (HaluEval QA, with the context-swap and length-matched controls) are in
``benchmarks/RESULTS.md`` and in every score's properties.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["SUPPORT_VERSION", "STOPWORDS", "Support", "SentenceSupport", "split_sentences", "support", "terms"]

SUPPORT_VERSION = "1"

# English function words (closed classes: articles, pronouns, auxiliaries, prepositions,
# conjunctions, quantifiers, a few discourse words). Written for assay.
STOPWORDS = frozenset("""
a an the this that these those there here
i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves one ones someone something
anyone anything everyone everything nobody nothing somebody anybody everybody
who whom whose which what whatever whoever whichever when where why how
am is are was were be been being have has had having do does did doing done
will would shall should can could may might must ought
not no nor yes yeah ok okay
and or but if then else than so as because while although though unless until since whether
of at by for with about against between into through during before after above below to from up
down in out on off over under again further once upon onto within without along across among around
behind beyond near toward towards via per
all any both each few more most other some such only own same too very just also even still yet
ever never always often sometimes already
s t d ll m re ve y
""".split())

_WORD = re.compile(r"\d+(?:[.,]\d+)*[^\W_]*|[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])[\"'”’)\]]*\s+|\n+")


def split_sentences(text: str) -> list[str]:
    """Sentences of a response: split after ``.``/``!``/``?`` (and CJK stops) followed by space,
    and at line breaks; pieces without a letter or digit are dropped."""
    out = []
    for piece in _SENTENCE_END.split(text or ""):
        piece = piece.strip()
        if piece and re.search(r"\w", piece):
            out.append(piece)
    return out


@lru_cache(maxsize=1)
def _stemmer():  # type: ignore[no-untyped-def]
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


def _fold(word: str) -> str:
    word = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in word if not unicodedata.combining(ch)).replace("’", "'")


@lru_cache(maxsize=65536)
def _key(word: str) -> str:
    """The form a word is matched by: folded, possessive dropped, stemmed; numbers without
    thousands separators."""
    if word[0].isdigit():
        return re.sub(r",(?=\d{3}(?!\d))", "", word).casefold()
    w = _fold(word)
    if w.endswith("'s"):
        w = w[:-2]
    return _stemmer().stem(w) if w.isalpha() else w


@dataclass(frozen=True)
class Term:
    text: str        # as written
    key: str         # as matched


def terms(text: str) -> list[Term]:
    """The content terms of ``text``: its words that are not function words, and its numbers."""
    out: list[Term] = []
    for m in _WORD.finditer(text or ""):
        w = m.group(0)
        folded = _fold(w)
        if folded in STOPWORDS or (folded.endswith("'s") and folded[:-2] in STOPWORDS):
            continue
        out.append(Term(w, _key(w)))
    return out


def _keys(texts: Iterable[str]) -> set[str]:
    keys: set[str] = set()
    for t in texts:
        for m in _WORD.finditer(t or ""):
            keys.add(_key(m.group(0)))
    return keys


@dataclass
class SentenceSupport:
    sentence: str
    share: float | None          # None: no term to check
    missing: list[str] = field(default_factory=list)


@dataclass
class Support:
    """What :func:`support` found. ``share``: the share of the response's terms found in the
    context; None when the response has no term to check (only function words: "No.")."""

    share: float | None
    n_terms: int
    found: list[str]
    missing: list[str]
    sentences: list[SentenceSupport]


def _share(ts: Sequence[Term], context: set[str]) -> tuple[float | None, list[str], list[str]]:
    if not ts:
        return None, [], []
    found = [t.text for t in ts if t.key in context]
    missing = [t.text for t in ts if t.key not in context]
    return len(found) / len(ts), found, missing


def support(response: str, contexts: Sequence[str]) -> Support:
    """The support of ``response`` by ``contexts`` (see the module docstring)."""
    ctx = _keys(contexts)
    per: list[SentenceSupport] = []
    every: list[Term] = []
    for sentence in split_sentences(response) or [response or ""]:
        ts = terms(sentence)
        every += ts
        share, _, missing = _share(ts, ctx)
        per.append(SentenceSupport(sentence, share, missing))
    share, found, missing = _share(every, ctx)
    return Support(share, len(every), found, missing, per)
