"""An independent model of the framing's receive side (spec §4.2): a byte-at-a-time state
machine written from the spec, the oracle the fast Unframer (and each CRC backend) is checked
against."""

from __future__ import annotations

import binascii
import struct


def naive_unframe(data: bytes) -> list[bytes]:
    """A byte-at-a-time model of the §4.2 state machine, independent of the fast Unframer."""
    out: list[bytes] = []
    state, saw_ff, crc = "start", False, 0
    field = bytearray()
    need = 0
    payload = b""
    i = 0
    while i < len(data):
        c = data[i]
        i += 1
        if state == "start":
            if saw_ff and c == 0xFD:
                state, field, need, crc = (
                    "length",
                    bytearray(),
                    4,
                    binascii.crc_hqx(b"\xff\xfd", 0xFFFF),
                )
            saw_ff = c == 0xFF
            continue
        covered = state != "crc"
        if saw_ff:
            saw_ff = False
            if c == 0xFD:  # restart: the FD begins a new packet
                state, saw_ff = "start", True
                i -= 1
                continue
            if c == 0xFE:
                crc = binascii.crc_hqx(b"\xff\xfe", crc) if covered else crc
                continue
            if c != 0xFF:
                state = "start"
                continue
            crc = binascii.crc_hqx(b"\xff\xff", crc) if covered else crc
            field.append(0xFF)
        elif c == 0xFF:
            saw_ff = True
            continue
        else:
            crc = binascii.crc_hqx(bytes([c]), crc) if covered else crc
            field.append(c)
        if len(field) == need:
            if state == "length":
                need = struct.unpack("<I", field)[0]
                state, field = "payload", bytearray()
                if need == 0:
                    state, payload, need = "crc", b"", 2
            elif state == "payload":
                state, payload, field, need = "crc", bytes(field), bytearray(), 2
            else:
                if struct.unpack("<H", field)[0] == crc:
                    out.append(payload)
                state = "start"
    return out
