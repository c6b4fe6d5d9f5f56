"""Cost: prices from the one price table, the estimated cost and cost index, and what stored runs cost.

* **estimated cost** = ``(3 × input price + output price) / 4`` USD per 1M tokens: the two prices
  blended 3:1 input:output (the share of a typical request's tokens);
* **cost index** = the estimated cost (lower is cheaper);
* the **cost of a run** = its input tokens × the input price + its output tokens × the output price.

The table is :mod:`assay.models.price_table` (the shipped one, ``$ASSAY_PRICES`` or a file you
name). A model the table does not list has an unknown price and an unknown cost: ``None``,
never 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from assay.bench.kinds import find_kind
from assay.models.price_table import Price, PriceTable, active_table

BLEND_INPUT, BLEND_OUTPUT = 3, 1          # input:output weights of the estimated cost
_TABLE_SOURCE = "price table"

PriceLike = Price | tuple[float, float] | Sequence[float] | Mapping[str, float] | None


def _pair(price: PriceLike) -> tuple[float, float] | None:
    if price is None:
        return None
    if isinstance(price, Price):
        return price.per_1m
    if isinstance(price, Mapping):
        return float(price["input"]), float(price["output"])
    pin, pout = price
    return float(pin), float(pout)


def estimated_cost(price: PriceLike) -> float | None:
    """``(3 × input + output) / 4`` USD per 1M tokens; None for an unknown price."""
    p = _pair(price)
    if p is None:
        return None
    return round((BLEND_INPUT * p[0] + BLEND_OUTPUT * p[1]) / (BLEND_INPUT + BLEND_OUTPUT), 10)


def cost_index(price: PriceLike) -> float | None:
    """The cost index of a model: its estimated cost per 1M tokens (lower is cheaper)."""
    return estimated_cost(price)


def tokens_cost(input_tokens: float | None, output_tokens: float | None, price: PriceLike) -> float | None:
    """USD for ``input_tokens`` and ``output_tokens`` at ``price`` (USD per 1M); None when the
    price or the token counts are unknown."""
    p = _pair(price)
    if p is None or input_tokens is None or output_tokens is None:
        return None
    return round((input_tokens * p[0] + output_tokens * p[1]) / 1e6, 8)


def price_usage(model: str | None, input_tokens: float | None, output_tokens: float | None, *,
                deployment: str | None = None, table: PriceTable | None = None) -> dict[str, Any]:
    """What ``model`` (on ``deployment``; default its standard row) charges for this token usage,
    from ``table`` (default: the table in force)."""
    t = table or active_table()
    row = t.find(model, deployment)
    return {"model": model, "deployment": row.deployment if row else deployment,
            "input_tokens": input_tokens, "output_tokens": output_tokens,
            "price_per_1m": _per_1m(row), "estimated_cost_per_1m": estimated_cost(row),
            "cost_usd": tokens_cost(input_tokens, output_tokens, row),
            "price_source": t.label if row else "unknown"}


def _per_1m(price: PriceLike) -> dict[str, float] | None:
    p = _pair(price)
    return None if p is None else {"input": p[0], "output": p[1]}


# -- the table, ranked ---------------------------------------------------------------------------

def price_rows(table: PriceTable | None = None, models: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The table's rows with their estimated cost and cost index, cheapest first, ranked
    (equal indices share a rank). ``models``: only these (a model the table does not list
    comes back with every figure None)."""
    t = table or active_table()
    wanted = [m for m in (models or []) if m and m.strip()]
    if wanted:
        rows: list[Price | str] = []
        for m in wanted:
            hit = [r for r in t.rows if t.find(m, r.deployment) is r]
            rows.extend(x for x in (hit or [m.strip()]) if x not in rows)
    else:
        rows = list(t.rows)
    out = []
    for r in rows:
        if isinstance(r, Price):
            d = r.as_dict()
            d["estimated_cost_per_1m"] = d["cost_index"] = estimated_cost(r)
        else:
            d = {"model": r, "deployment": None, "input": None, "output": None, "currency": "USD",
                 "source": "unknown", "estimated_cost_per_1m": None, "cost_index": None}
        out.append(d)
    out.sort(key=lambda d: (d["cost_index"] is None, d["cost_index"] or 0.0))
    rank, last = 0, None
    for i, d in enumerate(out, 1):
        if d["cost_index"] is None:
            d["rank"] = None
            continue
        if d["cost_index"] != last:
            rank, last = i, d["cost_index"]
        d["rank"] = rank
    return out


# -- stored runs ---------------------------------------------------------------------------------

def _choose(model: str | None, deployment: str | None, recorded: Any, recorded_source: str | None,
            table: PriceTable) -> tuple[tuple[float, float] | None, str]:
    """The price of a stored run: a price set explicitly when it ran (an option, the judge's own,
    ``$ASSAY_JUDGE_PRICE``, an in-process model's zero) stands; otherwise the table in force
    (so ``--prices`` reprices), else the price recorded with the run, else unknown."""
    rec = None
    if recorded is not None:
        try:
            rec = _pair(recorded)
        except (TypeError, ValueError, KeyError):
            rec = None
    src = (recorded_source or "").strip()
    explicit = rec is not None and src and not src.startswith(_TABLE_SOURCE) and src != "unknown"
    if explicit:
        return rec, src
    row = table.find(model, deployment) if model else None
    if row is not None:
        return row.per_1m, table.label
    if rec is not None:
        return rec, f"{src or 'recorded'} (recorded with the run)"
    return None, "unknown"


def judge_model_name(judge: str | None) -> str | None:
    """The model of a stored judge name: ``openai:gpt-4o-mini`` -> ``gpt-4o-mini``,
    ``http://host/v1#qwen`` -> ``qwen``, ``azure:DEPLOYMENT`` -> ``DEPLOYMENT``."""
    if not judge:
        return None
    if "#" in judge:
        return judge.rsplit("#", 1)[1] or None
    for prefix in ("openai:", "azure:"):
        if judge.startswith(prefix):
            return judge[len(prefix):] or None
    return judge


def eval_run_cost(run: Mapping[str, Any], table: PriceTable | None = None) -> dict[str, Any]:
    """The cost of a stored evaluation run (a :meth:`Store.list_runs` row) from its judge usage."""
    t = table or active_table()
    usage = run.get("usage") if isinstance(run.get("usage"), Mapping) else None
    judge = run.get("judge")
    model = judge_model_name(judge)
    base = {"kind": "eval", "id": run.get("id"), "name": run.get("name"), "created_at": run.get("created_at"),
            "status": run.get("status"), "model": model, "judge": judge, "deployment": None}
    if usage is None:
        if judge is None:   # no judge, no judge calls: nothing was spent on judging
            return {**base, "input_tokens": 0, "output_tokens": 0, "tokens_from": "no judge",
                    "price_per_1m": None, "price_source": "no judge", "cost_usd": 0.0, "recorded_cost_usd": None,
                    "no_price": None}
        return {**base, "input_tokens": None, "output_tokens": None, "tokens_from": "not recorded",
                "price_per_1m": None, "price_source": "unknown", "cost_usd": None, "recorded_cost_usd": None,
                "no_price": "no price: the run recorded no judge usage"}
    tin = count(usage.get("prompt_tokens"))
    tout = count(usage.get("completion_tokens"))
    price, source = _choose(model, None, usage.get("price_per_1m"), usage.get("price_source"), t)
    cost = tokens_cost(tin, tout, price)
    return {**base, "input_tokens": tin, "output_tokens": tout, "tokens_from": "judge usage",
            "price_per_1m": _per_1m(price), "price_source": source, "cost_usd": cost,
            "recorded_cost_usd": usage.get("cost_usd"),
            "no_price": None if cost is not None else no_price(judge, price, tin, tout, "in the judge usage", t)}


def run_tokens(kind: Any, details: Mapping[str, Any] | None) -> tuple[float | None, float | None, str]:
    """(input tokens, output tokens, how they were found) of a stored benchmark run of ``kind``, as
    its kind reads them (:attr:`BenchKind.tokens`); ``"not recorded"`` for a kind that keeps none."""
    found = find_kind(kind)
    if found is None or found.tokens is None:
        return None, None, "not recorded"
    return found.tokens(details)


def benchmark_cost(bench: Mapping[str, Any], table: PriceTable | None = None) -> dict[str, Any]:
    """The cost of a stored benchmark run (a :meth:`Store.list_benchmarks` row) from its tokens."""
    t = table or active_table()
    details = bench.get("details") if isinstance(bench.get("details"), Mapping) else {}
    model = bench.get("model") or details.get("model")
    deployment = details.get("deployment") if isinstance(details.get("deployment"), str) else None
    tin, tout, how = run_tokens(bench.get("kind"), details)
    rec = details.get("cost") if isinstance(details.get("cost"), Mapping) else {}
    price, source = _choose(model, deployment, rec.get("price_per_1m"), rec.get("source"), t)
    if price is None and model and judge_model_name(model) != model:      # http://HOST/v1#NAME: NAME's price
        price, source = _choose(judge_model_name(model), deployment, None, None, t)
    cost = tokens_cost(tin, tout, price)
    ref = bench.get("ref") or bench.get("id")
    return {"kind": bench.get("kind") or "benchmark", "id": str(ref) if ref is not None else None,
            "name": bench.get("name") or details.get("name"), "created_at": bench.get("created_at"), "status": None,
            "model": model, "judge": None, "deployment": deployment, "input_tokens": tin, "output_tokens": tout,
            "tokens_from": how, "price_per_1m": _per_1m(price), "price_source": source,
            "cost_usd": cost, "recorded_cost_usd": rec.get("usd"),
            "no_price": None if cost is not None else no_price(model, price, tin, tout, how, t)}


def no_price(model: str | None, price: Any, tin: float | None, tout: float | None, how: str,
             table: PriceTable) -> str:
    """Why a run has no cost, in one line: ``no price: <reason>``."""
    why = []
    if price is None:
        why.append(f"{model or 'the model'} is not in the {table.label}" + (
            " (a self-hosted endpoint: give its price with --prices FILE)" if model and "://" in model else ""))
    if tin is None or tout is None:
        why.append(f"token counts {how}" if how.startswith("not recorded") else f"token counts not recorded ({how})")
    return "no price: " + ("; ".join(why) or "unknown")


def _check_cost(bench: Mapping[str, Any], table: PriceTable) -> dict[str, Any]:
    """The cost of a stored judge check (``assay judge check``): its judge's usage, priced as an
    evaluation run's."""
    details = bench.get("details") if isinstance(bench.get("details"), Mapping) else {}
    as_run = {"id": bench.get("ref"), "name": bench.get("name"), "created_at": bench.get("created_at"),
              "status": "completed", "judge": bench.get("model"), "usage": details.get("usage")}
    return {**eval_run_cost(as_run, table), "kind": "judge check"}


def stored_costs(store: Any, table: PriceTable | None = None, *, models: Iterable[str] | None = None,
                 limit: int | None = None) -> list[dict[str, Any]]:
    """The cost of the stored evaluation runs and benchmark runs, newest first (at most ``limit``
    of each); ``models``: only runs of these models (an evaluation run's model is its judge's)."""
    t = table or active_table()
    benches = store.list_benchmarks()
    # a benchmark that keeps its items as a run (quality) is one row, the benchmark's
    behind = {b.get("run_id") for b in benches if b.get("run_id")}
    rows = [unfinished_cost(r) if _family(r) else eval_run_cost(r, t)
            for r in store.list_runs(limit=limit) if r.get("id") not in behind]
    rows += [_check_cost(b, t) if b.get("kind") == "judge_check" else benchmark_cost(b, t)
             for b in (benches[:limit] if limit is not None else benches)]
    wanted = {_key(m) for m in (models or []) if m and m.strip()}
    if wanted:
        rows = [r for r in rows if r["model"] and _key(r["model"]) in wanted]
    rows.sort(key=lambda r: -(r["created_at"] or 0.0))
    return rows


def _family(run: Mapping[str, Any]) -> str | None:
    """The benchmark kind whose items a stored run holds (``quality``), else None (an evaluation run)."""
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    family = config.get("family")
    return family if family and find_kind(family) is not None else None


def unfinished_cost(run: Mapping[str, Any]) -> dict[str, Any]:
    """A benchmark's run that stored no benchmark (stopped, failed, or still running): its model
    under test, and no cost (the tokens are counted into the benchmark when the run completes)."""
    config = run.get("config") if isinstance(run.get("config"), Mapping) else {}
    status = run.get("status") or "unfinished"
    return {"kind": _family(run), "id": run.get("id"), "name": run.get("name"), "created_at": run.get("created_at"),
            "status": status, "model": config.get("model"), "judge": run.get("judge"), "deployment": None,
            "input_tokens": None, "output_tokens": None, "tokens_from": "not recorded", "price_per_1m": None,
            "price_source": "unknown", "cost_usd": None, "recorded_cost_usd": None,
            "no_price": f"no price: the run is {status}; its tokens are counted when it completes"}


def _key(model: str) -> str:
    k = " ".join(model.split()).lower()
    return k[len("openai/"):] if k.startswith("openai/") else k


def count(v: Any) -> float | None:
    """A token count as recorded: a finite number of at least 0, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        return None
    return v


__all__ = ["BLEND_INPUT", "BLEND_OUTPUT", "benchmark_cost", "cost_index", "count", "estimated_cost", "eval_run_cost",
           "judge_model_name", "no_price", "price_rows", "price_usage", "run_tokens", "stored_costs", "tokens_cost",
           "unfinished_cost"]
