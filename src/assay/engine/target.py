"""Calling the application under test: a Python callable (sync or async).

The callable's parameters are filled by name from the record: canonical fields
(``query``, ``history``, ``contexts`` ...) or source columns kept in ``Record.extra``.
It returns the answer as a string, or a dict with ``response`` (or ``answer``) and
optionally ``contexts`` / ``context``, ``usage`` and ``trace`` (an MLflow trace, from
which retrieved context and token usage are extracted). Its latency is measured. A target
that holds a conversation itself (``assay redteam``'s crescendo) may also return ``query``
(the last message it answered) and ``history`` (the messages before it), which replace the
row's own.

A target given as a string is loaded by :func:`load_target`: ``module:function`` (imported
with the current directory importable) or an OpenAI-compatible chat endpoint
``http(s)://HOST:PORT/v1#MODEL`` (see :class:`EndpointApp`).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from assay.errors import AssayError
from assay.records import CANONICAL_FIELDS, Document, Message, Record, Usage


class TargetError(Exception):
    """The target raised or returned something unusable for one row."""


class Target:
    def __init__(self, fn: Callable[..., Any] | str):
        if isinstance(fn, str):
            fn = load_target(fn)
        if not callable(fn):
            raise AssayError(f"target must be a callable, got {type(fn).__name__}")
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            type(fn).__call__)
        sig = inspect.signature(fn)
        self.params = [p for p in sig.parameters.values()
                       if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        self.name = getattr(fn, "target_name", None) or getattr(fn, "__qualname__", type(fn).__name__)

    def _kwargs(self, record: Record) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        for p in self.params:
            if p.name in CANONICAL_FIELDS and getattr(record, p.name) is not None:
                value = getattr(record, p.name)
                if p.name in ("history", "contexts"):
                    value = [m.model_dump(exclude_none=True) for m in value]
                kw[p.name] = value
            elif p.name in record.extra:
                kw[p.name] = record.extra[p.name]
            elif p.name == "question" and record.query is not None:
                kw[p.name] = record.query
            elif p.default is p.empty:
                raise TargetError(f"target parameter {p.name!r} has no value in this row")
        return kw

    async def call(self, record: Record) -> Record:
        """Return a copy of ``record`` filled with the target's answer."""
        kw = self._kwargs(record)
        start = time.perf_counter()
        try:
            if self.is_async:
                out = await self.fn(**kw)
            else:
                out = await asyncio.to_thread(self.fn, **kw)
        except Exception as exc:
            raise TargetError(f"target raised {type(exc).__name__}: {exc}") from exc
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        return fill(record, out, elapsed_ms)


def fill(record: Record, out: Any, elapsed_ms: float) -> Record:
    update: dict[str, Any] = {}
    usage = Usage(latency_ms=elapsed_ms)
    if isinstance(out, str):
        update["response"] = out
    elif isinstance(out, dict):
        response = out.get("response", out.get("answer"))
        if response is not None and not isinstance(response, str):
            raise TargetError(f"target returned a non-text response ({type(response).__name__})")
        update["response"] = response
        trace = out.get("trace")
        if trace is not None:
            from assay.formats.mlflow_trace import trace_to_record

            traced = trace_to_record(trace)
            if traced.contexts:
                update["contexts"] = traced.contexts
            if traced.usage is not None:
                usage = traced.usage.model_copy(update={"latency_ms": elapsed_ms})
            if traced.tool_calls:
                update["tool_calls"] = traced.tool_calls
        update.update(_conversation(out))
        ctx = out.get("contexts", out.get("context"))
        if ctx is not None:
            update["contexts"] = _documents(ctx)
        if isinstance(out.get("usage"), dict):
            u = out["usage"]
            usage = Usage(
                input_tokens=u.get("input_tokens", u.get("prompt_tokens")),
                output_tokens=u.get("output_tokens", u.get("completion_tokens")),
                total_tokens=u.get("total_tokens"),
                latency_ms=elapsed_ms,
            )
        extra = {f"target.{k}": v for k, v in out.items()
                 if k not in ("response", "answer", "contexts", "context", "usage", "trace", "query", "history")}
        if extra:
            update["extra"] = {**record.extra, **extra}
    elif out is None:
        raise TargetError("target returned None")
    else:
        raise TargetError(f"target returned {type(out).__name__}; expected a string or a dict")
    update["usage"] = usage
    return record.model_copy(update=update)


def _conversation(out: dict[str, Any]) -> dict[str, Any]:
    """The ``query`` and ``history`` a conversing target returned, checked."""
    update: dict[str, Any] = {}
    if "query" in out:
        if not isinstance(out["query"], str):
            raise TargetError(f"target returned a non-text query ({type(out['query']).__name__})")
        update["query"] = out["query"]
    if out.get("history") is not None:
        try:
            update["history"] = [Message.model_validate(m) for m in out["history"]] or None
        except (TypeError, ValueError) as exc:
            raise TargetError(f"target returned an unusable history: {exc}") from None
    return update


def _documents(ctx: Any) -> list[Document]:
    """The target's retrieved context, read as the input formats read ``context`` columns."""
    from assay.formats.fields import FieldError, documents

    try:
        docs = documents(ctx, "contexts", string_ok=True) or []
        return [Document.model_validate(d) for d in docs]
    except (FieldError, ValueError) as exc:
        raise TargetError(f"target returned unusable contexts: {exc}") from None


class EndpointApp:
    """An OpenAI-compatible chat endpoint as the application under test.

    ``spec`` is ``http(s)://HOST:PORT/v1#MODEL`` (no ``#MODEL``: the first model the server
    lists; a key, if the server wants one, from ``ASSAY_TARGET_API_KEY``). Each call sends the
    conversation (``history`` then ``query``) to ``/chat/completions``; retrieved ``contexts``,
    when the row has them, go first as a system message that lists the documents. The answer's
    text is the response; the server's token usage is kept; citations the server returns in
    ``choices[0].message.context.citations`` (Azure "on your data" style) become the contexts.
    Retries on 429/5xx/timeouts go through :class:`~assay.models.limiter.Limiter`; nothing is
    cached (an application is called afresh).
    """

    def __init__(self, spec: str, *, max_tokens: int | None = None, temperature: float | None = None,
                 timeout: float = 120.0, max_attempts: int = 4, system: str | None = None):
        from assay.models import resolve_spec

        self.spec = resolve_spec(spec, role="target")
        self.base_url, self.model_name = self.spec.base_url or "", self.spec.model
        self.target_name = self.spec.spec
        self.max_tokens, self.temperature, self.system = max_tokens, temperature, system
        self._timeout, self._max_attempts = timeout, max_attempts
        self._api_key = os.environ.get("ASSAY_TARGET_API_KEY")
        self._model: Any = None

    def __repr__(self) -> str:
        return f"EndpointApp({self.target_name!r})"

    @property
    def limiter(self) -> Any:
        """The limiter of the endpoint's calls (retries, backoff, the run's circuit breaker)."""
        return self._llm().limiter

    def _llm(self) -> Any:
        if self._model is None:
            from assay.models import resolve

            # The engine bounds concurrency itself; the limiter (64 in flight) is for retries and backoff.
            self._model = resolve(self.spec, role="target", timeout=self._timeout,
                                  max_attempts=self._max_attempts, api_key=self._api_key)
        return self._model

    @staticmethod
    def messages(query: str, history: list[dict[str, Any]] | None = None,
                 contexts: list[dict[str, Any]] | None = None, system: str | None = None) -> list[dict[str, Any]]:
        """The chat messages sent for one call."""
        msgs: list[dict[str, Any]] = []
        parts = [system] if system else []
        if contexts:
            docs = []
            for i, d in enumerate(contexts, 1):
                head = d.get("title") or d.get("doc_uri") or d.get("id") or f"document {i}"
                docs.append(f"[{i}] {head}\n{d.get('content') or ''}")
            parts.append("Documents:\n\n" + "\n\n".join(docs))
        if parts:
            msgs.append({"role": "system", "content": "\n\n".join(parts)})
        for m in history or []:
            if m.get("role") in ("system", "user", "assistant") and m.get("content") is not None:
                msgs.append({"role": m["role"], "content": m["content"]})
        msgs.append({"role": "user", "content": query})
        return msgs

    async def __call__(self, query: str, history: list[dict[str, Any]] | None = None,
                       contexts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        from assay.models.base import ModelCallError

        try:
            gen = await self._llm().generate(self.messages(query, history, contexts, self.system),
                                             max_tokens=self.max_tokens, temperature=self.temperature)
        except ModelCallError as exc:
            raise TargetError(f"endpoint {self.target_name}: {exc}") from None
        out: dict[str, Any] = {"response": gen.text,
                               "usage": {"input_tokens": gen.usage.input_tokens,
                                         "output_tokens": gen.usage.output_tokens,
                                         "total_tokens": gen.usage.total_tokens}}
        try:
            ctx = gen.raw["choices"][0]["message"].get("context")
        except (KeyError, IndexError, TypeError, AttributeError):
            ctx = None
        if ctx:
            out["contexts"] = ctx
        return out

    async def aclose(self) -> None:
        if self._model is not None:
            await self._model.aclose()


def load_target(spec: str) -> Callable[..., Any]:
    """The application named by ``spec``: ``module:function`` (the current directory is
    importable), or an OpenAI-compatible endpoint ``http(s)://HOST:PORT/v1#MODEL`` (any
    ``scheme://`` string is read as an endpoint, so a wrong scheme is reported as one)."""
    s = spec.strip()
    if re.match(r"^[a-z][a-z0-9+.-]*://", s, re.I):
        return EndpointApp(s)
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise AssayError(f"--target {spec!r} must look like module:function")
    sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except Exception as exc:
        raise AssayError(f"--target: cannot import {mod_name!r}: {type(exc).__name__}: {exc}") from None
    try:
        fn = getattr(mod, attr)
    except AttributeError:
        raise AssayError(f"--target: module {mod_name!r} has no attribute {attr!r}") from None
    return fn
