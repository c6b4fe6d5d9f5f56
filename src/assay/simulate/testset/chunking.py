"""Cutting documents into chunks that keep their headings, with ids that stay the same.

A chunk is the run of paragraphs under one heading path (``Leave > Sick leave``), packed up to
about ``max_chars`` characters; a paragraph longer than that is cut at sentence ends. Headings
open a new chunk, so no chunk mixes two sections.

A chunk's id is ``<doc_uri>#<heading path slug>:<index>``, e.g.
``policies/leave.md#leave/sick-leave:0``: the document, the slugs of its headings from the top,
and its place among the chunks of that section (counted from 0). Editing one section leaves the
ids of every other section as they were, and the same documents always give the same ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from assay.simulate.testset.readers import SourceDoc

MAX_CHARS = 1000
MIN_CHARS = 40          # a section's text shorter than this is joined to the chunk before it, in one section
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Chunk:
    """A piece of one document under one heading path."""

    id: str
    doc_uri: str
    headings: tuple[str, ...]
    index: int
    text: str

    @property
    def heading(self) -> str:
        return " > ".join(self.headings)

    def as_passage(self) -> str:
        """The text a model reads: the heading path, then the text."""
        return f"{self.heading}\n{self.text}" if self.headings else self.text


def slug(text: str) -> str:
    s = re.sub(r"[^\w]+", "-", text.lower(), flags=re.UNICODE).strip("-")
    return s or "section"


def _pieces(para: str, max_chars: int) -> list[str]:
    if len(para) <= max_chars:
        return [para]
    out: list[str] = []
    cur = ""
    for sentence in _SENTENCE.split(para):
        while len(sentence) > max_chars:          # one sentence longer than a chunk: cut at a space
            cut = sentence.rfind(" ", 0, max_chars)
            cut = cut if cut > 0 else max_chars
            if cur:
                out.append(cur)
                cur = ""
            out.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if cur and len(cur) + 1 + len(sentence) > max_chars:
            out.append(cur)
            cur = sentence
        else:
            cur = f"{cur} {sentence}".strip()
    if cur:
        out.append(cur)
    return out


def _sections(doc: SourceDoc) -> Iterable[tuple[tuple[str, ...], list[str]]]:
    path: list[tuple[int, str]] = []
    paras: list[str] = []
    for b in doc.blocks:
        if b.level:
            if paras:
                yield tuple(t for _, t in path), paras
                paras = []
            while path and path[-1][0] >= b.level:
                path.pop()
            path.append((b.level, b.text))
        else:
            paras.append(b.text)
    if paras:
        yield tuple(t for _, t in path), paras


def _pack(paras: Sequence[str], max_chars: int) -> list[str]:
    out: list[str] = []
    cur = ""
    for para in paras:
        for piece in _pieces(para, max_chars):
            if cur and len(cur) + 2 + len(piece) > max_chars:
                out.append(cur)
                cur = piece
            else:
                cur = f"{cur}\n\n{piece}" if cur else piece
    if cur:
        if out and len(cur) < MIN_CHARS:
            out[-1] = f"{out[-1]}\n\n{cur}"
        else:
            out.append(cur)
    return out


def chunk_document(doc: SourceDoc, max_chars: int = MAX_CHARS) -> list[Chunk]:
    """The chunks of one document, in reading order."""
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for headings, paras in _sections(doc):
        key = "/".join(slug(h) for h in headings) or "top"
        for text in _pack(paras, max_chars):
            i = seen.get(key, 0)
            seen[key] = i + 1
            chunks.append(Chunk(f"{doc.uri}#{key}:{i}", doc.uri, headings, i, text))
    return chunks


def chunk_documents(docs: Iterable[SourceDoc], max_chars: int = MAX_CHARS) -> list[Chunk]:
    """The chunks of every document, in the documents' order."""
    if max_chars < 200:
        from assay.errors import AssayError

        raise AssayError(f"--chunk-chars must be at least 200, got {max_chars}")
    return [c for d in docs for c in chunk_document(d, max_chars)]
