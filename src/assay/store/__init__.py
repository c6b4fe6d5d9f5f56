"""The results store: every run, its rows and scores, benchmark results."""

from assay.store.store import StoredRow, Store, default_store_url, open_store

__all__ = ["Store", "StoredRow", "default_store_url", "open_store"]
