"""``assay monitor``: receive a live app's OpenTelemetry traces, score a sample, alert on drift.

``assay monitor serve`` runs the OTLP/HTTP receiver (:mod:`assay.monitor.receiver`) and, with
``--config monitor.yaml``, the online scoring beside it (:mod:`assay.monitor.scoring`, a thread);
``assay monitor status`` says what the store holds; ``assay monitor check`` prints the windows and
alerts and exits 1 while a rule fires (:mod:`assay.monitor.alerts`); ``assay monitor backfill``
scores the stored traces of a time window (docs/monitor.md).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import typer

from assay.cli.common import STORE_OPT, err, open_store, out, print_json, safe
from assay.errors import AssayError

app = typer.Typer(no_args_is_help=True,
                  help="Watch a live app: receive its OpenTelemetry traces and keep them in the store.")

TOKEN_ENV = ("ASSAY_MONITOR_TOKEN", "ASSAY_UI_TOKEN")


def _need_monitor_extra(grpc: bool = False) -> None:
    import importlib

    try:
        for module in ("starlette", "uvicorn", *(("grpc",) if grpc else ())):
            importlib.import_module(module)
    except ImportError as exc:
        raise AssayError(f"the receiver needs the monitor extra ({exc.name} is missing): "
                         "pip install 'assay[monitor]'") from None
    try:
        importlib.import_module("opentelemetry.proto")
    except ImportError:
        err.print("[yellow]opentelemetry-proto is not installed: only OTLP/JSON bodies can be read "
                  "(pip install 'assay[monitor]')[/yellow]")


@app.command("serve")
def serve_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind. Anything but loopback needs --token."),
    port: int = typer.Option(4318, "--port", min=0, max=65535, help="Port to listen on (0: any free port)."),
    store: str | None = STORE_OPT,
    token: str | None = typer.Option(None, "--token", envvar=list(TOKEN_ENV),
                                     help="Require this token on every request ('auto': make one and print it)."),
    quiet_period: float = typer.Option(30.0, "--quiet-period", min=0.001,
                                       help="Seconds without a span after which a trace without its root is complete."),
    max_pending: int = typer.Option(100_000, "--max-pending", min=1,
                                    help="Spans waiting to be stored beyond which a batch is answered 429."),
    max_body: int = typer.Option(20 * 1024 * 1024, "--max-body", min=1024,
                                 help="Largest request body in bytes, compressed or not (beyond it: 413)."),
    config: str | None = typer.Option(None, "--config", help="monitor.yaml: score a sample of the traces online "
                                                             "and alert (docs/monitor.md)."),
    grpc_port: int | None = typer.Option(None, "--grpc-port", min=0, max=65535,
                                         help="Also receive OTLP/gRPC on this port (4317 is the usual; "
                                              "0: any free port). Off unless given."),
) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces) and keep their spans in the store."""
    _need_monitor_extra(grpc=grpc_port is not None)
    import uvicorn

    from assay.cli.ui import check_bind, listen_on
    from assay.monitor.ingest import Ingest
    from assay.monitor.receiver import PATH, create_app
    from assay.store.spans import SpanLog

    cfg = _config(config) if config else None
    tok = check_bind(host, token, what="the receiver", env=TOKEN_ENV[0])
    st = open_store(store)
    ingest = Ingest(SpanLog(st), max_pending=max_pending, quiet_period=quiet_period)
    receiver = create_app(ingest, token=tok, max_body=max_body)
    sock = listen_on(host, port, other="another `assay monitor serve` or an OpenTelemetry Collector")
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    out.print(f"assay monitor: receiving OTLP/HTTP traces at http://{safe(shown)}:{port}{PATH} into "
              f"{safe(st.display_url)}", highlight=False, soft_wrap=True)
    if tok:
        out.print(f"token: {safe(tok)} (exporters: OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer {safe(tok)}')",
                  highlight=False, soft_wrap=True)
    server = uvicorn.Config(receiver, host=host, port=port, log_level="warning", server_header=False,
                            access_log=False)
    loop = ScoringLoop(st, cfg) if cfg is not None else None
    from assay.monitor.heartbeat import Heartbeat

    beat = Heartbeat(st, ingest, f"http://{shown}:{port}{PATH}", loop.scorer if loop is not None else None)
    rpc = _grpc(ingest, host, shown, grpc_port, tok, max_body) if grpc_port is not None else None
    with sock:
        if loop is not None:
            loop.start()
        beat.start()
        try:
            uvicorn.Server(server).run(sockets=[sock])
        finally:
            if rpc is not None:
                rpc.stop(5).wait()
            beat.stop()
            if loop is not None:
                loop.stop()


def _grpc(ingest: Any, host: str, shown: str, port: int, tok: str | None, max_body: int) -> Any:
    """The OTLP/gRPC receiver beside the HTTP one, started, its address printed."""
    from assay.monitor.grpc_receiver import grpc_server

    rpc, bound = grpc_server(ingest, host, port, token=tok, max_body=max_body)
    out.print(f"assay monitor: receiving OTLP/gRPC traces and logs at {safe(shown)}:{bound} "
              f"(OTEL_EXPORTER_OTLP_PROTOCOL=grpc, OTEL_EXPORTER_OTLP_ENDPOINT=http://{safe(shown)}:{bound})",
              highlight=False, soft_wrap=True)
    return rpc


def _config(path: str) -> Any:
    from assay.monitor.config import load_config

    return load_config(path)


def _say(line: str) -> None:
    err.print(safe(line), highlight=False, soft_wrap=True)


class ScoringLoop:
    """The online scoring beside the receiver: every ``interval`` seconds a pass starts (score what
    is due) on a thread of its own, up to ``MAX_PASSES`` at once, **without waiting for the passes
    still running**: a trace completed while a pass waits on the judge is taken by the next pass
    (the scorer claims each trace a pass takes, and its passes share the judge's limits). The
    rules of the closed windows are checked between starts, at most once an ``interval``."""

    MAX_PASSES = 8

    def __init__(self, st: Any, cfg: Any):
        from assay.monitor.alerts import AlertChecker
        from assay.monitor.scoring import OnlineScorer

        self.cfg = cfg
        self.scorer = OnlineScorer(st, cfg, say=_say)
        self.checker = AlertChecker(st, cfg, say=_say)
        self.halt = threading.Event()
        self.running = threading.Semaphore(self.MAX_PASSES)
        self.passes: list[threading.Thread] = []
        self.thread = threading.Thread(target=self.run, name="assay-monitor-scoring", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.halt.set()
        self.thread.join(30)
        for t in list(self.passes):
            t.join(30)
        self.scorer.close()          # the evaluation events still queued (bounded by the export's timeout)

    def one_pass(self) -> None:
        try:
            self.scorer.run_pass()
        except Exception as exc:  # a pass that fails is logged and tried again: the loop goes on
            _say(f"assay monitor: a scoring pass failed: {type(exc).__name__}: {exc}")
        finally:
            self.running.release()

    def run(self) -> None:
        while not self.halt.is_set():
            if self.running.acquire(timeout=self.cfg.interval):
                t = threading.Thread(target=self.one_pass, name="assay-monitor-pass", daemon=True)
                self.passes = [p for p in self.passes if p.is_alive()] + [t]
                t.start()
            try:
                self.checker.check(time.time_ns() - int(self.cfg.lookback * 1e9))
            except Exception as exc:  # a check that fails is logged and tried again
                _say(f"assay monitor: checking the alert rules failed: {type(exc).__name__}: {exc}")
            try:
                self.scorer.resend_exports()
            except Exception as exc:  # tried again at the next turn
                _say(f"assay monitor: re-sending evaluation events failed: {type(exc).__name__}: {exc}")
            self.halt.wait(self.cfg.interval)


def _ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    import datetime as dt

    stamp = dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({max(0.0, time.time() - ts):,.0f} s ago)"


@app.command("status")
def status_cmd(
    store: str | None = STORE_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Traces received and scored: the running server's queue, evaluation lag, open alerts."""
    from assay.monitor.heartbeat import running
    from assay.store.monitor import MonitorLog
    from assay.store.spans import SpanLog

    st = open_store(store)
    try:
        s = SpanLog(st).status()
        log = MonitorLog(st)
        s.update(log.status())
        now = time.time()
        s["servers"] = [{**b, "running": running(b, now)} for b in log.servers()]
    finally:
        st.close()
    if as_json:
        print_json(s)
        return
    open_traces = s["traces"] - s["complete_traces"]
    lines = [("store", s["store"]), *_server_lines(s["servers"]), ("spans", f"{s['spans']:,}"),
             ("traces", f"{s['traces']:,} ({s['complete_traces']:,} complete, {open_traces:,} open)"),
             ("last received", _ago(s["last_received"]))]
    for metric, d in sorted(s["metrics"].items()):
        lag = "—" if d["lag_p50_s"] is None else f"lag p50 {d['lag_p50_s']:.1f} s, p95 {d['lag_p95_s']:.1f} s"
        lines.append((metric, f"sampled {d['scored'] + d['skipped'] + d['error']:,}: scored {d['scored']:,}, "
                              f"skipped {d['skipped']:,}, errored {d['error']:,} (retried); {lag}"))
    lines.append(("open alerts", str(len(s["open_alerts"])) if s["open_alerts"] else "none"))
    for label, value in lines:
        out.print(f"{label:<14} {safe(value)}", highlight=False, soft_wrap=True)
    for a in s["open_alerts"]:
        out.print(f"  FIRING {safe(a['metric'])}: {safe(a['rule'])} ({safe(a['output'])}) since the window from "
                  f"{_stamp(a['window_start_ns'])}", highlight=False, soft_wrap=True)


def _server_lines(servers: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The running servers' queue depth and scoring backlog (from their heartbeats), or that none runs."""
    live = [b for b in servers if b["running"]]
    if not live:
        last = max((b["beat_at"] for b in servers), default=None)
        said = "not running (no `assay monitor serve` on this store" + (
            f"; the last heartbeat was {_ago(last)})" if last is not None else ")")
        return [("server", said)]
    out = []
    for b in live:
        stt = b["state"]
        out.append(("server", f"running: pid {b['pid']} on {b['host']}, {b['url']} (heartbeat {_ago(b['beat_at'])})"))
        out.append(("  queue", f"{stt.get('spans_pending', 0):,} spans received, not yet committed"))
        for metric, d in sorted((stt.get("scoring") or {}).items()):
            out.append((f"  {metric}", f"{d['waiting']:,} traces waiting to be scored; evaluation lag now "
                                       f"{d['lag_s']:.1f} s"))
        if "scoring" not in stt:
            out.append(("  scoring", "off (no --config)"))
    return out


def _stamp(ns: int) -> str:
    from assay.monitor.alerts import when

    return when(ns)


def _since(text: str, flag: str = "--since") -> float:
    from assay.monitor.config import duration

    try:
        return duration(text)
    except ValueError as e:
        raise typer.BadParameter(f"{flag}: {e}") from None


def _fig(x: Any) -> str:
    return "—" if x is None else f"{x:.4g}"


def _print_check(report: dict[str, Any]) -> None:
    for name, m in report["metrics"].items():
        out.print(f"{safe(name)} (window {m['window']}, sample {m['sample']:.0%})", highlight=False, soft_wrap=True)
        if not m["windows"]:
            out.print("  no scored traces in this period", highlight=False)
        for w in m["windows"]:
            figs = "; ".join(f"{safe(o)} mean {_fig(a['mean'])} [{_fig(a['ci95_low'])}, {_fig(a['ci95_high'])}]"
                             for o, a in w["outputs"].items())
            mark = "" if w["closed"] else " (open)"
            out.print(f"  {_stamp(w['start_ns'])}{mark}  {w['traces']:>5} traces  {figs}", highlight=False,
                      soft_wrap=True)
        for r in m["rules"]:
            last = r["last"] or {}
            seen = (f"{_fig(last.get('figure'))} [{_fig(last.get('ci_low'))}, {_fig(last.get('ci_high'))}] "
                    f"{safe(last.get('bound') or '')}" if last else "no closed window")
            out.print(f"  rule {safe(r['rule'])} ({safe(r['output'])}): {r['state'].upper()}  last window: {seen}",
                      highlight=False, soft_wrap=True)
    firing = report["firing"]
    out.print(f"alerts firing: {len(firing)}" if firing else "alerts firing: none", highlight=False)


@app.command("check")
def check_cmd(
    since: str = typer.Option("1h", "--since", help="Look at the windows of this period (30s, 5m, 1h, 1d)."),
    config: str = typer.Option("monitor.yaml", "--config", help="monitor.yaml: the metrics, windows and rules."),
    store: str | None = STORE_OPT,
    as_json: bool = typer.Option(False, "--json", help="Print the windows and rules as JSON."),
) -> None:
    """Windows and alerts of the period; exit 1 while an alert rule fires (for cron and CI)."""
    from assay.monitor.alerts import AlertChecker

    seconds = _since(since)
    cfg = _config(config)
    st = open_store(store)
    try:
        report = AlertChecker(st, cfg, say=_say).check(time.time_ns() - int(seconds * 1e9))
    finally:
        st.close()
    if as_json:
        print_json(report)
    else:
        _print_check(report)
    if report["firing"]:
        raise typer.Exit(1)


@app.command("backfill")
def backfill_cmd(
    since: str = typer.Option("24h", "--since", help="Score the traces that started in this period (5m, 1h, 1d)."),
    metrics: str | None = typer.Option(None, "--metrics", help="Metrics to score, comma-separated "
                                                                "(default: those of --config)."),
    judge: str | None = typer.Option(None, "--judge", help="The judge model for --metrics (a model spec)."),
    config: str | None = typer.Option(None, "--config", help="monitor.yaml: its metrics, sampling and filters."),
    store: str | None = STORE_OPT,
) -> None:
    """Score the stored traces of a period with a metric now (those scored already are kept)."""
    from assay.monitor.config import adhoc
    from assay.monitor.scoring import OnlineScorer

    seconds = _since(since)
    if not metrics and not config:
        raise typer.BadParameter("name the metrics (--metrics M1,M2) or a --config")
    if config:
        cfg = _config(config)
        if metrics:
            names = [m.strip() for m in metrics.split(",") if m.strip()]
            unknown = [m for m in names if m not in cfg.metrics]
            if unknown:
                raise AssayError(f"--metrics {','.join(unknown)}: not in {config} (it has {', '.join(cfg.metrics)})")
            cfg.metrics = {m: cfg.metrics[m] for m in names}
        if judge:
            for mc in cfg.metrics.values():
                mc.judge = judge
    else:
        cfg = adhoc([m.strip() for m in metrics.split(",") if m.strip()], judge=judge)
    cfg.retry_after = 0.0
    st = open_store(store)
    total = {"scored": 0, "skipped": 0, "errored": 0, "sampled_out": 0}
    scorer = None
    try:
        scorer = OnlineScorer(st, cfg, say=_say)
        since_ns = time.time_ns() - int(seconds * 1e9)
        got = scorer.run_pass(since_ns=since_ns, everything=True)
        for name, c in got.items():
            out.print(f"{safe(name)}: scored {c['scored']:,}, skipped {c['skipped']:,}, errored {c['errored']:,}, "
                      f"not in the sample {c['sampled_out']:,}", highlight=False, soft_wrap=True)
            for k in total:
                total[k] += c[k]
    finally:
        if scorer is not None:
            scorer.close()
        st.close()
    if total["errored"]:
        err.print(f"{total['errored']:,} trace(s) errored: they stay due; run backfill again (or keep "
                  "`assay monitor serve --config` running) to score them", highlight=False)
        raise typer.Exit(3)
