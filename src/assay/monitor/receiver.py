"""The OTLP/HTTP receiver: a Starlette app that takes ``POST /v1/traces`` and ``POST /v1/logs``.

A request is read within the size cap (``max_body`` bytes, compressed or not: 413 beyond it),
decoded (:mod:`assay.monitor.decode`: protobuf or JSON, gzip), and its spans handed to the
:class:`~assay.monitor.ingest.Ingest` queue; the answer, an ``ExportTraceServiceResponse`` in the
request's encoding (with ``partial_success`` when some spans were rejected), is sent once the
spans are committed. A full queue answers 429 and a store that failed 503, both with
``Retry-After``, which the OpenTelemetry exporters honour and retry on; a body that is not an
export request answers 400 with one line (a ``google.rpc.Status``).

Access (:mod:`assay.access`, the dashboard's rules): without a token only requests addressed to a
loopback host name are answered; with one, every request must carry it (``Authorization: Bearer
T``, as ``OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer T"`` sends it, or ``X-Assay-Token``).

``POST /v1/logs`` takes the log records an instrumentation emits on a span (the GenAI
conventions' ``gen_ai.client.inference.operation.details`` event with the messages, or the older
per-message events, when content is captured as events): those with a trace and span id are kept
with the spans (:meth:`assay.store.spans.SpanLog.spans` reads them as the span's events), the
others are answered and not kept. The same cap, queue and answers as the traces.

The app's lifespan starts the ingest's writer and, at shutdown, stores what is still queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from assay.access import LOOPBACK_HOSTS, given_token, host_name, token_matches
from assay.monitor import decode as D
from assay.monitor.ingest import Full, Ingest, Unavailable

MAX_BODY = 20 * 1024 * 1024     # bytes of a request, compressed or decompressed (the Collector's default)
RETRY_AFTER = 1                 # seconds, in the Retry-After of a 429 or 503
PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"


def _error(kind: str | None, status: int, message: str, retry: int | None = None) -> Response:
    body, media = D.error_response(kind, status, message)
    headers = {"Retry-After": str(retry)} if retry is not None else None
    return Response(body, status_code=status, media_type=media, headers=headers)


async def _read(request: Request, limit: int) -> bytes:
    size = request.headers.get("content-length", "")
    if size.isdigit() and int(size) > limit:
        raise D.Refused(413, f"the body is over {limit:,} bytes: send smaller batches")
    buf = bytearray()
    async for chunk in request.stream():
        buf += chunk
        if len(buf) > limit:
            raise D.Refused(413, f"the body is over {limit:,} bytes: send smaller batches")
    return bytes(buf)


class _Receiver:
    """The request handlers over one ingest queue."""

    def __init__(self, ingest: Ingest, token: str | None, max_body: int, retry_after: int):
        self.ingest, self.token, self.max_body, self.retry_after = ingest, token, max_body, retry_after
        self.hosts = {h.lower() for h in LOOPBACK_HOSTS}

    def refused(self, request: Request) -> Response | None:
        if self.token is None:
            if host_name(request.headers.get("host", "")) not in self.hosts:
                return _error(None, 400, "this receiver answers only on a loopback address "
                                         "(start it with --token to serve other hosts)")
        elif not token_matches(given_token(request.headers), self.token):
            return _error(None, 401, "a token is needed: send the header 'Authorization: Bearer TOKEN' "
                                     "(OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer TOKEN')")
        return None

    async def traces(self, request: Request) -> Response:
        return await self._take(request, logs=False)

    async def logs(self, request: Request) -> Response:
        return await self._take(request, logs=True)

    async def _take(self, request: Request, logs: bool) -> Response:
        denied = self.refused(request)
        if denied is not None:
            return denied
        kind: str | None = None
        rows: list[Any] = []
        events: list[Any] = []
        rejected, why = 0, None
        try:
            kind = D.body_kind(request.headers.get("content-type"))
            body = D.inflate(await _read(request, self.max_body), request.headers.get("content-encoding"),
                             self.max_body)
            if logs:
                events, _ = D.parse_logs(body, kind)
            else:
                rows, rejected, why = D.parse(body, kind)
        except D.Refused as e:
            return _error(kind, e.status, e.message)
        if rows or events:
            try:
                await asyncio.wrap_future(self.ingest.submit(rows, events))
            except Full as e:
                return _error(kind, 429, f"over capacity: {e}; retry after {self.retry_after} s", self.retry_after)
            except Unavailable as e:
                return _error(kind, 503, str(e), self.retry_after)
        media = "application/json" if kind == D.JSON else "application/x-protobuf"
        return Response(D.export_response(kind, rejected, why), media_type=media)

    async def other(self, request: Request) -> Response:
        denied = self.refused(request)
        if denied is not None:
            return denied
        if request.url.path in (PATH, LOGS_PATH):
            return _error(None, 405, f"{request.method} {request.url.path}: send them with POST")
        return _error(None, 404, f"no {request.url.path} here: this receiver takes OTLP traces at POST {PATH} "
                                 f"(and log records on spans at POST {LOGS_PATH})")

    @asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        self.ingest.start()
        try:
            yield
        finally:
            await asyncio.to_thread(self.ingest.close)


def create_app(ingest: Ingest, *, token: str | None = None, max_body: int = MAX_BODY,
               retry_after: int = RETRY_AFTER) -> Starlette:
    """The receiver over ``ingest``. ``token``: required on every request when set."""
    r = _Receiver(ingest, token, max_body, retry_after)
    methods = ["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
    return Starlette(routes=[Route(PATH, r.traces, methods=["POST"]), Route(LOGS_PATH, r.logs, methods=["POST"]),
                             Route(PATH, r.other, methods=methods), Route(LOGS_PATH, r.other, methods=methods),
                             Route("/{path:path}", r.other, methods=["POST", *methods])], lifespan=r.lifespan)
