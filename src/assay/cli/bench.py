"""``assay bench ...``: model benchmarks (serving performance, cost) and their stored runs."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, help="Benchmark models: serving performance and cost.")


# -- stored perf runs: list, show, compare, track (docs/bench.md, "Keeping and comparing runs") ----
# Self-contained: the perf and cost commands live in their own sections of this file.
from typing import Any, Optional  # noqa: E402

_STORED_LATENCY = ("ttft", "ttft_sched", "ttfat", "itl", "tpot", "e2e", "e2e_sched")
_STORED_NAMES = {"ttft": "TTFT", "ttft_sched": "TTFT sched", "ttfat": "TTFAT", "itl": "ITL", "tpot": "TPOT",
                 "e2e": "E2E", "e2e_sched": "E2E sched", "gtps": "GTPS", "ttps": "TTPS"}
_STORED_STORE_OPT = typer.Option(None, "--store", help="Store path or database URL (default: $ASSAY_STORE, else .assay/assay.db).")
_STORED_JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")


def _stored_unit(metric: str) -> str:
    return "ms" if metric in _STORED_LATENCY else "tok/s"


def _stored_num(v: Any, metric: str) -> str:
    """A value of ``metric`` for a table: latencies in ms, token rates in tokens per second."""
    if v is None:
        return "—"
    v = float(v) * (1000 if metric in _STORED_LATENCY else 1)
    return f"{v:,.1f}" if abs(v) < 10_000 else f"{v:,.0f}"


def _stored_ci(ci: Any, metric: str) -> str:
    if not ci or len(ci) != 2 or ci[0] is None:
        return ""
    return f" [{_stored_num(ci[0], metric)}–{_stored_num(ci[1], metric)}]"


def _stored_signed(v: Any, metric: str) -> str:
    if v is None:
        return "—"
    s = _stored_num(abs(v), metric)
    return ("+" if v >= 0 else "−") + s


def _stored_rate(v: Any) -> str:
    """A throughput (requests or tokens per second)."""
    if not isinstance(v, (int, float)):
        return "—"
    return f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}"


def _stored_load(p: dict[str, Any]) -> str:
    from assay.bench.perf_compare import point_label

    return point_label(p)


def _stored_json(value: Any) -> None:
    import orjson

    typer.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY,
                            default=str).decode())


@app.command("list")
def stored_list_cmd(
    model: Optional[str] = typer.Option(None, "--model", help="Only runs of this model."),
    track: Optional[str] = typer.Option(None, "--track", help="Only the scheduled repeats of this track."),
    limit: int = typer.Option(30, "--limit", help="At most this many runs, newest first."),
    as_json: bool = _STORED_JSON_OPT,
    store: Optional[str] = _STORED_STORE_OPT,
) -> None:
    """List the stored serving-performance runs, newest first."""
    from rich.markup import escape
    from rich.table import Table

    from assay.bench.perf_compare import describe_points, validity_text
    from assay.cli.common import open_store, out, when

    st = open_store(store)
    runs = st.list_benchmarks(kind="perf", model=model, track=track, limit=limit, details=False)
    if as_json:
        _stored_json([{k: r.get(k) for k in ("ref", "id", "name", "model", "task", "created_at", "track", "metrics")}
                      for r in runs])
        return
    if not runs:
        out.print(f"no perf runs in {escape(st.display_url)}" + (" match" if model or track else ""), highlight=False)
        return
    table = Table(title=f"perf runs in {escape(st.display_url)}", title_justify="left")
    for col in ("ref", "name", "model", "mode", "points", "when", "valid", "track"):
        table.add_column(col, overflow="fold")
    for r in runs:
        table.add_row(r["ref"] or str(r["id"]), escape(r["name"] or ""), escape(r["model"] or "—"), escape(r["task"] or "—"),
                      describe_points(r["metrics"]), when(r["created_at"]), validity_text(r["metrics"]),
                      escape(r["track"] or ""))
    out.print(table)


def _stored_point_table(p: dict[str, Any]) -> Any:
    from rich.table import Table

    from assay.bench.perf_compare import SHOWN_METRICS

    failures = {k: v for k, v in ((p.get("requests") or {}).get("failures") or {}).items() if v}
    req = p.get("requests") or {}
    val = p.get("validity") or {}
    verdict = "[green]valid[/green]" if val.get("valid") else ("[red]NOT VALID[/red]" if val.get("valid") is False else "validity unknown")
    dur = p.get("duration_s")
    title = (f"{_stored_load(p)}: {req.get('ok', '—')} ok, {req.get('failed', 0)} failed"
             + (f" ({', '.join(f'{k}: {v}' for k, v in failures.items())})" if failures else "")
             + (f" in {dur:.1f} s" if isinstance(dur, (int, float)) else "") + f" — {verdict}")
    t = Table(title=title, title_justify="left")
    for col in ("metric", "n", "mean [95% CI]", "p50 [95% CI]", "p90", "p95", "p99 [95% CI]"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for m in SHOWN_METRICS:
        d = (p.get("metrics") or {}).get(m)
        if not d:
            continue
        ci = d.get("ci") or {}
        t.add_row(f"{_STORED_NAMES.get(m, m)} ({_stored_unit(m)})", f"{d.get('n', '—')}",
                  _stored_num(d.get("mean"), m) + _stored_ci(ci.get("mean"), m),
                  _stored_num(d.get("p50"), m) + _stored_ci(ci.get("p50"), m),
                  _stored_num(d.get("p90"), m), _stored_num(d.get("p95"), m),
                  _stored_num(d.get("p99"), m) + _stored_ci(ci.get("p99"), m))
    return t


def _stored_point_notes(p: dict[str, Any]) -> list[str]:
    from rich.markup import escape

    from assay.cli.common import fmt

    lines = []
    tp = [(p.get("request_throughput"), "req/s"), (p.get("output_throughput"), "output tok/s"),
          (p.get("total_token_throughput"), "total tok/s")]
    lines.append("throughput: " + " · ".join(f"{_stored_rate(v)} {u}" for v, u in tp if isinstance(v, (int, float))))
    li, ti = p.get("latency_index"), p.get("throughput_index")
    lines.append(f"latency index {fmt(li)} s (mean TTFT) · throughput index {fmt(ti, 1)} tok/s (mean GTPS)")
    slo = p.get("slo")
    if slo:
        goals = ", ".join(f"{k} ≤ {slo[k]} s" for k in ("ttft", "itl") if slo.get(k) is not None)
        att = slo.get("attainment")
        lines.append(f"SLO {goals}: attainment {'—' if att is None else f'{100 * att:.1f}%'}, "
                     f"goodput {fmt(slo.get('goodput'), 1)} req/s")
    tok = p.get("tokens") or {}
    if tok:
        lines.append(f"tokens: input mean {fmt(tok.get('input_mean'), 1)}, output mean {fmt(tok.get('output_mean'), 1)} "
                     f"(counts from {escape(str(tok.get('usage_from') or '—'))}), {tok.get('disagreements', 0)} "
                     "request(s) whose output counts disagree")
    val = p.get("validity") or {}
    for r in val.get("reasons") or []:
        lines.append(f"[red]not valid:[/red] {escape(str(r))}")
    lag = [(val.get("schedule_lag_ms"), "schedule lag"), (val.get("loop_lag_ms"), "event-loop lag")]
    inst = [f"{name} p99 {d.get('p99'):.1f} ms (max {d.get('max'):.1f})" for d, name in lag
            if isinstance(d, dict) and isinstance(d.get("p99"), (int, float)) and isinstance(d.get("max"), (int, float))]
    if isinstance(val.get("client_cpu_s"), (int, float)):
        per = val.get("cpu_per_token_us")
        inst.append(f"client CPU {val['client_cpu_s']:.1f} s" + (f" ({per:.1f} µs/token)" if isinstance(per, (int, float)) else ""))
    if inst:
        lines.append("instrument: " + ", ".join(inst))
    return lines


@app.command("show")
def stored_show_cmd(
    ref: str = typer.Argument("latest", help="Run ref, ref prefix, name (its latest run) or 'latest'."),
    as_json: bool = _STORED_JSON_OPT,
    store: Optional[str] = _STORED_STORE_OPT,
) -> None:
    """Show a stored perf run: percentiles with 95% intervals, throughput, failures, validity per point."""
    from rich.markup import escape

    from assay.cli.common import open_store, out, when

    rec = open_store(store).get_benchmark(ref, kind="perf")
    s = rec.get("details") or {}
    if as_json:
        _stored_json({**{k: rec.get(k) for k in ("ref", "id", "name", "model", "task", "created_at", "track", "run_id")},
                      "summary": s})
        return
    st_ = s.get("settings") or {}
    head = (f"perf run [bold]{rec['ref']}[/bold] ({escape(rec['name'] or '')}) · model {escape(str(rec['model'] or '—'))} "
            f"· {escape(str(s.get('endpoint') or '—'))} ({escape(str(s.get('api') or '—'))}"
            f"{', streaming' if s.get('stream') else ''})")
    facts = [f"mode {escape(str(s.get('mode') or '—'))}", f"{len(s.get('points') or [])} point(s)", when(rec["created_at"]),
             f"input {st_.get('input_tokens', '—')} / output {st_.get('output_tokens', '—')} tokens",
             f"clock {escape(str(s.get('clock') or '—'))}",
             f"tokenizer {escape(str((s.get('tokenizer') or {}).get('source') or '—'))}"]
    if rec.get("track"):
        rep = s.get("repeat") or {}
        facts.append(f"track {escape(rec['track'])}" + (f" (repeat {rep['index'] + 1} of {rep['of']})"
                                                        if isinstance(rep.get("index"), int) and rep.get("of") else ""))
    cost = s.get("cost") or {}
    if isinstance(cost.get("usd"), (int, float)):
        facts.append(f"cost ${cost['usd']:.4f}")
    out.print(head, highlight=False, soft_wrap=True)
    out.print("  " + " · ".join(facts), highlight=False, soft_wrap=True)
    for p in s.get("points") or []:
        out.print()
        out.print(_stored_point_table(p))
        for line in _stored_point_notes(p):
            out.print("  " + line, highlight=False, soft_wrap=True)


@app.command("compare")
def stored_compare_cmd(
    ref_a: str = typer.Argument(..., help="Run A, the baseline (ref, prefix, name or 'latest')."),
    ref_b: str = typer.Argument(..., help="Run B, compared with A."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples of each run."),
    as_json: bool = _STORED_JSON_OPT,
    store: Optional[str] = _STORED_STORE_OPT,
) -> None:
    """Compare two stored perf runs point by point: B − A, B / A, 95% bootstrap intervals, verdicts."""
    from rich.markup import escape
    from rich.table import Table

    from assay.bench.perf_compare import THROUGHPUTS, compare_perf
    from assay.cli.common import open_store, out, when
    from assay.errors import AssayError

    if resamples < 100:
        raise AssayError("--resamples must be at least 100")
    cmp = compare_perf(open_store(store), ref_a, ref_b, seed=seed, resamples=resamples)
    if as_json:
        _stored_json(cmp)
        return
    for side in ("a", "b"):
        r = cmp[side]
        out.print(f"{side.upper()}: [bold]{r['ref']}[/bold] ({escape(r['name'] or '')}) · model "
                  f"{escape(str(r['model'] or '—'))} · {escape(str(r['mode'] or '—'))} · {when(r['created_at'])}",
                  highlight=False, soft_wrap=True)
    out.print(f"B − A and B / A with 95% bootstrap intervals ({resamples:,} resamples of each run, seed {seed}); "
              "verdict: the interval of B − A leaves out 0 (faster / slower) or not (no clear difference)",
              highlight=False, soft_wrap=True)
    for w in cmp["warnings"]:
        out.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False, soft_wrap=True)
    colors = {"faster": "green", "slower": "red"}
    for p in cmp["points"]:
        va, vb = p["valid"]["a"], p["valid"]["b"]
        t = Table(title=f"{p['label']} (A {'valid' if va else 'NOT VALID' if va is False else '—'}, "
                        f"B {'valid' if vb else 'NOT VALID' if vb is False else '—'})", title_justify="left")
        for col in ("metric", "stat", "A", "B", "B − A [95% CI]", "B / A [95% CI]", "verdict"):
            t.add_column(col, justify="right" if col in ("A", "B", "B − A [95% CI]", "B / A [95% CI]") else "left")
        for m, e in p["metrics"].items():
            for k, (stat, d) in enumerate(e["stats"].items()):
                ratio = "—" if d["ratio"] is None else f"{d['ratio']:.3f}" + (
                    f" [{d['ratio_ci'][0]:.3f}–{d['ratio_ci'][1]:.3f}]" if d["ratio_ci"] else "")
                diff = _stored_signed(d["diff"], m) + (
                    f" [{_stored_signed(d['diff_ci'][0], m)}, {_stored_signed(d['diff_ci'][1], m)}]" if d["diff_ci"] else "")
                v = d["verdict"] or "—"
                t.add_row(f"{_STORED_NAMES.get(m, m)} ({_stored_unit(m)})" if k == 0 else "", stat,
                          _stored_num(d["a"], m), _stored_num(d["b"], m), diff, ratio,
                          f"[{colors[v]}]{v}[/{colors[v]}]" if v in colors else v)
        for name in THROUGHPUTS:
            d = p["throughput"][name]
            if d["a"] is None and d["b"] is None:
                continue
            t.add_row(name.replace("_", " "), "", _stored_rate(d["a"]), _stored_rate(d["b"]),
                      "—" if d["diff"] is None else ("+" if d["diff"] >= 0 else "−") + _stored_rate(abs(d["diff"])),
                      "—" if d["ratio"] is None else f"{d['ratio']:.3f}", "")
        out.print()
        out.print(t)
    um = cmp["unmatched"]
    if um["a"] or um["b"]:
        out.print(f"points in one run only: A: {', '.join(um['a']) or '—'}; B: {', '.join(um['b']) or '—'}",
                  highlight=False, soft_wrap=True)


@app.command("track")
def stored_track_cmd(
    track: str = typer.Argument(..., help="The track that the scheduled repeats share."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Only the newest this many repeats."),
    as_json: bool = _STORED_JSON_OPT,
    store: Optional[str] = _STORED_STORE_OPT,
) -> None:
    """Aggregate the scheduled repeats of one benchmark (a track): each metric's spread over time."""
    from rich.markup import escape
    from rich.table import Table

    from assay.bench.perf_compare import THROUGHPUTS, track_aggregate
    from assay.cli.common import open_store, out, when

    agg = track_aggregate(open_store(store), track, limit=limit)
    if as_json:
        _stored_json(agg)
        return
    models = sorted({str(r["model"]) for r in agg["runs"] if r.get("model")})
    out.print(f"track [bold]{escape(track)}[/bold]: {len(agg['runs'])} run(s) from {when(agg['first'])} to "
              f"{when(agg['last'])} · model {escape(', '.join(models) or '—')}", highlight=False, soft_wrap=True)
    for p in agg["points"]:
        t = Table(title=f"{p['label']}: {p['repeats']} repeat(s), {p['valid']} valid", title_justify="left")
        for col in ("metric", "stat", "mean [95% CI]", "std", "min", "max", "CV"):
            t.add_column(col, justify="left" if col in ("metric", "stat") else "right")
        for m, by_stat in p["metrics"].items():
            for k, (stat, a) in enumerate(by_stat.items()):
                t.add_row(f"{_STORED_NAMES.get(m, m)} ({_stored_unit(m)})" if k == 0 else "", stat,
                          _stored_num(a["mean"], m) + _stored_ci([a["ci95_low"], a["ci95_high"]], m),
                          _stored_num(a["std"], m), _stored_num(a["min"], m), _stored_num(a["max"], m),
                          "—" if a["cv"] is None else f"{100 * a['cv']:.1f}%")
        for name in THROUGHPUTS:
            a = p["throughput"][name]
            if not a["n"]:
                continue
            t.add_row(name.replace("_", " "), "", _stored_rate(a["mean"]), _stored_rate(a["std"]), _stored_rate(a["min"]),
                      _stored_rate(a["max"]), "—" if a["cv"] is None else f"{100 * a['cv']:.1f}%")
        out.print()
        out.print(t)
