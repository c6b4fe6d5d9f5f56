"""The OTLP/gRPC receiver: ``TraceService/Export`` and ``LogsService/Export`` beside the HTTP one.

Many OpenTelemetry SDKs export over gRPC by default (port 4317). This server (grpcio, needs the
``monitor`` extra) takes the two collector methods with generic handlers: the request's bytes go
to the same parser as an OTLP/HTTP protobuf body (:func:`assay.monitor.decode.parse` and
:func:`~assay.monitor.decode.parse_logs`) and its spans to the same
:class:`~assay.monitor.ingest.Ingest` queue; the answer, an ``ExportTraceServiceResponse`` (with
``partial_success`` when some spans were rejected) or an empty ``ExportLogsServiceResponse``, is
sent once they are committed. gzip requests are decompressed by grpc itself.

Errors are gRPC status codes with one line: a body that is not an export request
``INVALID_ARGUMENT``; a full queue or a store that failed ``UNAVAILABLE`` (the exporters retry
it, as they honour the HTTP receiver's 429 and 503); a missing or wrong token ``UNAUTHENTICATED``.

Access: as the HTTP receiver, a token (when set) must come with every call, as the metadata
``authorization: Bearer T`` (``OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer T"``) or
``x-assay-token``; without one the server binds only a loopback address (the command refuses
another, :func:`assay.cli.ui.check_bind`). The HTTP receiver's check of the ``Host`` header (a
page a browser loads cannot reach it by a rebound name) has no gRPC counterpart to need: a browser
cannot make a gRPC call.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from assay.access import given_token, token_matches
from assay.errors import RunIncomplete
from assay.monitor import decode as D
from assay.monitor.ingest import Full, Ingest, Unavailable

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
MAX_BODY = 20 * 1024 * 1024     # bytes of a request message (as the HTTP receiver)
WORKERS = 16                        # calls served at once; each waits for its commit


def _status(http: int) -> grpc.StatusCode:
    """The gRPC code of a refusal, as the HTTP receiver's ``google.rpc.Status`` names it."""
    code = D.GRPC_CODES.get(http, grpc.StatusCode.UNKNOWN.value[0])
    return next(c for c in grpc.StatusCode if c.value[0] == code)


class _Handlers:
    """The two Export methods over one ingest queue."""

    def __init__(self, ingest: Ingest, token: str | None):
        self.ingest, self.token = ingest, token

    def _allowed(self, context: grpc.ServicerContext) -> None:
        if self.token is None:
            return
        meta = {k.lower(): v for k, v in context.invocation_metadata() if isinstance(v, str)}
        if not token_matches(given_token(meta), self.token):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          "a token is needed: send the metadata 'authorization: Bearer TOKEN' "
                          "(OTEL_EXPORTER_OTLP_HEADERS='authorization=Bearer TOKEN')")

    def _commit(self, rows: list[Any], events: list[Any], context: grpc.ServicerContext) -> None:
        if not rows and not events:
            return
        try:
            self.ingest.submit(rows, events).result()
        except Full as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"over capacity: {e}; retry later")
        except Unavailable as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))

    def traces(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        self._allowed(context)
        try:
            rows, rejected, why = D.parse(body, D.PROTOBUF)
        except D.Refused as e:
            context.abort(_status(e.status), e.message)
        self._commit(rows, [], context)
        return D.export_response(D.PROTOBUF, rejected, why)

    def logs(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        self._allowed(context)
        try:
            events, _ = D.parse_logs(body, D.PROTOBUF)
        except D.Refused as e:
            context.abort(_status(e.status), e.message)
        self._commit([], events, context)
        return b""                  # ExportLogsServiceResponse, empty: every record taken


def _export(fn: Callable[[bytes, grpc.ServicerContext], bytes]) -> grpc.RpcMethodHandler:
    # no (de)serializers: the handler gets the request's bytes and returns the response's
    return grpc.unary_unary_rpc_method_handler(fn)


def grpc_server(ingest: Ingest, host: str, port: int, *, token: str | None = None,
                max_body: int = MAX_BODY) -> tuple[grpc.Server, int]:
    """A started gRPC server on ``host:port`` (0: any free port) over ``ingest``, and its port.
    A port that cannot be bound raises :class:`~assay.errors.RunIncomplete` with one line."""
    h = _Handlers(ingest, token)
    server = grpc.server(ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="assay-monitor-grpc"),
                         options=[("grpc.max_receive_message_length", max_body), ("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler(TRACE_SERVICE, {"Export": _export(h.traces)}),
        grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": _export(h.logs)}),
    ))
    addr = host.strip().strip("[]")
    target = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
    try:
        bound = server.add_insecure_port(target)
    except RuntimeError:
        bound = 0
    if not bound:
        raise RunIncomplete(f"cannot listen for OTLP/gRPC on {target}: the port is in use or the address is not "
                            "this machine's; pick another with --grpc-port (or --host)")
    server.start()
    return server, bound
