"""What CI systems display: a Markdown summary and JUnit XML for a finished run.

:func:`markdown_summary` is written for GitHub's job summary (``$GITHUB_STEP_SUMMARY``) and
GitLab's: the verdict of the gates, every metric output's aggregates, each output's worst rows
with their reasons, as GitHub-Flavoured Markdown tables. It contains no link and no image, and
evaluated text cannot make one: every cell is stripped of control characters, has Markdown and
HTML punctuation escaped, and autolinks (``http://``, ``www.``, ``a@b``, ``@mention``) broken
with an invisible word joiner after ``@`` and escapes elsewhere.

:func:`junit_xml` is one ``<testsuite>`` with a test case per gate (a failure when the gate
failed, its reason as the message) and per metric output (its figures as properties; a failure
when a gate on it failed, skipped when no row was scored).

Rows a one-sided scorer left *not flagged* (the safety metrics with no judge) are shown as such:
the pass rate with the count beside it, the defect rate as ``≥ x (lower bound: rules, no
judge)``, a line per output under the table, a gate that could not be decided as NOT MEASURED
(:mod:`assay.results.bounds`).

Gates come in as plain dicts (``GateResult.as_dict()`` of :mod:`assay.engine.gates`).
"""

from __future__ import annotations

import heapq
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from assay.results import bounds

WORST_ROWS = 5

# C0 and C1 controls (and DEL), bidirectional overrides and isolates: never part of a report.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
# XML 1.0 forbids these even escaped; surrogates cannot be encoded.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Inline Markdown (emphasis, code, links, images, strikethrough, math, table cells) and the
# characters autolinks start from (the colon of a scheme, the dot of "www.").
_MD_PUNCT = re.compile(r"([\\`*_\[\]()!|~$:])")
_WWW = re.compile(r"(?i)(www)\.")
_WORD_JOINER = "&#8288;"


def clean(text: Any) -> str:
    """``text`` without terminal escape sequences, control characters and bidi overrides."""
    return _CONTROL.sub("", _ANSI.sub("", str(text)))


def md_text(text: Any, limit: int = 160) -> str:
    """``text`` as the content of one Markdown table cell: one line, at most ``limit``
    characters, rendered as the literal text (no emphasis, code, HTML, link or mention)."""
    s = " ".join(clean(text).split())
    if len(s) > limit:
        s = s[:limit - 1].rstrip() + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _WWW.sub(r"\1\\.", _MD_PUNCT.sub(r"\\\1", s))
    return s.replace("@", "@" + _WORD_JOINER)


def _num(v: Any, digits: int = 3) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return md_text(v)


def _interval(lo: Any, hi: Any, signed: bool = False) -> str:
    if lo is None or hi is None:
        return "—"
    return f"{lo:+.3f} to {hi:+.3f}" if signed else f"{lo:.3f} – {hi:.3f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    lines = ["| " + " | ".join(header) + " |",
             "| " + " | ".join("---:" if i in right else "---" for i in range(len(header))) + " |"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return lines


def gates_verdict(gates: Sequence[Mapping[str, Any]]) -> str:
    """One line: how many gates passed or failed."""
    if not gates:
        return "no gates"
    failed = sum(1 for g in gates if not g["passed"])
    if len(gates) == 1:
        return "the gate failed" if failed else "the gate passed"
    return f"{failed} of {len(gates)} gates failed" if failed else f"all {len(gates)} gates passed"


def _verdict(verdict: str) -> str:
    return {"pass": "pass", "tolerated": "tolerated", "not_measured": "**NOT MEASURED**"}.get(verdict, "**FAIL**")


def _figure(g: Mapping[str, Any]) -> str:
    f = g.get("figure")
    if g.get("kind") == "regression":
        d = g.get("details") or {}
        if f is None:
            return "—"
        return f"Δ {f:+.3f} ({_num(d.get('baseline_mean'))} → {_num(d.get('mean'))})"
    if g.get("statistic") in ("errored", "evaluated", "skipped") and f is not None:
        return f"{int(f):,}"
    return _num(f, 4)


def markdown_summary(result: Any, gates: Sequence[Mapping[str, Any]] = (), *, worst: int = WORST_ROWS,
                     title: str | None = None) -> str:
    """The run ``result`` (an :class:`~assay.results.EvalResult`) and its ``gates`` as Markdown."""
    run, metrics = result.run, result.metrics
    label = title or run.get("name") or run.get("run_id") or "evaluation"
    icon = "" if not gates else ("✅ " if all(g["passed"] for g in gates) else "❌ ")
    lines = [f"## {icon}assay: {md_text(label, 80)}", ""]
    facts = [f"data {md_text(run.get('source') or '—', 120)}",
             f"{run.get('rows_read', 0):,} rows read, {run.get('rows_evaluated', 0):,} evaluated, "
             f"{run.get('rows_skipped', 0):,} skipped as bad input, {run.get('rows_errored', 0):,} with errors"]
    if run.get("judge"):
        u = run.get("judge_usage") or {}
        cost = u.get("cost_usd")
        facts.append(f"judge {md_text(run['judge'], 80)}: {u.get('calls', 0):,} calls, {u.get('cache_hits', 0):,} "
                     f"from cache" + (f", ${cost:.4f}" if cost is not None else ""))
    if run.get("run_id"):
        facts.append(f"run {md_text(run['run_id'])}")
    lines += ["; ".join(facts) + ".", ""]

    if gates:
        lines += [f"### Gates: {gates_verdict(gates)}", ""]
        lines += _table(["gate", "figure", "95% interval", "bound", "verdict", "why"], (
            [md_text(g["gate"], 80), _figure(g),
             _interval(g.get("ci95_low"), g.get("ci95_high"), g.get("kind") == "regression"),
             md_text(g.get("bound") or ""), _verdict(g["verdict"]), md_text(g.get("reason") or "", 240)]
            for g in gates), right=(1,))
        lines.append("")

    lines += ["### Metrics", ""]
    lines += _table(["metric", "mean", "95% CI", "median", "p90", "pass rate", "defect rate", "evaluated",
                     "skipped", "errored"], (
        [md_text(o, 60), md_text(bounds.bounded_mean(a, _num)), _interval(a.get("ci95_low"), a.get("ci95_high")),
         md_text(bounds.bounded_mean(a, _num, "median")), md_text(bounds.bounded_mean(a, _num, "p90")),
         md_text(bounds.pass_rate_text(a, _num)),
         md_text(bounds.bounded_rate(a) or "—"), _num(a.get("evaluated")), _num(a.get("skipped")),
         _num(a.get("errored"))]
        for o, a in metrics.items()), right=tuple(range(1, 10)))
    notes = [f"- {md_text(line, 300)}" for o, a in metrics.items() if (line := bounds.note(a, o))]
    notes += [f"- {md_text(a.get('metric', o), 60)}: {n:,} {kind}: {md_text(reason, 200)}"
             for o, a in metrics.items() for kind, key in (("errored", "error_reasons"), ("skipped", "skip_reasons"))
             for reason, n in sorted((a.get(key) or {}).items(), key=lambda kv: -kv[1])[:3]]
    if notes:
        lines += ["", *dict.fromkeys(notes)]   # one line per metric, not per output
    lines += _per_conversation(metrics)

    lines += _repeats_section(result, worst)
    picks = worst_rows(result, worst) if worst > 0 else {}
    if any(picks.values()):
        lines += ["", "### Worst rows", ""]
        for output, rows in picks.items():
            if not rows:
                continue
            arrow = "lowest" if metrics[output].get("higher_is_better", True) else "highest"
            lines += ["<details>", f"<summary>{md_text(output, 60)}: the {len(rows)} {arrow} scores</summary>", ""]
            lines += _table(["row", "score", "result", "query", "response", "reason"], (
                [md_text(r["row"], 40), _num(r["score"]), md_text(r.get("result") or ""), md_text(r["query"], 100),
                 md_text(r["response"], 100), md_text(r["reason"], 240)] for r in rows), right=(1,))
            lines += ["", "</details>", ""]
    return "\n".join(lines).rstrip() + "\n"


def _repeats_section(result: Any, k: int) -> list[str]:
    """The repeated outputs of a run with repeats: how steady the judge was, and up to ``k`` flaky
    rows each with every repeat's score (empty for a run without repeats)."""
    from assay.results.repeats import verdict_counts

    rep = {o: a for o, a in result.metrics.items() if verdict_counts(a)}
    if not rep:
        return []
    lines = ["", "### Repeats", ""]
    lines += _table(["metric", "repeats", "flaky rows", "flaky share", "stable pass", "stable fail", "pass rate",
                     "95% interval (rows)"], (_repeats_row(o, a) for o, a in rep.items()), right=tuple(range(1, 8)))
    flaky = [(o, info) for o, rows in flaky_examples(result, list(rep), k).items() for info in rows]
    if flaky:
        lines += ["", "<details>", f"<summary>{len(flaky)} flaky rows: every repeat's score</summary>", ""]
        lines += _table(["metric", "row", "scores", "passed", "repeat 0's reason"], (
            [md_text(o, 60), md_text(x["row"], 40), ", ".join(_num(v, 2) for v in x["scores"]),
             f"{x['pass_share']:.0%}" if x["pass_share"] is not None else "—", md_text(x["reason"], 240)]
            for o, x in flaky))
        lines += ["", "</details>"]
    return lines


def _repeats_row(output: str, agg: Mapping[str, Any]) -> list[str]:
    from assay.results.repeats import FLAKY, STABLE_FAIL, STABLE_PASS, verdict_counts

    c = verdict_counts(agg)
    return [md_text(output, 60), str(agg["repeats"]), f"{c[FLAKY]:,}", _num(agg.get("flaky_share")),
            f"{c[STABLE_PASS]:,}", f"{c[STABLE_FAIL]:,}", _num(agg.get("pass_rate")),
            _interval(agg.get("pass_rate_ci95_low"), agg.get("pass_rate_ci95_high"))]


def flaky_examples(result: Any, outputs: Sequence[str], k: int = WORST_ROWS) -> dict[str, list[dict[str, Any]]]:
    """Per repeated output, its first ``k`` flaky rows: ``{output: [{row, scores, pass_share,
    reason}]}`` (each repeat's score, in repeat order)."""
    cols = {o: f"outputs.{result.metrics[o].get('metric', o)}.{o}" for o in outputs}
    found: dict[str, list[dict[str, Any]]] = {o: [] for o in outputs}
    for pos, row in enumerate(result.iter_rows()):
        for o, key in cols.items():
            props = row.get(key + "_properties") or {}
            if len(found[o]) >= k or not isinstance(props, Mapping) or props.get("verdict") != "flaky":
                continue
            reps = props.get("repeats") or []
            rid = row.get("inputs.id")
            found[o].append({"row": rid if rid is not None else f"#{pos}",
                             "scores": [e.get("score") for e in reps], "pass_share": props.get("pass_share"),
                             "reason": (reps[0].get("reason") if reps else None) or ""})
    return found


def _per_conversation(metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """On conversation data, each metric's figure per conversation: turn-level metrics as the mean
    of a conversation's turns, conversation-level ones as their one judgment of the transcript."""
    from assay.results.conversations import LEVEL_LABELS, per_conversation

    rows = [[md_text(f["output"], 60), LEVEL_LABELS[f["level"]], _num(f["mean"]), _num(f["conversations"])]
            for f in per_conversation(metrics)]
    if not rows:
        return []
    return ["", "### Per conversation", "", *_table(["metric", "level", "mean per conversation", "conversations"],
                                                    rows, right=(2, 3))]


def worst_rows(result: Any, k: int = WORST_ROWS) -> dict[str, list[dict[str, Any]]]:
    """Per metric output, the ``k`` rows with the worst scores (lowest, or highest where lower
    is better), worst first, read in one pass over the rows: ``{output: [{row, score, result,
    reason, query, response}]}``. Rows without a score (errored, skipped) are not among them."""
    cols = {o: (f"outputs.{a.get('metric', o)}.{o}", 1.0 if a.get("higher_is_better", True) else -1.0)
            for o, a in result.metrics.items()}
    heaps: dict[str, list[tuple[float, int, dict[str, Any]]]] = {o: [] for o in cols}
    for pos, row in enumerate(result.iter_rows()):
        for o, (key, sign) in cols.items():
            s = row.get(key + "_score")
            if s is None or s != s:
                continue
            item = (-sign * float(s), -pos)   # the max-heap of the k worst: the best of them on top
            h = heaps[o]
            if len(h) < k:
                heapq.heappush(h, (*item, _row_info(row, key, pos)))
            elif item > h[0][:2]:
                heapq.heapreplace(h, (*item, _row_info(row, key, pos)))
    return {o: [info for *_, info in sorted(h, reverse=True)] for o, h in heaps.items()}


def _row_info(row: Mapping[str, Any], key: str, pos: int) -> dict[str, Any]:
    rid = row.get("inputs.id")
    return {"row": rid if rid is not None else f"#{pos}", "score": row.get(key + "_score"),
            "result": row.get(key + "_result"), "reason": row.get(key + "_reason") or "",
            "query": row.get("inputs.query") or "", "response": row.get("inputs.response") or ""}


def _xml(text: Any) -> str:
    return _NOT_XML.sub("", clean(text))


def junit_xml(result: Any, gates: Sequence[Mapping[str, Any]] = ()) -> str:  # noqa: C901
    """The run and its gates as JUnit XML (one test suite; see the module docstring)."""
    run, metrics = result.run, result.metrics
    suite = ET.Element("testsuite", name=_xml(f"assay {run.get('name') or run.get('run_id') or 'evaluation'}"))
    props = ET.SubElement(suite, "properties")
    for k in ("run_id", "name", "source", "judge", "rows_read", "rows_evaluated", "rows_skipped", "rows_errored"):
        if run.get(k) is not None:
            ET.SubElement(props, "property", name=k, value=_xml(run[k]))
    failures = skipped = 0
    for g in gates:
        case = ET.SubElement(suite, "testcase", classname="assay.gates", name=_xml(g["gate"]))
        text = f"{g['output']} {g['statistic']}: {_plain(g.get('figure'))}"
        if g.get("ci95_low") is not None:
            text += f" (95% interval {_plain(g['ci95_low'])} to {_plain(g['ci95_high'])})"
        text += f"; bound {g.get('bound')}"
        if not g["passed"]:
            failures += 1
            ET.SubElement(case, "failure", message=_xml(g.get("reason") or "gate failed"), type="GateFailed").text = \
                _xml(text)
        else:
            ET.SubElement(case, "system-out").text = _xml(text + (f"; {g['reason']}" if g.get("reason") else ""))
    failed_outputs: dict[str, list[str]] = {}
    for g in gates:
        if not g["passed"]:
            failed_outputs.setdefault(g["output"], []).append(g["gate"])
    for o, a in metrics.items():
        case = ET.SubElement(suite, "testcase", classname=_xml(f"assay.metrics.{a.get('metric', o)}"), name=_xml(o))
        cp = ET.SubElement(case, "properties")
        for k in ("mean", "ci95_low", "ci95_high", "median", "p90", "pass_rate", "defect_rate", "evaluated",
                  "skipped", "errored", "not_flagged", "defect_rate_bound", "mean_bound", "repeats", "rows_flaky",
                  "flaky_share", "pass_rate_ci95_low", "pass_rate_ci95_high"):
            if a.get(k) is not None:
                ET.SubElement(cp, "property", name=k, value=_plain(a[k]))
        if o in failed_outputs:
            failures += 1
            ET.SubElement(case, "failure", message=_xml(f"failed gates: {', '.join(failed_outputs[o])}"),
                          type="GateFailed")
        elif a.get("mean") is None and not a.get("evaluated"):
            skipped += 1
            ET.SubElement(case, "skipped", message=_xml(f"no row scored ({a.get('skipped', 0)} skipped, "
                                                         f"{a.get('errored', 0)} errored)"))
        reasons = "; ".join(f"{n} errored: {r}" for r, n in (a.get("error_reasons") or {}).items())
        if reasons:
            ET.SubElement(case, "system-err").text = _xml(reasons)
    suite.set("tests", str(len(gates) + len(metrics)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    if run.get("duration_s") is not None:
        suite.set("time", f"{float(run['duration_s']):.3f}")
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def _plain(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, float):
        return f"{v:.6g}"
    return _xml(v)
