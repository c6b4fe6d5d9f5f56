"""The quality benchmark: a model on standard tasks (``assay bench quality``, docs/quality.md)."""
