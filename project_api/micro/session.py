"""Session layer of the device RPC (spec §4.3/§4.4).

Every frame carries one session message: ``[u16 session_id][u8 type][body]``. The session id
is ``initiator_nonce | responder_nonce << 8``; a handshake (StartSessionInit → StartSessionReply)
agrees on it, and normal (RPC) messages carrying another id are ignored.

:class:`SessionProtocol` is the state machine without any I/O: feed it received bytes, collect
the events, and send what it queued. Both the host and the in-Python test device use it.
:class:`SessionChannel` is the host side: it drives a :class:`SessionProtocol` over a
``Transport`` with the handshake retry and the three timeouts of ``TransportTimeouts``.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import logging
import random
import struct
import time
from collections import deque
from collections.abc import Collection, Iterator
from typing import Any, Protocol

from project_api.errors import (
    IoTimeoutError,
    SessionDesyncError,
    SessionError,
    SessionLinkClosedError,
    SessionTerminatedError,
    SessionTimeoutError,
    TransportClosedError,
)
from project_api.micro.framing import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    NOP_PREFIX,
    Framer,
    Unframer,
    UnframerState,
)

_LOG = logging.getLogger(__name__)


def network_note(transport: Any) -> str:
    """`` (over a network link (serial_url/labgrid)...)`` when ``transport`` reaches the device
    through a network serial URL (its endpoint, or its own port), else empty: added to timeout
    errors, since a network link adds latency."""
    endpoint = getattr(transport, "endpoint", None)
    port = endpoint.get("port") if isinstance(endpoint, dict) else getattr(transport, "port", None)
    if isinstance(port, str) and any(scheme in port for scheme in ("rfc2217://", "socket://")):
        return (f" (over a network link (serial_url/labgrid) to {port}: its latency counts "
                "against the limit)")
    return ""
#: Device log frames (kLog) become INFO records on this logger, one per frame.
DEVICE_LOG = logging.getLogger("project_api.device")

#: How our C runtime's log message starts when it dropped a frame the line damaged
#: (``TVM_CRT_DROPPED_FRAME_NOTICE`` in ``crt/include/tvm/runtime/crt/microtvm_rpc_server.h``).
#: It comes before anything after the damaged frame is answered, so while a reply is owed it
#: says that reply will not come.
DROPPED_FRAME_NOTICE = b"dropped a damaged frame"

SESSION_VERSION = 0x01
INVALID_NONCE = 0
HEADER = struct.Struct("<HB")

#: Host reads ask the transport for this much at a time; it returns what is available.
READ_CHUNK_BYTES = 64 * 1024
#: Messages at least this long are framed and written piece by piece (pieces of
#: STREAM_PIECE_BYTES payload bytes), so the device unframes the start of a big tensor while the
#: host still escapes and CRCs the rest.
STREAM_MESSAGE_BYTES = 256 * 1024
STREAM_PIECE_BYTES = 128 * 1024


def reads_may_wait_for_n(transport: Any) -> bool:
    """True for a transport whose reads go through a Project API server's ``read_transport``.

    microTVM's own serial template servers implement ``read_transport(n)`` as pyserial's
    ``read(n)``, which waits until all ``n`` bytes came or the timeout passed. Such a server
    must be asked only for bytes that are surely coming (the unframer's hint, as the reference
    host does), or every read would sit out its timeout. Direct channels (pipes, FIFOs, serial
    ports, a server's fast-path endpoint) return what is available, so they get large reads.
    """
    from project_api.api.transport import ProjectTransport, TransportLogger

    while isinstance(transport, TransportLogger):
        transport = transport.child
    return isinstance(transport, ProjectTransport) and transport.endpoint is None


#: A frame from the device that stops mid-way for this long lost a byte on the link (a device
#: writes a frame in one go; USB serial adapters hold bytes back for up to 16 ms).
MID_FRAME_SILENCE_SEC = 0.1

#: Copy requests kept in flight over a FIFO endpoint (see :func:`pipeline_depth_for`).
FIFO_PIPELINE_DEPTH = 4
#: How a timeout message says to raise the limit when the caller names no flag of its own.
DEFAULT_TIMEOUT_ADVICE = "Session(timeout_sec=SECONDS) in Python"


def pipeline_depth_for(transport: Any) -> int:
    """How many RPC copy requests may be in flight at once on ``transport``.

    Only a Project API server's FIFO endpoint (a device process on this host, such as the
    host template's) gets :data:`FIFO_PIPELINE_DEPTH`, or less when the endpoint's optional
    ``"pipeline_depth"`` asks for less (an emulated microcontroller behind QEMU's FIFOs asks
    for 1); every other link gets 1, the reference behaviour, because a microcontroller may
    not read its UART while it handles a request.

    Why this cannot deadlock: the host blocks writing only while the device is not reading, and
    the device stops reading only while its output pipe is full. A copy-to request's reply is
    about 40 bytes; an error reply is at most TVM_CRT_LAST_ERROR_SIZE_BYTES (1 KiB by default)
    plus ~40, doubled in the worst case by escaping; so the device owes at most four of those,
    well inside a kernel pipe (64 KiB by default, and the host template asks for 1 MiB). A
    copy-from reply may be large, but its requests are ~70 bytes: the host's writes never fill
    the device's input pipe, so it is always free to read the replies.
    """
    from project_api.api.transport import ProjectTransport, TransportLogger

    while isinstance(transport, TransportLogger):
        transport = transport.child
    endpoint = getattr(transport, "endpoint", None) if isinstance(transport, ProjectTransport) else None
    if isinstance(endpoint, dict) and endpoint.get("type") == "fifo":
        asked = endpoint.get("pipeline_depth")
        if isinstance(asked, int) and not isinstance(asked, bool) and asked >= 1:
            return min(asked, FIFO_PIPELINE_DEPTH)
        return FIFO_PIPELINE_DEPTH
    return 1


class MessageType(enum.IntEnum):
    START_SESSION_INIT = 0x00
    START_SESSION_REPLY = 0x01
    TERMINATE_SESSION = 0x02
    LOG = 0x03
    NORMAL = 0x10


class SessionState(enum.IntEnum):
    RESET = 0
    NO_SESSION_ESTABLISHED = 1
    START_SESSION_SENT = 2
    SESSION_ESTABLISHED = 3


def regenerate_nonce(nonce: int) -> int:
    """The reference's nonce update: ``((n << 5) | (n >> 5)) + 1`` in 8 bits, never 0."""
    n = ((((nonce & 0x07) << 5) | (nonce >> 5)) + 1) & 0xFF
    return n or 1


class EventKind(enum.Enum):
    ESTABLISHED = "established"
    TERMINATED = "terminated"
    LOG = "log"
    NORMAL = "normal"


@dataclasses.dataclass(frozen=True)
class SessionEvent:
    kind: EventKind
    data: bytes = b""


class SessionProtocol:
    """Session state machine (no I/O). Outgoing wire bytes accumulate until :meth:`take_output`.

    Behaviour follows §4.3 with two deliberate differences that only make the receiver more
    robust: a normal message with the wrong session id is dropped instead of wedging the receive
    buffer, and a stray StartSessionReply after establishment is ignored instead of resetting.
    """

    def __init__(self, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> None:
        self.framer = Framer()
        self.unframer = Unframer(max_payload_bytes)
        self.state = SessionState.RESET
        self.local_nonce = INVALID_NONCE
        self.session_id = 0
        self._out: list[bytes] = []  # wire pieces, joined once by take_output

    # --- sending --------------------------------------------------------------------------

    def take_output(self) -> bytes:
        """Return and forget the wire bytes queued so far."""
        out = b"".join(self._out)
        self._out.clear()
        return out

    def _send(
        self, session_id: int, message_type: MessageType, body: bytes | memoryview = b""
    ) -> None:
        self._out += self.framer.frame_parts((HEADER.pack(session_id, message_type), body))

    def initialize(self, nonce: int) -> None:
        """Take ``nonce`` as the local nonce and send a TerminateSession (``00 00 02``)."""
        self.local_nonce = nonce & 0xFF
        self.terminate_session()

    def terminate_session(self) -> None:
        self.session_id = 0
        self.state = SessionState.NO_SESSION_ESTABLISHED
        self._send(0, MessageType.TERMINATE_SESSION)

    def start_session(self) -> None:
        """Regenerate the nonce and send StartSessionInit."""
        if self.state == SessionState.RESET:
            raise SessionError("start_session() before initialize()")
        self.local_nonce = regenerate_nonce(self.local_nonce)
        self.session_id = self.local_nonce
        self._send(self.session_id, MessageType.START_SESSION_INIT, bytes([SESSION_VERSION]))
        self.state = SessionState.START_SESSION_SENT

    def stream_message(
        self, message_type: MessageType, body: bytes | memoryview, piece_bytes: int
    ) -> Iterator[bytes]:
        """Like :meth:`send_message`, but return the wire bytes as pieces made while iterated.

        The output queued before comes first. Iterate to the end (or :meth:`Framer.reset
        <project_api.micro.framing.Framer.reset>` the framer): a half-sent frame is abandoned
        by the receiver only when the next frame starts.
        """
        if message_type != MessageType.LOG and self.state != SessionState.SESSION_ESTABLISHED:
            raise SessionError(f"cannot send {message_type.name}: no session is established")
        session_id = 0 if message_type == MessageType.LOG else self.session_id
        queued = self.take_output()
        frame = self.framer.iter_frame((HEADER.pack(session_id, message_type), body), piece_bytes)
        return itertools.chain([queued] if queued else [], frame)

    def send_message(self, message_type: MessageType, body: bytes) -> None:
        """Send a message; kLog always goes out (with session id 0), others need a session."""
        if message_type == MessageType.LOG:
            self._send(0, message_type, body)
            return
        if self.state != SessionState.SESSION_ESTABLISHED:
            raise SessionError(f"cannot send {message_type.name}: no session is established")
        self._send(self.session_id, message_type, body)

    def _reply_to_start(self, initiator: int) -> list[SessionEvent]:
        self.local_nonce = regenerate_nonce(self.local_nonce)
        self.session_id = initiator | (self.local_nonce << 8)
        self._send(self.session_id, MessageType.START_SESSION_REPLY, bytes([SESSION_VERSION]))
        self.state = SessionState.SESSION_ESTABLISHED
        return [SessionEvent(EventKind.ESTABLISHED)]

    # --- receiving ------------------------------------------------------------------------

    def receive(self, data: bytes) -> list[SessionEvent]:
        """Feed wire bytes; return the events of the complete messages they finished."""
        events: list[SessionEvent] = []
        for payload in self.unframer.feed(data):
            events += self._on_message(payload)
        return events

    def _on_message(self, payload: bytes) -> list[SessionEvent]:
        if len(payload) < HEADER.size:
            _LOG.debug("ignoring a %d-byte frame: shorter than the session header", len(payload))
            return []
        session_id, mtype = HEADER.unpack_from(payload)
        body = payload[HEADER.size :]
        initiator, responder = session_id & 0xFF, session_id >> 8
        if mtype == MessageType.START_SESSION_INIT:
            if initiator == INVALID_NONCE or not body:
                return []
            if self.state in (SessionState.RESET, SessionState.NO_SESSION_ESTABLISHED):
                return self._reply_to_start(initiator)
            if self.state == SessionState.START_SESSION_SENT:
                if initiator < self.local_nonce:
                    return self._reply_to_start(initiator) if body[0] == SESSION_VERSION else []
                if initiator == self.local_nonce:
                    self.start_session()
                return []
            return self._reply_to_start(initiator)
        if mtype == MessageType.START_SESSION_REPLY:
            if responder == INVALID_NONCE or not body:
                return []
            if (
                self.state == SessionState.START_SESSION_SENT
                and initiator == self.local_nonce
                and body[0] == SESSION_VERSION
            ):
                self.session_id = session_id
                self.state = SessionState.SESSION_ESTABLISHED
                return [SessionEvent(EventKind.ESTABLISHED)]
            _LOG.debug("ignoring StartSessionReply %04x in state %s", session_id, self.state.name)
            return []
        if mtype == MessageType.TERMINATE_SESSION:
            if self.state == SessionState.SESSION_ESTABLISHED:
                self.state = SessionState.NO_SESSION_ESTABLISHED
                self.session_id = 0
                return [SessionEvent(EventKind.TERMINATED)]
            return []
        if mtype == MessageType.LOG:
            if session_id in (0, self.session_id):
                return [SessionEvent(EventKind.LOG, body)]
            return []
        if self.state == SessionState.SESSION_ESTABLISHED and session_id == self.session_id:
            if mtype == MessageType.NORMAL:
                return [SessionEvent(EventKind.NORMAL, body)]
        _LOG.debug("ignoring message type 0x%02x for session %04x", mtype, session_id)
        return []


#: What a frame adds to an RPC packet on the wire: start 2, length 4, session header 3, CRC 2.
_FRAME_BYTES = 11
#: Wire bytes of a small reply (kReturn of a call or copy-to), for the wait estimate.
_SMALL_REPLY_BYTES = 48


@dataclasses.dataclass
class _Pending:
    """A request whose reply is owed: what the wait estimator keys it by and its size."""

    key: tuple[Any, ...]
    wire_bytes: int  #: request plus expected reply, framed
    computes: bool  #: a function call (its time is not the link's alone)
    sent_at: float = 0.0

    @classmethod
    def of(cls, packet: bytes | memoryview) -> _Pending:
        """From an RPC packet ``[u64 nbytes][i32 code][body]``: calls are keyed by their
        function handle, copies from the device by the bytes they ask for."""
        code = int.from_bytes(packet[8:12], "little", signed=True) if len(packet) >= 12 else -1
        reply = _SMALL_REPLY_BYTES
        handle = None
        if code == 3 and len(packet) >= 20:  # kCallFunc: the handle follows the code
            handle = int.from_bytes(packet[12:20], "little")
        elif code == 6 and len(packet) >= 20:  # kCopyFromRemote: u64 nbytes ends it
            reply += int.from_bytes(packet[-8:], "little")
        # A call is keyed by its function alone (a model's run, a lookup by any name); other
        # requests by their size too (a copy of so many bytes).
        key = (code, handle) if code == 3 else (code, len(packet), reply)
        return cls(key, len(packet) + _FRAME_BYTES + reply, code == 3)


class TimeoutsLike(Protocol):
    """The three fields of ``project_api.api.server.TransportTimeouts`` (seconds; 0 = see below)."""

    session_start_retry_timeout_sec: float
    session_start_timeout_sec: float
    session_established_timeout_sec: float


class TransportLike(Protocol):
    def read(self, n: int, timeout_sec: float | None) -> bytes: ...

    def write(self, data: bytes, timeout_sec: float | None) -> Any: ...


class SessionChannel:
    """The host end of a device session over a transport.

    Timeouts (seconds) follow the reference (§1.7, §4.4):

    - ``session_start_retry_timeout_sec``: resend Terminate + StartSessionInit (with a new nonce)
      when no reply arrived in this time; 0 disables retries.
    - ``session_start_timeout_sec``: total handshake time; 0 means no limit.
    - ``session_established_timeout_sec``: wait per reply once the session is up; 0 waits forever.

    ``avoid_session_ids`` are ids of earlier sessions on the same link: a handshake that lands
    on one of them is run again, so a late reply of an abandoned session can never carry the
    id of the new one. With :attr:`detect_loss` set (recovery does), a frame from the device
    that was dropped or left stray bytes while a reply is owed puts the channel out of step at
    once (:class:`SessionDesyncError`) instead of letting a later reply answer the wrong request.
    """

    #: Handshakes tried in a row when each lands on an id of :attr:`avoid_session_ids`.
    FRESH_ID_ATTEMPTS = 8

    def __init__(
        self,
        transport: TransportLike,
        timeouts: TimeoutsLike,
        name: str = "micro-rpc",
        rng: random.Random | None = None,
        timeout_advice: str | None = None,
        avoid_session_ids: Collection[int] = (),
    ) -> None:
        self.transport = transport
        self.timeouts = timeouts
        self.name = name
        #: How the caller raises the per-reply limit, for timeout messages (a command line
        #: names its own flag, e.g. "project-api validate --timeout SECONDS").
        self.timeout_advice = timeout_advice or DEFAULT_TIMEOUT_ADVICE
        self._rng = rng or random.Random()
        self.protocol = SessionProtocol()
        self._inbox: deque[bytes] = deque()
        self._terminated = False
        self._out_of_sync = False
        #: Why the channel is out of step (the first failure), for the follow-on errors.
        self._out_of_sync_reason = ""
        self._closed = False
        self._exact_reads = False
        #: Copy requests the RPC client may keep in flight (set by :meth:`start`).
        self.pipeline_depth = 1
        self.avoid_session_ids = frozenset(avoid_session_ids)
        #: Raise SessionDesyncError as soon as a frame is damaged while a reply is owed.
        self.detect_loss = False
        #: Requests sent whose reply has not been handed out, oldest first.
        self._pending: deque[_Pending] = deque()
        self._inbox_times: deque[float] = deque()  # when each inbox message arrived
        self._last_reply_at = 0.0
        self._last_byte_at = 0.0  # when the last byte came from the device
        self._damage_seen = 0  # unframer damage already accounted for
        #: Replies handed out by this channel (a recovery that got some made progress).
        self.replies = 0
        #: Sizes quick waits when set (a :class:`~project_api.micro.recovery.WaitEstimator`).
        self.waits: Any = None
        #: Seconds the last failed wait lasted (what a lost reply cost before it was noticed).
        self.last_wait_sec = 0.0
        #: Requests the device said it dropped (:data:`DROPPED_FRAME_NOTICE`).
        self.device_drops = 0
        #: Bytes read from the device over this channel (a device that sends nothing is gone
        #: or stopped; one whose bytes arrive garbled is only behind a noisy link).
        self.bytes_received = 0

    @property
    def established(self) -> bool:
        return (
            self.protocol.state == SessionState.SESSION_ESTABLISHED
            and not self._terminated
            and not self._closed
        )

    def set_max_payload_bytes(self, n: int) -> None:
        """Bound received frames to ``n`` payload bytes (sized from the device's packet size)."""
        self.protocol.unframer.max_payload_bytes = n

    # --- I/O helpers ----------------------------------------------------------------------

    def _write_timeout(self) -> float | None:
        if self.protocol.state == SessionState.SESSION_ESTABLISHED:
            t = self.timeouts.session_established_timeout_sec
        else:
            t = self.timeouts.session_start_timeout_sec
        return float(t) if t else None

    def _link_closed(self, doing: str, err: Exception) -> SessionError:
        self._closed = True
        return SessionLinkClosedError(
            f"{self.name}: the link to the device closed ({type(err).__name__}) while {doing}; "
            "the device probably crashed, exited or was unplugged"
        )

    def _flush(self) -> None:
        out = self.protocol.take_output()
        if out:
            self._write(out)

    def _write(self, out: bytes) -> None:
        timeout = self._write_timeout()
        try:
            self.transport.write(out, timeout)
        except IoTimeoutError as err:
            self._lose_step(f"writing {len(out)} bytes timed out")
            self.protocol.framer.reset()
            raise SessionTimeoutError(
                f"{self.name}: writing {len(out)} bytes to the device did not finish within "
                f"{timeout:g}s; the device is not reading (hung or busy): reset it, or raise the "
                f"limit ({self.timeout_advice})" + network_note(self.transport)
            ) from err
        except KeyboardInterrupt:
            self._lose_step("a write was interrupted")
            self.protocol.framer.reset()
            raise
        except TransportClosedError as err:
            self.protocol.framer.reset()
            raise self._link_closed("sending", err) from err

    def _pump_now(self) -> None:
        """Handle what the transport holds already, without waiting."""
        try:
            self._pump(0.0)
        except IoTimeoutError:
            pass

    def _pump(self, timeout_sec: float | None) -> None:
        """Read what the transport has (waiting up to ``timeout_sec``) and handle its events."""
        n = self.protocol.unframer.bytes_needed()
        if not self._exact_reads:
            n = max(n, READ_CHUNK_BYTES)
        try:
            data = self.transport.read(n, timeout_sec)
        except TransportClosedError as err:
            raise self._link_closed("waiting for the device", err) from err
        if data:
            self._last_byte_at = time.monotonic()
            self.bytes_received += len(data)
        for event in self.protocol.receive(data):
            self._handle(event)
        self._flush()
        damage = self.protocol.unframer.stats.damage
        if damage != self._damage_seen:
            self._damage_seen = damage
            owed = len(self._pending)
            # A frame dropped (bad CRC, bad escape, too long) or stray bytes while a reply is
            # owed: most likely that reply was hit, and waiting for it would only cost time;
            # if it was noise, the reply comes to a session already replaced (its id differs).
            if self.detect_loss and owed >= 1 and self.protocol.state == (
                    SessionState.SESSION_ESTABLISHED):
                self._lose_step("a frame from the device was lost or damaged on the link")
                raise SessionDesyncError(
                    f"{self.name}: a frame from the device was lost or damaged on the link while "
                    f"{owed} repl{'y was' if owed == 1 else 'ies were'} owed; the replies that "
                    "follow may answer other requests")

    def _handle(self, event: SessionEvent) -> None:
        if event.kind == EventKind.LOG:
            if (self.detect_loss and event.data.startswith(DROPPED_FRAME_NOTICE) and self._pending
                    and self.protocol.state == SessionState.SESSION_ESTABLISHED):
                self.device_drops += 1
                self._lose_step("the device dropped a request frame the line had damaged")
                raise SessionDesyncError(
                    f"{self.name}: the device dropped a request frame the line had damaged "
                    f"({event.data.decode('ascii', errors='replace')}) while "
                    f"{len(self._pending)} repl{'y was' if len(self._pending) == 1 else 'ies were'}"
                    " owed; the replies that follow would answer other requests")
            text = event.data.rstrip(b"\0").decode("utf-8", errors="replace")
            DEVICE_LOG.info("%s", text, extra={"session_name": self.name})
        elif event.kind == EventKind.NORMAL:
            self._inbox.append(event.data)
            self._inbox_times.append(time.monotonic())
        elif event.kind == EventKind.TERMINATED:
            self._terminated = True
            raise SessionTerminatedError(
                f"{self.name}: the device ended the session (it sent TerminateSession); it "
                "probably restarted or reset. Open a new Session to talk to it again."
            )

    # --- public API -----------------------------------------------------------------------

    def start(self, retry_sec: float | None = None, limit_sec: float | None = None) -> None:
        """Run the handshake; raise :class:`SessionTimeoutError` if it does not complete in time.

        ``retry_sec`` and ``limit_sec`` cap ``session_start_retry_timeout_sec`` and
        ``session_start_timeout_sec`` (e.g. sized from the link's measured latency when a
        session is reopened on a link whose device is up)."""
        retry = float(self.timeouts.session_start_retry_timeout_sec or 0)
        if retry_sec is not None:
            retry = min(retry, retry_sec) if retry else retry_sec
        start_limit = float(self.timeouts.session_start_timeout_sec or 0)
        if limit_sec is not None:
            start_limit = min(start_limit, limit_sec) if start_limit else limit_sec
        self._terminated = False
        self._out_of_sync = False
        self._out_of_sync_reason = ""
        self._closed = False
        self._inbox.clear()
        self._inbox_times.clear()
        self._pending.clear()
        self._exact_reads = reads_may_wait_for_n(self.transport)
        self.pipeline_depth = pipeline_depth_for(self.transport)
        for _attempt in range(self.FRESH_ID_ATTEMPTS):
            self._handshake(retry, start_limit)
            if self.protocol.session_id not in self.avoid_session_ids:
                break
            _LOG.debug("%s: session %04x was used before on this link; starting another",
                       self.name, self.protocol.session_id)
        self._pending.clear()
        self._last_reply_at = time.monotonic()
        self._damage_seen = self.protocol.unframer.stats.damage
        _LOG.debug("%s: session %04x established", self.name, self.protocol.session_id)

    def _handshake(self, retry: float, start_limit: float) -> None:
        self._send_start()
        begin = time.monotonic()
        end = begin + start_limit if start_limit else None
        deadline = None if not (retry or start_limit) else begin + (retry or start_limit)
        while self.protocol.state != SessionState.SESSION_ESTABLISHED:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                if end is not None and now >= end:
                    raise SessionTimeoutError(
                        f"{self.name}: session start handshake failed after {start_limit:g}s: "
                        "the device did not answer StartSessionInit. Check that it is flashed, "
                        "running and connected, or raise session_start_timeout_sec."
                        + network_note(self.transport)
                    )
                _LOG.debug("%s: no StartSessionReply after %gs; retrying", self.name, retry)
                deadline += retry
                if end is not None:
                    deadline = min(deadline, end)
                self._send_start()
                continue
            try:
                self._pump(None if deadline is None else deadline - now)
            except IoTimeoutError:
                pass

    def _send_start(self) -> None:
        nonce = self._rng.randrange(1, 256)
        self.protocol.initialize(nonce)
        self.protocol.start_session()
        self._flush()

    def _check_usable(self) -> None:
        if self._closed:
            raise SessionError(f"{self.name}: the session is closed (or its link is gone)")
        if self._terminated:
            raise SessionTerminatedError(f"{self.name}: the device ended the session earlier")
        if self._out_of_sync:
            raise SessionDesyncError(
                f"{self.name}: the session is out of step ({self._out_of_sync_reason}), so "
                "replies may no longer match requests; open a new Session"
            )

    @property
    def usable(self) -> bool:
        """True while a request sent now would meet its own reply (no earlier failure)."""
        return self.established and not self._out_of_sync

    def _lose_step(self, reason: str) -> None:
        if not self._out_of_sync:
            self._out_of_sync = True
            self._out_of_sync_reason = reason

    def send(self, packet: bytes) -> None:
        """Send one RPC packet (with its u64 length prefix) as one normal message.

        With :attr:`detect_loss` a nop byte (``FE``, which a receiver between frames discards)
        follows each frame: a frame that lost a byte on the line then ends at once, with a CRC
        that fails, instead of waiting for the start of the next frame (our C runtime tells
        the host of such a frame at once; see :data:`DROPPED_FRAME_NOTICE`)."""
        self._check_usable()
        trailer = NOP_PREFIX if self.detect_loss else b""
        if len(packet) < STREAM_MESSAGE_BYTES:
            self.protocol.send_message(MessageType.NORMAL, packet)
            self._pending.append(_Pending.of(packet))
            self._write(self.protocol.take_output() + trailer)
            self._pending[-1].sent_at = time.monotonic()
            return
        self._pending.append(_Pending.of(packet))
        try:
            for piece in self.protocol.stream_message(
                MessageType.NORMAL, packet, STREAM_PIECE_BYTES
            ):
                self._write(piece)
            if trailer:
                self._write(trailer)
        except KeyboardInterrupt:
            self._lose_step("a request was interrupted while being sent")
            self.protocol.framer.reset()
            raise
        self._pending[-1].sent_at = time.monotonic()

    def _hand_out(self) -> bytes:
        """The oldest message of the inbox: the reply of the oldest pending request (whose
        service time the wait estimator learns)."""
        data = self._inbox.popleft()
        arrived = self._inbox_times.popleft() if self._inbox_times else time.monotonic()
        if self._pending:
            request = self._pending.popleft()
            began = max(request.sent_at, self._last_reply_at)
            if self.waits is not None:
                self.waits.observe(request.key, request.wire_bytes, arrived - began,
                                   request.computes)
        self._last_reply_at = arrived
        self.replies += 1
        return data

    def _quick_limit(self) -> tuple[float, float] | None:
        """(deadline, limit) of the wait for the oldest pending reply, sized by :attr:`waits`
        from what such a request was measured to take; None when nothing predicts it."""
        if self.waits is None or not self._pending:
            return None
        request = self._pending[0]
        limit = self.waits.limit(request.key, request.wire_bytes)
        if limit is None:
            return None
        return max(request.sent_at, self._last_reply_at) + limit, limit

    def _stalled_at(self) -> float | None:
        """With :attr:`detect_loss`, while a reply is owed and a frame from the device is half
        received: when its silence means a byte of it was lost (a device writes a frame in one
        go); else None."""
        if not (self.detect_loss and self._pending) or (
                self.protocol.unframer.state == UnframerState.FIND_PACKET_START):
            return None
        return self._last_byte_at + MID_FRAME_SILENCE_SEC

    def lose_step(self, reason: str) -> None:
        """Mark the channel out of step (e.g. a reply that does not fit its request): every
        later call raises :class:`SessionDesyncError` until a new session starts."""
        self._lose_step(reason)

    def receive(
        self,
        max_wait_sec: float | None = None,
        *,
        timeout_sec: float | None = None,
        what: str | None = None,
    ) -> bytes:
        """Wait for the next normal message and return its body (one RPC packet).

        The wait is ``timeout_sec`` when given (0: forever), else
        ``session_established_timeout_sec`` (0: forever); ``max_wait_sec`` caps either.
        ``what`` names the request being answered, for the timeout message. A timeout or a
        Ctrl-C leaves the channel unusable: a late reply would answer the wrong request.
        """
        if self._inbox:
            return self._hand_out()
        self._check_usable()
        if timeout_sec is not None:
            limit = float(timeout_sec)
            source = "the limit asked for this call"
        else:
            limit = float(self.timeouts.session_established_timeout_sec or 0)
            source = getattr(self.timeouts, "established_limit_name", None) or (
                "session_established_timeout_sec, the per-reply limit"
            )
        if max_wait_sec is not None and (not limit or max_wait_sec < limit):
            limit = max_wait_sec
            source = "max_wait_sec"
        began = time.monotonic()
        deadline = began + limit if limit else None
        ceiling = deadline  # the caller's limit: a quick wait never goes past it
        quick = self._quick_limit()
        if quick is not None and (deadline is None or quick[0] < deadline):
            deadline = max(quick[0], began)
            limit = quick[1]
            source = (f"{self.waits.margin:g}x the time such a request was measured to take, "
                      f"at least {self.waits.floor_sec:g}s: a lost reply is noticed quickly")
        waiting_for = what or "a reply"
        while not self._inbox:
            now = time.monotonic()
            remaining = None if deadline is None else deadline - now
            try:
                stalled = self._stalled_at()
                if stalled is not None and stalled <= now:
                    self._pump_now()
                    if self._stalled_at() is not None and self._stalled_at() <= time.monotonic():
                        self.last_wait_sec = time.monotonic() - began
                        self._lose_step("a frame from the device stopped mid-way")
                        raise SessionDesyncError(
                            f"{self.name}: a frame from the device stopped mid-way (no byte "
                            f"for {MID_FRAME_SILENCE_SEC:g}s): a byte of it was lost on the "
                            f"link, so {waiting_for} will not come whole")
                    continue
                if stalled is not None and (remaining is None or stalled - now < remaining):
                    remaining = max(0.0, stalled - now)
                    try:
                        self._pump(remaining)
                    except IoTimeoutError:
                        pass
                    continue
                if remaining is not None and remaining <= 0:
                    # Past the limit: first take what the transport already holds (a host
                    # that was not scheduled for a while has not read it yet).
                    self._pump_now()
                    if self._inbox:
                        break
                    if quick is not None:
                        # A quick wait: the reply is lost only if the link is also quiet (a
                        # reply whose bytes are still arriving is never cut off), and never
                        # past the caller's own limit.
                        silent_until = self._last_byte_at + self.waits.quiet_sec
                        if ceiling is not None:
                            silent_until = min(silent_until, ceiling)
                        if silent_until > time.monotonic():
                            deadline = silent_until
                            continue
                    raise IoTimeoutError()
                try:
                    self._pump(remaining)
                except IoTimeoutError:
                    # A transport may give up sooner than asked (its own cap): the limit is
                    # the one this message names, checked above.
                    continue
            except IoTimeoutError as err:
                self.last_wait_sec = time.monotonic() - began
                self._lose_step(f"the wait for {waiting_for} timed out after {limit:g}s")
                raise SessionTimeoutError(
                    f"{self.name}: no reply from the device within {limit:g}s ({source}) while "
                    f"waiting for {waiting_for}; the device is still busy or hung: if the call "
                    f"needs longer, raise the limit ({self.timeout_advice}), else reset the "
                    "device" + network_note(self.transport)
                ) from err
            except KeyboardInterrupt:
                self._lose_step(f"the wait for {waiting_for} was interrupted")
                raise
        return self._hand_out()

    def close(self, timeout_sec: float = 1.0) -> None:
        """Tell the device the session is over (best effort; a dead link is not an error here)."""
        if (
            self.protocol.state != SessionState.SESSION_ESTABLISHED
            or self._terminated
            or self._closed
        ):
            return
        self._closed = True
        self.protocol.terminate_session()
        out = self.protocol.take_output()
        try:
            self.transport.write(out, timeout_sec)
        except (IoTimeoutError, TransportClosedError, OSError) as err:
            _LOG.debug("%s: could not send TerminateSession: %s", self.name, err)
