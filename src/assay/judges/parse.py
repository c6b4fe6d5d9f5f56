"""Judge text -> score, never raising (a judge's unreadable answer never crashes a run).

:func:`parse_score` tries, in order:

1. JSON: a fenced block (```json ... ```), else the first ``{...}`` object found in the
   text (prose around it is ignored; single quotes and trailing commas are tolerated);
   the score is read from ``score`` / ``rating`` / ``result`` ... and the reason from
   ``reason`` / ``explanation`` / ``reasoning`` ...
2. XML-like tags: ``<score>4</score>``, ``<rating>yes</rating>``, ``<S2>4</S2>``.
3. Text: a labelled number ("Score: 4", "rating of 4", "4/5", "4 out of 5"), a lone
   in-range number, or a yes/no word.

Every candidate is checked against the :class:`Scale` (``1-5`` integer, ``0-7``,
``yes/no``, a float range). The result is ``(value, reason, ok)``: on ``ok=False`` the
caller (:mod:`assay.judges.ask`) re-asks once, then records status ``error`` with the raw text
kept. :func:`json_candidates` and :func:`json_key` are the tolerant JSON finder it uses.

:func:`score_from_logprobs` turns first-token log-probabilities over the scale's tokens
into an expected score (or P(yes)), which ranks even when a small judge's parsed scores
are constant.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

SCORE_KEYS = ("score", "rating", "grade", "result", "verdict", "value", "answer", "label", "judgment",
              "judgement", "decision")
REASON_KEYS = ("reason", "reasoning", "explanation", "rationale", "justification", "thoughts", "thought",
               "feedback", "analysis", "comment")
SCORE_TAGS = ("score", "rating", "grade", "result", "verdict", "answer", "label", "judgment", "S2")
REASON_TAGS = ("reason", "reasoning", "explanation", "rationale", "justification", "S1", "thoughts", "S0")

_YES = {"yes", "y", "true", "pass", "passed", "correct", "supported", "1"}
_NO = {"no", "n", "false", "fail", "failed", "incorrect", "unsupported", "0"}
MAX_CHARS = 100_000
_NUM = r"[-+]?\d+(?:\.\d+)?"
_PIECE_MARKS = " \t\r\n\u2581\u0120\u010a\"'*`.:,;()[]"   # spaces, SentencePiece ▁, GPT-2 Ġ/Ċ, quotes


@dataclass(frozen=True)
class Scale:
    """What a judge's answer may be: integers ``lo..hi``, any number in ``[lo, hi]``, or yes/no."""

    kind: str = "int"           # "int" | "float" | "yesno"
    lo: float = 1
    hi: float = 5

    @classmethod
    def of(cls, spec: Scale | str | tuple[float, float]) -> Scale:
        """``Scale``, ``"1-5"``, ``"1–5"``, ``"0-7"``, ``"0.0-1.0"`` (float), ``"yes/no"``, ``(1, 5)``."""
        if isinstance(spec, Scale):
            return spec
        if isinstance(spec, tuple):
            lo, hi = spec
            kind = "int" if float(lo).is_integer() and float(hi).is_integer() and not (
                isinstance(lo, float) or isinstance(hi, float)) else "float"
            return cls(kind, lo, hi)
        s = str(spec).strip().lower().replace(" ", "")
        if s in ("yes/no", "yes-no", "yesno", "binary", "bool", "boolean"):
            return cls("yesno", 0, 1)
        m = re.fullmatch(r"(-?\d+(?:\.\d+)?)(?:-|–|—|\.\.|to)(-?\d+(?:\.\d+)?)", s)
        if not m:
            raise ValueError(f"unknown scale {spec!r}; use '1-5', '0-7', '0.0-1.0' or 'yes/no'")
        a, b = m.groups()
        kind = "float" if "." in a or "." in b else "int"
        lo, hi = (float(a), float(b)) if kind == "float" else (int(a), int(b))
        if lo > hi:
            raise ValueError(f"scale {spec!r}: the low end is above the high end")
        return cls(kind, lo, hi)

    def labels(self) -> list[str]:
        """The tokens a first-token judge answers with: "1".."5", or "yes"/"no"."""
        if self.kind == "yesno":
            return ["yes", "no"]
        if self.kind == "int":
            return [str(i) for i in range(int(self.lo), int(self.hi) + 1)]
        return []

    def check(self, raw: Any) -> Any:
        """The canonical value for ``raw`` if it is on the scale, else None.

        int scales give ``int`` (``4.0`` -> 4; a fraction inside the range is kept as
        float), float scales ``float``, yes/no scales ``"yes"`` or ``"no"``.
        """
        if raw is None or isinstance(raw, (dict, list, tuple)):
            return None
        if self.kind == "yesno":
            if isinstance(raw, bool):
                return "yes" if raw else "no"
            if isinstance(raw, (int, float)):
                return "yes" if raw == 1 else "no" if raw == 0 else None
            w = str(raw).strip().strip(_PIECE_MARKS).lower()
            return "yes" if w in _YES else "no" if w in _NO else None
        if isinstance(raw, bool):
            return None
        if isinstance(raw, (int, float)):
            x = float(raw)
        else:
            t = str(raw).strip()
            m = re.fullmatch(rf"\W*({_NUM})\s*(?:(?:/|out\s+of)\s*({_NUM}))?\W*", t, re.I)
            if not m:
                return None
            x = float(m.group(1))
            if m.group(2) is not None and float(m.group(2)) != float(self.hi):
                return None  # "4/10" on a 1-5 scale is not a 4
        if math.isnan(x) or not (self.lo <= x <= self.hi):
            return None
        if self.kind == "int":
            return int(x) if x.is_integer() else x
        return x

    def token_value(self, token: str) -> Any:
        """The scale value a single generated token stands for (" 4", "Yes", "▁no"), or None."""
        t = token.strip(_PIECE_MARKS)
        if not t:
            return None
        if self.kind == "yesno":
            low = t.lower()
            return "yes" if low == "yes" else "no" if low == "no" else None
        if self.kind == "int" and re.fullmatch(r"-?\d+", t):
            v = int(t)
            return v if self.lo <= v <= self.hi else None
        return None

    def __str__(self) -> str:
        return "yes/no" if self.kind == "yesno" else f"{self.lo}-{self.hi}"


class ParseResult(tuple):
    """``(value, reason, ok)``; ``.method`` says which rule matched (json, tag, text, none)."""

    def __new__(cls, value: Any, reason: str | None, ok: bool, method: str = "none") -> ParseResult:
        obj = super().__new__(cls, (value, reason, ok))
        obj.method = method
        return obj

    value = property(lambda self: self[0])
    reason = property(lambda self: self[1])
    ok = property(lambda self: self[2])

    def __repr__(self) -> str:
        return f"ParseResult(value={self[0]!r}, reason={self[1]!r}, ok={self[2]}, method={self.method!r})"


def parse_score(text: Any, scale: Scale | str = "1-5", *, score_keys: Sequence[str] = (),
                reason_keys: Sequence[str] = ()) -> ParseResult:
    """Read a score and a reason from judge output; never raises (see the module doc)."""
    try:
        sc = Scale.of(scale)
    except ValueError:
        return ParseResult(None, f"bad scale {scale!r}", False)
    try:
        return _parse(text, sc, tuple(score_keys) + SCORE_KEYS, tuple(reason_keys) + REASON_KEYS)
    except Exception as exc:  # pragma: no cover - a parser bug must not crash a run either
        return ParseResult(None, f"parser error: {type(exc).__name__}: {exc}", False)


def _parse(text: Any, sc: Scale, skeys: tuple[str, ...], rkeys: tuple[str, ...]) -> ParseResult:  # noqa: C901
    if text is None:
        return ParseResult(None, None, False)
    if not isinstance(text, str):
        if isinstance(text, Mapping):
            return _from_mapping(text, sc, skeys, rkeys) or ParseResult(None, None, False)
        v = sc.check(text)
        return ParseResult(v, None, v is not None, "value")
    t = text.strip()
    if not t:
        return ParseResult(None, None, False)
    if len(t) > MAX_CHARS:  # a runaway answer: its head and its tail hold any verdict
        t = t[:MAX_CHARS // 2] + "\n...\n" + t[-MAX_CHARS // 2:]

    # 1. JSON
    for obj in json_candidates(t):
        if isinstance(obj, Mapping):
            r = _from_mapping(obj, sc, skeys, rkeys)
            if r is not None:
                return r
        elif not isinstance(obj, (list, dict)):
            v = sc.check(obj)
            if v is not None:
                return ParseResult(v, None, True, "json")

    # 2. tags
    reason = _first_tag(t, REASON_TAGS)
    score_tag = _first_tag(t, SCORE_TAGS)
    if score_tag is not None:
        v = sc.check(score_tag)
        if v is None:
            v = _from_text(score_tag, sc)
        if v is not None:
            return ParseResult(v, reason or _strip_tags(t) or None, True, "tag")
        return ParseResult(None, reason, False, "tag")

    # 3. text
    v = _from_text(t, sc)
    if v is not None:
        return ParseResult(v, reason or t, True, "text")
    return ParseResult(None, reason, False)


def _from_mapping(obj: Mapping[str, Any], sc: Scale, skeys: tuple[str, ...],  # noqa: C901
                  rkeys: tuple[str, ...], depth: int = 0) -> ParseResult | None:
    low = {str(k).strip().lower(): v for k, v in obj.items()}
    reason = None
    for k in rkeys:
        r = low.get(k.lower())
        if isinstance(r, str) and r.strip():
            reason = r.strip()
            break
        if isinstance(r, list) and r:
            reason = "\n".join(str(x) for x in r)
            break
    for k in skeys:
        k = k.lower()
        if k in low:
            raw = low[k]
            if isinstance(raw, Mapping) and depth < 2:
                inner = _from_mapping(raw, sc, skeys, rkeys, depth + 1)
                if inner is not None:
                    return inner
                continue
            v = sc.check(raw)
            if v is None and isinstance(raw, str):
                v = _from_text(raw, sc)
            if v is not None:
                return ParseResult(v, reason, True, "json")
            return ParseResult(None, reason, False, "json")  # named, but off the scale
    for v in low.values():  # {"result": {"score": 4}} under another name
        if isinstance(v, Mapping) and depth < 2:
            inner = _from_mapping(v, sc, skeys, rkeys, depth + 1)
            if inner is not None:
                return inner
    return None


_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n?(.*?)```", re.S)


def json_candidates(t: str) -> Iterable[Any]:
    """The JSON values a model's answer holds, most likely first: fenced blocks, the whole text,
    then every balanced ``{...}``/``[...]`` span (trailing commas and single quotes tolerated).
    ``t`` must not be empty."""
    seen = set()
    blocks = [m.group(1).strip() for m in _FENCE.finditer(t)]
    if t[0] in "{[" or t[0].isdigit() or t in ("true", "false"):
        blocks.append(t)

    def fresh(spans: Iterable[str]) -> Iterable[Any]:
        for span in spans:
            if span not in seen:
                seen.add(span)
                o = _loads(span)
                if o is not _FAIL:
                    yield o

    for b in blocks:
        obj = _loads(b)
        if obj is not _FAIL:
            seen.add(b)
            yield obj
        else:
            yield from fresh(_objects(b))
    yield from fresh(_objects(t))


def json_key(text: str, key: str) -> Any:
    """The value of ``key`` (case-insensitive) in the first JSON object of ``text`` that has it,
    a JSON list found first, or None."""
    try:
        for obj in json_candidates((text or "").strip() or " "):
            if isinstance(obj, Mapping):
                low = {str(k).lower(): val for k, val in obj.items()}
                if key in low:
                    return low[key]
            elif isinstance(obj, list):
                return obj
    except Exception:
        return None
    return None


_FAIL = object()
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _loads(s: str) -> Any:
    try:
        return orjson.loads(s)
    except orjson.JSONDecodeError:
        pass
    fixed = _TRAILING_COMMA.sub(r"\1", s)
    try:
        return orjson.loads(fixed)
    except orjson.JSONDecodeError:
        pass
    if len(s) < 20000 and s.lstrip().startswith("{"):
        try:  # {'score': 4} and Python literals
            lit = ast.literal_eval(fixed.replace("true", "True").replace("false", "False").replace("null", "None"))
            if isinstance(lit, dict):
                return lit
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            pass
    return _FAIL


def _objects(t: str, limit: int = 20) -> list[str]:  # noqa: C901
    """Balanced ``{...}`` spans in order of their start, outermost first; one linear pass.

    Quotes are tracked only inside braces, so a stray quote in the prose around an
    object does not hide it.
    """
    spans: list[tuple[int, int]] = []
    stack: list[int] = []
    quote, esc = False, False
    for j, c in enumerate(t):
        if quote:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                quote = False
        elif c == "{":
            stack.append(j)
        elif c == "}":
            if stack:
                spans.append((stack.pop(), j))
        elif c == '"' and stack:
            quote = True
    spans.sort()
    out: list[str] = []
    end = -1
    for a, b in spans:
        if a > end:  # not inside one already taken
            out.append(t[a:b + 1])
            end = b
            if len(out) >= limit:
                break
    return out


def _first_tag(t: str, names: Sequence[str]) -> str | None:
    """The text of the first ``<name>...</name>`` (linear: the first closing tag, then the
    nearest opening tag before it)."""
    for name in names:
        close = re.search(rf"<\s*/\s*{name}\s*>", t, re.I)
        if not close:
            continue
        last = None
        for m in re.finditer(rf"<\s*{name}\s*>", t[:close.start()], re.I):
            last = m
        if last is not None:
            return t[last.end():close.start()].strip()
    return None


def _strip_tags(t: str) -> str:
    return re.sub(r"<\s*/?\s*\w+\s*>", " ", t).strip()


_LABEL = r"(?:score|rating|grade|verdict|answer|result|judg(?:e)?ment|decision|label)"


def _from_text(t: str, sc: Scale) -> Any:  # noqa: C901
    if sc.kind == "yesno":
        return _yesno_from_text(t)
    # "Score: 4", "rating of **4**", "final score is 4/5"
    for m in re.finditer(rf"{_LABEL}\s*(?:is|of|was|would\s+be|:|=|-)?\s*[*_`\"'(\[]*\s*({_NUM})"
                         rf"(?:\s*(?:/|out\s+of)\s*({_NUM}))?", t, re.I):
        if m.group(2) is not None and float(m.group(2)) != float(sc.hi):
            continue
        v = sc.check(m.group(1))
        if v is not None:
            return v
    # "4/5", "4 out of 5"
    for m in re.finditer(rf"(?<![\w.])({_NUM})\s*(?:/|out\s+of)\s*({_NUM})(?!\w|\.\d)", t, re.I):
        if float(m.group(2)) == float(sc.hi):
            v = sc.check(m.group(1))
            if v is not None:
                return v
    nums = [m.group(0) for m in re.finditer(rf"(?<![\w.\-/]){_NUM}(?![\w/]|\.\d)", t)]
    valid = [v for v in (sc.check(x) for x in nums) if v is not None]
    if not valid:
        return None
    if len(set(valid)) == 1:
        return valid[0]
    first = re.match(rf"\W*({_NUM})(?![\w.])", t)   # "4\nThe answer is ..."
    if first:
        v = sc.check(first.group(1))
        if v is not None:
            return v
    last = re.search(rf"({_NUM})\W*$", t)           # "... so I'd give it a 4."
    if last:
        return sc.check(last.group(1))
    return None


def _yesno_from_text(t: str) -> str | None:
    m = re.search(rf"{_LABEL}\s*(?:is|was|would\s+be|:|=|-)?\s*[*_`\"'(\[]*\s*(yes|no|true|false|pass|fail)\b",
                  t, re.I)
    if m:
        return "yes" if m.group(1).lower() in _YES else "no"
    first = re.match(r"\W*(yes|no|true|false)\b", t, re.I)
    if first:
        return "yes" if first.group(1).lower() in _YES else "no"
    ys = re.findall(r"\byes\b", t, re.I)
    ns = re.findall(r"\bno\b", t, re.I)
    if ys and not ns:
        return "yes"
    if ns and not ys:
        return "no"
    return None


# -- log-probabilities --------------------------------------------------------------------------
class LogprobScore(NamedTuple):
    """``value``: expected score (int scales) or P(yes) (yes/no); ``probs``: the
    renormalised distribution over the scale; ``mass``: the probability the model put on
    scale tokens at all (low mass: the model wanted to say something else)."""

    value: float
    probs: dict[Any, float]
    mass: float


def score_from_logprobs(top_logprobs: Mapping[str, float] | None,
                        scale: Scale | str = "1-5") -> LogprobScore | None:
    """Expected score / P(yes) from one position's top log-probabilities; None if no scale
    token is among them. Tokens are matched after stripping spaces, SentencePiece/BPE space
    marks and case (" 4", "4", "Yes", "▁no")."""
    try:
        sc = Scale.of(scale)
    except ValueError:
        return None
    if not top_logprobs or sc.kind == "float":
        return None
    probs: dict[Any, float] = {}
    for tok, lp in top_logprobs.items():
        if lp is None:
            continue
        v = sc.token_value(str(tok))
        if v is None:
            continue
        try:
            p = math.exp(float(lp))
        except (OverflowError, ValueError):
            continue
        probs[v] = probs.get(v, 0.0) + p
    mass = sum(probs.values())
    if mass <= 0:
        return None
    norm = {k: p / mass for k, p in probs.items()}
    if sc.kind == "yesno":
        value = norm.get("yes", 0.0)
        norm = {"yes": norm.get("yes", 0.0), "no": norm.get("no", 0.0)}
    else:
        value = sum(k * p for k, p in norm.items())
        norm = dict(sorted(norm.items()))
    return LogprobScore(value, norm, min(1.0, mass))


def score_from_token_logprobs(seq: Sequence[tuple[str, Mapping[str, float]]] | None,
                              scale: Scale | str = "1-5") -> LogprobScore | None:
    """Like :func:`score_from_logprobs`, at the first generated position whose chosen
    token is a scale value (the ``4`` in ``{"score": 4, ...}``)."""
    if not seq:
        return None
    try:
        sc = Scale.of(scale)
    except ValueError:
        return None
    for tok, alts in seq:
        if sc.token_value(str(tok)) is not None:
            return score_from_logprobs(alts, sc)
    return None
