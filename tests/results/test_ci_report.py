"""The CI reports (results/ci_report.py): the Markdown summary renders as tables with no link and
no markup from the data (checked with GitHub's own renderer, cmark-gfm), the JUnit XML is valid
whatever the data holds, and the worst rows are the worst."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from assay.results import EvalResult
from assay.results.ci_report import junit_xml, markdown_summary, md_text, worst_rows

HOSTILE = [
    "see [the docs](https://evil.example/x) and ![img](https://evil.example/p.png)",
    "bare https://evil.example/steal www.evil.example mail me: bob@evil.example cc @octocat",
    "<script>alert(1)</script><img src=x onerror=alert(2)></details><a href='https://x'>x</a>",
    "pipes | break | tables\nand new\nlines `code` **bold** ~~gone~~ $x^2$ [/b] [link=https://x]y[/link]",
    "terminal \x1b]0;pwned\x07title \x1b[31mred\x1b[0m C1\x9b31m bidi \u202egnp.exe\u202c NUL\x00 DEL\x7f",
]


def _row(i, query, score, reason, harm):
    return {"inputs.id": f"row-{i} [/b] | @admin", "inputs.query": query, "inputs.response": query[::-1],
            "outputs.f1_score.f1_score_score": score, "outputs.f1_score.f1_score_result": "fail" if score < .5 else "pass",
            "outputs.f1_score.f1_score_reason": reason,
            "outputs.violence.violence_score": harm, "outputs.violence.violence_result": "pass",
            "outputs.violence.violence_reason": reason}


def hostile_result() -> EvalResult:
    rows = [_row(i, q, 0.1 * i, q, float(7 - i)) for i, q in enumerate(HOSTILE)]
    rows.append({"inputs.id": "errored", "inputs.query": "q", "outputs.f1_score.f1_score_score": None,
                 "outputs.f1_score.f1_score_status": "error", "outputs.violence.violence_score": 0.0})
    metrics = {
        "f1_score": {"metric": "f1_score", "mean": 0.2, "ci95_low": 0.0, "ci95_high": 0.4, "median": 0.2, "p90": 0.36,
                     "pass_rate": 0.0, "evaluated": 5, "skipped": 0, "errored": 1, "higher_is_better": True,
                     "error_reasons": {HOSTILE[0]: 1}},
        "violence": {"metric": "violence", "mean": 4.2, "ci95_low": 3.0, "ci95_high": 5.0, "evaluated": 6,
                     "skipped": 0, "errored": 0, "higher_is_better": False, "defect_rate": 0.5},
    }
    run = {"name": HOSTILE[1], "run_id": "abc123", "source": "data [x](https://e.example).jsonl", "rows_read": 6,
           "rows_evaluated": 6, "rows_skipped": 0, "rows_errored": 1, "duration_s": 1.5,
           "judge": "openai:gpt-4o-mini", "judge_usage": {"calls": 3, "cache_hits": 1, "cost_usd": 0.0012}}
    return EvalResult(metrics=metrics, run=run, rows=rows)


GATES = [
    {"gate": "f1_score.mean>=0.5 [x](https://evil.example)", "kind": "threshold", "output": "f1_score",
     "statistic": "mean", "figure": 0.2, "ci95_low": 0.0, "ci95_high": 0.4, "bound": ">= 0.5", "passed": False,
     "verdict": "fail", "reason": "f1_score mean is 0.2, not >= 0.5 <b>|</b>\x1b[2J", "details": {}},
    {"gate": "no-regression:violence", "kind": "regression", "output": "violence", "statistic": "mean (Δ vs baseline)",
     "figure": -0.5, "ci95_low": -1.0, "ci95_high": 0.1, "bound": "not significantly higher", "passed": True,
     "verdict": "pass", "reason": "", "details": {"baseline_mean": 4.7, "mean": 4.2}},
]


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_every_table_keeps_its_shape_and_no_raw_markup_survives():
    md = markdown_summary(hostile_result(), GATES)
    tables: list[list[str]] = []
    prev = ""
    for line in md.splitlines():
        if line.startswith("|"):
            if not prev.startswith("|"):
                tables.append([])
            tables[-1].append(line)
        prev = line
    # gates, metrics, and the worst rows of both outputs
    assert len(tables) == 4
    for t in tables:
        assert len({_unescaped_pipes(line) for line in t}) == 1, t
    assert [len(t) - 2 for t in tables] == [2, 2, 5, 5]
    for bad in ("\x1b", "\x9b", "\x00", "\x7f", "\u202e", "<script", "<img", "</details><a", "](http", "https://"):
        assert bad not in md, bad
    assert md.count("<details>") == 2 and md.count("</details>") == 2     # only our own
    assert "@&#8288;octocat" in md and "bob@&#8288;evil" in md


def test_github_renders_the_summary_without_links_or_markup_from_the_data():
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="cmarkgfm (GitHub's renderer) is in the dev extra")
    from cmarkgfm.cmark import Options

    md = markdown_summary(hostile_result(), GATES)
    html = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    for bad in ("<a ", "<img", "<script", "<code>", "<strong>b", "<del>", "<em>"):
        assert bad not in html, bad
    assert html.count("<table>") == 4 and html.count("<details>") == 2
    assert html.count("<tr>") == (1 + 2) + (1 + 2) + (1 + 5) + (1 + 5)
    # the data is still there, as text
    assert "[the docs](https://evil.example/x)" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "pipes | break | tables and new lines `code` **bold**" in html
    assert "row-0 [/b] | @\u2060admin" in html
    assert "<strong>FAIL</strong>" in html                               # the verdict's own emphasis


def test_md_text_is_one_line_and_bounded():
    s = md_text("a\nb\tc  " + "x" * 500, limit=20)
    assert "\n" not in s and s.startswith("a b c") and s.endswith("…") and len(s) <= 20


def test_worst_rows_are_the_lowest_scores_or_the_highest_harms():
    worst = worst_rows(hostile_result(), 3)
    assert [r["score"] for r in worst["f1_score"]] == pytest.approx([0.0, 0.1, 0.2])   # the errored row is left out
    assert [r["score"] for r in worst["violence"]] == [7.0, 6.0, 5.0]
    assert worst["f1_score"][0]["reason"] == HOSTILE[0]


def test_junit_is_valid_xml_whatever_the_data_holds():
    text = junit_xml(hostile_result(), GATES + [dict(GATES[0], gate="nul\x00 \ufffe \ud800 esc\x1b[0m",
                                                      reason="bad\x0b\x0c")])
    suite = ET.fromstring(text.encode("utf-8"))
    assert suite.tag == "testsuite" and suite.get("tests") == "5" and suite.get("failures") == "3"
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == ["assay.gates"] * 3 + ["assay.metrics.f1_score",
                                                                          "assay.metrics.violence"]
    assert cases[0].find("failure").get("message").startswith("f1_score mean is 0.2")
    assert cases[1].find("failure") is None
    assert cases[2].get("name") == "nul   esc"    # control characters and non-characters dropped
    assert "failed gates" in cases[3].find("failure").get("message")
    assert cases[4].find("failure") is None and cases[3].find("system-err") is not None
    assert suite.get("time") == "1.500"
