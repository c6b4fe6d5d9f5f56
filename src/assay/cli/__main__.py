"""``python -m assay.cli`` runs the ``assay`` command."""

from assay.cli.main import main

main()
