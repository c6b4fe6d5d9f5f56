"""Judge specs: the strings ``--judge`` accepts, parsed into data, built into models.

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
=====================================  ==============================================
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from assay.errors import AssayError

ACCEPTED_FORMS = ("openai:MODEL (e.g. openai:gpt-4o-mini)",
                  "azure:DEPLOYMENT (e.g. azure:my-deployment)",
                  "http(s)://HOST:PORT/v1#MODEL (e.g. http://127.0.0.1:8000/v1#qwen2.5-7b)",
                  "local:/path/to/model.gguf")


class JudgeSpecError(AssayError):
    pass


@dataclass(frozen=True)
class JudgeSpec:
    """A parsed judge spec. ``kind``: openai | azure | http | local."""

    kind: str
    model: str | None = None       # model name, or the Azure deployment
    base_url: str | None = None    # http kind
    path: str | None = None        # local kind
    spec: str = ""

    def build(self, **kw: Any) -> Any:
        """The backend (a :class:`~assay.models.base.ChatModel`); ``kw`` go to its constructor."""
        from assay.models.openai_compat import OpenAICompat

        if self.kind == "openai":
            return OpenAICompat.openai(self.model or "", **kw)
        if self.kind == "azure":
            return OpenAICompat.azure(self.model or "", **kw)
        if self.kind == "http":
            return OpenAICompat.endpoint(self.base_url or "", self.model, **kw)
        if self.kind == "local":
            from assay.models.local import local_model

            return local_model(self.path or "", **kw)
        raise JudgeSpecError(f"unknown judge kind {self.kind!r}")  # pragma: no cover

    def __str__(self) -> str:
        return self.spec


def parse_judge_spec(spec: str) -> JudgeSpec:
    """Parse a ``--judge`` value; unknown forms raise :class:`AssayError` listing the accepted ones."""
    s = (spec or "").strip()
    forms = "; ".join(ACCEPTED_FORMS)
    if not s:
        raise JudgeSpecError(f"empty judge spec; accepted forms: {forms}")
    if re.match(r"^https?://", s, re.I):
        url, _, model = s.partition("#")
        url = url.rstrip("/")
        if not re.match(r"^https?://[^/\s#?]+", url, re.I):
            raise JudgeSpecError(f"judge {spec!r}: no host in the URL; accepted forms: {forms}")
        return JudgeSpec("http", model=model.strip() or None, base_url=url, spec=s)
    prefix, sep, rest = s.partition(":")
    prefix = prefix.strip().lower()
    rest = rest.strip()
    if sep and prefix in ("openai", "azure"):
        if not rest:
            what = "model" if prefix == "openai" else "deployment"
            raise JudgeSpecError(f"judge {spec!r}: no {what} named; accepted forms: {forms}")
        return JudgeSpec(prefix, model=rest, spec=s)
    if sep and prefix == "local":
        if not rest:
            raise JudgeSpecError(f"judge {spec!r}: no model file named; accepted forms: {forms}")
        return JudgeSpec("local", path=os.path.expanduser(rest), spec=s)
    raise JudgeSpecError(f"unknown judge {spec!r}; accepted forms: {forms}")
