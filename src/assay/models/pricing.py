"""What judge calls cost: the price table, overrides, and a run's judge usage.

Prices are USD per 1M input (prompt) tokens and per 1M output (completion) tokens, read from
the one price table (:mod:`assay.models.price_table`): the file named by ``$ASSAY_PRICES``
(YAML, JSON or CSV), else the table shipped with assay (``assay/models/prices.json``: OpenAI's
published list prices, standard tier, no batch or cached-input discount, as of
:data:`PRICES_AS_OF`). Prices change, so every figure can be overridden, first match wins:

1. ``options={"judge_price": (in, out)}`` (or ``"in,out"``) in :func:`assay.evaluate`;
2. ``build_judge(spec, price=(in, out))`` / ``LimitedModel(..., price=(in, out))``;
3. ``$ASSAY_JUDGE_PRICE="in,out"`` (e.g. ``ASSAY_JUDGE_PRICE=0.15,0.60``);
4. the backend's own ``price``: the table's ``standard`` row (or the model's only row) for
   OpenAI and Azure OpenAI models; ``(0, 0)`` for an in-process model such as the embedded judge.

The cost is ``None`` (unknown), never 0, when none of these names a price: a self-hosted
endpoint (vLLM, Ollama, llama.cpp server) or an Azure deployment whose name is not a model's.
A cache hit costs nothing: costs are computed from the tokens of calls actually made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from assay.errors import AssayError
from assay.models.price_table import PRICES_ENV, PriceTable, active_table, builtin_table

PRICE_ENV = "ASSAY_JUDGE_PRICE"
PRICES_AS_OF: str = builtin_table().as_of or ""       # when the shipped table's figures were read

# model -> (USD per 1M input tokens, USD per 1M output tokens): the shipped table's standard rows.
OPENAI_PRICES: dict[str, tuple[float, float]] = {
    r.model: r.per_1m for r in builtin_table().rows if r.deployment == "standard"}


def lookup_price(model: str | None, deployment: str | None = None,
                 table: PriceTable | None = None) -> tuple[float, float] | None:
    """The price of ``model`` (or a dated snapshot of it) in ``table`` (default: the table in
    force, see :func:`~assay.models.price_table.active_table`); None if unlisted."""
    row = (table or active_table()).find(model, deployment)
    return None if row is None else row.per_1m


def parse_price(value: Any, *, where: str = "price") -> tuple[float, float]:
    """``"in,out"``, ``(in, out)`` or ``{"input": in, "output": out}`` -> ``(in, out)`` (USD per 1M)."""
    try:
        if isinstance(value, str):
            parts = [p.strip() for p in value.replace(";", ",").split(",")]
            if len(parts) != 2:
                raise ValueError
            pin, pout = float(parts[0]), float(parts[1])
        elif isinstance(value, Mapping):
            pin, pout = float(value["input"]), float(value["output"])
        else:
            pin, pout = (float(x) for x in value)
    except (TypeError, ValueError, KeyError):
        raise AssayError(f"{where}: expected USD per 1M input and output tokens as 'IN,OUT' "
                         f"(e.g. 0.15,0.60), got {value!r}") from None
    if pin < 0 or pout < 0 or pin != pin or pout != pout:
        raise AssayError(f"{where}: prices must be non-negative numbers, got {value!r}")
    return pin, pout


def judge_price(model: Any, options: Mapping[str, Any] | None = None) -> tuple[tuple[float, float] | None, str]:
    """``(price or None, where it came from)`` for a judge (a LimitedModel or a bare backend)."""
    from assay.models.limited import LimitedModel

    opt = (options or {}).get("judge_price")
    if opt is not None:
        return parse_price(opt, where="options['judge_price']"), "option judge_price"
    backend = model
    if isinstance(model, LimitedModel):
        if model.price is not None:
            return parse_price(model.price, where="LimitedModel price"), "given"
        backend = model.model
    env = os.environ.get(PRICE_ENV, "").strip()
    if env:
        return parse_price(env, where=f"${PRICE_ENV}"), f"${PRICE_ENV}"
    p = getattr(backend, "price", None)
    if p is not None:
        return parse_price(p, where=f"{type(backend).__name__}.price"), getattr(backend, "price_source", "backend")
    return None, "unknown"


BATCH_DISCOUNT = 0.5   # OpenAI's Batch API and Anthropic's Message Batches: half the list price, both ways


def batch_price(model: Any, options: Mapping[str, Any] | None = None) -> tuple[tuple[float, float] | None, str]:
    """``(price or None, where it came from)`` of ``model``'s calls sent through a provider's batch
    API (``assay eval --batch``): :func:`judge_price` times :data:`BATCH_DISCOUNT` (50% off input and
    output tokens, as OpenAI and Anthropic publish it). An overriding price (``judge_price``,
    ``$ASSAY_JUDGE_PRICE``) is read as a list price and discounted the same way."""
    price, source = judge_price(model, options)
    if price is None:
        return None, source
    return (price[0] * BATCH_DISCOUNT, price[1] * BATCH_DISCOUNT), f"{source}, batch price ({BATCH_DISCOUNT:.0%} of list)"


def cost_usd(prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None) -> float | None:
    if price is None:
        return None
    return round((prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6, 8)


def judge_usage(model: Any, since: Mapping[str, int] | None = None,
                options: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """A run's judge usage: calls (generated and probability-scored), cache hits, errors, paid
    prompt and completion tokens and their cost, counted after ``since`` (a
    :meth:`~assay.models.limited.CallStats.snapshot` taken when the run began), and under ``judge``
    the judge's configuration (:func:`~assay.models.judge_config.judge_config`). None for a judge that
    keeps no counts."""
    stats = getattr(model, "stats", None)
    if stats is None or not hasattr(stats, "since"):
        return None
    d: dict[str, Any] = stats.since(since)
    price, source = judge_price(model, options)
    d["cost_usd"] = cost_usd(d["prompt_tokens"], d["completion_tokens"], price)
    d["price_per_1m"] = {"input": price[0], "output": price[1]} if price is not None else None
    d["price_source"] = source
    from assay.models.judge_config import judge_config

    d["judge"] = judge_config(model)     # the judge's configuration, recorded with the run
    return d


__all__ = ["BATCH_DISCOUNT", "OPENAI_PRICES", "PRICES_AS_OF", "PRICES_ENV", "PRICE_ENV", "batch_price", "cost_usd", "judge_price", "judge_usage",
           "lookup_price", "parse_price"]
