"""Word tokens exactly as azure-ai-evaluation's ``nltk_tokenize`` makes them, offline and fast.

azure-ai-evaluation (1.x, ``_common/utils.py``) tokenizes BLEU, GLEU and METEOR input with::

    if not text.isascii():
        tokens = NISTTokenizer().international_tokenize(text)
    else:
        tokens = nltk.word_tokenize(text)

and both branches need NLTK data downloaded at run time (``punkt_tab`` and
``perluniprops``). This module gives the same tokens with no data files:

* :func:`word_tokenize` — ``nltk.word_tokenize`` for ASCII text: English Punkt sentence
  split (:mod:`assay.metrics.text.punkt`) then NLTK's improved Treebank tokenizer
  (``NLTKWordTokenizer``, NLTK 3.9/3.10 rules) per sentence. Three paths, all giving
  NLTK's tokens:

  - text of words, spaces, ``, . ? ! ; :`` and in-word apostrophes (most prose): one
    pass over the whole text -- Punkt decides which periods end a sentence, those are
    split off, the other marks padded, clitics ("n't", "'s", ...) split;
  - otherwise per sentence, NLTK's rules in NLTK's order, each skipped when the
    characters it needs are absent, end-anchored rules applied to the tail only, and
    rules rewritten to start with a literal character where the match is the same;
  - a text of words and spaces only is just split.

  :func:`word_tokenize` runs the compiled twin of the whole-text path
  (``tokenize_native.c``, built by setup.py where a C compiler is available), which also takes
  ellipses, "1,000" and contractions, and hands every text it cannot decide exactly to
  :func:`word_tokenize_python`
  (the three paths above); ``ASSAY_NATIVE=0`` switches it off.
* :func:`international_tokenize` — ``NISTTokenizer.international_tokenize`` with the
  ``perluniprops`` character classes compiled into :mod:`assay.metrics.text.perluniprops`.
* :func:`nltk_tokenize` — the azure dispatch above, with a small per-process LRU so a
  string tokenized for BLEU is not tokenized again for GLEU/METEOR in the same row.

All of it is checked token-for-token against NLTK in tests/metrics/test_text.py.
"""

from __future__ import annotations

import re
from functools import lru_cache

from assay.metrics.text import native
from assay.metrics.text.punkt import native_params, period_breaks, sentence_spans, split_sentences

__all__ = ["word_tokenize", "word_tokenize_python", "treebank_tokenize", "international_tokenize", "nltk_tokenize"]

# ---------------------------------------------------------------------------------------
# Treebank (NLTKWordTokenizer) rules. \s of the `regex` engine NLTK uses, on ASCII text.
_S = r"[ \t\n\r\f\v]"

_R_STARTQ_1 = re.compile("([«“‘„]|[`]+)")
# The rules below are NLTK's, rewritten to start with a literal character (so the regex
# engine can skip ahead to it) where the match is otherwise the same; the comments give
# NLTK's form. Replacements that only pad single characters use str.replace.
#   ([ \(\[{<])(\"|\'{2})  ->  \1 ``   (one pass: a converted quote must not enable the next)
_R_STARTQ_4 = re.compile(r"\"(?<=[ \(\[{<]\")|''(?<=[ \(\[{<]'')")
#   (?i)(?<!\w)(\')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)  ->  \1 (a space after the quote)
_R_STARTQ_5 = re.compile(r"(?i)'(?<!\w')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)")
#   ([^\.])(\.)([\]\)}>"\'»”’ ]*+)\s*$  ->  \1 \2 \3   (the final period; NLTK 3.9+)
_R_FINAL_1 = re.compile(rf"([^\.])\.([\]\)}}>\"'»”’ ]*){_S}*$")
#   ([^\.])(\.)([\]\)}>"\']*)\s*$  ->  \1 \2\3
_R_FINAL_2 = re.compile(rf"([^\.])\.([\]\)}}>\"']*){_S}*$")
_R_COMMA = re.compile(r"([:,])([^\d])")
# ... which, when no two of , : are adjacent, is the same as padding each one that is
# followed by a non-digit:
_R_COMMA_ONLY = re.compile(r",(?=[^\d])")
_R_COLON_ONLY = re.compile(r":(?=[^\d])")
_R_COMMA_END = re.compile(r"([:,])$")
_R_DOTS = re.compile(r"\.{2,}")
#   ([^'])'   ->  \1 '
_R_QUOTE_SP = re.compile(r"' (?<=[^']' )")
_R_SPACES = re.compile(rf"{_S}+")
# Clitics: NLTK's rules insert a space before the clitic, i.e.
#   ([^' ])('[sS]|'[mM]|'[dD]|')   ->  \1 \2
#   ([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T)   ->  \1 \2
# (the consumed trailing space is put back), so they are written as "insert a space":
_R_CLITIC_1 = re.compile(r"'(?<=[^' ]')(?=[sSmMdD]? )")
_R_CLITIC_2 = re.compile(r"'(?:(?<=[^' ]')(?:ll|LL|re|RE|ve|VE)|(?<=[^' ]n')t|(?<=[^' ]N')T)(?= )")


def _split_clitics_2(text: str) -> str:
    """The second clitic rule: a space before 'll 're 've (after the quote) and n't."""
    cuts = [m.start() - 1 if text[m.start() + 1] in "tT" else m.start() for m in _R_CLITIC_2.finditer(text)]
    if not cuts:
        return text
    parts = []
    last = 0
    for i in cuts:
        parts.append(text[last:i])
        last = i
    parts.append(text[last:])
    return " ".join(parts)
# MacIntyre contractions (NLTK compiles these with the standard `re` module), each with
# the lower-cased substring that must be present for it to match.
_R_CONTR = [(hint, re.compile(p)) for hint, p in (
    ("cannot", r"(?i)\b(can)(?#X)(not)\b"), ("d'ye", r"(?i)\b(d)(?#X)('ye)\b"),
    ("gimme", r"(?i)\b(gim)(?#X)(me)\b"), ("gonna", r"(?i)\b(gon)(?#X)(na)\b"),
    ("gotta", r"(?i)\b(got)(?#X)(ta)\b"), ("lemme", r"(?i)\b(lem)(?#X)(me)\b"),
    ("more'n", r"(?i)\b(more)(?#X)('n)\b"), ("wanna", r"(?i)\b(wan)(?#X)(na)(?=\s)"),
    ("'tis", r"(?i) ('t)(?#X)(is)\b"), ("'twas", r"(?i) ('t)(?#X)(was)\b"))]
_CONTR_HINTS_DOUBLE = ("cannot", "gimme", "gonna", "gotta", "lemme", "wanna")
_CONTR_HINTS_QUOTE = ("d'ye", "more'n", "'tis", "'twas")

# Characters that no rule looks at: letters, digits and the space.
_PLAIN = str.maketrans("", "", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ")
_PLAIN_BYTES = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "   # the same, for ASCII text as bytes
_PAD_A = frozenset(";@#$%&")
_PAD_B = frozenset("*[](){}<>")
_OTHER_WS = frozenset("\t\n\r\x0b\x0c")
# The replace-and-split path handles sentences whose other characters are only these.
_SIMPLE = frozenset(",.?!;:")
_BAD_COMMA = re.compile(r",[\d,:]")
_BAD_COLON = re.compile(r":[\d,:]")


def _bad_commas(text: str, rest: str) -> bool:
    """A comma or colon followed by a digit, comma or colon (the fast paths exclude these)."""
    return bool(("," in rest and _BAD_COMMA.search(text)) or (":" in rest and _BAD_COLON.search(text)))


def _has_contraction(text: str) -> bool:
    """Could one of the MacIntyre contraction rules match? (a cheap superset test)"""
    low = text.lower()
    if "nn" in low or "mm" in low or "tt" in low:
        for h in _CONTR_HINTS_DOUBLE:
            if h in low:
                return True
    if "'" in low:
        for h in _CONTR_HINTS_QUOTE:
            if h in low:
                return True
    return False


def _final_period(text: str, rx: re.Pattern, padded: bool) -> str:
    """Apply an end-anchored final-period rule; only the last "." can match it."""
    i = text.rfind(".")
    if i < 1:
        return text
    m = rx.match(text, i - 1)
    if m is None:
        return text
    if padded:
        return f"{text[:i - 1]}{m.group(1)} . {m.group(2)} {text[m.end():]}"
    return f"{text[:i - 1]}{m.group(1)} .{m.group(2)} {text[m.end():]}"


def _treebank_rules(text: str, rest: str) -> list[str]:  # noqa: C901
    """NLTKWordTokenizer.tokenize, rule by rule; ``rest`` = the text's special characters.

    A rule is skipped when ``rest`` shows it cannot match (rules only ever add spaces,
    backquotes and quotes, which the guards allow for).
    """
    quote = '"' in rest
    apos = "'" in rest
    if not text.isascii():
        text = _R_STARTQ_1.sub(r" \1 ", text)
    elif "`" in rest:
        text = _R_STARTQ_1.sub(r" \1 ", text)
    if quote:
        if text[0] == '"':
            text = "``" + text[1:]
    if "`" in text:
        text = text.replace("``", " `` ")
    if quote or "''" in text:
        text = _R_STARTQ_4.sub(" `` ", text)
    if apos:
        text = _R_STARTQ_5.sub("' ", text)
    # -- punctuation
    if "." in rest:
        text = _final_period(text, _R_FINAL_1, True)
    if "," in rest or ":" in rest:
        if ",," in text or ",:" in text or ":," in text or "::" in text:
            text = _R_COMMA.sub(r" \1 \2", text)
        else:
            if "," in rest:
                text = _R_COMMA_ONLY.sub(" , ", text)
            if ":" in rest:
                text = _R_COLON_ONLY.sub(" : ", text)
        if text.endswith((",", ":", ",\n", ":\n")):
            text = _R_COMMA_END.sub(r" \1 ", text)
    if ".." in text:
        text = _R_DOTS.sub(r" \g<0> ", text)
    if not _PAD_A.isdisjoint(rest):
        for c in _PAD_A.intersection(rest):
            text = text.replace(c, f" {c} ")
    if not text.isascii():
        text = re.sub("[\u2012-\u2015]", r" \g<0> ", text)
    if "." in rest:
        text = _final_period(text, _R_FINAL_2, False)
    if "?" in rest:
        text = text.replace("?", " ? ")
    if "!" in rest:
        text = text.replace("!", " ! ")
    if apos or quote:
        text = _R_QUOTE_SP.sub(" ' ", text)
    if not _PAD_B.isdisjoint(rest):
        for c in _PAD_B.intersection(rest):
            text = text.replace(c, f" {c} ")
    if "--" in text:
        text = text.replace("--", " -- ")
    # -- ending quotes
    text = " " + text + " "
    if not text.isascii():
        text = re.sub("([»”’])", r" \1 ", text)
    if quote or apos:
        text = text.replace("''", " '' ")
    if quote:
        text = text.replace('"', " '' ")
    if (quote or apos) and not _OTHER_WS.isdisjoint(rest):
        text = _R_SPACES.sub(" ", text)
    if quote or apos:
        text = _R_CLITIC_1.sub(" '", text)
        text = _split_clitics_2(text)
    if _has_contraction(text):
        low = text.lower()
        for hint, rx in _R_CONTR:
            if hint in low:
                text = rx.sub(r" \1 \2 ", text)
    return text.split()


def treebank_tokenize(text: str) -> list[str]:
    """``NLTKWordTokenizer().tokenize(text)`` for one ASCII sentence."""
    rest = text.translate(_PLAIN)
    if not rest:
        # letters, digits and spaces only: the contractions are the only rule left
        if _has_contraction(text):
            return _treebank_rules(text, rest)
        return text.split()
    if (_SIMPLE.issuperset(rest) and ".." not in text and not _has_contraction(text)
            and not _bad_commas(text, rest)):
        # Only , . ? ! ; : besides words: each of , ? ! ; : becomes its own token
        # (commas/colons before a digit or another comma excluded above), and a
        # sentence-final period is split off.
        for c in _SIMPLE.intersection(rest):
            if c != ".":
                text = text.replace(c, f" {c} ")
        toks = text.split()
        last = toks[-1]
        if len(last) > 1 and last[-1] == "." and last[-2] != ".":
            toks[-1] = last[:-1]
            toks.append(".")
        return toks
    return _treebank_rules(text, rest)


# Texts made of words, spaces, the marks NLTK always pads (; @ # $ % & * ? ! brackets), the
# ones it leaves alone (- / \ | ~ ^ = + _), , : . " and apostrophes inside words take a
# whole-text path: sentence-final periods are found with Punkt and split off, double
# quotes become `` (at a sentence start or after a space or opening bracket) or '', the
# other marks are padded and clitics split -- the tokens NLTK makes sentence by sentence.
# (Backquotes, other apostrophes, "..", ",digit" and control characters take the
# per-sentence path.)
_FAST = frozenset(",.:'\"" "?!;@#$%&*[](){}<>" "-/\\|~^=+_" "\t\n\r\x0b\x0c")
_FAST_PAD = (",", ":", "?", "!", ";", "@", "#", "$", "%", "&", "*", "[", "]", "(", ")", "{", "}", "<", ">")
_CLOSERS = ' ])}>"'  # what may follow a sentence-final period (NLTK's final-period rule)
_OPENERS = " ([{<"  # a double quote after one of these opens a quotation
_REALIGNED = frozenset(")]}")  # closers Punkt may move into the previous sentence
_BAD_QUOTE = re.compile(r"'(?<![A-Za-z0-9]')|'(?![A-Za-z0-9])")


def _edit(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Replace text[i:j] by s for each (i, j, s) (sorted, non-overlapping)."""
    parts = []
    last = 0
    for i, j, rep in edits:
        parts.append(text[last:i])
        parts.append(rep)
        last = j
    parts.append(text[last:])
    return "".join(parts)


def _fast_tokens(text: str, rest: str) -> list[str]:  # noqa: C901
    if '"' in rest or (not _OTHER_WS.isdisjoint(rest) and not _REALIGNED.isdisjoint(rest)):
        # exact sentence spans (with Punkt's boundary realignment, which can move a closing
        # quote or bracket behind a newline into the sentence before)
        spans = sentence_spans(text)
        starts = {s for s, _ in spans}
        # a double quote opens (``) at a sentence start, after a space or an opening
        # bracket, or right after a sentence-initial one (NLTK pads that `` first);
        # any other closes ('')
        opening = set()
        edits = []
        i = text.find('"')
        while i >= 0:
            if i in starts or (i > 0 and (text[i - 1] in _OPENERS or (i - 1 in starts and text[i - 1] == '"'))):
                opening.add(i)
                edits.append((i, i + 1, " `` "))
            else:
                edits.append((i, i + 1, " '' "))
            i = text.find('"', i + 1)
        for s, e in spans:
            # the final period rule looks past closing brackets and closing quotes
            while e > s and text[e - 1] in _CLOSERS and (e - 1) not in opening:
                e -= 1
            if e - s >= 2 and text[e - 1] == ".":
                edits.append((e - 1, e - 1, " "))
        edits.sort()
        text = _edit(text, edits)
    elif "." in rest:
        cuts = period_breaks(text)
        end = text.rstrip(" \t\n\r\x0b\x0c").rstrip(_CLOSERS)
        if end[-1:] == ".":
            cuts.append(len(end) - 1)
        if cuts:
            text = _edit(text, [(i, i, " ") for i in cuts])
    for c in _FAST_PAD:
        if c in rest:
            text = text.replace(c, f" {c} ")
    if "--" in text:
        text = text.replace("--", " -- ")
    if "'" in rest:
        # the clitic rules need a plain space after the clitic (NLTK normalizes first)
        text = " " + (" ".join(text.split()) if not _OTHER_WS.isdisjoint(rest) else text) + " "
        text = _R_CLITIC_1.sub(" '", text)
        text = _split_clitics_2(text)
    return text.split()


def word_tokenize_python(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` (English) for ASCII text: the pure-Python path."""
    rest = text.encode().translate(None, _PLAIN_BYTES).decode()
    if not rest:
        # words and spaces only: one sentence, and only the contractions can apply
        if _has_contraction(text):
            return treebank_tokenize(text.rstrip())
        return text.split()
    if (_FAST.issuperset(rest) and ".." not in text and not _has_contraction(text)
            and not _bad_commas(text, rest) and not ("'" in rest and _BAD_QUOTE.search(text))):
        return _fast_tokens(text, rest)
    if "." not in rest and "?" not in rest and "!" not in rest:
        sentences = [text[: len(text.rstrip())]] if text.strip() else []
    else:
        sentences = split_sentences(text)
    if len(sentences) == 1:
        return treebank_tokenize(sentences[0])
    out: list[str] = []
    for s in sentences:
        out += treebank_tokenize(s)
    return out


# The compiled twin of the whole-text path (tokenize_native.c): the tokens, or None where it
# leaves the text to the Python path. Punkt's parameters are handed over when a first period
# needs deciding.
_native = native.load("tokenize_native")
if _native is not None:
    _native.configure(native_params)
    _native_tokenize = _native.tokenize

    def word_tokenize(text: str) -> list[str]:
        """``nltk.word_tokenize(text)`` (English) for ASCII text."""
        toks = _native_tokenize(text)
        return word_tokenize_python(text) if toks is None else toks
else:
    word_tokenize = word_tokenize_python


# ---------------------------------------------------------------------------------------
# NIST international tokenization (non-ASCII text).
_nist_rules: list[tuple[re.Pattern, str]] | None = None


def _xml_unescape(text: str, entities: dict[str, str]) -> str:
    """``xml.sax.saxutils.unescape(text, entities)``, without importing ``xml.sax`` (which loads
    ``urllib.request`` and ``http.client`` on the start of every ``assay eval``): ``&lt;``, ``&gt;``,
    then each entity in order, ``&amp;`` last."""
    text = text.replace("&lt;", "<").replace("&gt;", ">")
    for key, value in entities.items():
        text = text.replace(key, value)
    return text.replace("&amp;", "&")


_XML_ENTITIES = {"&apos;": "'", "&quot;": '"', "&#124;": "|", "&#91;": "[", "&#93;": "]"}


def _nist() -> list[tuple[re.Pattern, str]]:
    global _nist_rules
    if _nist_rules is None:
        from assay.metrics.text.perluniprops import NUMBER, PUNCTUATION, SYMBOL, char_class

        _nist_rules = [
            (re.compile(r"([\x00-\x7f]+)"), r" \1 "),
            (re.compile(f"([{char_class(NUMBER)}])([{char_class(PUNCTUATION)}])"), "\\1 \\2 "),
            (re.compile(f"([{char_class(PUNCTUATION)}])([{char_class(NUMBER)}])"), " \\1 \\2"),
            (re.compile(f"([{char_class(SYMBOL)}])"), " \\1 "),
        ]
    return _nist_rules


def international_tokenize(text: str) -> list[str]:
    """``NISTTokenizer().international_tokenize(text)`` (lowercase=False)."""
    text = text.replace("<skipped>", "").replace("\u2028", " ")
    text = _xml_unescape(text, _XML_ENTITIES)
    for rx, repl in _nist():
        text = rx.sub(repl, text)
    return text.split()


@lru_cache(maxsize=64)
def _cached(text: str) -> tuple[str, ...]:
    if text.isascii():
        return tuple(word_tokenize(text))
    return tuple(international_tokenize(text))


def nltk_tokenize(text: str) -> tuple[str, ...]:
    """azure-ai-evaluation's tokenization of BLEU/GLEU/METEOR input (cached)."""
    return _cached(text)
