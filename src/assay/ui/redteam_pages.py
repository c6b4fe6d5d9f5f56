"""The red-team scorecard on the dashboard and in ``assay report``.

A run made by ``assay redteam`` keeps its figures in its summary (``run["redteam"]``:
:mod:`assay.simulate.redteam.figures`). :func:`scorecard_view` turns them into what the pages
show: the attack success rate (ASR) and the refusal rate per strategy x category, per strategy
and per complexity level, each with its 95% Wilson interval, grouped by OWASP LLM Top 10 id (with
the ids no attempt exercised, "not covered"), the OWASP LLM Top 10 / MITRE ATLAS
ids of each cell, "not measured (no judge)" where no judge scored the harm, and the refusal
check's measured figures. Every value stays text: the templates escape it.

Routes (:func:`add_redteam_routes`, included by :mod:`assay.ui.server`): ``/redteam`` (the stored
red-team runs), ``/redteam/RUN`` (a run's scorecard) and ``/api/redteam/RUN`` (its figures as JSON).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from assay.simulate.redteam.figures import NOT_MEASURED, format_rate
from assay.simulate.redteam.owasp import OWASP_LLM_TOP10
from assay.simulate.redteam.strategies import STRATEGIES

COMPLEXITY_ORDER = ("baseline", "easy", "moderate", "difficult")
MAX_RUNS = 200


def _asr(c: Mapping[str, Any], measured: bool) -> str:
    if not measured:
        return NOT_MEASURED
    text = format_rate(c.get("asr"), c.get("asr_ci"))
    if c.get("asr") is not None and c.get("judged", 0) < c.get("attempts", 0):
        text += f" (of {c['judged']})"
    return text


def _line(name: str, c: Mapping[str, Any], measured: bool) -> dict[str, Any]:
    return {"name": name, "attempts": c.get("attempts", 0), "judged": c.get("judged", 0),
            "errored": c.get("errored", 0), "asr": _asr(c, measured),
            "refusal": format_rate(c.get("refusal_rate"), c.get("refusal_ci"))}


def _order(name: str) -> tuple[int, str]:
    order = list(STRATEGIES)
    return (order.index(name) if name in order else len(order), name)


def _number(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "?"


def _owasp(rt: Mapping[str, Any], measured: bool) -> dict[str, Any] | None:
    """The scorecard by OWASP LLM Top 10 id (baseline attempts left out) and the ids not covered."""
    by_id = rt.get("owasp")
    if not isinstance(by_id, Mapping):
        return None
    lines = [{**_line(str(t), c, measured), "title": str(c.get("title") or OWASP_LLM_TOP10.get(str(t), ""))}
             for t, c in by_id.items() if isinstance(c, Mapping)]
    missing = [{"id": str(t), "title": OWASP_LLM_TOP10.get(str(t), "")} for t in rt.get("owasp_not_covered") or ()]
    return {"lines": lines, "not_covered": missing}


def scorecard_view(rt: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the scorecard shows of ``run["redteam"]``, or None for a run without one."""
    if not isinstance(rt, Mapping) or not isinstance(rt.get("cells"), list):
        return None
    measured = bool(rt.get("asr_measured"))
    cells = []
    for c in sorted(rt["cells"], key=lambda c: (_order(str(c.get("strategy"))), str(c.get("category")))):
        line = _line(str(c.get("strategy")), c, measured)
        line.update(category=str(c.get("category")), complexity=", ".join(c.get("complexity") or ()),
                    owasp=", ".join(c.get("owasp") or ()), atlas=", ".join(c.get("atlas") or ()))
        cells.append(line)
    strategies = [_line(s, c, measured) for s, c in sorted((rt.get("strategies") or {}).items(), key=lambda kv: _order(kv[0]))]
    cx = rt.get("complexity") or {}
    complexity = [_line(k, cx[k], measured) for k in sorted(cx, key=lambda k: (
        COMPLEXITY_ORDER.index(k) if k in COMPLEXITY_ORDER else len(COMPLEXITY_ORDER), k))]
    held = ((rt.get("refusal_check") or {}).get("held_out")) or {}
    return {"measured": measured, "note": rt.get("note"), "version": rt.get("objectives_version"),
            "threshold": _number(rt.get("defect_threshold")), "definition": rt.get("definition"),
            "setup": dict(rt.get("setup") or {}), "cells": cells, "strategies": strategies,
            "complexity": complexity, "refusal_check": held, "owasp": _owasp(rt, measured)}


def redteam_runs(store: Any) -> list[dict[str, Any]]:
    """The stored runs with a scorecard, newest first, with their pooled figures."""
    out = []
    for r in store.list_runs(limit=MAX_RUNS):
        full = store.get_run(r["id"])
        view = scorecard_view((full.get("summary") or {}).get("redteam"))
        if view is not None:
            out.append({"run": full, "view": view,
                        "attempts": sum(c["attempts"] for c in view["cells"])})
    return out


def add_redteam_routes(app: Any, store: Any, *, page: Callable[..., Any], get_run: Callable[[str], dict[str, Any]],
                       not_found: type[Exception]) -> None:
    """``/redteam``, ``/redteam/{ref}`` and ``/api/redteam/{ref}`` on ``app`` (a FastAPI app)."""
    from fastapi.responses import HTMLResponse

    @app.get("/redteam", response_class=HTMLResponse)
    def redteam_list() -> Any:
        return page("redteam_list.html.j2", title="red team", runs=redteam_runs(store))

    @app.get("/redteam/{ref}", response_class=HTMLResponse)
    def redteam_page(ref: str) -> Any:
        run = get_run(ref)
        view = scorecard_view((run.get("summary") or {}).get("redteam"))
        if view is None:
            raise not_found(f"run {run['id']} is not a red-team run (it has no attack success figures)")
        return page("redteam.html.j2", title=f"red team · {run['name'] or run['id']}", run=run, redteam=view)

    @app.get("/api/redteam/{ref}")
    def api_redteam(ref: str) -> dict[str, Any]:
        run = get_run(ref)
        rt = (run.get("summary") or {}).get("redteam")
        if rt is None:
            raise not_found(f"run {run['id']} is not a red-team run (it has no attack success figures)")
        return {"run": run["id"], "redteam": rt}
