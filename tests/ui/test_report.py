"""``assay report``: one self-contained HTML file, escaped, with the summary, charts and rows."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from assay.cli import ui as commands
from assay.ui.report import render_report, write_report
from tests.helpers.uihelpers import N, assert_escaped, tags


def test_report_is_self_contained_and_escaped(ui_store: dict[str, Any], tmp_path) -> None:
    path = write_report(ui_store["store"], ui_store["base"], tmp_path / "r" / "report.html")
    html = path.read_text(encoding="utf-8")
    assert_escaped(html)
    low = html.lower()
    assert "<script" not in low and "<link" not in low and "@import" not in low and "url(" not in low
    for tag, attrs in tags(html):                                  # no element loads anything
        assert tag not in ("link", "img", "iframe", "object", "embed", "script")
        assert all(name != "src" for name, _ in attrs), tag
    assert "content-security-policy" in low and "default-src 'none'" in html
    assert "<style>" in html and ".cards" in html                  # the stylesheet is inline
    res = ui_store["base_result"]
    for output, agg in res.metrics.items():
        assert f'id="card-{output}"' in html and f"{agg['mean']:.3f}" in html
        assert f"{agg['ci95_low']:.3f} – {agg['ci95_high']:.3f}" in html
    assert html.count("<svg") >= 2
    assert "judge note:" in html and "smoke-test judge &lt;script&gt;" in html
    assert f"All {N} rows, in input order." in html
    assert html.split('id="rows-table"')[1].count("<tr>") == N + 1


def test_report_caps_rows_and_adds_the_worst_per_output(ui_store: dict[str, Any]) -> None:
    html = render_report(ui_store["store"], ui_store["base"], max_rows=5, worst=3)
    assert f"The first 5 of {N} rows" in html and f"assay export {ui_store['base']}" in html
    assert html.split('id="rows-table"')[1].count("<tr>") == 6
    worst = html.split('id="worst"')[1].split('id="rows"')[0]
    assert worst.count("<details") == 6                            # 3 per output, 2 outputs
    rows = ui_store["base_result"].rows
    lowest = sorted((r["outputs.ui_judge.ui_judge_score"], i) for i, r in enumerate(rows)
                    if r["outputs.ui_judge.ui_judge_score"] is not None)[:3]
    judge_part = worst.split("<h3>ui_judge")[1]
    for _, i in lowest:
        assert f"<summary>row {i} " in judge_part
    assert "row 0 reason &lt;img src=x onerror=" in worst           # reasons in full, escaped
    assert 'href="javascript:' not in html


def test_report_command_writes_the_file(ui_store: dict[str, Any], tmp_path) -> None:
    app = typer.Typer()
    app.command()(commands.report_cmd)
    app.command("x")(lambda: None)
    out = tmp_path / "cand.html"
    res = CliRunner().invoke(app, ["report-cmd", "candidate", "-o", str(out), "--store", ui_store["path"],
                                   "--max-rows", "10"])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and out.exists()
    html = out.read_text(encoding="utf-8")
    assert ui_store["cand"] in html and f"The first 10 of {N} rows" in html
    res = CliRunner().invoke(app, ["report-cmd", "no-such-run", "-o", str(tmp_path / "x.html"),
                                   "--store", ui_store["path"]])
    assert res.exit_code != 0 and "no run 'no-such-run'" in str(res.exception)
