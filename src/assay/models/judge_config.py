"""The configuration of a judge as a run records it (with its judge usage) and ``assay judge probe``
prints it: backend, model, endpoint, streaming, limits, and what the backend has been found to accept."""

from __future__ import annotations

import urllib.parse
from typing import Any

from assay.models.base import gives_distributions


def endpoint(url: str) -> str:
    """``url`` without what may carry a credential: no user or password, no query."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return urllib.parse.urlunsplit((parts.scheme, host + (f":{parts.port}" if parts.port else ""), parts.path, "", ""))


def judge_config(model: Any) -> dict[str, Any]:
    """A judge's configuration as a run records it: backend, model, endpoint (no credentials),
    streaming, limits, and what the backend was found to accept so far."""
    limiter = getattr(model, "limiter", None)
    backend = getattr(model, "model", model) if limiter is not None else model
    base = getattr(backend, "base_url", None)
    cfg: dict[str, Any] = {"name": getattr(backend, "name", None), "backend": type(backend).__name__,
                           "model": getattr(backend, "model", None),
                           "base_url": endpoint(base) if isinstance(base, str) and base else None}
    for attr in ("stream", "reasoning", "region", "location", "json_mode_supported", "logprobs_supported",
                 "transport"):
        v = getattr(backend, attr, None)
        if v is not None and not callable(v):
            cfg[attr] = v
    cfg["distributions"] = gives_distributions(backend)
    if limiter is not None:
        cfg["concurrency"] = getattr(limiter, "concurrency", None)
        cfg["timeout_s"] = getattr(limiter, "timeout", None)
    # stored as JSON with the run: anything that is not a plain value (an in-process model object) is left out
    return {k: v for k, v in cfg.items() if v is None or isinstance(v, (str, int, float, bool))}
