"""WordNet synonyms for METEOR, read from local WordNet 3.0 files (never downloaded).

NLTK's METEOR asks ``nltk.corpus.wordnet.synsets(word)`` for every unmatched word and
uses the names of all lemmas of those synsets (names with "_" left out) as synonyms.
azure-ai-evaluation gets that corpus with ``nltk.download("wordnet")`` at run time,
which fails offline. This module reads the same WordNet 3.0 database files (``index.*``,
``data.*``, ``*.exc``) from a local copy and reproduces ``synsets`` -- including NLTK's
``morphy`` lemmatization (exception lists, then the detachment rules, over the parts of
speech noun, verb, adjective, adverb) -- so the synonym sets are the ones NLTK computes.

Where the files are looked for, in order:

1. ``$ASSAY_WORDNET_DIR`` (a WordNet ``dict`` directory, or NLTK's ``wordnet.zip``;
   ``none`` turns the synonym stage off);
2. NLTK data directories (``$NLTK_DATA`` and NLTK's default search paths), as
   ``corpora/wordnet/`` or ``corpora/wordnet.zip`` -- only if already present;
3. system WordNet installs: ``/usr/share/wordnet`` (Debian/Ubuntu package
   ``wordnet-base``), ``/usr/local/share/wordnet``, ``/usr/share/WordNet/dict``,
   ``/usr/local/WordNet-3.0/dict``, ``/opt/homebrew/share/wordnet``.

When none is found :func:`get_wordnet` returns ``None`` and METEOR runs with the exact
and stem stages only, saying so in its ``reason``.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import zipfile
from functools import lru_cache

__all__ = ["WordNet", "get_wordnet", "find_wordnet_dir"]

_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
_POS_ORDER = ("n", "v", "a", "r")  # nltk.corpus.reader.wordnet.POS_LIST
_SUBSTITUTIONS = {  # NLTK's MORPHOLOGICAL_SUBSTITUTIONS (the WordNet morphy rules)
    "n": (("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"),
          ("shes", "sh"), ("men", "man"), ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
          ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}
_MARKER = re.compile(r"\([^()]*\)$")  # adjective syntactic markers such as "(a)", "(ip)"

_SYSTEM_DIRS = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/usr/share/WordNet/dict",
                "/usr/local/WordNet-3.0/dict", "/opt/homebrew/share/wordnet")


def _nltk_data_paths() -> list[str]:
    """NLTK's data search path (without importing NLTK)."""
    paths = [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    home = os.path.expanduser("~/nltk_data")
    paths += [home, os.path.join(sys.prefix, "nltk_data"), os.path.join(sys.prefix, "share", "nltk_data"),
              os.path.join(sys.prefix, "lib", "nltk_data"), "/usr/share/nltk_data",
              "/usr/local/share/nltk_data", "/usr/lib/nltk_data", "/usr/local/lib/nltk_data"]
    return paths


def _looks_like_wordnet(path: str) -> bool:
    if os.path.isdir(path):
        return all(os.path.isfile(os.path.join(path, f"{kind}.{name}"))
                   for name in _FILES.values() for kind in ("index", "data"))
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
        return all(f"wordnet/{kind}.{name}" in names for name in _FILES.values() for kind in ("index", "data"))
    return False


def find_wordnet_dir() -> str | None:
    """The first WordNet database found (a directory or a zip), or None."""
    env = os.environ.get("ASSAY_WORDNET_DIR")
    if env and env.strip().lower() in ("none", "off", "0", "false"):
        return None
    candidates = [env] if env else []
    for root in _nltk_data_paths():
        candidates += [os.path.join(root, "corpora", "wordnet"), os.path.join(root, "corpora", "wordnet.zip")]
    candidates += list(_SYSTEM_DIRS)
    for c in candidates:
        try:
            if c and os.path.exists(c) and _looks_like_wordnet(c):
                return c
        except (OSError, zipfile.BadZipFile):
            continue
    return None


class WordNet:
    """The parts of a WordNet 3.0 database that METEOR's synonym stage uses.

    Index files are kept as bytes and searched by bisection (they are sorted by lemma,
    which is checked on load; an unsorted copy is indexed in a dict instead), so loading
    costs little more than reading the files.
    """

    def __init__(self, location: str):
        self.location = location
        self._zip = zipfile.ZipFile(location) if not os.path.isdir(location) else None
        self._index: dict[str, bytes] = {}
        self._index_dict: dict[str, dict[str, list[int]]] = {}
        self._exceptions: dict[str, dict[str, list[str]]] = {}
        self._data: dict[str, bytes] = {}
        self._names: dict[tuple[str, int], tuple[str, ...]] = {}
        self._offsets: dict[tuple[str, str], list[int] | None] = {}
        self.version = "unknown"
        for pos, name in _FILES.items():
            data = self._read(f"index.{name}")
            lemmas = re.findall(rb"(?m)^([^ \n]+) ", data)
            if all(map(bytes.__lt__, lemmas, lemmas[1:])):
                self._index[pos] = data
            else:  # not sorted: index it
                self._index_dict[pos] = {}
                for line in data.decode("utf-8").splitlines():
                    if line and not line.startswith(" "):
                        self._index_dict[pos][line.split(" ", 1)[0]] = self._parse_offsets(line)
            exc: dict[str, list[str]] = {}
            try:
                text = self._read(f"{name}.exc").decode("utf-8")
            except (OSError, KeyError):
                text = ""
            for line in text.splitlines():
                terms = line.split()
                if terms:
                    exc[terms[0]] = terms[1:]
            self._exceptions[pos] = exc
        m = re.search(rb"WordNet (\d+\.\d+)", self._read("data.noun", 4000))
        if m:
            self.version = m.group(1).decode()

    def _read(self, name: str, size: int = -1) -> bytes:
        if self._zip is not None:
            with self._zip.open(f"wordnet/{name}") as f:
                return f.read(size)
        with open(os.path.join(self.location, name), "rb") as f:
            return f.read(size)

    @staticmethod
    def _parse_offsets(line: str) -> list[int]:
        # lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...
        parts = line.split()
        n_synsets = int(parts[2])
        n_pointers = int(parts[3])
        return [int(x) for x in parts[6 + n_pointers: 6 + n_pointers + n_synsets]]

    def offsets(self, lemma: str, pos: str) -> list[int] | None:
        """Synset offsets of ``lemma`` in part of speech ``pos``; None when not in WordNet."""
        key = (lemma, pos)
        if key in self._offsets:
            return self._offsets[key]
        if not lemma or " " in lemma or "\n" in lemma:
            found = None  # not a lemma (e.g. "" from morphy on "s"); never a header line
        elif pos in self._index_dict:
            found = self._index_dict[pos].get(lemma)
        else:
            found = None
            data = self._index[pos]
            want = lemma.encode("utf-8")
            lo, hi = 0, len(data)
            while lo < hi:
                mid = (lo + hi) // 2
                s = data.rfind(b"\n", 0, mid) + 1
                e = data.find(b"\n", s)
                if e < 0:
                    e = len(data)
                sp = data.find(b" ", s, e)
                lem = data[s:sp] if sp >= 0 else data[s:e]
                if lem == want:
                    found = self._parse_offsets(data[s:e].decode("utf-8"))
                    break
                if lem < want:
                    lo = e + 1
                else:
                    hi = s
        if len(self._offsets) > 200_000:
            self._offsets.clear()
        self._offsets[key] = found
        return found

    def _data_file(self, pos: str) -> bytes:
        data = self._data.get(pos)
        if data is None:
            data = self._data[pos] = self._read(f"data.{_FILES[pos]}")
        return data

    def _lemma_names(self, pos: str, offset: int) -> tuple[str, ...]:
        key = (pos, offset)
        names = self._names.get(key)
        if names is None:
            data = self._data_file(pos)
            end = data.find(b"\n", offset)
            fields = data[offset:end if end >= 0 else len(data)].decode("utf-8").split("|")[0].split()
            if not fields or int(fields[0]) != offset:
                names = ()
            else:
                count = int(fields[3], 16)
                names = tuple(_MARKER.sub("", fields[4 + 2 * i]) for i in range(count))
            self._names[key] = names
        return names

    def _morphy(self, form: str, pos: str) -> list[str]:
        """NLTK's ``_morphy``: the forms of ``form`` that WordNet has for ``pos``."""
        exceptions = self._exceptions[pos]
        if form in exceptions:
            forms = exceptions[form]
        else:
            forms = [form[: -len(old)] + new for old, new in _SUBSTITUTIONS[pos] if form.endswith(old)]
        out: list[str] = []
        for f in [form, *forms]:
            if f not in out and self.offsets(f, pos) is not None:
                out.append(f)
        return out

    def synonyms(self, word: str) -> frozenset[str]:
        """Lemma names (without "_") of all synsets of ``word``, as NLTK's METEOR takes them."""
        return self._synonyms(word)

    @lru_cache(maxsize=65536)  # noqa: B019 - one instance per process
    def _synonyms(self, word: str) -> frozenset[str]:
        lemma = word.lower()
        names: set[str] = set()
        for pos in _POS_ORDER:
            for form in self._morphy(lemma, pos):
                for offset in self.offsets(form, pos) or ():
                    names.update(n for n in self._lemma_names(pos, offset) if "_" not in n)
        return frozenset(names)


_lock = threading.Lock()
_loaded = False
_wordnet: WordNet | None = None


def get_wordnet() -> WordNet | None:
    """The process-wide WordNet, loaded on first use; None when no local copy exists."""
    global _loaded, _wordnet
    if not _loaded:
        with _lock:
            if not _loaded:
                path = find_wordnet_dir()
                try:
                    _wordnet = WordNet(path) if path else None
                except Exception:  # an unreadable copy: behave as if there were none
                    _wordnet = None
                _loaded = True
    return _wordnet
