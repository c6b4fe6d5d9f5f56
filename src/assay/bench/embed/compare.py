"""Two stored embedding benchmarks compared task by task, on the same units.

A task is compared only when both runs scored it with the same definition, the same data and the
same metric version (``task_hash``, ``data_hash``, ``metric_version``): then unit ``i`` is the same
query, pair or item in both, and :func:`~assay.bench.embed.stats.paired_difference` resamples the
units jointly. Tasks that differ are listed apart with the reason, never compared.
"""

from __future__ import annotations

from typing import Any

from assay.bench.embed.run import stored_units
from assay.bench.embed.stats import RESAMPLES, paired_difference
from assay.bench.embed.summary import EmbedSummary
from assay.errors import AssayError

_SAME = (("task_hash", "task definition"), ("data_hash", "data"), ("metric_version", "metric version"))


def compare_embed(store: Any, ref_a: str, ref_b: str, *, seed: int = 0,
                  resamples: int = RESAMPLES) -> dict[str, Any]:
    """B − A per shared task: main scores, the paired difference with its 95% interval and p-value."""
    a = store.get_benchmark(ref_a, kind="embed")
    b = store.get_benchmark(ref_b, kind="embed")
    ta = EmbedSummary.load(a.get("details")).tasks
    tb = EmbedSummary.load(b.get("details")).tasks
    common = [t for t in ta if t in tb]
    if not common:
        raise AssayError(f"embedding runs {a['ref']} and {b['ref']} share no task "
                         f"({', '.join(ta) or '—'} vs {', '.join(tb) or '—'})")
    ua, ub = stored_units(store, a), stored_units(store, b)
    tasks: dict[str, Any] = {}
    apart: dict[str, str] = {}
    for t in common:
        why = [f"the {what} differs" for key, what in _SAME if getattr(ta[t], key) != getattr(tb[t], key)]
        missing = [side for side, e, u in (("A", ta[t], ua), ("B", tb[t], ub)) if e.error or t not in u]
        if missing:
            why.append(f"run {' and '.join(missing)} has no score for it")
        if why:
            apart[t] = "; ".join(why)
            continue
        d = paired_difference(ta[t].type, ua[t], ub[t], main_score=ta[t].main_score, seed=seed,
                              resamples=resamples)
        tasks[t] = {"type": ta[t].type, "main_score": ta[t].main_score, **d}
    return {"a": _side(a), "b": _side(b), "tasks": tasks, "apart": apart, "resamples": resamples, "seed": seed,
            "only_in_a": [t for t in ta if t not in tb], "only_in_b": [t for t in tb if t not in ta]}


def _side(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: rec.get(k) for k in ("ref", "name", "model", "created_at")}
