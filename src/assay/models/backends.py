"""The model backends, one row each: the spec form that names one, the classes that build it,
whether it speaks HTTP, and what it does differently per role.

Everything that tells backends apart reads this table: the spec grammar
(:func:`assay.models.spec.parse_model_spec`), the accepted forms its errors list, the roles that
may use a backend and the defaults they give it (:func:`assay.models.resolve`). A new backend is
its module plus one :class:`Backend` row in :data:`BUILTIN`::

    Backend("ollama", "ollama:MODEL (e.g. ollama:llama3.2)",
            chat="assay.models.ollama:OllamaModel", http=True)

The classes are named as ``"module:attribute"`` strings and imported only when a spec of that
kind is built, so reading the table (and ``assay --help``) loads no backend.

Another package adds a backend without forking assay through the ``assay.backends`` entry-point
group: the entry point names a :class:`Backend` row, e.g. in its ``pyproject.toml``::

    [project.entry-points."assay.backends"]
    toy = "toy_assay.backend:BACKEND"

Those rows are read (:func:`plugin_backends`) only when a spec or a kind matches no built-in
row; a plugin row cannot replace a built-in kind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from assay.errors import AssayError

log = logging.getLogger("assay.models")

#: the entry-point group that third-party backends are registered under
ENTRY_POINT_GROUP = "assay.backends"
#: the roles a backend serves unless its row says otherwise (not ``target``: an application
#: under test is an endpoint)
MODEL_ROLES = ("judge", "simulator", "model", "embedder")
#: how a spec string names a backend
SYNTAXES = ("prefix", "url", "word")


@dataclass(frozen=True)
class Backend:
    """One backend: how a spec names it and how it is built.

    ``kind``: the :attr:`ModelSpec.kind <assay.models.spec.ModelSpec.kind>` it parses to; for the
    ``prefix`` syntax also the prefix. ``form``: the accepted form as error messages list it
    (``""``: not listed). ``syntax``: ``"prefix"`` (``KIND:ARGUMENT``, the argument filling the
    spec's ``argument`` field, ``"model"`` or ``"path"``; a path has ``~`` expanded),
    ``"url"`` (``http(s)://HOST/...#MODEL``: the spec's ``base_url`` and ``model``) or ``"word"``
    (the kind alone, any case). ``missing``: the argument's name in "no ... named".

    ``chat`` / ``embed``: ``"module:attribute"`` of the callable that builds the chat model / the
    embedding model (``embed`` None: ``chat`` builds both), called with the spec's argument
    (``prefix``), its base URL and model (``url``) or nothing (``word``), then the backend
    keyword arguments. ``http``: an HTTP backend (it takes the run's ``timeout``). ``roles``: the
    roles that may use it. ``role_env``: per role, backend keyword arguments read from the
    environment when not given (``{"target": {"api_key": "ASSAY_TARGET_API_KEY"}}``)."""

    kind: str
    form: str = ""
    syntax: str = "prefix"
    argument: str = "model"
    missing: str = "model"
    chat: str | None = None
    embed: str | None = None
    http: bool = False
    roles: tuple[str, ...] = MODEL_ROLES
    role_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.syntax not in SYNTAXES:
            raise ValueError(f"backend {self.kind!r}: syntax must be one of {SYNTAXES}, not {self.syntax!r}")
        if self.argument not in ("model", "path"):
            raise ValueError(f"backend {self.kind!r}: argument must be 'model' or 'path', not {self.argument!r}")
        if self.chat is None and self.embed is None:
            raise ValueError(f"backend {self.kind!r} names no class to build (chat= or embed=)")

    def arguments(self, spec: Any) -> tuple[Any, ...]:
        """What the builder is called with, read from the parsed ``spec``."""
        if self.syntax == "prefix":
            return (getattr(spec, self.argument) or "",)
        if self.syntax == "url":
            return (spec.base_url or "", spec.model)
        return ()

    def build(self, spec: Any, **kw: Any) -> Any:
        """The bare chat model for ``spec`` (no limits or cache); ``kw`` go to its builder."""
        if self.chat is None:
            raise AssayError(f"{spec} is an embedding model only: it can be an embedder, not a chat model")
        return load_attribute(self.chat)(*self.arguments(spec), **kw)

    def build_embedder(self, spec: Any, **kw: Any) -> Any:
        """The bare embedding model for ``spec``: ``embed``'s, else ``chat``'s."""
        return load_attribute(self.embed or self.chat or "")(*self.arguments(spec), **kw)

    def env_defaults(self, role: str) -> Mapping[str, str]:
        """Backend keyword argument -> the environment variable it is read from, for ``role``."""
        return self.role_env.get(role, {})


_OPENAI = "assay.models.openai_compat:OpenAICompat"

#: the backends assay ships, in the order their forms are listed
BUILTIN: tuple[Backend, ...] = (
    Backend("openai", "openai:MODEL (e.g. openai:gpt-4o-mini)", chat=f"{_OPENAI}.openai", http=True),
    Backend("azure", "azure:DEPLOYMENT (e.g. azure:my-deployment)", missing="deployment",
            chat=f"{_OPENAI}.azure", http=True),
    Backend("http", "http(s)://HOST:PORT/v1#MODEL (e.g. http://127.0.0.1:8000/v1#qwen2.5-7b)", syntax="url",
            chat=f"{_OPENAI}.endpoint", http=True, roles=(*MODEL_ROLES, "target"),
            role_env={"target": {"api_key": "ASSAY_TARGET_API_KEY"}}),
    Backend("local", "local:/path/to/model.gguf", argument="path", missing="model file",
            chat="assay.models.local:local_model", embed="assay.models.local_embedder:local_embedder"),
    Backend("embedded", syntax="word", chat="assay.models.embedded:embedded_judge",
            embed="assay.models.embedded_embedder:embedded_embedder"),
    Backend("anthropic", "anthropic:MODEL (e.g. anthropic:claude-sonnet-4-5)",
            chat="assay.models.anthropic:AnthropicModel", http=True, roles=("judge", "simulator", "model")),
    Backend("gemini", "gemini:MODEL (e.g. gemini:gemini-2.5-flash)",
            chat="assay.models.gemini:GeminiModel", http=True, roles=("judge", "simulator", "model")),
    Backend("vertex", "vertex:MODEL (e.g. vertex:gemini-2.5-flash)",
            chat="assay.models.vertex:VertexModel", http=True, roles=("judge", "simulator", "model")),
    Backend("bedrock", "bedrock:MODEL_ID (e.g. bedrock:anthropic.claude-3-5-haiku-20241022-v1:0)", missing="model id",
            chat="assay.models.bedrock:BedrockModel", http=True, roles=("judge", "simulator", "model")),
    Backend("litellm", "litellm:MODEL (any LiteLLM provider; pip install litellm)",
            chat="assay.models.litellm_backend:LiteLLMModel", http=True, roles=("judge", "simulator", "model")),
)
_BY_KIND = {b.kind: b for b in BUILTIN}


def load_attribute(target: str) -> Callable[..., Any]:
    """The object ``"module:attribute.attribute"`` names, its module imported now."""
    module, _, path = target.partition(":")
    obj: Any = import_module(module)
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def plugin_backends() -> tuple[Backend, ...]:
    """The rows other packages register under :data:`ENTRY_POINT_GROUP`, read now. An entry point
    that fails to load, is not a :class:`Backend` or reuses a built-in kind is skipped with a
    warning."""
    from importlib.metadata import entry_points

    rows: list[Backend] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            row = ep.load()
        except Exception as exc:  # a broken plugin costs its backend, not every spec
            log.warning("model backend entry point %r did not load: %s: %s", ep.name, type(exc).__name__, exc)
            continue
        if not isinstance(row, Backend):
            log.warning("model backend entry point %r is a %s, not an assay.models.backends.Backend",
                        ep.name, type(row).__name__)
        elif row.kind in _BY_KIND:
            log.warning("model backend entry point %r reuses the built-in kind %r; skipped", ep.name, row.kind)
        else:
            rows.append(row)
    return tuple(rows)


def find_backend(kind: str) -> Backend | None:
    """The row of ``kind``: a built-in one, else a plugin's (entry points read only then)."""
    row = _BY_KIND.get(kind)
    if row is not None:
        return row
    return next((b for b in plugin_backends() if b.kind == kind), None)
