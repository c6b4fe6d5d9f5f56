#!/usr/bin/env python3
"""Build the WordNet 3.0 data METEOR uses: src/assay/metrics/text/data/wordnet-3.0.gz.

Reads a Princeton WordNet 3.0 database -- a ``dict`` directory (Debian/Ubuntu's
``wordnet-base`` installs one as /usr/share/wordnet) or NLTK's ``wordnet.zip`` -- and
writes what ``synsets(word)`` and NLTK's ``morphy`` need, in the format described in
:class:`assay.metrics.text.wordnet.BundledWordNet`, plus WordNet's licence as
``data/LICENSE-WordNet-3.0.txt`` (taken from the database's own header). The output is
deterministic (gzip without a time stamp), so rebuilding from the same files gives
the same bytes. Before writing, every lemma of every part of speech is checked to give
the same synsets (in order, with the same lemma names) and every exception list the
same entries through the new file as through the source files.

    python scripts/build_wordnet_data.py [/usr/share/wordnet]
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from assay.metrics.text.wordnet import BUNDLED_PATH, BundledWordNet, WordNet  # noqa: E402

POS = ("n", "v", "a", "r")
LICENCE_NAME = "LICENSE-WordNet-3.0.txt"


def build(source: WordNet) -> tuple[str, str]:
    """The data file's text and the licence text."""
    licence = source.licence()
    if "WordNet 3.0 Copyright" not in licence:
        raise SystemExit(f"{source.location}: data.noun has no WordNet 3.0 licence header (is this WordNet 3.0?)")
    out = io.StringIO()
    out.write("# assay WordNet data: what synsets() and morphy need, derived from Princeton WordNet 3.0\n")
    out.write("# by scripts/build_wordnet_data.py (format: assay.metrics.text.wordnet.BundledWordNet).\n")
    out.write("# WordNet's licence, which applies to this file:\n#\n")
    out.writelines(f"# {line}".rstrip() + "\n" for line in licence.splitlines())
    out.write(f"@version {source.version}\n")
    for pos in POS:
        entries = list(source.index_entries(pos))
        rank: dict[tuple[int, str], int] = {}
        order: dict[int, int] = {}  # synset offset -> line, in order of first use (compresses better)
        for lemma, offsets in entries:
            for k, off in enumerate(offsets):
                rank[(off, lemma)] = k
                order.setdefault(off, len(order))
        out.write(f"@synsets {pos}\n")
        for off in order:
            tokens = []
            for name in source.lemma_names(pos, off):
                if not name or any(c in name for c in " :\n") or name[0] in "@#":
                    raise SystemExit(f"{source.location}: synset {off} ({pos}): lemma name {name!r} cannot be stored")
                k = rank.get((off, name.lower()))
                if k is None:
                    raise SystemExit(f"{source.location}: synset {off} ({pos}): '{name}' is not in index.{pos}")
                tokens.append(name if k == 0 else f"{name}:{k}")
            out.write(" ".join(tokens) + "\n")
        out.write(f"@exceptions {pos}\n")
        for form, bases in source.exceptions(pos).items():
            out.write(" ".join([form, *bases]) + "\n")
    return out.getvalue(), licence


def verify(source: WordNet, built: BundledWordNet) -> int:
    """Compare every lemma's synsets and every exception list; the number of lemmas checked."""
    checked = 0
    for pos in POS:
        lemmas = set()
        for lemma, offsets in source.index_entries(pos):
            lemmas.add(lemma)
            want = [source.lemma_names(pos, o) for o in offsets]
            got = [built.lemma_names(pos, k) for k in built.offsets(lemma, pos) or ()]
            if want != got:
                raise SystemExit(f"check failed: {pos} '{lemma}': {want} != {got}")
            checked += 1
        if set(built._index[pos]) != lemmas:
            raise SystemExit(f"check failed: {pos}: the lemma sets differ")
        if built.exceptions(pos) != source.exceptions(pos):
            raise SystemExit(f"check failed: {pos}: the exception lists differ")
    return checked


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", nargs="?", default="/usr/share/wordnet",
                    help="WordNet 3.0 dict directory or NLTK wordnet.zip (default /usr/share/wordnet)")
    ap.add_argument("--out", default=BUNDLED_PATH, help=f"data file to write (default {BUNDLED_PATH})")
    args = ap.parse_args(argv)
    try:
        source = WordNet(args.source)
    except (OSError, KeyError, ValueError) as e:
        print(f"{args.source}: not a readable WordNet database: {e}", file=sys.stderr)
        return 1
    if source.version != "3.0":
        print(f"{args.source}: WordNet {source.version}, expected 3.0 (the version NLTK uses)", file=sys.stderr)
        return 1
    text, licence = build(source)
    raw = text.encode("utf-8")
    data = gzip.compress(raw, compresslevel=9, mtime=0)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=out_dir, suffix=".gz", delete=False) as tmp:
        tmp.write(data)
    os.chmod(tmp.name, 0o644)
    try:
        checked = verify(source, BundledWordNet(tmp.name))
        os.replace(tmp.name, args.out)
    finally:
        if os.path.exists(tmp.name):
            os.unlink(tmp.name)
    with open(os.path.join(out_dir, LICENCE_NAME), "w", encoding="utf-8") as f:
        f.write("The file wordnet-3.0.gz in this directory is derived from WordNet 3.0\n"
                "(https://wordnet.princeton.edu/), under the following licence.\n\n")
        f.write(licence)
    print(f"{args.out}: {len(data):,} bytes ({len(raw):,} uncompressed); {checked:,} lemmas checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
