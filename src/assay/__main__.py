"""``python -m assay`` runs the ``assay`` command (as ``python -m assay.cli`` does)."""

from assay.cli.main import main

main()
