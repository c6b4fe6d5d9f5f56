"""The embedding kind's columns on the leaderboard (:mod:`assay.bench.board`): one column per
``(task, main score, task_hash, data_hash, metric_version)``; a task with two definitions is two
columns, with a note saying why."""

from __future__ import annotations

from typing import Any, Mapping

from assay.bench.board import Column, Group, Row, by_size, finite, keyed, short_hash


def add_columns(recs: list[tuple[Any, dict[str, Any]]], rows: dict[Any, Row], columns: list[Column],
                groups: list[Group], notes: list[str]) -> None:
    """One column per embedding task definition of the embedding runs ``recs`` (oldest first)."""
    defs: dict[str, dict[tuple, list[tuple[Any, Mapping[str, Any]]]]] = {}
    for rid, rec in recs:
        d = rec.get("details") or {}
        tasks = d.get("tasks") if isinstance(d.get("tasks"), Mapping) else None
        if tasks is None:
            tasks = (rec.get("metrics") or {}).get("tasks") if isinstance(rec.get("metrics"), Mapping) else None
        for name, t in (tasks or {}).items():
            if not isinstance(t, Mapping):
                continue
            metric = t.get("main_score") or t.get("metric")
            sig = (metric, t.get("task_hash"), t.get("data_hash"), t.get("metric_version"))
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
                v = t.get("value")
                rows[rid].values[key] = float(v) if finite(v) else None
                if finite(t.get("ci95_low")) and finite(t.get("ci95_high")):
                    rows[rid].ci[key] = (float(t["ci95_low"]), float(t["ci95_high"]))
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
