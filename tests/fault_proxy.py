"""A line-fault injector between the host's client and a device transport, for fault tests.

:class:`FaultProxy` wraps a :class:`~project_api.api.transport.Transport`; every byte the host writes
and every byte it reads passes through it, and each byte is hit by a fault with probability
``rate``: a bit flip, a dropped byte or a burst of random noise inserted before it. Fault
positions are counted in bytes per direction (the gaps are drawn from a seeded geometric
distribution), so a run is reproducible however the stream is split into reads and writes.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import signal
from collections.abc import Callable, Iterable

import numpy as np

from project_api.api.transport import Transport, WrappedTransport
from project_api.errors import IoTimeoutError
from project_api.micro.framing import Unframer
from project_api.micro.rpc import RPCCode
from project_api.micro.session import MessageType

_LOG = logging.getLogger(__name__)

_START_SESSION_INIT = 0x00  #: the session message type of a handshake's first frame


class Direction(enum.Enum):
    TO_DEVICE = "to device"
    FROM_DEVICE = "from device"


class FaultKind(enum.Enum):
    FLIP = "bit flip"
    DROP = "dropped byte"
    NOISE = "noise burst"


@dataclasses.dataclass
class FaultCounts:
    """Faults injected so far, by direction and kind, and the bytes that passed."""

    bytes_seen: dict[Direction, int] = dataclasses.field(
        default_factory=lambda: dict.fromkeys(Direction, 0))
    faults: dict[tuple[Direction, FaultKind], int] = dataclasses.field(
        default_factory=lambda: {(d, k): 0 for d in Direction for k in FaultKind})

    @property
    def total(self) -> int:
        return sum(self.faults.values())

    def in_direction(self, direction: Direction) -> int:
        return sum(n for (d, _), n in self.faults.items() if d == direction)

    def __str__(self) -> str:
        parts = [f"{d.value}: {self.bytes_seen[d]} bytes, "
                 + ", ".join(f"{self.faults[(d, k)]} {k.value}" for k in FaultKind)
                 for d in Direction]
        return "; ".join(parts)


class FaultProxy(WrappedTransport):
    """Injects seeded line faults into both directions of ``child``.

    ``rate`` is the probability that a byte is hit; a hit is a bit flip, a drop or a noise
    burst (1..``max_burst_bytes`` random bytes inserted before the byte) with equal chance.
    ``enabled`` may be switched off (e.g. around set-up); bytes passed then do not advance the
    fault positions. ``is_open`` tells :class:`~project_api.micro.Session` that the proxy is
    already open, so sessions come and go over one open device link.
    """

    def __init__(self, child: Transport, rate: float, seed: int, max_burst_bytes: int = 16):
        if not 0 < rate < 1:
            raise ValueError(f"rate must be in (0, 1); got {rate}")
        super().__init__(child)
        self.rate = rate
        self.max_burst_bytes = max_burst_bytes
        self.enabled = True
        self.counts = FaultCounts()
        self._rng = np.random.default_rng(seed)
        #: Bytes still to pass untouched before the next fault, per direction.
        self._gap = {d: self._next_gap() for d in Direction}
        #: Faults injected since the last :meth:`take_recent` call.
        self._recent = 0
        #: :meth:`hold_next_reply`: None, "armed", "holding" or "release".
        self._hold: str | None = None
        self._sent = Unframer()
        self.held = b""  #: device bytes held back
        self.released = b""  #: what was handed out late

    @classmethod
    def opened(cls, child: Transport, rate: float, seed: int) -> FaultProxy:
        """A proxy over ``child``, opened without faults (the device's start-up, its ready
        banner, is not under test), then injecting them."""
        proxy = cls(child, rate, seed)
        proxy.enabled = False
        proxy.open()
        proxy.enabled = True
        return proxy

    @classmethod
    def from_byte_0(cls, child: Transport, rate: float, seed: int) -> FaultProxy:
        """A proxy over ``child`` opened with faults on: every byte may be hit, from the first
        one either way (the device's start-up, the handshake, the checks at open). Over a link
        already open (one emulator boot shared by several runs) the first byte is the first one
        a run sends or reads."""
        proxy = cls(child, rate, seed)
        if not getattr(child, "is_open", False):
            proxy.open()
        else:
            proxy.is_open = True
        return proxy

    def _next_gap(self) -> int:
        return int(self._rng.geometric(self.rate)) - 1

    def take_recent(self) -> int:
        """Faults injected since the last call (to tell which operation they hit)."""
        n, self._recent = self._recent, 0
        return n

    def corrupt(self, data: bytes, direction: Direction) -> bytes:
        """``data`` with this direction's faults that fall inside it applied."""
        if not self.enabled or not data:
            return data
        self.counts.bytes_seen[direction] += len(data)
        out = bytearray()
        pos = 0
        while self._gap[direction] < len(data) - pos:
            hit = pos + self._gap[direction]
            out += data[pos:hit]
            kind = list(FaultKind)[int(self._rng.integers(len(FaultKind)))]
            if kind == FaultKind.FLIP:
                out.append(data[hit] ^ (1 << int(self._rng.integers(8))))
            elif kind == FaultKind.NOISE:
                n = int(self._rng.integers(1, self.max_burst_bytes, endpoint=True))
                out += self._rng.integers(0, 256, n, dtype=np.uint8).tobytes()
                out.append(data[hit])
            # FaultKind.DROP: the byte is left out.
            self.counts.faults[(direction, kind)] += 1
            self._recent += 1
            _LOG.debug("fault %s at byte %d (%s)", kind.value,
                       self.counts.bytes_seen[direction] - len(data) + hit, direction.value)
            pos = hit + 1
            self._gap[direction] = self._next_gap()
        self._gap[direction] -= len(data) - pos
        out += data[pos:]
        return bytes(out)

    def hold_next_reply(self) -> None:
        """Hold back the device's bytes from the next read on until the host starts a new
        session (it writes a StartSessionInit); then hand them out before anything newer: a
        reply that arrives late, after its session was given up."""
        self._hold = "armed"

    # --- Transport ------------------------------------------------------------------------

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        if self._hold == "holding":
            for payload in self._sent.feed(bytes(data)):
                if len(payload) >= 3 and payload[2] == _START_SESSION_INIT:
                    self._hold = "release"  # the old session was given up
        self.child.write(self.corrupt(bytes(data), Direction.TO_DEVICE), timeout_sec)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        # A read that lost every byte it got returns b"", which the session treats as
        # "nothing yet" and reads again within its own deadline.
        if self._hold in ("armed", "holding"):
            try:
                data = self.child.read(n, min(timeout_sec or 0.05, 0.05))
            except IoTimeoutError:
                data = b""
            if data:
                self._hold = "holding"
                self.held += data
            return b""
        if self._hold == "release":
            self._hold = None
            self.released = self.held
            return self.corrupt(self.held, Direction.FROM_DEVICE)
        return self.corrupt(self.child.read(n, timeout_sec), Direction.FROM_DEVICE)


class KillAfter(WrappedTransport):
    """SIGKILLs the processes ``victims()`` names (the device process, the emulator) just before
    the ``after``-th write through it, once: a device that dies mid-run. :attr:`killed` holds
    their ids."""

    def __init__(self, child: Transport, victims: Callable[[], Iterable[int]],
                 after: int) -> None:
        super().__init__(child)
        self.victims, self.after = victims, after
        self.writes = 0
        self.killed: set[int] = set()

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        self.writes += 1
        if self.writes == self.after and not self.killed:
            self.killed = set(self.victims())
            for pid in self.killed:
                os.kill(pid, signal.SIGKILL)
        self.child.write(data, timeout_sec)


class FaultNth(WrappedTransport):
    """Damages the ``nth`` request (from 0) the host writes, or with ``reply=True`` the first
    bytes read after it: one fault forced into one chosen request of a run (the handshake, each
    check at open, the model lookup, ...). ``framing`` says what a request is: ``"rpc"``, a
    micro-RPC frame (a damaged one fails its CRC and is dropped); ``"text"``, an MLPerf Tiny
    command up to its ``%``. With ``nth=None`` nothing is damaged and :attr:`requests` counts
    the requests of a clean run. :attr:`damaged` tells whether the fault was made;
    :attr:`commands` keeps each request's command in order: with text framing its first word
    (the sync's token dropped), with rpc framing the RPC code of a normal message
    (``FREE_HANDLE``, ...) or the session message (``TERMINATE_SESSION``, ...)."""

    def __init__(self, child: Transport, nth: int | None, *, framing: str = "rpc",
                 reply: bool = False) -> None:
        if framing not in ("rpc", "text"):
            raise ValueError(f"framing must be 'rpc' or 'text'; got {framing!r}")
        super().__init__(child)
        self.nth, self.framing, self.reply = nth, framing, reply
        self.requests = 0
        self.damaged = False
        self.commands: list[str] = []
        self._text = bytearray()
        self._unframer = Unframer()
        self._reply_due = False

    def _ends(self, data: bytes) -> list[int]:
        """Offsets in ``data`` just past each request that ends in it."""
        if self.framing == "text":
            return [i + 1 for i, b in enumerate(data) if b == ord("%")]
        ends = []
        for i in range(len(data)):
            for payload in self._unframer.feed(data[i:i + 1]):
                self.commands.append(_rpc_command(payload))
                ends.append(i + 1)
        return ends

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        data = bytearray(data)
        start = 0
        for end in self._ends(bytes(data)):
            if self.framing == "text":
                words = (bytes(self._text) + bytes(data[start:end - 1])).split()
                word = words[0].decode("ascii", "replace") if words else ""
                self.commands.append("sync" if word.startswith("sync") else word)
                self._text.clear()
            if self.nth is not None and self.requests == self.nth and not self.damaged:
                if self.reply:
                    self._reply_due = True
                else:
                    # The byte before the request's end (its CRC, or its last character).
                    hit = max(start, end - 2)
                    data[hit] ^= 0x10
                    self.damaged = True
            self.requests += 1
            start = end
        if self.framing == "text":
            self._text += data[start:]
        self.child.write(bytes(data), timeout_sec)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        data = self.child.read(n, timeout_sec)
        if self._reply_due and data:
            self._reply_due = False
            self.damaged = True
            hit = len(data) // 2
            data = data[:hit] + bytes([data[hit] ^ 0x10]) + data[hit + 1:]
        return data


def _rpc_command(payload: bytes) -> str:
    """A micro-RPC frame's command: a normal message's RPC code (the body's u64 length, then
    its i32 code), else the session message's type; "?" for what is neither (a piece)."""
    try:
        kind = MessageType(payload[2])
    except (IndexError, ValueError):
        return "?"
    if kind != MessageType.NORMAL:
        return kind.name
    try:
        return RPCCode(int.from_bytes(payload[11:15], "little", signed=True)).name
    except ValueError:
        return "?"
