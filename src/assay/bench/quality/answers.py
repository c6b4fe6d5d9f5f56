"""Turning a model's answer into a score, the way lm-evaluation-harness tasks define it.

Filters (a task's ``filter_list``) pull the scored part out of a generated answer — GSM8K's final number, for
instance — before ``exact_match`` compares it with the gold text under the task's options (HF ``evaluate``'s
semantics, which lm-evaluation-harness reuses). Multiple-choice items scored by log-likelihood use
``choice_accuracy``; chat-only endpoints, which give no log-probabilities, answer in text and ``extract_choice``
reads which choice they named. Code tasks use ``pass_at_k``, the unbiased estimator of the chance that at least one
of k samples passes, in its product form so large n stays exact in floating point.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from assay.bench.quality.patterns import bounded

__all__ = ["CHOICE_INSTRUCTION", "FilterPipeline", "FilterStep", "exact_match", "choice_accuracy", "pass_at_k",
           "extract_choice", "strip_listing", "FILTER_FUNCTIONS"]

# The filter functions a pipeline understands, by lm-evaluation-harness's names.
FILTER_FUNCTIONS = ("regex", "take_first", "take_first_k", "majority_vote", "lowercase", "uppercase",
                    "remove_whitespace", "strip", "map", "custom")


@dataclass
class FilterStep:
    """One step of a pipeline: ``function`` with its options (as written in the task's ``filter_list``)."""

    function: str
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.function not in FILTER_FUNCTIONS:
            raise ValueError(f"filter function {self.function!r} is not supported "
                             f"(supported: {', '.join(FILTER_FUNCTIONS)})")
        if self.function == "regex":
            pattern = self.options.get("regex_pattern", r"#### (\-?[0-9\.\,]+)")
            try:       # a task file's regex: compiled by the regex package and run with a time bound
                self._regex = bounded(pattern)
            except ValueError as exc:
                raise ValueError(f"regex_pattern: {exc}") from None
            self._group = int(self.options.get("group_select", 0))
            self._fallback = str(self.options.get("fallback", "[invalid]"))
        elif self.function == "take_first_k":
            self._k = int(self.options.get("k", 1))
        elif self.function == "map":
            self._mapping = dict(self.options.get("mapping_dict") or {})
            self._default = self.options.get("default_value")
        elif self.function == "custom" and not callable(self.options.get("filter_fn")):
            raise ValueError("a custom filter needs filter_fn: !function module.name (run with --trust-task-code)")

    @property
    def per_text(self) -> bool:
        """True for steps that transform each answer; False for those that select among a doc's answers."""
        return self.function not in ("take_first", "take_first_k", "majority_vote")

    def apply(self, text: str, doc: dict | None = None) -> str:
        f = self.function
        if f == "custom":
            return self._custom(text, doc)
        if f == "regex":
            return self._regex_apply(text)
        if f == "lowercase":
            return text.lower()
        if f == "uppercase":
            return text.upper()
        if f == "remove_whitespace":          # lm-eval drops one leading space only
            return text[1:] if text.startswith(" ") else text
        if f == "strip":
            return text.strip()
        if f == "map":
            if text in self._mapping:
                return str(self._mapping[text])
            return text if self._default is None else str(self._default)
        return text

    def _regex_apply(self, text: str) -> str:
        found = self._regex.findall(text)
        if not found:
            return self._fallback
        try:
            match = found[self._group]
        except IndexError:
            return self._fallback
        if isinstance(match, tuple):      # several groups: the first that matched something
            match = next((m for m in match if m), None)
            if match is None:
                return self._fallback
        return match.strip()

    def _custom(self, text: str, doc: dict | None) -> str:
        """The task's ``filter_fn(resps, docs)`` (lm-evaluation-harness's custom filter) on one doc's one answer."""
        got = self.options["filter_fn"]([[text]], [doc])
        one = list(got)[0]
        return str(one[0] if isinstance(one, (list, tuple)) else one)

    def select(self, texts: list[str]) -> list[str]:
        f = self.function
        if f == "take_first":
            return texts[:1]
        if f == "take_first_k":
            return texts[:self._k]
        if f == "majority_vote":              # the most common answer; ties go to the earliest seen
            if not texts:
                return texts
            counts = Counter(texts)
            best = max(counts.values())
            return [next(t for t in texts if counts[t] == best)]
        return [self.apply(t) for t in texts]


@dataclass
class FilterPipeline:
    """A named chain of filter steps; ``apply`` runs the per-answer steps on one generated text.

    ``take_first`` and its kin select among a doc's several samples (``repeats``); ``apply_all`` runs them on the
    list of a doc's answers, ``apply`` on one answer (where selection is the identity)."""

    name: str = "none"
    steps: list[FilterStep] = field(default_factory=list)

    @classmethod
    def from_config(cls, entry: dict) -> FilterPipeline:
        """Build from one ``filter_list`` entry: ``{"name": ..., "filter": [{"function": ..., ...}, ...]}``."""
        if not isinstance(entry, dict):
            raise ValueError("a filter_list entry must be a mapping with 'name' and 'filter'")
        name = str(entry.get("name", "none"))
        raw = entry.get("filter") or []
        if not isinstance(raw, list):
            raise ValueError(f"filter {name!r}: 'filter' must be a list of steps")
        steps = []
        for step in raw:
            if not isinstance(step, dict) or "function" not in step:
                raise ValueError(f"filter {name!r}: each step needs a 'function'")
            opts = {k: v for k, v in step.items() if k != "function"}
            steps.append(FilterStep(str(step["function"]), opts))
        return cls(name, steps)

    @property
    def take_first(self) -> bool:
        """True when the pipeline keeps only a doc's first sample."""
        return any(s.function == "take_first" for s in self.steps)

    def apply(self, text: str, doc: dict | None = None) -> str:
        """The per-answer steps on one answer; ``doc`` is what a custom filter function is given with it."""
        for step in self.steps:
            if step.per_text:
                text = step.apply(text, doc)
        return text

    def apply_all(self, texts: Sequence[str]) -> list[str]:
        out = list(texts)
        for step in self.steps:
            out = step.select(out)
        return out


def exact_match(pred: str, gold: str, *, ignore_case: bool = False, ignore_punctuation: bool = False,
                regexes_to_ignore: Sequence[str] = (), ignore_numbers: bool = False) -> float:
    """1.0 when ``pred`` equals ``gold`` after the options, else 0.0.

    The order is HF ``evaluate``'s: every regex in ``regexes_to_ignore`` is removed from both strings first, then
    case is folded, then ASCII punctuation and then digits are deleted."""
    for rx in regexes_to_ignore or ():
        p = bounded(rx)                       # time-bounded (a task file's regex)
        pred, gold = p.sub("", pred), p.sub("", gold)
    if ignore_case:
        pred, gold = pred.lower(), gold.lower()
    if ignore_punctuation:
        table = str.maketrans("", "", string.punctuation)
        pred, gold = pred.translate(table), gold.translate(table)
    if ignore_numbers:
        table = str.maketrans("", "", string.digits)
        pred, gold = pred.translate(table), gold.translate(table)
    return 1.0 if pred == gold else 0.0


def _argmax(values: Sequence[float]) -> int:
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def choice_accuracy(logliks: Sequence[float], choices: Sequence[str], gold: int | Sequence[int]) -> dict:
    """``acc``: the choice with the highest log-likelihood is gold; ``acc_norm``: the same after dividing each
    log-likelihood by its choice's length in characters (lm-evaluation-harness's normalisation). Ties go to the
    first choice. ``gold`` may be several indices (any counts)."""
    if len(logliks) != len(choices) or not choices:
        raise ValueError(f"{len(logliks)} log-likelihoods for {len(choices)} choices")
    golds = {gold} if isinstance(gold, int) else set(gold)
    pred = _argmax(logliks)
    norm = [ll / max(len(c), 1) for ll, c in zip(logliks, choices)]
    pred_norm = _argmax(norm)
    return {"acc": 1.0 if pred in golds else 0.0, "acc_norm": 1.0 if pred_norm in golds else 0.0,
            "pred": pred, "pred_norm": pred_norm}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c passed: 1 − C(n−c, k)/C(n, k), computed as
    1 − ∏(1 − k/i) for i = n−c+1..n. Refuses k > n rather than reporting a figure the samples cannot support."""
    if n < 1 or k < 1:
        raise ValueError(f"pass@k needs n >= 1 and k >= 1 (n={n}, k={k})")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: passed count c={c} outside 0..n={n}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per item, got {n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


# What the prompt of multiple choice by generation asks for, last (run.choice_prompt ends with these
# words; tests/bench/test_choice_extraction.py checks); an answer that repeats it has it stripped.
CHOICE_INSTRUCTION = "Reply with the letter of the correct choice only."

_PUNCT_EDGES = " \t\n\r.,;:!?\"'`*()[]{}"
_EMPHASIS = re.compile(r"\*\*|__|`")
_NOT_WORD = r"(?![\w'])"
# "the answer is (B)", "Answer: B", "final answer - B": the letter upper case ("the answer is a gas" names no option)
_STATED = re.compile(r"(?i:\banswer)\s*(?i:is|:|=|-)?\s*(?i:option\s*|choice\s*)?[(\[]?([A-Z])[)\]]?" + _NOT_WORD)
# "option D", "choice (B)", "the correct option is C"
_NAMED = re.compile(r"(?i:\b(?:option|choice))\s*(?i:is|:)?\s*[(\[]?([A-Z])[)\]]?" + _NOT_WORD)
# "A or C", "(A) and (C)", "A, B, C or D": two options named, neither chosen
_UNDECIDED = re.compile(r"(?<![\w'])[(\[]?[A-Z][)\]]?,?\s+(?:or|and)\s+[(\[]?[A-Z][)\]]?" + _NOT_WORD)
_LONE = re.compile(r"^\W*([A-Z])\W*$")                              # a line that is one letter: "C", "(C).", "C)"
_LEADING = re.compile(r"^\s*[(\[]?([A-Z])(?:[)\].:]|\s*$)")          # "B", "B.", "(B)", "B) Oxygen" (not "A gas")
_PAREN = re.compile(r"\(([A-Z])\)")


def _norm(s: str) -> str:
    return " ".join(s.lower().strip(_PUNCT_EDGES).split())


def _letter(j: int) -> str:
    return chr(ord("A") + j)


def _entries(text: str, choices: Sequence[str]) -> list[tuple[int, int]]:
    """Where ``text`` shows an option as the prompt lists it ("A. Oxygen", "(B) Carbon dioxide",
    "C) Nitrogen"): (start, end) of each, in order. A last entry cut short (the answer hit its
    token limit) counts when what is left is the start of that option's text."""
    spans = []
    for j, c in enumerate(choices[:26]):
        c = c.strip()
        if not c:
            continue
        head = rf"(?<!\w)[(\[]?{_letter(j)}[)\].:][ \t]*"
        spans += [m.span() for m in re.finditer(head + "(?i:" + re.escape(c) + r")(?!\w)", text)]
        cut = re.search(head + r"(\S[^\n]*?)\s*$", text)
        if cut and cut.start() not in [a for a, _ in spans] and c.lower().startswith(cut.group(1).lower()):
            spans.append((cut.start(), len(text)))
    return sorted(set(spans))


def strip_listing(text: str, choices: Sequence[str]) -> str:
    """``text`` without a copy of the option list: every run of two or more options shown as the
    prompt lists them, one after the other (only blanks, commas or semicolons between), and without
    the prompt's own instruction (:data:`CHOICE_INSTRUCTION`). One option with its letter ("B.
    Carbon dioxide") is an answer, and stays."""
    text = re.sub(re.escape(CHOICE_INSTRUCTION), " ", text, flags=re.IGNORECASE)
    runs: list[list[tuple[int, int]]] = []
    for a, b in _entries(text, choices):
        if runs and a >= runs[-1][-1][1] and re.fullmatch(r"[\s,;]*", text[runs[-1][-1][1]:a]):
            runs[-1].append((a, b))
        elif not runs or a >= runs[-1][-1][1]:
            runs.append([(a, b)])
    for run in reversed([r for r in runs if len(r) > 1]):
        text = text[:run[0][0]] + "\n" + text[run[-1][1]:]
    return text


def _one(letters: Sequence[str], n: int) -> int | None | bool:
    """The option that ``letters`` (found by one rule) agree on: its index; None when they name
    several (no choice was made); False when they name none that exists."""
    found = {ord(x) - ord("A") for x in letters}
    found = {i for i in found if 0 <= i < n}
    if not found:
        return False
    return found.pop() if len(found) == 1 else None


def _by_letter(text: str, n: int) -> int | None | bool:
    """The option a letter in ``text`` chooses, rule by rule, strongest first: an answer statement,
    an option named ("option D"), then, unless two options are named side by side ("A or C"), a
    last line that is one letter, a leading letter, one letter in parentheses. None: the text
    names several options without choosing; False: no letter rule applies."""
    for rule in (_STATED, _NAMED):
        got = _one(rule.findall(text), n)
        if got is not False:
            return got
    if _UNDECIDED.search(text):
        return None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return False
    for m in (_LONE.match(lines[-1]), _LEADING.match(lines[0])):
        if m:
            got = _one([m.group(1)], n)
            if got is not False:
                return got
    return _one(_PAREN.findall(text), n)


def _by_text(t: str, normed: Sequence[str]) -> int | None:
    """A bare 1-based number (unless the choices are numbers themselves), else exactly one choice's
    text inside the normalised answer ``t`` (a choice inside another found choice does not count)."""
    if not any(re.fullmatch(r"-?\d+(\.\d+)?", c) for c in normed):
        m = re.fullmatch(r"(?:option\s*|choice\s*)?(\d+)", t)
        if m and 1 <= int(m.group(1)) <= len(normed):
            return int(m.group(1)) - 1
    found = [i for i, c in enumerate(normed)
             if c and re.search(r"(?<!\w)" + re.escape(c) + r"(?!\w)", t)]
    found = [i for i in found if not any(j != i and normed[i] in normed[j] for j in found)]
    return found[0] if len(found) == 1 else None


def extract_choice(text: str, choices: Sequence[str]) -> int | None:
    """Which choice a generated answer chose, for chat-only endpoints that return text instead of
    log-probabilities; None when it chose none (the item is *unparsed*, scored wrong as
    lm-evaluation-harness scores an answer its filter cannot read).

    In order: the whole answer equal to a choice's text; then, with markdown emphasis, the prompt's
    instruction and any echoed copy of the option list taken out (:func:`strip_listing`), a letter
    by :func:`_by_letter`'s rules (an answer statement first; several options named without a
    choice is no answer, never the first of them); a 1-based number; exactly one choice's text
    found in the answer."""
    if not choices or not text:
        return None
    normed = [_norm(str(c)) for c in choices]
    t = _norm(text)
    if t in normed:
        return normed.index(t)
    rest = strip_listing(_EMPHASIS.sub("", text), [str(c) for c in choices])
    got = _by_letter(rest, len(choices))
    if got is not False:
        return got
    return _by_text(_norm(rest), normed)
