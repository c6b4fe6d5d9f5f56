"""Word tokens for BLEU/GLEU/METEOR: the compiled tokenizer against the pure-Python path.

Tokenizes every response and ground truth of a pairs file (``gen_pairs.py`` format; made
with ``gen_pairs.py``'s generator when no file is given) with ``word_tokenize_python`` (the
pure-Python path) and ``word_tokenize`` (``tokenize_native`` where it is built, the Python
path for the texts it declines), side by side, best of ``--repeat`` passes, in CPU seconds
(steadier than wall time on a shared machine). Checks the two give equal tokens first.

    PYTHONPATH=src python benchmarks/bench_tokenize.py [/tmp/b17/p10k.jsonl] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from assay.metrics.text import native
from assay.metrics.text import word_tokenize as wt


def load_texts(path: str | None, pairs: int) -> list[str]:
    if path:
        texts = []
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                texts += [row["response"], row["ground_truth"]]
        return texts
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gen_pairs import pair

    rng = random.Random(7)
    return [t for _ in range(pairs) for t in pair(rng)]


def cpu_per_text(fn, texts: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for t in texts:
            fn(t)
        best = min(best, time.process_time() - t0)
    return best / len(texts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs_file", nargs="?", help="a pairs .jsonl (default: 10,000 generated pairs)")
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    mod = native.load("tokenize_native")
    if mod is None:
        sys.exit("tokenize_native is not built (python setup.py build_ext --inplace) or ASSAY_NATIVE=0")
    texts = load_texts(args.pairs_file, args.pairs)
    ascii_texts = [t for t in texts if t.isascii()]
    bad = [t for t in ascii_texts if wt.word_tokenize(t) != wt.word_tokenize_python(t)]
    if bad:
        sys.exit(f"compiled and Python tokens differ on {len(bad)} texts, e.g. {bad[0]!r}")
    taken = sum(mod.tokenize(t) is not None for t in ascii_texts)
    py = cpu_per_text(wt.word_tokenize_python, ascii_texts, args.repeat)
    c = cpu_per_text(wt.word_tokenize, ascii_texts, args.repeat)
    print(f"{len(ascii_texts)} ASCII texts, {taken} ({taken / len(ascii_texts):.1%}) taken by the compiled code")
    print(f"word_tokenize_python  {py * 1e6:7.2f} us/text (CPU, best of {args.repeat})")
    print(f"word_tokenize (C)     {c * 1e6:7.2f} us/text   {py / c:.1f}x")


if __name__ == "__main__":
    main()
