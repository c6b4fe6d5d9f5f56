"""WordNet synonyms for METEOR, from the WordNet 3.0 data shipped with assay (never downloaded).

NLTK's METEOR asks ``nltk.corpus.wordnet.synsets(word)`` for every unmatched word and
uses the names of all lemmas of those synsets (names with "_" left out) as synonyms.
azure-ai-evaluation gets that corpus with ``nltk.download("wordnet")`` at run time,
which fails offline. This module reproduces ``synsets`` -- including NLTK's ``morphy``
lemmatization (exception lists, then the detachment rules, over the parts of speech
noun, verb, adjective, adverb) -- so the synonym sets are the ones NLTK computes.

Two readers give the same answers:

* :class:`BundledWordNet` reads ``data/wordnet-3.0.gz`` inside this package: what
  ``synsets`` and ``morphy`` need from Princeton's WordNet 3.0 (the lemma names of
  every synset, each lemma's synsets in index order, the exception lists), derived by
  ``scripts/build_wordnet_data.py`` from the WordNet 3.0 ``dict`` files, about 1 MB.
  WordNet's licence is in ``data/LICENSE-WordNet-3.0.txt`` and in the file's header.
* :class:`WordNet` reads a WordNet 3.0 database (``index.*``, ``data.*``, ``*.exc``)
  as Princeton and NLTK distribute it: a ``dict`` directory or NLTK's ``wordnet.zip``.

Which one is used, in order (:func:`find_wordnet_dir`):

1. ``$ASSAY_WORDNET_DIR``: a WordNet ``dict`` directory, NLTK's ``wordnet.zip``, or a
   file in the bundled format; ``none`` turns the synonym stage off;
2. the bundled data -- so every install computes the same values as NLTK with its
   ``wordnet`` corpus (which is WordNet 3.0), whatever WordNet the machine may have;
3. only when the bundled file has been removed from the install: NLTK data
   directories (``$NLTK_DATA`` and NLTK's default search paths, as
   ``corpora/wordnet/`` or ``corpora/wordnet.zip``), then system installs
   (``/usr/share/wordnet`` from Debian/Ubuntu's ``wordnet-base``, ...).

When none is found :func:`get_wordnet` returns ``None`` and METEOR runs with the exact
and stem stages only, saying so in its ``reason``.
"""

from __future__ import annotations

import gzip
import os
import re
import sys
import threading
import zipfile
from collections.abc import Iterator
from functools import lru_cache

__all__ = ["WordNet", "BundledWordNet", "BUNDLED_PATH", "get_wordnet", "find_wordnet_dir", "open_wordnet"]

BUNDLED_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "wordnet-3.0.gz")

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


_BUNDLED_MAGIC = b"# assay WordNet data"


def _looks_like_wordnet(path: str) -> bool:
    if os.path.isdir(path):
        return all(os.path.isfile(os.path.join(path, f"{kind}.{name}"))
                   for name in _FILES.values() for kind in ("index", "data"))
    if _is_bundled_format(path):
        return True
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
        return all(f"wordnet/{kind}.{name}" in names for name in _FILES.values() for kind in ("index", "data"))
    return False


def _is_bundled_format(path: str) -> bool:
    try:
        with gzip.open(path, "rb") as f:
            return f.read(len(_BUNDLED_MAGIC)) == _BUNDLED_MAGIC
    except (OSError, EOFError):
        return False


def find_wordnet_dir() -> str | None:
    """The WordNet database METEOR uses (a directory, a zip or a bundled-format file), or None.

    ``$ASSAY_WORDNET_DIR`` first (``none`` turns WordNet off), then the data shipped with
    assay, then NLTK data directories and system installs (reached only when the shipped
    file is missing). The shipped data wins over a system copy so that every machine gets
    the same values: it is the WordNet 3.0 that NLTK (and so azure-ai-evaluation) uses,
    while a system or NLTK directory may hold another version.
    """
    env = os.environ.get("ASSAY_WORDNET_DIR")
    if env and env.strip().lower() in ("none", "off", "0", "false"):
        return None
    candidates = [env] if env else []
    candidates.append(BUNDLED_PATH)
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


class _Reader:
    """``synsets`` and NLTK's ``morphy`` over a lemma index; subclasses supply the storage."""

    location: str
    version: str
    _exceptions: dict[str, dict[str, list[str]]]

    def offsets(self, lemma: str, pos: str) -> list[int] | None:
        """Keys of the synsets of ``lemma`` in part of speech ``pos``, in WordNet's sense
        order; None when ``lemma`` is not in WordNet for ``pos``."""
        raise NotImplementedError

    def lemma_names(self, pos: str, key: int) -> tuple[str, ...]:
        """The lemma names of one synset, in WordNet's order (adjective markers removed)."""
        raise NotImplementedError

    def exceptions(self, pos: str) -> dict[str, list[str]]:
        """The morphy exception list of ``pos``: inflected form -> base forms."""
        return self._exceptions[pos]

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

    def synsets(self, word: str) -> list[tuple[str, tuple[str, ...]]]:
        """NLTK's ``wordnet.synsets(word)`` as (part of speech, lemma names), in NLTK's order."""
        lemma = word.lower()
        return [(pos, self.lemma_names(pos, key))
                for pos in _POS_ORDER for form in self._morphy(lemma, pos) for key in self.offsets(form, pos) or ()]

    def synonyms(self, word: str) -> frozenset[str]:
        """Lemma names (without "_") of all synsets of ``word``, as NLTK's METEOR takes them."""
        return self._synonyms(word)

    @lru_cache(maxsize=65536)  # noqa: B019 - one instance per process
    def _synonyms(self, word: str) -> frozenset[str]:
        return frozenset(n for _, names in self.synsets(word) for n in names if "_" not in n)


class WordNet(_Reader):
    """A WordNet 3.0 database as distributed: a ``dict`` directory or NLTK's ``wordnet.zip``.

    Index files are kept as bytes and searched by bisection (they are sorted by lemma,
    which is checked on load; an unsorted copy is indexed in a dict instead), so loading
    costs little more than reading the files. Synset keys are the byte offsets of
    WordNet's ``data.*`` files.
    """

    def __init__(self, location: str):
        self.location = location
        self._zip = zipfile.ZipFile(location) if not os.path.isdir(location) else None
        self._index: dict[str, bytes] = {}
        self._index_dict: dict[str, dict[str, list[int]]] = {}
        self._exceptions = {}
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

    def licence(self) -> str:
        """The licence notice at the head of ``data.noun`` (its numbered header lines)."""
        lines = []
        for line in self._read("data.noun", 8000).decode("utf-8").splitlines():
            if not line.startswith("  "):
                break
            lines.append(line.split(" ", 3)[3].rstrip() if len(line.split(" ", 3)) > 3 else "")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _parse_offsets(line: str) -> list[int]:
        # lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset...
        parts = line.split()
        n_synsets = int(parts[2])
        n_pointers = int(parts[3])
        return [int(x) for x in parts[6 + n_pointers: 6 + n_pointers + n_synsets]]

    def index_entries(self, pos: str) -> Iterator[tuple[str, list[int]]]:
        """Every (lemma, synset offsets) of ``index.<pos>``, in file order."""
        for line in self._read(f"index.{_FILES[pos]}").decode("utf-8").splitlines():
            if line and not line.startswith(" "):
                yield line.split(" ", 1)[0], self._parse_offsets(line)

    def offsets(self, lemma: str, pos: str) -> list[int] | None:
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

    def lemma_names(self, pos: str, key: int) -> tuple[str, ...]:
        offset = key
        names = self._names.get((pos, offset))
        if names is None:
            data = self._data_file(pos)
            end = data.find(b"\n", offset)
            fields = data[offset:end if end >= 0 else len(data)].decode("utf-8").split("|")[0].split()
            if not fields or int(fields[0]) != offset:
                names = ()
            else:
                count = int(fields[3], 16)
                names = tuple(_MARKER.sub("", fields[4 + 2 * i]) for i in range(count))
            self._names[(pos, offset)] = names
        return names


class BundledWordNet(_Reader):
    """The WordNet 3.0 data shipped with assay (``data/wordnet-3.0.gz``).

    The file is gzip-compressed UTF-8 text. It starts with ``# assay WordNet data``
    and ``#`` comment lines carrying WordNet's licence, then ``@version 3.0`` and, per part
    of speech ``n v a r``, two sections:

    * ``@synsets POS``: one synset a line (its key is the line's number in the section),
      the lemma names in WordNet's order separated by spaces; a name followed by ``:K``
      is the lemma's (K+1)-th synset in WordNet's index order (``:0`` is left out). The
      index of a lemma is thus rebuilt from the names: lemma ``name.lower()`` has, at
      position K, this synset.
    * ``@exceptions POS``: ``form base...`` a line (WordNet's ``POS.exc``).

    Loading reads the whole file once and builds the lemma index (about 150,000
    lemmas) in memory.
    """

    def __init__(self, location: str = BUNDLED_PATH):
        self.location = location
        self.version = "unknown"
        self._exceptions = {}
        self._synset_lines: dict[str, list[str]] = {}
        self._index: dict[str, dict[str, int | list[int]]] = {}
        with gzip.open(location, "rt", encoding="utf-8") as f:
            text = f.read()
        if not text.startswith(_BUNDLED_MAGIC.decode()):
            raise ValueError(f"{location}: not an assay WordNet data file")
        for section in text.split("\n@")[1:]:
            head, _, body = section.partition("\n")
            kind, _, pos = head.partition(" ")
            lines = body.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if kind == "version":
                self.version = pos
            elif kind == "synsets" and pos in _FILES:
                self._synset_lines[pos] = lines
                self._index[pos] = self._build_index(location, pos, lines)
            elif kind == "exceptions" and pos in _FILES:
                exc: dict[str, list[str]] = {}
                for line in lines:
                    terms = line.split(" ")
                    exc[terms[0]] = terms[1:]
                self._exceptions[pos] = exc
            else:
                raise ValueError(f"{location}: unknown section '@{head}'")
        missing = [p for p in _FILES if p not in self._index or p not in self._exceptions]
        if missing:
            raise ValueError(f"{location}: no sections for part(s) of speech {', '.join(missing)}")

    @staticmethod
    def _build_index(location: str, pos: str, lines: list[str]) -> dict[str, int | list[int]]:
        # a lemma with one synset (most of them) maps to its key, others to their keys in order
        index: dict[str, int | list[int]] = {}
        ranked: list[tuple[str, int, int]] = []
        for i, line in enumerate(lines):
            for token in line.lower().split(" "):
                if ":" in token:
                    name, _, k = token.partition(":")
                    ranked.append((name, int(k), i))
                else:
                    index[token] = i
        for name, k, i in ranked:
            keys = index.get(name)
            if not isinstance(keys, list):
                keys = index[name] = [-1 if keys is None else keys]
            if k >= len(keys):
                keys.extend([-1] * (k + 1 - len(keys)))
            keys[k] = i
        for name, keys in index.items():
            if isinstance(keys, list) and -1 in keys:
                raise ValueError(f"{location}: @synsets {pos}: lemma '{name}' misses a synset in its order")
        return index

    def offsets(self, lemma: str, pos: str) -> list[int] | None:
        keys = self._index[pos].get(lemma)
        return [keys] if isinstance(keys, int) else keys

    def lemma_names(self, pos: str, key: int) -> tuple[str, ...]:
        return tuple(t.partition(":")[0] for t in self._synset_lines[pos][key].split(" "))


def open_wordnet(location: str) -> WordNet | BundledWordNet:
    """The reader for ``location``: bundled-format file, ``dict`` directory or NLTK zip."""
    if not os.path.isdir(location) and _is_bundled_format(location):
        return BundledWordNet(location)
    return WordNet(location)


_lock = threading.Lock()
_loaded = False
_wordnet: WordNet | BundledWordNet | None = None


def get_wordnet() -> WordNet | BundledWordNet | None:
    """The process-wide WordNet, loaded on first use; None when none is found or readable."""
    global _loaded, _wordnet
    if not _loaded:
        with _lock:
            if not _loaded:
                path = find_wordnet_dir()
                try:
                    _wordnet = open_wordnet(path) if path else None
                except Exception:  # an unreadable copy: behave as if there were none
                    _wordnet = None
                _loaded = True
    return _wordnet
