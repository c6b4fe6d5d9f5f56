"""The loopback pcap reader of the wire benchmark (benchmarks/peers/wire.py): a capture the test
writes itself (two requests on one keep-alive connection, a third on another, chunked SSE split
across packets, a retransmission), read back to the requests' wire TTFTs."""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "wire", Path(__file__).resolve().parents[2] / "benchmarks" / "peers" / "wire.py")
wire = importlib.util.module_from_spec(SPEC)
sys.modules.setdefault("wire", wire)        # its dataclasses look their module up by name
SPEC.loader.exec_module(wire)

PORT = 8000


def _frame(src_port: int, dst_port: int, seq: int, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", src_port, dst_port, seq, 0, 5 << 4, 0x18, 65535, 0, 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))
    return b"\0" * 12 + b"\x08\x00" + ip + tcp          # Ethernet header, as tcpdump -i lo writes


def _pcap(path: Path, packets: list[tuple[float, bytes]], nano: bool = True) -> None:
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack("<IHHiIII", magic, 2, 4, 0, 0, 262144, 1)
    for t, frame in packets:
        sec = int(t)
        frac = round((t - sec) * (1e9 if nano else 1e6))
        out += struct.pack("<IIII", sec, frac, len(frame), len(frame)) + frame
    path.write_bytes(out)


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _request(rid: str) -> bytes:
    body = b'{"model":"m","stream":true}'
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: %s\r\nContent-Length: %d\r\n\r\n"
            % (rid.encode(), len(body)) + body)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
ROLE = _chunk(b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n')
TOKEN = _chunk(b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n')
END = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


class Conn:
    """A connection's two sequence counters, writing packets into a list."""

    def __init__(self, packets: list, client_port: int) -> None:
        self.packets, self.port, self.up, self.down = packets, client_port, 1000, 5000

    def send(self, t: float, data: bytes, resend: bool = False) -> None:
        self.packets.append((t, _frame(self.port, PORT, self.up, data)))
        self.up += 0 if resend else len(data)

    def answer(self, t: float, data: bytes, resend: bool = False) -> None:
        self.packets.append((t, _frame(PORT, self.port, self.down, data)))
        self.down += 0 if resend else len(data)


def _capture(tmp_path: Path, nano: bool = True) -> Path:
    packets: list = []
    a, b = Conn(packets, 40001), Conn(packets, 40002)
    a.send(10.0, _request("r1"))
    a.answer(10.001, HEAD + ROLE)
    b.send(10.002, _request("r3"))
    a.answer(10.100, TOKEN[:20])               # the first token's event split over two packets:
    a.answer(10.105, TOKEN[20:] + END)         # it is complete at the second
    b.answer(10.150, HEAD)
    b.answer(10.250, ROLE + TOKEN, resend=True)  # sent twice: the first stamp counts
    b.answer(10.260, ROLE + TOKEN)
    b.answer(10.270, END)
    a.send(11.0, _request("r2"))               # the same connection, kept alive
    a.answer(11.050, HEAD + ROLE + TOKEN + END)
    path = tmp_path / "lo.pcap"
    _pcap(path, packets, nano)
    return path


@pytest.mark.parametrize("nano", [True, False])
def test_requests_split_and_timed(tmp_path, nano):
    got = wire.exchanges(_capture(tmp_path, nano), PORT)
    assert [e.request_id for e in got] == ["r1", "r3", "r2"]
    assert [e.index for e in got] == [0, 0, 1]
    assert {e.path for e in got} == {"/v1/chat/completions"}
    assert got[0].conn == got[2].conn != got[1].conn
    ttft = {e.request_id: e.wire_ttft for e in got}
    assert ttft["r1"] == pytest.approx(0.105, abs=2e-6)
    assert ttft["r3"] == pytest.approx(0.248, abs=2e-6)
    assert ttft["r2"] == pytest.approx(0.050, abs=2e-6)
    assert got[0].last_byte == pytest.approx(10.105, abs=2e-6)


def test_no_content_event_no_ttft():
    resp = HEAD + ROLE + END
    assert wire.first_content_offset(resp) is None
    plain = b"HTTP/1.1 200 OK\r\n\r\n" + b'data: {"choices":[{"text":"a"}]}\n\n'
    assert wire.first_content_offset(plain) == len(plain) - 1


def test_missing_bytes_and_bad_files_are_errors(tmp_path):
    packets: list = []
    a = Conn(packets, 40001)
    a.send(1.0, _request("r1"))
    a.down += 7                                # a server segment the capture dropped
    a.answer(1.1, HEAD)
    a.down = 5000
    a.answer(1.2, b"x")
    path = tmp_path / "gap.pcap"
    _pcap(path, packets[:1] + packets[2:] + packets[1:2])
    with pytest.raises(ValueError, match="missing bytes"):
        wire.exchanges(path, PORT)
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\x0a\x0d\x0d\x0a" + b"\0" * 40)
    with pytest.raises(ValueError, match="pcapng"):
        list(wire.read_packets(bad))
