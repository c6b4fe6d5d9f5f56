"""``assay monitor``: watch a live app through the OpenTelemetry traces it sends.

- :mod:`assay.monitor.receiver`: the OTLP/HTTP receiver (``POST /v1/traces``, protobuf and JSON,
  gzip), answering a batch once it is committed;
- :mod:`assay.monitor.grpc_receiver`: the OTLP/gRPC receiver beside it (``--grpc-port``), the same
  parser, queue and token;
- :mod:`assay.monitor.decode`: a request body as span rows, and the OTLP answers;
- :mod:`assay.monitor.ingest`: the bounded queue and the writer thread that commits batches and
  marks quiet traces complete;
- :mod:`assay.monitor.config`: ``monitor.yaml``, read strictly, and the hash sampling;
- :mod:`assay.monitor.scoring`: the online evaluation, complete traces scored with the engine of
  ``assay eval``, errored ones retried;
- :mod:`assay.monitor.alerts`: windows with bootstrap intervals, the alert rules and their sinks;
- :mod:`assay.monitor.export`: each score sent back as an OpenTelemetry ``gen_ai.evaluation.result``
  event (OTLP/HTTP logs).

The spans and traces are kept in the store (:mod:`assay.store.spans`), the scores and alerts too
(:mod:`assay.store.monitor`); the dashboard shows them at ``/monitor`` (:mod:`assay.ui.monitor_pages`).
"""
