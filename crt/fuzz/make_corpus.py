#!/usr/bin/env python3
"""Write the fuzzers' seed corpora from the golden frames of the spec (nothing binary is committed).

Usage: make_corpus.py OUT_DIR   -> OUT_DIR/{unframer,session,rpc_packet,rpc_server}/seed_*
"""

from __future__ import annotations

import binascii
import struct
import sys
from pathlib import Path


def frame(payload: bytes) -> bytes:
    """One frame without the 0xFE prefix: FF FD, escaped length and payload, escaped CRC."""
    body = b"\xff\xfd" + struct.pack("<I", len(payload)).replace(b"\xff", b"\xff\xff")
    body += payload.replace(b"\xff", b"\xff\xff")
    crc = struct.pack("<H", binascii.crc_hqx(body, 0xFFFF))
    return body + crc.replace(b"\xff", b"\xff\xff")


LONG_TEXT = (b"this payload is exactly 255 characters long. chunk is 64 bytes. " * 4)[:-1]
FRAMING_PAYLOADS = [b"one", b"two2", b"three", b"", LONG_TEXT, b'es_\xff_capeir/^>t@"hr']

# Session payloads (header + body) from the spec's session goldens.
SESSION_PAYLOADS = [
    bytes.fromhex("000002"),
    bytes.fromhex("82000001"),
    bytes.fromhex("82660101"),
    bytes.fromhex("826610") + b"hello",
    bytes.fromhex("000003") + b"log1",
    bytes.fromhex("66000001"),
    bytes.fromhex("66450101"),
]


def rpc(code: int, body: bytes) -> bytes:
    packet = struct.pack("<i", code) + body
    return struct.pack("<Q", len(packet)) + packet


def packed_seq(args: list[tuple[int, bytes]]) -> bytes:
    out = struct.pack("<i", len(args))
    out += b"".join(struct.pack("<i", tc) for tc, _ in args)
    return out + b"".join(v for _, v in args)


def tensor(data: int, shape: list[int], code: int = 2, bits: int = 32, offset: int = 0) -> bytes:
    out = struct.pack("<QiiiBBH", data, 1, 0, len(shape), code, bits, 1)
    return out + b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<Q", offset)


def string(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


RPC_PACKETS = [
    rpc(9, packed_seq([(11, string(b"runtime.SystemLib"))])),  # spec §4.8
    rpc(3, struct.pack("<Q", 0x80028000) + packed_seq([])),
    rpc(
        3,
        struct.pack("<Q", 0x80028001)
        + packed_seq(
            [(9, struct.pack("<Q", 0x8000)), (11, string(b"run")), (0, struct.pack("<q", 1))]
        ),
    ),
    rpc(
        3,
        struct.pack("<Q", 0x80028005)
        + packed_seq(
            [
                (9, struct.pack("<Q", 0x8000)),
                (6, struct.pack("<ii", 1, 0)),
                (11, string(b"default")),
            ]
        ),
    ),
    rpc(7, tensor(0x1000, [1, 4]) + struct.pack("<Q", 16) + bytes(range(16))),
    rpc(6, tensor(0x1000, [1, 4], offset=4) + struct.pack("<Q", 8)),
    rpc(17, packed_seq([(7, tensor(0, [2, 3])), (4, b"")])),
    rpc(10, packed_seq([(3, struct.pack("<Q", 0x1234)), (0, struct.pack("<q", 13))])),
    rpc(16, packed_seq([(7, tensor(0x1000, [4])), (7, tensor(0x2000, [4])), (3, bytes(8))])),
    rpc(2, string(b"0.8.0") + packed_seq([])),
    rpc(1, b""),
    rpc(
        13,
        packed_seq(
            [
                (6, struct.pack("<ii", 1, 0)),
                (0, struct.pack("<q", 64)),
                (0, struct.pack("<q", 8)),
                (5, struct.pack("<BBHi", 2, 32, 1, 0)),
            ]
        ),
    ),
]

# Line noise for the whole-server target: broken escapes, a frame with a bad CRC, a frame cut
# short, an invalid escape inside a frame, bytes without 0xFF.
LINE_NOISE = [
    b"\xff\x00\xff\xfe\xff",
    b"\xff\xfd\x05\x00\x00\x00hello\x00\x00",
    b"\xff\xfd\x00\x00\x00\x7f",
    b"\xff\xfd\x02\x00\x00\x00\xff\x01",
    bytes(range(0, 0xFF, 7)),
]


def noise_record(noise: bytes) -> bytes:
    """A whole-server record of line noise: its size with bit 15 set, then the bytes."""
    return struct.pack("<H", 0x8000 | len(noise)) + noise


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: make_corpus.py OUT_DIR\n")
        return 2
    out = Path(argv[1])
    seeds = {
        "unframer": [bytes([n]) + b"\xfe" + frame(p) for n, p in enumerate(FRAMING_PAYLOADS)]
        + [b"\x40\xfe" + b"".join(frame(p) for p in FRAMING_PAYLOADS)],
        "session": [b"\x00\x3c\xfe" + b"".join(frame(p) for p in SESSION_PAYLOADS)]
        + [b"\x01\x3c" + b"".join(bytes([len(p)]) + p for p in SESSION_PAYLOADS)],
        "rpc_packet": RPC_PACKETS,
        # host nonce, then [u16 size][request] records; bit 15 of the size marks line noise
        "rpc_server": [
            b"\x3c" + b"".join(struct.pack("<H", len(p)) + p for p in RPC_PACKETS),
            b"\x3c" + b"".join(struct.pack("<H", len(p)) + p for p in RPC_PACKETS[:4]),
            b"\x3c" + b"".join(noise_record(n) + struct.pack("<H", len(p)) + p
                              for n, p in zip(LINE_NOISE, RPC_PACKETS, strict=False)),
        ],
    }
    for name, items in seeds.items():
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        for i, item in enumerate(items):
            (d / f"seed_{i:02d}").write_bytes(item)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
