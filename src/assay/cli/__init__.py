"""The ``assay`` command line: ``main`` mounts one module per command group."""
