"""``assay eval``'s CI options: quality gates (``--gate``, ``--baseline``, ``--min-effect``,
``--max-error-rate``) and the reports CI systems display (``--summary-md``, ``--junit``).

:func:`prepare` checks them before the run (a malformed gate or an unknown baseline costs no
judge call); :func:`finish` judges the gates on the finished run, writes the reports, prints the
gates and returns the exit code: 1 when a gate failed, else 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.cli.common import fmt, open_store, out, safe
from assay.errors import AssayError


@dataclass
class GateSetup:
    gates: list[Any] = field(default_factory=list)
    baseline: dict[str, Any] | None = None
    store: Any = None
    min_effect: dict[str | None, float] = field(default_factory=dict)
    max_error_rate: float = 0.1
    summary_md: Path | None = None
    junit: Path | None = None


def prepare(gate: list[str], baseline: str | None, min_effect: list[str], max_error_rate: float,
            summary_md: Path | None, junit: Path | None, store: str | None) -> GateSetup:
    """The CI options checked, the baseline run found; :class:`AssayError` (exit 2) otherwise.
    ``--baseline`` without a regression gate means ``--gate no-regression``."""
    from assay.engine import gates as G

    setup = GateSetup(gates=G.parse_gates(gate), min_effect=G.parse_min_effect(min_effect),
                      max_error_rate=G.check_max_error_rate(max_error_rate), summary_md=summary_md, junit=junit)
    if setup.gates or setup.min_effect:
        G.check_names(setup.gates, setup.min_effect)
    regression = [g for g in setup.gates if g.kind == "regression"]
    if regression and not baseline:
        raise AssayError(f"--gate {regression[0].text!r} needs --baseline RUN (a run name or id in the store)")
    if setup.min_effect and not baseline:
        raise AssayError("--min-effect applies to regression gates: add --baseline RUN")
    if baseline:
        st = open_store(store)
        setup.store, setup.baseline = st, G.resolve_baseline(st, baseline)
        if not regression:
            setup.gates.append(G.parse_gate(G.REGRESSION))
    for path, opt in ((summary_md, "--summary-md"), (junit, "--junit")):
        if path is not None and path.is_dir():
            raise AssayError(f"{opt} {path}: is a folder; name a file")
    return setup


def finish(setup: GateSetup, result: Any, store: str | None) -> int:
    """Judge the gates on ``result``, write the reports asked for, print the gates; the exit code."""
    if not setup.gates and setup.summary_md is None and setup.junit is None:
        return 0                        # nothing asked: the gates' and reports' modules stay unloaded
    from assay.engine.gates import check_gates
    from assay.results.ci_report import gates_verdict, junit_xml, markdown_summary

    st = setup.store
    if st is None and setup.gates and result.run.get("run_id"):
        st = open_store(store)   # the score columns: the figures' intervals without reading rows again
    results = [r.as_dict() for r in check_gates(setup.gates, result, store=st, baseline=setup.baseline,
                                                min_effect=setup.min_effect, max_error_rate=setup.max_error_rate)]
    if results:
        result.run["gates"] = results
        result.save_summary()           # summary.json under --out gets the verdicts too
    if setup.summary_md is not None:
        _write(setup.summary_md, markdown_summary(result, results), "--summary-md",
               append=_is_step_summary(setup.summary_md))
        out.print(f"summary written to {safe(str(setup.summary_md))}", highlight=False)
    if setup.junit is not None:
        _write(setup.junit, junit_xml(result, results), "--junit")
        out.print(f"JUnit report written to {safe(str(setup.junit))}", highlight=False)
    if not results:
        return 0
    print_gates(results, setup.baseline)
    failed = [r for r in results if not r["passed"]]
    out.print(("[red]gates: " if failed else "[green]gates: ") + gates_verdict(results)
              + ("[/red]" if failed else "[/green]"), highlight=False)
    return 1 if failed else 0


def print_gates(results: list[dict[str, Any]], baseline: dict[str, Any] | None) -> None:
    title = "gates"
    if baseline is not None:
        title += f" (baseline: run {baseline['id']}" + (f", {baseline['name']}" if baseline.get("name") else "") + ")"
    from rich.table import Table

    table = Table(title=safe(title), title_justify="left")
    for col, kw in (("gate", {}), ("figure", {"justify": "right"}), ("95% interval", {"justify": "right"}),
                    ("bound", {}), ("verdict", {}), ("why", {"overflow": "fold"})):
        table.add_column(col, **kw)
    for r in results:
        lo, hi = r.get("ci95_low"), r.get("ci95_high")
        if r["kind"] == "regression":
            fig = "—" if r["figure"] is None else f"Δ {r['figure']:+.3f}"
            ci = "—" if lo is None else f"{lo:+.3f} to {hi:+.3f}"
        else:
            fig = fmt(int(r["figure"])) if r["statistic"] in ("errored", "evaluated", "skipped") and \
                r["figure"] is not None else fmt(r["figure"], 4)
            ci = "—" if lo is None else f"{lo:.3f}–{hi:.3f}"
        verdict = {"pass": "[green]pass[/green]", "tolerated": "[yellow]tolerated[/yellow]",
                   "not_measured": "[bold red]NOT MEASURED[/bold red]"}.get(r["verdict"], "[bold red]FAIL[/bold red]")
        table.add_row(safe(r["gate"]), fig, ci, safe(r["bound"]), verdict, safe(r.get("reason") or ""))
    out.print(table)


def _is_step_summary(path: Path) -> bool:
    env = os.environ.get("GITHUB_STEP_SUMMARY")
    try:
        return bool(env) and Path(env).resolve() == path.resolve()
    except OSError:
        return False


def _write(path: Path, text: str, opt: str, append: bool = False) -> None:
    """Write (or, for GitHub's step summary file, append) ``text``; one clear line on failure."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a" if append else "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise AssayError(f"{opt} {path}: cannot write it ({exc.strerror or exc})") from None
