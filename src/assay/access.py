"""Who may reach a server that assay runs on this machine (the dashboard, the monitor's OTLP
receiver): without a token, only requests addressed to a loopback host name (which keeps other
web pages from reaching it through DNS rebinding); with a token, only requests that carry it
(an ``Authorization: Bearer T`` header, an ``X-Assay-Token`` header, or what the caller passes
on: the dashboard's cookie or ``?token=``), compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps a server on this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    h = host.strip().strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """The host name of a ``Host`` header, its port dropped (``[::1]:8765`` → ``[::1]``)."""
    h = host_header.strip().lower()
    if h.startswith("["):
        return h[: h.find("]") + 1] if "]" in h else h
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def given_token(headers: Mapping[str, str], *fallbacks: str | None) -> str:
    """The token a request carries: its ``Authorization: Bearer`` header, else its
    ``X-Assay-Token`` header, else the first of ``fallbacks`` given (a cookie, a query value)."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return next((f for f in (*fallbacks, headers.get("x-assay-token")) if f), "")


def token_matches(given: str, token: str) -> bool:
    """``given`` is ``token`` (a constant-time comparison; an empty one never matches)."""
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())
