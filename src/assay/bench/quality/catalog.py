"""Task folders, groups and tags, as lm-evaluation-harness's ``--include_path`` reads them.

:func:`build_catalog` indexes every YAML under each folder given (``--task-dir``, recursively): a file with
``task: NAME`` is a task (its ``tag:`` names, one or a list, and the older ``group:`` on a task file, add it to
those tags); a file with ``group: NAME`` and ``task: [...]`` is a group, whose entries name tasks, tags or other
groups, and whose ``aggregate_metric_list`` says how its figure is made (``metric``, ``weight_by_size``,
``filter_list``). Files are read as task files are (bounds, includes from their own folder); nothing is imported,
so listing a stranger's folder runs none of its code. :meth:`Catalog.resolve` turns the names asked for into task
files, in order and once each, and the groups among them.

A group's figure (:func:`group_figures`) is made as the harness makes it: over the group's leaf tasks (its
sub-groups flattened), each ``metric,filter`` the mean of the tasks' figures weighted by their sizes (items
scored) when ``weight_by_size`` is true, else their plain mean; the standard error is the harness's
``pooled_sample_stderr`` over the tasks' standard errors and sizes for the weighted mean, its
``unweighted_mean_stderr`` for the plain one (none when a task has none). An entry's ``aggregation`` is ``mean``
or, as the harness also accepts, a ``!function``: lm-evaluation-harness 0.4 checks it and still reports the mean
(its group code calls only ``aggregate_subtask_metrics``), so the figure is the mean here too, and the group's
figure says which function was named and not applied; any other name is refused, as the harness refuses it.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.bench.quality.lmeval import pooled_sample_stderr, unweighted_mean_stderr
from assay.bench.quality.taskcode import FunctionRef
from assay.bench.quality.tasks import TaskError, TaskRef, read_config

__all__ = ["Catalog", "Group", "build_catalog", "group_figures"]

MAX_FILES = 20_000      # YAML files indexed under one folder, at most


@dataclass
class Group:
    """A group file: its name, its entries (task, tag or group names), how its figure is aggregated, and the
    fields an entry sets on its tasks (``{task: arc_challenge, num_fewshot: 25}``)."""

    name: str
    entries: list[str]
    aggregate: list[dict[str, Any]]
    source: str
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Catalog:
    """What the folders hold: task name → file, groups, tags (name → task names), and files that could not be
    read (path → why; the harness skips them too)."""

    tasks: dict[str, Path] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    tags: dict[str, list[str]] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)

    def knows(self, name: str) -> bool:
        return name in self.tasks or name in self.groups or name in self.tags

    def leaves(self, name: str) -> list[str]:
        """The task names ``name`` stands for: itself, a tag's tasks, or a group's, its sub-groups flattened."""
        return list(dict.fromkeys(t for t, _ in self.leaf_refs(name)))

    def leaf_refs(self, name: str, fields: dict[str, Any] | None = None,
                  _seen: tuple[str, ...] = ()) -> list[tuple[str, dict[str, Any]]]:
        """Each task ``name`` stands for with the fields the groups on the way set on it (an inner entry's
        over an outer one's)."""
        fields = fields or {}
        if name in _seen:
            raise TaskError(f"group {name} includes itself: {' -> '.join((*_seen, name))}",
                            source=self.groups[name].source if name in self.groups else None)
        if name in self.groups:
            g = self.groups[name]
            out: list[tuple[str, dict[str, Any]]] = []
            for entry in g.entries:
                if not self.knows(entry):
                    inline = " (a task written inline in a group file is not supported: write it in a file of " \
                             "its own)" if entry in g.overrides else ""
                    raise TaskError(f"group {name} names {entry!r}, which is no task, group or tag in the task "
                                    f"folders{inline}", source=g.source, field="task")
                for ref in self.leaf_refs(entry, {**fields, **g.overrides.get(entry, {})}, (*_seen, name)):
                    if ref not in out:
                        out.append(ref)
            return out
        if name in self.tasks:
            return [(name, fields)]
        if name in self.tags:
            return [(t, fields) for t in self.tags[name]]
        raise self.unknown(name)

    def unknown(self, name: str) -> TaskError:
        for why in self.broken.values():     # a group file that names it but could not be read: say why
            if f": group {name}: " in why:
                return TaskError(why)
        known = [*self.tasks, *self.groups, *self.tags]
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return TaskError(f"no task, group or tag named {name!r} in the task folders ({len(self.tasks)} tasks, "
                         f"{len(self.groups)} groups, {len(self.tags)} tags){hint}; assay bench quality "
                         f"--list-tasks --task-dir DIR lists them")

    def resolve(self, names: Sequence[str]) -> tuple[list[TaskRef], list[str]]:
        """The task files the names stand for, with the fields their groups set (in order, once each), and the
        groups named, directly or inside other groups, in the order met."""
        files: list[TaskRef] = []
        groups: list[str] = []
        for name in names:
            for leaf, fields in self.leaf_refs(name):
                ref = TaskRef(self.tasks[leaf], tuple(sorted(fields.items())))
                if ref not in files:
                    files.append(ref)
            groups.extend(g for g in self._groups_under(name) if g not in groups)
        return files, groups

    def _groups_under(self, name: str) -> list[str]:
        if name not in self.groups:
            return []
        out = [name]
        for entry in self.groups[name].entries:
            out.extend(self._groups_under(entry))
        return out


def _yaml_files(root: Path) -> Iterable[Path]:
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            if f.endswith((".yaml", ".yml")):
                n += 1
                if n > MAX_FILES:
                    raise TaskError(f"more than {MAX_FILES} YAML files under this folder", source=str(root))
                yield Path(dirpath) / f


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _group(path: Path, cfg: dict) -> Group:
    entries = []
    overrides: dict[str, dict[str, Any]] = {}
    for e in cfg.get("task") or []:
        if isinstance(e, str):
            entries.append(e)
        elif isinstance(e, dict) and isinstance(e.get("task"), str):
            entries.append(e["task"])       # a named task, group or tag, with fields set on its tasks
            fields = {k: v for k, v in e.items() if k not in ("task", "task_alias", "group_alias")}
            if fields:
                overrides[e["task"]] = fields
        else:
            raise TaskError(f"group {cfg.get('group')}: each task entry is a name or {{task: NAME, ...fields}}",
                            source=str(path), field="task")
    agg = cfg.get("aggregate_metric_list") or []
    if isinstance(agg, dict):
        agg = [agg]
    checked = []
    for a in agg:
        if not isinstance(a, dict) or not isinstance(a.get("metric"), str):
            raise TaskError(f"group {cfg.get('group')}: each aggregate_metric_list entry needs a metric",
                            source=str(path), field="aggregate_metric_list")
        how = a.get("aggregation", "mean")
        if how != "mean" and not isinstance(how, FunctionRef):
            raise TaskError(f"group {cfg.get('group')}: aggregation {how!r} is not one lm-evaluation-harness allows "
                            f"for a group (mean, weighted by size or not, or a !function, which it names but does "
                            f"not apply)", source=str(path), field="aggregate_metric_list")
        filters = a.get("filter_list")
        checked.append({"metric": a["metric"], "weight_by_size": bool(a.get("weight_by_size", True)),
                        "filter_list": _names(filters) if filters is not None else None,
                        **({"function": how.name} if isinstance(how, FunctionRef) else {})})
    return Group(str(cfg["group"]), entries, checked, str(path), overrides)


def build_catalog(dirs: Sequence[str | Path]) -> Catalog:
    """Index the task, group and tag files under ``dirs`` (see the module docstring)."""
    cat = Catalog()
    for d in dirs:
        root = Path(d).expanduser()
        if not root.is_dir():
            raise TaskError("--task-dir: not a folder", source=str(root))
        for path in _yaml_files(root):
            try:
                cfg = read_config(path, include_dirs=dirs)
            except TaskError as exc:
                cat.broken[str(path)] = str(exc)
                continue
            name, group = cfg.get("task"), cfg.get("group")
            if isinstance(group, str) and isinstance(cfg.get("task"), list):
                try:
                    cat.groups.setdefault(group, _group(path, cfg))
                except TaskError as exc:     # named later, it says why; listing the folder goes on
                    cat.broken[str(path)] = str(exc)
                continue
            if not isinstance(name, str) or not name:
                continue        # a template to include, or another YAML
            cat.tasks.setdefault(name, path)
            for tag in (*_names(cfg.get("tag")), *_names(group)):
                members = cat.tags.setdefault(tag, [])
                if name not in members:
                    members.append(name)
    return cat


def _stat(task_entry: dict[str, Any], key: str) -> dict[str, Any] | None:
    for stat in task_entry.get("metrics", {}).values():
        if stat.get("lm_eval") == key:
            return stat
    return None


def group_figures(cat: Catalog, groups: Sequence[str], summary: dict[str, Any]) -> dict[str, Any]:
    """Each group's figures over its leaf tasks in ``summary`` (see the module docstring), keyed by lm-eval's
    ``metric,filter``; a group without ``aggregate_metric_list`` lists its tasks only."""
    out: dict[str, Any] = {}
    tasks = summary.get("tasks", {})
    for g in groups:
        leaves = [t for t in cat.leaves(g) if t in tasks]
        figures: dict[str, Any] = {}
        for agg in cat.groups[g].aggregate:
            metric = agg["metric"]
            if agg["filter_list"] is not None:
                keys = [f"{metric},{f}" for f in agg["filter_list"]]
            else:     # the filters the tasks report this metric under
                keys = list(dict.fromkeys(s["lm_eval"] for t in leaves for s in tasks[t]["metrics"].values()
                                          if str(s.get("lm_eval", "")).startswith(f"{metric},")))
            for key in keys:
                figures[key] = _figure(key, leaves, tasks, agg["weight_by_size"])
                if agg.get("function"):
                    figures[key]["not_applied"] = (f"!function {agg['function']}: lm-evaluation-harness 0.4 names "
                                                   f"it and reports the mean; so does assay")
        out[g] = {"tasks": leaves, "source": cat.groups[g].source, "metrics": figures}
    return out


def _figure(key: str, leaves: list[str], tasks: dict[str, Any], weighted: bool) -> dict[str, Any]:
    values, sizes, stderrs, used = [], [], [], []
    for t in leaves:
        s = _stat(tasks[t], key)
        if s is None or s.get("mean") is None:
            continue
        values.append(float(s["mean"]))
        sizes.append(int(s.get("evaluated") or 0))
        stderrs.append(s.get("stderr"))
        used.append(t)
    if not values:
        return {"mean": None, "stderr": None, "tasks": [], "missing": leaves, "weight_by_size": weighted}
    w = sizes if weighted else [1] * len(sizes)
    mean = sum(v * x for v, x in zip(values, w)) / sum(w) if sum(w) else None
    se = None
    if all(isinstance(x, (int, float)) for x in stderrs):
        if not weighted:
            se = unweighted_mean_stderr([float(x) for x in stderrs])
        elif sum(sizes) > len(sizes):
            se = pooled_sample_stderr([float(x) for x in stderrs], sizes)
    return {"mean": mean, "stderr": se, "evaluated": sum(sizes), "tasks": used,
            "missing": [t for t in leaves if t not in used], "weight_by_size": weighted,
            "sizes": dict(zip(used, sizes))}
