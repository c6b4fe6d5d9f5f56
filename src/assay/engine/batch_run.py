"""Batch mode (``assay eval --batch``): fill the call cache through the judge provider's batch API.

Before the ordinary run, the rows are scored by the judged metrics with a collecting copy of the
judge (:func:`assay.models.batch.collecting`): every call the call cache cannot answer is
recorded (its exact request body, under its cache key) instead of sent. Those requests go out as
one batch (:func:`assay.models.batch.run_batch`); once it has ended, its answers are in the cache.
A judge that asks again on what it read (a second step, a re-ask) is collected again in a next
round, up to :data:`ROUNDS`. The run that follows is the ordinary one and finds its answers in the
cache; whatever a batch did not answer (failed, expired) is asked online there, never scored as
passed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.engine.plan import Plan
from assay.engine.run import ChunkScorer, Scoring, chunks
from assay.errors import AssayError
from assay.metrics.base import EvalContext

ROUNDS = 4       # collect-and-batch rounds at most (a judge of one step needs one)
CHUNK = 256


def check_batchable(p: Plan, judge: Any) -> None:
    """An :class:`AssayError` when ``--batch`` cannot apply: no judge with a call cache, a target
    (its replies are not cached, so a second pass would call it again), or a backend without a batch API."""
    from assay.models.batch import batch_client
    from assay.models.limited import LimitedModel

    if not isinstance(judge, LimitedModel):
        raise AssayError("--batch sends judge calls through a provider's batch API, but this run has no judge model "
                         "(name one with --judge openai:MODEL or anthropic:MODEL)")
    if judge.cache is None:
        raise AssayError("--batch keeps the batch's answers in the call cache, which is off (ASSAY_CACHE=off): "
                         "turn it on, or run without --batch")
    if p.target is not None:
        raise AssayError("--batch scores responses already in the data; with --target, run without --batch")
    if getattr(p.dataset, "stream", None) is not None:
        raise AssayError("--batch reads the data twice (to collect the judge's requests, then to score), "
                         "so it needs a file, not a stream: save the data to a file first")
    batch_client(judge)


async def collect(p: Plan, ctx: EvalContext, judge: Any) -> dict[str, dict[str, Any]]:
    """The request bodies of the judge calls the run would make that the cache cannot answer."""
    from assay.models.batch import collecting

    found: dict[str, dict[str, Any]] = {}
    twin = collecting(judge, found)
    judged = [m for m in p.metrics if m.is_async]
    if not judged:
        return found
    scoring = Scoring(judged, dict(p.thresholds), frozenset(p.by_auto), None, p.repeats, frozenset(p.repeated))
    scorer = ChunkScorer(scoring, EvalContext(judge=twin, options=ctx.options))
    ds = p.dataset
    kept = {k: copy.copy(getattr(ds, k)) for k in ("rows_read", "bad_rows") if hasattr(ds, k)}
    try:
        for chunk in chunks(iter(ds), CHUNK):
            await scorer.score(chunk)
    finally:
        for k, v in kept.items():       # the ordinary run counts the rows read and the bad rows
            setattr(ds, k, v)
    return found


async def prefill(p: Plan, ctx: EvalContext, judge: Any, *, state_dir: str | Path | None = None,
                  poll: float | None = None, progress: Callable[[str, int, int], None] | None = None,
                  options: Any = None) -> Any:
    """Answer every judge call of the run through the batch API into the call cache; the spend
    (:class:`~assay.models.batch.BatchSpend`, at the batch price)."""
    from assay.models.batch import DEFAULT_POLL_S, BatchSpend, run_batch
    from assay.models.pricing import batch_price

    check_batchable(p, judge)
    ensure = getattr(judge.model, "ensure_model", None)
    if ensure is not None:      # a server named without its model: the batch's bodies need the name
        await ensure()
    spend = BatchSpend(*batch_price(judge, options))
    where = Path(state_dir) if state_dir is not None else default_state_dir(judge)
    for _ in range(ROUNDS):
        requests = {k: b for k, b in (await collect(p, ctx, judge)).items() if k not in spend.failed}
        if not requests:    # every call answered, or left to the online run (those a batch failed)
            break
        batch_id, _resumed, outcome = await run_batch(judge, requests, state_dir=where,
                                                      poll=DEFAULT_POLL_S if poll is None else poll,
                                                      progress=progress)
        spend.add(batch_id, len(requests), outcome)
        if not outcome.answers:
            break          # nothing answered: the rest is asked online
    return spend


def default_state_dir(judge: Any) -> Path:
    """``batches/`` beside the call cache file (else ``.assay/batches``): where a batch's id is kept."""
    path = getattr(judge.cache, "path", None)
    return (Path(path).parent if path is not None else Path.cwd() / ".assay") / "batches"
