"""``assay bench ...``: model benchmarks (serving performance, cost) and their stored runs."""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import orjson
import typer
from rich.table import Table

from assay.cli.common import STORE_OPT, err, open_store, out, pairs, when
from assay.errors import AssayError

app = typer.Typer(no_args_is_help=True, help="Benchmark models: serving performance and cost.")


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


@app.command("perf")
def perf(
    endpoint: str = typer.Option(..., "--endpoint", help="http(s)://HOST:PORT/v1 (OpenAI-compatible), "
                                 "azure:DEPLOYMENT or openai:MODEL."),
    model: Optional[str] = typer.Option(None, "--model", help="The served model (default: the first the server lists)."),
    concurrency: Optional[str] = typer.Option(None, "--concurrency", "-c",
                                              help="Closed-loop levels, e.g. 1,4,16,64 (default: 1, sequential)."),
    rate: Optional[str] = typer.Option(None, "--rate", help="Open-loop request rates per second, e.g. 2,5,10."),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape of open-loop arrivals (1 = Poisson)."),
    requests: Optional[int] = typer.Option(None, "--requests", "-n",
                                           help="Requests per point (default 50 unless --duration)."),
    duration: Optional[str] = typer.Option(None, "--duration", help="Length of each point, e.g. 60s, 5m."),
    input_tokens: int = typer.Option(800, "--input-tokens", help="Prompt length in the model's tokens."),
    output_tokens: int = typer.Option(200, "--output-tokens", help="Answer length asked (max_tokens)."),
    api: str = typer.Option("chat", "--api", help="chat or completions."),
    stream: bool = typer.Option(True, "--stream/--no-stream", help="Stream answers (TTFT needs it)."),
    warmup: int = typer.Option(2, "--warmup", help="Warm-up requests per point, left out."),
    shared_prefix: int = typer.Option(0, "--shared-prefix", help="Tokens every prompt shares at its start "
                                      "(0: none, so prefix caches cannot help)."),
    slo: Optional[str] = typer.Option(None, "--slo", help="Objectives for goodput, e.g. ttft=0.5,itl=0.05 (s)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds a request may take in all."),
    stall_timeout: float = typer.Option(60.0, "--stall-timeout", help="Seconds without a byte before a stream "
                                        "counts as stalled."),
    ignore_eos: bool = typer.Option(True, "--ignore-eos/--allow-eos", help="Ask self-hosted servers for "
                                    "exactly --output-tokens (ignore_eos, min_tokens)."),
    seed: int = typer.Option(0, "--seed", help="Seed of prompts and arrival times."),
    repeat: int = typer.Option(1, "--repeat", help="Run the whole benchmark this many times (a track)."),
    every: Optional[str] = typer.Option(None, "--every", help="Time between repeats' starts, e.g. 1h."),
    name: Optional[str] = typer.Option(None, "--name", help="A name for the run in the store."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Write summary.json, requests.jsonl and SVG "
                                           "charts here."),
    store: Optional[str] = STORE_OPT,
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Measure how fast an endpoint serves: TTFT, inter-token latency, TPOT, end-to-end latency,
    tokens per second, with intervals and a verdict on the measurement itself."""
    from assay.bench.perf import PerfConfig, run_perf

    if repeat < 1:
        raise AssayError("--repeat must be at least 1")
    gap = _durations(every, "--every") if every else None
    if repeat > 1 and gap is None:
        raise AssayError("--repeat needs --every (e.g. --every 1h)")
    cfg = PerfConfig(endpoint=endpoint, model=model, api=api, stream=stream,
                     concurrency=_numbers(concurrency, "--concurrency", int), rates=_numbers(rate, "--rate", float),
                     requests=requests, duration=_durations(duration, "--duration"), input_tokens=input_tokens,
                     output_tokens=output_tokens, warmup=warmup, shared_prefix=shared_prefix, burstiness=burstiness,
                     seed=seed, timeout=timeout, stall_timeout=stall_timeout, slo=_slo(slo), ignore_eos=ignore_eos,
                     name=name)
    cfg.check()
    st = open_store(store)
    track = secrets.token_hex(6) if repeat > 1 else None
    start = time.time()
    for k in range(repeat):
        if k:
            wait = start + k * (gap or 0) - time.time()
            if wait > 0:
                err.print(f"repeat {k + 1} of {repeat} in {wait:,.0f} s")
                time.sleep(wait)
        with _progress(quiet) as progress:
            run = asyncio.run(run_perf(cfg, progress=progress))
        if track:
            run.summary["track"] = track
            run.summary["repeat"] = {"index": k, "of": repeat, "every": gap}
        ref = st.add_perf_benchmark(run.summary, run.samples)
        if out_dir is not None:
            _write_out(out_dir if repeat == 1 else out_dir / f"repeat-{k + 1:03d}", run)
        if json_out:
            out.print_json(data=run.summary)
        else:
            render_perf(run.summary)
            err.print(f"stored as {ref}" + (f" (track {track})" if track else ""))


@contextmanager
def _progress(quiet: bool) -> Iterator[Callable[[str, int, int | None], None]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, disable=quiet or not err.is_terminal, transient=True) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int | None) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)
            if total is not None and done >= total:
                bar.remove_task(tasks.pop(stage))

        yield update


def _write_out(path: Path, run: Any) -> None:
    from assay.ui.bench_charts import perf_charts

    path.mkdir(parents=True, exist_ok=True)
    (path / "summary.json").write_bytes(orjson.dumps(run.summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    with (path / "requests.jsonl").open("wb") as f:
        for rec in run.requests:
            f.write(orjson.dumps(rec) + b"\n")
    for fname, svg in perf_charts(run.summary, run.samples).items():
        (path / fname).write_text(svg, encoding="utf-8")


def _usd(x: float | None, unknown: str = "unknown") -> str:
    """A price or a cost: every significant digit up to 6 decimals, never 0 for an unknown."""
    if x is None:
        return unknown
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.2f}"
    s = f"{x:.6f}".rstrip("0")
    whole, _, frac = s.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"


def _tokens(n: float | None) -> str:
    if n is None:
        return "unknown"
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.1f}"


@app.command("cost")
def cost_cmd(
    prices: Optional[Path] = typer.Option(None, "--prices", metavar="FILE",
                                          help="Your price table: .yaml, .json or .csv with columns model, deployment, "
                                               "input, output (USD per 1M tokens), currency, source. Default: "
                                               "$ASSAY_PRICES, else the table shipped with assay."),
    model: List[str] = typer.Option([], "--model", "-m", help="Only this model (repeatable)."),
    runs: bool = typer.Option(False, "--runs", help="List the stored evaluation and benchmark runs with their "
                                                    "token usage and cost instead of the price table."),
    limit: int = typer.Option(50, "--limit", help="With --runs: at most this many runs of each kind, newest first."),
    save: Optional[Path] = typer.Option(None, "--save", metavar="FILE",
                                        help="Write the price table in force to FILE (.yaml, .json or .csv) to edit."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    store: Optional[str] = STORE_OPT,
) -> None:
    """Price table, estimated cost (3:1 input:output blend per 1M tokens), cost index, and what stored runs cost."""
    from assay.bench.cost import price_rows, stored_costs
    from assay.models.price_table import active_table, save_table

    table = active_table(prices)
    if save is not None:
        written = save_table(table, save)
        err.print(f"wrote {len(table.rows)} prices to {written}", highlight=False)
    rows = price_rows(table, model)
    costs = None
    if runs:
        st = open_store(store)
        costs = stored_costs(st, table, models=model, limit=limit)
    if as_json:
        doc: dict[str, Any] = {"table": {"origin": table.origin, "version": table.version, "as_of": table.as_of,
                                         "label": table.label, "currency": "USD", "unit": "USD per 1M tokens",
                                         "estimated_cost": "(3 * input + output) / 4"},
                               "prices": rows}
        if costs is not None:
            doc["runs"] = costs
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    if costs is not None:
        _print_costs(costs, table.label, st.display_url)
        return
    t = Table(title=f"{table.label}, USD per 1M tokens", title_justify="left")
    for col, right in (("rank", True), ("model", False), ("deployment", False), ("input", True), ("output", True),
                       ("estimated cost", True)):
        t.add_column(col, justify="right" if right else "left", overflow="fold")
    for r in rows:
        t.add_row("—" if r["rank"] is None else str(r["rank"]), r["model"], r["deployment"] or "—",
                  _usd(r["input"]), _usd(r["output"]), _usd(r["estimated_cost_per_1m"]))
    out.print(t)
    out.print("estimated cost = (3 × input + output) / 4 per 1M tokens = the cost index; rank 1 is the cheapest",
              highlight=False)


def _print_costs(costs: list[dict[str, Any]], label: str, where: str) -> None:
    if not costs:
        out.print(f"no runs in {where}")
        return
    t = Table(title=f"runs in {where}, priced with {label} (USD)", title_justify="left")
    for col, right in (("kind", False), ("id", False), ("name", False), ("started", False), ("model", False),
                       ("input tokens", True), ("output tokens", True), ("cost", True), ("priced by", False)):
        t.add_column(col, justify="right" if right else "left", overflow="fold")
    for c in costs:
        t.add_row(c["kind"], c["id"] or "—", c["name"] or "", when(c["created_at"]), c["model"] or "—",
                  _tokens(c["input_tokens"]), _tokens(c["output_tokens"]), _usd(c["cost_usd"]), c["price_source"])
    out.print(t)
    known = [c["cost_usd"] for c in costs if c["cost_usd"] is not None]
    unknown = len(costs) - len(known)
    note = f" ({unknown} of unknown cost not included)" if unknown else ""
    out.print(f"total: {_usd(sum(known)) if known else 'unknown'} USD over {len(known)} runs{note}")
