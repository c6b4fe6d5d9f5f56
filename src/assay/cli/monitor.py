"""``assay monitor``: receive a live app's OpenTelemetry traces and keep them in the store.

``assay monitor serve`` runs the OTLP/HTTP receiver (:mod:`assay.monitor.receiver`);
``assay monitor status`` says what the store holds of them (docs/monitor.md).
"""

from __future__ import annotations

import time

import typer

from assay.cli.common import STORE_OPT, err, open_store, out, print_json, safe
from assay.errors import AssayError

app = typer.Typer(no_args_is_help=True,
                  help="Watch a live app: receive its OpenTelemetry traces and keep them in the store.")

TOKEN_ENV = ("ASSAY_MONITOR_TOKEN", "ASSAY_UI_TOKEN")


def _need_monitor_extra() -> None:
    import importlib

    try:
        for module in ("starlette", "uvicorn"):
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
) -> None:
    """Receive OTLP/HTTP traces (POST /v1/traces) and keep their spans in the store."""
    _need_monitor_extra()
    import uvicorn

    from assay.cli.ui import check_bind, listen_on
    from assay.monitor.ingest import Ingest
    from assay.monitor.receiver import PATH, create_app
    from assay.store.spans import SpanLog

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
    config = uvicorn.Config(receiver, host=host, port=port, log_level="warning", server_header=False,
                            access_log=False)
    with sock:
        uvicorn.Server(config).run(sockets=[sock])


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
    """Spans and traces received, complete traces, when the last span came, and the store."""
    from assay.store.spans import SpanLog

    st = open_store(store)
    try:
        s = SpanLog(st).status()
    finally:
        st.close()
    if as_json:
        print_json(s)
        return
    open_traces = s["traces"] - s["complete_traces"]
    for label, value in (("store", s["store"]), ("spans", f"{s['spans']:,}"),
                         ("traces", f"{s['traces']:,} ({s['complete_traces']:,} complete, {open_traces:,} open)"),
                         ("last received", _ago(s["last_received"]))):
        out.print(f"{label:<14} {safe(value)}", highlight=False, soft_wrap=True)
