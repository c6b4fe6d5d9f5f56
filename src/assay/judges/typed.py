"""What a question asks for, and whether an answer gives it: the question check of the support scorer.

The support share (:mod:`assay.judges.support`) cannot see an answer that is made of the context's
own words but answers another question (the question asks the singer's nationality, the answer
gives her name). This module reads the question's *type* from its wording — who (a name), where (a
place), when (a date or time), how many / how much / how long / how far / … (a number, with the
dimension its unit must have), which nationality / language / colour (a word of that kind) — and
checks the answer's *new* terms (those the question does not already contain) against it:

* **mismatch**: the answer gives nothing of the asked kind while the context has something of
  that kind (a "when" answered without a date or time; a weight answered in inches; "how many
  players" answered with a count of people; an answer that only repeats the question's words);
* **displaced**: the answer gives a thing of the asked kind, but another thing of that kind in the
  context sits nearer the question's words (the opening time where the closing time was asked).

Questions whose type is not recognised (most "what …" / "which …" questions) and yes/no questions
are not checked. No model, no network: word lists and positions only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from assay.judges.support import Support, Term, split_sentences, support, terms

__all__ = ["QuestionCheck", "TypedSupport", "check_answer", "question_type", "typed_support"]

MONTHS = frozenset("january february march april may june july august september october november december "
                   "jan feb mar apr jun jul aug sep sept oct nov dec".split())
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays "
                     "thursdays fridays saturdays sundays weekday weekdays weekend weekends".split())
TIME_WORDS = frozenset("am pm noon midnight morning evening night afternoon dawn dusk today yesterday tomorrow "
                       "century centuries decade decades spring summer autumn fall winter daily weekly monthly "
                       "annually yearly ago bc ad".split())
NUMBER_WORDS = frozenset("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                         "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
                         "eighty ninety hundred thousand million billion trillion dozen dozens half once twice "
                         "thrice first second third fourth fifth several few".split())
UNITS: dict[str, frozenset[str]] = {
    "length": frozenset("metre metres meter meters m km kilometre kilometres kilometer kilometers mile miles "
                        "foot feet ft inch inches cm centimetres centimeters mm millimetres yard yards".split()),
    "mass": frozenset("gram grams g kg kilogram kilograms kilo kilos tonne tonnes ton tons lb lbs ounce ounces "
                      "pound pounds".split()),
    "duration": frozenset("second seconds minute minutes min mins hour hours hr hrs day days week weeks month "
                          "months year years decade decades century centuries".split()),
    "money": frozenset("euro euros dollar dollars usd eur cent cents pound pounds yen franc francs krona kronor "
                       "crown crowns rupee rupees $ € £".split()),
    "temperature": frozenset("degree degrees celsius fahrenheit kelvin °c °f".split()),
    "volume": frozenset("litre litres liter liters l ml millilitres gallon gallons cubic".split()),
    "power": frozenset("horsepower hp watt watts kw kilowatt kilowatts".split()),
    "data": frozenset("gb mb kb tb gigabyte gigabytes megabyte megabytes byte bytes".split()),
    "percent": frozenset("percent per cent %".split()),
}
COLOURS = frozenset("red green blue yellow white black grey gray brown orange purple pink violet gold golden "
                    "silver beige turquoise crimson scarlet navy maroon".split())
NATIONALITY_ENDINGS = ("an", "ian", "ese", "ish", "ic", "ch")
NATIONALITY_WORDS = frozenset("thai swiss greek french dutch czech iraqi israeli pakistani bangladeshi saudi "
                              "kuwaiti yemeni omani qatari nepali somali hindi urdu swahili latin basque "
                              "welsh irish scottish".split())

# (pattern over the folded question, type, dimension of the unit where the type is a quantity)
_RULES: tuple[tuple[str, str, str | None], ...] = (
    (r"\bwhat nationality\b|\bwhich nationality\b|\bof what nationality\b", "nationality", None),
    (r"\b(?:what|which) language\b", "language", None),
    (r"\b(?:what|which) colou?r\b", "colour", None),
    (r"\b(?:what|which) year\b|\bwhat date\b|\bwhat time\b|\b(?:what|which) day\b|\b(?:what|which) month\b",
     "time", None),
    (r"\bhow far apart\b", "quantity", "length|duration"),
    (r"\bhow (?:far|high|tall|deep|wide)\b", "quantity", "length"),
    (r"\bhow (?:heavy)\b|\bhow much (?:\w+ ){0,4}weigh", "quantity", "mass"),
    (r"\bhow much (?:\w+ ){0,5}(?:cost|pay|charge|price)|\bhow much is (?:a|an|the)\b (?:\w+ ){0,3}"
     r"(?:ticket|fee|fare|pass)\b", "quantity", "money"),
    (r"\bhow much (?:\w+ ){0,5}hold", "quantity", "volume"),
    (r"\bhow old\b", "quantity", "duration"),
    (r"\bhow long\b", "quantity", "length|duration"),
    (r"\bhow many\b", "count", None),
    (r"\bhow much\b|\bhow often\b|\bwhat percentage\b", "quantity", None),
    (r"^\s*(?:\w+ ){0,2}when\b|\bwhen (?:did|does|do|is|was|were|will|are)\b", "time", None),
    (r"^\s*(?:\w+ ){0,2}where\b|\bwhere (?:did|does|do|is|was|were|will|are)\b", "place", None),
    (r"^\s*(?:\w+ ){0,2}(?:who|whom)\b", "person", None),
)
_YES_NO = re.compile(r"^\s*(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should)\b")
_AGENT = frozenset({"by"})
_LOCATIVE = frozenset("in at on near above below by from into inside outside beside behind under over "
                      "across along".split())
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)*%?|[$€£%°]|[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)


@dataclass(frozen=True)
class Asked:
    kind: str                 # person, place, time, quantity, count, nationality, language, colour, "" (unknown)
    dimension: str | None = None
    counted: str | None = None  # the key of the noun after "how many"


def question_type(question: str) -> Asked:
    """What ``question`` asks for (see the module docstring); kind "" when not recognised or yes/no."""
    q = " ".join(question.casefold().split())
    if _YES_NO.match(q) or " or " in q:
        return Asked("")
    for pattern, kind, dim in _RULES:
        m = re.search(pattern, q)
        if not m:
            continue
        counted = None
        if kind == "count":
            rest = _seq(q[m.end():]).toks
            counted = rest[0].key if rest else None
        return Asked(kind, dim, counted)
    return Asked("")


def _is_number(t: Term) -> bool:
    return t.text[0].isdigit() or t.text.casefold() in NUMBER_WORDS


def _is_time(t: Term, nxt: Term | None) -> bool:
    w = t.text.casefold()
    if w in MONTHS or w in WEEKDAYS or w in TIME_WORDS or re.fullmatch(r"\d{1,2}:\d\d", w):
        return True
    if re.fullmatch(r"1\d{3}|20\d\d|\d{3}0s", w):
        return True
    if _is_number(t) and nxt is not None and nxt.text.casefold() in ("am", "pm"):
        return True
    return _is_number(t) and nxt is not None and _unit_dimension(nxt) == "duration"


def _unit_dimension(t: Term | None) -> str | None:
    if t is None:
        return None
    w = t.text.casefold()
    for dim, words in UNITS.items():
        if w in words:
            return dim
    return None


def _capital(t: Term) -> bool:
    w = t.text.casefold()
    return t.text[0].isupper() and w not in MONTHS and w not in WEEKDAYS


def _nationality(t: Term) -> bool:
    w = t.text.casefold()
    return t.text[0].isupper() and (w in NATIONALITY_WORDS or w.endswith(NATIONALITY_ENDINGS))


@dataclass
class _Seq:
    """The tokens of a text (content terms and the function words before each), for position tests."""

    toks: list[Term]
    prev_word: list[str]
    positions: dict[str, list[int]] = field(default_factory=dict)


def _seq(text: str) -> _Seq:
    toks: list[Term] = []
    prev: list[str] = []
    last = ""
    for m in _TOKEN.finditer(text or ""):
        w = m.group(0)
        low = w.casefold()
        if w[0] in "$€£%°" or ":" in w or low in MONTHS or low in WEEKDAYS or low in NUMBER_WORDS or low in TIME_WORDS:
            toks.append(Term(w, low))
        else:
            found = terms(w)
            if found:
                toks.append(Term(w, found[0].key))
        if len(toks) > len(prev):
            prev.append(last)
        last = w.casefold()
    return _Seq(toks, prev)


def _typed(seq: _Seq, i: int, asked: Asked) -> bool:
    """Whether token ``i`` of ``seq`` is of the kind ``asked`` asks for."""
    t = seq.toks[i]
    nxt = seq.toks[i + 1] if i + 1 < len(seq.toks) else None
    k = asked.kind
    if k == "time":
        return _is_time(t, nxt)
    if k in ("quantity", "count"):
        return _is_number(t)
    if k == "person":
        return _capital(t) and not _is_number(t)
    if k == "place":
        return (_capital(t) and seq.prev_word[i] not in _AGENT) or (
            seq.prev_word[i] in _LOCATIVE and not _is_number(t) and not _is_time(t, nxt))
    if k == "nationality":
        return _nationality(t) or (_capital(t) and seq.prev_word[i] == "from")
    if k == "language":
        return _nationality(t)
    if k == "colour":
        return t.text.casefold() in COLOURS
    return False


def _number_unit(seq: _Seq, i: int) -> Term | None:
    """The first non-number token after the number at ``i`` (its unit or counted noun)."""
    j = i + 1
    while j < len(seq.toks) and _is_number(seq.toks[j]):
        j += 1
    return seq.toks[j] if j < len(seq.toks) and j <= i + 3 else None


def _wrong_unit(seq: _Seq, i: int, asked: Asked) -> bool:
    unit = _number_unit(seq, i)
    if asked.kind == "count":
        return (unit is not None and asked.counted is not None and unit.key != asked.counted
                and _unit_dimension(unit) is None and not unit.text[0].isupper())
    if asked.dimension is None:
        return False
    dim = _unit_dimension(unit)
    return dim is not None and dim not in asked.dimension.split("|")


@dataclass
class QuestionCheck:
    """What :func:`check_answer` found. ``verdict``: ``ok``, ``unchecked`` (the question's type is not
    recognised), ``mismatch`` or ``displaced``; ``asked``: the type read from the question; ``why``: one
    line for a score's reason."""

    verdict: str
    asked: str
    why: str = ""


def _same(a: str, b: str) -> bool:
    """Two keys name the same word: equal, or (both of 5+ letters) the same first five letters
    (child / children)."""
    return a == b or (len(a) >= 5 and len(b) >= 5 and a[:5] == b[:5] and a.isalpha() and b.isalpha())


RIGHT_FACTOR = 3    # a question word after the candidate counts as this many times farther


def _positions(ctx: _Seq, key: str) -> list[int]:
    """Where the context holds ``key`` (as :func:`_same` matches it); cached on the sequence."""
    cache = ctx.positions
    if key not in cache:
        cache[key] = [j for j, t in enumerate(ctx.toks) if _same(t.key, key)]
    return cache[key]


def _closeness(ctx: _Seq, sent_of: list[int], i: int, qkeys: set[str]) -> float:
    """How near position ``i`` of the context the question's terms are: the sum over the question's
    terms of 1 / (1 + the distance to their nearest occurrence), where a term after ``i`` counts
    RIGHT_FACTOR times as far (a value follows what it is the value of: "closes at 6 pm") and a
    sentence away counts as far."""
    total = 0.0
    for q in qkeys:
        best = None
        for j in _positions(ctx, q):
            if j == i:
                continue
            d = (i - j) if j < i else RIGHT_FACTOR * (j - i)
            d += 20 if sent_of[j] != sent_of[i] else 0
            best = d if best is None else min(best, d)
        if best is not None:
            total += 1.0 / (1 + best)
    return total


def _context_seq(contexts: Sequence[str]) -> tuple[_Seq, list[int]]:
    toks: list[Term] = []
    prev: list[str] = []
    sent_of: list[int] = []
    n = 0
    for text in contexts:
        for sentence in split_sentences(text) or [text]:
            s = _seq(sentence)
            toks += s.toks
            prev += s.prev_word
            sent_of += [n] * len(s.toks)
            n += 1
    return _Seq(toks, prev), sent_of


def check_answer(question: str, answer: str, contexts: Sequence[str]) -> QuestionCheck:
    """Check ``answer`` against what ``question`` asks, given ``contexts`` (see the module docstring)."""
    asked = question_type(question or "")
    if not asked.kind:
        return QuestionCheck("unchecked", "")
    label = asked.kind + (f" ({asked.dimension.replace('|', ' or ')})" if asked.dimension else "")
    qkeys = {t.key for t in _seq(question).toks}
    ans = _seq(answer)
    new = [i for i, t in enumerate(ans.toks) if t.key not in qkeys]
    if ans.toks and not new:
        return QuestionCheck("mismatch", label, "the answer only repeats the question's words")
    ctx, sent_of = _context_seq(contexts)
    in_ctx = [i for i in range(len(ctx.toks)) if _typed(ctx, i, asked)]
    given = [i for i in new if _typed(ans, i, asked)]
    if not given:
        if in_ctx:
            return QuestionCheck("mismatch", label, f"the question asks for a {label}; the answer gives none")
        return QuestionCheck("ok", label)
    if all(_is_number(ans.toks[i]) and _wrong_unit(ans, i, asked) for i in given):
        unit = _number_unit(ans, given[0])
        return QuestionCheck("mismatch", label, f"the question asks for a {label}; the answer gives "
                                                f"{ans.toks[given[0]].text} {unit.text if unit else ''}".rstrip())
    return _displaced(ctx, sent_of, in_ctx, {ans.toks[i].key for i in given}, qkeys, label)


def _displaced(ctx: _Seq, sent_of: list[int], in_ctx: list[int], given: set[str], qkeys: set[str],
               label: str) -> QuestionCheck:
    anchors = {k for k in qkeys if any(_same(t.key, k) for t in ctx.toks)} - given
    heads = [i for i in in_ctx if ctx.toks[i].key not in qkeys and ctx.toks[i].text.casefold() not in TIME_WORDS]
    mine = [i for i in heads if ctx.toks[i].key in given]
    others = [i for i in heads if ctx.toks[i].key not in given]
    if not anchors or not mine or not others:
        return QuestionCheck("ok", label)
    best = max(mine, key=lambda i: _closeness(ctx, sent_of, i, anchors))
    rivals = [i for i in others if sent_of[i] == sent_of[best]]   # competing within the answer's sentence
    if rivals and max(_closeness(ctx, sent_of, i, anchors) for i in rivals) > (
            _closeness(ctx, sent_of, best, anchors) + 1e-9):
        return QuestionCheck("displaced", label, f"another {label} in the context sits nearer the question's words")
    return QuestionCheck("ok", label)


MISMATCH_FACTOR = 0.5      # the answer gives nothing of what the question asks: below any cut
DISPLACED_FACTOR = 0.99    # another candidate sits nearer the question's words: ranked lower only


@dataclass
class TypedSupport:
    """What :func:`typed_support` found: ``share`` (None when the response has no content word),
    the question ``check`` and v1's :class:`~assay.judges.support.Support`."""

    share: float | None
    check: QuestionCheck
    support: Support


def typed_support(question: str, answer: str, contexts: Sequence[str]) -> TypedSupport:
    """The typed support of ``answer``: the support share times MISMATCH_FACTOR on a mismatch and
    DISPLACED_FACTOR when displaced (the support scorer v2)."""
    found = support(answer, contexts)
    check = check_answer(question, answer, contexts)
    factor = {"mismatch": MISMATCH_FACTOR, "displaced": DISPLACED_FACTOR}.get(check.verdict, 1.0)
    return TypedSupport(None if found.share is None else found.share * factor, check, found)
