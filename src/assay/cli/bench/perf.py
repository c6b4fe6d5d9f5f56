"""``assay bench perf``: how fast an endpoint serves, and how its stored runs are shown, listed,
compared and tracked (``bench show`` / ``list`` / ``compare`` hand perf runs here; ``bench track``
is perf's own)."""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import typer
from rich.table import Table

from assay.cli.common import (
    STORE_OPT,
    err,
    fmt,
    open_store,
    out,
    pairs,
    print_json,
    print_sides,
    safe,
    stage_progress,
    store_or_off,
    text_arg,
    when,
)
from assay.errors import AssayError, RunIncomplete

if TYPE_CHECKING:
    from assay.bench.perf.summary import PerfPoint, PerfSummary


def _durations(text: str | None, what: str) -> float | None:
    """``60``, ``60s``, ``5m``, ``1h`` -> seconds."""
    if text is None:
        return None
    t = text.strip().lower()
    scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    for suffix in ("ms", "s", "m", "h", "d"):
        if t.endswith(suffix):
            t, mult = t[:-len(suffix)], scale[suffix]
            break
    else:
        mult = 1.0
    try:
        v = float(t) * mult
    except ValueError:
        raise AssayError(f"{what}: expected a duration such as 60s, 5m or 1h, got {text!r}") from None
    if not v > 0:
        raise AssayError(f"{what}: must be positive, got {text!r}")
    return v


def _numbers(text: str | None, what: str, kind: type) -> list:
    if not text:
        return []
    try:
        vals = [kind(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise AssayError(f"{what}: expected comma-separated numbers, got {text!r}") from None
    return vals


def _slo(text: str | None) -> dict[str, float] | None:
    if not text:
        return None
    got: dict[str, float] = {}
    for k, v in pairs([p for p in text.split(",") if p], "--slo").items():
        if k not in ("ttft", "itl", "tpot", "e2e"):
            raise AssayError(f"--slo: unknown objective {k!r}; use ttft, itl, tpot, e2e (seconds)")
        got[k] = _durations(v, f"--slo {k}") or 0.0
    return got


def perf_cmd(
    endpoint: str = typer.Option(..., "--endpoint", help="http(s)://HOST:PORT/v1 (OpenAI-compatible), "
                                 "azure:DEPLOYMENT or openai:MODEL."),
    model: str | None = typer.Option(None, "--model", help="The served model (default: the first the server lists)."),
    concurrency: str | None = typer.Option(None, "--concurrency", "-c",
                                              help="Closed-loop levels, e.g. 1,4,16,64 (default: 1, sequential)."),
    rate: str | None = typer.Option(None, "--rate", help="Open-loop request rates per second, e.g. 2,5,10; "
                                       "'sweep' (or sweep:N): one at a time, flat out, then 5 (N) rates between."),
    sweep_concurrency: int = typer.Option(32, "--sweep-concurrency", help="The sweep's flat-out concurrency."),
    stop_at_saturation: bool = typer.Option(False, "--stop-at-saturation", help="With --rate sweep: rates growing "
                                            "from the sequential throughput (x1.5 each), stopped at the knee "
                                            "(throughput +<10% while median latency +>25%)."),
    max_error_rate: float | None = typer.Option(None, "--max-error-rate", help="Stop once a point fails more "
                                                  "than this share of its requests (e.g. 0.05)."),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape of open-loop arrivals (1 = Poisson)."),
    requests: int | None = typer.Option(None, "--requests", "-n",
                                           help="Requests per point (default 50 unless --duration)."),
    duration: str | None = typer.Option(None, "--duration", help="Length of each point, e.g. 60s, 5m."),
    input_tokens: int = typer.Option(800, "--input-tokens", help="Prompt length in the model's tokens."),
    output_tokens: int = typer.Option(200, "--output-tokens", help="Answer length asked (max_tokens)."),
    api: str = typer.Option("chat", "--api", help="chat or completions."),
    stream: bool = typer.Option(True, "--stream/--no-stream", help="Stream answers (TTFT needs it)."),
    warmup: int = typer.Option(2, "--warmup", help="Warm-up requests per point, left out."),
    shared_prefix: int = typer.Option(0, "--shared-prefix", help="Tokens every prompt shares at its start "
                                      "(0: none, so prefix caches cannot help)."),
    prefix_groups: int = typer.Option(0, "--prefix-groups", help="With --shared-prefix: that many different shared "
                                      "prefixes; each point is also run with none shared, TTFT side by side, and the "
                                      "prefix-cache hit rate measured (--server-metrics) or inferred."),
    lora: str | None = typer.Option(None, "--lora", help="LoRA adapters, e.g. a,b: each request names one as its "
                                    "model; figures per adapter."),
    lora_mix: str = typer.Option("uniform", "--lora-mix", help="How requests are spread over --lora: uniform, "
                                 "round-robin, or weights such as 3,1."),
    replay: str | None = typer.Option(None, "--replay", help="Replay a trace's arrival times and lengths: "
                                      "FILE (Mooncake or plain JSONL) or otlp:FILE (an app's OpenTelemetry spans)."),
    speed: float = typer.Option(1.0, "--speed", help="Replay speed: the trace's arrival times x 1/speed."),
    sessions: int = typer.Option(0, "--sessions", help="Multi-turn sessions, each turn carrying the earlier ones: "
                                 "run at once (closed loop), or started at --rate per second (open loop)."),
    turns: int = typer.Option(1, "--turns", help="Turns per session (--sessions)."),
    think_time: str | None = typer.Option(None, "--think-time", help="Time between a turn's answer and the "
                                             "session's next turn, e.g. 5s (--sessions; default 0)."),
    server_metrics: str | None = typer.Option(None, "--server-metrics", help="The server's Prometheus page "
                                              "(e.g. http://HOST:PORT/metrics), scraped during the run and "
                                              "summarised per point (vLLM, SGLang, llama.cpp names)."),
    metrics_interval: str = typer.Option("1s", "--metrics-interval", help="Time between scrapes of --server-metrics."),
    slo: str | None = typer.Option(None, "--slo", help="Objectives for goodput, e.g. ttft=0.5,itl=0.05 (s)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds a request may take in all."),
    max_time: str | None = typer.Option(None, "--max-time", help="Longest a whole run may take, e.g. 30m "
                                           "(default 1h, more when --duration asks it)."),
    stall_timeout: float = typer.Option(60.0, "--stall-timeout", help="Seconds without a byte before a stream "
                                        "counts as stalled."),
    ignore_eos: bool = typer.Option(True, "--ignore-eos/--allow-eos", help="Ask self-hosted servers for "
                                    "exactly --output-tokens (ignore_eos, min_tokens)."),
    seed: int = typer.Option(0, "--seed", help="Seed of prompts and arrival times."),
    repeat: int = typer.Option(1, "--repeat", help="Run the whole benchmark this many times (a track)."),
    every: str | None = typer.Option(None, "--every", help="Time between repeats' starts, e.g. 1h."),
    name: str | None = typer.Option(None, "--name", help="A name for the run in the store; runs of one name "
                                       "make a track (bench track NAME)."),
    track_name: str | None = typer.Option(None, "--track", help="Add the run(s) to this track, new or "
                                             "existing (default with --repeat: --name, else a new id)."),
    model_name: str | None = typer.Option(None, "--model-name", help="The model's name on the leaderboard "
                                             "(default: the model the spec names, e.g. NAME of "
                                             "http://HOST/v1#NAME), so every kind's results share one row."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write summary.json, requests.jsonl and SVG "
                                           "charts here."),
    store: str | None = STORE_OPT,
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Measure how fast an endpoint serves, with intervals and a verdict on the measurement.

    TTFT, inter-token latency, TPOT, end-to-end latency and tokens per second at each load point,
    with intervals, failures, and a verdict on the measurement itself."""
    from assay.bench.perf.run import PerfConfig

    if repeat < 1:
        raise AssayError("--repeat must be at least 1")
    gap = _durations(every, "--every") if every else None
    if repeat > 1 and gap is None:
        raise AssayError("--repeat needs --every (e.g. --every 1h)")
    sweep = 0
    if rate and rate.strip().lower().startswith("sweep"):
        _, _, k = rate.strip().partition(":")
        from assay.bench.perf.saturation import MAX_RATES

        sweep = (_numbers(k, "--rate sweep:N", int) or [MAX_RATES if stop_at_saturation else 5])[0]
        rate = None
    cfg = PerfConfig(endpoint=endpoint, model=model, api=api, stream=stream, sweep=sweep,
                     sweep_concurrency=sweep_concurrency,
                     concurrency=_numbers(concurrency, "--concurrency", int), rates=_numbers(rate, "--rate", float),
                     requests=requests, duration=_durations(duration, "--duration"), input_tokens=input_tokens,
                     output_tokens=output_tokens, warmup=warmup, shared_prefix=shared_prefix, burstiness=burstiness,
                     seed=seed, timeout=timeout, stall_timeout=stall_timeout, slo=_slo(slo), ignore_eos=ignore_eos,
                     name=text_arg(name), max_time=_durations(max_time, "--max-time"), replay=text_arg(replay),
                     speed=speed, stop_at_saturation=stop_at_saturation, max_error_rate=max_error_rate,
                     sessions=sessions, lora=[x for x in (lora or "").replace(" ", "").split(",") if x],
                     lora_mix=lora_mix, prefix_groups=prefix_groups, server_metrics=text_arg(server_metrics),
                     metrics_interval=_durations(metrics_interval, "--metrics-interval") or 1.0, turns=turns,
                     think_time=_durations(think_time, "--think-time") if think_time not in (None, "0") else 0.0)
    cfg.check()
    st = store_or_off(store)
    track = text_arg(track_name) or ((cfg.name or secrets.token_hex(6)) if repeat > 1 else None)
    problems = _repeats(cfg, st, repeat=repeat, gap=gap, track=track, model_name=text_arg(model_name),
                        out_dir=out_dir, json_out=json_out, quiet=quiet)
    if problems:
        raise RunIncomplete(problems[0] if len(problems) == 1 else
                            f"{len(problems)} of {repeat} repeats did not complete: {problems[-1]}")


def _repeats(cfg: Any, st: Any, *, repeat: int, gap: float | None, track: str | None, model_name: str | None,
             out_dir: Path | None, json_out: bool, quiet: bool) -> list[str]:
    """Run the benchmark ``repeat`` times; store (where ``st``), print and write each. A run in which no
    request completed is not stored (it measured nothing) and one that hit its time limit is stored
    with what it measured: each gives a line of the list returned (exit 3)."""
    from assay.bench.kinds import store_benchmark
    from assay.bench.perf.run import no_completed_message, run_perf

    problems: list[str] = []
    start = time.time()
    for k in range(repeat):
        if k:
            wait = start + k * (gap or 0) - time.time()
            if wait > 0:
                err.print(f"repeat {k + 1} of {repeat} in {wait:,.0f} s")
                time.sleep(wait)
        with stage_progress(quiet) as progress:
            run = asyncio.run(run_perf(cfg, progress=progress))
        if model_name:
            run.summary["model_name"] = model_name     # the stored model (bench.kinds.given_name)
        if track:
            run.summary["track"] = track
            run.summary["repeat"] = {"index": k, "of": repeat, "every": gap}
        if out_dir is not None:
            _write_out(out_dir if repeat == 1 else out_dir / f"repeat-{k + 1:03d}", run)
        dead = no_completed_message(run.summary)
        if dead:
            problems.append(f"{dead}; not stored" + (f" (the requests are in {out_dir})" if out_dir else "")
                            + (f" (repeat {k + 1} of {repeat})" if repeat > 1 else ""))
            if k < repeat - 1:
                err.print(f"[red]{safe(problems[-1])}[/red]", highlight=False)
            continue
        ref = store_benchmark(st, "perf", run.summary, run.samples) if st is not None else None
        if json_out:
            print_json(run.summary)
        else:
            render_perf(run.summary)
            where = f"stored as {safe(ref)}" if ref else "not stored (the store is off)"
            err.print(where + (f" (track {safe(track)})" if track and ref else ""), highlight=False)
        stopped = run.summary.get("stopped")
        if stopped:
            problems.append(str(stopped.get("message")) + ("; what was measured is stored" if ref else ""))
    return problems


def _write_out(path: Path, run: Any) -> None:
    from assay.ui.bench_charts import perf_charts

    path.mkdir(parents=True, exist_ok=True)
    (path / "summary.json").write_bytes(orjson.dumps(run.summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    with (path / "requests.jsonl").open("wb") as f:
        for rec in run.requests:
            f.write(orjson.dumps(rec) + b"\n")
    for fname, svg in perf_charts(run.summary, run.samples).items():
        (path / fname).write_text(svg, encoding="utf-8")
    from assay.ui.perf_timeline import timeline

    drawn = timeline(run.summary, run.requests) if run.summary.get("telemetry") else None
    if drawn:
        (path / "timeline.svg").write_text(drawn, encoding="utf-8")


# -- stored perf runs: list, show, compare, track (docs/bench.md, "Keeping and comparing runs") ----
_STORED_JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")


def _latency(metric: str) -> bool:
    from assay.bench.perf.figures import unit

    return unit(metric) == "s"


def _stored_name(metric: str) -> str:
    from assay.bench.perf.figures import label

    return label(metric)


def _stored_unit(metric: str) -> str:
    return "ms" if _latency(metric) else "tok/s"


def _stored_num(v: Any, metric: str) -> str:
    """A value of ``metric`` for a table: latencies in ms, token rates in tokens per second."""
    if v is None:
        return "—"
    v = float(v) * (1000 if _latency(metric) else 1)
    return f"{v:,.1f}" if abs(v) < 10_000 else f"{v:,.0f}"


def _stored_ci(ci: Any, metric: str, too_few: bool = False) -> str:
    """`` [low–high]``; `` (too few)`` where the values were too few for an interval (none stored, or
    one stored by an older assay from fewer values than an interval needs)."""
    if too_few:
        return " (too few)"
    if not ci or len(ci) != 2 or ci[0] is None:
        return ""
    return f" [{_stored_num(ci[0], metric)}–{_stored_num(ci[1], metric)}]"


def _too_few(d: Any, stat: str) -> bool:
    """Whether ``stat`` of the distribution ``d`` stands on too few values for an interval."""
    from assay.bench.perf.measure import MIN_INTERVAL_N, min_n_for_percentile

    if not isinstance(d.n, int):
        return d.interval(stat) is None and bool(d.ci)
    need = MIN_INTERVAL_N if stat == "mean" else min_n_for_percentile(float(stat[1:]))
    return d.n < need or (d.interval(stat) is None and stat in d.ci)


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


def _stored_load(p: PerfPoint) -> str:
    from assay.bench.perf.compare import point_label

    return point_label(p)


def _stored_point_table(p: PerfPoint) -> Any:
    from assay.bench.perf.figures import SHOWN

    req, val = p.requests, p.validity
    failures = {k: v for k, v in req.failures.items() if v}
    verdict = "[green]valid[/green]" if val.valid else ("[red]NOT VALID[/red]" if val.valid is False else "validity unknown")
    dur = p.duration_s
    title = (f"{safe(_stored_load(p))}: {safe('—' if req.ok is None else req.ok)} ok, {safe(req.failed)} failed"
             + (f" ({safe(', '.join(f'{k}: {v}' for k, v in failures.items()))})" if failures else "")
             + (f" in {dur:.1f} s" if isinstance(dur, (int, float)) else "") + f" — {verdict}")
    t = Table(title=title, title_justify="left")
    for col in ("metric", "n", "mean [95% CI]", "SE", "p50 [95% CI]", "p90", "p95", "p99 [95% CI]"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for m in SHOWN:
        d = p.metrics.get(m)
        if d is None or d.is_empty():
            continue
        t.add_row(f"{_stored_name(m)} ({_stored_unit(m)})", safe('—' if d.n is None else d.n),
                  _stored_num(d.mean, m) + _stored_ci(d.interval("mean"), m, _too_few(d, "mean")),
                  _stored_num(d.se, m), _stored_num(d.p50, m) + _stored_ci(d.interval("p50"), m, _too_few(d, "p50")),
                  _stored_num(d.p90, m), _stored_num(d.p95, m),
                  _stored_num(d.p99, m) + _stored_ci(d.interval("p99"), m, _too_few(d, "p99")))
    return t


def _stored_point_notes(p: PerfPoint) -> list[str]:
    lines = []
    tp = [(p.request_throughput, "req/s"), (p.output_throughput, "output tok/s"),
          (p.total_token_throughput, "total tok/s")]
    lines.append("throughput: " + " · ".join(f"{_stored_rate(v)} {u}" for v, u in tp if isinstance(v, (int, float))))
    li, ti = p.latency_index, p.throughput_index
    lines.append(f"latency index {fmt(li)} s (mean TTFT) · throughput index {fmt(ti, 1)} tok/s (mean GTPS)")
    slo = p.slo
    if slo:
        goals = ", ".join(f"{k} ≤ {safe(slo[k])} s" for k in ("ttft", "itl") if slo.get(k) is not None)
        att = slo.get("attainment")
        lines.append(f"SLO {goals}: attainment {'—' if att is None else f'{100 * att:.1f}%'}, "
                     f"goodput {fmt(slo.get('goodput'), 1)} req/s")
    tok = p.tokens
    if not tok.is_empty():
        server_in = (f", {fmt(tok.input_server_mean, 1)} by the server's count (chat template included)"
                     if isinstance(tok.input_server_mean, (int, float)) and tok.input_server_mean != tok.input_mean
                     else "")
        lines.append(f"tokens: input mean {fmt(tok.input_mean, 1)}"
                     + (f" by {safe(tok.input_from)}{server_in}" if tok.input_from else "")
                     + f"; output mean {fmt(tok.output_mean, 1)} "
                     f"(counts from {safe(tok.usage_from or '—')}), {tok.disagreements} "
                     "request(s) whose output counts disagree")
        if tok.usage_rejected:
            lines.append(f"[yellow]server usage left out[/yellow] for {tok.usage_rejected} request(s), counted by "
                         f"the tokenizer instead: {safe('; '.join(tok.usage_rejected_why))}")
    if p.stopped:
        lines.append(f"[red]stopped:[/red] {safe(p.stopped)}")
    val = p.validity
    for r in val.reasons:
        lines.append(f"[red]not valid:[/red] {safe(r)}")
    for r in val.notes:
        lines.append(f"[yellow]note:[/yellow] {safe(r)}")
    lag = [(val.schedule_lag_ms, "schedule lag"), (val.loop_lag_ms, "event-loop lag")]
    inst = [f"{name} p99 {d.p99:.1f} ms (max {d.max:.1f})" for d, name in lag
            if d is not None and isinstance(d.p99, (int, float)) and isinstance(d.max, (int, float))]
    if isinstance(val.client_cpu_s, (int, float)):
        per = val.cpu_per_token_us
        inst.append(f"client CPU {val.client_cpu_s:.1f} s" + (f" ({per:.1f} µs/token)" if isinstance(per, (int, float)) else ""))
    if inst:
        lines.append("instrument: " + ", ".join(inst))
    return lines + _workload_notes(p)


def _ms(d: Any, stat: str = "p50") -> str:
    v = d.get(stat) if isinstance(d, dict) else None
    return f"{v * 1000:,.1f}" if isinstance(v, (int, float)) else "—"


def _workload_notes(p: PerfPoint) -> list[str]:
    """The lines of a point's production-shaped workload blocks (replay, sessions, prefix, server, lora)."""
    extra = p.model_extra or {}
    lines = []
    rp = extra.get("replay")
    if isinstance(rp, dict):
        lag = rp.get("schedule_lag_ms") or {}
        lines.append(f"replay: {rp.get('requests')} requests at x{safe(rp.get('speed'))}; schedule lag p50 "
                     f"{fmt(lag.get('p50'), 1)} / p99 {fmt(lag.get('p99'), 1)} / max {fmt(lag.get('max'), 1)} ms; "
                     f"{rp.get('input_exact')} prompt(s) exactly to length, {rp.get('output_as_traced')} answer(s) "
                     "at the traced length")
    ss = extra.get("sessions")
    if isinstance(ss, dict):
        turns = " · ".join(f"turn {t.get('turn')}: {fmt(t.get('context_tokens_mean'), 0)} tok → TTFT p50 "
                           f"{_ms(t.get('ttft'))} ms" for t in ss.get("per_turn") or [])
        slope = ss.get("ttft_vs_context") or {}
        lines.append(f"sessions ({safe(ss.get('loop'))} loop): {safe(turns)}"
                     + (f"; TTFT +{fmt(slope.get('ms_per_1k_tokens'), 1)} ms per 1k tokens of context" if slope else ""))
    px = extra.get("prefix")
    if isinstance(px, dict):
        t = px.get("ttft") or {}
        lines.append(f"prefix cache: hit rate {fmt(px.get('hit_rate'), 3)} ({safe(px.get('hit_rate_source'))}); "
                     f"TTFT p50 {_ms(t.get('with'))} ms with the shared prefix, {_ms(t.get('without'))} ms without")
    sv = extra.get("server")
    if isinstance(sv, dict):
        got = [f"{k.replace('_', ' ')} mean {fmt(sv[k].get('mean'), 2)} (max {fmt(sv[k].get('max'), 2)})"
               for k in ("running", "queued", "kv_cache_usage") if isinstance(sv.get(k), dict)]
        got += [f"{k.replace('_', ' ')} {fmt(sv[k], 3)}" for k in ("prefix_cache_hit_rate_measured",
                                                                  "spec_acceptance_rate", "spec_mean_acceptance_length",
                                                                  "tokens_per_step") if sv.get(k) is not None]
        lines.append("server: " + (safe(" · ".join(got)) or "no known counters"))
    lo = extra.get("lora")
    if isinstance(lo, dict):
        lines.append("adapters: " + safe(" · ".join(f"{k}: {v.get('ok')}/{v.get('sent')} ok, TTFT p50 {_ms(v.get('ttft'))} ms"
                                                   for k, v in lo.items() if isinstance(v, dict))))
    return lines


def perf_list_table(runs: list[dict[str, Any]], where: str) -> Table:
    """The stored perf runs: mode, points, validity and track."""
    from assay.bench.perf import KIND
    from assay.bench.perf.compare import describe_points, validity_text

    table = Table(title=f"{KIND.title} runs in {safe(where)}", title_justify="left")
    for col in KIND.list_columns:
        table.add_column(col, overflow="fold")
    for r in runs:
        table.add_row(safe(r["ref"] or r["id"]), safe(r["name"] or ""), safe(r["model"] or "—"), safe(r["task"] or "—"),
                      describe_points(r["metrics"]), when(r["created_at"]), validity_text(r["metrics"]),
                      safe(r["track"] or ""))
    return table


def show_perf(rec: dict[str, Any], as_json: bool) -> None:
    s = rec.get("details") or {}
    if as_json:
        print_json({**{k: rec.get(k) for k in ("ref", "id", "name", "model", "task", "created_at", "track", "run_id")},
                      "summary": s})
        return
    render_perf(s, rec)


def render_perf(s: PerfSummary | dict[str, Any], rec: dict[str, Any] | None = None) -> None:
    """A perf run's summary as tables (``rec``: its store record; a fresh run's summary otherwise)."""
    from assay.bench.perf.summary import PerfSummary

    s = PerfSummary.load(s)
    rec = rec or {"ref": s.id, "name": s.name, "model": s.model, "created_at": s.created_at, "track": s.track}
    st_ = s.settings
    named = f" ({safe(rec['name'])})" if rec.get("name") else ""
    head = (f"perf run [bold]{safe(rec['ref'])}[/bold]{named} · model {safe(rec['model'] or '—')} "
            f"· {safe(s.endpoint or '—')} ({safe(s.api or '—')}"
            f"{', streaming' if s.stream else ''})")
    facts = [f"mode {safe(s.mode or '—')}", f"{len(s.points)} point(s)", when(rec["created_at"]),
             f"input {safe(_or_dash(st_.input_tokens))} / output {safe(_or_dash(st_.output_tokens))} tokens",
             f"clock {safe(s.clock or '—')}",
             f"tokenizer {safe(str(s.tokenizer.source or '—'))}"]
    if rec.get("track"):
        rep = s.repeat
        facts.append(f"track {safe(rec['track'])}" + (f" (repeat {rep.index + 1} of {rep.of})"
                                                        if rep is not None and isinstance(rep.index, int) and rep.of
                                                        else ""))
    if s.cost is not None and isinstance(s.cost.usd, (int, float)):
        facts.append(f"cost ${s.cost.usd:.4f}")
    out.print(head, highlight=False, soft_wrap=True)
    out.print("  " + " · ".join(facts), highlight=False, soft_wrap=True)
    for note in s.notes:
        out.print(f"  [yellow]note:[/yellow] {safe(note)}", highlight=False, soft_wrap=True)
    for p in s.points:
        out.print()
        out.print(_stored_point_table(p))
        for line in _stored_point_notes(p):
            out.print("  " + line, highlight=False, soft_wrap=True)


def _or_dash(v: Any) -> Any:
    return "—" if v is None else v


def compare_perf_cmd(ref_a: str, ref_b: str, *, seed: int, resamples: int, as_json: bool,
                     store: str | None) -> None:
    """Two perf runs point by point: B − A, B / A, 95% bootstrap intervals, verdicts."""
    from assay.bench.perf.compare import compare_perf

    cmp = compare_perf(open_store(store), ref_a, ref_b, seed=seed, resamples=resamples)
    if not as_json:
        render_comparison(cmp, seed=seed, resamples=resamples)
    else:
        print_json(cmp)


def render_comparison(cmp: dict[str, Any], *, seed: int, resamples: int) -> None:
    """Two perf runs' comparison (:func:`assay.bench.perf.compare.compare_perf`) as tables."""
    from assay.bench.perf.compare import THROUGHPUTS

    print_sides(cmp, mode=True)
    out.print(f"B − A and B / A with 95% bootstrap intervals ({resamples:,} resamples of each run, seed {seed}); "
              "verdict: the interval of B − A leaves out 0 (faster / slower) or not (no clear difference)",
              highlight=False, soft_wrap=True)
    for w in cmp["warnings"]:
        out.print(f"[yellow]warning:[/yellow] {safe(w)}", highlight=False, soft_wrap=True)
    colors = {"faster": "green", "slower": "red"}
    for p in cmp["points"]:
        va, vb = p["valid"]["a"], p["valid"]["b"]
        t = Table(title=f"{safe(p['label'])} (A {'valid' if va else 'NOT VALID' if va is False else '—'}, "
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
                t.add_row(f"{safe(_stored_name(m))} ({_stored_unit(m)})" if k == 0 else "", safe(stat),
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
        out.print(f"points in one run only: A: {safe(', '.join(um['a']) or '—')}; B: {safe(', '.join(um['b']) or '—')}",
                  highlight=False, soft_wrap=True)


def track_cmd(
    track: str = typer.Argument(..., help="The track the repeats share, or the name of the runs."),
    limit: int | None = typer.Option(None, "--limit", help="Only the newest this many repeats."),
    as_json: bool = _STORED_JSON_OPT,
    store: str | None = STORE_OPT,
) -> None:
    """Aggregate the repeats of one benchmark (a track): each metric's spread over time.

    A track is the runs of one --track, one --repeat, or one --name."""
    from assay.bench.perf.compare import THROUGHPUTS, track_aggregate

    track = text_arg(track)
    agg = track_aggregate(open_store(store), track, limit=limit)
    if as_json:
        print_json(agg)
        return
    from assay.bench.perf.measure import MIN_INTERVAL_N

    models = sorted({str(r["model"]) for r in agg["runs"] if r.get("model")})
    out.print(f"track [bold]{safe(track)}[/bold]: {len(agg['runs'])} run(s) from {when(agg['first'])} to "
              f"{when(agg['last'])} · model {safe(', '.join(models) or '—')}", highlight=False, soft_wrap=True)
    out.print(f"across repeats: mean, its standard error and 95% Student's t interval (too few under "
              f"{MIN_INTERVAL_N} repeats)", highlight=False, soft_wrap=True)
    for w in agg.get("warnings") or []:
        out.print(f"[yellow]warning:[/yellow] {safe(w)}", highlight=False, soft_wrap=True)
    for p in agg["points"]:
        t = Table(title=f"{safe(p['label'])}: {p['repeats']} repeat(s), {p['valid']} valid", title_justify="left")
        for col in ("metric", "stat", "mean [95% CI]", "SE", "std", "min", "max", "CV"):
            t.add_column(col, justify="left" if col in ("metric", "stat") else "right")
        for m, by_stat in p["metrics"].items():
            for k, (stat, a) in enumerate(by_stat.items()):
                t.add_row(f"{safe(_stored_name(m))} ({_stored_unit(m)})" if k == 0 else "", safe(stat),
                          _stored_num(a["mean"], m) + _stored_ci([a["ci95_low"], a["ci95_high"]], m,
                                                                 bool(a["n"]) and a["ci95_low"] is None),
                          _stored_num(a.get("se"), m), _stored_num(a["std"], m), _stored_num(a["min"], m),
                          _stored_num(a["max"], m), "—" if a["cv"] is None else f"{100 * a['cv']:.1f}%")
        for name in THROUGHPUTS:
            a = p["throughput"][name]
            if not a["n"]:
                continue
            t.add_row(name.replace("_", " "), "", _stored_rate(a["mean"]), _stored_rate(a.get("se")),
                      _stored_rate(a["std"]), _stored_rate(a["min"]), _stored_rate(a["max"]),
                      "—" if a["cv"] is None else f"{100 * a['cv']:.1f}%")
        out.print()
        out.print(t)
