"""The model a quality benchmark asks: one object whatever the backend, with the three kinds of
call the tasks need.

- :meth:`Subject.logliks`: the log-probability of each continuation after a context (multiple
  choice by log-likelihood), on backends that return prompt log-probabilities: the in-process
  llama.cpp model, and ``/v1/completions`` with ``echo`` and ``logprobs`` (vLLM, llama.cpp's
  server). Whether an endpoint does is only known by asking, so the first refusal switches the
  subject to generation for the rest of the run and says so.
- :meth:`Subject.generate`: an answer to a prompt, cut at the task's stop strings. ``api``
  ``completions`` sends the prompt as raw text (what lm-evaluation-harness does with base
  models); ``chat`` sends it as one user message (the only way to reach chat-only endpoints).
- a Python pipeline (``python:module:function``) is called with the prompt and returns text.
- :meth:`Subject.rolling`: a whole document's log-likelihood (``loglikelihood_rolling``) over
  lm-evaluation-harness's rolling windows of ``max_length`` tokens
  (:func:`assay.bench.quality.lmeval.rolling_windows`), so a document longer than the model's context is scored:
  the in-process model cuts them from its own token ids, a server with a tokenizer endpoint from the ids that
  endpoint gives, or of the model's tokenizer the user names (``--tokenizer``, a GGUF file: the server's count of
  each window must agree with it). A server without either is sent the document whole, which is the harness's
  figure only when the document is one window: a longer one (by the server's own count) is refused with one line
  naming the model and the flags, never scored differently.

Model calls go through :func:`assay.models.resolve` (role ``model``): limits, retries and the
call cache, so a resumed or repeated benchmark does not pay twice for the same call.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import orjson

from assay.bench.quality.lmeval import DEFAULT_MAX_LENGTH, rolling_windows
from assay.errors import AssayError
from assay.models import resolve
from assay.models.base import NO_LOGLIKS, Generation, ModelCallError, gives_logliks, read_logliks
from assay.models.spec import parse_model_spec

APIS = ("auto", "chat", "completions")
# The HTTP requests sent for the item being scored (the runner sets a fresh list per item; the
# tasks it starts share it): a log-likelihood call sends one per continuation, a generation one,
# a call answered from the call cache (or by an identical one in flight) none. Retries aside.
SENT: ContextVar[list[int] | None] = ContextVar("assay_quality_sent", default=None)


def _sent(gen: Any, requests: int) -> None:
    got = SENT.get()
    if got is not None and not getattr(gen, "cached", False):
        got.append(requests)


@dataclass(frozen=True)
class Rolling:
    """A document's log-likelihood: over how many windows, and whether the server left its first token
    unscored (llama-cpp-python gives an echoed prompt's first token no log-probability)."""

    loglik: float
    windows: int = 1
    first_token_missing: bool = False


class Subject:
    """The model under benchmark. ``name`` is what results show; ``kind`` its spec kind
    (``python`` for a pipeline); ``api`` how generations are asked; ``loglik`` whether
    log-likelihood scoring is (still) believed to work, and ``loglik_note`` why not."""

    def __init__(self, spec: Any, *, api: str = "auto", concurrency: int | None = None,
                 cache: Any = ..., timeout: float | None = 600.0, max_length: int = DEFAULT_MAX_LENGTH,
                 tokenizer: str | None = None):
        if api not in APIS:
            raise AssayError(f"--api must be one of {', '.join(APIS)}, not {api!r}")
        self.pipeline: Callable[..., Any] | None = None
        self.model: Any = None
        if isinstance(spec, str) and spec.strip().lower().startswith("python:"):
            from assay.engine.target import load_target

            ref = spec.strip()[len("python:"):]
            self.pipeline = load_target(ref)
            self.name, self.kind, self.spec = f"python:{ref}", "python", spec.strip()
            self.api = "pipeline"
        else:
            kind = parse_model_spec(spec, "model").kind if isinstance(spec, str) else "object"
            kw: dict[str, Any] = {"role": "model", "concurrency": concurrency, "timeout": timeout}
            if cache is not ...:
                kw["cache"] = cache
            self.model = resolve(spec, **kw)
            self.name, self.kind, self.spec = self.model.name, kind, str(spec)
            if api == "auto":
                api = "chat" if kind in ("openai", "azure") or not callable(getattr(self.model, "complete", None)) \
                    else "completions"
            self.api = api
        self.loglik = self.model is not None and gives_logliks(self.model)
        self.loglik_note: str | None = None if self.loglik else (
            "a Python pipeline gives no log-probabilities" if self.pipeline is not None
            else f"{self.name} gives no prompt log-probabilities")
        self._loglik_lock = asyncio.Lock()
        self._loglik_checked = self.kind in ("local", "embedded")
        self.max_length = int(max_length)
        rolling_windows(1, self.max_length)           # a bad max_length fails here, not mid-run
        self._tokens: bool | None = None               # whether the server has a tokenizer endpoint
        self.tokenizer: Any = None                     # the model's tokenizer named by the user (--tokenizer)
        if tokenizer:
            if self.pipeline is not None or self.kind in ("local", "embedded"):
                raise AssayError(f"--tokenizer is for a server without a tokenizer endpoint; {self.name} "
                                 f"{'gives no log-probabilities' if self.pipeline else 'tokenizes in process'}")
            from assay.models.local import GgufTokenizer

            self.tokenizer = GgufTokenizer(tokenizer)

    def track_requests(self) -> list[int]:
        """A fresh count of the HTTP requests that the calls made from here on, in this task and
        the tasks it starts, send (:data:`SENT`): the runner takes one per item. Their sum is the
        item's requests."""
        sent: list[int] = []
        SENT.set(sent)
        return sent

    @property
    def stats(self) -> Any:
        return getattr(self.model, "stats", None)

    async def logliks(self, context: str, continuations: Sequence[str]) -> tuple[list[float], list[bool]] | None:
        """Each continuation's log-probability after ``context`` and whether it is the greedy
        one; None when this subject cannot give them (then score by generation)."""
        gen = await self._loglik_call(context, continuations)
        return None if gen is None else read_logliks(gen)

    async def _loglik_call(self, context: str, continuations: Sequence[str], *,
                           document: bool = False) -> Generation | None:
        if not self.loglik:
            return None
        if not self._loglik_checked:
            # The first call finds out whether the endpoint echoes prompt log-probabilities;
            # the others wait for its answer instead of all failing at once.
            async with self._loglik_lock:
                if not self._loglik_checked:
                    got = await self._ask_logliks(context, continuations, document)
                    self._loglik_checked = True
                    return got
        return await self._ask_logliks(context, continuations, document) if self.loglik else None

    async def _ask_logliks(self, context: str, continuations: Sequence[str], document: bool) -> Generation | None:
        try:
            gen = await self.model.loglikelihood(context, list(continuations))
            _sent(gen, len(continuations))
        except ModelCallError as exc:
            if exc.kind not in ("bad_request", "not_found", "bad_response"):
                raise
            if document and NO_LOGLIKS not in str(exc):
                said = " ".join(str(exc).split())
                said = said if len(said) <= 120 else said[:117] + "..."
                raise AssayError(f"{self.name} refused a whole document ({said}), {self._no_windows()}") from None
            self.loglik = False
            self.loglik_note = f"{self.name} refused log-likelihood scoring ({exc}); multiple choice was scored " \
                               "by generation and answer extraction"
            return None
        return gen

    async def rolling(self, text: str) -> Rolling | None:
        """The log-likelihood of the whole document ``text`` (lm-evaluation-harness's ``loglikelihood_rolling``)
        over the harness's rolling windows of :attr:`max_length` tokens (each window's tokens conditioned on the
        tokens before them, as many as fit); None when this subject gives no log-probabilities. The in-process
        model cuts the windows from its own token ids; a server from those of the tokenizer the user names
        (``--tokenizer``), else of its tokenizer endpoint; a server without one scores the document whole
        (:meth:`_whole`)."""
        if not self.loglik:
            return None
        model = self.model
        if getattr(model, "gives_id_logliks", False):
            return await self._id_windows(await model.encode(text))
        if self.tokenizer is not None:
            if not callable(getattr(model, "tail_loglikelihood", None)):
                raise AssayError(f"--tokenizer needs an OpenAI-compatible /v1/completions endpoint; {self.name} "
                                 "is not one")
            return await self._windows(self.tokenizer.encode(text), self.tokenizer)
        if self._tokens is not False and getattr(model, "gives_token_logliks", False):
            try:
                ids = await model.encode(text)
            except ModelCallError as exc:
                if exc.kind != "not_found":
                    raise
                self._tokens = False
            else:
                self._tokens = True
                if text and not ids:        # a server that reads another field answers with no tokens
                    raise AssayError(f"{self.name}'s tokenizer endpoint gave no tokens for a document of "
                                     f"{len(text)} characters, so its rolling windows cannot be cut")
                return await self._windows(ids)
        return await self._whole(text)

    async def _windows(self, ids: list[int], tokenizer: Any = None) -> Rolling:
        """The windows cut from token ids of the server's tokenizer endpoint, or of ``tokenizer`` (named by the
        user: then the server's count of each window's tokens must be the tokenizer's, its start token aside)."""
        total, missing = 0.0, False
        windows = rolling_windows(len(ids), self.max_length)
        for start, scored, end in windows:
            piece = tokenizer.decode(ids[start:end]) if tokenizer else await self.model.decode(ids[start:end])
            gen = await self.model.tail_loglikelihood(piece, end - scored)
            _sent(gen, 1)
            d = orjson.loads(gen.text)
            echoed = d.get("echoed")
            if tokenizer is not None and isinstance(echoed, int) and echoed - (end - start) not in (0, 1):
                raise AssayError(f"--tokenizer {tokenizer.name} does not tokenize as {self.name}: a window of "
                                 f"{end - start} tokens came back as {echoed} (a start token aside), so the windows "
                                 f"would not be lm-evaluation-harness's; name the model's own tokenizer")
            total += float(d["logliks"][0])
            missing = missing or bool(d.get("first_token_missing"))
        return Rolling(total, len(windows), missing)

    async def _id_windows(self, ids: list[int]) -> Rolling:
        """The windows scored from token ids (the in-process model): each sends the model's start token and the
        window's tokens, as a server of the same model is sent them."""
        windows = rolling_windows(len(ids), self.max_length)
        n_ctx = getattr(getattr(self.model, "model", None), "n_ctx", None)
        widest = max((end - start + 1 for start, _, end in windows), default=0)
        if isinstance(n_ctx, int) and widest > n_ctx:
            raise AssayError(f"--max-length {self.max_length} asks windows of {widest} tokens of {self.name}, more "
                             f"than its context of {n_ctx} tokens: give --max-length {n_ctx} or less")
        total = 0.0
        for start, scored, end in windows:
            gen = await self.model.tail_loglikelihood_ids(ids[start:end], end - scored)
            _sent(gen, 1)
            total += read_logliks(gen)[0][0]
        return Rolling(total, len(windows))

    async def _whole(self, text: str) -> Rolling | None:
        """The document scored in one request, after the model's start token: lm-evaluation-harness's figure when
        the document is one window of :attr:`max_length`, that is at most ``max_length − 2`` tokens. The server's
        count of the prompt's tokens (which may include its start token) decides; a longer document, or one the
        server refuses, fails with one line. A backend that reports no count (a Python model object) is
        taken to have scored it whole."""
        if not text:
            return Rolling(0.0, 0)
        gen = await self._loglik_call("", [text], document=True)
        if gen is None:
            return None
        counted = int(gen.usage.input_tokens or 0)
        if counted > self.max_length - 2:
            raise AssayError(f"{self.name}: a document of {counted} tokens (the server's count) is more than one "
                             f"window of --max-length {self.max_length} ({self.max_length - 2} tokens), "
                             f"{self._no_windows(counted)}")
        return Rolling(read_logliks(gen)[0][0])

    def _no_windows(self, counted: int | None = None) -> str:
        """What to do when a document cannot be cut into windows (one clause of a one-line error)."""
        longer = f", give --max-length {counted + 2} or more if the context holds it," if counted else ","
        return (f"and with no tokenizer endpoint assay cannot cut windows: name the model's GGUF with --tokenizer "
                f"PATH{longer} or serve it where it has one (llama.cpp, vLLM)")

    async def generate(self, prompt: str, *, until: Sequence[str] = (), max_tokens: int = 256,
                       temperature: float = 0.0, seed: int | None = None) -> str:
        """The answer to ``prompt``, cut before the first stop string in ``until``."""
        stops = [s for s in until if s]
        if self.pipeline is not None:
            got = self.pipeline(prompt)
            if inspect.isawaitable(got):
                got = await got
            if isinstance(got, dict):
                got = got.get("response", got.get("answer"))
            if not isinstance(got, str):
                raise AssayError(f"the pipeline {self.name} returned {type(got).__name__}, not text")
            text = got
        elif self.api == "completions":
            gen = await self.model.complete(prompt, max_tokens=max_tokens, temperature=temperature,
                                            stop=stops, seed=seed)
            _sent(gen, 1)
            text = gen.text
        else:
            gen = await self.model.generate([{"role": "user", "content": prompt}], max_tokens=max_tokens,
                                            temperature=temperature, seed=seed)
            _sent(gen, 1)
            text = gen.text
        return cut_at_stops(text, stops)


def cut_at_stops(text: str, stops: Sequence[str]) -> str:
    """``text`` up to (not including) the earliest of ``stops``."""
    end = len(text)
    for s in stops:
        if s:
            at = text.find(s)
            if 0 <= at < end:
                end = at
    return text[:end]
