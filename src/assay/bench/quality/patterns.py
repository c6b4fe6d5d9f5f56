"""Regular expressions from task files, run with a time bound.

A task file's regexes (a filter's ``regex_pattern``, a metric's ``regexes_to_ignore``, the ``regex_replace``
template filter) are the task author's, and one that backtracks without end (``(a|aa)+$`` on a long run of ``a``
and one other character) never finishes on some texts. They are compiled by the ``regex`` package (its default
``V0`` mode reads ``re``'s syntax and gives ``re``'s results) and every search and substitution runs under its
``timeout``: past :data:`TIME_LIMIT_S` the call raises :class:`PatternTimeout`, an
:class:`~assay.errors.InputError` naming the task file, the line and the field the pattern came from
(:class:`Pattern` carries them), so a scoring loop records one clear error for the item instead of hanging.
"""

from __future__ import annotations

import functools
from typing import Any

from assay.errors import InputError

__all__ = ["TIME_LIMIT_S", "Pattern", "PatternTimeout", "bounded"]

# Seconds one search or substitution may take; ordinary patterns take microseconds on a model's answer.
TIME_LIMIT_S = 1.0


class PatternTimeout(InputError):
    """A task file's regex did not finish within :data:`TIME_LIMIT_S`."""


class Pattern(str):
    """A regex from a task file: the pattern's text (it is still a ``str``) and where it came from (``source``,
    ``line``, ``field``; ``label`` says which filter or option, e.g. ``"filter strict-match"``)."""

    source: str | None
    line: int | None
    field: str | None
    label: str

    def __new__(cls, pattern: str, *, source: str | None = None, line: int | None = None, field: str | None = None,
                label: str = "") -> Pattern:
        obj = super().__new__(cls, pattern)
        obj.source, obj.line, obj.field, obj.label = source, line, field, label
        return obj

    def _compiled(self) -> Any:
        return _compile(str(self))

    def _timeout(self, text: str) -> PatternTimeout:
        shown = str(self) if len(self) <= 120 else str(self)[:117] + "..."
        return PatternTimeout(f"{self.label + ': ' if self.label else ''}regex {shown!r} did not finish within "
                              f"{TIME_LIMIT_S:g} s on a text of {len(text)} characters (it backtracks without "
                              f"end; rewrite it)", source=self.source, line=self.line, field=self.field)

    def findall(self, text: str) -> list:
        try:
            return self._compiled().findall(text, timeout=TIME_LIMIT_S)
        except TimeoutError:
            raise self._timeout(text) from None

    def search(self, text: str) -> Any:
        try:
            return self._compiled().search(text, timeout=TIME_LIMIT_S)
        except TimeoutError:
            raise self._timeout(text) from None

    def sub(self, repl: str, text: str, count: int = 0) -> str:
        try:
            return self._compiled().sub(repl, text, count=count, timeout=TIME_LIMIT_S)
        except TimeoutError:
            raise self._timeout(text) from None


@functools.lru_cache(maxsize=512)
def _compile(pattern: str) -> Any:
    import regex

    return regex.compile(pattern)


def bounded(pattern: str | Pattern, **where: Any) -> Pattern:
    """``pattern`` as a :class:`Pattern` (one given stays as it is; ``where``: ``source``, ``line``, ``field``,
    ``label`` for a plain string), compiled now: a pattern that does not compile raises ``ValueError``."""
    if not isinstance(pattern, str):
        raise ValueError(f"a regex must be a string, not {type(pattern).__name__}")
    p = pattern if isinstance(pattern, Pattern) else Pattern(pattern, **where)
    import regex

    try:
        p._compiled()
    except (regex.error, ValueError, TypeError) as exc:
        raise ValueError(f"regex {str(p)[:120]!r} does not compile: {exc}") from None
    return p
