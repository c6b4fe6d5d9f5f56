"""Per-request timing truth from a packet capture of the loopback: a small pcap reader.

Reads a classic pcap file (microsecond or nanosecond magic, either byte order; link types
Ethernet (what ``tcpdump -i lo`` writes on Linux), Linux cooked v1/v2, BSD loopback and raw IP),
keeps the TCP segments over IPv4 or IPv6 that carry payload, and splits each connection's two
byte streams into HTTP/1.1 exchanges:

- a connection is its 4-tuple; the client side is the one that sends to ``server_port``;
- each direction's bytes are put in sequence order (relative to the first sequence number seen;
  a byte range seen twice keeps its first stamp, so a retransmission never moves a time);
- on a keep-alive connection a new request starts at each client segment that begins with an
  HTTP method (``POST``, ``GET`` ...); HTTP/1.1 clients do not pipeline, so the response bytes
  of request k are the server's bytes sent between request k's first packet and request k+1's;
- request k's ``start`` is the kernel stamp of its first payload packet (the handshake of a new
  connection is not part of it, as no instrument counts it either); its ``first_content`` is the
  stamp of the packet that completes the first server-sent event whose JSON carries a non-empty
  ``choices[0].delta.content`` (chat) or ``choices[0].text`` (completions), after the response's
  chunked framing is removed. ``wire_ttft`` = first_content - start.

The request head's ``X-Request-Id`` is kept, so instruments that send one are matched by it.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

METHODS = (b"POST ", b"GET ", b"PUT ", b"HEAD ", b"DELETE ", b"PATCH ", b"OPTIONS ")
# link type -> bytes of link header before the IP header (None: read the protocol from it)
LINK = {0: 4, 1: 14, 101: 0, 113: 16, 276: 20}


@dataclass
class Exchange:
    """One HTTP request/response seen on the wire (times: the capture's clock, seconds)."""

    conn: tuple
    index: int                      # its place on its connection, from 0
    start: float
    request_id: str | None = None
    path: str = ""
    first_content: float | None = None
    last_byte: float | None = None

    @property
    def wire_ttft(self) -> float | None:
        return None if self.first_content is None else self.first_content - self.start


@dataclass
class _Stream:
    """One direction of a connection: (relative seq, time, payload) pieces, rebuilt in order."""

    base: int | None = None
    pieces: list = field(default_factory=list)

    def add(self, seq: int, t: float, data: bytes) -> None:
        if self.base is None:
            self.base = seq
        self.pieces.append(((seq - self.base) & 0xFFFFFFFF, t, data))

    def bytes_and_stamps(self) -> tuple[bytes, list[tuple[int, int, float]]]:
        """The stream's bytes in order, and (start, end, stamp) per byte range as first seen."""
        out, spans, end = bytearray(), [], 0
        for off, t, data in sorted(self.pieces, key=lambda p: (p[0], p[1])):
            if off + len(data) <= end:
                continue                    # a retransmission of bytes already placed
            if off > end:
                raise ValueError(f"capture is missing bytes {end}..{off} of a TCP stream (dropped packets?)")
            new = data[end - off:]
            spans.append((end, end + len(new), t))
            out += new
            end += len(new)
        return bytes(out), spans


def read_packets(path: Path):
    """Yield (time s, src, dst, sport, dport, seq, payload) for each TCP packet with payload."""
    raw = Path(path).read_bytes()
    if len(raw) < 24:
        raise ValueError(f"{path}: not a pcap file (shorter than its global header)")
    magic = raw[:4]
    orders = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
              b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}
    if magic not in orders:
        raise ValueError(f"{path}: not a classic pcap file (magic {magic.hex()}; pcapng is not read)")
    order, unit = orders[magic]
    link = struct.unpack(order + "I", raw[20:24])[0] & 0x0FFFFFFF
    if link not in LINK:
        raise ValueError(f"{path}: link type {link} is not read (Ethernet, Linux cooked, loopback, raw IP are)")
    pos = 24
    while pos + 16 <= len(raw):
        sec, frac, caplen, _ = struct.unpack(order + "IIII", raw[pos:pos + 16])
        frame = raw[pos + 16:pos + 16 + caplen]
        pos += 16 + caplen
        got = _tcp(frame[LINK[link]:])
        if got is not None:
            yield (sec + frac * unit, *got)


def _tcp(ip: bytes):
    """(src, dst, sport, dport, seq, payload) of a TCP segment with payload, else None."""
    if not ip:
        return None
    version = ip[0] >> 4
    if version == 4:
        ihl, total, proto = (ip[0] & 15) * 4, struct.unpack("!H", ip[2:4])[0], ip[9]
        src, dst, seg = ip[12:16], ip[16:20], ip[ihl:total]
    elif version == 6:
        plen, proto = struct.unpack("!H", ip[4:6])[0], ip[6]
        src, dst, seg = ip[8:24], ip[24:40], ip[40:40 + plen]
    else:
        return None
    if proto != 6 or len(seg) < 20:
        return None
    sport, dport, seq = struct.unpack("!HHI", seg[:8])
    payload = seg[(seg[12] >> 4) * 4:]
    return (src, dst, sport, dport, seq, payload) if payload else None


def exchanges(path: Path, server_port: int) -> list[Exchange]:
    """Every HTTP exchange to ``server_port`` in the capture, in order of their first packet."""
    conns: dict[tuple, tuple[_Stream, _Stream]] = {}
    for t, src, dst, sport, dport, seq, payload in read_packets(path):
        if dport == server_port:
            key, side = (src, sport, dst, dport), 0
        elif sport == server_port:
            key, side = (dst, dport, src, sport), 1
        else:
            continue
        conns.setdefault(key, (_Stream(), _Stream()))[side].add(seq, t, payload)
    out: list[Exchange] = []
    for key, (up, down) in conns.items():
        out += _split(key, up, down)
    return sorted(out, key=lambda e: e.start)


def _stamp_at(spans: list[tuple[int, int, float]], offset: int) -> float:
    """The stamp of the packet that carried byte ``offset`` of a stream."""
    lo, hi = 0, len(spans) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if spans[mid][1] <= offset:
            lo = mid + 1
        else:
            hi = mid
    return spans[lo][2]


def _split(key: tuple, up: _Stream, down: _Stream) -> list[Exchange]:
    """A connection's exchanges: requests start at client segments that begin with a method."""
    req_bytes, req_spans = up.bytes_and_stamps()
    starts = [(a, t) for a, _, t in req_spans if req_bytes[a:a + 8].startswith(METHODS)]
    resp, resp_spans = down.bytes_and_stamps() if down.pieces else (b"", [])
    out = []
    for k, (offset, t0) in enumerate(starts):
        head_end = req_bytes.find(b"\r\n\r\n", offset)
        head = req_bytes[offset:head_end]
        path = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
        ex = Exchange(conn=key, index=k, start=t0, request_id=_header(head, b"x-request-id"), path=path)
        t1 = starts[k + 1][1] if k + 1 < len(starts) else float("inf")
        # the response bytes: those the server sent after this request began and before the next
        lo = next((a for a, _, t in resp_spans if t >= t0), len(resp))
        hi = next((a for a, _, t in resp_spans if t >= t1), len(resp))
        if lo < hi:
            ex.last_byte = _stamp_at(resp_spans, hi - 1)
            at = first_content_offset(resp[lo:hi])
            if at is not None:
                ex.first_content = _stamp_at(resp_spans, lo + at)
        out.append(ex)
    return out


def _header(head: bytes, name: bytes) -> str | None:
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name:
            return v.strip().decode("latin-1")
    return None


def _dechunk(body: bytes) -> tuple[bytes, list[int]]:
    """Chunked transfer coding removed; per decoded byte, its offset in ``body``."""
    out, where, pos = bytearray(), [], 0
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            break
        size = int(body[pos:eol].split(b";")[0] or b"0", 16)
        if size == 0:
            break
        data = body[eol + 2:eol + 2 + size]
        out += data
        where += range(eol + 2, eol + 2 + len(data))
        pos = eol + 2 + size + 2
    return bytes(out), where


def first_content_offset(response: bytes) -> int | None:
    """Offset in ``response`` (head + body as sent) of the last byte of the first server-sent
    event carrying content; None when no event does."""
    head_end = response.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    body_at = head_end + 4
    body = response[body_at:]
    if _header(response[:head_end], b"transfer-encoding") == "chunked":
        body, where = _dechunk(body)
    else:
        where = range(len(body))
    pos = 0
    while True:
        end = body.find(b"\n\n", pos)
        if end < 0:
            return None
        if _has_content(body[pos:end]):
            return body_at + where[end + 1]
        pos = end + 2


def _has_content(event: bytes) -> bool:
    data = b"".join(line[5:].strip() for line in event.replace(b"\r", b"").split(b"\n") if line.startswith(b"data:"))
    if not data or data == b"[DONE]":
        return False
    try:
        choice = (json.loads(data).get("choices") or [{}])[0]
    except (ValueError, AttributeError):
        return False
    return bool((choice.get("delta") or {}).get("content") or choice.get("text"))
