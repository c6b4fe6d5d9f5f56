"""The compiled word tokenizer (``tokenize_native``) gives the pure-Python path's tokens, token for token.

``word_tokenize`` uses ``tokenize_native.tokenize`` where it is built and falls back to
``word_tokenize_python`` for every text the C code returns None for; the tests here compare the two
on generated corpora (the benchmark's pairs, the azure conformance generator, the generators of
test_text.py) and on hand-written adversarial texts, and check that what the C code declines is
exactly what it should decline. (test_text.py compares both paths with NLTK itself.)
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import random
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
import test_text
from test_text import PUNCT, SPACES, SPECIAL, UNICODE, WORDS, gen_pairs, gen_text

from assay.metrics.text import native, punkt
from assay.metrics.text import word_tokenize as wt

nltk_data = test_text.nltk_data  # the fixture: NLTK with the English Punkt model, offline

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"



def _compiled_here():
    """tokenize_native compiled from its source into a temporary directory, for a checkout where
    the build step did not run (or ASSAY_NATIVE=0): the comparisons below then still run. None
    without a C compiler."""
    src = Path(wt.__file__).with_name("tokenize_native.c")
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None or not src.exists():
        return None
    tmp = tempfile.mkdtemp(prefix="assay-tokenize-native-")
    atexit.register(shutil.rmtree, tmp, True)
    out = Path(tmp) / ("tokenize_native" + sysconfig.get_config_var("EXT_SUFFIX"))
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", str(src), "-o", str(out)],
                       capture_output=True)
    if r.returncode != 0:
        return None
    spec = importlib.util.spec_from_file_location("tokenize_native", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.configure(punkt.native_params)
    return mod


installed = native.load("tokenize_native")
tok_native = installed or _compiled_here()
needs_native = pytest.mark.skipif(tok_native is None, reason="tokenize_native is not built and no C compiler "
                                  "to build it: the Python path is the only one")


def _bench_module(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ADVERSARIAL = [
    "", " ", "  \n ", ".", "a.", ". a", "?", "!", "a?b", "Hello.", "Hello. World.", " Hello. World",
    "Mr. Smith went to Washington. He arrived at 3 p.m. today!", "e.g. i.e. etc.", "U.S. policy. The U.S. Army",
    "J. R. R. Tolkien wrote it. J. Smith did not.", "See No. 5. No. It is not.", "Jan. 5 was cold. Feb. too.",
    "It is 3. Then 4. Then 5 p.m. Yes.", "In 1989. The wall fell.", "version 3.14. Next", "100. 200. 300.",
    "St. Louis. St. Paul.", "Inc. Ltd. Co. Corp.", "a. b. c. d.", "A. B. C. D.", "x.y.z. Done.",
    "He left (at noon.) She stayed.", "(Really.) Yes.", "word.) next", "Word.] Next", "Word.} Next.",
    "End.)", "End. )", "End.) ", "End.>", "End .", "end.\t", "end.\n", "end. \n ", "a.b", "a. b", "a .b",
    "it's", "It's.", "it's,", "we'll's", "a'n't", "x'LL", "i'M", "Don't.", "DON'T stop", "don'T stop",
    "Y'all's rock'n'roll", "o'clock o'Clock", "they're we've you'll he'd I'm", "can't've", "ma'am's",
    "it's.x", "it's. and", "Smith's. Jones's", "12's 3'4", "A'B'C's",
    "a,b", "a, b", "a ,b", "a,", "a:", ":a", "a: b", "a;b", "a@b#c$d%e&f*g", "[a](b){c}<d>",
    "a-b", "a--b", "a---b", "a----b", "--", "---", "-", "- -", "a - - b", "a/b\\c|d~e^f=g+h_i",
    "tab\tsep", "line\nbreak", "cr\r\nlf", "vt\x0bff\x0c", "\n\nx\n\n", "a.\nB", "a.\n\nB", "a.\tB",
    "a;\tb", "Is it?\nYes!\tNo.", "What?! Really?? No!!", "Why? Because. Fine!", "stop.Next", "stop.  Next",
    "The end. 42 is the answer.", "I saw it. a man came.", "Number 5. 6 more.", "He said no. and left.",
    "Cost $5. Paid.", "Dr. Who? Mr. X! Mrs. Y.", "vs. them", "approx. 3 items", "Fig. 3 shows it.",
    # ellipses
    "Wait... what", "a..b", "..", "...", "....", ". . .", "Hello... World", "Hello... world.", "end...",
    "end... ", "end...)", "x. ..", "x. ...", "a..?", "a...(b", "?..", "!...", "it's...", "we'll... go",
    "The end... The U.S... Mr... OK.", "a. . . b", "word.... Next", "3... 2... 1...", "...--x", "wait..\nNo",
    # double quotes, and closing brackets with newlines/tabs (exact sentence spans)
    '"Quoted," he said.', '"Hi." "Bye."', 'He said "no." Then left.', '"a"b"', '""', '"', '" "', '("x.")', '"(x.)"',
    'x "y" z', 'He said: "Stop." (Really.) "Yes."', 'end."', 'end.")', 'end. "', 'Mr. "Smith" came.',
    '"It\'s." "We\'ll."', '"Hello.\n" World', "a)\nb", "(x)\ty", "a]\rb", "a}\x0bb", "end. \n ) ", "(x.)\n(y.)",
    'Stop.\n"Go."', 'Stop. )\nGo.', 'Stop.)--go', 'Stop. "--go"', '"x.")\n"y."', 'a. ) ) b. ]',
    # a comma or colon before a digit stays in the token; a sentence break can come right before one
    "1,000 people.", "at 10:30. Then", "3,5", "a,1", "a:1", ",5", ":5", "1,", "3:", "e.g.:5", "He.:5I fast.",
    "a? .:5", "x...:5", "U.S.:42 they", '"Stop.":5', '"a? .:5"', "(x.):5",
    # MacIntyre contractions (split between word boundaries; "wanna" only before whitespace)
    "cannot", "I gonna go", "WANNA", "lemme", "gimme", "gotta", "d'ye", "more'n", "Xcannotx", "MORE'N",
    "x'd'ye", "UnWanna", "cannot-x", "x-cannot", "cannot_x", "_gonna", "wanna.", "wanna,", "wanna\nx", "wanna's",
    "gonna's", "cannot's", "gotta've", "lemme/gimme", "1cannot", "(wanna)", '"gonna"', "cannot...", "We cannot. Go.",
]

# texts the C code must leave to the Python path (and the reason)
DECLINED = [
    '"Wait..." he said.', 'a)\n... b', "back`quote", "a,,b", "a,:b",
    "'tis", "dogs' bones", "'quoted'", "it'", "x ' y", "'twas", "it'tis", "a'TWAS", "ctl\x1cchar", "nul\x00",
    "bell\x07", "caf\u00e9", "Smith's. Jones'", "\u201cq\u201d", "del\x7f",
]


def _bench_pairs() -> list[str]:
    """The texts of the speed benchmark's pairs (benchmarks/gen_pairs.py)."""
    gp = _bench_module("gen_pairs")
    rng = random.Random(11)
    texts = []
    for _ in range(1500):
        texts += gp.pair(rng)
    return texts


def _other_corpora() -> list[str]:
    """The azure conformance pairs (benchmarks/conformance_azure.py) and test_text.py's texts."""
    texts = []
    for p in _bench_module("conformance_azure").make_pairs(1500, 3):
        texts += [p["response"], p["ground_truth"]]
    for a, b in gen_pairs(4, 1500):
        texts += [a, b]
    rng = random.Random(12)
    texts += [gen_text(rng, rng.randint(0, 40)) for _ in range(3000)]
    return texts


def _adversarial_generated() -> list[str]:
    """Words, abbreviations, initials, numbers, clitics and every mark the C code takes, with
    spaces, newlines and tabs between (and sometimes nothing)."""
    rng = random.Random(13)
    marks = list(",.:?!;@#$%&*[](){}<>-/\\|~^=+_") + ["word.)", "(x.)", "2.]", "--", "---", "Mr.", "e.g.",
                                                       "U.S.", "p.m.", "St.", "J.", "3.", "No.", "it's", "we'll",
                                                       "don't", "Y'all's", "CAN'T", "we'll's", "a'n't", "x'LL",
                                                       "...", "..", "....", ". . .", "word...", "(x...)", "?..", "..!",
                                                       '"', '"', '"x."', '""', '."', '("', '.")', ".)", '?"',
                                                       "1,000", "10:30", ",5", ":5", "e.g.:5"]
    words = [w for w in WORDS + SPECIAL if "'" not in w[:1] and not w.endswith("'")]
    out = []
    for spaces in ([" ", " ", "  ", ""], [" ", " ", "", "\n", "\n\n", "\t", " \n", "\r\n", "\x0b", "\x0c"]):
        out += [gen_text(rng, rng.randint(0, 30), (words, words, marks), spaces) for _ in range(4000)]
    out += [gen_text(rng, rng.randint(0, 30), (WORDS, SPECIAL, PUNCT), SPACES) for _ in range(3000)]
    out += [gen_text(rng, rng.randint(0, 20), (WORDS, SPECIAL, PUNCT, UNICODE)) for _ in range(500)]
    return out


def _compare(texts: list[str]) -> int:
    """Assert compiled == Python on each text the C code takes; how many it took."""
    taken = 0
    bad = []
    for t in texts:
        got = tok_native.tokenize(t)
        if got is None:
            continue
        taken += 1
        want = wt.word_tokenize_python(t)
        if got != want:
            bad.append((t, got, want))
    assert not bad, bad[:3]
    return taken


def test_the_python_path_stays_reachable():
    # word_tokenize_python is the pure-Python path whatever is built; word_tokenize gives its tokens
    for t in ["Mr. Smith's dog. It barked!", "a, b; c", '"Quoted," he said...', "caf\u00e9 time."]:
        assert wt.word_tokenize(t) == wt.word_tokenize_python(t)
    assert wt.word_tokenize_python("Don't stop. Mr. X left.") == ["Do", "n't", "stop", ".", "Mr.", "X", "left", "."]


def test_native_off_means_the_python_path():
    code = ("from assay.metrics.text import native, word_tokenize as wt; "
            "print(native.status()['tokenize_native'], wt.word_tokenize is wt.word_tokenize_python)")
    env = dict(os.environ, ASSAY_NATIVE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.skipif(installed is None, reason="tokenize_native is not built (setup.py build_ext) or ASSAY_NATIVE=0")
def test_word_tokenize_uses_the_compiled_code():
    assert wt.word_tokenize is not wt.word_tokenize_python
    assert installed.tokenize("Mr. Smith's dog. It barked!") == ["Mr.", "Smith", "'s", "dog", ".", "It", "barked", "!"]


@needs_native
def test_compiled_equals_python_on_the_benchmark_pairs():
    texts = _bench_pairs()
    taken = _compare(texts)
    # the compiled path must carry (nearly) all plain prose: here the texts with double quotes are left
    assert taken > 0.95 * len(texts), (taken, len(texts))


@needs_native
def test_compiled_equals_python_on_the_conformance_and_test_corpora():
    # made to be hard (quotes, "1,000", ellipses, contractions, non-ASCII...): the C code takes fewer
    texts = _other_corpora()
    assert _compare(texts) > 1000


@needs_native
def test_compiled_equals_python_on_adversarial_texts():
    taken = _compare(ADVERSARIAL + _adversarial_generated())
    assert taken > 3000
    for t in ADVERSARIAL:
        assert tok_native.tokenize(t) is not None, t


@needs_native
def test_what_the_compiled_code_declines():
    for t in DECLINED:
        assert tok_native.tokenize(t) is None, t
        assert wt.word_tokenize(t) == wt.word_tokenize_python(t), t


@needs_native
def test_long_texts_and_many_periods():
    # more tokens and periods than the C code's stack buffers hold
    rng = random.Random(14)
    words = [w for w in WORDS + SPECIAL if tok_native.tokenize(w) is not None]
    texts = [" ".join(rng.choice(words + [".", "Mr.", "end.", "J."]) for _ in range(n)) for n in (300, 1000, 5000)]
    texts += ["a. " * 500, "x" * 1000 + ".", "word " * 2000, ". " * 700]
    assert _compare(texts) == len(texts)


@needs_native
def test_same_word_same_token_whatever_the_cache_holds():
    # tokens are shared between calls; many distinct words evict each other from the cache
    rng = random.Random(15)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzABC") for _ in range(rng.randint(1, 30))) for _ in range(20000)]
    text = " ".join(vocab) + "."
    assert tok_native.tokenize(text) == wt.word_tokenize_python(text)
    assert tok_native.tokenize(text) == vocab + ["."]


@needs_native
def test_bad_arguments():
    with pytest.raises(TypeError):
        tok_native.tokenize(b"bytes")
    with pytest.raises(TypeError):
        tok_native.configure("not callable")


@pytest.mark.parametrize("path", ["word_tokenize", "word_tokenize_python"])
def test_prose_with_ellipses_quotes_contractions_and_clitics_matches_nltk(nltk_data, path):
    # ellipses, "1,000" and contractions (which the compiled code takes beyond the Python whole-text
    # path), double quotes, brackets and clitics, against NLTK
    nltk = nltk_data["nltk"]
    tokenize = getattr(wt, path)
    rng = random.Random(16)
    marks = list(",.:?!;()[]-\"") + ['"x."', '.")', '?"', "1,000", "10:30", ":5", ",5", "cannot", "gonna's",
                                     "wanna", "wanna.", "x-gimme", "d'ye", "More'n", "GOTTA", "lemme_", "...", "..", "....", ". . .", "word...", "(x...)", "...)", "?..", "..!", "--",
                                   "Mr.", "e.g.", "U.S.", "J.", "3.", "it's", "we'll", "don't", "No."]
    words = [w for w in WORDS + SPECIAL if "'" not in w[:1] and not w.endswith("'")]
    texts = ADVERSARIAL + [gen_text(rng, rng.randint(0, 30), (words, words, marks), [" ", " ", "  ", "", "\n"])
                           for _ in range(2500)]
    bad = [(t, nltk.word_tokenize(t), tokenize(t)) for t in texts if nltk.word_tokenize(t) != tokenize(t)]
    assert not bad, bad[:3]
