"""Reading and chunking documents for `assay simulate testset`: Markdown, text, HTML, PDF."""

from __future__ import annotations

import pytest

from assay.errors import AssayError
from assay.simulate.testset.chunking import chunk_document, chunk_documents
from assay.simulate.testset.readers import (
    PDF_HINT,
    SourceDoc,
    pdf_available,
    read_documents,
    read_html,
    read_markdown,
    read_text,
)
from tests.helpers.testset_brain import EXAMPLE_DOCS


def test_markdown_headings_and_paragraphs():
    blocks = read_markdown("# Leave\n\nIntro line\nwraps here.\n\n## Sick leave\n\nTell your manager.\n\n"
                           "```\n# not a heading\n```\n")
    assert [(b.level, b.text) for b in blocks] == [
        (1, "Leave"), (0, "Intro line wraps here."), (2, "Sick leave"), (0, "Tell your manager."),
        (0, "```\n# not a heading\n```")]


def test_text_short_lone_lines_are_headings():
    blocks = read_text("ON-CALL GUIDE\n\nWho is on call\n\nOne engineer is on call each week.\n")
    assert [(b.level, b.text) for b in blocks] == [(1, "ON-CALL GUIDE"), (2, "Who is on call"),
                                                   (0, "One engineer is on call each week.")]


def test_html_text_stays_text_and_scripts_are_dropped():
    page = ("<html><head><title>T</title><style>p{}</style></head><body><nav><a>Home</a></nav>"
            "<h1>Glossary</h1><h2>House style</h2><p>Paths are &lt;em&gt;red dashes&lt;/em&gt; &amp; "
            "<b>water</b> is blue.</p><script>alert(1)</script><ul><li>one</li><li>two</li></ul></body></html>")
    blocks = read_html(page)
    assert [(b.level, b.text) for b in blocks] == [
        (1, "Glossary"), (2, "House style"), (0, "Paths are <em>red dashes</em> & water is blue."),
        (0, "one"), (0, "two")]


def test_chunk_ids_keep_the_heading_path_and_are_stable():
    doc = SourceDoc("policies/leave.md", "markdown", read_markdown(
        "# Leave\n\n## Sick leave\n\n" + "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(5))
        + "\n\n## Annual leave\n\nTwenty-seven days a year, plus public holidays, for everyone.\n"))
    chunks = chunk_document(doc, max_chars=700)
    assert [c.id for c in chunks] == ["policies/leave.md#leave/sick-leave:0", "policies/leave.md#leave/sick-leave:1",
                                      "policies/leave.md#leave/sick-leave:2", "policies/leave.md#leave/annual-leave:0"]
    assert all(len(c.text) <= 700 for c in chunks)
    assert chunks[0].as_passage().startswith("Leave > Sick leave\n")
    assert [c.id for c in chunk_document(doc, max_chars=700)] == [c.id for c in chunks]


def test_the_shipped_handbook_reads_in_every_format():
    docs, skipped = read_documents(EXAMPLE_DOCS)
    kinds = {d.uri: d.kind for d in docs}
    assert kinds["policies/leave.md"] == "markdown" and kinds["on-call.txt"] == "text"
    assert kinds["glossary.html"] == "html" and len(docs) >= 8 and skipped == []
    chunks = chunk_documents(docs)
    ids = [c.id for c in chunks]
    assert len(ids) == len(set(ids))
    glossary = " ".join(c.text for c in chunks if c.doc_uri == "glossary.html")
    assert "<em>red dashes</em>" in glossary
    assert not any("console.log" in c.text or "Intranet home" in c.text for c in chunks)


def test_pdf_without_pypdf_is_skipped_with_a_line(tmp_path, monkeypatch):
    (tmp_path / "a.md").write_text("# A\n\nSome text about the team's rules and its habits.\n")
    (tmp_path / "b.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    (tmp_path / "c.docx").write_bytes(b"PK")
    monkeypatch.setattr("assay.simulate.testset.readers.pdf_available", lambda: False)
    docs, skipped = read_documents(tmp_path)
    assert [d.uri for d in docs] == ["a.md"]
    assert skipped == [f"b.pdf: skipped ({PDF_HINT})", "c.docx: skipped (not Markdown, text, HTML or PDF)"]


@pytest.mark.skipif(not pdf_available(), reason="pypdf is not installed (pip install 'assay[pdf]')")
def test_pdf_pages_are_read_with_pypdf(tmp_path):  # pragma: no cover - needs the optional extra
    import pypdf

    w = pypdf.PdfWriter()
    w.add_blank_page(200, 200)
    with open(tmp_path / "blank.pdf", "wb") as fh:
        w.write(fh)
    (tmp_path / "a.md").write_text("# A\n\nSome text about the team's rules and its habits.\n")
    docs, skipped = read_documents(tmp_path)
    assert [d.uri for d in docs] == ["a.md"] and skipped == ["blank.pdf: skipped (no text)"]


def test_no_readable_document_is_one_clear_error(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"\0\1")
    with pytest.raises(AssayError, match="no Markdown, text, HTML or PDF document"):
        read_documents(tmp_path)
    with pytest.raises(AssayError, match="no such file or folder"):
        read_documents(tmp_path / "missing")
