"""AWS Signature Version 4 for one HTTP request, written here so that Bedrock needs no AWS SDK.

:func:`sign` returns the headers to add (``x-amz-date``, ``x-amz-security-token`` with temporary
credentials, ``Authorization``), computed as AWS documents the process:

1. the canonical request: the method, the canonical URI (each path byte outside the unreserved set
   percent-encoded; the path as sent is encoded once more, as every service but S3 expects), the
   canonical query (names and values encoded, sorted by name then value), the signed headers
   (lower-case names, values trimmed with inner runs of spaces made one, sorted), their names joined
   by ``;``, and the hex SHA-256 of the body;
2. the string to sign: ``AWS4-HMAC-SHA256``, the time, the scope ``DATE/REGION/SERVICE/aws4_request``
   and the hex SHA-256 of the canonical request;
3. the signing key, an HMAC-SHA256 chain from ``"AWS4" + secret`` through the date, region, service
   and ``aws4_request``; the signature is the hex HMAC of the string to sign under it.

Checked against AWS's published examples (the ``get-vanilla``, ``post-vanilla`` and
``get-vanilla-query-order-key-case`` cases of the SigV4 test suite, and the IAM ``ListUsers``
example): ``tests/models/test_bedrock_wire.py``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

ALGORITHM = "AWS4-HMAC-SHA256"
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Credentials:
    """An access key, its secret and, for temporary credentials, the session token."""

    access_key: str
    secret_key: str
    session_token: str | None = None

    def __repr__(self) -> str:
        return f"Credentials(access_key={self.access_key[:4]}..., secret_key=***)"


def _quote(s: str) -> str:
    return urllib.parse.quote(s, safe="-_.~")


def canonical_uri(path: str, *, double_encode: bool = True) -> str:
    """The canonical URI of ``path`` (as sent on the request line)."""
    path = path or "/"
    if not double_encode:
        path = urllib.parse.unquote(path)
    return urllib.parse.quote(path, safe="/-_.~")


def canonical_query(query: str) -> str:
    """The canonical query string of ``query`` (``a=1&b=2``)."""
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{_quote(k)}={_quote(v)}" for k, v in sorted(pairs))


def canonical_headers(headers: Mapping[str, str]) -> tuple[str, str]:
    """``(canonical headers, signed header names)`` of ``headers``."""
    items = sorted((k.strip().lower(), _SPACES.sub(" ", str(v).strip())) for k, v in headers.items())
    return "".join(f"{k}:{v}\n" for k, v in items), ";".join(k for k, _ in items)


def canonical_request(method: str, path: str, query: str, headers: Mapping[str, str], payload_hash: str, *,
                      double_encode: bool = True) -> tuple[str, str]:
    """``(canonical request, signed header names)``."""
    canon, signed = canonical_headers(headers)
    return "\n".join([method.upper(), canonical_uri(path, double_encode=double_encode), canonical_query(query),
                      canon, signed, payload_hash]), signed


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The SigV4 signing key for ``date`` (``YYYYMMDD``), ``region`` and ``service``."""
    k = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def amz_date(now: float | None = None) -> str:
    """``YYYYMMDDTHHMMSSZ`` for ``now`` (Unix seconds; default the current time)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))


def sign(method: str, url: str, headers: Mapping[str, str], body: bytes, creds: Credentials, *, region: str,
         service: str, now: float | str | None = None, double_encode: bool = True) -> dict[str, str]:
    """The headers that sign a request: ``x-amz-date``, ``x-amz-security-token`` (temporary
    credentials only) and ``Authorization``. ``headers`` are the ones sent and signed, ``host``
    included; ``now``: Unix seconds or an ``x-amz-date`` string (default the current time)."""
    stamp = now if isinstance(now, str) else amz_date(now)
    added = {"x-amz-date": stamp}
    if creds.session_token:
        added["x-amz-security-token"] = creds.session_token
    parts = urllib.parse.urlsplit(url)
    signed_headers = {**{k.lower(): v for k, v in headers.items()}, **added}
    payload_hash = hashlib.sha256(body).hexdigest()
    creq, names = canonical_request(method, parts.path, parts.query, signed_headers, payload_hash,
                                    double_encode=double_encode)
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(signing_key(creds.secret_key, stamp[:8], region, service), to_sign.encode(),
                   hashlib.sha256).hexdigest()
    added["Authorization"] = f"{ALGORITHM} Credential={creds.access_key}/{scope}, SignedHeaders={names}, Signature={sig}"
    return added
