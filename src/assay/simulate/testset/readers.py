"""Reading a team's documents into headed blocks: Markdown, plain text, HTML and PDF.

:func:`read_documents` walks a file or a folder and returns one :class:`SourceDoc` per file it
can read, each a list of :class:`Block` (a heading with its level, or a paragraph of text),
and a line for every file it passed over and why. A document's ``uri`` is its path relative to
the folder given (``policies/leave.md``), with forward slashes: the ``doc_uri`` a retriever
over the same folder would report.

- **Markdown** (``.md``, ``.markdown``): ATX headings (``#`` to ``######``); the rest is cut into
  paragraphs at blank lines (a fenced code block stays one paragraph).
- **Text** (``.txt``, ``.text``, ``.rst``): paragraphs at blank lines; a paragraph of one short
  line with no closing punctuation is a heading (level 1 when it is in capitals, else 2).
- **HTML** (``.html``, ``.htm``): read with the standard library's :class:`html.parser.HTMLParser`;
  ``h1``–``h6`` are headings, block elements end paragraphs, ``script``/``style``/``template``/
  ``noscript``/``head``/``nav`` are dropped. Character references are decoded once, into text: an
  escaped ``&lt;em&gt;`` in the page stays the text ``<em>``, never markup.
- **PDF** (``.pdf``): the text of each page with ``pypdf`` (``pip install 'assay[pdf]'``), under
  a heading ``page N``; without pypdf each PDF is skipped with a line saying so.

Files of other kinds, hidden files and files that are not UTF-8 text are skipped (with a line).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from assay.errors import AssayError

MARKDOWN = (".md", ".markdown")
TEXT = (".txt", ".text", ".rst")
HTML = (".html", ".htm")
PDF = (".pdf",)
SUFFIXES = MARKDOWN + TEXT + HTML + PDF
PDF_HINT = "PDF needs the pypdf package: pip install 'assay[pdf]'"

_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Block:
    """A heading (``level`` 1–6) or a paragraph (``level`` 0)."""

    level: int
    text: str


@dataclass
class SourceDoc:
    """One file's text as blocks; ``uri`` is its path relative to the folder read."""

    uri: str
    kind: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def title(self) -> str:
        return next((b.text for b in self.blocks if b.level), self.uri)


def _clean(text: str) -> str:
    return " ".join(text.split())


def read_markdown(text: str) -> list[Block]:
    """Headings and paragraphs of a Markdown text."""
    blocks: list[Block] = []
    para: list[str] = []
    fenced = False

    def flush(raw: bool = False) -> None:
        body = "\n".join(para).strip()
        if body:
            blocks.append(Block(0, body if raw else _clean(body)))
        para.clear()

    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if _FENCE.match(line):
            if fenced:                  # the closing fence: the block stays as written
                para.append(line)
                flush(raw=True)
                fenced = False
                continue
            flush()
            fenced = True
        if fenced:
            para.append(line)
            continue
        m = _ATX.match(line)
        if m:
            flush()
            if m.group(2).strip():
                blocks.append(Block(len(m.group(1)), _clean(m.group(2))))
        elif not line.strip():
            flush()
        else:
            para.append(line)
    flush(raw=fenced)
    return blocks


def _looks_like_heading(para: str) -> bool:
    return ("\n" not in para and len(para) <= 70 and len(para.split()) <= 8
            and not para.rstrip().endswith((".", ",", ";", ":", "!", "?")))


def read_text(text: str) -> list[Block]:
    """Paragraphs of a plain text; a lone short line without closing punctuation is a heading."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n").replace("\r", "\n")) if p.strip()]
    blocks = []
    for p in paras:
        if _looks_like_heading(p):
            blocks.append(Block(1 if p.isupper() else 2, _clean(p)))
        else:
            blocks.append(Block(0, _clean(p)))
    return blocks


class _HTMLBlocks(HTMLParser):
    DROP = frozenset(("script", "style", "template", "noscript", "head", "svg", "nav"))
    BREAK = frozenset(("p", "div", "li", "ul", "ol", "table", "tr", "td", "th", "section", "article", "br",
                       "blockquote", "pre", "dd", "dt", "dl", "header", "footer", "main", "nav", "aside",
                       "figure", "figcaption", "hr", "body", "form"))

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self._buf: list[str] = []
        self._drop = 0
        self._heading = 0

    def _flush(self) -> None:
        body = _clean("".join(self._buf))
        self._buf.clear()
        if body:
            self.blocks.append(Block(self._heading, body))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.DROP:
            self._drop += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self._heading = int(tag[1])
        elif tag in self.BREAK:
            self._flush()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.BREAK:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in self.DROP:
            self._drop = max(0, self._drop - 1)
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self._heading = 0
        elif tag in self.BREAK:
            self._flush()

    def handle_data(self, data: str) -> None:
        if not self._drop:
            self._buf.append(data)

    def close(self) -> None:
        super().close()
        self._flush()


def read_html(text: str) -> list[Block]:
    """Headings and paragraphs of an HTML page (standard library parser; text stays text)."""
    p = _HTMLBlocks()
    p.feed(text)
    p.close()
    return p.blocks


def pdf_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("pypdf") is not None


def read_pdf(path: Path) -> list[Block]:
    """The text of each page of a PDF (pypdf), under a heading ``page N``."""
    import pypdf

    try:
        reader = pypdf.PdfReader(str(path))
        pages = [page.extract_text() or "" for page in reader.pages]
    except Exception as exc:  # pypdf raises many kinds on a damaged file
        raise AssayError(f"{path}: cannot read this PDF ({type(exc).__name__}: {exc})") from None
    blocks: list[Block] = []
    for i, text in enumerate(pages, 1):
        paras = [b for b in read_text(text) if b.text]
        if paras:
            blocks.append(Block(1, f"page {i}"))
            blocks.extend(Block(0, b.text) for b in paras)
    return blocks


def _files(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts):
            yield p


def _read_one(p: Path, uri: str) -> tuple[SourceDoc | None, str | None]:
    suffix = p.suffix.lower()
    if suffix not in SUFFIXES:
        return None, f"{uri}: skipped (not Markdown, text, HTML or PDF)"
    if suffix in PDF:
        if not pdf_available():
            return None, f"{uri}: skipped ({PDF_HINT})"
        return SourceDoc(uri, "pdf", read_pdf(p)), None
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        return None, f"{uri}: skipped (not UTF-8 text)"
    except OSError as exc:
        raise AssayError(f"{uri}: cannot read it ({exc})") from None
    if suffix in MARKDOWN:
        return SourceDoc(uri, "markdown", read_markdown(text)), None
    if suffix in HTML:
        return SourceDoc(uri, "html", read_html(text)), None
    return SourceDoc(uri, "text", read_text(text)), None


def read_documents(path: str | Path) -> tuple[list[SourceDoc], list[str]]:
    """``(documents, lines about the files skipped)`` for a file or a folder (read recursively,
    in path order). A folder with no readable document raises :class:`AssayError`."""
    root = Path(path)
    if not root.exists():
        raise AssayError(f"--docs {root}: no such file or folder")
    docs: list[SourceDoc] = []
    skipped: list[str] = []
    for p in _files(root):
        uri = p.name if root.is_file() else p.relative_to(root).as_posix()
        doc, why = _read_one(p, uri)
        if why:
            skipped.append(why)
        elif doc is not None and any(b.level == 0 for b in doc.blocks):
            docs.append(doc)
        else:
            skipped.append(f"{uri}: skipped (no text)")
    if not docs:
        detail = f" ({'; '.join(skipped[:3])})" if skipped else ""
        raise AssayError(f"--docs {root}: no Markdown, text, HTML or PDF document with text{detail}")
    return docs, skipped
