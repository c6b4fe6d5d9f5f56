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
scores are in the store whatever happens to the events. A failed export is one line on the log
(the first failure of an outage, and the recovery), not a line per batch: the exporter's own
warnings are kept off the console (its logger's records are read for the reason, not printed).
"""

from __future__ import annotations

import logging
import math
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


class _LastError(logging.Handler):
    """Keeps the exporter's last warning (the reason of a failed export) instead of printing it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.last = record.getMessage()
        except Exception:  # a message that does not format: keep the template
            self.last = str(record.msg)


def _reporting_exporter(real: Any, url: str, say: Callable[[str], None], errors: _LastError) -> Any:
    """``real`` (an ``OTLPLogExporter``) that says one line when exports start failing and one
    when they succeed again."""
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

    class Reporting(LogRecordExporter):
        def __init__(self) -> None:
            self.down = False
            self.lost = 0
            self.sent = 0

        def export(self, batch: Any) -> Any:
            try:
                res = real.export(batch)
            except Exception as e:  # the SDK's thread must go on: a failure is a result
                errors.last = f"{type(e).__name__}: {e}"
                res = LogRecordExportResult.FAILURE
            if res is LogRecordExportResult.SUCCESS:
                self.sent += len(batch)
                if self.down:
                    say(f"assay monitor: evaluation events reach {url} again ({self.lost} were not sent; "
                        "their scores are in the store)")
                    self.down = False
                return res
            self.lost += len(batch)
            if not self.down:
                why = " ".join((errors.last or "no answer").split())[:300]
                say(f"assay monitor: sending evaluation events to {url} failed ({why}); scoring goes on "
                    "and the scores are kept in the store")
                self.down = True
            return res

        def shutdown(self) -> None:
            real.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return Reporting()


class EvaluationExporter:
    """Scores as ``gen_ai.evaluation.result`` log records, batched to an OTLP/HTTP endpoint."""

    def __init__(self, export: Export, *, say: Callable[[str], None] | None = None):
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
        self.errors = _LastError()
        log = logging.getLogger(EXPORTER_LOGGER)
        log.addHandler(self.errors)
        log.propagate = False
        real = OTLPLogExporter(endpoint=export.endpoint, headers=dict(export.headers) or None, timeout=export.timeout)
        self.exporter = _reporting_exporter(real, export.endpoint, say or (lambda line: None), self.errors)
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
            logging.getLogger(EXPORTER_LOGGER).removeHandler(self.errors)


def _info() -> Any:
    from opentelemetry._logs import SeverityNumber

    return SeverityNumber(SEVERITY_INFO)
