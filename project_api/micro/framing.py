"""Frame layer of the device RPC (spec §4.1/§4.2): escaping, CRC-16 and resynchronisation.

A frame on the wire is::

    [FE, only after a framer reset] FF FD [u32 len][payload][u16 crc]

where everything after ``FF FD`` is escaped (each ``FF`` is sent as ``FF FF``) and the CRC is
CRC-16/CCITT-FALSE (``binascii.crc_hqx(..., 0xFFFF)``) over the on-wire bytes from ``FF FD``
through the end of the escaped payload.

Both classes work on whole buffers (``bytes.replace``, ``bytes.count``, regex runs) rather than
byte by byte, because megabyte tensors pass through them. The CRC comes from the ``fastcrc``
package when it is installed (about 40x faster than ``binascii.crc_hqx``, which stays the
fallback); :data:`CRC_BACKEND` says which one is in use.
"""

from __future__ import annotations

import binascii
import dataclasses
import enum
import re
import struct
from collections.abc import Callable, Iterator, Sequence

import numpy as np

_crc_hqx: Callable[[bytes | bytearray | memoryview, int], int]
try:
    from fastcrc import crc16 as _fastcrc16
except ImportError:  # pragma: no cover - depends on the environment
    _crc_hqx = binascii.crc_hqx
    #: Which implementation :func:`crc16` uses: ``"fastcrc"`` or ``"binascii"``.
    CRC_BACKEND = "binascii"
else:
    _fast_ccitt_false = _fastcrc16.ibm_3740

    def _crc_hqx(data: bytes | bytearray | memoryview, crc: int) -> int:
        return _fast_ccitt_false(data, initial=crc)

    CRC_BACKEND = "fastcrc"

ESCAPE_START = 0xFF
ESCAPE_NOP = 0xFE
PACKET_START = 0xFD

START_SEQUENCE = b"\xff\xfd"
NOP_PREFIX = b"\xfe"
CRC_INIT = 0xFFFF

#: Default bound on one frame's unescaped payload, used until the session learns the device's
#: real packet size. A length field above the bound drops the frame instead of buffering it.
DEFAULT_MAX_PAYLOAD_BYTES = 64 * 1024

_LENGTH = struct.Struct("<I")
_CRC = struct.Struct("<H")
_NOT_FF = re.compile(rb"[^\xff]")


def crc16(data: bytes | bytearray | memoryview, crc: int = CRC_INIT) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection); chainable through ``crc``."""
    return _crc_hqx(data, crc)


def escape(data: bytes | bytearray | memoryview) -> bytes:
    """Escape ``data`` for the wire: every ``FF`` becomes ``FF FF``."""
    if not isinstance(data, bytes):
        data = bytes(data)
    # bytes.replace returns its input itself when there is nothing to replace: no copy.
    return data.replace(b"\xff", b"\xff\xff")


_START_CRC = binascii.crc_hqx(START_SEQUENCE, CRC_INIT)
#: Spans at least this long are unescaped with numpy; shorter ones with bytes methods.
_NUMPY_SPAN_BYTES = 8192


def _unescape_pairs(data: bytes, pos: int, stop: int) -> tuple[int, bytes | memoryview] | None:
    """Unescape ``data[pos:stop]`` if it holds only plain bytes and whole ``FF FF`` pairs.

    ``pos`` must sit on a pair boundary. Returns ``(new_stop, unescaped)``, where ``new_stop``
    is ``stop`` or, when the span's end cuts a pair or an escape in two, one less; returns None
    when the span holds any other escape (a nop, an abort), which the slow path handles. Every
    run of FFs then has even length, so its FFs pair up in order: the second of each pair goes.
    """
    if data.find(b"\xff", pos, stop) < 0:
        return stop, memoryview(data)[pos:stop]
    if stop - pos < _NUMPY_SPAN_BYTES:
        n_ff = data.count(b"\xff", pos, stop)
        if n_ff % 2 and data[stop - 1] == ESCAPE_START:
            stop -= 1
            n_ff -= 1
        if stop == pos or n_ff != 2 * data.count(b"\xff\xff", pos, stop):
            return None
        return stop, data[pos:stop].replace(b"\xff\xff", b"\xff")
    raw = np.frombuffer(data, np.uint8, stop - pos, pos)
    ffs = np.flatnonzero(raw == ESCAPE_START)
    if ffs.size % 2 and ffs[-1] == raw.size - 1:
        ffs = ffs[:-1]
        raw = raw[:-1]
        stop -= 1
    if ffs.size % 2 or not (ffs[1::2] - ffs[0::2] == 1).all():
        return None
    keep = np.ones(raw.size, dtype=bool)
    keep[ffs[1::2]] = False
    return stop, raw[keep].tobytes()


class Framer:
    """Turns payloads into wire frames.

    The first frame after construction or :meth:`reset` carries the bare ``FE`` nop prefix that
    cancels a dangling ``FF`` at the receiver.
    """

    def __init__(self) -> None:
        self._needs_nop = True

    def reset(self) -> None:
        """Make the next frame start with the ``FE`` nop prefix again (e.g. after a write error)."""
        self._needs_nop = True

    def frame(self, payload: bytes | bytearray | memoryview) -> bytes:
        """Return the complete wire bytes for one frame carrying ``payload``."""
        return b"".join(self.frame_parts((payload,)))

    def frame_parts(self, parts: Sequence[bytes | bytearray | memoryview]) -> list[bytes]:
        """Frame the concatenation of ``parts`` without joining them first.

        Returns the wire bytes as a list of pieces (``b"".join`` of it equals :meth:`frame` of
        the joined payload), so a megabyte payload is escaped and CRC'd in place and copied once,
        when the caller joins or writes the pieces.
        """
        return list(self.iter_frame(parts))

    def iter_frame(
        self, parts: Sequence[bytes | bytearray | memoryview], piece_bytes: int | None = None
    ) -> Iterator[bytes]:
        """Like :meth:`frame_parts`, but lazily: each piece is escaped and CRC'd when reached.

        With ``piece_bytes`` a long part is cut into pieces of that many payload bytes, so a
        caller can write the start of a big frame while the rest is still being prepared. The
        ``FE`` prefix decision is taken by this call, not when iteration begins.
        """
        prefix = NOP_PREFIX if self._needs_nop else b""
        self._needs_nop = False
        return _frame_pieces(prefix, parts, piece_bytes)


def _frame_pieces(
    prefix: bytes, parts: Sequence[bytes | bytearray | memoryview], piece_bytes: int | None
) -> Iterator[bytes]:
    views = [memoryview(p).cast("B") for p in parts]
    length = escape(_LENGTH.pack(sum(v.nbytes for v in views)))
    crc = _crc_hqx(length, _START_CRC)
    yield prefix + START_SEQUENCE + length
    for part, view in zip(parts, views, strict=True):
        n = view.nbytes
        step = n if piece_bytes is None or piece_bytes >= n else piece_bytes
        for offset in range(0, n, step or 1):
            raw = part if step == n and isinstance(part, bytes) else bytes(view[offset : offset + step])
            piece = escape(raw)
            crc = _crc_hqx(piece, crc)
            yield piece
    yield escape(_CRC.pack(crc))


class UnframerState(enum.IntEnum):
    """Receiver states, numbered as in the reference (§4.2)."""

    FIND_PACKET_START = 0
    FIND_PACKET_LENGTH = 1
    FIND_PACKET_CRC = 2
    FIND_CRC_END = 3


class DropReason(enum.Enum):
    """Why the unframer threw a partial or complete frame away."""

    SHORT_PACKET = "a new start sequence (FF FD) interrupted the frame"
    INVALID_ESCAPE = "an FF was followed by a byte other than FF, FE or FD"
    PACKET_TOO_LONG = "the frame's length field exceeds the receive limit"
    BAD_CRC = "the CRC did not match"


@dataclasses.dataclass
class UnframerStats:
    """Counters of what the unframer has seen, for diagnostics and tests."""

    frames: int = 0
    #: Bytes outside any frame other than the ``FE`` nop prefix: line noise, or what is left of
    #: a frame whose start sequence was corrupted (such a frame is lost without a drop).
    stray_bytes: int = 0
    short_packet: int = 0
    invalid_escape: int = 0
    packet_too_long: int = 0
    bad_crc: int = 0

    @property
    def dropped(self) -> int:
        return self.short_packet + self.invalid_escape + self.packet_too_long + self.bad_crc

    @property
    def damage(self) -> int:
        """Frames dropped plus stray bytes: zero as long as no byte of the stream was lost or
        corrupted (a frame can vanish only by leaving one of the two)."""
        return self.dropped + self.stray_bytes

    def count(self, reason: DropReason) -> None:
        name = reason.name.lower()
        setattr(self, name, getattr(self, name) + 1)


class Unframer:
    """Recovers payloads from a byte stream, dropping corrupt frames without leaving stale bytes.

    Feed arbitrary splits of the stream to :meth:`feed`; it returns the payloads of the frames
    completed (and CRC-checked) by that call, in order. Bytes outside frames are ignored. The
    behaviour follows the reference unframer (§4.2):

    - ``FF FF`` inside a frame is a literal ``FF``; ``FF FE`` is an in-frame nop (still in the CRC).
    - ``FF FD`` inside a frame aborts it and starts a new frame at that ``FD``.
    - ``FF`` followed by anything else aborts the frame; both bytes are consumed.
    - A length above ``max_payload_bytes`` aborts the frame (the reference has no such bound;
      the host needs one so a corrupt length cannot make it buffer gigabytes).
    """

    def __init__(self, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> None:
        self.max_payload_bytes = max_payload_bytes
        self.stats = UnframerStats()
        self.last_drop: DropReason | None = None
        self._reset()

    def _reset(self) -> None:
        self.state = UnframerState.FIND_PACKET_START
        self._saw_ff = False  # in FIND_PACKET_START: the previous byte was FF
        self._pending_ff = False  # inside a frame: an escape FF waits for its second byte
        self._parts: list[bytes | memoryview] = []  # unescaped pieces of the current field
        self._need = 0  # unescaped bytes still missing from the current field
        self._crc = CRC_INIT
        self._payload = b""  # the unescaped payload, kept while its CRC is read

    def _drop(self, reason: DropReason) -> None:
        self.stats.count(reason)
        self.last_drop = reason
        self._reset()

    def bytes_needed(self) -> int:
        """How many more bytes the current state wants at least (the reference's read-size hint)."""
        if self.state == UnframerState.FIND_PACKET_START:
            return 1
        return max(self._need, 1)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Consume ``data``; return the payloads of every frame it completed."""
        data = bytes(data)
        out: list[bytes] = []
        pos = 0
        end = len(data)
        while pos < end:
            if self.state == UnframerState.FIND_PACKET_START:
                pos = self._find_start(data, pos)
            else:
                pos = self._read_field(data, pos, out)
        return out

    def _find_start(self, data: bytes, pos: int) -> int:
        if self._saw_ff and data[pos] == PACKET_START:
            start = pos + 1
        else:
            if self._saw_ff:
                self.stats.stray_bytes += 1  # the FF held back from the last call
            idx = data.find(START_SEQUENCE, pos)
            if idx < 0:
                self._saw_ff = data[-1] == ESCAPE_START
                self._count_stray(data, pos, len(data) - self._saw_ff)
                return len(data)
            self._count_stray(data, pos, idx)
            start = idx + 2
        self._saw_ff = False
        self.state = UnframerState.FIND_PACKET_LENGTH
        self._crc = _START_CRC
        self._parts = []
        self._need = 4
        return start

    def _count_stray(self, data: bytes, start: int, stop: int) -> None:
        """Count the bytes of ``data[start:stop]`` (outside frames) that are not nops."""
        if stop > start:
            self.stats.stray_bytes += stop - start - data.count(NOP_PREFIX, start, stop)

    def _read_field(self, data: bytes, pos: int, out: list[bytes]) -> int:
        """Unescape bytes of the current field from ``data[pos:]``; return the new position.

        Fast path: a span holding only plain bytes and whole ``FF FF`` pairs is CRC'd in one
        call and unescaped without a Python loop (:func:`_unescape_pairs`). Anything else (a
        nop, an abort, an escape split across reads) goes through the escape-by-escape loop for
        the rest of ``data``.
        """
        in_crc = self.state != UnframerState.FIND_CRC_END
        end = len(data)
        if self._pending_ff:
            return self._read_field_slow(data, pos, out)
        while pos < end and self._need > 0:
            span = _unescape_pairs(data, pos, min(end, pos + self._need))
            if span is None:
                return self._read_field_slow(data, pos, out)
            stop, unescaped = span
            if in_crc:
                self._crc = _crc_hqx(memoryview(data)[pos:stop], self._crc)
            self._parts.append(unescaped)
            self._need -= len(unescaped)
            pos = stop
        if self._need == 0:
            self._field_done(out)
        return pos

    def _read_field_slow(self, data: bytes, pos: int, out: list[bytes]) -> int:
        """Escape-by-escape version of :meth:`_read_field`; handles every case."""
        in_crc = self.state != UnframerState.FIND_CRC_END
        end = len(data)
        if self._pending_ff:
            self._pending_ff = False
            pos = self._escape_pair(data[pos], pos + 1, in_crc)
            if self.state == UnframerState.FIND_PACKET_START:
                return pos
        while pos < end and self._need > 0:
            ff = data.find(b"\xff", pos, pos + self._need)
            if ff < 0:
                take = min(self._need, end - pos)
                self._take(data, pos, pos + take, in_crc)
                pos += take
                continue
            if ff > pos:
                self._take(data, pos, ff, in_crc)
            # A run of FFs: complete pairs are literal FFs; an odd one pairs with the next byte.
            m = _NOT_FF.search(data, ff)
            run_end = m.start() if m else end
            pairs = min((run_end - ff) // 2, self._need)
            if pairs:
                self._parts.append(b"\xff" * pairs)
                self._need -= pairs
                if in_crc:
                    self._crc = _crc_hqx(data[ff : ff + 2 * pairs], self._crc)
            pos = ff + 2 * pairs
            if self._need == 0 or pos >= end:
                break
            if data[pos] != ESCAPE_START:
                continue
            # data[pos] is a lone FF: an escape whose second byte is non-FF (or not here yet).
            if pos + 1 >= end:
                self._pending_ff = True
                return end
            pos = self._escape_pair(data[pos + 1], pos + 2, in_crc)
            if self.state == UnframerState.FIND_PACKET_START:
                return pos
        if self._need == 0:
            self._field_done(out)
        return pos

    def _take(self, data: bytes, start: int, stop: int, in_crc: bool) -> None:
        chunk = memoryview(data)[start:stop]
        self._parts.append(chunk)
        self._need -= stop - start
        if in_crc:
            self._crc = _crc_hqx(chunk, self._crc)

    def _escape_pair(self, second: int, after: int, in_crc: bool) -> int:
        """Handle ``FF <second>`` whose second byte sits just before ``after``; return where to go on."""
        if second == ESCAPE_START:
            self._parts.append(b"\xff")
            self._need -= 1
            if in_crc:
                self._crc = _crc_hqx(b"\xff\xff", self._crc)
            return after
        if second == ESCAPE_NOP:
            if in_crc:
                self._crc = _crc_hqx(b"\xff\xfe", self._crc)
            return after
        if second == PACKET_START:
            # Restart: the FF is consumed, the FD is reprocessed as the end of a start sequence.
            self._drop(DropReason.SHORT_PACKET)
            self._saw_ff = True
            return after - 1
        self._drop(DropReason.INVALID_ESCAPE)
        return after

    def _field_done(self, out: list[bytes]) -> None:
        field = b"".join(self._parts)
        self._parts = []
        if self.state == UnframerState.FIND_PACKET_LENGTH:
            (length,) = _LENGTH.unpack(field)
            if length > self.max_payload_bytes:
                self._drop(DropReason.PACKET_TOO_LONG)
                return
            self.state = UnframerState.FIND_PACKET_CRC
            self._need = length
            if length:
                return
            field = b""
        if self.state == UnframerState.FIND_PACKET_CRC:
            self._payload = field
            self.state = UnframerState.FIND_CRC_END
            self._need = 2
            return
        (crc,) = _CRC.unpack(field)
        if crc != self._crc:
            self._drop(DropReason.BAD_CRC)
            return
        self.stats.frames += 1
        out.append(self._payload)
        self._reset()
