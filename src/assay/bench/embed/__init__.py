"""The embedding benchmark: an embedding model on MTEB-style tasks (``assay bench embed``, docs/embed.md)."""
