"""The results store: every run, its rows and scores, benchmark results."""

from assay.store.schema import new_ref
from assay.store.store import Store, StoredRow, default_store_url, open_store

__all__ = ["Store", "StoredRow", "default_store_url", "new_ref", "open_store"]
