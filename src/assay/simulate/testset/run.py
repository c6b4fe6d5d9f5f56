"""``generate_testset``: documents in, a checked evaluation set out (see
:mod:`assay.simulate.testset.generation` for how items are written and checked)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from assay.errors import AssayError
from assay.simulate.testset import prompts
from assay.simulate.testset.chunking import MAX_CHARS, Chunk, chunk_documents
from assay.simulate.testset.estimate import Estimate, estimate_testset
from assay.simulate.testset.generation import (
    MIN_CHUNK_CHARS,
    Checker,
    Planner,
    TestsetResult,
    default_max_tries,
    parse_mix,
    quotas,
    row_of,
    run_tries,
)
from assay.simulate.testset.readers import SourceDoc, read_documents
from assay.simulate.testset.similarity import open_similarity

SHAPES = ("databricks", "azure")


def parse_styles(text: str | Sequence[str] | None) -> list[str]:
    """``terse,verbose`` -> the styles, each one of :data:`~assay.simulate.testset.prompts.STYLES`."""
    if text is None:
        return list(prompts.STYLES)
    names = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s and s.strip()]
    for s in names:
        if s not in prompts.STYLES:
            raise AssayError(f"--styles: unknown style {s!r}; styles: {', '.join(prompts.STYLES)}")
    if not names:
        raise AssayError("--styles: name at least one style")
    return list(dict.fromkeys(names))


def read_personas(path: str | Path) -> list[str]:
    """One persona a line; blank lines and ``#`` comments ignored."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise AssayError(f"--personas {path}: cannot read it ({exc})") from None
    out = [x.strip() for x in lines if x.strip() and not x.lstrip().startswith("#")]
    if not out:
        raise AssayError(f"--personas {path}: no persona in the file (one a line)")
    return out


def load_chunks(docs: str | Path | Sequence[SourceDoc], chunk_chars: int = MAX_CHARS
                ) -> tuple[list[Chunk], int, list[str]]:
    """``(usable chunks, documents read, lines about files skipped)``."""
    if isinstance(docs, (str, Path)):
        read, skipped = read_documents(docs)
    else:
        read, skipped = list(docs), []
    chunks = [c for c in chunk_documents(read, chunk_chars) if len(c.text) >= MIN_CHUNK_CHARS]
    if not chunks:
        raise AssayError(f"the documents hold no passage of at least {MIN_CHUNK_CHARS} characters to ask about")
    return chunks, len(read), skipped


def _check_args(n: int, quota: dict[str, int], chunks: Sequence[Chunk], shape: str, concurrency: int) -> None:
    if n < 1:
        raise AssayError(f"--n must be at least 1, got {n}")
    if concurrency < 1:
        raise AssayError(f"--concurrency must be at least 1, got {concurrency}")
    if shape not in SHAPES:
        raise AssayError(f"--shape {shape!r}: choose {' or '.join(SHAPES)}")
    if quota["multi_hop"] and len({(c.doc_uri, c.headings) for c in chunks}) < 2:
        raise AssayError("multi_hop questions need passages from at least two sections; the documents have one "
                         "(give --mix without multi_hop)")


def estimate(docs: str | Path | Sequence[SourceDoc], *, n: int, mix: Any = None, model: Any = None,
             chunk_chars: int = MAX_CHARS, styles: Any = None, personas: Sequence[str] | None = None,
             **kw: Any) -> tuple[Estimate, list[str]]:
    """``(estimate, lines about files skipped)`` of a run, without any call."""
    chunks, ndocs, skipped = load_chunks(docs, chunk_chars)
    shares = parse_mix(mix)
    _check_args(n, quotas(n, shares), chunks, "databricks", kw.get("concurrency", 4))
    est = estimate_testset(chunks, n=n, mix=shares, model_spec=model, documents=ndocs, styles=parse_styles(styles),
                           personas=list(personas or prompts.PERSONAS), **kw)
    return est, skipped


async def generate_testset_async(
    docs: str | Path | Sequence[SourceDoc],
    *,
    n: int,
    mix: Any = None,
    model: Any = None,
    embedder: Any = None,
    seed: int = 0,
    styles: Any = None,
    personas: Sequence[str] | None = None,
    language: str = "French",
    max_tries: int | None = None,
    concurrency: int = 4,
    shape: str = "databricks",
    chunk_chars: int = MAX_CHARS,
    duplicate_threshold: float | None = None,
    out: str | Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> TestsetResult:
    """See :func:`generate_testset`."""
    from assay.simulate.conversation import resolve_model, write_jsonl

    chunks, ndocs, skipped = load_chunks(docs, chunk_chars)
    shares = parse_mix(mix)
    quota = quotas(n, shares)
    _check_args(n, quota, chunks, shape, concurrency)
    style_list = parse_styles(styles)
    similarity, note = open_similarity(embedder, threshold=duplicate_threshold)
    vectors = await similarity.vectors([c.as_passage() for c in chunks], "document")
    planner = Planner(chunks, vectors, seed=seed, styles=style_list, personas=list(personas or prompts.PERSONAS),
                      language=language)
    llm = resolve_model(model)
    before = llm.stats.snapshot()
    state = await run_tries(Checker(llm, planner, similarity, vectors), quota,
                            max_tries=max_tries or default_max_tries(n), concurrency=concurrency, progress=progress)
    rows = [row_of(it, i, seed=seed, shape=shape, model=llm.name) for i, it in enumerate(state.items)]
    used = llm.stats.since(before)
    res = TestsetResult(rows=rows, asked=n, quotas=quota, kept=state.kept, tries=state.tries, rejected=state.rejected,
                        model=llm.name, model_calls=used["calls"], cached_calls=used["cache_hits"] + used["shared"],
                        prompt_tokens=used["prompt_tokens"], completion_tokens=used["completion_tokens"],
                        chunks=len(chunks), documents=ndocs, skipped_files=skipped,
                        notes=[note] if note else [])
    if out is not None:
        res.path = write_jsonl(rows, out)
    return res


def generate_testset(docs: str | Path | Sequence[SourceDoc], **kwargs: Any) -> TestsetResult:
    """A checked evaluation set of ``n`` questions about ``docs`` (a file or folder of Markdown,
    text, HTML and PDF), split over ``mix`` (``single_hop=0.6,multi_hop=0.3,unanswerable=0.1``),
    written by ``model`` (a spec or ChatModel; default the embedded model), seeded by ``seed``,
    written to ``out`` (JSONL) when given."""
    from assay.engine.evaluate import run_sync

    return run_sync(lambda: generate_testset_async(docs, **kwargs))
