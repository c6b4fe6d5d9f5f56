"""``assay review``: queues of a run's rows for people to label (on the dashboard's ``/review``
page), and how well the reviewers agree with each other and with the judge.

``assay review create NAME --run RUN --metric M`` samples the rows (``--from random``,
``disagreements`` with ``--against`` another output, or ``flaky`` rows of a run with repeats);
``assay review list`` lists the queues; ``assay review agreement NAME`` prints Cohen's kappa (two
raters), Fleiss' kappa and Krippendorff's alpha with 95% bootstrap intervals, between the
reviewers and between the judge and the reviewers (docs/review.md).
"""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from assay.cli.common import STORE_OPT, open_store, out, print_json, safe, when
from assay.errors import AssayError

app = typer.Typer(no_args_is_help=True,
                  help="Queues of a run's rows for people to label, and the agreement of reviewers and judge.")


@app.command("create")
def create_cmd(
    name: str = typer.Argument(..., help="The queue's name (the dashboard's /review page lists it)."),
    run: str = typer.Option(..., "--run", "-r", help="The run whose rows to review: id, id prefix, name or last."),
    metric: str = typer.Option(..., "--metric", "-m", help="The metric (or metric.output) whose verdicts to review."),
    sample: int = typer.Option(50, "--sample", "-n", help="How many rows to pick (fewer when fewer qualify)."),
    source: str = typer.Option("random", "--from", help="random, disagreements (with --against) or flaky."),
    against: str | None = typer.Option(None, "--against", help="--from disagreements: the rule or second scorer "
                                                               "(metric or metric.output) to compare with."),
    scale: str = typer.Option("pass_fail", "--scale", help="The labels reviewers give: pass_fail or 1-5."),
    seed: int = typer.Option(0, "--seed", help="The seed of the sample (the same seed picks the same rows)."),
    json_out: bool = typer.Option(False, "--json", help="Print the queue as JSON."),
    store: str | None = STORE_OPT,
) -> None:
    """Make a review queue: rows sampled from a run, for people to label on the dashboard."""
    from assay.store.review import ReviewLog

    st = open_store(store)
    try:
        q = ReviewLog(st).create(name, run, metric, sample=sample, source=source, against=against, seed=seed,
                                 scale=scale)
    finally:
        st.close()
    if json_out:
        print_json(q)
        return
    out.print(f"review queue {safe(q['name'])}: {len(q['idxs'])} {safe(q['source'])} rows of run "
              f"{safe(q['run_id'])} for {safe(q['metric'])}.{safe(q['output'])} ({safe(q['scale'])}); label them on "
              "the dashboard's /review page (`assay ui`)", highlight=False, soft_wrap=True)


@app.command("list")
def list_cmd(json_out: bool = typer.Option(False, "--json", help="Print the queues as JSON."),
             store: str | None = STORE_OPT) -> None:
    """List the review queues, newest first, with how many labels each has."""
    from assay.store.review import ReviewLog

    st = open_store(store)
    try:
        queues = ReviewLog(st).queues()
    finally:
        st.close()
    if json_out:
        print_json(queues)
        return
    table = Table(title="review queues", title_justify="left")
    for col in ("name", "run", "metric", "from", "scale", "rows", "labels", "created"):
        table.add_column(col)
    for q in queues:
        table.add_row(safe(q["name"]), safe(q["run_id"]), safe(f"{q['metric']}.{q['output']}"), safe(q["source"]),
                      safe(q["scale"]), str(len(q["idxs"])), str(q["labels"]), when(q["created_at"]))
    out.print(table)


def _fig(a: dict[str, Any]) -> str:
    if a.get("value") is None:
        return "— (undefined: every label the same, or no pairs)"
    ci = f" [{a['ci_low']:.2f}–{a['ci_high']:.2f}]" if a.get("ci_low") is not None else ""
    return f"{a['value']:.3f}{ci}  ({a['units']} rows)"


@app.command("agreement")
def agreement_cmd(
    name: str = typer.Argument(..., help="The review queue."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
    store: str | None = STORE_OPT,
) -> None:
    """Agreement between the reviewers of a queue, and between the judge and the reviewers."""
    from assay.store.review import ReviewLog

    st = open_store(store)
    try:
        rep = ReviewLog(st).agreement(name)
    finally:
        st.close()
    if json_out:
        print_json(rep)
        return
    if not rep["reviewers"]:
        raise AssayError(f"review queue {name}: no labels yet (label rows on the dashboard's /review page)")
    table = Table(title=f"agreement on {safe(name)}: {safe(rep['metric'])}, {rep['labelled_rows']} labelled rows, "
                        f"reviewers {safe(', '.join(rep['reviewers']))}", title_justify="left")
    table.add_column("between")
    table.add_column("statistic")
    table.add_column("value [95% CI]", justify="right")
    for stat, a in rep["between_reviewers"].items():
        table.add_row("reviewers", stat, _fig(a))
    for stat, a in rep["judge_with_reviewers"].items():
        table.add_row("judge + reviewers", stat, _fig(a))
    for reviewer, a in rep["judge_vs_each"].items():
        table.add_row(f"judge vs {safe(reviewer)}", "cohen_kappa", _fig(a))
    out.print(table)
