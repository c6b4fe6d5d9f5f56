"""``assay report RUN -o report.html``: one self-contained HTML file for a stored run.

The file holds the run summary (data, rows, judge and its note, usage), a red-team run's
scorecard (ASR by strategy x category and by complexity, with intervals and OWASP / ATLAS ids:
:mod:`assay.ui.redteam_pages`), a card per metric
output with its score histogram (inline SVG), the worst rows of each output with every
score, reason and input, and a table of the first ``max_rows`` rows. The stylesheet is
inline; there is no script and no external resource, and a Content-Security-Policy in the
file forbids both, so it opens offline and nothing in an evaluated text can run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from assay.store import Store
from assay.store import queries as Q
from assay.ui import charts
from assay.ui.redteam_pages import scorecard_view
from assay.ui.render import inline_stylesheet, render

MAX_ROWS = 2000
WORST = 10
MAX_COLUMNS = 12


def render_report(store: Store, ref: str, *, max_rows: int = MAX_ROWS, worst: int = WORST) -> str:
    """The report of run ``ref`` (id, id prefix, name or ``last``) as an HTML string."""
    from assay.version import __version__

    run = store.get_run(ref)
    outputs = Q.run_outputs(run)
    names = [o["output"] for o in outputs]
    hists = Q.run_histograms(store, run)
    svgs = {o: charts.histogram(h, label=o) for o, h in hists.items()}
    worst_rows: dict[str, list[dict[str, Any]]] = {}
    for o in outputs:
        rows = Q.worst_rows(store, run, o["output"], limit=max(0, worst)) if worst > 0 else []
        for r in rows:
            r["score_list"] = [{"output": k, **v} for k, v in r["scores"].items()]
        worst_rows[o["output"]] = rows
    total = store.count_rows(run["id"])
    rows = Q.first_rows(store, run["id"], max(0, max_rows))
    redteam = scorecard_view((run.get("summary") or {}).get("redteam"))
    return render("report.html.j2", run=run, summary=run.get("summary") or {}, outputs=outputs, hists=svgs,
                  redteam=redteam,
                  worst=worst_rows, worst_n=worst, rows=rows, shown_rows=len(rows), total_rows=total,
                  shown=names[:MAX_COLUMNS], css=inline_stylesheet(), generated_at=time.time(),
                  version=__version__)


def write_report(store: Store, ref: str, path: str | Path, *, max_rows: int = MAX_ROWS,
                 worst: int = WORST) -> Path:
    """Write the report of run ``ref`` to ``path``; returns the path."""
    html = render_report(store, ref, max_rows=max_rows, worst=worst)
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
