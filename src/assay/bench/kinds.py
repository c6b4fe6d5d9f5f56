"""The kinds of benchmark: one row per kind (:class:`BenchKind`), loaded by name.

A kind is a package of ``assay.bench`` (``perf``, ``quality``, ``embed``) whose ``KIND`` is its row:
its name, the schema tag of its summaries, the typed model its summaries are read through
(:mod:`assay.bench.summary`), what the store keeps of a summary (the ``task`` and ``metrics``
columns), the columns a list shows, and the hooks the shared layer calls — its columns on
the leaderboard (:mod:`assay.bench.board`) and the tokens a stored run spent (:mod:`assay.bench.cost`).
:data:`KIND_MODULES` names the package of each kind; a package is imported on first use, as the
metric registry imports its modules (``metrics/base.py`` ``BUILTIN_MODULES``), so this layer, the
board, cost and the store never import a kind. A new kind is its package plus one row here (or a
:func:`register` call).

:func:`store_benchmark` is how every kind's results are stored: checked with the kind's own check,
then written with :meth:`assay.store.Store.add_benchmark`. Stored schema tags are data: a stored
row keeps the tag it was written with.

:func:`model_identity` is the one rule that says which model a result is of, whatever kind made it
(the leaderboard's rows, the stored ``model`` of a run given ``--model-name``): the name the user
gave, else the model the spec names (``http://HOST/v1#NAME``, ``openai:NAME`` and ``NAME`` are one
model), then the user's aliases.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

from assay.errors import AssayError

# kind name -> the package whose ``KIND`` is its row; the order is the leaderboard's
KIND_MODULES: dict[str, str] = {"quality": "assay.bench.quality", "perf": "assay.bench.perf",
                                "embed": "assay.bench.embed"}


@dataclass(frozen=True)
class BenchKind:
    """One kind of benchmark.

    ``headline(summary)`` gives the stored ``metrics`` column (the few figures a list reads without the
    details), ``task(summary)`` the stored ``task`` column; ``list_columns`` are the columns a list of
    stored runs shows. ``check(summary)`` raises :class:`AssayError` when a summary that carries the
    schema tag is still not one of this kind's. The stored ref is the summary's ``ref_field`` when it is
    a hex id, else a fresh one; the stored time is the summary's ``created_at`` when ``dated``, else the
    time it is stored. Samples are kept per part of a run (``part``: what one is called, ``parts(summary)``:
    how many the run has). ``board(recs, rows, columns, groups, notes)`` adds the kind's columns to the
    leaderboard (:mod:`assay.bench.board`); ``tokens(details)`` gives ``(input, output, how)`` of a stored
    run, for what it cost (:mod:`assay.bench.cost`). ``summary`` is the kind's typed summary (a
    :class:`assay.bench.summary.Summary`), which :meth:`read` reads a stored result's details through."""

    name: str
    schema: str
    title: str
    headline: Callable[[Mapping[str, Any]], Any]
    task: Callable[[Mapping[str, Any]], str | None]
    list_columns: tuple[str, ...]
    check: Callable[[Mapping[str, Any]], None] | None = None
    ref_field: str = "ref"
    dated: bool = False
    part: str = "part"
    parts: Callable[[Mapping[str, Any]], int] | None = None
    board: Callable[..., None] | None = None
    tokens: Callable[[Mapping[str, Any] | None], tuple[Any, Any, str]] | None = None
    summary: type[Any] | None = None

    def read(self, details: Any) -> Any:
        """A stored result's ``details`` read through the kind's typed summary, as lists and boards read
        them (an empty summary where they do not read); for a kind without one, its keys as attributes."""
        if self.summary is not None:
            return self.summary.load_or_empty(details)
        return SimpleNamespace(**{str(k): v for k, v in details.items()}) if isinstance(details, Mapping) \
            else SimpleNamespace()


KINDS: dict[str, BenchKind] = {}


def register(kind: BenchKind) -> BenchKind:
    """Make ``kind`` known by its name (a kind that :data:`KIND_MODULES` does not name, or a new row
    for one it does)."""
    KINDS[kind.name] = kind
    return kind


def kind_names() -> tuple[str, ...]:
    """Every kind's name: those of :data:`KIND_MODULES` in its order, then those registered."""
    return tuple(dict.fromkeys([*KIND_MODULES, *KINDS]))


def find_kind(name: Any) -> BenchKind | None:
    """The row of the kind called ``name`` (its package imported now), or None for no such kind."""
    if not isinstance(name, str):
        return None
    if name not in KINDS and name in KIND_MODULES:
        row = importlib.import_module(KIND_MODULES[name]).KIND
        if not isinstance(row, BenchKind) or row.name != name:
            raise AssayError(f"{KIND_MODULES[name]}.KIND is not the row of the benchmark kind {name!r}")
        KINDS.setdefault(name, row)
    return KINDS.get(name)


def get_kind(kind: str | BenchKind) -> BenchKind:
    """The row of ``kind`` (a name or a row), or an :class:`AssayError` naming the kinds there are."""
    if isinstance(kind, BenchKind):
        return kind
    found = find_kind(kind)
    if found is None:
        raise AssayError(f"unknown benchmark kind {kind!r}: the kinds are {', '.join(kind_names())}")
    return found


def check_summary(kind: str | BenchKind, summary: Any) -> BenchKind:
    """``summary`` checked as a result of ``kind``: its schema tag, then the kind's own check."""
    k = get_kind(kind)
    if not isinstance(summary, Mapping) or summary.get("schema") != k.schema:
        got = summary.get("schema") if isinstance(summary, Mapping) else type(summary).__name__
        raise AssayError(f"not a {k.name} result: expected schema {k.schema!r}, got {got!r}")
    if k.check is not None:
        k.check(summary)
    return k


def flat_samples(kind: BenchKind, summary: Mapping[str, Any],
                 samples: Mapping[int, Mapping[str, Any]] | None) -> dict[str, Any]:
    """``{part index: {name: array}}`` as the store keeps it: ``{"<part>/<name>": array}``."""
    if not samples:
        return {}
    n = kind.parts(summary) if kind.parts is not None else 0
    flat: dict[str, Any] = {}
    for i, per in samples.items():
        i = int(i)
        if not 0 <= i < n:
            raise AssayError(f"samples for {kind.part} {i}, but the run has {n} {kind.part}(s)")
        for name, values in per.items():
            if "/" in name:
                raise AssayError(f"a sample name has no '/': {name!r}")
            flat[f"{i}/{name}"] = values
    return flat


def is_ref(text: str) -> bool:
    """Whether ``text`` can be a stored benchmark's ref (hex digits, at most 32)."""
    return bool(text) and len(text) <= 32 and all(c in "0123456789abcdef" for c in text)


def given_name(summary: Any) -> str | None:
    """The model name the user gave a run (``--model-name``): the summary's ``model_name``, or its
    ``config``'s (quality and embed keep their configuration there); None when none was given."""
    if not isinstance(summary, Mapping):
        return None
    config = summary.get("config")
    for v in (summary.get("model_name"), config.get("model_name") if isinstance(config, Mapping) else None):
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


@lru_cache(maxsize=4096)
def _named_model(spelling: str) -> str:
    from assay.models.spec import parse_model_spec

    if "://" not in spelling and ":" not in spelling:
        return spelling                     # a bare name (what perf stores): no spec to read
    try:
        spec = parse_model_spec(spelling, "model")
    except AssayError:
        return spelling                     # python:module:function and other names of their own
    return spec.model.strip() if spec.kind in ("http", "openai", "azure") and spec.model and spec.model.strip() \
        else spelling


def model_identity(model: Any, summary: Any = None, aliases: Mapping[str, str] | None = None) -> str:
    """Which model a stored result is of: one name for one model, however a kind spelled it.

    1. the name the user gave (:func:`given_name` of ``summary``: ``--model-name``), else
    2. the model the spelling ``model`` names: ``http://HOST/v1#NAME`` (what quality and embed
       store), ``openai:NAME`` and ``azure:NAME`` are ``NAME`` (what perf stores); any other
       spelling (a ``python:`` pipeline, a ``local:`` file, a URL that names no model, a bare name)
       is its own identity;
    3. ``aliases`` (``{spelling or identity: identity}``, ``--alias``): looked up by the spelling,
       then by the identity of step 1 or 2.
    Returns ``(no model)`` for a result that names none."""
    spelling = str(model or "").strip()
    name = given_name(summary) or (_named_model(spelling) if spelling else "")
    if aliases:
        name = aliases.get(spelling) or aliases.get(name) or name
    return name.strip() or "(no model)"


def store_benchmark(store: Any, kind: str | BenchKind, summary: Mapping[str, Any],
                    samples: Mapping[int, Mapping[str, Any]] | None = None, *, name: str | None = None,
                    run_id: str | None = None) -> str:
    """Store a result of ``kind`` (its summary, checked, and its samples per part); returns its ref.

    The ref is the summary's hex id (its ``ref_field``; a fresh one when it has none); the name is
    ``name``, else the summary's name, else its id, else the ref; the model is the name the user gave
    (:func:`given_name`, ``--model-name``), else the summary's; the track and (for a ``dated`` kind)
    the time are the summary's."""
    from assay.store import new_ref

    k = check_summary(kind, summary)
    flat = flat_samples(k, summary, samples)
    sid = str(summary.get(k.ref_field) or "").strip().lower()
    ref = sid if is_ref(sid) else new_ref()
    store.add_benchmark(kind=k.name, name=name or summary.get("name") or sid or ref,
                        model=given_name(summary) or summary.get("model"),
                        task=k.task(summary), metrics=k.headline(summary), details=summary, run_id=run_id,
                        track=summary.get("track"), created_at=summary.get("created_at") if k.dated else None,
                        ref=ref, samples=flat)
    return ref


__all__ = ["KINDS", "KIND_MODULES", "BenchKind", "check_summary", "find_kind", "flat_samples", "get_kind",
           "given_name", "is_ref", "kind_names", "model_identity", "register", "store_benchmark"]
