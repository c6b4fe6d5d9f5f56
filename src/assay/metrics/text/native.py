"""The compiled speed-ups of the classic text metrics, where they are built.

``setup.py`` builds two optional C extensions next to this module when the package is installed
(``pip install -e .`` / ``make``): ``ngram_native`` (n-gram clipping, LCS) and
``tokenize_native`` (NLTK-equal word tokens). Each metric uses the compiled function when its
module imports and its pure-Python twin otherwise; both give the same values (the tests run
both). ``ASSAY_NATIVE=0`` in the environment switches the compiled code off.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["load", "status"]

NAMES = ("ngram_native", "tokenize_native")


def enabled() -> bool:
    """False when ``ASSAY_NATIVE=0`` (or ``false``/``no``/``off``) is set."""
    return os.environ.get("ASSAY_NATIVE", "1").strip().lower() not in ("0", "false", "no", "off")


def load(name: str) -> ModuleType | None:
    """The compiled module ``name`` (one of :data:`NAMES`), or None when it is not built or
    switched off."""
    if name not in NAMES:
        raise ValueError(f"unknown native module {name!r}")
    if not enabled():
        return None
    try:
        return importlib.import_module(f"assay.metrics.text.{name}")
    except ImportError:
        return None


def status() -> dict[str, bool]:
    """Which compiled modules are in use, by name."""
    return {name: load(name) is not None for name in NAMES}
