"""The text encoding of an input file, and its lines as UTF-8 bytes.

Files are UTF-8, with or without a byte order mark. UTF-16 and UTF-32 files (Windows tools
write them: PowerShell's ``>``, "Unicode" exports) are recognised by their byte order mark,
or without one by the NUL bytes that ASCII text has in those encodings (JSON and CSV files
start with ASCII), and are read as well: their lines are decoded and handed on as UTF-8.
Bytes that are not valid in the file's encoding are reported with the encoding's name and
the byte offset in the file, the one thing that finds them in a hex editor or with
``tail -c +N``.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterator
from typing import IO

from assay.errors import InputError

_BOMS = ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"),  # before UTF-16's
         (b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le"), (b"\xef\xbb\xbf", "utf-8"))
_NAMES = {"utf-8": "UTF-8", "utf-16-le": "UTF-16 (little-endian)", "utf-16-be": "UTF-16 (big-endian)",
          "utf-32-le": "UTF-32 (little-endian)", "utf-32-be": "UTF-32 (big-endian)"}
_BLOCK = 1 << 16


def sniff(head: bytes) -> tuple[str, int]:
    """``(codec, length of the byte order mark)`` of text that starts with ``head`` (its first
    four bytes, fewer if the file is shorter)."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec, len(bom)
    if len(head) >= 4:
        nul = tuple(b == 0 for b in head[:4])
        if nul == (True, True, True, False):
            return "utf-32-be", 0
        if nul == (False, True, True, True):
            return "utf-32-le", 0
    if len(head) >= 2:
        if head[0] == 0 and head[1] != 0:
            return "utf-16-be", 0
        if head[0] != 0 and head[1] == 0:
            return "utf-16-le", 0
    return "utf-8", 0


def describe(codec: str) -> str:
    return _NAMES.get(codec, codec)


def bad_bytes(codec: str, data: bytes, start: int, reason: str, offset: int) -> str:
    """The message for bytes that are not valid ``codec``: ``data[start]`` is at byte ``offset``
    of the file."""
    shown = " ".join(f"0x{b:02x}" for b in data[start:start + (1 if codec == "utf-8" else 2)])
    hint = ("save the file as UTF-8 (UTF-16 and UTF-32 are read too when they start with a byte order mark)"
            if codec == "utf-8" else "the file is not valid text in that encoding; convert it to UTF-8")
    return f"not valid {describe(codec)} at byte offset {offset} (byte {shown}: {reason}); {hint}"


def utf8_problem(data: bytes, offset: int) -> tuple[str, int] | None:
    """When ``data`` (starting at byte ``offset`` of the file) is not valid UTF-8: the message,
    and the index in ``data`` of the first bad byte; else None."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return bad_bytes("utf-8", data, e.start, e.reason, offset + e.start), e.start
    return None


def open_lines(f: IO[bytes], name: str) -> tuple[str, int, Iterator[bytes]]:
    """``(codec, byte order mark length, lines)`` of the binary file ``f``: each line as UTF-8
    bytes, ending with ``\\n`` except perhaps the last, the byte order mark left out. A UTF-8
    file's lines are its own bytes, not checked here (the caller decodes them and reports a
    bad one with :func:`utf8_problem`); another encoding's are decoded on the way, and bytes
    not valid in it raise :class:`InputError` naming the byte offset and the line."""
    head = f.peek(4)[:4] if hasattr(f, "peek") else b""
    codec, bom = sniff(head)
    if bom:
        f.read(bom)
    if codec == "utf-8":
        return codec, bom, iter(f)
    return codec, bom, _transcoded(f, codec, bom, name)


def _transcoded(f: IO[bytes], codec: str, offset: int, name: str) -> Iterator[bytes]:
    decoder = codecs.getincrementaldecoder(codec)()
    rest, lines_done = "", 0
    while True:
        block = f.read(_BLOCK)
        buffered = len(decoder.getstate()[0])  # bytes of a character cut by the last block
        try:
            text = decoder.decode(block, final=not block)
        except UnicodeDecodeError as e:
            at = offset - buffered + e.start
            before = e.object[:e.start].decode(codec, "replace")
            line = lines_done + before.count("\n") + 1
            raise InputError(bad_bytes(codec, e.object, e.start, e.reason, at), source=name, line=line) from None
        offset += len(block)
        if text:
            parts = (rest + text).split("\n")
            rest = parts.pop()
            lines_done += len(parts)
            for p in parts:
                yield (p + "\n").encode("utf-8")
        if not block:
            if rest:
                yield rest.encode("utf-8")
            return
