"""Frame layer goldens (spec §4.1/§4.2) on the Python side: Framer output and Unframer input."""

from __future__ import annotations

import binascii
import random
import struct

import pytest
from helpers.framing_model import naive_unframe

from project_api.micro.framing import DropReason, Framer, Unframer, UnframerState, crc16

TEXT_255 = ("this payload is exactly 255 characters long. chunk is 64 bytes. " * 4)[:-1].encode()

# (payload, wire without the FE prefix), straight from the spec's golden table.
GOLDEN = [
    (b"one", "ff fd 03 00 00 00 6f 6e 65 58 f4"),
    (b"two2", "ff fd 04 00 00 00 74 77 6f 32 13 11"),
    (b"three", "ff fd 05 00 00 00 74 68 72 65 65 63 9f"),
    (b"", "ff fd 00 00 00 00 83 44"),
    (TEXT_255, "ff fd ff ff 00 00 00 " + TEXT_255.hex(" ") + " 36 7e"),
    (
        b'es_\xff_capeir/^>t@"hr',
        "ff fd 13 00 00 00 65 73 5f ff ff 5f 63 61 70 65 69 72 2f 5e 3e 74 40 22 68 72 b4 ff ff",
    ),
]


def wire(text: str) -> bytes:
    return bytes.fromhex(text)


def feed_bytewise(unframer: Unframer, data: bytes) -> list[bytes]:
    out: list[bytes] = []
    for b in data:
        out += unframer.feed(bytes([b]))
    return out


def reference_frame(payload: bytes) -> bytes:
    """The spec's Python recipe, written independently of the Framer."""
    escaped = payload.replace(b"\xff", b"\xff\xff")
    head = b"\xff\xfd" + struct.pack("<I", len(payload)).replace(b"\xff", b"\xff\xff") + escaped
    crc = struct.pack("<H", binascii.crc_hqx(head, 0xFFFF)).replace(b"\xff", b"\xff\xff")
    return head + crc


def test_crc_check_value() -> None:
    assert crc16(b"123456789") == 0x29B1


def test_text_255_is_255_bytes() -> None:
    assert len(TEXT_255) == 255


@pytest.mark.parametrize(
    "payload,expected", GOLDEN, ids=["one", "two2", "three", "empty", "255", "escapes"]
)
def test_framer_golden(payload: bytes, expected: str) -> None:
    framer = Framer()
    assert framer.frame(payload) == b"\xfe" + wire(expected)
    # Only the first frame after construction gets the nop prefix.
    assert framer.frame(payload) == wire(expected)
    assert reference_frame(payload) == wire(expected)


def test_valid_packet_train() -> None:
    framer = Framer()
    out = framer.frame(b"one") + framer.frame(b"two2")
    framer.reset()
    out += framer.frame(b"three")
    assert out == b"\xfe" + wire(GOLDEN[0][1]) + wire(GOLDEN[1][1]) + b"\xfe" + wire(GOLDEN[2][1])


@pytest.mark.parametrize(
    "payload,expected", GOLDEN, ids=["one", "two2", "three", "empty", "255", "escapes"]
)
def test_unframer_golden_byte_at_a_time(payload: bytes, expected: str) -> None:
    data = b"\xfe" + wire(expected)
    unframer = Unframer()
    for i, b in enumerate(data):
        got = unframer.feed(bytes([b]))
        # The packet is delivered on its last byte and not before.
        assert got == ([payload] if i == len(data) - 1 else [])
    assert unframer.state == UnframerState.FIND_PACKET_START
    assert unframer.stats.frames == 1 and unframer.stats.dropped == 0


@pytest.mark.parametrize(
    "payload,expected", GOLDEN, ids=["one", "two2", "three", "empty", "255", "escapes"]
)
def test_unframer_every_split(payload: bytes, expected: str) -> None:
    data = wire(expected)
    for split in range(len(data) + 1):
        unframer = Unframer()
        got = unframer.feed(data[:split]) + unframer.feed(data[split:])
        assert got == [payload], split


def test_unframer_every_two_splits_of_a_train() -> None:
    payloads = [b"one", b"\xff\xff\xfe\xfd", b"", b'es_\xff_capeir/^>t@"hr']
    framer = Framer()
    data = b"".join(framer.frame(p) for p in payloads)
    for i in range(len(data) + 1):
        for j in range(i, len(data) + 1):
            unframer = Unframer()
            got = unframer.feed(data[:i]) + unframer.feed(data[i:j]) + unframer.feed(data[j:])
            assert got == payloads, (i, j)


def test_bytes_needed_hints() -> None:
    data = wire(GOLDEN[2][1])  # "three"
    unframer = Unframer()
    assert unframer.bytes_needed() == 1
    unframer.feed(data[:2])
    assert unframer.state == UnframerState.FIND_PACKET_LENGTH and unframer.bytes_needed() == 4
    unframer.feed(data[2:4])
    assert unframer.bytes_needed() == 2
    unframer.feed(data[4:6])
    assert unframer.state == UnframerState.FIND_PACKET_CRC and unframer.bytes_needed() == 5
    unframer.feed(data[6:9])
    assert unframer.bytes_needed() == 2
    unframer.feed(data[9:11])
    assert unframer.state == UnframerState.FIND_CRC_END and unframer.bytes_needed() == 2
    unframer.feed(data[11:12])
    assert unframer.bytes_needed() == 1
    assert unframer.feed(data[12:]) == [b"three"]


@pytest.mark.parametrize("cut", [2, 5, 7, 9, 11])
def test_restart_mid_packet_fd_alone(cut: int) -> None:
    """A second FF FD inside a packet aborts it; the resent packet then decodes."""
    one = wire(GOLDEN[0][1])
    three = wire(GOLDEN[2][1])
    unframer = Unframer()
    assert unframer.feed(three[:cut]) == []
    assert unframer.feed(b"\xff") == []
    # The FD arrives alone: it aborts the partial packet and starts the new one.
    assert unframer.feed(b"\xfd") == []
    assert unframer.stats.short_packet == 1
    assert unframer.last_drop == DropReason.SHORT_PACKET
    assert unframer.feed(one[2:]) == [b"one"]


@pytest.mark.parametrize("cut", [2, 5, 7, 9, 11])
def test_restart_mid_packet_one_buffer(cut: int) -> None:
    three = wire(GOLDEN[2][1])
    unframer = Unframer()
    assert unframer.feed(three[:cut] + three) == [b"three"]
    assert unframer.stats.short_packet == 1


def test_invalid_escape_drops_packet_and_resyncs() -> None:
    bad = wire("ff fd 03 00 00 00 6f ff 41 65 58 f4")  # FF 41 is no escape
    unframer = Unframer()
    assert unframer.feed(bad + wire(GOLDEN[1][1])) == [b"two2"]
    assert unframer.stats.invalid_escape == 1


def test_in_packet_nop_is_dropped_but_covered_by_crc() -> None:
    body = b"\xff\xfd" + b"\x03\x00\x00\x00" + b"o\xff\xfene"
    frame = body + struct.pack("<H", binascii.crc_hqx(body, 0xFFFF))
    assert Unframer().feed(frame) == [b"one"]
    # The same bytes with a CRC computed without the nop are rejected.
    unframer = Unframer()
    assert unframer.feed(frame[:-2] + wire("58 f4").replace(b"\xff", b"\xff\xff")) == []
    assert unframer.stats.bad_crc == 1


def test_stray_bytes_and_nops_between_frames() -> None:
    framer = Framer()
    data = b"\x00\xfe\xff\xfe\x12" + framer.frame(b"one") + b"\xfe\xfe\xff" + framer.frame(b"two2")
    assert Unframer().feed(data) == [b"one", b"two2"]


def test_bad_crc_dropped_then_next_decodes() -> None:
    corrupt = bytearray(wire(GOLDEN[2][1]))
    corrupt[-1] ^= 0x01
    unframer = Unframer()
    assert unframer.feed(bytes(corrupt) + wire(GOLDEN[0][1])) == [b"one"]
    assert unframer.stats.bad_crc == 1


def test_packet_too_long_is_refused_without_buffering() -> None:
    unframer = Unframer(max_payload_bytes=4)
    assert unframer.feed(wire(GOLDEN[2][1])) == []  # 5 > 4
    assert unframer.stats.packet_too_long == 1
    assert unframer.state == UnframerState.FIND_PACKET_START
    assert unframer.feed(wire(GOLDEN[1][1])) == [b"two2"]
    huge = b"\xff\xfd" + struct.pack("<I", 0xFFFFFFF0).replace(b"\xff", b"\xff\xff")
    unframer = Unframer(max_payload_bytes=1 << 20)
    assert unframer.feed(huge + wire(GOLDEN[0][1])) == [b"one"]
    assert unframer.stats.packet_too_long == 1


def test_max_sized_payload_accepted() -> None:
    payload = bytes(range(256)) * 16
    unframer = Unframer(max_payload_bytes=len(payload))
    assert unframer.feed(Framer().frame(payload)) == [payload]


def test_random_payloads_random_splits_match_reference() -> None:
    rng = random.Random(1234)
    framer = Framer()
    for _ in range(200):
        payload = bytes(
            rng.choice([0xFF, 0xFE, 0xFD, rng.randrange(256)]) for _ in range(rng.randrange(0, 300))
        )
        frame = framer.frame(payload)
        assert frame[1:] == reference_frame(payload)
        framer.reset()
        unframer = Unframer()
        got: list[bytes] = []
        pos = 0
        while pos < len(frame):
            step = rng.randrange(1, 8)
            got += unframer.feed(frame[pos : pos + step])
            pos += step
        assert got == [payload]


def test_random_corruption_never_yields_a_wrong_payload() -> None:
    """Flip bytes in a train: every payload delivered is one that was sent, in order, and the
    frames after a corrupted one decode."""
    rng = random.Random(99)
    for _ in range(100):
        payloads = [rng.randbytes(rng.randrange(0, 64)) for _ in range(6)]
        frames = [Framer().frame(p)[1:] for p in payloads]
        bad = rng.randrange(len(frames))
        corrupted = bytearray(frames[bad])
        idx = rng.randrange(len(corrupted))
        corrupted[idx] ^= rng.randrange(1, 256)
        frames[bad] = bytes(corrupted)
        got = Unframer().feed(b"".join(frames))
        # Frames after the corrupted one are intact; the one before it too.
        after = len(payloads) - bad - 1
        assert got[len(got) - after :] == payloads[bad + 1 :]
        assert got[:bad] == payloads[:bad]
        for p in got:
            assert p in payloads


def test_large_payload_all_ff() -> None:
    payload = b"\xff" * (1 << 20)
    frame = Framer().frame(payload)
    assert frame[7 : 7 + 2 * len(payload)] == b"\xff" * (2 * len(payload))
    unframer = Unframer(max_payload_bytes=1 << 20)
    assert unframer.feed(frame) == [payload]


@pytest.mark.parametrize("seed", range(30))
def test_fast_unframer_matches_naive_model_on_damaged_streams(seed: int) -> None:
    rng = random.Random(seed)
    framer = Framer()
    parts = []
    for _ in range(30):
        kind = rng.random()
        payload = bytes(
            rng.choice((0xFF, 0xFE, 0xFD, rng.randrange(256))) for _ in range(rng.randrange(0, 150))
        )
        frame = bytearray(framer.frame(payload))
        if kind < 0.2:
            frame[rng.randrange(len(frame))] ^= rng.randrange(1, 256)
        elif kind < 0.3:
            del frame[rng.randrange(len(frame)) :]
        elif kind < 0.4:
            frame[rng.randrange(len(frame)) : 0] = rng.choice(
                [b"\xff", b"\xff\xfe", b"\xff\xfd", b"\x00\xff"]
            )
        parts.append(bytes(frame))
        if rng.random() < 0.2:
            parts.append(rng.randbytes(rng.randrange(1, 20)))
    data = b"".join(parts)
    expected = naive_unframe(data)
    unframer = Unframer(max_payload_bytes=1 << 32)
    got: list[bytes] = []
    pos = 0
    while pos < len(data):
        step = rng.choice((1, 2, 3, 17, 64, 1000))
        got += unframer.feed(data[pos : pos + step])
        pos += step
    assert got == expected
