"""The dashboard's own addresses: the token redirect stays on the dashboard, and the address
`assay ui` prints already accepts connections when it is printed (issue 28, item 4)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from fastapi.testclient import TestClient

from assay.ui.server import create_app


@pytest.mark.parametrize("path", ["//evil.example/x", "///evil.example/x", "/\\evil.example/x",
                                  "/%2F%2Fevil.example/x"])
def test_the_token_redirect_never_leaves_the_dashboard(ui_store: dict[str, Any], path: str) -> None:
    app = create_app(ui_store["store"], token="s3cret-token-value")
    c = TestClient(app, base_url="http://192.0.2.10:8765")
    res = c.get("http://192.0.2.10:8765" + path, params={"token": "s3cret-token-value", "per": 5}, follow_redirects=False)
    assert res.status_code == 303
    where = res.headers["location"]
    # a path on this host: one slash, then no second slash or backslash a browser reads as a host
    assert where.startswith("/") and where[1:2] not in ("/", "\\"), where
    assert where.endswith("?per=5") and "token" not in where


def test_the_printed_address_accepts_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer
    from typer.testing import CliRunner

    from assay.cli import ui as commands

    reached: list[bool] = []

    def serve(server: Any, sockets: Any = None) -> None:   # the moment the address has been printed
        port = sockets[0].getsockname()[1]
        probe = socket.socket()
        probe.settimeout(5)
        try:
            reached.append(probe.connect_ex(("127.0.0.1", port)) == 0)
        finally:
            probe.close()

    monkeypatch.setattr("uvicorn.Server.run", serve)
    monkeypatch.setattr("uvicorn.Config.configure_logging", lambda self: None)
    app = typer.Typer()
    app.command()(commands.ui_cmd)
    app.command("x")(lambda: None)
    res = CliRunner().invoke(app, ["ui-cmd", "--port", "0"])
    assert res.exit_code == 0, res.output
    assert "http://127.0.0.1:" in res.output
    assert reached == [True]
