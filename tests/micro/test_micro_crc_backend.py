"""The frame CRC gives identical frames with fastcrc and with the binascii.crc_hqx fallback."""

from __future__ import annotations

import binascii
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.framing_model import naive_unframe

from project_api.micro import framing
from project_api.micro.framing import Framer, Unframer, crc16

REPO = Path(__file__).resolve().parents[2]


def _payloads() -> list[bytes]:
    rng = random.Random(1234)
    out = [b"", b"one", b"\xff", b"\xff" * 300, bytes(range(256)) * 4]
    for _ in range(20):
        out.append(bytes(rng.choice((0xFF, 0xFE, 0xFD, rng.randrange(256)))
                         for _ in range(rng.randrange(1, 3000))))
    out.append(rng.randbytes(1 << 20))
    return out


def _frames_hex() -> list[str]:
    framer = Framer()
    return [framer.frame(p).hex() for p in _payloads()]


def test_crc16_matches_binascii_incrementally() -> None:
    rng = random.Random(7)
    data = rng.randbytes(100_000)
    assert crc16(b"123456789") == 0x29B1
    assert crc16(data) == binascii.crc_hqx(data, 0xFFFF)
    for cut in (0, 1, 333, 99_999):
        head = crc16(data[:cut])
        assert crc16(memoryview(data)[cut:], head) == binascii.crc_hqx(data, 0xFFFF)
        assert crc16(bytearray(data[cut:]), head) == binascii.crc_hqx(data, 0xFFFF)


def test_fastcrc_backend_in_use() -> None:
    """fastcrc is a dependency of project-api (pyproject.toml): without it the install is
    broken, which fails here rather than skipping."""
    import fastcrc  # noqa: F401

    assert framing.CRC_BACKEND == "fastcrc"


def test_fallback_without_fastcrc_gives_identical_frames() -> None:
    """A child interpreter where ``import fastcrc`` fails frames the same payloads."""
    script = (
        "import sys, json\n"
        "sys.modules['fastcrc'] = None\n"  # makes 'import fastcrc' raise ImportError
        f"sys.path.insert(0, {str(REPO)!r})\n"
        f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
        "from project_api.micro import framing\n"
        "import test_micro_crc_backend as t\n"
        "frames = t._frames_hex()\n"
        "payloads = t._payloads()\n"
        "un = framing.Unframer(max_payload_bytes=1 << 21)\n"
        "got = un.feed(bytes.fromhex(''.join(frames)))\n"
        "print(json.dumps({'backend': framing.CRC_BACKEND, 'frames': frames,\n"
        "                  'decoded': got == payloads}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=False, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    child = json.loads(proc.stdout)
    assert child["backend"] == "binascii"
    assert child["decoded"]
    assert child["frames"] == _frames_hex()


def test_frames_checked_against_binascii_recipe() -> None:
    """Independent of the backend: every frame's CRC is binascii.crc_hqx of its escaped bytes."""
    for payload in _payloads():
        escaped = payload.replace(b"\xff", b"\xff\xff")
        length = len(payload).to_bytes(4, "little").replace(b"\xff", b"\xff\xff")
        head = b"\xff\xfd" + length + escaped
        crc = binascii.crc_hqx(head, 0xFFFF).to_bytes(2, "little").replace(b"\xff", b"\xff\xff")
        assert Framer().frame(payload) == b"\xfe" + head + crc
        assert Unframer(max_payload_bytes=1 << 21).feed(head + crc) == [payload]


@pytest.mark.parametrize("seed", range(10))
def test_bulk_unescape_matches_naive_model_on_random_splits(seed: int) -> None:
    """Long FF runs, in-frame nops and damage, cut at random points, against the naive model."""
    rng = random.Random(seed)
    framer = Framer()
    parts = []
    nops = 0
    for _ in range(16):
        payload = bytes(rng.choice((0xFF, 0xFF, 0xFE, 0xFD, rng.randrange(256)))
                        for _ in range(rng.randrange(0, 5000)))
        frame = bytearray(framer.frame(payload))
        kind = rng.random()
        if kind < 0.4 and frame[-1] != 0xFF and frame[-2] != 0xFF:
            # An in-frame nop at a pair boundary of the payload, with the CRC recomputed.
            prefix = b"\xfe" if frame[0] == 0xFE else b""
            body = bytes(frame[len(prefix) : -2])
            cut = 6 + 2 * rng.randrange(0, 3)
            if cut <= len(body) and body[cut - 1] != 0xFF:
                body = body[:cut] + b"\xff\xfe" + body[cut:]
                crc = binascii.crc_hqx(body, 0xFFFF).to_bytes(2, "little")
                frame = bytearray(prefix + body + crc.replace(b"\xff", b"\xff\xff"))
                nops += 1
        elif kind < 0.55:
            frame[rng.randrange(len(frame))] ^= rng.randrange(1, 256)
        parts.append(bytes(frame))
    data = b"".join(parts)
    unframer = Unframer(max_payload_bytes=1 << 16)
    got: list[bytes] = []
    pos = 0
    while pos < len(data):
        n = rng.choice((1, 2, 3, rng.randrange(1, 9000)))
        got += unframer.feed(data[pos : pos + n])
        pos += n
    expected = naive_unframe(data)
    assert got == expected
    assert len(expected) >= 6 and nops >= 1


@pytest.mark.parametrize("piece_bytes", [None, 1, 7, 4096, 1 << 20])
def test_iter_frame_pieces_join_to_the_frame(piece_bytes: int | None) -> None:
    rng = random.Random(99)
    head = b"\x01\xff\x02"
    body = bytes(rng.choice((0xFF, rng.randrange(256))) for _ in range(20_000))
    expected = Framer().frame(head + body)
    framer = Framer()
    pieces = list(framer.iter_frame((head, memoryview(body)), piece_bytes))
    assert b"".join(pieces) == expected
    if piece_bytes == 4096:
        assert len(pieces) == 1 + 1 + 5 + 1  # header, head part, body in 5 pieces, CRC
    # The FE prefix was decided at the call: the next frame has none.
    assert framer.frame(b"x") == Framer().frame(b"x")[1:]


def test_streamed_message_equals_queued_message() -> None:
    from project_api.micro.session import MessageType, SessionProtocol, SessionState

    body = random.Random(5).randbytes(300_000)
    a, b = SessionProtocol(), SessionProtocol()
    for p in (a, b):
        p.state = SessionState.SESSION_ESTABLISHED
        p.session_id = 0x1234
        p.send_message(MessageType.LOG, b"queued first")
    a.send_message(MessageType.NORMAL, body)
    streamed = b"".join(b.stream_message(MessageType.NORMAL, body, 65536))
    assert streamed == a.take_output()
    assert b.take_output() == b""
