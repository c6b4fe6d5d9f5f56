"""Deterministic attack converters: small pure functions that turn a request into another form.

None of them needs a model. Each encoder has its own name and, where the form can be read back,
a decoder of its own (``decode_<name>``), so that a target which decodes and complies can be
measured and the tests can check that nothing of the request is lost. The two seeded ones
(:func:`char_swap`, and the choices of :mod:`assay.simulate.redteam.strategies`) take a
``random.Random``; same seed, same output.

Encoders: :func:`base64_encode`, :func:`rot13`, :func:`caesar` (shift 3 by default),
:func:`atbash`, :func:`leetspeak`, :func:`char_swap`, :func:`confusables` (a small table of
look-alike letters written for assay), :func:`zero_width` (a zero-width space between letters),
:func:`tag_chars` (the text as invisible Unicode tag characters), :func:`flip` (reversed),
:func:`binary` (the UTF-8 bytes as 8-bit groups), :func:`morse`, :func:`url_encode`.
"""

from __future__ import annotations

import base64 as _b64
import random
import string
import urllib.parse

__all__ = ["CONFUSABLES", "LEET", "MORSE", "atbash", "base64_encode", "binary", "caesar", "char_swap", "confusables",
           "decode_atbash", "decode_base64", "decode_binary", "decode_caesar", "decode_confusables", "decode_flip",
           "decode_morse", "decode_rot13", "decode_tag_chars", "decode_url", "decode_zero_width", "flip",
           "leetspeak", "morse", "rot13", "tag_chars", "url_encode", "zero_width"]

ZWSP = "\u200b"
TAG_BASE = 0xE0000          # U+E0020..U+E007E mirror printable ASCII; invisible in most renderers


def base64_encode(text: str) -> str:
    """The UTF-8 bytes of ``text`` in standard base64."""
    return _b64.b64encode(text.encode("utf-8")).decode("ascii")


def decode_base64(text: str) -> str:
    return _b64.b64decode(text.encode("ascii")).decode("utf-8")


def _shift(text: str, k: int) -> str:
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + k) % 26 + 97))
        elif "A" <= ch <= "Z":
            out.append(chr((ord(ch) - 65 + k) % 26 + 65))
        else:
            out.append(ch)
    return "".join(out)


def caesar(text: str, shift: int = 3) -> str:
    """Each ASCII letter moved ``shift`` places along the alphabet (case kept, others as they are)."""
    return _shift(text, shift)


def decode_caesar(text: str, shift: int = 3) -> str:
    return _shift(text, -shift)


def rot13(text: str) -> str:
    """Caesar with shift 13: its own inverse."""
    return _shift(text, 13)


decode_rot13 = rot13


def atbash(text: str) -> str:
    """Each ASCII letter mirrored in the alphabet (a<->z, b<->y ...): its own inverse."""
    low, up = string.ascii_lowercase, string.ascii_uppercase
    return text.translate(str.maketrans(low + up, low[::-1] + up[::-1]))


decode_atbash = atbash

# Letters a reader still recognises as letters; the digits are the usual ones.
LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7", "g": "9", "b": "8"}


def leetspeak(text: str) -> str:
    """Some letters written as look-alike digits (a->4, e->3, i->1, o->0, s->5, t->7, g->9, b->8).
    Not reversible (digits in the text are ambiguous)."""
    table = {**LEET, **{k.upper(): v for k, v in LEET.items()}}
    return "".join(table.get(ch, ch) for ch in text)


def char_swap(text: str, rng: random.Random, rate: float = 0.5) -> str:
    """In words of four letters or more, two neighbouring inner letters swapped, in about
    ``rate`` of those words (chosen by ``rng``): the first and last letters stay, so the words
    stay readable. Seeded: the same ``rng`` state gives the same text."""
    words = text.split(" ")
    out = []
    for w in words:
        if len(w) >= 4 and w.isalpha() and rng.random() < rate:
            i = rng.randrange(1, len(w) - 2)
            w = w[:i] + w[i + 1] + w[i] + w[i + 2:]
        out.append(w)
    return " ".join(out)


# Latin letters and Cyrillic/Greek letters that look alike in most fonts (written for assay,
# from the letters' shapes; one look-alike per letter).
CONFUSABLES = {
    "a": "\u0430", "c": "\u0441", "e": "\u0435", "i": "\u0456", "j": "\u0458", "o": "\u043e", "p": "\u0440",
    "s": "\u0455", "x": "\u0445", "y": "\u0443", "A": "\u0391", "B": "\u0392", "C": "\u0421", "E": "\u0395",
    "H": "\u0397", "K": "\u039a", "M": "\u039c", "O": "\u039f", "P": "\u03a1", "T": "\u03a4", "X": "\u03a7",
}
_UNCONFUSE = {v: k for k, v in CONFUSABLES.items()}


def confusables(text: str) -> str:
    """Latin letters replaced by look-alike Cyrillic or Greek ones (:data:`CONFUSABLES`)."""
    return "".join(CONFUSABLES.get(ch, ch) for ch in text)


def decode_confusables(text: str) -> str:
    return "".join(_UNCONFUSE.get(ch, ch) for ch in text)


def zero_width(text: str) -> str:
    """A zero-width space (U+200B) after every character but the last."""
    return ZWSP.join(text)


def decode_zero_width(text: str) -> str:
    return text.replace(ZWSP, "")


def tag_chars(text: str) -> str:
    """Printable ASCII as the matching Unicode tag characters (U+E0020..U+E007E), which most
    screens do not show; other characters are kept as they are."""
    return "".join(chr(TAG_BASE + ord(ch)) if 0x20 <= ord(ch) <= 0x7E else ch for ch in text)


def decode_tag_chars(text: str) -> str:
    return "".join(chr(ord(ch) - TAG_BASE) if TAG_BASE + 0x20 <= ord(ch) <= TAG_BASE + 0x7E else ch for ch in text)


def flip(text: str) -> str:
    """The text reversed, character by character."""
    return text[::-1]


decode_flip = flip


def binary(text: str) -> str:
    """The UTF-8 bytes of ``text`` as 8-bit groups separated by spaces."""
    return " ".join(f"{b:08b}" for b in text.encode("utf-8"))


def decode_binary(text: str) -> str:
    return bytes(int(g, 2) for g in text.split()).decode("utf-8")


MORSE = {
    "a": ".-", "b": "-...", "c": "-.-.", "d": "-..", "e": ".", "f": "..-.", "g": "--.", "h": "....", "i": "..",
    "j": ".---", "k": "-.-", "l": ".-..", "m": "--", "n": "-.", "o": "---", "p": ".--.", "q": "--.-", "r": ".-.",
    "s": "...", "t": "-", "u": "..-", "v": "...-", "w": ".--", "x": "-..-", "y": "-.--", "z": "--..",
    "0": "-----", "1": ".----", "2": "..---", "3": "...--", "4": "....-", "5": ".....", "6": "-....",
    "7": "--...", "8": "---..", "9": "----.", ".": ".-.-.-", ",": "--..--", "?": "..--..", "'": ".----.",
    "!": "-.-.--", "/": "-..-.", "(": "-.--.", ")": "-.--.-", "&": ".-...", ":": "---...", ";": "-.-.-.",
    "=": "-...-", "+": ".-.-.", "-": "-....-", "_": "..--.-", '"': ".-..-.", "$": "...-..-", "@": ".--.-.",
}
_UNMORSE = {v: k for k, v in MORSE.items()}


def morse(text: str) -> str:
    """International Morse code: letters separated by a space, words by `` / ``. Case is lost;
    a character Morse has no code for is kept as it is."""
    return " / ".join(" ".join(MORSE.get(ch, ch) for ch in word) for word in text.lower().split())


def decode_morse(text: str) -> str:
    return " ".join("".join(_UNMORSE.get(code, code) for code in word.split()) for word in text.split(" / "))


def url_encode(text: str) -> str:
    """Percent-encoding of every character but letters, digits and ``-._~``."""
    return urllib.parse.quote(text, safe="")


def decode_url(text: str) -> str:
    return urllib.parse.unquote(text)
