"""The embedding kind's columns on the leaderboard (:mod:`assay.bench.board`): one column per
``(task, main score, task_hash, data_hash, metric_version)``; a task with two definitions is two
columns, with a note saying why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assay.bench.board import Column, Group, Row, by_size, finite, keyed, short_hash
from assay.bench.embed.summary import EmbedHeadline, EmbedSummary, EmbedTask


def add_columns(recs: list[tuple[Any, dict[str, Any]]], rows: dict[Any, Row], columns: list[Column],
                groups: list[Group], notes: list[str]) -> None:
    """One column per embedding task definition of the embedding runs ``recs`` (oldest first)."""
    defs: dict[str, dict[tuple, list[tuple[Any, Any]]]] = {}
    for rid, rec in recs:
        d = EmbedSummary.load_or_empty(rec.get("details"))
        # a summary's tasks, else (a result stored with its headline only) the headline's
        tasks: Mapping[str, Any] = d.tasks if "tasks" in d.model_fields_set else \
            EmbedHeadline.read(rec.get("metrics")).tasks
        for name, t in tasks.items():
            metric = t.main_score if isinstance(t, EmbedTask) else t.metric
            sig = (metric, t.task_hash, t.data_hash, t.metric_version)
            defs.setdefault(name, {}).setdefault(sig, []).append((rid, t))
    for name in sorted(defs):
        variants = by_size(defs[name])
        for n, sig in enumerate(variants):
            metric, th, dh, mv = sig
            key = keyed(f"embed:{name}", n)
            label = f"{name} ({metric})" if len(variants) == 1 else f"{name} ({metric}, definition {n + 1})"
            columns.append(Column(key, label, "embed", "score", "high", key,
                                  f"{name}: main score {metric}; task hash {short_hash(th)}, data hash {short_hash(dh)}, "
                                  f"metric version {mv}"))
            groups.append(Group("embed-task", key, label, [rows[r].model for r, _ in defs[name][sig]],
                                {"task": name, "main_score": metric, "task_hash": th, "data_hash": dh,
                                 "metric_version": mv}))
            for rid, t in defs[name][sig]:
                v = t.value
                rows[rid].values[key] = float(v) if finite(v) else None
                lo, hi = (t.ci95_low, t.ci95_high) if isinstance(t, EmbedTask) else (None, None)
                if finite(lo) and finite(hi):
                    rows[rid].ci[key] = (float(lo), float(hi))
            if n:
                b = variants[0]
                why = [w for w, differs in ((f"the main score differs ({metric} vs {b[0]})", metric != b[0]),
                                            (f"the task definition differs (task hash {short_hash(th)} vs {short_hash(b[1])})",
                                             th != b[1]),
                                            (f"the data differs (data hash {short_hash(dh)} vs {short_hash(b[2])})",
                                             dh != b[2]),
                                            (f"the metric version differs ({mv} vs {b[3]})", mv != b[3])) if differs]
                notes.append(f"embedding task {name}: definition {n + 1} "
                             f"({', '.join(rows[r].model for r, _ in defs[name][sig])}) is shown apart from "
                             f"definition 1 because " + "; ".join(why))


__all__ = ["add_columns"]
