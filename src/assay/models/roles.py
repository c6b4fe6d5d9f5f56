"""One way from a model spec to a model ready for calls: :func:`resolve`.

Judges, endpoint targets and simulating models are all named by the grammar of
:func:`~assay.models.spec.parse_model_spec` and all end as the backend behind one
:class:`~assay.models.limited.LimitedModel` (limits, retries, call cache, usage). What differs
between them is the ``role``, and only in these defaults:

==========  ===============  ========  =====  ==================  ==========================
role        concurrency      attempts  cache  no spec             forms
==========  ===============  ========  =====  ==================  ==========================
judge       the backend's    6         yes    the embedded model  all
simulator   the backend's    6         yes    the embedded model  all; ``""`` and
                                                                  ``"default"`` mean embedded
model       the backend's    4         yes    (required)          all (a model under benchmark)
target      64               4         no     (required)          ``http(s)://...`` only; key
                                                                  from ``ASSAY_TARGET_API_KEY``
embedder    the backend's    4         yes    the embedded        all, built as embedding
                                              embedding model     models (``embedded``:
                                                                  multilingual-e5-small)
==========  ===============  ========  =====  ==================  ==========================

Which backends a role may use, and the keyword arguments a role reads from the environment for
one (a target's key), are the backend's row in :mod:`assay.models.backends`; an HTTP backend
(the row's ``http``) also gets the ``timeout``. The backend's concurrency is its ``default_concurrency`` (32 OpenAI, 16 Azure, 8 other
endpoints, 2 in-process). An embedder's spec names the same things as a judge's, built for
embeddings: ``embedded`` is :class:`~assay.models.embedded_embedder.EmbeddedEmbedder`,
``local:/x.gguf`` a GGUF loaded for embeddings, the others their ``/embeddings`` endpoint.
A target's limiter is there for retries and backoff: the engine bounds its calls in flight
itself, and an application's answers are never cached. In every role a call that times out is
tried at most twice (:attr:`~assay.models.limiter.RetryPolicy.timeout_attempts`), and
``timeout`` bounds both the limiter's wait and an HTTP backend's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from assay.errors import AssayError
from assay.models.backends import BUILTIN, find_backend
from assay.models.base import gives_embeddings
from assay.models.cache import open_cache
from assay.models.limited import LimitedModel
from assay.models.limiter import Limiter
from assay.models.pricing import parse_price
from assay.models.spec import ModelSpec, ModelSpecError, backend_of, parse_model_spec

DEFAULT_TIMEOUT = 120.0
_DEFAULT: Any = object()


@dataclass(frozen=True)
class Role:
    """The defaults :func:`resolve` uses for one kind of caller."""

    name: str
    concurrency: int | None        # None: the backend's ``default_concurrency``
    max_attempts: int
    cache: bool                    # open the call cache ($ASSAY_CACHE, else ./.assay/cache.sqlite)
    default: str | None            # the spec used when none is given (None: one is required)
    blank_is_default: bool         # "" and "default" also stand for ``default``
    wrong_kind: str = ""           # the error for a backend whose row lists not this role; ``{spec!r}`` filled in
    embeddings: bool = False       # build the spec as an embedding model

    @property
    def kinds(self) -> tuple[str, ...]:
        """The built-in backend kinds this role accepts (each backend's row lists its roles)."""
        return tuple(b.kind for b in BUILTIN if self.name in b.roles)


ROLES: dict[str, Role] = {
    "judge": Role("judge", None, 6, True, "embedded", False),
    "simulator": Role("simulator", None, 6, True, "embedded", True),
    # a model under benchmark (``assay bench quality --model``): any kind, calls cached
    "model": Role("model", None, 4, True, None, False),
    # an application under test: the endpoint backends' rows list it (key: ASSAY_TARGET_API_KEY)
    "target": Role("target", 64, 4, False, None, False,
                   wrong_kind="target {spec!r}: an endpoint target must look like http://HOST:PORT/v1#MODEL"),
    # a model that embeds texts (``assay bench embed --model``): vectors cached per text
    "embedder": Role("embedder", None, 4, True, "embedded", False, embeddings=True),
}


def role_defaults(role: str) -> Role:
    try:
        return ROLES[role]
    except KeyError:
        raise AssayError(f"unknown model role {role!r}; roles: {', '.join(ROLES)}") from None


def resolve_spec(spec: str | ModelSpec | None, *, role: str = "judge") -> ModelSpec:
    """The parsed spec a ``role`` accepts: its default for None (and, for simulators, ``""`` or
    ``"default"``); a kind the role does not take raises :class:`AssayError`."""
    r = role_defaults(role)
    if spec is None or (r.blank_is_default and isinstance(spec, str)
                        and spec.strip().lower() in ("", "default")):
        if r.default is None:
            raise ModelSpecError(f"a {role} needs a model spec")
        spec = r.default
    ms = parse_model_spec(spec, role) if isinstance(spec, str) else spec
    row = find_backend(ms.kind)
    if row is None or role not in row.roles:
        raise ModelSpecError(r.wrong_kind.format(spec=spec) or f"a {role} cannot be {ms.kind!r}")
    return ms


def resolve(spec: Any = None, *, role: str = "judge", concurrency: int | None = None,
            rpm: float | None = None, tpm: float | None = None, timeout: float | None = DEFAULT_TIMEOUT,
            max_attempts: int | None = None, timeout_attempts: int | None = None, cache: Any = _DEFAULT,
            price: Any = None, **backend: Any) -> LimitedModel:
    """The model for ``spec`` as ``role`` (``judge``, ``simulator``, ``model``, ``target`` or
    ``embedder``) uses it.

    ``spec``: a spec string, a :class:`~assay.models.spec.ModelSpec`, a bare backend (a
    ChatModel, wrapped here), a :class:`LimitedModel` (returned as it is: it keeps its own
    limiter and cache), or None for the role's default. ``concurrency`` / ``max_attempts``:
    None for the role's default; ``rpm`` / ``tpm`` / ``timeout`` / ``timeout_attempts`` go to the
    :class:`~assay.models.limiter.Limiter` (``timeout`` also to an HTTP backend built here, whose
    own timeout would otherwise cut a longer wait short). ``cache``: a :class:`~assay.models.cache.CallCache`,
    a path, or None; by default the role's. ``price``: USD per 1M input and output tokens,
    ``(in, out)`` or ``"in,out"``, for a model the price table does not know. ``backend``
    kwargs go to the backend's constructor.
    """
    if isinstance(spec, LimitedModel):
        return spec
    r = role_defaults(role)
    if spec is None or isinstance(spec, (str, ModelSpec)):
        ms = resolve_spec(spec, role=role)
        row = backend_of(ms.kind)
        for arg, env in row.env_defaults(role).items():
            if backend.get(arg) is None:
                backend[arg] = os.environ.get(env)
        if row.http and timeout is not None:
            backend.setdefault("timeout", timeout)
        model = row.build_embedder(ms, **backend) if r.embeddings else row.build(ms, **backend)
    else:
        model = spec
    if r.embeddings and not gives_embeddings(model):
        raise AssayError(f"{getattr(model, 'name', type(model).__name__)} cannot be an {role}: it has no embed method")
    conc = concurrency or r.concurrency
    limiter = Limiter.for_model(model, rpm=rpm, tpm=tpm, timeout=timeout, timeout_attempts=timeout_attempts,
                                max_attempts=r.max_attempts if max_attempts is None else max_attempts,
                                **({"concurrency": conc} if conc else {}))
    if cache is _DEFAULT:
        cache = open_cache() if r.cache else None
    elif isinstance(cache, (str, os.PathLike)):
        cache = open_cache(cache)
    return LimitedModel(model, limiter, cache,
                        price=parse_price(price, where=f"{role} price") if price is not None else None)
