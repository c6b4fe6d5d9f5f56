"""A quality run written as lm-evaluation-harness 0.4 writes its own (``--output-lm-eval DIR``), so the scripts and
dashboards that read the harness's output read assay's runs.

Under ``DIR/<model>/`` (the model's name with ``"<>:/|\\?*[]`` runs made ``__``, as the harness sanitizes it):

- ``results_<date>.json``: ``results`` (per task, and per group with a figure: ``alias`` and each
  ``metric,filter`` with its ``metric_stderr,filter``, ``"N/A"`` where there is none), ``groups``,
  ``group_subtasks``, ``configs`` (each task file's fields, includes merged), ``versions``
  (``metadata.version``), ``n-shot``, ``higher_is_better``, ``n-samples`` (``original`` and ``effective``),
  ``config`` (the model), ``date``;
- ``samples_<task>_<date>.jsonl``: one line per item and filter: ``doc_id``, ``doc``, ``target``,
  ``arguments`` (each request's arguments as ``{"gen_args_i": {"arg_j": ...}}``), ``resps``,
  ``filtered_resps``, ``filter``, ``metrics`` (the names), ``doc_hash``, ``prompt_hash``, ``target_hash``
  (sha256 of the doc's JSON with indent 2, of the first request's context, of the target), and each metric's
  value.

``<date>`` is the local time in ISO form with ``:`` made ``-``, as the harness names its files.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from assay.bench.quality.lmeval import HIGHER_IS_BETTER

__all__ = ["write_lm_eval"]


def sanitize_model_name(name: str) -> str:
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _split_key(key: str) -> tuple[str, str]:
    metric, _, filt = key.partition(",")
    return metric, filt or "none"


def _figures(name: str, figures: Any) -> dict[str, Any]:
    """A task's or group's entry in lm-eval's ``results``: ``(lm-eval key, {mean, stderr})`` pairs as
    ``key: mean`` and ``metric_stderr,filter: stderr`` (``"N/A"`` without one), beside its alias."""
    out: dict[str, Any] = {"alias": name}
    for key, stat in figures:
        if not key or stat.get("mean") is None:
            continue
        metric, filt = _split_key(key)
        out[key] = stat["mean"]
        se = stat.get("stderr")
        out[f"{metric}_stderr,{filt}"] = se if isinstance(se, (int, float)) else "N/A"
    return out


def _task_results(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    return _figures(name, ((stat.get("lm_eval"), stat) for stat in entry.get("metrics", {}).values()))


def _group_results(name: str, group: dict[str, Any]) -> dict[str, Any]:
    return _figures(name, (group.get("metrics") or {}).items())


def _arguments(task: Any, i: int, item: dict[str, Any]) -> list[list[Any]]:
    """Each request's arguments, as the harness's ``Instance.args``."""
    doc = task.docs[i]
    kind = task.output_type
    if kind == "loglikelihood_rolling":
        return [[task.document(doc)]]
    if item.get("contexts"):            # several inputs: each context with the shared continuation
        return [[c, item.get("continuation")] for c in item["contexts"]]
    if kind in ("multiple_choice", "loglikelihood") and item.get("mode") == "loglik":
        return [[item.get("prompt"), c] for c in task.continuations(doc)]
    return [[item.get("prompt"), dict(task.generation_kwargs)]]


def _responses(item: dict[str, Any], filt: str) -> tuple[list[Any], list[Any]]:
    lls = item.get("logliks")
    if item.get("mode") == "loglik_rolling" and lls:
        return [[lls[0]]], [lls[0]]
    if item.get("mode") == "loglik" and lls is not None:
        greedy = item.get("greedy") or [False] * len(lls)
        pairs = [[float(ll), bool(g)] for ll, g in zip(lls, greedy)]
        return [[p] for p in pairs], pairs
    answers = item.get("answers") or [item.get("answer")]
    extracted = (item.get("extracted") or {}).get(filt, item.get("answer"))
    return [answers], [extracted]


def _samples(task: Any, rows: Sequence[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    """One line per item and filter; ``names``: each assay score's lm-eval ``metric,filter``."""
    filters = list(dict.fromkeys(_split_key(k)[1] for k in names.values())) or ["none"]
    out = []
    for item in rows:
        i = int(item["doc_id"])
        doc = task.docs[i]
        args = _arguments(task, i, item)
        target = task.doc_to_target(doc)
        doc_json = json.dumps(doc, indent=2, ensure_ascii=False, default=str)
        for filt in filters:
            resps, filtered = _responses(item, filt)
            values = {}
            for name, v in (item.get("scores") or {}).items():
                if name not in names:
                    continue
                metric, f = _split_key(names[name])
                if f == filt:
                    values[metric] = (item.get("hook_values") or {}).get(name, v)
            line = {"doc_id": i, "doc": doc,
                    "target": str(target),
                    "arguments": {f"gen_args_{k}": {f"arg_{j}": a for j, a in enumerate(arg)}
                                  for k, arg in enumerate(args)},
                    "resps": resps, "filtered_resps": filtered, "filter": filt, "metrics": sorted(values),
                    "doc_hash": _sha(doc_json), "prompt_hash": _sha(str(args[0][0]) if args else ""),
                    "target_hash": _sha(str(target)), **values}
            out.append(line)
    return out


def write_lm_eval(path: Path, summary: dict[str, Any], items: list[dict[str, Any]],
                  tasks: Sequence[Any]) -> list[Path]:
    """Write the run as the harness writes its results and samples (see the module docstring); the files
    written. ``tasks``: the run's :class:`~assay.bench.quality.tasks.Task` objects."""
    date_id = datetime.now().isoformat().replace(":", "-")
    folder = path / sanitize_model_name(str(summary.get("model") or "model"))
    folder.mkdir(parents=True, exist_ok=True)
    entries = summary.get("tasks", {})
    groups = summary.get("groups") or {}
    results = {t.name: _task_results(t.name, entries[t.name]) for t in tasks if t.name in entries}
    group_results = {g: _group_results(g, v) for g, v in groups.items() if v.get("metrics")}
    results.update(group_results)
    hib: dict[str, dict[str, Any]] = {}
    for t in tasks:
        declared = {str(m.get("metric")): m.get("higher_is_better") for m in t.metrics}
        hib[t.name] = {_split_key(s["lm_eval"])[0]: declared.get(_split_key(s["lm_eval"])[0])
                       if declared.get(_split_key(s["lm_eval"])[0]) is not None
                       else HIGHER_IS_BETTER.get(_split_key(s["lm_eval"])[0], True)
                       for s in entries.get(t.name, {}).get("metrics", {}).values() if s.get("lm_eval")}
    doc = {
        "results": results,
        **({"groups": group_results} if group_results else {}),
        "group_subtasks": {**{g: list(v.get("tasks") or []) for g, v in groups.items()},
                           **{t.name: [] for t in tasks}},
        "configs": dict(sorted((t.name, t.config or {"task": t.name}) for t in tasks)),
        "versions": dict(sorted((t.name, ((t.config or {}).get("metadata") or {}).get("version")) for t in tasks)),
        "n-shot": dict(sorted((t.name, t.num_fewshot) for t in tasks)),
        "higher_is_better": dict(sorted(hib.items())),
        "n-samples": {t.name: {"original": t.total_docs or len(t.docs), "effective": len(t.docs)}
                      for t in tasks},
        "config": {"model": summary.get("model"), "model_args": summary.get("model_kind"),
                   "limit": (summary.get("config") or {}).get("limit"), "bootstrap_iters": 0,
                   "produced_by": "assay bench quality"},
        "date": summary.get("created_at") or time.time(),
    }
    written = [folder / f"results_{date_id}.json"]
    written[0].write_text(json.dumps(doc, indent=2, default=str, ensure_ascii=False), encoding="utf-8")
    by_task: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        by_task.setdefault(str(it.get("task")), []).append(it)
    for t in tasks:
        f = folder / f"samples_{t.name}_{date_id}.jsonl"
        with f.open("w", encoding="utf-8") as fh:
            names = {o: s["lm_eval"] for o, s in entries.get(t.name, {}).get("metrics", {}).items()
                     if s.get("lm_eval")}
            for line in _samples(t, by_task.get(t.name, []), names):
                fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        written.append(f)
    return written
