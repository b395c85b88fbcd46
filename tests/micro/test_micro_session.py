"""Session layer goldens (spec §4.3) and the host handshake/timeouts (§4.4)."""

from __future__ import annotations

import logging
import random
import struct
import time

import pytest
from micro_fake_device import FakeDevice, FakeTransport, Timeouts, framed

from project_api.errors import (
    IoTimeoutError,
    SessionError,
    SessionTerminatedError,
    SessionTimeoutError,
)
from project_api.micro.session import (
    EventKind,
    MessageType,
    SessionChannel,
    SessionProtocol,
    SessionState,
    regenerate_nonce,
)

ALICE, BOB = 0x3C, 0xAB
NO_TIMEOUTS = Timeouts(0, 0, 0)

INIT = "fe ff fd 03 00 00 00 00 00 02 66 77"
ALICE_START = "ff fd 04 00 00 00 82 00 00 01 7b e9"
BOB_REPLY = "ff fd 04 00 00 00 82 66 01 01 81 f3"
ALICE_HELLO = "ff fd 08 00 00 00 82 66 10 68 65 6c 6c 6f 90 28"
BOB_OLLEH = "ff fd 08 00 00 00 82 66 10 6f 6c 6c 65 68 4c 76"
LOG1 = "ff fd 07 00 00 00 00 00 03 6c 6f 67 31 f0 d4"
LOG_ZERO = "ff fd 07 00 00 00 00 00 03 7a 65 72 6f b2 68"
BOB_START = "ff fd 04 00 00 00 66 00 00 01 60 a7"
ALICE_REPLY_TO_BOB = "ff fd 04 00 00 00 66 45 01 01 0c 62"


def w(text: str) -> bytes:
    return bytes.fromhex(text)


def test_nonce_regeneration_examples() -> None:
    assert regenerate_nonce(0x3C) == 0x82
    assert regenerate_nonce(0xAB) == 0x66
    assert regenerate_nonce(0x82) == 0x45
    for n in range(256):
        assert regenerate_nonce(n) == ((((n << 5) | (n >> 5)) + 1) & 0xFF or 1)
        assert regenerate_nonce(n) != 0


def make_pair() -> tuple[SessionProtocol, SessionProtocol]:
    alice, bob = SessionProtocol(), SessionProtocol()
    alice.initialize(ALICE)
    assert alice.take_output() == w(INIT)
    bob.initialize(BOB)
    assert bob.take_output() == w(INIT)
    return alice, bob


def test_normal_exchange() -> None:
    alice, bob = make_pair()
    alice.start_session()
    assert alice.take_output() == w(ALICE_START)
    assert alice.state == SessionState.START_SESSION_SENT
    events = bob.receive(w(ALICE_START))
    assert [e.kind for e in events] == [EventKind.ESTABLISHED]
    assert bob.take_output() == w(BOB_REPLY)
    assert [e.kind for e in alice.receive(w(BOB_REPLY))] == [EventKind.ESTABLISHED]
    assert alice.session_id == bob.session_id == 0x6682

    alice.send_message(MessageType.NORMAL, b"hello")
    assert alice.take_output() == w(ALICE_HELLO)
    assert bob.receive(w(ALICE_HELLO))[0].data == b"hello"
    bob.send_message(MessageType.NORMAL, b"olleh")
    assert bob.take_output() == w(BOB_OLLEH)
    events = alice.receive(w(BOB_OLLEH))
    assert [(e.kind, e.data) for e in events] == [(EventKind.NORMAL, b"olleh")]


def test_log_frames() -> None:
    alice, bob = make_pair()
    alice.send_message(MessageType.LOG, b"log1")  # allowed without a session
    assert alice.take_output() == w(LOG1)
    bob.send_message(MessageType.LOG, b"zero")
    assert bob.take_output() == w(LOG_ZERO)
    assert [(e.kind, e.data) for e in alice.receive(w(LOG_ZERO))] == [(EventKind.LOG, b"zero")]


def test_double_start() -> None:
    alice, bob = make_pair()
    alice.start_session()
    assert alice.take_output() == w(ALICE_START)
    bob.start_session()
    assert bob.take_output() == w(BOB_START)
    # Bob ignores Alice's start (0x82 > 0x66); Alice answers Bob's.
    assert bob.receive(w(ALICE_START)) == [] and bob.take_output() == b""
    assert [e.kind for e in alice.receive(w(BOB_START))] == [EventKind.ESTABLISHED]
    assert alice.take_output() == w(ALICE_REPLY_TO_BOB)
    assert [e.kind for e in bob.receive(w(ALICE_REPLY_TO_BOB))] == [EventKind.ESTABLISHED]
    assert alice.session_id == bob.session_id == 0x4566


def test_mismatched_session_id_is_ignored_not_wedged() -> None:
    alice, bob = make_pair()
    alice.start_session()
    bob.receive(alice.take_output())
    alice.receive(bob.take_output())
    wrong = framed(struct.pack("<HB", 0x1234, MessageType.NORMAL) + b"stale")
    assert alice.receive(wrong) == []
    bob.send_message(MessageType.NORMAL, b"fresh")
    assert [e.data for e in alice.receive(bob.take_output())] == [b"fresh"]


def test_terminate_while_established() -> None:
    alice, bob = make_pair()
    alice.start_session()
    bob.receive(alice.take_output())
    alice.receive(bob.take_output())
    bob.initialize(0x11)  # Bob restarts
    assert [e.kind for e in alice.receive(bob.take_output())] == [EventKind.TERMINATED]
    assert alice.state == SessionState.NO_SESSION_ESTABLISHED


def test_send_without_session_refused() -> None:
    alice, _ = make_pair()
    with pytest.raises(Exception, match="no session is established"):
        alice.send_message(MessageType.NORMAL, b"x")


# --- host channel ----------------------------------------------------------------------------


def test_host_handshake_with_fake_device() -> None:
    device = FakeDevice()
    transport = FakeTransport(device)
    transport.open()
    channel = SessionChannel(transport, Timeouts(0, 0, 0), rng=random.Random(5))
    channel.start()
    assert channel.established
    assert device.session.state == SessionState.SESSION_ESTABLISHED
    assert channel.protocol.session_id == device.session.session_id
    # The host read in large chunks, never byte by byte.
    assert min(transport.read_sizes) >= 64 * 1024
    # The first host write is FE + Terminate + StartSessionInit in one go.
    first = transport.writes[0]
    assert first.startswith(w(INIT))
    nonce = channel.protocol.local_nonce
    assert first[len(w(INIT)) :] == framed(bytes([nonce, 0, 0, 1]))


def test_handshake_retry_then_success() -> None:
    device = FakeDevice()
    transport = FakeTransport(device)
    transport.open()
    transport.drop_writes = 2  # the first two trains are lost
    channel = SessionChannel(transport, Timeouts(0.05, 2.0, 0), rng=random.Random(1))
    begin = time.monotonic()
    channel.start()
    assert channel.established
    assert len(transport.writes) == 3
    # Every train is Terminate (session id 0) followed by StartSessionInit.
    for train in transport.writes:
        assert framed(b"\x00\x00\x02") in train
    assert time.monotonic() - begin < 2.0


def test_handshake_retries_carry_new_nonces() -> None:
    device = FakeDevice()
    transport = FakeTransport(device)
    transport.open()
    transport.drop_writes = 3
    channel = SessionChannel(transport, Timeouts(0.02, 5.0, 0), rng=random.Random(7))
    channel.start()
    starts = [wr[-(len(framed(b"1234"))) :] for wr in transport.writes]
    for start in starts:
        assert start[:6] == b"\xff\xfd\x04\x00\x00\x00" and start[7:10] == b"\x00\x00\x01"
    assert len({s[6] for s in starts}) > 1


def test_handshake_timeout() -> None:
    device = FakeDevice()
    transport = FakeTransport(device)
    transport.open()
    transport.drop_writes = 1000
    channel = SessionChannel(transport, Timeouts(0.05, 0.3, 0), name="board")
    begin = time.monotonic()
    with pytest.raises(
        SessionTimeoutError, match=r"board: session start handshake failed after 0.3s"
    ):
        channel.start()
    elapsed = time.monotonic() - begin
    assert 0.25 <= elapsed < 2.0
    assert 4 <= len(transport.writes) <= 8  # one train per retry period


def test_handshake_timeout_without_retry_sends_once() -> None:
    device = FakeDevice()
    transport = FakeTransport(device)
    transport.open()
    transport.drop_writes = 1000
    channel = SessionChannel(transport, Timeouts(0, 0.2, 0))
    with pytest.raises(SessionTimeoutError):
        channel.start()
    assert len(transport.writes) == 1


def established_channel(
    timeouts: Timeouts = NO_TIMEOUTS,
) -> tuple[FakeDevice, FakeTransport, SessionChannel]:
    device = FakeDevice()
    transport = FakeTransport(device)
    transport.open()
    channel = SessionChannel(transport, timeouts, name="dev0")
    channel.start()
    return device, transport, channel


def test_device_logs_become_records(caplog: pytest.LogCaptureFixture) -> None:
    device, transport, channel = established_channel()
    device.log("booted; heap 1234 B")
    device.session.send_message(MessageType.NORMAL, b"reply")
    device.output += device.session.take_output()
    with caplog.at_level(logging.INFO, logger="project_api.device"):
        assert channel.receive() == b"reply"
    records = [r for r in caplog.records if r.name == "project_api.device"]
    assert [r.getMessage() for r in records] == ["booted; heap 1234 B"]
    assert records[0].levelno == logging.INFO


def test_device_restart_mid_session_is_reported() -> None:
    device, transport, channel = established_channel()
    device.boot()  # the device resets: FE + TerminateSession
    with pytest.raises(SessionTerminatedError, match="device ended the session.*restarted"):
        channel.receive()
    with pytest.raises(SessionTerminatedError):
        channel.send(b"more")


def test_established_timeout() -> None:
    device, transport, channel = established_channel(Timeouts(0, 0, 0.1))
    with pytest.raises(SessionTimeoutError, match=r"no reply from the device within 0.1s"):
        channel.receive()


def test_garbage_and_foreign_frames_are_survived() -> None:
    device, transport, channel = established_channel()
    junk = bytes(random.Random(3).randrange(256) for _ in range(500)).replace(b"\xff", b"\x00")
    transport.inject(junk + b"\xff\xfd\x05\x00")  # garbage, then a frame cut short by the next
    wrong_session = framed(struct.pack("<HB", 0x0101, MessageType.NORMAL) + b"not yours")
    corrupt = bytearray(
        framed(struct.pack("<HB", channel.protocol.session_id, MessageType.NORMAL) + b"bad")
    )
    corrupt[-3] ^= 0x40
    transport.inject(wrong_session + bytes(corrupt))
    device.session.send_message(MessageType.NORMAL, b"good")
    device.output += device.session.take_output()
    assert channel.receive() == b"good"
    stats = channel.protocol.unframer.stats
    assert stats.short_packet == 1 and stats.bad_crc == 1


def test_close_sends_terminate() -> None:
    device, transport, channel = established_channel()
    channel.close()
    assert transport.writes[-1] == framed(b"\x00\x00\x02")
    assert device.session.state == SessionState.NO_SESSION_ESTABLISHED


def test_link_closed_is_a_clear_session_error() -> None:
    device, transport, channel = established_channel()
    transport.drop_writes = 1
    channel.send(b"ping")
    transport.is_open = False  # the device process died
    with pytest.raises(SessionError, match="dev0: the link to the device closed .* while waiting"):
        channel.receive()
    with pytest.raises(SessionError, match="closed"):
        channel.send(b"again")
    device, transport, channel = established_channel()
    transport.is_open = False
    with pytest.raises(SessionError, match="closed .* while sending"):
        channel.send(b"x")


def test_write_timeout_is_a_session_timeout() -> None:
    device, transport, channel = established_channel(Timeouts(0, 0, 0.5))

    def stuck_write(data: bytes, timeout_sec: float | None) -> None:
        assert timeout_sec == 0.5
        raise IoTimeoutError()

    transport.write = stuck_write  # type: ignore[method-assign]
    with pytest.raises(SessionTimeoutError, match="did not finish within 0.5s"):
        channel.send(b"x")
