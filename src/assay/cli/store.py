"""``assay runs | show | compare | delete | export``: the runs kept in the store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from assay.cli.bench.quality import render_quality
from assay.cli.common import STORE_OPT, err, fmt, open_store, out, plain, print_json, safe, text_arg, when
from assay.cli.eval import print_summary
from assay.cli.judge import print_run_check
from assay.errors import AssayError
from assay.results import LAYOUTS, bounds

app = typer.Typer()


@app.command("runs")
def runs_cmd(
    name: str | None = typer.Option(None, "--name", "-n", help="Only runs with this name."),
    status: str | None = typer.Option(None, "--status", help="Only runs with this status (running, stale, completed, interrupted, failed; stale: its process is gone)."),
    limit: int = typer.Option(30, "--limit", help="At most this many runs, newest first."),
    store: str | None = STORE_OPT,
) -> None:
    """List the runs in the store, newest first."""
    st = open_store(store)
    runs = st.list_runs(name=text_arg(name), status=text_arg(status), limit=limit)
    if not runs:
        out.print(f"no runs in {safe(st.display_url)}", highlight=False)
        return
    table = Table(title=f"runs in {safe(st.display_url)}", title_justify="left")
    for col in ("id", "name", "started", "status", "rows", "data", "metrics", "judge"):
        table.add_column(col, overflow="fold")
    for r in runs:
        aggs = r.get("aggregates") or {}
        means = ", ".join(f"{safe(o)}={fmt(a.get('mean'), 2)}" for o, a in list(aggs.items())[:4])
        if len(aggs) > 4:
            means += f", +{len(aggs) - 4}"
        table.add_row(safe(r["id"]), safe(r["name"] or ""), when(r["created_at"]), safe(r["status"]),
                      str(r["rows_done"]), safe(Path(r["source"] or "").name or "—"),
                      means or safe(", ".join(r.get("metrics") or [])), safe(r["judge"] or "—"))
    out.print(table)


FORMAT_OPT = typer.Option("table", "--format", "-f", help="table (for people) or json (for scripts).")


def _format(value: str) -> str:
    v = value.strip().lower()
    if v not in ("table", "json"):
        raise AssayError(f"--format {value!r}: use table or json")
    return v


@app.command("show")
def show_cmd(run: str = typer.Argument(..., help="Run id, id prefix, name (its latest run) or 'last'."),
             store: str | None = STORE_OPT, format_: str = FORMAT_OPT,
             errors: bool = typer.Option(False, "--errors", help="Only the run's errored rows (its dead-letter), each with the reason of every output in error, and the input rows left out as unreadable; with --format json the objects of errors.jsonl."),
             flaky: bool = typer.Option(False, "--flaky", help="Only the rows whose verdict changed across the repeats of a run with --repeats, each with every repeat's score and reason."),
             limit: int = typer.Option(100, "--limit", help="With --errors or --flaky as a table: at most this many rows.")) -> None:
    """Show one run's summary (or, with --errors, its errored rows)."""
    as_json = _format(format_) == "json"
    st = open_store(store)
    r = st.get_run(text_arg(run))
    if errors and flaky:
        raise AssayError("--errors and --flaky each list rows of their own; give one of them")
    if errors:
        show_errors(st, r, as_json, limit)
        return
    if flaky:
        show_flaky(st, r, as_json, limit)
        return
    if as_json:
        print_json(r)
        return
    label = f" ({safe(r['name'])})" if r["name"] else ""
    out.print(f"run {safe(r['id'])}{label}: {safe(r['status'])}, started {when(r['created_at'])}, "
              f"{r['rows_done']} rows, data {safe(r['source'])}", highlight=False, soft_wrap=True)
    quality = (r.get("config") or {}).get("family") == "quality"
    if r["status"] in ("running", "stale"):
        from assay.store.sessions import describe_owner

        gone = "its process stopped without finishing it" if r["status"] == "stale" else "being written"
        out.print(f"  {gone}: {safe(describe_owner(r))}", highlight=False)
    if r["status"] == "running":
        return
    if r["status"] != "completed":
        if r.get("error"):
            out.print(f"  [yellow]{safe(r['error'])}[/yellow]", highlight=False, soft_wrap=True)
        again = ("assay bench quality (the same model, tasks and options) --resume" if quality
                 else f"assay eval {safe(r['source'])} --resume-from {safe(r['id'])} (and the same options)")
        out.print(f"  continue it with: {again}", highlight=False)
        return
    if quality:
        summary = r.get("summary") or {}
        render_quality(summary, {"ref": summary.get("ref"), "name": r["name"], "model": summary.get("model"),
                                 "created_at": r["created_at"]})
        out.print(f"  every item, with its prompt, answer and scores: assay export {safe(r['id'])} -o items.jsonl",
                  highlight=False)
        return
    print_summary(st.load_result(r["id"]))
    if (r.get("summary") or {}).get("redteam"):
        from assay.cli.redteam import print_scorecard

        print_scorecard(r["summary"])          # the ASR by strategy x category of an `assay redteam` run
    print_run_check(st, r)


def show_flaky(st: Any, r: dict[str, Any], as_json: bool, limit: int) -> None:
    """``assay show RUN --flaky``: the rows of a repeated run whose repeats did not agree."""
    from assay.results.repeats import iter_flaky

    summary = r.get("summary") or {}
    repeats = int(summary.get("repeats") or 1)
    if repeats < 2 and not as_json:
        out.print(f"run {safe(r['id'])} was not repeated, so no row can be flaky; run it with --repeats N "
                  "(N at least 2)", highlight=False)
        return
    found = list(iter_flaky(st.iter_scored(r["id"])))
    if as_json:
        print_json(found)
        return
    if not found:
        out.print(f"run {safe(r['id'])} has no flaky rows: every row got the same verdict in all {repeats} repeats",
                  highlight=False)
        return
    table = Table(title=f"flaky rows of run {safe(r['id'])} ({repeats} repeats a row)", title_justify="left")
    for col, kw in (("row", {}), ("output", {}), ("passed", {"justify": "right"}), ("repeats", {"overflow": "fold"})):
        table.add_column(col, **kw)
    for x in found[:limit]:
        reps = "\n".join(f"#{e['repeat']} {fmt(e.get('score'), 2)} {e.get('result') or e.get('status')}: "
                         f"{str(e.get('reason') or '')[:160]}" for e in x["repeats"])
        share = x["pass_share"]
        row = str(x["idx"]) + (f" ({x['row_id']})" if x["row_id"] else "")
        table.add_row(safe(row), safe(x["output"]), "—" if share is None else f"{share:.0%}", safe(reps))
    out.print(table)
    if len(found) > limit:
        out.print(f"… and {len(found) - limit} more (--limit, or --format json for all)", highlight=False)


def show_errors(st: Any, r: dict[str, Any], as_json: bool, limit: int) -> None:
    """``assay show RUN --errors``: the dead-letter of a stored run, read back from its rows."""
    from assay.engine.budget import bad_row_letter, dead_letter

    def letters() -> Any:
        for row in st.iter_scored(r["id"]):
            letter = dead_letter(row.idx, row.inputs, row.scores, row_id=row.row_id,
                                 conversation_id=row.conversation_id, target_error=row.target_error)
            if letter is not None:
                yield letter
        for bad in (r.get("summary") or {}).get("bad_rows") or []:
            yield bad_row_letter(bad)

    if as_json:
        print_json(list(letters()))
        return
    table = Table(title=f"errored rows of run {safe(r['id'])}", title_justify="left")
    for col in ("row", "errors", "input"):
        table.add_column(col, overflow="fold")
    shown = total = 0
    for x in letters():
        total += 1
        if shown >= limit:
            continue
        shown += 1
        if x["kind"] == "bad_row":
            table.add_row(safe(f"line {x.get('line')}"), safe(f"unreadable: {x.get('error')}"), safe(x.get("source") or ""))
            continue
        why = "; ".join(f"{e['metric']}" + (f".{e['output']}" if e["output"] != e["metric"] else "")
                        + f": {str(e['reason'] or '')[:200]}" for e in x["errors"])
        inputs = x["inputs"]
        text = str(inputs.get("inputs.query") or inputs.get("inputs.response") or "")[:80]
        table.add_row(str(x["row"]) + (" (target)" if x["target_error"] else ""), safe(why), safe(text))
    if not total:
        out.print(f"run {safe(r['id'])} has no errored rows", highlight=False)
        return
    out.print(table)
    if total > shown:
        out.print(f"… and {total - shown} more (--limit, or --format json for all)", highlight=False)


@app.command("compare")
def compare_cmd(  # noqa: C901
    runs: list[str] = typer.Argument(..., help="Two or more runs (id, prefix or name); the first is the baseline."),
    worst: int = typer.Option(5, "--worst", help="Rows that got worse to show per metric."),
    store: str | None = STORE_OPT,
    format_: str = FORMAT_OPT,
) -> None:
    """Per-metric deltas with 95% confidence intervals, and the rows that got worse."""
    from assay.store.compare import compare_runs, worse_rows

    as_json = _format(format_) == "json"
    st = open_store(store)
    cmp = compare_runs(st, [text_arg(r) for r in runs])
    rs = cmp["runs"]
    if as_json:
        print_json(_compare_json(st, cmp, worst))
        return
    table = Table(title="compare (deltas against the first run; * = significant at 95%)", title_justify="left")
    table.add_column("metric")
    for r in rs:
        table.add_column(safe(r['name'] or r['id']), justify="right")
    for r in rs[1:]:
        table.add_column(f"Δ {safe(r['name'] or r['id'])} [95% CI]", justify="right")
    for m in cmp["metrics"]:
        cells = [bounds.bounded_mean(x, fmt) if x else "—" for x in m["runs"]]
        for d in m["deltas"][1:]:
            if not d or d["delta"] is None:
                cells.append("—")
                continue
            mark = "*" if d["significant"] else ""
            color = "green" if d.get("better") else "red" if d.get("better") is False else ""
            txt = f"{d['delta']:+.3f}{mark} [{d['ci95_low']:+.3f}, {d['ci95_high']:+.3f}]"
            cells.append(f"[{color}]{txt}[/{color}]" if color else txt)
        arrow = "↑" if m["higher_is_better"] else "↓"
        table.add_row(f"{safe(m['output'])} {arrow}", *cells)
    out.print(table)
    for r, line in ((r, bounds.notes_line({m["output"]: m["runs"][i] or {} for m in cmp["metrics"]}))
                    for i, r in enumerate(rs)):
        if line:
            err.print(f"{safe(r['name'] or r['id'])}: {safe(line)}", highlight=False)
    if worst <= 0:
        return
    for other in rs[1:]:
        for m in cmp["metrics"]:
            rows = worse_rows(st, rs[0]["id"], other["id"], m["output"], limit=worst)
            if not rows:
                continue
            t = Table(title=f"{safe(m['output'])}: rows worse in {safe(other['name'] or other['id'])}",
                      title_justify="left")
            for col in ("row", "query", safe(rs[0]['name'] or rs[0]['id']), safe(other['name'] or other['id'])):
                t.add_column(col, overflow="fold")
            for w in rows:
                q = str(w["inputs"].get("inputs.query") or w["inputs"].get("inputs.response") or "")[:80]
                t.add_row(safe(w["key"]), safe(q), _score_cell(w["base"]), _score_cell(w["other"]))
            out.print(t)


_RUN_KEYS = ("id", "name", "status", "created_at", "finished_at", "source", "data_fingerprint", "judge", "rows_done")


def _compare_json(st: Any, cmp: dict[str, Any], worst: int) -> dict[str, Any]:
    """The comparison for scripts: each run's identity, the per-metric entries of
    :func:`~assay.store.compare.compare_runs`, and per later run and metric output the rows that
    got worse (at most ``worst``)."""
    from assay.store.compare import worse_rows

    rs = cmp["runs"]
    worse: dict[str, dict[str, Any]] = {}
    if worst > 0:
        for other in rs[1:]:
            worse[other["id"]] = {m["output"]: worse_rows(st, rs[0]["id"], other["id"], m["output"], limit=worst)
                                  for m in cmp["metrics"]}
    return {"runs": [{k: r.get(k) for k in _RUN_KEYS} for r in rs], "metrics": cmp["metrics"], "worse_rows": worse}


def _score_cell(s: dict[str, Any]) -> str:
    reason = safe(str(s.get("reason") or "")[:160])
    return f"{fmt(s.get('score'))} {safe(s.get('result') or '')}" + (f" — {reason}" if reason else "")


@app.command("delete")
def delete_cmd(runs: list[str] = typer.Argument(..., help="Runs to delete (id, prefix or name)."),
               yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
               store: str | None = STORE_OPT) -> None:
    """Delete runs, their rows and scores."""
    st = open_store(store)
    found = [st.get_run(text_arg(r)) for r in runs]
    if not yes:
        if not sys.stdin.isatty():
            raise AssayError("delete: add --yes to delete without a prompt")
        names = ", ".join(f"{r['id']} ({r['name']})" if r["name"] else r["id"] for r in found)
        if not typer.confirm(f"delete {plain(names)}?"):
            raise typer.Exit(1)
    for r in found:
        st.delete_run(r["id"])
        out.print(f"deleted run {safe(r['id'])}")


@app.command("export")
def export_cmd(run: str = typer.Argument(..., help="Run id, prefix, name or 'last'."),
               output: Path = typer.Option(..., "--output", "-o", help="File to write: .jsonl, .parquet or .json."),
               fmt: str | None = typer.Option(None, "--format", "-f", help="jsonl, parquet or json (rows and aggregates); default: from the file name."),
               layout: str | None = typer.Option(None, "--layout", help="Column names: azure (azure-ai-evaluation's evaluate() names; the default for json) or assay (the rows as stored; the default for jsonl and parquet)."),
               store: str | None = STORE_OPT) -> None:
    """Export a stored run's rows (and, for json, its aggregates)."""
    fmt = (fmt or output.suffix.lstrip(".")).lower()
    if fmt not in ("jsonl", "parquet", "json"):
        raise AssayError(f"export: unknown format {fmt!r}; use jsonl, parquet or json")
    layout = (layout or ("azure" if fmt == "json" else "assay")).lower()
    if layout not in LAYOUTS:
        raise AssayError(f"export: unknown layout {layout!r}; use {' or '.join(LAYOUTS)}")
    res = open_store(store).load_result(text_arg(run))
    getattr(res, f"to_{fmt}")(output, layout=layout)
    out.print(f"wrote {safe(output)}", highlight=False)
