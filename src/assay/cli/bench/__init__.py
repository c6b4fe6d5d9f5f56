"""``assay bench ...``: the benchmark command group (its commands are in this package's modules)."""

from assay.cli.bench.perf import app

__all__ = ["app"]
