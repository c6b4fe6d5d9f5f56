"""The ``assay ui`` and ``assay report`` commands (wired into :mod:`assay.cli.main`)::

    app.command("ui")(ui_cmd)
    app.command("report")(report_cmd)
"""

from __future__ import annotations

import errno
import secrets
import socket
from pathlib import Path

import typer

from assay.access import is_loopback
from assay.cli.common import STORE_OPT, err, open_store, out, safe, text_arg
from assay.errors import AssayError, RunIncomplete

app = typer.Typer()


def _need_ui_extra() -> None:
    import importlib

    try:
        for module in ("fastapi", "jinja2", "uvicorn"):
            importlib.import_module(module)
    except ImportError as exc:
        raise AssayError(f"the dashboard needs the ui extra ({exc.name} is missing): pip install 'assay[ui]'") from None


def check_bind(host: str, token: str | None, what: str = "the dashboard", env: str = "ASSAY_UI_TOKEN") -> str | None:
    """The token to use: ``auto`` makes one; a host other than loopback needs one (``what``: the
    server, ``env``: the variable that gives its token, for the message)."""
    if token is not None and token.strip().lower() == "auto":
        return secrets.token_urlsafe(24)
    if token is not None and not token.strip():
        raise AssayError("--token is empty")
    if token is None and not is_loopback(host):
        raise AssayError(f"binding {host} makes {what} reachable from other machines, so it needs a token: "
                         f"add --token auto (or --token YOUR_SECRET, or set {env})")
    return token.strip() if token else None


def listen_on(host: str, port: int, other: str = "another `assay ui`") -> socket.socket:
    """A socket listening on ``host:port`` (uvicorn serves it), made before the address is
    announced, so the address accepts connections once printed: a port in use ends the command
    with one line and exit 3."""
    addr = host.strip().strip("[]")
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET   # as uvicorn: localhost is 127.0.0.1
    try:
        sockaddr = socket.getaddrinfo(addr, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0][4]
    except socket.gaierror as exc:
        raise AssayError(f"--host {host}: not an address to listen on ({exc.strerror})") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(sockaddr)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise RunIncomplete(f"cannot listen on {host}:{port}: the port is in use ({other}?); "
                                "stop that program or pick another port with --port") from None
        raise RunIncomplete(f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                            "pick another address with --host or port with --port") from None
    sock.set_inheritable(True)
    sock.listen(2048)   # connections wait in the backlog from the moment the address is printed
    return sock


@app.command("ui")
def ui_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind. Anything but loopback needs --token."),
    port: int = typer.Option(8765, "--port", min=0, max=65535, help="Port to listen on (0: any free port)."),
    store: str | None = STORE_OPT,
    token: str | None = typer.Option(None, "--token", envvar="ASSAY_UI_TOKEN",
                                        help="Require this token on every request ('auto': make one and print it)."),
) -> None:
    """The local dashboard: runs, rows, reasons, comparisons and trends in the browser."""
    _need_ui_extra()
    import uvicorn

    from assay.ui.server import create_app

    tok = check_bind(host, token)
    st = open_store(store)
    app = create_app(st, token=tok)
    sock = listen_on(host, port)
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={tok}" if tok else "")
    out.print(f"assay dashboard for {safe(st.display_url)}: {safe(url)}", highlight=False, soft_wrap=True)
    if tok and len(tok) < 16:
        err.print("[yellow]the token is short; prefer --token auto[/yellow]")
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", server_header=False)
    with sock:
        uvicorn.Server(config).run(sockets=[sock])


@app.command("report")
def report_cmd(
    run: str = typer.Argument(..., help="Run id, id prefix, name (its latest run) or 'last'."),
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="The HTML file to write."),
    max_rows: int = typer.Option(2000, "--max-rows", help="Rows listed in the table (the worst rows are added)."),
    worst: int = typer.Option(10, "--worst", help="Worst rows shown in full per metric output."),
    store: str | None = STORE_OPT,
) -> None:
    """Write one self-contained HTML report of a run (opens offline, no script)."""
    _need_ui_extra()
    from assay.ui.report import write_report

    if max_rows < 0 or worst < 0:
        raise AssayError("--max-rows and --worst must be 0 or more")
    st = open_store(store)
    path = write_report(st, text_arg(run), output, max_rows=max_rows, worst=worst)
    out.print(f"wrote {safe(path)} ({path.stat().st_size / 1024:,.0f} KiB)", highlight=False)
