"""The quality kind's columns on the leaderboard (:mod:`assay.bench.board`).

- *quality index* (:mod:`assay.bench.quality.report`): comparable only between runs over the same
  tasks with the same definitions and data — the set of ``(task, task_hash, data_hash)``. Runs
  with another set get their own column (``quality_index@2``, ...), and a note says why. Set 1
  is the one most models share (on a tie, the one of the oldest result); so for every split.
- *per-task quality* (the task's primary score): one column per ``(task, task_hash, data_hash,
  primary)``; a task with two definitions is two columns. A judged primary score is rescaled, so
  it has no interval here.
"""

from __future__ import annotations

from typing import Any

from assay.bench.board import Column, Group, Row, by_size, finite, keyed, short_hash
from assay.bench.quality.summary import QualityHeadline, QualitySummary, QualityTask
from assay.bench.quality.tasks import JUDGED_METRICS


def add_columns(recs: list[tuple[Any, dict[str, Any]]], rows: dict[Any, Row], columns: list[Column],  # noqa: C901
                groups: list[Group], notes: list[str]) -> None:
    """The quality index columns (one per set of tasks) and the per-task columns of the quality runs
    ``recs`` (oldest first)."""
    sigs: dict[frozenset, list[Any]] = {}
    tasks_of: dict[Any, dict[str, QualityTask]] = {}
    for rid, rec in recs:
        d = QualitySummary.load_or_empty(rec.get("details"))
        tasks = d.tasks
        tasks_of[rid] = tasks
        sig = frozenset((name, t.task_hash, t.data_hash) for name, t in tasks.items())
        sigs.setdefault(sig, []).append(rid)
        idx = d.index
        value = idx.value if "value" in idx.model_fields_set else QualityHeadline.read(rec.get("metrics")).quality_index
        rows[rid].values["__qi"] = value if finite(value) else None
        if finite(idx.ci95_low) and finite(idx.ci95_high):
            rows[rid].ci["__qi"] = (float(idx.ci95_low), float(idx.ci95_high))
    ordered = by_size(sigs)
    for n, sig in enumerate(ordered):
        key = keyed("quality_index", n)
        names = sorted(t for t, _, _ in sig)
        label = "quality index" if len(ordered) == 1 else f"quality index (set {n + 1})"
        columns.append(Column(key, label, "quality", "0-1", "high", key,
                              "mean over tasks of each task's primary score on 0-1, tasks: " + ", ".join(names)))
        models = [rows[r].model for r in sigs[sig]]
        groups.append(Group("quality", key, label, models,
                            {"tasks": [{"task": t, "task_hash": th, "data_hash": dh} for t, th, dh in sorted(
                                sig, key=lambda s: (s[0], str(s[1]), str(s[2])))]}))
        for rid in sigs[sig]:
            r = rows[rid]
            r.values[key] = r.values.get("__qi")
            if "__qi" in r.ci:
                r.ci[key] = r.ci["__qi"]
    for r in rows.values():
        r.values.pop("__qi", None)
        r.ci.pop("__qi", None)
    if len(ordered) > 1:
        base = ordered[0]
        for n, sig in enumerate(ordered[1:], start=1):
            notes.append(f"quality index: set {n + 1} ({', '.join(rows[r].model for r in sigs[sig])}) is shown apart "
                         f"from set 1 because {_sig_diff(base, sig)}")
    # per task: one column per (task, task_hash, data_hash, primary)
    defs: dict[str, dict[tuple, list[Any]]] = {}
    for rid, tasks in tasks_of.items():
        for name, t in tasks.items():
            defs.setdefault(name, {}).setdefault((t.task_hash, t.data_hash, t.primary), []).append(rid)
    for name in sorted(defs):
        variants = by_size(defs[name])
        for n, sig in enumerate(variants):
            th, dh, primary = sig
            key = keyed(f"quality:{name}", n)
            label = f"{name} ({primary})" if len(variants) == 1 else f"{name} ({primary}, definition {n + 1})"
            columns.append(Column(key, label, "quality", "0-1", "high", key,
                                  f"{name}: primary score {primary}; task hash {short_hash(th)}, data hash {short_hash(dh)}"))
            groups.append(Group("quality-task", key, label, [rows[r].model for r in defs[name][sig]],
                                {"task": name, "task_hash": th, "data_hash": dh, "primary": primary}))
            modes = {rid: ", ".join(tasks_of[rid][name].modes) for rid in defs[name][sig]}
            if len({m for m in modes.values() if m}) > 1:       # e.g. log-likelihood for one, generation for another
                notes.append(f"task {name} ({key}): the models were scored differently (" + "; ".join(
                    f"{rows[r].model}: {m}" for r, m in modes.items() if m) + "): multiple choice by generation "
                    "reads the answer from text, by log-likelihood ranks the choices; compare with care")
            for rid in defs[name][sig]:
                t = tasks_of[rid][name]
                v = t.primary_value
                rows[rid].values[key] = float(v) if finite(v) else None
                pm = t.metrics.get(primary) if primary is not None else None
                if pm is not None and primary not in JUDGED_METRICS and finite(pm.ci95_low) and finite(pm.ci95_high):
                    rows[rid].ci[key] = (float(pm.ci95_low), float(pm.ci95_high))
            if n:
                b_th, b_dh, b_pr = variants[0]
                why = [w for w, differs in ((f"the task definition differs (task hash {short_hash(th)} vs {short_hash(b_th)})",
                                             th != b_th),
                                            (f"the data differs (data hash {short_hash(dh)} vs {short_hash(b_dh)})",
                                             dh != b_dh),
                                            (f"the primary score differs ({primary} vs {b_pr})", primary != b_pr))
                       if differs]
                notes.append(f"task {name}: definition {n + 1} ({', '.join(rows[r].model for r in defs[name][sig])}) "
                             f"is shown apart from definition 1 because " + "; ".join(why))


def _sig_diff(a: frozenset, b: frozenset) -> str:
    """Why two quality runs' task sets are not comparable, in words."""
    ta = {t: (th, dh) for t, th, dh in a}
    tb = {t: (th, dh) for t, th, dh in b}
    why = []
    only_a, only_b = sorted(set(ta) - set(tb)), sorted(set(tb) - set(ta))
    if only_a or only_b:
        why.append("the tasks differ (" + "; ".join(x for x in (
            f"only in set 1: {', '.join(only_a)}" if only_a else "",
            f"only in this set: {', '.join(only_b)}" if only_b else "") if x) + ")")
    for t in sorted(set(ta) & set(tb)):
        if ta[t][0] != tb[t][0]:
            why.append(f"the definition of task {t} differs (task hash {short_hash(tb[t][0])} vs {short_hash(ta[t][0])})")
        if ta[t][1] != tb[t][1]:
            why.append(f"the data of task {t} differs (data hash {short_hash(tb[t][1])} vs {short_hash(ta[t][1])})")
    return "; ".join(why) or "the task sets differ"


__all__ = ["add_columns"]
