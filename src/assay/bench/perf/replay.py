"""Trace replay for ``assay bench perf --replay``: a recorded workload's arrival times and lengths,
read from a file, turned into prompts of those lengths in the server's tokens.

Layouts read (one JSON object per line; the layout is told by the first line's fields):

- **Mooncake** (``kvcache-ai/Mooncake``'s ``mooncake_trace.jsonl``, also aiperf's): ``timestamp``
  (ms since the trace's first request), ``input_length``, ``output_length``, ``hash_ids`` (one id
  per block of :data:`BLOCK_SIZE` tokens of the prompt, the last block possibly shorter; two
  requests whose lists start with the same ids share that prefix);
- **plain**: ``at`` (s since the trace's start), ``input_tokens``, ``output_tokens``, optionally
  ``hash_ids`` as above;
- **OTLP** (``otlp:FILE``): the model-call spans of an app's OpenTelemetry export, read by
  :mod:`assay.formats.otlp` and :mod:`assay.formats.genai_spans`: each model call with both token
  counts (``gen_ai.usage.input_tokens`` / ``output_tokens`` or their older and OpenInference
  names) is one request, sent at its span's start relative to the earliest.

Prompts (:func:`trace_prompts`): each hash id is one block of filler words fitted to
:data:`BLOCK_SIZE` tokens by the run's counter, built once, so requests naming the same ids send
the same text first; the prompt is its blocks in order with the last cut or filled until the whole
counts exactly the trace's input length (a request without hash ids starts ``Request <id>:``, so
no two share a prefix). The counter is the server's tokenizer where it serves one (exact in its
tokens), else the bundled BPE (exact in that encoding only; the run's ``tokenizer.source`` says
which).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from assay.bench.perf.workload import Counter, Prompt, fit_text
from assay.errors import AssayError

BLOCK_SIZE = 512        # tokens per hash id (the Mooncake trace's block size)


@dataclass(frozen=True)
class TraceRequest:
    at: float                           # s since the trace's first request
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


@dataclass
class Trace:
    requests: list[TraceRequest]
    layout: str                         # mooncake | plain | otlp
    source: str
    sha256: str

    def fingerprint(self, speed: float) -> str:
        """What makes two replays the same workload: the layout, the file's content, the speed."""
        return f"replay {self.layout} sha256:{self.sha256[:16]} x{speed:g}"


def read_trace(spec: str) -> Trace:
    """The trace ``spec`` names: ``FILE`` (Mooncake or plain JSONL) or ``otlp:FILE``."""
    if spec.startswith("otlp:"):
        return _read_otlp(spec[5:])
    path = Path(spec)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AssayError(f"--replay {spec}: {exc.strerror or exc}") from None
    reqs: list[TraceRequest] = []
    layout = ""
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise AssayError(f"{spec}, line {n}: not JSON") from None
        if not isinstance(obj, dict):
            raise AssayError(f"{spec}, line {n}: expected an object")
        layout = layout or ("mooncake" if "input_length" in obj else "plain")
        reqs.append(_row(obj, layout, f"{spec}, line {n}"))
    if not reqs:
        raise AssayError(f"{spec}: no requests in the trace")
    return _settled(reqs, layout, spec, data)


_FIELDS = {"mooncake": ("timestamp", "input_length", "output_length", 1e-3),
           "plain": ("at", "input_tokens", "output_tokens", 1.0)}


def _row(obj: dict[str, Any], layout: str, where: str) -> TraceRequest:
    t_key, in_key, out_key, scale = _FIELDS[layout]
    vals = []
    for key in (t_key, in_key, out_key):
        v = obj.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise AssayError(f"{where}: field {key!r} must be a number of at least 0 (the {layout} layout), got {v!r}")
        vals.append(v)
    if int(vals[1]) != vals[1] or int(vals[2]) != vals[2] or vals[1] < 4 or vals[2] < 1:
        raise AssayError(f"{where}: {in_key!r} must be a whole number of at least 4 and {out_key!r} at least 1")
    ids = obj.get("hash_ids") or []
    if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
        raise AssayError(f"{where}: field 'hash_ids' must be a list of integers")
    if ids and not ((len(ids) - 1) * BLOCK_SIZE < vals[1] <= len(ids) * BLOCK_SIZE):
        raise AssayError(f"{where}: {len(ids)} hash ids of {BLOCK_SIZE} tokens cannot make {int(vals[1])} "
                         "input tokens")
    return TraceRequest(float(vals[0]) * scale, int(vals[1]), int(vals[2]), tuple(ids))


def _settled(reqs: list[TraceRequest], layout: str, source: str, data: bytes) -> Trace:
    """Requests in arrival order, times from the first."""
    reqs = sorted(reqs, key=lambda r: r.at)
    t0 = reqs[0].at
    reqs = [TraceRequest(r.at - t0, r.input_tokens, r.output_tokens, r.hash_ids) for r in reqs]
    return Trace(reqs, layout, source, hashlib.sha256(data).hexdigest())


def _read_otlp(path: str) -> Trace:
    from assay.formats.genai_spans import Summary, view_of
    from assay.formats.otlp import read_file

    traces = read_file(path)
    summary = Summary()
    reqs = []
    for tr in traces:
        for span in tr.spans:
            v = view_of(span, summary)
            if v.role != "llm" or not v.tokens or span.start is None:
                continue
            i, o = v.tokens[0], v.tokens[1]
            if i is None or o is None or i < 4 or o < 1:
                continue
            reqs.append(TraceRequest(span.start / 1e9, int(i), int(o)))
    if not reqs:
        raise AssayError(f"--replay otlp:{path}: no model-call span with input and output token counts "
                         "(gen_ai.usage.input_tokens / output_tokens)")
    digest = hashlib.sha256(orjson.dumps([(r.at, r.input_tokens, r.output_tokens) for r in reqs])).hexdigest()
    tr = _settled(reqs, "otlp", path, b"")
    tr.sha256 = digest
    return tr


async def trace_prompts(counter: Counter, reqs: list[TraceRequest], *, seed: int = 0,
                        progress: Callable[[int], None] | None = None) -> list[Prompt]:
    """One prompt per request, of exactly its input length by ``counter`` (see the module doc)."""
    rng = random.Random(seed)
    blocks: dict[int, str] = {}
    out: list[Prompt] = []
    for r in reqs:
        if r.hash_ids:
            for h in r.hash_ids:
                if h not in blocks:
                    blocks[h] = await fit_text(counter, "", BLOCK_SIZE, rng)
            head = " ".join(blocks[h] for h in r.hash_ids[:-1])
            last = blocks[r.hash_ids[-1]].split()
            left = r.input_tokens - (len(r.hash_ids) - 1) * BLOCK_SIZE
            start = last[:max(1, int(len(last) * left / BLOCK_SIZE))]
            text = await fit_text(counter, head, r.input_tokens, rng, start=start)
        else:
            text = await fit_text(counter, f"Request {rng.getrandbits(40):010x}:", r.input_tokens, rng)
        (c,) = await counter.count([text])
        out.append(Prompt(text, c, c == r.input_tokens))
        if progress:
            progress(1)
    return out


def shared_blocks(reqs: list[TraceRequest]) -> dict[str, Any]:
    """How much of the trace's input an ideal prefix cache could serve: tokens in blocks an earlier
    request already sent as the same prefix, over all input tokens."""
    seen: dict[tuple[int, ...], int] = {}       # a prefix of blocks -> its last block's tokens sent so far
    hit = total = 0
    for r in reqs:
        total += r.input_tokens
        for k in range(1, len(r.hash_ids) + 1):
            key = r.hash_ids[:k]
            own = min(BLOCK_SIZE, r.input_tokens - (k - 1) * BLOCK_SIZE)
            hit += min(own, seen.get(key, 0))
            seen[key] = max(own, seen.get(key, 0))
    return {"input_tokens": total, "reusable_tokens": hit, "reusable_share": hit / total if total else 0.0}


def trace_rate(reqs: list[TraceRequest], speed: float) -> float | None:
    """The replay's mean arrival rate (requests per second at ``speed``); None for one request or
    requests that all arrive at once."""
    span = (reqs[-1].at - reqs[0].at) / speed if reqs else 0.0
    return float(f"{(len(reqs) - 1) / span:.4g}") if len(reqs) > 1 and span > 0 else None


def replay_block(trace: Trace, speed: float, prompts: list[Prompt], records: list[dict[str, Any]],
                 point: dict[str, Any]) -> dict[str, Any]:
    """A replayed point's own facts: the schedule kept (send − scheduled time, ms), the prompts
    made exactly to length, the answers that came back at the trace's output length."""
    ok = [r for r in records if r["status"] == "ok"]
    out_met = sum(1 for r in ok if r["output_tokens"]["used"] == r.get("asked_output"))
    reqs = trace.requests
    return {"requests": len(reqs), "speed": speed, "span_s": (reqs[-1].at - reqs[0].at) / speed,
            "schedule_lag_ms": (point.get("validity") or {}).get("schedule_lag_ms"),
            "input_exact": sum(1 for p in prompts if p.exact), "output_as_traced": out_met, "completed": len(ok),
            **shared_blocks(reqs)}
