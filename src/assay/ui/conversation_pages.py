"""The conversation view of the dashboard: a run over conversation data, one conversation at a time.

A conversation row (Azure's ``{"conversation": {"messages": [...]}}``, or what ``assay simulate
users`` writes) is evaluated as one row per assistant turn, all with the same ``conversation_id``.
:func:`conversation_view` puts a conversation's rows back together: the system message, the turns
in order (the user's message, the app's answer and that turn's scores beside it), the
conversation-level judgments with their reasons (:mod:`assay.metrics.conversation`: one per
conversation, on its last turn), the goal it was simulated for and why it stopped (``goal``,
``stop_reason``, ``stop_detail``: ``assay simulate users --goals``), and the turn-level and
conversation-level figures side by side, this conversation's beside the run's mean per
conversation (:mod:`assay.results.conversations`, as the Markdown summary reads them). Each
figure says the scorer that produced it. Every value stays text: the templates escape it.

Routes (:func:`add_conversation_routes`, included by :mod:`assay.ui.server`):
``/runs/RUN/conversations`` (the run's conversations), ``/runs/RUN/conversations/ID`` (one) and
``/api/runs/RUN/conversations/ID`` (its rows and figures as JSON). The rows are read from the
store in input order, once per page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from typing import Any

from assay.results import StoredRow
from assay.results.conversations import (
    LEVEL_LABELS,
    conversation_figure,
    is_conversation_level,
    per_conversation,
    rollup_of,
)

MAX_LISTED = 1000        # conversations listed on a run's conversations page


def _inputs(row: StoredRow, name: str) -> Any:
    return row.inputs.get("inputs." + name, row.inputs.get(name))


def conversations(rows: Iterable[StoredRow]) -> dict[str, list[StoredRow]]:
    """The rows that are turns of a conversation, by conversation id (in first-seen order), each
    conversation's turns in order."""
    out: dict[str, list[StoredRow]] = {}
    for r in rows:
        if r.conversation_id is not None:
            out.setdefault(str(r.conversation_id), []).append(r)
    for turns in out.values():
        turns.sort(key=lambda r: (_turn_no(r), r.idx))
    return out


def _turn_no(r: StoredRow) -> int:
    t = _inputs(r, "turn")
    return t if isinstance(t, int) and not isinstance(t, bool) else r.idx


def _score(metric: str, output: str, s: Any, scorers: Mapping[str, Any]) -> dict[str, Any]:
    d = asdict(s)
    entry = scorers.get(metric) or {}
    judge = (d.get("properties") or {}).get("judge_model")
    d.update(metric=metric, output=output, scorer=judge or entry.get("label") or entry.get("by") or metric)
    return d


def _scores(row: StoredRow, scorers: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [_score(m, o, s, scorers) for m, outs in row.scores.items() for o, s in outs.items()]


def _system(first: StoredRow) -> list[dict[str, Any]]:
    """The messages before the first user message of the conversation (the system message)."""
    out = []
    for m in _inputs(first, "history") or []:
        if not isinstance(m, Mapping) or m.get("role") == "user":
            break
        out.append({"role": str(m.get("role") or "?"), "text": _text(m.get("content"))})
    return out


def _text(v: Any) -> str | None:
    from assay.ui.render import message_text

    return message_text(v)


def _goal(v: Any) -> list[tuple[str, str]]:
    """The goal as label/text pairs: a text goal as it is, a goal object field by field."""
    from assay.ui.render import as_json

    if v is None:
        return []
    if not isinstance(v, Mapping):
        return [("goal", v if isinstance(v, str) else as_json(v))]
    return [(str(k), val if isinstance(val, str) else as_json(val)) for k, val in v.items() if val not in (None, "", [])]


def _judgments(turns: list[StoredRow], scorers: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each conversation-level output's one judgment: the turn it was made on (not skipped), else
    the last turn's (with the reason it was not made)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for r in turns:
        for s in _scores(r, scorers):
            if not is_conversation_level(s["metric"]):
                continue
            key = (s["metric"], s["output"])
            if key not in found or s["status"] != "skipped":
                found[key] = {**s, "turn": _turn_no(r), "idx": r.idx}
    return list(found.values())


def _side_by_side(turn_rows: list[dict[str, Any]], judgments: list[dict[str, Any]],
                  metrics: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per metric output: its level, this conversation's figure and the run's mean per conversation."""
    run_mean = {f["output"]: f["mean"] for f in per_conversation(metrics)}
    out = []
    by_output: dict[str, list[dict[str, Any]]] = {}
    for t in turn_rows:
        for s in t["scores"]:
            by_output.setdefault(s["output"], []).append(s)
    for o, ss in by_output.items():
        agg = metrics.get(o) or {}
        scored = [s["score"] for s in ss if s["status"] == "completed"]
        out.append({"output": o, "level": LEVEL_LABELS["turn"] if rollup_of(agg) == "mean" else "turn (worst turn)",
                    "figure": conversation_figure(scored, agg), "of": f"{len(scored)} of {len(ss)} turns scored",
                    "run_mean": run_mean.get(o), "scorer": ss[0]["scorer"], "result": None})
    for j in judgments:
        out.append({"output": j["output"], "level": LEVEL_LABELS["conversation"],
                    "figure": j["score"] if j["status"] == "completed" else None,
                    "value": j["value"], "of": f"judged on turn {j['turn']}" if j["status"] != "skipped" else "not judged",
                    "run_mean": run_mean.get(j["output"]), "scorer": j["scorer"], "result": j})
    return out


def conversation_view(run: Mapping[str, Any], cid: str, turns: list[StoredRow]) -> dict[str, Any]:
    """What the page of conversation ``cid`` of ``run`` shows (``turns``: its rows, in order)."""
    summary = run.get("summary") or {}
    scorers = summary.get("scorers") or {}
    turn_rows = []
    for r in turns:
        scores = [s for s in _scores(r, scorers) if not is_conversation_level(s["metric"])]
        turn_rows.append({"idx": r.idx, "turn": _turn_no(r), "query": _text(_inputs(r, "query")),
                          "response": _text(_inputs(r, "response")), "target_error": r.target_error,
                          "scores": scores})
    judgments = _judgments(turns, scorers)
    last = turns[-1]
    return {"id": cid, "system": _system(turns[0]), "turns": turn_rows, "judgments": judgments,
            "goal": _goal(_inputs(last, "goal")), "stop_reason": _inputs(last, "stop_reason"),
            "stop_detail": _inputs(last, "stop_detail"),
            "side_by_side": _side_by_side(turn_rows, judgments, run.get("aggregates") or {})}


def conversation_list(run: Mapping[str, Any], groups: Mapping[str, list[StoredRow]]) -> list[dict[str, Any]]:
    """One line per conversation: its id, turns, goal, stop reason and conversation-level results."""
    scorers = (run.get("summary") or {}).get("scorers") or {}
    out = []
    for cid, turns in list(groups.items())[:MAX_LISTED]:
        goal = _inputs(turns[-1], "goal")
        out.append({"id": cid, "turns": len(turns), "first": turns[0].idx,
                    "goal": goal.get("goal") if isinstance(goal, Mapping) else goal,
                    "stop_reason": _inputs(turns[-1], "stop_reason"), "judgments": _judgments(turns, scorers)})
    return out


def add_conversation_routes(app: Any, store: Any, *, page: Callable[..., Any], get_run: Callable[[str], dict[str, Any]],
                            not_found: type[Exception]) -> None:
    """``/runs/{ref}/conversations``, ``/runs/{ref}/conversations/{cid}`` and its JSON on ``app``."""
    from fastapi.responses import HTMLResponse

    def _groups(run: dict[str, Any]) -> dict[str, list[StoredRow]]:
        groups = conversations(store.iter_scored(run["id"]))
        if not groups:
            raise not_found(f"run {run['id']} has no conversations (no row carries a conversation_id)")
        return groups

    def _one(ref: str, cid: str) -> tuple[dict[str, Any], dict[str, Any]]:
        run = get_run(ref)
        turns = _groups(run).get(cid)
        if not turns:
            raise not_found(f"run {run['id']} has no conversation {cid!r}")
        return run, conversation_view(run, cid, turns)

    @app.get("/runs/{ref}/conversations", response_class=HTMLResponse)
    def conversations_page(ref: str) -> Any:
        run = get_run(ref)
        groups = _groups(run)
        return page("conversations.html.j2", title=f"conversations · {run['name'] or run['id']}", run=run,
                    items=conversation_list(run, groups), total=len(groups), max_listed=MAX_LISTED,
                    figures=per_conversation(run.get("aggregates") or {}), levels=LEVEL_LABELS)

    @app.get("/runs/{ref}/conversations/{cid:path}", response_class=HTMLResponse)
    def conversation_page(ref: str, cid: str) -> Any:
        run, view = _one(ref, cid)
        return page("conversation.html.j2", title=f"conversation {cid} · {run['name'] or run['id']}", run=run, c=view)

    @app.get("/api/runs/{ref}/conversations/{cid:path}")
    def api_conversation(ref: str, cid: str) -> dict[str, Any]:
        run, view = _one(ref, cid)
        return {"run": run["id"], "conversation": view}
