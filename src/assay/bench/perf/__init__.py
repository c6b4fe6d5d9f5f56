"""The serving-performance benchmark (``assay bench perf``, docs/bench.md)."""
