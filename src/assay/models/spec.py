"""Model specs: the one grammar for the strings that name a model (``--judge``, ``--attacker``,
``--model``, an endpoint ``--target``), parsed into data and built into backends.

=====================================  ==============================================
``openai:gpt-4o-mini``                 OpenAI (``OPENAI_API_KEY``; ``OPENAI_BASE_URL``)
``azure:my-deployment``                Azure OpenAI (``AZURE_OPENAI_ENDPOINT``,
                                       ``AZURE_OPENAI_API_KEY``, ``OPENAI_API_VERSION`` or
                                       ``AZURE_OPENAI_API_VERSION``)
``http://127.0.0.1:8000/v1#model``     any OpenAI-compatible server (vLLM, Ollama,
                                       llama.cpp server, LM Studio); key, if any, from
                                       ``ASSAY_JUDGE_API_KEY``; no ``#model``: the first
                                       model the server lists
``local:/path/model.gguf``             a GGUF run in-process (llama.cpp)
``embedded``                           the embedded smoke-test model (Gemma 3 270M, see
                                       :mod:`assay.models.embedded`)
=====================================  ==============================================

:func:`parse_model_spec` only reads the string, by the rows of the backend table
(:mod:`assay.models.backends`: built-in, then those other packages register); which forms a
caller accepts and the defaults it builds them with (limits, cache, keys) are chosen by
:func:`assay.models.resolve`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, NoReturn

from assay.errors import AssayError
from assay.models.backends import BUILTIN, Backend, find_backend, plugin_backends

#: the forms of the built-in backends, as error messages list them
ACCEPTED_FORMS = tuple(b.form for b in BUILTIN if b.form)
#: the kinds of the built-in backends
KINDS = tuple(b.kind for b in BUILTIN)


class ModelSpecError(AssayError):
    """A model spec string that is not one of the accepted forms."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec. ``kind``: the backend's (openai | azure | http | local | embedded, or
    one another package registers: :mod:`assay.models.backends`)."""

    kind: str
    model: str | None = None       # model name, or the Azure deployment
    base_url: str | None = None    # a ``url`` form (http)
    path: str | None = None        # a ``path`` argument (local)
    spec: str = ""

    def build(self, **kw: Any) -> Any:
        """The bare backend (a :class:`~assay.models.base.ChatModel`, no limits or cache);
        ``kw`` go to its constructor."""
        return backend_of(self.kind).build(self, **kw)

    def build_embedder(self, **kw: Any) -> Any:
        """The bare backend as an embedding model (an :class:`~assay.models.base.EmbeddingModel`):
        ``embedded`` is the embedded embedding model (multilingual-e5-small), ``local`` a GGUF
        loaded for embeddings, the endpoint kinds their ``/embeddings`` API."""
        return backend_of(self.kind).build_embedder(self, **kw)

    def __str__(self) -> str:
        return self.spec


def backend_of(kind: str) -> Backend:
    """The backend table's row for ``kind`` (:class:`ModelSpecError` when none has it)."""
    row = find_backend(kind)
    if row is None:
        raise ModelSpecError(f"unknown judge kind {kind!r}")
    return row


def accepted_forms() -> tuple[str, ...]:
    """The forms every backend accepts, the built-in ones first (entry points read now)."""
    return ACCEPTED_FORMS + tuple(b.form for b in plugin_backends() if b.form)


def parse_model_spec(spec: str, role: str = "judge") -> ModelSpec:
    """Parse a model spec; unknown forms raise :class:`ModelSpecError` listing the accepted ones.
    ``role`` names the model in messages (judge, target, simulator)."""
    s = (spec or "").strip()
    if not s:
        raise ModelSpecError(f"empty {role} spec; accepted forms: {'; '.join(accepted_forms())}")
    for row in BUILTIN:
        found = _match(row, s, spec, role)
        if found is not None:
            return found
    for row in plugin_backends():
        found = _match(row, s, spec, role)
        if found is not None:
            return found
    raise ModelSpecError(f"unknown {role} {spec!r}; accepted forms: {'; '.join(accepted_forms())}")


def _match(row: Backend, s: str, spec: str, role: str) -> ModelSpec | None:
    """``s`` (``spec`` stripped) parsed as ``row``'s form; None when it is not that form."""
    if row.syntax == "word":
        return ModelSpec(row.kind, spec=row.kind) if s.lower() == row.kind else None
    if row.syntax == "url":
        if not re.match(r"^https?://", s, re.I):
            return None
        url, _, model = s.partition("#")
        url = url.rstrip("/")
        if not re.match(r"^https?://[^/\s#?]+", url, re.I):
            _bad(spec, role, "no host in the URL")
        return ModelSpec(row.kind, model=model.strip() or None, base_url=url, spec=s)
    prefix, sep, rest = s.partition(":")
    if not sep or prefix.strip().lower() != row.kind:
        return None
    rest = rest.strip()
    if not rest:
        _bad(spec, role, f"no {row.missing} named")
    value = os.path.expanduser(rest) if row.argument == "path" else rest
    return ModelSpec(row.kind, spec=s, **{row.argument: value})


def _bad(spec: str, role: str, why: str) -> NoReturn:
    raise ModelSpecError(f"{role} {spec!r}: {why}; accepted forms: {'; '.join(accepted_forms())}")


# The names judges used before targets and simulators shared the grammar.
JudgeSpec = ModelSpec
JudgeSpecError = ModelSpecError
parse_judge_spec = parse_model_spec
