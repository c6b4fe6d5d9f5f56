"""Requests spread over LoRA adapters (``assay bench perf --lora a,b --lora-mix MIX``): each request
names one adapter as its ``model`` (how vLLM, SGLang and llama.cpp's server pick a loaded adapter),
chosen by the mix, and the point's ``lora`` block gives each adapter's own figures.

Mixes: ``uniform`` (each request draws an adapter at random, equal chances, seeded by ``--seed``),
``round-robin`` (in turn), or weights ``3,1`` (one per adapter, drawn at random in that proportion).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from assay.errors import AssayError


def parse_mix(adapters: list[str], mix: str) -> list[float] | None:
    """The mix's weights (None: round-robin)."""
    m = mix.strip().lower()
    if m == "round-robin":
        return None
    if m == "uniform":
        return [1.0 / len(adapters)] * len(adapters)
    try:
        w = [float(x) for x in m.split(",")]
    except ValueError:
        raise AssayError(f"--lora-mix: expected uniform, round-robin or one weight per adapter, got {mix!r}") from None
    if len(w) != len(adapters) or any(not x >= 0 for x in w) or not sum(w) > 0:
        raise AssayError(f"--lora-mix: {len(adapters)} adapter(s) need as many weights of 0 or more, got {mix!r}")
    return [x / sum(w) for x in w]


def assign(adapters: list[str], mix: str, n: int, seed: int) -> list[str]:
    """The adapter of each of ``n`` requests."""
    weights = parse_mix(adapters, mix)
    if weights is None:
        return [adapters[i % len(adapters)] for i in range(n)]
    picks = np.random.default_rng(seed).choice(len(adapters), size=n, p=weights)
    return [adapters[int(k)] for k in picks]


def _stat(v: list[float]) -> dict[str, Any] | None:
    if not v:
        return None
    a = np.asarray(v, dtype=np.float64)
    return {"n": len(a), "mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99))}


def per_adapter(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Each adapter's requests sent and completed, TTFT, TPOT and E2E (s)."""
    out: dict[str, Any] = {}
    for name in sorted({r["adapter"] for r in records if r.get("adapter")}):
        mine = [r for r in records if r.get("adapter") == name]
        ok = [r for r in mine if r["status"] == "ok"]
        out[name] = {"sent": len(mine), "ok": len(ok),
                     **{m: _stat([r[m] for r in ok if r.get(m) is not None]) for m in ("ttft", "tpot", "e2e")}}
    return out


def fingerprint(adapters: list[str], mix: str) -> str:
    return f"lora {','.join(adapters)} ({mix})"
