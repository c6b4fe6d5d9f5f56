"""A run's caps and its dead-letter.

Caps (``max_cost``, ``max_errors``; ``--max-cost USD``, ``--max-errors N``): the
:class:`~assay.engine.run.ChunkRunner` asks :meth:`Budget.over` before it waits for the next
chunk, and again every :data:`POLL_S` seconds while it waits, so a run stops soon after its
spending reaches the cap, whatever scores the chunks (this process, or Ray actors whose judge
counts come back with each chunk). The chunks already consumed stay saved; the run is left
``interrupted`` with the reason, and :class:`~assay.errors.BudgetExceeded` (exit 3) says how to
go on: the same command with ``--resume`` and a raised cap. The caps count the whole run, every
session of a resumed one: its judge cost, the target's cost where the target's price is known,
and its errored rows (a row with a target error or any metric output in error).

The dead-letter: every errored row, with the reason of each output in error and the row's
inputs, one JSON object a line in ``errors.jsonl`` next to ``rows.jsonl`` (``--out``), followed
by the input rows left out as unreadable (``--on-bad-row skip``). :func:`dead_letter` makes the
line; ``assay show RUN --errors`` prints the same lines from the store.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from assay.errors import AssayError, BudgetExceeded
from assay.scores import Score

ERRORS_FILE = "errors.jsonl"
POLL_S = 0.2                          # how often the cost is looked at while a chunk is scored
TARGET_PRICE_ENV = "ASSAY_TARGET_PRICE"

__all__ = ["ERRORS_FILE", "POLL_S", "TARGET_PRICE_ENV", "Budget", "DeadLetter", "bad_row_letter", "check_caps",
           "dead_letter", "prior_cost", "target_price", "usage_cost", "with_other"]


def check_caps(max_cost: Any = None, max_errors: Any = None) -> tuple[float | None, int | None]:
    """``(max_cost, max_errors)`` checked: a cost above 0 (USD), a whole number of rows of at
    least 1; None leaves a cap off. A bad value raises :class:`AssayError` naming the option."""
    cost = None
    if max_cost is not None:
        try:
            cost = float(max_cost)
        except (TypeError, ValueError):
            cost = math.nan
        if isinstance(max_cost, bool) or not math.isfinite(cost) or cost <= 0:
            raise AssayError(f"max_cost (--max-cost) must be an amount in USD above 0, got {max_cost!r}")
    errors = None
    if max_errors is not None:
        try:
            errors = int(str(max_errors).strip())
        except (TypeError, ValueError):
            errors = 0
        if isinstance(max_errors, bool) or errors < 1:
            raise AssayError(f"max_errors (--max-errors) must be a whole number of rows of at least 1, "
                             f"got {max_errors!r}")
    return cost, errors


def target_price(target: Any, options: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The target's price (USD per 1M input and output tokens): ``options["target_price"]``,
    else ``$ASSAY_TARGET_PRICE`` (``IN,OUT``), else, for an endpoint target, its model's row in
    the price table; None when unknown (its tokens then cost nothing against ``max_cost``)."""
    from assay.models.pricing import lookup_price, parse_price

    given = (options or {}).get("target_price")
    if given is not None:
        return parse_price(given, where="options['target_price']")
    env = os.environ.get(TARGET_PRICE_ENV, "").strip()
    if env:
        return parse_price(env, where=f"${TARGET_PRICE_ENV}")
    model = getattr(getattr(target, "fn", None), "model_name", None)
    return lookup_price(model) if isinstance(model, str) and model else None


class Budget:
    """A run's caps and what it has spent against them.

    ``judge_usage``: this session's judge usage so far (a dict with ``cost_usd``, or None);
    ``prior_cost``: the cost of a resumed run's earlier sessions; ``target_price``: the target's
    price (None: its tokens are not counted)."""

    def __init__(self, max_cost: float | None = None, max_errors: int | None = None, *,
                 judge_usage: Callable[[], Mapping[str, Any] | None] | None = None,
                 target_price: tuple[float, float] | None = None, prior_cost: float = 0.0):
        self.max_cost, self.max_errors = check_caps(max_cost, max_errors)
        self.judge_usage = judge_usage
        self.target_price = target_price
        self.prior_cost = prior_cost
        self.target_tokens = [0, 0]        # input, output tokens of the target's calls consumed

    @property
    def active(self) -> bool:
        return self.max_cost is not None or self.max_errors is not None

    def add_target(self, records: Iterable[Any]) -> None:
        """Count the target's tokens of the records of a consumed chunk (its replies)."""
        if self.target_price is None:
            return
        for r in records:
            u = getattr(r, "usage", None)
            if u is not None:
                self.target_tokens[0] += int(u.input_tokens or 0)
                self.target_tokens[1] += int(u.output_tokens or 0)

    def judge_cost(self) -> float:
        """This session's judge cost, and what else it paid for (``usage["other"]``: an attacker)."""
        usage = self.judge_usage() if self.judge_usage is not None else None
        return usage_cost(usage)

    def target_cost(self) -> float:
        if self.target_price is None:
            return 0.0
        (pin, pout), (tin, tout) = self.target_price, self.target_tokens
        return (tin * pin + tout * pout) / 1e6

    def cost(self) -> float:
        """The whole run's spending so far: every session's judge cost and the target's."""
        return self.prior_cost + self.judge_cost() + self.target_cost()

    def over(self, errored: int) -> BudgetExceeded | None:
        """The error that stops the run when a cap is reached (``errored``: the run's errored
        rows so far), else None."""
        if self.max_errors is not None and errored >= self.max_errors:
            exc = BudgetExceeded(f"stopped: {errored} rows errored, reaching --max-errors {self.max_errors} "
                                 "(max_errors)")
            exc.cap = "max_errors"
            return exc
        if self.max_cost is not None:
            spent = self.cost()
            if spent >= self.max_cost:
                exc = BudgetExceeded(f"stopped: the run has spent ${spent:.4f}, reaching --max-cost "
                                     f"${self.max_cost:g} (max_cost)")
                exc.cap = "max_cost"
                return exc
        return None

    def check_price(self, judge: Any, usage: Mapping[str, Any] | None) -> None:
        """With ``max_cost``, a judge whose price is unknown cannot be held to it: say so before
        the run costs anything."""
        if self.max_cost is None or judge is None or usage is None:
            return
        if usage.get("price_per_1m") is None:
            raise AssayError(f"max_cost (--max-cost) needs the judge's price, which is unknown for "
                             f"{getattr(judge, 'name', judge)}: set ASSAY_JUDGE_PRICE=IN,OUT (USD per 1M "
                             "input and output tokens) or options={'judge_price': 'IN,OUT'}")


def usage_cost(usage: Mapping[str, Any] | None) -> float:
    """The cost of one session's usage: the judge's and the other spending recorded with it."""
    u = usage or {}
    return float(u.get("cost_usd") or 0.0) + float((u.get("other") or {}).get("cost_usd") or 0.0)


def with_other(usage: Mapping[str, Any] | None, other: Any) -> dict[str, Any] | None:
    """A session's judge ``usage`` with ``other.usage()`` (an attacker's) under ``"other"``."""
    extra = other.usage() if other is not None else None
    if not extra:
        return dict(usage) if usage is not None else None
    return {**(usage or {}), "other": dict(extra)}


def prior_cost(store: Any, run_id: str | None) -> float:
    """What a resumed run's earlier sessions spent (the judge, and the other spending recorded
    with it), as the store recorded them."""
    if store is None or run_id is None:
        return 0.0
    from assay.store.sessions import sum_usage

    usages = [s["usage"] for s in store.sessions(run_id)]
    total = sum_usage(usages)
    other = sum(float(((u or {}).get("other") or {}).get("cost_usd") or 0.0) for u in usages)
    return float((total or {}).get("cost_usd") or 0.0) + other


def dead_letter(idx: int, inputs: Mapping[str, Any], scores: Mapping[str, Mapping[str, Score]], *,
                row_id: str | None = None, conversation_id: str | None = None,
                target_error: bool = False) -> dict[str, Any] | None:
    """One line of ``errors.jsonl`` for a scored row (``idx``: its place in the run, from 0):
    ``{"kind": "row", "row", "row_id", "conversation_id", "target_error", "errors": [{"metric",
    "output", "reason"}], "inputs"}``; None when nothing in it errored."""
    errors = [{"metric": m, "output": o, "reason": s.reason}
              for m, outs in scores.items() for o, s in outs.items() if s.status == "error"]
    if not errors and not target_error:
        return None
    return {"kind": "row", "row": idx, "row_id": row_id, "conversation_id": conversation_id,
            "target_error": target_error, "errors": errors, "inputs": dict(inputs)}


def bad_row_letter(bad: Any) -> dict[str, Any]:
    """The line of ``errors.jsonl`` for an input row left out as unreadable."""
    if isinstance(bad, Mapping):
        return {"kind": "bad_row", **{k: bad.get(k) for k in ("source", "line", "field", "error")}}
    return {"kind": "bad_row", "source": bad.source, "line": bad.line, "field": bad.field, "error": str(bad)}


class DeadLetter:
    """``errors.jsonl`` in the ``out`` folder, written as rows are consumed (flushed with every
    chunk, so a stopped run's file has the rows it saved); nothing without ``out``."""

    def __init__(self, out: str | Path | None):
        self._fh = open(Path(out) / ERRORS_FILE, "wb") if out is not None else None

    def add(self, idx: int, inputs: Mapping[str, Any], scores: Mapping[str, Mapping[str, Score]], **kw: Any) -> None:
        letter = dead_letter(idx, inputs, scores, **kw)
        if letter is not None:
            self._write(letter)

    def _write(self, letter: dict[str, Any]) -> None:
        if self._fh is not None:
            self._fh.write(orjson.dumps(letter, default=str) + b"\n")

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self, bad_rows: Iterable[Any] = ()) -> None:
        """The unreadable input rows go last; the file is closed."""
        if self._fh is None:
            return
        for bad in bad_rows:
            self._write(bad_row_letter(bad))
        self._fh.close()
        self._fh = None
