"""A fingerprint of the evaluated data, so that a run is resumed only over the same data."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from assay.formats import Dataset

_BLOCK = 1 << 20


def data_fingerprint(data: Any) -> str | None:
    """sha256 of a file's bytes, of every file in a folder (by relative path), or of
    in-memory rows (a DataFrame or a list of dicts); None for anything else (an iterator
    is consumed once and cannot be fingerprinted ahead).

    A :class:`~assay.formats.Dataset` is fingerprinted by what it was opened on; one over a
    stream (stdin, a FIFO) by the sha256 its spool took while reading it, for a stream cannot
    be read again (None before its rows are read)."""
    if isinstance(data, Dataset):
        if data.stream is not None:
            return data.stream.sha256
        data = data.input
    h = hashlib.sha256()
    if isinstance(data, (str, Path)):
        p = Path(data)
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            h.update(os.fsencode(f.relative_to(p) if p.is_dir() else f.name) + b"\0")
            try:
                with open(f, "rb") as fh:
                    while block := fh.read(_BLOCK):
                        h.update(block)
            except OSError:
                return None
        return h.hexdigest()
    if hasattr(data, "to_json") and hasattr(data, "columns"):
        h.update(data.to_json(orient="records", date_format="iso").encode())
        return h.hexdigest()
    if isinstance(data, (list, tuple)):
        try:
            h.update(orjson.dumps(list(data), option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY,
                                  default=str))
        except TypeError:
            return None
        return h.hexdigest()
    return None


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(config, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()
