"""METEOR's WordNet: the WordNet 3.0 data shipped with assay (issue 14 item 7).

The expected values were computed by azure-ai-evaluation's ``MeteorScoreEvaluator`` (which
calls NLTK's ``meteor_score`` with NLTK's WordNet 3.0 corpus) on the same rows, and the
synonym sets by NLTK's ``wordnet.synsets`` over Princeton's WordNet 3.0 files.
"""

from __future__ import annotations

import gzip
import os
import threading

import pytest

from assay.metrics.text import lexical as text
from assay.metrics.text import wordnet as wnmod

SYSTEM_WORDNET = "/usr/share/wordnet"
needs_system = pytest.mark.skipif(not os.path.isfile(os.path.join(SYSTEM_WORDNET, "index.noun")),
                                  reason="no system WordNet 3.0 in /usr/share/wordnet (Debian wordnet-base)")

# A row whose words match only through WordNet synonyms (physician/doctor, illness/disease,
# serious/grave). azure-ai-evaluation 1.x MeteorScoreEvaluator (NLTK WordNet 3.0) gives
# 0.7471655328798186; exact and stem stages alone give 0.5679012345679012.
ROW = {"response": "The physician said the illness was not serious.",
       "ground_truth": "The doctor said the disease was not grave."}
AZURE_METEOR = 0.7471655328798186
EXACT_STEM_ONLY = 0.5679012345679012

SYNONYMS = {
    "automobile": {"auto", "automobile", "car", "machine", "motorcar"},
    "cars": {"auto", "automobile", "car", "gondola", "machine", "motorcar", "railcar"},
    "children": {"baby", "child", "fry", "kid", "minor", "nestling", "nipper", "shaver", "tiddler", "tike", "tyke",
                 "youngster"},
    "mice": {"mouse", "shiner"},
    "doctor": {"Doctor", "Dr.", "MD", "bushel", "doc", "doctor", "fix", "medico", "mend", "physician", "repair",
               "restore", "sophisticate"},
    "glad": {"beaming", "glad", "gladiola", "gladiolus", "happy"},
    "sofa": {"couch", "lounge", "sofa"},
    "leaves": {"allow", "bequeath", "depart", "entrust", "exit", "farewell", "foliage", "folio", "forget", "give",
               "impart", "lead", "leaf", "leafage", "leave", "leave-taking", "parting", "provide", "result", "will"},
    "quickly": {"apace", "chop-chop", "cursorily", "promptly", "quick", "quickly", "rapidly", "speedily"},
    "happier": {"felicitous", "glad", "happy", "well-chosen"},
    "physician": {"Dr.", "MD", "doc", "doctor", "medico", "physician"},
    "illness": {"illness", "malady", "sickness", "unwellness"},
    "grave": {"dangerous", "engrave", "grave", "grievous", "heavy", "inscribe", "life-threatening", "scratch",
              "sculpt", "sculpture", "sedate", "serious", "severe", "sober", "solemn", "tomb", "weighty"},
    "serious": {"dangerous", "good", "grave", "grievous", "life-threatening", "serious", "severe", "sober",
                "unplayful"},
    "ate": {"Ate", "consume", "corrode", "deplete", "eat", "exhaust", "feed", "rust"},
    "stopped": {"arrest", "bar", "barricade", "block", "blockade", "break", "cease", "check", "contain",
                "discontinue", "end", "finish", "halt", "intercept", "kibosh", "quit", "stop", "stopped",
                "stopped-up", "terminate"},
    "kids": {"Kid", "Kyd", "banter", "chaff", "child", "fry", "jolly", "josh", "kid", "kidskin", "minor", "nestling",
             "nipper", "shaver", "tiddler", "tike", "tyke", "youngster"},
    "fastest": {"debauched", "degenerate", "degraded", "dissipated", "dissolute", "fast", "fastest", "firm", "flying",
                "immobile", "libertine", "loyal", "profligate", "quick", "quickest", "riotous", "truehearted"},
    "s": {"S", "entropy", "mho", "randomness", "s", "sec", "second", "siemens", "south", "southward", "sulfur",
          "sulphur"},
    "axes": {"Axis", "ax", "axe", "axis", "bloc"},
    "Automobile": {"auto", "automobile", "car", "machine", "motorcar"},  # looked up lower-cased, as NLTK does
    "xqzv": set(),
    "": set(),
}


@pytest.fixture
def fresh(monkeypatch):
    """A process with no WordNet loaded yet, no ASSAY_WORDNET_DIR, and no NLTK or system copy visible."""
    monkeypatch.delenv("ASSAY_WORDNET_DIR", raising=False)
    monkeypatch.setattr(wnmod, "_nltk_data_paths", lambda: [])
    monkeypatch.setattr(wnmod, "_SYSTEM_DIRS", ())
    monkeypatch.setattr(wnmod, "_loaded", False)
    monkeypatch.setattr(wnmod, "_wordnet", None)
    return monkeypatch


def test_bundled_data_and_licence_are_in_the_package():
    assert os.path.isfile(wnmod.BUNDLED_PATH)
    licence = open(os.path.join(os.path.dirname(wnmod.BUNDLED_PATH), "LICENSE-WordNet-3.0.txt"), encoding="utf-8").read()
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in licence and '"AS IS"' in licence
    with gzip.open(wnmod.BUNDLED_PATH, "rt", encoding="utf-8") as f:
        head = f.read(4000)
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in head  # the notice travels with the data


def test_meteor_equals_azure_with_no_system_wordnet(fresh):
    wn = wnmod.get_wordnet()
    assert isinstance(wn, wnmod.BundledWordNet) and wn.version == "3.0" and wn.location == wnmod.BUNDLED_PATH
    s = text.meteor(ROW["response"], ROW["ground_truth"])
    assert s.value == AZURE_METEOR
    assert s.properties == {"stages": "exact+stem+synonym", "wordnet": "3.0"} and not s.reason


def test_meteor_without_any_wordnet_is_the_exact_stem_value(fresh):
    fresh.setattr(wnmod, "BUNDLED_PATH", "/nonexistent/wordnet-3.0.gz")
    assert wnmod.get_wordnet() is None
    s = text.meteor(ROW["response"], ROW["ground_truth"])
    assert s.value == EXACT_STEM_ONLY and s.properties["stages"] == "exact+stem" and "WordNet" in s.reason


def test_assay_wordnet_dir_none_turns_synonyms_off(fresh):
    fresh.setenv("ASSAY_WORDNET_DIR", "none")
    assert wnmod.find_wordnet_dir() is None and wnmod.get_wordnet() is None
    assert text.meteor(ROW["response"], ROW["ground_truth"]).value == EXACT_STEM_ONLY


def test_bundled_synonym_sets():
    wn = wnmod.BundledWordNet()
    for word, want in SYNONYMS.items():
        assert wn.synonyms(word) == want, word
    # synsets() in NLTK's order: part of speech, then WordNet's sense order
    assert wn.synsets("car") == [("n", ("car", "auto", "automobile", "machine", "motorcar")),
                                 ("n", ("car", "railcar", "railway_car", "railroad_car")),
                                 ("n", ("car", "gondola")), ("n", ("car", "elevator_car")),
                                 ("n", ("cable_car", "car"))]
    assert wn.exceptions("v")["ran"] == ["run"] and wn.offsets("xqzv", "n") is None


def test_get_wordnet_loads_once_across_threads(fresh):
    got = []
    threads = [threading.Thread(target=lambda: got.append(wnmod.get_wordnet())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and got[0] is not None and all(g is got[0] for g in got)


def test_bad_bundled_file_names_the_file(tmp_path, fresh):
    bad = tmp_path / "wordnet-3.0.gz"
    bad.write_bytes(gzip.compress(b"# assay WordNet data\n@version 3.0\n@synsets n\ncar:1\n"))
    with pytest.raises(ValueError, match=r"wordnet-3.0.gz: @synsets n: lemma 'car' misses a synset"):
        wnmod.open_wordnet(str(bad))
    bad.write_bytes(gzip.compress(b"# assay WordNet data\n@version 3.0\n@synsets n\ncar\n@exceptions n\n"))
    with pytest.raises(ValueError, match=r"wordnet-3.0.gz: no sections for part\(s\) of speech v, a, r"):
        wnmod.open_wordnet(str(bad))
    # METEOR then runs without synonyms and says so, rather than failing the run
    fresh.setenv("ASSAY_WORDNET_DIR", str(bad))
    assert wnmod.get_wordnet() is None
    assert text.meteor(ROW["response"], ROW["ground_truth"]).properties["stages"] == "exact+stem"


@needs_system
def test_search_order_prefers_bundled_over_a_system_copy(fresh):
    fresh.setattr(wnmod, "_SYSTEM_DIRS", (SYSTEM_WORDNET,))
    assert wnmod.find_wordnet_dir() == wnmod.BUNDLED_PATH
    fresh.setenv("ASSAY_WORDNET_DIR", SYSTEM_WORDNET)  # an explicit choice wins
    assert isinstance(wnmod.get_wordnet(), wnmod.WordNet)
    fresh.delenv("ASSAY_WORDNET_DIR")
    fresh.setattr(wnmod, "BUNDLED_PATH", "/nonexistent/wordnet-3.0.gz")  # a stripped install falls back
    assert wnmod.find_wordnet_dir() == SYSTEM_WORDNET


@needs_system
def test_bundled_equals_wordnet_files_over_the_whole_vocabulary():
    files, bundled = wnmod.WordNet(SYSTEM_WORDNET), wnmod.BundledWordNet()
    words, checked = set(), 0
    for pos in ("n", "v", "a", "r"):
        assert bundled.exceptions(pos) == files.exceptions(pos)
        words.update(files.exceptions(pos))
        for lemma, offsets in files.index_entries(pos):  # every lemma: its synsets, in order, with their names
            assert [bundled.lemma_names(pos, k) for k in bundled.offsets(lemma, pos)] == \
                [files.lemma_names(pos, o) for o in offsets], (pos, lemma)
            words.add(lemma)
            checked += 1
    assert checked == 155_287  # WordNet 3.0's word-POS pairs
    # morphy (shared code) on top of the two: inflected forms and exception forms
    sample = sorted(words)[::97]
    for word in sample + [w + suffix for w in sample for suffix in ("s", "es", "ed", "ing", "er", "est")]:
        assert bundled.synsets(word) == files.synsets(word), word
    assert {w: files.synonyms(w) for w in SYNONYMS} == SYNONYMS


@needs_system
def test_build_script_reproduces_the_committed_file(tmp_path):
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "build_wordnet_data.py")
    spec = importlib.util.spec_from_file_location("build_wordnet_data", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "wordnet-3.0.gz"
    assert mod.main([SYSTEM_WORDNET, "--out", str(out)]) == 0
    assert out.read_bytes() == open(wnmod.BUNDLED_PATH, "rb").read()
    assert (tmp_path / "LICENSE-WordNet-3.0.txt").read_text() == open(
        os.path.join(os.path.dirname(wnmod.BUNDLED_PATH), "LICENSE-WordNet-3.0.txt")).read()
    assert mod.main([str(tmp_path / "missing"), "--out", str(tmp_path / "x.gz")]) == 1
