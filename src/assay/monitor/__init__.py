"""``assay monitor``: watch a live app through the OpenTelemetry traces it sends.

- :mod:`assay.monitor.receiver`: the OTLP/HTTP receiver (``POST /v1/traces``, protobuf and JSON,
  gzip), answering a batch once it is committed;
- :mod:`assay.monitor.decode`: a request body as span rows, and the OTLP answers;
- :mod:`assay.monitor.ingest`: the bounded queue and the writer thread that commits batches and
  marks quiet traces complete.

The spans and traces are kept in the store (:mod:`assay.store.spans`). Scoring, windows, alerts
and the dashboard page are not built yet (docs/monitor.md).
"""
