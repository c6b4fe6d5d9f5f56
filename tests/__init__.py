"""assay's test suite. A package so that its shared helpers import as ``tests.helpers.<module>``
(the repository root is on ``sys.path`` through ``pythonpath`` in pyproject.toml's pytest options)."""
