"""Scores back to the user's telemetry: each score as an OpenTelemetry ``gen_ai.evaluation.result`` event.

With ``export: {otlp_endpoint: URL}`` in ``monitor.yaml``, every score the online evaluation
records (:mod:`assay.monitor.scoring`, and ``assay monitor backfill``) is also sent as an event of
the OpenTelemetry GenAI semantic conventions: a **log record** (the conventions emit events
through the Logs API) named ``gen_ai.evaluation.result``, with

- ``gen_ai.evaluation.name``: the metric (``metric.output`` for a metric with several outputs),
- ``gen_ai.evaluation.score.value``: the numeric score, ``gen_ai.evaluation.score.label``: its
  result (``pass``, ``fail`` ...), ``gen_ai.evaluation.explanation``: the reason,
- the trace and span context of what was evaluated: the trace's root span (or, scored per model
  call, that call's span), so a tracing backend shows the score on the evaluated trace;
- ``assay.metric``, ``assay.output`` and ``assay.run_id`` (the run whose rows hold the score).

They are exported over OTLP/HTTP (protobuf, ``POST {endpoint}/v1/logs``) with the OpenTelemetry
SDK's ``OTLPLogExporter`` behind a ``BatchLogRecordProcessor``: emitting only queues the event, a
thread of the SDK sends the batches, each export bounded by ``timeout`` (the exporter's own
retries included). So a slow or failing endpoint never blocks scoring, and it loses no score: the
scores are in the store whatever happens to the events. ``on_result`` hears, per exported batch,
which scores' events were sent and which failed: the online evaluation marks them in the store
(``sent`` / ``failed``) and sends the failed ones again later
(:meth:`assay.monitor.scoring.OnlineScorer.resend_exports`). A failed export is one line on the log
(the first failure of an outage, and the recovery), not a line per batch, with its reason (the
HTTP status or the connection error, recorded by the exporter's ``requests`` session); the
exporter's own warnings are kept off the console.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from assay.errors import AssayError
from assay.monitor.config import Export

EVENT = "gen_ai.evaluation.result"
EXPLANATION_CHARS = 4000
EXPORTER_LOGGER = "opentelemetry.exporter.otlp.proto.http._log_exporter"
SEVERITY_INFO = 9


def evaluation_name(metric: str, output: str) -> str:
    """``groundedness`` for a metric's own output, ``metric.output`` for another of its outputs."""
    return metric if output == metric else f"{metric}.{output}"


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def _label(sc: Mapping[str, Any]) -> str | None:
    if sc.get("result"):
        return str(sc["result"])
    if sc.get("passed") is not None:
        return "pass" if sc["passed"] else "fail"
    return None


def events(metric: str, outcome: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The events of one scored trace (an outcome of :meth:`OnlineScorer.score`): per record and
    output with a finished score, ``{trace_id, span_id, time_ns, attributes}``."""
    spans: Sequence[str | None] = outcome.get("span_ids") or []
    when = int((outcome.get("scored_at") or 0) * 1e9) or None
    for i, rec in enumerate(outcome.get("scores") or []):
        span_id = (spans[i] if i < len(spans) else None) or outcome.get("root_span_id")
        for output, sc in rec.items():
            if sc.get("status") not in (None, "completed"):
                continue
            attrs: dict[str, Any] = {"gen_ai.evaluation.name": evaluation_name(metric, output),
                                     "assay.metric": metric, "assay.output": output}
            value = _number(sc.get("score"))
            value = _number(sc.get("value")) if value is None else value
            if value is not None:
                attrs["gen_ai.evaluation.score.value"] = value
            label = _label(sc)
            if label is not None:
                attrs["gen_ai.evaluation.score.label"] = label
            if sc.get("reason"):
                attrs["gen_ai.evaluation.explanation"] = str(sc["reason"])[:EXPLANATION_CHARS]
            if outcome.get("run_id"):
                attrs["assay.run_id"] = str(outcome["run_id"])
            yield {"trace_id": outcome["trace_id"], "span_id": span_id, "time_ns": when, "attributes": attrs}


def _short(e: BaseException) -> str:
    """``ConnectionError: [Errno 111] Connection refused`` rather than the whole urllib3 chain."""
    text = str(e)
    found = re.search(r"\[Errno -?\d+\][^'\")]*", text)
    return f"{type(e).__name__}: {found.group(0).strip() if found else text}"


def _recording_session() -> Any:
    """A ``requests`` session for the exporter that keeps, per thread, how its last request
    ended (``HTTP 503 Service Unavailable``, ``ConnectionError: ...``): the reason of a failed
    export, which the exporter's own log messages (muted here, and deduplicated by the SDK) do
    not reliably give."""
    import requests

    class Recording(requests.Session):
        def __init__(self) -> None:
            super().__init__()
            self.local = threading.local()

        def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                resp = super().request(method, url, *args, **kwargs)
            except Exception as e:
                self.local.last = _short(e)
                raise
            self.local.last = f"HTTP {resp.status_code} {resp.reason or ''}".strip()
            return resp

        def reset(self) -> None:
            self.local.last = None

        def reason(self) -> str:
            return getattr(self.local, "last", None) or "no answer"

    return Recording()


def scored_pairs(batch: Sequence[Any]) -> list[tuple[str, str]]:
    """The ``(metric, trace id)`` of the evaluation events of an exported batch (SDK records)."""
    out = []
    for item in batch:
        rec = getattr(item, "log_record", item)
        metric = (getattr(rec, "attributes", None) or {}).get("assay.metric")
        tid = getattr(rec, "trace_id", 0) or 0
        if metric and tid:
            out.append((str(metric), format(tid, "032x")))
    return out


def _reporting_exporter(real: Any, url: str, say: Callable[[str], None], errors: Any,
                        on_result: Callable[[list[tuple[str, str]], bool], None] | None = None) -> Any:
    """``real`` (an ``OTLPLogExporter``) that says one line when exports start failing and one
    when they succeed again, and tells ``on_result`` which scores' events were sent or not."""
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

    class Reporting(LogRecordExporter):
        def __init__(self) -> None:
            self.down = False
            self.lost = 0
            self.sent = 0

        def export(self, batch: Any) -> Any:
            errors.reset()
            try:
                res = real.export(batch)
            except Exception as e:  # the SDK's thread must go on: a failure is a result
                errors.local.last = _short(e)
                res = LogRecordExportResult.FAILURE
            self.report(batch, res is LogRecordExportResult.SUCCESS)
            if res is LogRecordExportResult.SUCCESS:
                self.sent += len(batch)
                if self.down:
                    say(f"assay monitor: evaluation events reach {url} again ({self.lost} were not sent; "
                        "their scores are in the store)")
                    self.down = False
                return res
            self.lost += len(batch)
            if not self.down:
                why = " ".join(errors.reason().split())[:300]
                say(f"assay monitor: sending evaluation events to {url} failed ({why}); scoring goes on "
                    "and the scores are kept in the store")
                self.down = True
            return res

        def report(self, batch: Any, ok: bool) -> None:
            if on_result is None:
                return
            try:
                on_result(scored_pairs(batch), ok)
            except Exception as e:  # the state stays pending: re-sent later, never lost
                say(f"assay monitor: could not record which evaluation events were sent: {_short(e)}")

        def shutdown(self) -> None:
            real.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return Reporting()


class EvaluationExporter:
    """Scores as ``gen_ai.evaluation.result`` log records, batched to an OTLP/HTTP endpoint."""

    def __init__(self, export: Export, *, say: Callable[[str], None] | None = None,
                 on_result: Callable[[list[tuple[str, str]], bool], None] | None = None):
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import Resource
        except ImportError as e:
            raise AssayError(f"export: sending scores as OpenTelemetry events needs {e.name or 'the OpenTelemetry SDK'} "
                             "(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http): "
                             "pip install 'assay[monitor]'") from None
        from assay.version import __version__

        self.url = export.endpoint
        self.quiet = logging.NullHandler()       # the exporter's own warnings: our one line says it
        log = logging.getLogger(EXPORTER_LOGGER)
        log.addHandler(self.quiet)
        self._propagate, log.propagate = log.propagate, False
        session = _recording_session()
        real = OTLPLogExporter(endpoint=export.endpoint, headers=dict(export.headers) or None, timeout=export.timeout,
                               session=session)
        self.exporter = _reporting_exporter(real, export.endpoint, say or (lambda line: None), session, on_result)
        self.provider = LoggerProvider(resource=Resource.create({"service.name": export.service_name}),
                                       shutdown_on_exit=False)
        self.timeout = export.timeout
        self.provider.add_log_record_processor(BatchLogRecordProcessor(
            self.exporter, schedule_delay_millis=500, export_timeout_millis=int(export.timeout * 1000),
            max_queue_size=20_000, max_export_batch_size=512))
        self.logger = self.provider.get_logger("assay.monitor", __version__)

    @property
    def sent(self) -> int:
        """Events the endpoint acknowledged so far."""
        return self.exporter.sent

    @property
    def lost(self) -> int:
        """Events whose export failed (their scores are in the store)."""
        return self.exporter.lost

    def send(self, metric: str, outcomes: Sequence[Mapping[str, Any]]) -> int:
        """Queue the events of the scored ``outcomes``; how many. Never blocks on the network."""
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        n = 0
        for o in outcomes:
            for ev in events(metric, o):
                ctx = None
                try:
                    tid = int(ev["trace_id"], 16)
                    sid = int(ev["span_id"], 16) if ev["span_id"] else 0
                except ValueError:
                    tid = sid = 0
                if tid and sid:
                    sc = SpanContext(tid, sid, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
                    ctx = trace.set_span_in_context(NonRecordingSpan(sc))
                self._emit(ev, ctx)
                n += 1
        return n

    def _emit(self, ev: Mapping[str, Any], ctx: Any) -> None:
        kw = {"timestamp": ev["time_ns"], "context": ctx, "severity_number": _info(), "severity_text": "INFO"}
        try:
            self.logger.emit(attributes=ev["attributes"], event_name=EVENT, **kw)
        except TypeError:   # an SDK from before log records had an event name: the older attribute
            self.logger.emit(attributes={**ev["attributes"], "event.name": EVENT}, **kw)

    def flush(self, timeout: float | None = None) -> bool:
        """Send what is queued now (waiting at most ``timeout`` seconds, default the export timeout)."""
        return bool(self.provider.force_flush(int((timeout or self.timeout) * 1000)))

    def close(self) -> None:
        """Send what is queued (bounded by the export timeout) and stop the SDK's thread."""
        try:
            self.flush()
        finally:
            self.provider.shutdown()
            log = logging.getLogger(EXPORTER_LOGGER)
            log.removeHandler(self.quiet)
            log.propagate = self._propagate


def _info() -> Any:
    from opentelemetry._logs import SeverityNumber

    return SeverityNumber(SEVERITY_INFO)
