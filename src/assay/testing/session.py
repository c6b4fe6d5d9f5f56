"""What a pytest session shares: the plugin's settings and the cases evaluated in it.

The plugin (:mod:`assay.testing.plugin`) fills :data:`SETTINGS` from its options and turns
:data:`RECORDER` on; :func:`assay.testing.evaluate_case` reads the judge from the first and
hands every case to the second. At the end of the session the cases are saved to the store as
one run (:func:`save_cases`); under pytest-xdist each worker sends its cases to the controller,
which saves them all as that one run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from assay.scores import SCORE_KEYS, Score

__all__ = ["RECORDER", "SETTINGS", "Recorder", "Settings", "plain", "save_cases"]


@dataclass
class Settings:
    """``judge``: the judge spec for cases and data sets that name none (None: ``$ASSAY_JUDGE``,
    else the embedded default); ``store``: where results are saved (a path or URL; None: not
    saved); ``name``: the name of the run that keeps the session's single cases."""

    judge: str | None = None
    store: str | None = None
    name: str = "pytest"


SETTINGS = Settings()


def plain(value: Any) -> Any:
    """``value`` as plain JSON types (numpy numbers, models ... converted), as pytest-xdist
    can send them between processes."""
    return orjson.loads(orjson.dumps(value, default=_default,
                                     option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))


def _default(o: Any) -> Any:
    if hasattr(o, "model_dump"):
        return o.model_dump(exclude_none=True)
    return str(o)


@dataclass
class Recorder:
    """The single cases evaluated in this process while the plugin is on, as plain dicts, and
    the data sets it evaluated (``runs``: label, rows, run id, store)."""

    active: bool = False
    current_test: str | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)

    def record_run(self, label: str, result: Any) -> None:
        """A data set evaluated in this process."""
        if self.active:
            r = result.run
            self.runs.append(plain({"label": label, "rows": r.get("rows_evaluated"), "run_id": r.get("run_id"),
                                    "store": r.get("store")}))

    def record(self, case: Any, result: Any, options: Mapping[str, Any] | None = None) -> None:
        """Keep ``case`` (a :class:`~assay.testing.cases.CaseResult`) and how its outputs aggregate."""
        if not self.active:
            return
        from assay.engine.aggregate import defect_settings
        from assay.metrics.base import REGISTRY

        outputs = {}
        for o, agg in result.metrics.items():
            m = REGISTRY.get(agg["metric"])
            outputs[o] = {"metric": agg["metric"], "output": o, "higher_is_better": agg.get("higher_is_better", True),
                          **(defect_settings(m, options) if m is not None else {})}
        self.cases.append(plain({
            "id": case.id, "test": self.current_test, "inputs": case.inputs,
            "scores": {m: {o: [getattr(s, k) for k in SCORE_KEYS] for o, s in outs.items()}
                       for m, outs in case.scores.items()},
            "outputs": outputs, "thresholds": result.run.get("thresholds") or {},
            "judge": result.run.get("judge"), "judge_usage": result.run.get("judge_usage"),
        }))


RECORDER = Recorder()


def save_cases(cases: list[dict[str, Any]], store: str, name: str) -> tuple[str, str]:
    """Save recorded cases as one completed run named ``name``; its id and the store's address."""
    from assay.engine.aggregate import Accumulator
    from assay.results import StoredRow
    from assay.results.summary import RunSummary
    from assay.store import open_store
    from assay.store.fingerprint import config_hash
    from assay.version import __version__

    started = time.time()
    st = open_store(store)
    layout: dict[str, list[str]] = {}
    accs: dict[str, Accumulator] = {}
    thresholds: dict[str, Any] = {}
    judges: list[str] = []
    for c in cases:
        for o, s in c["outputs"].items():
            if o not in accs:
                kw = {k: tuple(v) if isinstance(v, list) else v for k, v in s.items()}
                accs[o] = Accumulator(**kw)
                layout.setdefault(s["metric"], []).append(o)
        thresholds.update(c["thresholds"])
        if c["judge"] and c["judge"] not in judges:
            judges.append(c["judge"])
    config = {"metrics": list(layout), "layout": [[m, outs] for m, outs in layout.items()],
              "thresholds": thresholds, "judge": ", ".join(judges) or None, "source": "pytest"}
    run_id = st.start_run(name=name, source="pytest", fingerprint=None, config=config,
                          config_hash=config_hash(config), metrics=list(layout), judge=config["judge"])
    rows, errored = [], 0
    for i, c in enumerate(cases):
        scores = {m: {o: Score(*vals) for o, vals in outs.items()} for m, outs in c["scores"].items()}
        had_error = False
        for outs in scores.values():
            for o, s in outs.items():
                s.properties = s.properties or {}
                accs[o].add(s)
                had_error |= s.status == "error"
        errored += had_error
        inputs = {f"inputs.{k}": v for k, v in c["inputs"].items()}
        inputs["inputs.pytest_test"] = c["test"]
        rows.append(StoredRow(i, c["id"], None, False, inputs, scores))
    st.write_rows(run_id, rows)
    aggregates = {o: a.result() for o, a in accs.items()}
    summary = RunSummary(assay_version=__version__, source="pytest", format="pytest", metrics=list(layout),
                         thresholds=thresholds, judge=config["judge"], judge_usage=_sum_usage(c["judge_usage"] for c in cases),
                         rows_read=len(rows), rows_evaluated=len(rows), rows_errored=errored, started_at=started,
                         duration_s=time.time() - started, run_id=run_id, name=name, store=st.display_url)
    st.finish_run(run_id, "completed", aggregates=aggregates, summary=summary.as_dict(), usage=summary.judge_usage)
    st.close()
    return run_id, st.display_url


def _sum_usage(usages: Any) -> dict[str, Any] | None:
    """The cases' judge usage added up (numbers only; a cost unknown for one case is unknown)."""
    total: dict[str, Any] = {}
    for u in usages:
        if not isinstance(u, dict):
            continue
        for k, v in u.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                if k in total and total[k] is None:
                    continue
                total[k] = total.get(k, 0) + v
            elif v is None and k == "cost_usd":
                total[k] = None
    return total or None
