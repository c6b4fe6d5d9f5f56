"""The in-process llama.cpp backend: any GGUF file, no server, no key, no network.

:class:`LlamaCppModel` runs a GGUF model through ``llama-cpp-python`` in this process. It is a
:class:`~assay.models.base.ChatModel`, so the limiter and the call cache wrap it like any other
backend, and it adds what only a local model can give cheaply: the exact next-token
distribution over a judge's answer tokens.

* **Chat template.** The GGUF's own ``tokenizer.chat_template`` (Jinja, rendered in a sandbox);
  else one passed as ``chat_template=``; else, for Gemma models, Gemma's turn format; else a
  plain ``System/User/Assistant`` transcript. A conversation whose last message is an
  ``assistant`` message is *continued* (prefill): ``[..., {"role": "assistant", "content":
  "Score: "}]`` makes the next token the digit.
* **Generation** is greedy by default (``temperature=0``; a positive temperature samples with
  ``seed``), stops at the model's end-of-generation tokens, and reports usage and latency.
  ``response_format={"type": "json_object"}`` (or a ``json_schema``) constrains decoding with a
  JSON grammar. ``logprobs=True, top_logprobs=k`` return, for every generated position, the
  top ``k`` next tokens of the full vocabulary with their log-probabilities (read from the
  logits, no ``logits_all`` needed).
* **Scoring from token probabilities.** :meth:`LlamaCppModel.distribution` evaluates the
  prompt once (no sampling) and returns ``P(candidate)`` renormalised over the candidates
  ("1".."5", "yes"/"no") and the probability mass the model put on the candidates at all; the
  judges (:mod:`assay.judges.ask`) turn that into an expected score or P(yes). Candidate tokens are found by tokenizing
  ``prompt + candidate`` for each candidate and its variants (bare and space-prefixed, and
  Yes/yes case variants) and taking the token where those sequences part: this holds for
  SentencePiece vocabularies (Gemma, Llama 2) and byte-level BPE ones (where " 5" is two tokens,
  "Ġ" then "5") alike.
* **Rolling windows.** :meth:`LlamaCppModel.encode` and :meth:`LlamaCppModel.tail_loglikelihood_ids` score a
  window of token ids in one pass (the start token first, the log-probabilities of its last tokens summed): the
  windows of a long document's rolling log-likelihood (:mod:`assay.bench.quality.subject`).

llama.cpp is neither thread-safe nor asynchronous, and it is CPU-bound: every call on a loaded
model runs on that model's one worker thread (calls queue there, the event loop stays free).
A model file is loaded lazily, on first use, once per process: every ``LlamaCppModel`` with the
same file and context settings shares it. Consecutive prompts that share a beginning (a judge's
instructions) reuse the KV cache for it, in whole ``n_batch`` blocks, so that the numbers are
bit-for-bit those of a fresh evaluation (see :meth:`_Engine.evaluate`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import hashlib
import json
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from assay.errors import AssayError
from assay.models.base import (
    Generation,
    Messages,
    ModelCallError,
    TokenUsage,
    distribution_generation,
    loglik_generation,
)

T = TypeVar("T")
log = logging.getLogger("assay.models.local")

INSTALL_HINT = ("the local backend needs llama-cpp-python: install it with `make local-judge` or "
                "`scripts/install_local_backend.sh .venv/bin/python` (a portable build, made once per "
                "machine: about 5 min on 2 cores; `make test` runs it too), or use an endpoint judge "
                "(--judge openai:MODEL, "
                "azure:DEPLOYMENT or http://HOST:PORT/v1#MODEL)")

# Gemma's turn format (as in Google's chat template): the system prompt is folded into the
# first user turn; the assistant is called "model".
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

# For a GGUF that carries no template and is of no family we know: a plain transcript.
PLAIN_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{{ message['role'] | capitalize }}: {{ message['content'] | trim }}\n\n"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}Assistant:{%- endif -%}"
)
PLAIN_STOPS = ("\nUser:", "\nSystem:")

DEFAULT_MAX_TOKENS = 512
MAX_TOP_LOGPROBS = 100


def require_llama_cpp() -> Any:
    """Import llama_cpp. Its CPU backend uses OpenMP, whose threads by default spin while they
    wait for each other: when another process (or assay's own metric workers) takes one of the
    two cores, a spinning thread holds the core its partner needs, and a judgment measured here
    went from ~1.3 s to ~3-5 s. ``OMP_WAIT_POLICY=PASSIVE`` (threads sleep instead) kept it
    at ~2.4 s under the same load, for a small cost on an idle machine. It is read once, when
    the OpenMP runtime loads, so it is set just for the import (unless the user set it)."""
    if "llama_cpp" in sys.modules:
        return sys.modules["llama_cpp"]
    added = "OMP_WAIT_POLICY" not in os.environ
    if added:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        raise AssayError(f"{INSTALL_HINT} ({exc})") from exc
    finally:
        if added:
            os.environ.pop("OMP_WAIT_POLICY", None)
    return llama_cpp


_log_callback: Any = None


def _route_llama_logs(llama_cpp: Any) -> None:
    """Send llama.cpp's log lines to the ``assay.models.local`` logger (errors at ERROR, the
    rest at DEBUG) instead of stderr. llama-cpp-python's own filter reads ggml's log levels
    with an old numbering and prints warnings such as "using full-size SWA cache" even with
    ``verbose=False``. ``ASSAY_LLAMA_VERBOSE=1`` leaves llama.cpp's logging alone."""
    global _log_callback
    if _log_callback is not None or os.environ.get("ASSAY_LLAMA_VERBOSE"):
        return

    @llama_cpp.llama_log_callback
    def callback(level: int, text: bytes, user_data: Any) -> None:
        try:
            msg = text.decode("utf-8", errors="replace").rstrip()
            if msg:
                log.log(logging.ERROR if level == 4 else logging.DEBUG, "llama.cpp: %s", msg)
        except Exception:  # pragma: no cover - never raise into C
            pass

    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    _log_callback = callback      # keep the C callback alive


def default_threads() -> int:
    """The cores this process may use (``ASSAY_LOCAL_THREADS`` overrides)."""
    env = os.environ.get("ASSAY_LOCAL_THREADS")
    if env and env.strip().isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(str(p.get("text") or "") if isinstance(p, Mapping) else str(p) for p in content)
    return str(content)


def _file_fingerprint(path: Path) -> str:
    """Names the file's content cheaply: size plus a hash of its first and last MiB."""
    st = path.stat()
    h = hashlib.sha256(str(st.st_size).encode())
    with path.open("rb") as f:
        h.update(f.read(1 << 20))
        if st.st_size > (2 << 20):
            f.seek(-(1 << 20), os.SEEK_END)
            h.update(f.read(1 << 20))
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class _EngineKey:
    path: str
    n_ctx: int
    n_threads: int
    n_batch: int
    n_threads_decode: int


def models_loaded() -> int:
    """How many times this process has loaded a GGUF model file (each (file, settings) once,
    however many :class:`LlamaCppModel` objects use it; again only after :meth:`~LlamaCppModel.unload`)."""
    return _Engine.loads


class _Engine:
    """One loaded model and context, driven by one worker thread (llama.cpp is not thread-safe)."""

    loads = 0           # models loaded by this process (models_loaded)
    _registry: dict[_EngineKey, _Engine] = {}
    _registry_lock = threading.Lock()

    @classmethod
    def get(cls, key: _EngineKey) -> _Engine:
        with cls._registry_lock:
            eng = cls._registry.get(key)
            if eng is None:
                eng = cls._registry[key] = cls(key)
            return eng

    def __init__(self, key: _EngineKey):
        self.key = key
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="assay-llama")
        self.llm: Any = None
        self.load_s: float | None = None
        self._grammars: dict[str, Any] = {}
        self._template_cache: dict[str, Any] = {}
        self.canonical = 0    # leading KV-cache tokens computed by a whole-prompt evaluation

    # -- runs on the worker thread ----------------------------------------------------------------
    def load(self) -> Any:
        if self.llm is not None:
            return self.llm
        llama_cpp = require_llama_cpp()
        _route_llama_logs(llama_cpp)
        t0 = time.perf_counter()
        try:
            llm = llama_cpp.Llama(
                model_path=self.key.path, n_ctx=self.key.n_ctx, n_batch=self.key.n_batch,
                n_ubatch=self.key.n_batch, n_threads=self.key.n_threads_decode,
                n_threads_batch=self.key.n_threads, n_gpu_layers=0, logits_all=False,
                swa_full=True,      # a full-size sliding-window cache, so that prompt prefixes can be reused
                verbose=False)
        except Exception as exc:  # llama.cpp says ValueError("Failed to load model from file")
            raise AssayError(f"could not load GGUF model {self.key.path!r}: {exc}") from exc
        self.load_s = time.perf_counter() - t0
        self.llm = llm
        _Engine.loads += 1
        self.vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
        self.n_vocab = int(llm.n_vocab())
        self.metadata = dict(getattr(llm, "metadata", {}) or {})
        self.bos_text = self._piece(llm.token_bos()) if llm.token_bos() >= 0 else ""
        self.eos_text = self._piece(llm.token_eos()) if llm.token_eos() >= 0 else ""
        return llm

    def close(self) -> None:
        llm, self.llm = self.llm, None
        self._grammars.clear()
        if llm is not None:
            llm.close()

    def _piece(self, tok: int) -> str:
        return self.llm.detokenize([tok], special=True).decode("utf-8", errors="replace")

    def is_eog(self, tok: int) -> bool:
        import llama_cpp
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, tok))

    def tokenize(self, text: str, *, add_bos: bool) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    def logits(self) -> Any:
        """The logits after the last evaluated token, as a numpy view (valid until the next decode)."""
        import llama_cpp
        import numpy as np
        ptr = llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        if not ptr:
            raise ModelCallError("llama.cpp returned no logits", kind="bad_response")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def evaluate(self, tokens: Sequence[int]) -> int:
        """Make ``tokens`` the context and leave the logits after the last one; returns how many
        leading tokens were reused from the KV cache.

        Reuse is exact, not approximate: llama.cpp's numbers depend on how tokens are grouped
        into batches (a token evaluated alone and the same token inside a batch of 64 give
        logits that differ in the third decimal), so only a whole number of ``n_batch`` blocks
        is reused, and only blocks that a previous prompt evaluation computed whole. The
        remaining tokens are then batched exactly as a fresh evaluation would batch them, and
        the result is bit-for-bit the one a fresh evaluation gives (tested), whatever the
        order of the calls. Tokens generated one at a time are never reused."""
        llm = self.llm
        tokens = list(tokens)
        nb = self.key.n_batch
        reuse = 0
        if llm.n_tokens > 0 and self.canonical > 0:
            cached = llm.input_ids[: min(llm.n_tokens, self.canonical)]
            n = min(len(cached), len(tokens) - 1)
            while reuse < n and cached[reuse] == tokens[reuse]:
                reuse += 1
            reuse -= reuse % nb
        if reuse == 0 or not llm._ctx.kv_cache_seq_rm(-1, reuse, -1):
            reuse = 0
            llm.reset()
        else:
            llm.n_tokens = reuse
        self.canonical = 0
        llm.eval(tokens[reuse:])
        self.canonical = len(tokens)
        return reuse

    def grammar(self, response_format: Mapping[str, Any] | None) -> _Grammar | None:
        """A reset grammar sampler for ``response_format`` (JSON object / JSON schema), or None."""
        if not response_format:
            return None
        kind = str(response_format.get("type") or "")
        schema = None
        if kind == "json_schema":
            js = response_format.get("json_schema") or {}
            schema = js.get("schema") if isinstance(js, Mapping) else None
        elif kind != "json_object":
            return None
        key = json.dumps(schema, sort_keys=True) if schema else "json"
        g = self._grammars.get(key)
        if g is None:
            from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf
            gbnf = json_schema_to_gbnf(key) if schema else JSON_GBNF
            g = self._grammars[key] = _Grammar(self, gbnf)
        g.reset()
        return g


class _Grammar:
    """A llama.cpp grammar sampler used the fast way (as llama.cpp's own sampler does): check the
    model's choice alone first, and mask the whole vocabulary only when the grammar rejects it.
    Masking 262k tokens costs ~100 ms; checking one costs microseconds."""

    def __init__(self, eng: _Engine, gbnf: str):
        import llama_cpp
        import numpy as np
        self._c = llama_cpp
        self.smpl = llama_cpp.llama_sampler_init_grammar(eng.vocab, gbnf.encode("utf-8"), b"root")
        if not self.smpl:
            raise ModelCallError("llama.cpp rejected the response_format grammar", kind="bad_request")
        n = eng.n_vocab
        self.n_vocab = n
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = (llama_cpp.llama_token_data * n)()
        self._view = np.frombuffer(self._all, dtype=np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]))
        self._ids = np.arange(n, dtype=np.int32)

    def reset(self) -> None:
        self._c.llama_sampler_reset(self.smpl)

    def accept(self, tok: int) -> None:
        self._c.llama_sampler_accept(self.smpl, int(tok))

    def allows(self, tok: int) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = int(tok), 0.0, 0.0
        arr = self._c.llama_token_data_array(self._one, 1, -1, False)
        self._c.llama_sampler_apply(self.smpl, ctypes.byref(arr))
        return arr.data[0].logit != -math.inf

    def mask(self, logits: Any) -> Any:
        """``logits`` with the tokens the grammar forbids at -inf (a copy)."""
        import numpy as np
        v = self._view
        v["id"] = self._ids
        v["logit"] = logits
        v["p"] = 0.0
        arr = self._c.llama_token_data_array(self._all, self.n_vocab, -1, False)
        self._c.llama_sampler_apply(self.smpl, ctypes.byref(arr))
        out = np.full(self.n_vocab, -np.inf, dtype=np.float32)
        n = int(arr.size)
        if n == self.n_vocab and ctypes.addressof(arr.data.contents) == ctypes.addressof(self._all):
            d = v                     # filtered in place (what llama.cpp's grammar sampler does)
        else:                         # pragma: no cover - a sampler that returned a new array
            d = np.frombuffer((self._c.llama_token_data * n).from_address(ctypes.addressof(arr.data.contents)),
                              dtype=v.dtype)
        out[d["id"]] = d["logit"]
        return out

    def __del__(self) -> None:
        try:
            self._c.llama_sampler_free(self.smpl)
        except Exception:
            pass


def _sample(logits: Any, temperature: float, rng: Any) -> int:
    """A token drawn from softmax(logits / temperature)."""
    import numpy as np
    z = logits.astype(np.float64) / temperature
    z -= z.max()
    p = np.exp(z)
    p /= p.sum()
    return int(rng.choice(p.shape[0], p=p))


def _top(logits: Any, k: int) -> tuple[Any, Any, float]:
    """(token ids, logprobs) of the ``k`` most likely tokens, best first, and the log-partition."""
    import numpy as np
    m = float(logits.max())
    lse = m + math.log(float(np.exp(logits - m).sum()))
    k = max(1, min(k, logits.shape[0]))
    idx = np.argpartition(logits, -k)[-k:]
    idx = idx[np.argsort(-logits[idx])]
    return idx, logits[idx] - lse, lse



def gguf_path(path: str | os.PathLike[str], what: str = "local model") -> Path:
    """``path`` (``~`` expanded) when it is a GGUF file; else :class:`AssayError` saying what is wrong."""
    p = Path(os.path.expanduser(os.fspath(path)))
    if not p.is_file():
        why = "is a directory, not a GGUF file" if p.is_dir() else "does not exist"
        raise AssayError(f"{what} {str(p)!r} {why}; give the path of a .gguf file (local:/path/to/model.gguf)")
    with p.open("rb") as f:
        if f.read(4) != b"GGUF":
            raise AssayError(f"{what} {str(p)!r} is not a GGUF file (it does not start with 'GGUF')")
    return p

class LlamaCppModel:
    """A GGUF model run in-process by llama.cpp (see the module docstring).

    ``n_ctx``: context window (prompt + answer); ``n_threads``: CPU threads for prompt
    evaluation (default: the cores this process may use, or ``$ASSAY_LOCAL_THREADS``);
    ``n_threads_decode``: threads for generating one token at a time (default ``n_threads``);
    ``n_batch``: tokens per evaluation batch, also the unit of exact prompt-prefix reuse (see
    :meth:`_Engine.evaluate`); ``seed``: for sampling at a positive temperature; ``chat_template``:
    a Jinja chat template overriding the file's; ``name``: shown in results (default
    ``local:<file name>``); ``smoke_test``: marks a judge whose scores rank but are not
    calibrated (the embedded one), shown in results through :attr:`note`.
    """

    default_concurrency = 2          # one call computing, one queued: compute is serialized anyway
    supports_logprobs = True
    supports_prefill = True
    price = (0.0, 0.0)               # USD per 1M input / output tokens: in-process, no per-token charge
    price_source = "local model (no per-token charge)"

    def __init__(self, path: str | os.PathLike[str], *, n_ctx: int = 4096, n_threads: int | None = None,
                 n_batch: int = 512, n_threads_decode: int | None = None, seed: int = 0, chat_template: str | None = None,
                 name: str | None = None, smoke_test: bool = False, note: str | None = None):
        p = gguf_path(path)
        self.path = str(p.resolve())
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads or default_threads())
        self.n_batch = int(n_batch)
        self.seed = int(seed)
        self.chat_template = chat_template
        self.name = name or f"local:{p.name}"
        self.smoke_test = smoke_test
        self.note = note
        self._fingerprint: str | None = None
        self.n_threads_decode = int(n_threads_decode or self.n_threads)
        self._key = _EngineKey(self.path, self.n_ctx, self.n_threads, self.n_batch, self.n_threads_decode)

    def __repr__(self) -> str:
        return f"LlamaCppModel({self.path!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    @property
    def cache_identity(self) -> str:
        """What the call cache keys on: the file's content (not its path) and the chat template."""
        if self._fingerprint is None:
            self._fingerprint = _file_fingerprint(Path(self.path))
        tmpl = hashlib.sha256((self.chat_template or "").encode()).hexdigest()[:8] if self.chat_template else "gguf"
        return f"llama.cpp:{Path(self.path).name}:{self._fingerprint}:{tmpl}"

    @property
    def _engine(self) -> _Engine:
        return _Engine.get(self._key)

    @property
    def loaded(self) -> bool:
        return self._engine.llm is not None

    @property
    def load_seconds(self) -> float | None:
        """How long loading the file took (None before it is loaded)."""
        return self._engine.load_s

    # -- running on the worker -------------------------------------------------------------------
    async def _run(self, fn: Callable[[_Engine, threading.Event], T]) -> T:
        eng = self._engine
        cancel = threading.Event()

        def job() -> T:
            eng.load()
            try:
                return fn(eng, cancel)
            except (AssayError, ValueError):
                raise
            except Exception as exc:   # llama_decode failed, ...: start the next call from a clean state
                eng.canonical = 0
                eng.llm.reset()
                raise ModelCallError(f"{self.name}: llama.cpp failed: {exc}", kind="server") from exc

        fut = asyncio.get_running_loop().run_in_executor(eng.executor, job)
        try:
            return await fut
        except asyncio.CancelledError:
            cancel.set()   # a running generation stops at its next token; a queued one never starts
            raise

    def unload(self) -> None:
        """Free the loaded model and context (the next call loads them again)."""
        with _Engine._registry_lock:
            eng = _Engine._registry.pop(self._key, None)
        if eng is not None:
            eng.executor.submit(eng.close).result()
            eng.executor.shutdown(wait=True)

    def load(self) -> float:
        """Load the model now (it is otherwise loaded on first use); returns the seconds it took."""
        eng = self._engine
        eng.executor.submit(eng.load).result()
        return eng.load_s or 0.0

    # -- prompts ---------------------------------------------------------------------------------
    def _template(self, eng: _Engine) -> tuple[Any, tuple[str, ...]]:
        src = self.chat_template or eng.metadata.get("tokenizer.chat_template")
        stops: tuple[str, ...] = ()
        if not src:
            arch = str(eng.metadata.get("general.architecture") or "").lower()
            if arch.startswith("gemma"):
                src = GEMMA_TEMPLATE
            else:
                src, stops = PLAIN_TEMPLATE, PLAIN_STOPS
        tmpl = eng._template_cache.get(src)
        if tmpl is None:
            from jinja2.sandbox import ImmutableSandboxedEnvironment
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
            env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
            tmpl = eng._template_cache[src] = env.from_string(src)
        return tmpl, stops

    def render(self, messages: Messages) -> tuple[str, tuple[str, ...]]:
        """The prompt text for ``messages`` (a trailing assistant message is continued, not closed),
        and any stop strings the template needs. The model must be loaded."""
        return self._render(self._engine, messages)

    def _render(self, eng: _Engine, messages: Messages) -> tuple[str, tuple[str, ...]]:
        msgs = [{"role": str(m.get("role") or "user"), "content": _content_text(m.get("content"))}
                for m in messages]
        prefill = ""
        if msgs and msgs[-1]["role"] == "assistant":
            prefill = msgs.pop()["content"]
        tmpl, stops = self._template(eng)

        def raise_exception(msg: str) -> None:
            raise ValueError(msg)

        def render(ms: list[dict[str, str]]) -> str:
            return tmpl.render(messages=ms, add_generation_prompt=True, bos_token=eng.bos_text,
                               eos_token=eng.eos_text, raise_exception=raise_exception,
                               strftime_now=lambda f: time.strftime(f))
        try:
            prompt = render(msgs)
        except Exception:
            # Templates that reject a system role or demand strict alternation: fold system text
            # into the first user turn and merge consecutive turns of one role.
            merged: list[dict[str, str]] = []
            system = "\n\n".join(m["content"] for m in msgs if m["role"] == "system")
            for m in msgs:
                if m["role"] == "system":
                    continue
                role = "assistant" if m["role"] == "assistant" else "user"
                if merged and merged[-1]["role"] == role:
                    merged[-1]["content"] += "\n\n" + m["content"]
                else:
                    merged.append({"role": role, "content": m["content"]})
            if system:
                if merged and merged[0]["role"] == "user":
                    merged[0]["content"] = system + "\n\n" + merged[0]["content"]
                else:
                    merged.insert(0, {"role": "user", "content": system})
            try:
                prompt = render(merged)
            except Exception as exc:
                raise ModelCallError(f"{self.name}: the chat template failed: {exc}", kind="bad_request") from exc
        return prompt + prefill, stops

    def _prompt_tokens(self, eng: _Engine, prompt: str) -> list[int]:
        add_bos = bool(eng.llm._model.add_bos_token()) and not (eng.bos_text and prompt.startswith(eng.bos_text))
        return eng.tokenize(prompt, add_bos=add_bos)

    def _check_fits(self, n_prompt: int, n_answer: int) -> None:
        if n_prompt + n_answer > self.n_ctx:
            raise ModelCallError(
                f"{self.name}: the prompt has {n_prompt} tokens and the answer may take {n_answer}, more "
                f"than the context of {self.n_ctx} tokens (raise it: build_judge(spec, n_ctx=...))",
                kind="bad_request", retryable=False)

    # -- ChatModel ---------------------------------------------------------------------------------
    async def generate(self, messages: Messages, *, max_tokens: int | None = None,
                       temperature: float | None = 0.0, response_format: Mapping[str, Any] | None = None,
                       logprobs: bool = False, top_logprobs: int | None = None,
                       stop: Sequence[str] | None = None, seed: int | None = None) -> Generation:
        """Answer ``messages``: greedy unless ``temperature`` > 0 (sampled with ``seed``, else the
        model's); see the module docstring."""
        k = 0
        if logprobs:
            k = max(1, min(int(top_logprobs or 1), MAX_TOP_LOGPROBS))
        t0 = time.perf_counter()
        gen = await self._run(lambda eng, cancel: self._generate(
            eng, cancel, messages, max_tokens, float(temperature or 0.0), response_format, k, tuple(stop or ()), seed))
        gen.latency_s = time.perf_counter() - t0
        return gen

    def _generate(self, eng: _Engine, cancel: threading.Event, messages: Messages, max_tokens: int | None,
                  temperature: float, response_format: Mapping[str, Any] | None, k: int,
                  stop: tuple[str, ...], seed: int | None = None) -> Generation:
        t0 = time.perf_counter()
        prompt, tmpl_stops = self._render(eng, messages)
        return self._decode(eng, cancel, prompt, stop + tmpl_stops, max_tokens, temperature, response_format, k, t0,
                            seed)

    def _decode(self, eng: _Engine, cancel: threading.Event, prompt: str, stop: tuple[str, ...],  # noqa: C901
                max_tokens: int | None, temperature: float, response_format: Mapping[str, Any] | None, k: int,
                t0: float, seed: int | None = None) -> Generation:
        """Generate after the prompt text ``prompt`` (already rendered): what :meth:`generate` and
        :meth:`complete` share."""
        import numpy as np
        llm = eng.llm
        stops = tuple(s for s in stop if s)
        tokens = self._prompt_tokens(eng, prompt)
        room = self.n_ctx - len(tokens)
        n_max = int(max_tokens) if max_tokens else min(DEFAULT_MAX_TOKENS, max(room, 1))
        self._check_fits(len(tokens), n_max)
        grammar = eng.grammar(response_format)
        rng = np.random.default_rng(self.seed if seed is None else int(seed)) if temperature > 0 else None
        reused = eng.evaluate(tokens)
        t_prompt = time.perf_counter()
        out: list[int] = []
        per_pos: list[tuple[str, dict[str, float]]] = []
        finish = "length"
        text: str | None = None
        while True:
            logits = eng.logits()
            tok = int(logits.argmax())
            if grammar is not None and (rng is not None or not grammar.allows(tok)):
                masked = grammar.mask(logits)
                tok = int(masked.argmax()) if rng is None else _sample(masked, temperature, rng)
            elif rng is not None:
                tok = _sample(logits, temperature, rng)
            eog = eng.is_eog(tok)
            if k and (not eog or not per_pos):
                ids, lps, lse = _top(logits, k)
                alts: dict[str, float] = {}
                for i, lp in zip(ids.tolist(), lps.tolist()):
                    piece = eng._piece(i)
                    alts[piece] = max(alts.get(piece, -math.inf), float(lp))
                chosen = eng._piece(tok)
                if chosen not in alts:
                    alts[chosen] = float(logits[tok]) - lse
                per_pos.append((chosen, alts))
            if eog:
                finish = "stop"
                break
            out.append(tok)
            if grammar is not None:
                grammar.accept(tok)
            if stops:
                t = llm.detokenize(out).decode("utf-8", errors="ignore")
                cut = min((t.find(s) for s in stops if s in t), default=-1)
                if cut >= 0:
                    text, finish = t[:cut], "stop"
                    break
            if len(out) >= n_max or cancel.is_set():
                break
            llm.eval([tok])
        if text is None:
            text = llm.detokenize(out).decode("utf-8", errors="replace")
        t1 = time.perf_counter()
        raw = {"prompt_tokens": len(tokens), "reused_prompt_tokens": reused,
               "prompt_s": round(t_prompt - t0, 6), "total_s": round(t1 - t0, 6)}
        return Generation(
            text=text, usage=TokenUsage(len(tokens), len(out)), latency_s=t1 - t0,
            logprobs=per_pos[0][1] if per_pos else None, model=self.name, raw=raw,
            finish_reason=finish, token_logprobs=per_pos if k else None)

    # -- scoring from token probabilities ----------------------------------------------------------
    gives_distributions = True

    async def distribution(self, messages: Messages, candidates: Sequence[str], *,
                           assistant_prefix: str | None = None) -> Generation:
        """P(each candidate is the answer), renormalised over ``candidates``, as a
        :func:`~assay.models.base.distribution_generation` (read it with
        :func:`~assay.models.base.read_distribution`): ``probs`` sum to 1, ``mass`` is the total
        probability the model put on the candidates' tokens before renormalising (low: the model
        wanted to say something else), usage the prompt tokens evaluated.

        One forward pass over the prompt, no sampling. ``assistant_prefix`` (e.g. ``"Score: "``)
        starts the answer so that the next token is the candidate; a trailing assistant message
        does the same."""
        cands = [str(c) for c in candidates]
        if len(set(cands)) != len(cands) or not cands or any(not c.strip() for c in cands):
            raise ValueError(f"candidates must be distinct, non-blank strings: {cands!r}")
        msgs = list(messages)
        if assistant_prefix:
            if msgs and msgs[-1].get("role") == "assistant":
                last = dict(msgs[-1])
                last["content"] = _content_text(last.get("content")) + assistant_prefix
                msgs[-1] = last
            else:
                msgs.append({"role": "assistant", "content": assistant_prefix})
        t0 = time.perf_counter()
        probs, mass, n_prompt = await self._run(lambda eng, cancel: self._distribution(eng, msgs, cands))
        return distribution_generation(probs, mass, prompt_tokens=n_prompt, latency_s=time.perf_counter() - t0,
                                       model=self.name)

    def _distribution(self, eng: _Engine, messages: Messages, cands: list[str]) -> tuple[dict[str, float], float, int]:  # noqa: C901
        import numpy as np
        prompt, _ = self._render(eng, messages)
        base = self._prompt_tokens(eng, prompt)
        # Each candidate's spellings, tokenized after the prompt; where they part from the
        # prompt's tokens is the answer position.
        seqs: list[tuple[int, str, list[int]]] = []
        for ci, c in enumerate(cands):
            for v in _variants(c, prompt):
                seqs.append((ci, v, self._prompt_tokens(eng, prompt + v)))
        ctx_len = len(base)
        for _, _, s in seqs:
            n = 0
            lim = min(ctx_len, len(s))
            while n < lim and s[n] == base[n]:
                n += 1
            ctx_len = n
        if ctx_len == 0:
            raise ModelCallError(f"{self.name}: cannot place the answer tokens after the prompt", kind="bad_request")
        ctx = base[:ctx_len]
        self._check_fits(len(ctx), 1)
        # token id -> candidates it may start, and whether it spells a candidate whole.
        owners: dict[int, dict[int, bool]] = {}
        for ci, _v, s in seqs:
            if len(s) <= ctx_len:
                continue
            whole = len(s) == ctx_len + 1
            o = owners.setdefault(s[ctx_len], {})
            o[ci] = o.get(ci, False) or whole
        token_of: dict[int, int] = {}
        for tok, o in owners.items():
            if len(o) == 1:
                token_of[tok] = next(iter(o))
            else:  # shared first token (a lone space piece, "1" of "10"): only a whole spelling claims it
                whole = [ci for ci, w in o.items() if w]
                if len(whole) == 1:
                    token_of[tok] = whole[0]
        if not token_of:
            raise ModelCallError(f"{self.name}: the candidates {cands!r} share their first token; "
                                 "they cannot be told apart from one next-token distribution", kind="bad_request")
        eng.evaluate(ctx)
        logits = eng.logits()
        ids = np.fromiter(token_of.keys(), dtype=np.int64)
        m = float(logits.max())
        lse = m + math.log(float(np.exp(logits - m).sum()))
        p = np.exp(logits[ids].astype(np.float64) - lse)
        per = [0.0] * len(cands)
        for tok, pi in zip(ids.tolist(), p.tolist()):
            per[token_of[tok]] += pi
        mass = float(sum(per))
        if mass <= 0.0:
            norm = [1.0 / len(cands)] * len(cands)
        else:
            norm = [x / mass for x in per]
        return {c: norm[i] for i, c in enumerate(cands)}, mass, len(ctx)


    # -- raw text: completion and log-likelihood scoring --------------------------------------------
    gives_logliks = True

    async def complete(self, prompt: str, *, max_tokens: int, temperature: float = 0.0,
                       stop: Sequence[str] = (), seed: int | None = None) -> Generation:
        """Continue the raw text ``prompt`` (no chat template; BOS added as the model wants):
        greedy unless ``temperature`` > 0 (sampled with ``seed``, else the model's), at most ``max_tokens`` tokens, cut before the first of
        ``stop`` (``finish_reason`` ``"stop"``, as is an end-of-generation token) or ``"length"``."""
        n = int(max_tokens)
        if n < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens!r}")
        stops = tuple(str(x) for x in stop or () if x)
        t0 = time.perf_counter()
        gen = await self._run(lambda eng, cancel: self._decode(
            eng, cancel, str(prompt), stops, n, float(temperature or 0.0), None, 0, time.perf_counter(), seed))
        gen.latency_s = time.perf_counter() - t0
        return gen

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        """For each continuation, log P(continuation | context) summed over its tokens, and whether
        every one of its tokens is the model's greedy (argmax) choice; raw text, no chat template.

        Tokens follow lm-evaluation-harness: trailing whitespace of ``context`` moves to the front of
        the continuation, then ``context + continuation`` and ``context`` are tokenized apart and
        the continuation's tokens are those of the whole past the context's count, so that a token
        the tokenizer merges across the boundary is not split. The context is evaluated once per
        call; each continuation then runs one token at a time on top of it. Returns a
        :func:`~assay.models.base.loglik_generation` (usage: the tokens each scoring took, summed,
        as a server given one request per continuation would count them)."""
        conts = [str(c) for c in continuations]
        if not conts or any(c == "" for c in conts):
            raise ValueError(f"continuations must be non-empty strings: {conts!r}")
        t0 = time.perf_counter()
        logliks, greedy, n_tokens = await self._run(
            lambda eng, cancel: self._loglikelihood(eng, cancel, str(context), conts))
        return loglik_generation(logliks, greedy, prompt_tokens=n_tokens, latency_s=time.perf_counter() - t0,
                                 model=self.name)

    def _loglikelihood(self, eng: _Engine, cancel: threading.Event, context: str,
                       conts: list[str]) -> tuple[list[float], list[bool], int]:
        import numpy as np
        llm = eng.llm
        pairs = [_split_pair(context, c) for c in conts]
        ctx_tokens: dict[str, list[int]] = {}
        encoded: list[tuple[list[int], list[int]]] = []
        for ctx, cont in pairs:
            if ctx not in ctx_tokens:
                ctx_tokens[ctx] = self._prompt_tokens(eng, ctx)
            head = ctx_tokens[ctx]
            whole = self._prompt_tokens(eng, ctx + cont)
            tail = whole[len(head):]
            if not tail:
                raise ModelCallError(f"{self.name}: the continuation {cont!r} adds no token to the context",
                                     kind="bad_request")
            if not head:   # no BOS and an empty context: nothing to condition the first token on
                raise ModelCallError(f"{self.name}: an empty context needs a model that adds a BOS token",
                                     kind="bad_request")
            self._check_fits(len(head), len(tail))
            encoded.append((head, tail))
        logliks: list[float] = []
        greedy: list[bool] = []
        n_total = 0
        prefix: list[int] | None = None
        first: Any = None
        for head, tail in encoded:
            if cancel.is_set():   # the caller is gone: nobody reads this
                raise ModelCallError(f"{self.name}: cancelled", kind="timeout")
            if head == prefix and llm.n_tokens >= len(head) and list(llm.input_ids[:len(head)]) == head \
                    and llm._ctx.kv_cache_seq_rm(-1, len(head), -1):
                llm.n_tokens = len(head)      # the context's KV cache is still there: drop what followed
            else:
                eng.evaluate(head)
                first = np.array(eng.logits(), dtype=np.float32, copy=True)
                prefix = head
            total, all_greedy = 0.0, True
            logits = first
            for i, tok in enumerate(tail):
                if i > 0:
                    llm.eval([tail[i - 1]])
                    logits = eng.logits()
                m = float(logits.max())
                lse = m + math.log(float(np.exp(logits - m).sum()))
                total += float(logits[tok]) - lse
                all_greedy = all_greedy and int(logits.argmax()) == tok
            logliks.append(total)
            greedy.append(all_greedy)
            n_total += len(head) + len(tail)
        return logliks, greedy, n_total

    # -- token ids: the windows of a rolling log-likelihood ---------------------------------------
    async def encode(self, text: str) -> list[int]:
        """The model's token ids of the raw text ``text``, without the start token (special tokens written in
        the text are read as such, as the harness's tokenizers read them)."""
        return await self._run(lambda eng, cancel: eng.tokenize(str(text), add_bos=False))

    async def tail_loglikelihood_ids(self, ids: Sequence[int], n_tokens: int) -> Generation:
        """One window of a rolling log-likelihood, from token ids: the model's start token (its end token where
        it has none) then ``ids``, evaluated in one pass, and the summed log-probability of the last
        ``n_tokens`` of ``ids``, each conditioned on every token before it. The same window sent as text to a
        server of this model (which adds the start token) scores the same tokens. Returns a
        :func:`~assay.models.base.loglik_generation` of one value (usage: the tokens evaluated)."""
        toks = [int(t) for t in ids]
        n = int(n_tokens)
        if not 1 <= n <= len(toks):
            raise ValueError(f"n_tokens must be between 1 and {len(toks)}, got {n_tokens!r}")
        t0 = time.perf_counter()
        total, used = await self._run(lambda eng, cancel: self._tail_loglikelihood(eng, cancel, toks, n))
        return loglik_generation([total], [False], prompt_tokens=used, latency_s=time.perf_counter() - t0,
                                 model=self.name)

    def _tail_loglikelihood(self, eng: _Engine, cancel: threading.Event, ids: list[int], n: int) -> tuple[float, int]:
        import llama_cpp
        import numpy as np
        llm = eng.llm
        start = llm.token_bos() if llm.token_bos() >= 0 else llm.token_eos()
        tokens = [int(start), *ids]
        self._check_fits(len(tokens), 0)
        want = range(len(tokens) - n - 1, len(tokens) - 1)     # the positions whose logits predict the n tokens
        # a batch's logits take n_vocab floats per row: keep a call's rows to about 128 MB
        step = max(1, min(self.n_batch, (1 << 25) // max(1, eng.n_vocab)))
        eng.canonical = 0      # the KV cache no longer holds a whole-prompt evaluation (see _Engine.evaluate)
        llm.reset()
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        batch, total = llm._batch, 0.0
        try:
            for at in range(0, len(tokens), step):
                if cancel.is_set():
                    raise ModelCallError(f"{self.name}: cancelled", kind="timeout")
                chunk = tokens[at:at + step]
                batch.set_batch(batch=chunk, n_past=at, logits_all=False)
                rows = [j for j in range(len(chunk)) if at + j in want]
                for j in range(len(chunk)):
                    batch.batch.logits[j] = at + j in want
                llm._ctx.decode(batch)
                for j in rows:
                    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, j)
                    row = np.ctypeslib.as_array(ptr, shape=(eng.n_vocab,)).astype(np.float64)
                    m = float(row.max())
                    total += float(row[tokens[at + j + 1]]) - m - math.log(float(np.exp(row - m).sum()))
        finally:
            llm.n_tokens = 0       # nothing of this evaluation is reused: the next call starts afresh
        return total, len(tokens)


def _split_pair(context: str, continuation: str) -> tuple[str, str]:
    """lm-evaluation-harness's boundary rule: trailing whitespace of the context belongs to the
    continuation (``"Answer: "`` + ``"Paris"`` is scored as ``"Answer:"`` + ``" Paris"``)."""
    kept = context.rstrip()
    return kept, context[len(kept):] + continuation


def _variants(c: str, prompt: str) -> list[str]:
    """Spellings of an answer token: as given, space-prefixed (unless the prompt ends in space),
    and for words lower / Capitalized."""
    forms = [c]
    if c.isalpha():
        forms += [c.lower(), c.capitalize()]
    out: list[str] = []
    for f in forms:
        out.append(f)
        if not prompt[-1:].isspace():
            out.append(" " + f)
    seen: set[str] = set()
    return [x for x in out if not (x in seen or seen.add(x))]


class GgufTokenizer:
    """The tokenizer of a GGUF file (its vocabulary alone is loaded, no weights): ``encode`` and ``decode`` as
    the model's own, for cutting a document into windows where the server that runs the model has no tokenizer
    endpoint (``assay bench quality --tokenizer``). Loaded on first use; tokenizing is quick and runs in the
    caller's thread."""

    def __init__(self, path: str | os.PathLike[str]):
        p = gguf_path(path, "tokenizer")
        require_llama_cpp()         # missing, it is said before the run starts
        self.path = str(p)
        self.name = p.name
        self._llm: Any = None
        self._lock = threading.Lock()

    def _vocab(self) -> Any:
        with self._lock:
            if self._llm is None:
                llama_cpp = require_llama_cpp()
                _route_llama_logs(llama_cpp)
                try:
                    self._llm = llama_cpp.Llama(model_path=self.path, vocab_only=True, verbose=False)
                except Exception as exc:
                    raise AssayError(f"could not read the tokenizer of GGUF file {self.path!r}: {exc}") from exc
            return self._llm

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text``, without the start token (special tokens written in the text read as such)."""
        return [int(t) for t in self._vocab().tokenize(str(text).encode("utf-8"), add_bos=False, special=True)]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of token ids ``ids``."""
        return self._vocab().detokenize([int(t) for t in ids], special=True).decode("utf-8", errors="replace")


def local_model(path: str | os.PathLike[str], **kw: Any) -> LlamaCppModel:
    """A :class:`LlamaCppModel` for any GGUF file (what ``--judge local:PATH`` builds); needs
    llama-cpp-python (:data:`INSTALL_HINT`)."""
    model = LlamaCppModel(path, **kw)   # a missing or non-GGUF file is the first thing to report
    require_llama_cpp()
    return model

