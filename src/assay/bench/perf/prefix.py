"""What a prefix cache buys (``assay bench perf --shared-prefix N --prefix-groups G``).

Each load point runs twice: first the same number of prompts of the same length with nothing shared
(every prompt differs from its first token), then the point proper, whose prompts start with one of
``G`` shared prefixes of ``N`` tokens (prompt ``i`` with prefix ``i % G``). The point's ``prefix``
block holds TTFT (and E2E) with and without the shared prefix side by side, and the hit rate:

- **measured**, where the server exposes prefix-cache counters (``--server-metrics``; vLLM's
  ``prefix_cache_hits`` / ``prefix_cache_queries``, tokens): hits / queries over the point;
- else **from the answers' usage**, where the server reports the cached part of each prompt
  (``usage.prompt_tokens_details.cached_tokens``: OpenAI's field, which vLLM and llama.cpp's own
  ``llama-server`` fill): cached tokens / prompt tokens over the point's answers that carry it;
- else **inferred**, and labelled so: the shared tokens of every request whose prefix an earlier
  request (the warm-up included) already sent, over all input tokens — what an ideal cache of
  unbounded size would hit. A server's own hit-rate gauge (SGLang's ``cache_hit_rate``) is kept
  beside it where present.
"""

from __future__ import annotations

from typing import Any


def inferred_hit_rate(n_warmup: int, n_timed: int, groups: int, shared: int, tokens: int) -> float:
    """The ideal cache's hit rate over the timed requests (see the module doc)."""
    seen = {i % groups for i in range(n_warmup)}
    hit = 0
    for i in range(n_warmup, n_warmup + n_timed):
        g = i % groups
        if g in seen:
            hit += shared
        seen.add(g)
    return hit / (n_timed * tokens) if n_timed and tokens else 0.0


def usage_hit_rate(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Cached / prompt tokens by the server's usage over the completed requests that report both
    (``input_tokens.cached`` and ``.usage``), or None when none does."""
    hit = total = n = 0
    for r in records:
        t = r.get("input_tokens") or {}
        if r.get("status") == "ok" and t.get("cached") is not None and t.get("usage"):
            hit, total, n = hit + t["cached"], total + t["usage"], n + 1
    return {"rate": hit / total, "requests": n, "cached_tokens": hit, "prompt_tokens": total} if n else None


def _side(metrics: dict[str, Any], name: str) -> dict[str, Any] | None:
    d = metrics.get(name)
    return {k: d.get(k) for k in ("n", "mean", "p50", "p90", "p99")} if d else None


def _source(measured: float | None, usage: dict[str, Any] | None, server: dict[str, Any]) -> str:
    if measured is not None:
        return "server counters (prefix_cache_hits / prefix_cache_queries)"
    if usage is not None:
        return (f"server usage (prompt_tokens_details.cached_tokens / prompt_tokens, {usage['requests']} answers); "
                "no prefix-cache counters" + ("" if server else " (no --server-metrics)"))
    return ("inferred (an ideal cache: shared tokens already sent / input tokens); the server exposed no "
            "prefix-cache counters" + ("" if server else " (no --server-metrics)") + " and no cached tokens in its usage")


def prefix_block(*, shared: int, groups: int, tokens: int, n_warmup: int, n_timed: int,
                 without: dict[str, Any], point: dict[str, Any],
                 usage: dict[str, Any] | None = None) -> dict[str, Any]:
    """A point's ``prefix`` block: TTFT and E2E with and without the shared prefix, the hit rate and
    where it came from (``usage``: :func:`usage_hit_rate` over the point's requests)."""
    server = point.get("server") or {}
    measured = server.get("prefix_cache_hit_rate_measured")
    inferred = inferred_hit_rate(n_warmup, n_timed, groups, shared, tokens)
    from_usage = usage["rate"] if usage is not None else None
    with_m, without_m = point.get("metrics") or {}, without.get("metrics") or {}
    ttft_w, ttft_wo = _side(with_m, "ttft"), _side(without_m, "ttft")
    ratio = (ttft_w["mean"] / ttft_wo["mean"]) if ttft_w and ttft_wo and ttft_wo["mean"] else None
    gauge = (server.get("prefix_cache_hit_rate") or {}).get("mean")
    return {"shared_tokens": shared, "groups": groups,
            "hit_rate": measured if measured is not None else from_usage if from_usage is not None else inferred,
            "hit_rate_source": _source(measured, usage, server),
            "hit_rate_usage": from_usage, "hit_rate_inferred": inferred, "server_hit_rate_gauge": gauge,
            "ttft": {"with": ttft_w, "without": ttft_wo, "ratio_of_means": ratio},
            "e2e": {"with": _side(with_m, "e2e"), "without": _side(without_m, "e2e")},
            "without": {"requests": without.get("requests"), "request_throughput": without.get("request_throughput"),
                        "valid": (without.get("validity") or {}).get("valid")}}


def fingerprint(shared: int, groups: int) -> str:
    return f"prefix cache: {shared} shared tokens in {groups} group(s), measured against none shared"
