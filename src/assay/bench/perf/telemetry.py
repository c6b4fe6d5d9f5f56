"""The server's own counters during a perf run (``--server-metrics URL``): Prometheus text scraped
every ``--metrics-interval`` seconds (and at each point's start and end), stored with the run on the
run's time axis, and summarised per point.

Signals, by the names vLLM, SGLang and llama.cpp's server expose (the first name present wins; a
name's series are summed over their labels):

- gauges: ``running`` (requests being processed), ``queued`` (waiting), ``kv_cache_usage`` (share
  of the KV cache in use, 0–1), ``prefix_cache_hit_rate`` (a server's own rate gauge),
  ``spec_accept_length`` (SGLang's mean accepted speculative length);
- counters (differences over a point): ``prefix_cache_hits`` / ``prefix_cache_queries`` (tokens;
  llama-server counts no queries: they are its cached plus its evaluated prompt tokens,
  ``prompt_tokens_cached_total`` + ``prompt_tokens_total``, the latter ``prompt_tokens_uncached``),
  ``spec_accepted_tokens`` / ``spec_draft_tokens`` / ``spec_drafts``, ``prompt_tokens``,
  ``generation_tokens``, ``decode_steps``.

Per point (:func:`point_summary`): each gauge's mean and max over the samples inside the point, and
from the counters' differences the prefix-cache hit rate (hits / queries), the speculative
acceptance rate (accepted / draft tokens) and mean acceptance length (1 + accepted / drafts, vLLM's
definition), and tokens per decode step.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any
from urllib.parse import urlsplit

GAUGES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"),
    "queued": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                       "llamacpp:kv_cache_usage_ratio"),
    "prefix_cache_hit_rate": ("vllm:gpu_prefix_cache_hit_rate", "sglang:cache_hit_rate"),
    "spec_accept_length": ("sglang:spec_accept_length",),
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits", "llamacpp:prompt_tokens_cached_total"),
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"),
    "prompt_tokens_uncached": ("llamacpp:prompt_tokens_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total", "llamacpp:prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total",
                          "llamacpp:tokens_predicted_total"),
    "decode_steps": ("llamacpp:n_decode_total",),
}
DEFAULT_INTERVAL = 1.0


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition → metric name → value summed over its label sets (comments,
    histogram buckets and unreadable lines skipped)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            rest = rest.rpartition("}")[2]
        else:
            name, _, rest = line.partition(" ")
        parts = rest.split()
        if not parts:
            continue
        try:
            v = float(parts[0])
        except ValueError:
            continue
        if math.isfinite(v):
            out[name.strip()] = out.get(name.strip(), 0.0) + v
    return out


def signals(raw: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """The known signals found in ``raw`` and the metric name each came from."""
    vals: dict[str, float] = {}
    names: dict[str, str] = {}
    for sig, cands in {**GAUGES, **COUNTERS}.items():
        for n in cands:
            if n in raw:
                vals[sig], names[sig] = raw[n], n
                break
    return vals, names


class Scraper:
    """Scrapes ``url`` while a run goes: :meth:`start` a background loop, :meth:`scrape` once now,
    :meth:`stop`; ``samples`` are ``(monotonic time, signals)``."""

    def __init__(self, url: str, interval: float = DEFAULT_INTERVAL, timeout: float = 5.0) -> None:
        from assay.errors import AssayError
        from assay.models.http import LeanHTTP

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise AssayError(f"--server-metrics must be an http(s) URL of a Prometheus page, got {url!r}")
        self.url, self.interval = url, interval
        self.http = LeanHTTP(f"{parts.scheme}://{parts.netloc}", timeout=timeout)
        self._head = self.http.head("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                                    {"Accept": "text/plain"})
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.names: dict[str, str] = {}
        self.errors: list[str] = []
        self._task: asyncio.Task | None = None

    async def scrape(self) -> None:
        try:
            resp = await self.http.request(self._head)
            if resp.status != 200:
                raise ConnectionError(f"HTTP {resp.status}")
            vals, names = signals(parse_prometheus(resp.body.decode("utf-8", "replace")))
        except (OSError, ConnectionError, TimeoutError, asyncio.TimeoutError) as exc:
            if len(self.errors) < 20:
                self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
            return
        self.names.update(names)
        self.samples.append((time.monotonic(), vals))

    async def _loop(self) -> None:
        while True:
            await self.scrape()
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.http.aclose()

    def stored(self, t0: float) -> dict[str, Any]:
        """What the run keeps: the samples on the run's time axis (s from ``t0``), the names found."""
        return {"url": self.url, "interval_s": self.interval, "names": dict(self.names),
                "samples": [{"t": round(t - t0, 6), **v} for t, v in self.samples],
                "scrape_errors": list(self.errors)}


def _delta(inside: list[dict[str, float]], sig: str) -> float | None:
    vals = [s[sig] for s in inside if sig in s]
    return vals[-1] - vals[0] if len(vals) >= 2 else None


def point_summary(samples: list[tuple[float, dict[str, float]]], start: float, end: float) -> dict[str, Any] | None:
    """One point's server figures from the samples between ``start`` and ``end`` (monotonic s)."""
    inside = [v for t, v in samples if start <= t <= end]
    if not inside:
        return None
    out: dict[str, Any] = {"samples": len(inside)}
    for sig in GAUGES:
        vals = [s[sig] for s in inside if sig in s]
        if vals:
            out[sig] = {"mean": sum(vals) / len(vals), "max": max(vals)}
    deltas = {sig: _delta(inside, sig) for sig in COUNTERS}
    out["counters"] = {k: v for k, v in deltas.items() if v is not None}
    hits, queries = deltas["prefix_cache_hits"], deltas["prefix_cache_queries"]
    if queries is None and hits is not None and deltas["prompt_tokens_uncached"] is not None:
        queries = hits + deltas["prompt_tokens_uncached"]
    if hits is not None and queries:
        out["prefix_cache_hit_rate_measured"] = hits / queries
    acc, drafts_tok, drafts = deltas["spec_accepted_tokens"], deltas["spec_draft_tokens"], deltas["spec_drafts"]
    if acc is not None and drafts_tok:
        out["spec_acceptance_rate"] = acc / drafts_tok
    if acc is not None and drafts:
        out["spec_mean_acceptance_length"] = 1 + acc / drafts
    gen, steps = deltas["generation_tokens"], deltas["decode_steps"]
    if gen is not None and steps:
        out["tokens_per_step"] = gen / steps
    return out
