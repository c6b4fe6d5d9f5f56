"""The local dashboard (``assay ui``) and self-contained HTML reports (``assay report``).

Needs the ``ui`` extra (FastAPI, uvicorn, Jinja2). :func:`assay.ui.server.create_app`
builds the app over a store; :func:`assay.ui.report.write_report` writes a report.
"""
