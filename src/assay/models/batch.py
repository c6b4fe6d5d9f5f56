"""Judge calls through a provider's batch API: OpenAI's Batch API and Anthropic's Message Batches.

A batch run asks the judge the same questions as an online run, through the same code: the
engine (:mod:`assay.engine.batch_run`) first scores the rows with a *collecting* copy of the
judge (:func:`collecting`), whose :class:`~assay.models.limited.LimitedModel` records the exact
request body each call that the call cache cannot answer would send (the backend's own
``build_body``), keyed by its call-cache key, instead of sending it. :func:`run_batch` sends
those bodies as one batch, keyed by ``custom_id`` = the cache key (a sha256, 64 characters:
what both APIs accept), polls it, reads each answer with the backend's own reader and stores it
in the call cache. The ordinary run that follows then finds every answer in the cache, parses it
as an online answer is parsed, and so gives the same scores. A request the batch did not answer
(failed, errored, expired, cancelled) is left out of the cache and made online by that run.

Wire formats, as documented:

OpenAI (``openai:MODEL`` and any server that speaks the same API)
    ``POST {base}/files`` (multipart: ``purpose=batch`` and ``file``, a JSONL file of
    ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`` lines);
    ``POST {base}/batches`` (``input_file_id``, ``endpoint``, ``completion_window: 24h``);
    ``GET {base}/batches/ID`` until ``status`` is ``completed``, ``failed``, ``expired`` or
    ``cancelled`` (from ``validating``, ``in_progress``, ``finalizing``, ``cancelling``);
    ``GET {base}/files/FILE/content`` for ``output_file_id`` and ``error_file_id``, whose lines
    are ``{"custom_id", "response": {"status_code", "body"}, "error"}``.
Anthropic (``anthropic:MODEL``)
    ``POST {base}/v1/messages/batches`` with ``{"requests": [{"custom_id", "params"}]}``;
    ``GET {base}/v1/messages/batches/ID`` until ``processing_status`` is ``ended``; then
    ``GET results_url``: JSONL of ``{"custom_id", "result": {"type": "succeeded", "message"}}``
    (or ``errored`` / ``canceled`` / ``expired``).

Resuming: the batch's id is written to a state file (``state_dir``, by default
``.assay/batches`` beside the call cache) as soon as the batch is created, named after the
digest of its requests' keys; a run killed while it polls finds the file on its next start and
polls the same batch again instead of creating another. The file is removed once the answers are
stored.

Cost: the batch's tokens at the batch price, :func:`~assay.models.pricing.batch_price` (half
the list price, as both providers publish), kept in :class:`BatchSpend` and recorded with the run.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from assay.errors import AssayError
from assay.models.base import Generation, ModelCallError

log = logging.getLogger("assay.models")

OPENAI_DONE = frozenset({"completed", "failed", "expired", "cancelled"})
DEFAULT_POLL_S = 30.0
POLL_TRIES = 5          # polls in a row that may fail (connection, 5xx) before the run stops

Progress = Callable[[str, int, int], None]     # (status, requests answered so far, requests in all)


class Deferred(ModelCallError):
    """A judge call left for the batch: what a collecting judge raises in place of an answer."""

    def __init__(self, what: str):
        super().__init__(f"{what}: deferred to the batch", kind="bad_request", retryable=False)


@dataclass
class Outcome:
    """What a batch gave: an answer per request it answered, a reason per request it did not."""

    answers: dict[str, Generation] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    why: str = ""        # what the provider said of a batch that failed as a whole


# -- collecting ---------------------------------------------------------------------------------

def collecting(judge: Any, into: dict[str, dict[str, Any]]) -> Any:
    """A copy of ``judge`` (a :class:`~assay.models.limited.LimitedModel` with a call cache) that
    answers from the cache as usual, and otherwise puts ``{cache key: request body}`` into ``into``
    and raises :class:`Deferred` (the judge then records an error, which the collecting pass
    ignores)."""
    from assay.models.limited import CallStats

    backend = judge.model
    twin = copy.copy(judge)
    twin.stats, twin._pending = CallStats(), {}    # noqa: SLF001 - its own counts and calls in flight

    def collect(key: str, request: Mapping[str, Any]) -> BaseException:
        into.setdefault(key, backend.build_body(request["messages"], **request["params"]))
        return Deferred(judge.name)

    twin.collect = collect
    return twin


# -- the providers ------------------------------------------------------------------------------

def _request(method: str, url: str, headers: Mapping[str, str], body: bytes | None = None,
             timeout: float = 120.0) -> bytes:
    req = urllib.request.Request(url, data=body, method=method, headers=dict(headers))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:   # noqa: S310 - the judge's own endpoint
            return resp.read()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode("utf-8", "replace")[:300]
        raise ModelCallError(f"batch API: {method} {urllib.parse.urlsplit(url).path} answered {exc.code}: {text}",
                             kind="server", status=exc.code) from None
    except (OSError, urllib.error.URLError) as exc:
        raise ModelCallError(f"batch API: {method} {urllib.parse.urlsplit(url).path}: connection failed: {exc}",
                             kind="connection", retryable=True) from None


def _json(raw: bytes, what: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ModelCallError(f"batch API: {what} is not JSON: {raw[:120]!r}", kind="bad_response") from None


def _lines(raw: bytes) -> list[Any]:
    return [orjson.loads(line) for line in raw.splitlines() if line.strip()]


class OpenAIBatch:
    """OpenAI's Batch API for an :class:`~assay.models.openai_compat.OpenAICompat` judge."""

    provider = "openai"

    def __init__(self, backend: Any):
        self.backend = backend
        _, headers = backend.route("chat")
        self.base = backend.base_url
        self.auth = {k: v for k, v in headers.items() if k.lower() in ("authorization", "api-key")}

    def _call(self, method: str, path: str, body: bytes | None = None, ctype: str | None = None) -> bytes:
        headers = {**self.auth, "Accept": "application/json"}
        if ctype:
            headers["Content-Type"] = ctype
        return _request(method, f"{self.base}{path}", headers, body, self.backend.timeout)

    def create(self, requests: Mapping[str, Mapping[str, Any]]) -> str:
        lines = b"".join(orjson.dumps({"custom_id": k, "method": "POST", "url": "/v1/chat/completions",
                                       "body": b}) + b"\n" for k, b in requests.items())
        boundary = uuid.uuid4().hex
        form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"assay-batch.jsonl\"\r\n"
                "Content-Type: application/jsonl\r\n\r\n").encode() + lines + f"\r\n--{boundary}--\r\n".encode()
        uploaded = _json(self._call("POST", "/files", form, f"multipart/form-data; boundary={boundary}"), "file upload")
        made = _json(self._call("POST", "/batches", orjson.dumps(
            {"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}),
            "application/json"), "batch create")
        return str(made["id"])

    def status(self, batch_id: str) -> tuple[str, int, bool, Any]:
        """``(status, requests finished, ended, the batch object)``."""
        b = _json(self._call("GET", f"/batches/{batch_id}"), "batch status")
        counts = b.get("request_counts") or {}
        done = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
        return str(b.get("status")), done, b.get("status") in OPENAI_DONE, b

    def results(self, batch: Any) -> Outcome:
        errors = (batch.get("errors") or {}).get("data") or []
        out = Outcome(why="; ".join(str(e.get("message") or e.get("code")) for e in errors[:3]))
        for fid in (batch.get("output_file_id"), batch.get("error_file_id")):
            if not fid:
                continue
            for line in _lines(self._call("GET", f"/files/{fid}/content")):
                self._read_line(line, out)
        return out

    def _read_line(self, line: Mapping[str, Any], out: Outcome) -> None:
        key = str(line.get("custom_id"))
        resp = line.get("response") or {}
        if resp.get("status_code") == 200 and not line.get("error"):
            from assay.models.openai_wire import read_generation

            try:
                out.answers[key] = read_generation(self.backend.name, resp.get("body"), 0.0, self.backend.model)
            except ModelCallError as exc:
                out.failed[key] = str(exc)
            return
        err = line.get("error") or (resp.get("body") or {}).get("error") or {}
        msg = err.get("message") if isinstance(err, Mapping) else str(err)
        out.failed[key] = f"status {resp.get('status_code')}: {msg}"


class AnthropicBatch:
    """Anthropic's Message Batches API for an :class:`~assay.models.anthropic.AnthropicModel` judge."""

    provider = "anthropic"

    def __init__(self, backend: Any):
        self.backend = backend
        self.base = backend.base_url
        self.headers = backend.request_headers()

    def create(self, requests: Mapping[str, Mapping[str, Any]]) -> str:
        reqs = [{"custom_id": k, "params": {f: v for f, v in b.items() if f != "stream"}} for k, b in requests.items()]
        made = _json(_request("POST", f"{self.base}/v1/messages/batches", self.headers,
                              orjson.dumps({"requests": reqs}), self.backend.timeout), "batch create")
        return str(made["id"])

    def status(self, batch_id: str) -> tuple[str, int, bool, Any]:
        b = _json(_request("GET", f"{self.base}/v1/messages/batches/{batch_id}", self.headers,
                           timeout=self.backend.timeout), "batch status")
        counts = b.get("request_counts") or {}
        done = sum(int(counts.get(k) or 0) for k in ("succeeded", "errored", "canceled", "expired"))
        return str(b.get("processing_status")), done, b.get("processing_status") == "ended", b

    def results(self, batch: Any) -> Outcome:
        out = Outcome()
        url = batch.get("results_url")
        if not url:
            return out
        for line in _lines(_request("GET", url, self.headers, timeout=self.backend.timeout)):
            key, res = str(line.get("custom_id")), line.get("result") or {}
            if res.get("type") == "succeeded":
                try:
                    out.answers[key] = self.backend.read(res.get("message"), 0.0)
                except ModelCallError as exc:
                    out.failed[key] = str(exc)
            else:
                err = (res.get("error") or {}).get("error") or res.get("error") or {}
                msg = err.get("message") if isinstance(err, Mapping) else err
                out.failed[key] = f"{res.get('type')}" + (f": {msg}" if msg else "")
        return out


def batch_client(judge: Any) -> OpenAIBatch | AnthropicBatch:
    """The batch API of ``judge``'s backend; an :class:`AssayError` for a backend that has none."""
    backend = getattr(judge, "model", judge)
    kind = type(backend).__name__
    if kind == "OpenAICompat" and backend.provider in ("openai", "compatible"):
        return OpenAIBatch(backend)
    if kind == "AnthropicModel":
        return AnthropicBatch(backend)
    raise AssayError(f"--batch: judge {getattr(judge, 'name', judge)} has no batch API assay speaks "
                     "(OpenAI's Batch API for openai:MODEL, Anthropic's Message Batches for anthropic:MODEL)")


# -- one batch, from submission to stored answers -------------------------------------------------

def state_path(state_dir: Path, provider: str, keys: list[str]) -> Path:
    digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:24]
    return Path(state_dir) / f"{provider}-{digest}.json"


def _start(client: Any, requests: Mapping[str, Mapping[str, Any]], state: Path, model: str) -> tuple[str, bool]:
    """The batch's id: the one recorded in ``state`` (a resumed run), else a new batch, recorded."""
    if state.exists():
        try:
            return str(json.loads(state.read_text())["batch_id"]), True
        except (OSError, ValueError, KeyError):
            pass
    batch_id = client.create(requests)
    state.parent.mkdir(parents=True, exist_ok=True)
    tmp = state.with_suffix(".tmp")
    tmp.write_text(json.dumps({"batch_id": batch_id, "provider": client.provider, "model": model,
                               "requests": len(requests), "created": time.time()}))
    tmp.replace(state)
    return batch_id, False


async def run_batch(judge: Any, requests: Mapping[str, Mapping[str, Any]], *, state_dir: Path,
                    poll: float = DEFAULT_POLL_S, progress: Progress | None = None) -> tuple[str, bool, Outcome]:
    """Send ``requests`` (``{cache key: body}``) as one batch (or poll the one a killed run left,
    recorded under ``state_dir``), wait for it, store each answer in ``judge``'s call cache:
    ``(batch id, resumed, outcome)``."""
    client = batch_client(judge)
    state = state_path(state_dir, client.provider, list(requests))
    batch_id, resumed = await asyncio.to_thread(_start, client, requests, state, judge.name)
    while True:
        status, done, ended, batch = await _poll(client, batch_id, poll)
        if progress is not None:
            progress(status, done, len(requests))
        if ended:
            break
        await asyncio.sleep(poll)
    outcome = await asyncio.to_thread(client.results, batch)
    for key in requests:
        if key not in outcome.answers and key not in outcome.failed:
            outcome.failed[key] = f"no answer in batch {batch_id} (status {status})" + (
                f": {outcome.why}" if outcome.why else "")
    if outcome.failed:
        log.warning("batch %s (%s): %d of %d requests not answered, to be asked online; first: %s", batch_id,
                    status, len(outcome.failed), len(requests), next(iter(outcome.failed.values())))
    wanted = {k: g for k, g in outcome.answers.items() if k in requests}
    judge.cache.put_many(wanted.items(), model=judge.name)
    state.unlink(missing_ok=True)
    return batch_id, resumed, outcome


async def _poll(client: Any, batch_id: str, poll: float, tries: int = POLL_TRIES) -> tuple[str, int, bool, Any]:
    """The batch's status; a poll that could not connect or got a 5xx is tried again (``tries`` in
    all, ``poll`` seconds apart) before the run stops (it can be started again on the same batch)."""
    for attempt in range(tries):
        try:
            return await asyncio.to_thread(client.status, batch_id)
        except ModelCallError as exc:
            if attempt == tries - 1 or not (exc.retryable or (exc.status or 0) >= 500):
                raise ModelCallError(f"{exc} (batch {batch_id}: start the run again to keep polling it)",
                                     kind=exc.kind, status=exc.status) from None
            await asyncio.sleep(poll)
    raise AssertionError("unreachable")


class BatchSpend:
    """What a run's batches cost, at the batch price: read by the run's budget and recorded with
    its judge usage (``judge_usage["other"]``) as ``usage()``."""

    def __init__(self, price: tuple[float, float] | None, source: str):
        self.price, self.source = price, source
        self.batches: list[str] = []
        self.requests = self.answered = self.prompt_tokens = self.completion_tokens = 0
        self.failed: dict[str, str] = {}
        self.prior_cost = 0.0

    def add(self, batch_id: str, n: int, outcome: Outcome) -> None:
        if batch_id not in self.batches:
            self.batches.append(batch_id)
        self.requests += n
        self.answered += len(outcome.answers)
        self.failed.update(outcome.failed)
        for g in outcome.answers.values():
            self.prompt_tokens += g.usage.input_tokens
            self.completion_tokens += g.usage.output_tokens

    def usage(self) -> dict[str, Any]:
        from assay.models.pricing import cost_usd

        return {"kind": "batch", "batches": list(self.batches), "requests": self.requests,
                "answered": self.answered, "failed": len(self.failed),
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cost_usd": cost_usd(self.prompt_tokens, self.completion_tokens, self.price),
                "price_per_1m": ({"input": self.price[0], "output": self.price[1]} if self.price else None),
                "price_source": self.source}


__all__ = ["DEFAULT_POLL_S", "AnthropicBatch", "BatchSpend", "Deferred", "OpenAIBatch", "Outcome", "batch_client",
           "collecting", "run_batch", "state_path"]
