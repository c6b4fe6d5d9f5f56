"""What a quality run's items add up to, and how two runs compare.

**Per task**: the mean of each score over the items scored, with a 95% interval and the standard
error. A score that is right or wrong per item (accuracy, exact match, pass@1 of one sample) is a
proportion: its interval is Wilson's score interval (:func:`assay.stats.wilson_interval`), which
keeps its width when every item is right or every one wrong; other scores (a judge's 1–5,
pass@k of several samples) get a 95% bootstrap interval (:func:`assay.stats.confidence_interval`).
Below :data:`MIN_INTERVAL_ITEMS` items there is no interval, only "too few". The standard error is
lm-evaluation-harness's ``acc_stderr``: the sample standard deviation over √n
(:func:`assay.stats.mean_stderr`). Errors and skipped items are counted, never scored as wrong.

**Quality index**: the mean over tasks of each task's primary score on a 0–1 scale — accuracy
(``acc``), exact match (the task's first filter), pass@1 for code, or a judge's 1–5 similarity
rescaled to ``(s − 1) / 4`` — as Azure AI Foundry's model benchmarks define their quality index
(the mean of accuracy and rescaled similarity scores). Over one task its interval is that task's;
over several it is stratified: each draw of the index is the mean of one draw per task, a
proportion drawn from its Jeffreys posterior Beta(k + ½, n − k + ½) (so an all-right task still
varies), any other score by resampling its items; the interval always holds the index itself.

**Comparison** of two runs on the same items (same task definition and data, checked by hash):
for a score that is right or wrong per item, McNemar's exact test on the items where the runs
disagree (:func:`assay.stats.mcnemar_exact`); for every score, the mean per-item difference with
a paired bootstrap interval; for the index, the stratified bootstrap of the per-item differences.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from assay.bench.quality.lmeval import PERPLEXITY_METRICS, ROLLING_METRICS
from assay.bench.quality.summary import QualitySummary
from assay.bench.quality.tasks import JUDGED_METRICS
from assay.errors import AssayError
from assay.stats import (
    BOOTSTRAP_RESAMPLES,
    bootstrap_draws,
    confidence_interval,
    mcnemar_exact,
    mean_stderr,
    wilson_interval,
)

JUDGE_SCALES = {name: (1.0, 5.0) for name in JUDGED_METRICS}   # assay's judges score 1-5
MIN_INTERVAL_ITEMS = 5          # fewer items scored: "too few", no interval
SCORES = "quality"              # the one metric of a stored item's scores, each score an output of it


def task_outputs(task: Any, pass_at: Sequence[int] = ()) -> list[str]:
    """The score names a task's items get, in a fixed order."""
    if getattr(task, "process_results", None) is not None:     # the task's own scoring names its values
        names = [str(m.get("metric")) for m in task.metrics if m.get("hook")]
        if task.output_type == "generate_until":
            return [f"{n},{f.name}" for f in task.filters for n in names]
        return names
    if task.output_type == "multiple_choice":
        named = [str(m.get("metric")) for m in task.metrics or []]
        outs = [o for o in ("acc", "acc_norm", "acc_mutual_info") if (not named and o != "acc_mutual_info")
                or o in named]
        return outs or ["acc"]
    if task.output_type == "loglikelihood":
        named = [str(m.get("metric")) for m in task.metrics or []]
        return [o for o in ("acc", "perplexity") if o in named] or ["acc"]
    if task.output_type == "loglikelihood_rolling":
        named = [str(m.get("metric")) for m in task.metrics or []]
        return [o for o in ROLLING_METRICS if o in named]
    if task.is_code:
        return [f"pass@{k}" for k in pass_at]
    outs: list[str] = []
    for m in task.metrics:   # never empty: the loader gives the defaults
        name = str(m.get("metric"))
        if name == "exact_match" or m.get("fn") is not None:     # built in, or the task's own metric function
            outs += [f"{name},{f.name}" for f in task.filters]
        elif name in JUDGE_SCALES:
            outs.append(name)
    return outs


def lm_eval_name(task: Any, output: str) -> str | None:
    """The name lm-evaluation-harness gives the score ``output`` in its results: ``metric,filter`` (``acc,none``,
    ``exact_match,strict-match``, ``pass@1,create_test``; ``pass_at_1,none`` for MBPP's metric function). None for
    assay's judge metrics, which the harness does not have."""
    if output in JUDGE_SCALES:
        return None
    if "," in output:               # exact_match and the task's own metrics already carry their filter
        return output
    if output.startswith("pass@"):
        filt = task.filters[0].name if getattr(task, "filters", None) else "none"
        fn = next((m.get("fn_name") for m in task.metrics if m.get("metric") == "pass_at_k"), None)
        return f"pass_at_1,{filt}" if fn == "pass_at_1" and output == "pass@1" else f"{output},{filt}"
    return f"{output},none"


def primary_output(task: Any, pass_at: Sequence[int] = ()) -> str:
    """The score a task contributes to the quality index."""
    if task.is_code:
        return "pass@1" if 1 in pass_at or not pass_at else f"pass@{min(pass_at)}"
    outs = task_outputs(task, pass_at)
    if not outs:
        raise AssayError(f"task {task.name} has no score assay can compute (metric_list: "
                         f"{[m.get('metric') for m in task.metrics or []]})")
    return outs[0]


def unit_scale(output: str, values: np.ndarray) -> np.ndarray:
    """A score on 0–1: judge scales rescaled from 1–5, the others as they are."""
    lo_hi = JUDGE_SCALES.get(output)
    if lo_hi is None:
        return values
    lo, hi = lo_hi
    return (values - lo) / (hi - lo)


def _column(rows: Iterable[Any], task: str, output: str) -> tuple[list[str], np.ndarray]:
    ids, vals = [], []
    for r in rows:
        if r.inputs.get("task") != task:
            continue
        s = (r.scores.get(SCORES) or {}).get(output) or (r.scores.get(output) or {}).get(output)   # or as stored before
        if s is not None and s.status == "completed" and s.score is not None:
            ids.append(r.row_id)
            vals.append(float(s.score))
    return ids, np.asarray(vals, dtype=np.float64)


def is_binary(v: np.ndarray) -> bool:
    """True for scores that are right (1) or wrong (0) per item: a proportion."""
    return bool(len(v)) and bool(np.isin(v, (0.0, 1.0)).all())


def too_few(n: int) -> str:
    """What an interval over ``n`` items is called when there are too few of them."""
    return f"too few ({n} < {MIN_INTERVAL_ITEMS})"


def _mean_ci(v: np.ndarray) -> dict[str, Any]:
    n = len(v)
    if n == 0:
        return {"mean": None, "ci95_low": None, "ci95_high": None, "evaluated": 0}
    out: dict[str, Any] = {"mean": float(v.mean()), "ci95_low": None, "ci95_high": None, "evaluated": int(n),
                           "ci_method": too_few(n), "stderr": mean_stderr(v)}
    if n < MIN_INTERVAL_ITEMS:
        return out
    if is_binary(v):
        lo, hi = wilson_interval(int(v.sum()), n)
        method = "wilson"
    else:
        lo, hi, method = confidence_interval(v)
    out.update(ci95_low=lo, ci95_high=hi, ci_method=method)
    return out


def stratified_index(columns: Sequence[np.ndarray], *, binary: Sequence[bool] | None = None, seed: int = 0,
                     resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """The mean over tasks of each column's mean, with a 95% interval (see the module docstring):
    ``binary[i]`` says column ``i`` is a proportion (drawn from its Jeffreys posterior); the
    others are resampled. "too few" below :data:`MIN_INTERVAL_ITEMS` items in all."""
    kept = [(c, bool(binary[i]) if binary is not None else False) for i, c in enumerate(columns) if len(c)]
    if not kept:
        return {"value": None, "ci95_low": None, "ci95_high": None, "tasks": 0}
    value = float(np.mean([c.mean() for c, _ in kept]))
    out: dict[str, Any] = {"value": value, "ci95_low": None, "ci95_high": None, "tasks": len(kept)}
    n = sum(len(c) for c, _ in kept)
    if n < MIN_INTERVAL_ITEMS:
        return {**out, "ci_method": too_few(n)}
    if len(kept) == 1:
        one = _mean_ci(kept[0][0]) if kept[0][1] else None
        if one is not None:
            return {**out, "ci95_low": one["ci95_low"], "ci95_high": one["ci95_high"], "ci_method": one["ci_method"]}
    rng = np.random.default_rng(seed)
    draws = np.mean([rng.beta(c.sum() + 0.5, len(c) - c.sum() + 0.5, size=resamples) if is_prop
                     else bootstrap_draws(c, "mean", rng, resamples)[0] for c, is_prop in kept], axis=0)
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return {**out, "ci95_low": min(float(lo), value), "ci95_high": max(float(hi), value),
            "ci_method": "stratified (Jeffreys draws for proportions, bootstrap for other scores)"}


def summarize(meta: list[dict[str, Any]], rows: list[Any], *, seed: int = 0) -> dict[str, Any]:
    """Per-task figures and the quality index of a run's stored rows (see the module docstring)."""
    tasks: dict[str, Any] = {}
    primaries: list[np.ndarray] = []
    binary: list[bool] = []
    for m in meta:
        name = m["name"]
        mine = [r for r in rows if r.inputs.get("task") == name]
        in_index = m["primary"] not in PERPLEXITY_METRICS      # a perplexity is not a score on 0-1
        metrics = {}
        for o in m["outputs"]:
            _, v = _column(mine, name, o)
            metrics[o] = _mean_ci(v)
        _, pv = _column(mine, name, m["primary"])
        pv = unit_scale(m["primary"], pv)
        primaries.append(pv if in_index else np.array([], dtype=np.float64))
        binary.append(m["primary"] not in JUDGE_SCALES and is_binary(pv))
        statuses: dict[str, int] = {}
        for r in mine:
            for outs in r.scores.values():
                for s in outs.values():
                    statuses[s.status] = statuses.get(s.status, 0) + 1
        errors = sum(1 for r in mine if r.target_error or r.inputs.get("error"))
        tasks[name] = {**m, "scored_items": len(mine), "errors": errors,
                       "unparsed": sum(1 for r in mine if r.inputs.get("unparsed")),
                       "first_error": next((r.inputs.get("error") for r in mine if r.inputs.get("error")), None),
                       "metrics": metrics, "primary_value": float(pv.mean()) if len(pv) else None,
                       "primary_scale": "0-1 (rescaled from 1-5)" if m["primary"] in JUDGE_SCALES else
                       "0-1" if in_index else "perplexity (lower is better; not in the quality index)"}
    index = stratified_index(primaries, binary=binary, seed=seed)
    index["definition"] = ("mean over tasks of each task's primary score on 0-1 (accuracy, exact match, pass@1, "
                           "judge similarity rescaled from 1-5); 95% interval: one task's own, several stratified")
    return {"tasks": tasks, "index": index, "items": len(rows)}


def quality_rows(store: Any, rec: dict[str, Any]) -> list[Any]:
    if not rec.get("run_id"):
        raise AssayError(f"quality benchmark {rec.get('ref')} has no stored items")
    return list(store.iter_scored(rec["run_id"]))


def compare_quality(store: Any, ref_a: str, ref_b: str, *, seed: int = 0) -> dict[str, Any]:
    """Two stored quality runs compared item by item (see the module docstring). Refuses runs
    whose task definitions or data differ."""
    a = store.get_benchmark(ref_a, kind="quality")
    b = store.get_benchmark(ref_b, kind="quality")
    sa, sb = QualitySummary.load(a.get("details")), QualitySummary.load(b.get("details"))
    ta, tb = sa.tasks, sb.tasks
    common = [t for t in ta if t in tb]
    if not common:
        raise AssayError(f"runs {a['ref']} and {b['ref']} share no task ({', '.join(ta)} vs {', '.join(tb)})")
    differ = []
    for t in common:
        for key, what in (("task_hash", "task definition"), ("data_hash", "data")):
            ka, kb = getattr(ta[t], key), getattr(tb[t], key)
            if ka != kb:
                differ.append(f"task {t}: the {what} differs ({str(ka)[:12]} vs {str(kb)[:12]})")
    if differ:
        raise AssayError(f"cannot compare {a['ref']} with {b['ref']}: " + "; ".join(differ))
    rows_a, rows_b = quality_rows(store, a), quality_rows(store, b)
    out_tasks: dict[str, Any] = {}
    shared: list[tuple[np.ndarray, np.ndarray]] = []
    for t in common:
        outs = [o for o in ta[t].outputs if o in tb[t].outputs]
        per: dict[str, Any] = {}
        for o in outs:
            pa, pb = _paired(rows_a, rows_b, t, o)
            if not len(pa):
                continue
            d = pb - pa
            lo, hi, method = confidence_interval(d, seed=seed)
            entry: dict[str, Any] = {"items": len(pa), "a": float(pa.mean()), "b": float(pb.mean()),
                                     "diff": float(d.mean()), "diff_ci95": [lo, hi], "ci_method": f"paired {method}"}
            if np.isin(pa, (0.0, 1.0)).all() and np.isin(pb, (0.0, 1.0)).all():
                only_a = int(((pa == 1) & (pb == 0)).sum())
                only_b = int(((pa == 0) & (pb == 1)).sum())
                entry["mcnemar"] = {"only_a_right": only_a, "only_b_right": only_b,
                                    "p_value": mcnemar_exact(only_a, only_b)}
            entry["significant"] = bool(entry["mcnemar"]["p_value"] < 0.05) if "mcnemar" in entry else \
                bool(lo > 0 or hi < 0)
            per[o] = entry
        prim = ta[t].primary
        if prim in per:
            pa, pb = _paired(rows_a, rows_b, t, prim)
            shared.append((unit_scale(prim, pa), unit_scale(prim, pb)))
        out_tasks[t] = {"primary": prim, "metrics": per,
                        "items": {"a": ta[t].scored_items, "b": tb[t].scored_items}}
    return {"a": _side(a), "b": _side(b), "tasks": out_tasks, "index": _index_diff(shared, sa, sb, seed),
            "only_in_a": [t for t in ta if t not in tb], "only_in_b": [t for t in tb if t not in ta]}


def _paired(rows_a: list[Any], rows_b: list[Any], task: str, output: str) -> tuple[np.ndarray, np.ndarray]:
    """The scores of ``output`` on the items of ``task`` that both runs scored, in B's order."""
    ids_a, va = _column(rows_a, task, output)
    ids_b, vb = _column(rows_b, task, output)
    at = {i: x for i, x in zip(ids_a, va)}
    pairs = [(at[i], x) for i, x in zip(ids_b, vb) if i in at]
    return np.array([p[0] for p in pairs], dtype=np.float64), np.array([p[1] for p in pairs], dtype=np.float64)


def _index_diff(shared: list[tuple[np.ndarray, np.ndarray]], sa: QualitySummary, sb: QualitySummary,
                seed: int) -> dict[str, Any]:
    """The quality index of each run on the items both have (``a``, ``b``: the mean over shared
    tasks of each task's primary score on 0-1), their difference with its stratified interval, and
    beside them each run's own index over all its items (``a_own``, ``b_own``), which differ from
    ``a`` and ``b`` when the runs hold different items."""
    idx = stratified_index([b - a for a, b in shared], seed=seed)
    kept = [(a, b) for a, b in shared if len(a)]
    return {"a": float(np.mean([a.mean() for a, _ in kept])) if kept else None,
            "b": float(np.mean([b.mean() for _, b in kept])) if kept else None,
            "diff": idx["value"], "diff_ci95": [idx["ci95_low"], idx["ci95_high"]],
            "items": int(sum(len(a) for a, _ in kept)),
            "a_own": sa.index.value, "b_own": sb.index.value,
            "a_items": sum(int(t.scored_items or 0) for t in sa.tasks.values()),
            "b_items": sum(int(t.scored_items or 0) for t in sb.tasks.values())}


def _side(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: rec.get(k) for k in ("ref", "name", "model", "created_at", "run_id")}
