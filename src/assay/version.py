"""The package version, kept where every layer may read it."""

__version__ = "0.1.0"
