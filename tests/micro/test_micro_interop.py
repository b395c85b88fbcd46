"""The Python host's framing and session layers against the C runtime's (crt/src/rpc_common).

A small C harness (crt/tests/interop/micro_interop.c) is built with ASan+UBSan; it frames,
unframes or runs a device session over stdin/stdout.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool
from micro_fake_device import framed

from project_api.api.server import TransportTimeouts
from project_api.errors import SessionTerminatedError
from project_api.micro.framing import Framer, Unframer
from project_api.micro.session import SessionChannel

Timeouts = TransportTimeouts

SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1", "UBSAN_OPTIONS": "halt_on_error=1"}


@pytest.fixture(scope="module")
def harness(repo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = require_tool("cc")
    crt = repo_root / "crt"
    sources = sorted((crt / "src" / "rpc_common").glob("*.c"))
    if not sources:
        pytest.fail("crt/src/rpc_common has no sources")
    out = tmp_path_factory.mktemp("interop") / "micro_interop"
    cmd = [
        cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-fsanitize=address,undefined",
        "-fno-sanitize-recover=undefined", f"-I{crt / 'include'}",
        str(crt / "tests" / "interop" / "micro_interop.c"), *map(str, sources), "-o", str(out),
    ]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, f"harness build failed:\n{result.stderr}"
    return out


def run(harness: Path, mode: str, data: bytes) -> bytes:
    env = {**os.environ, **SAN_ENV}
    result = subprocess.run(
        [str(harness), mode], input=data, capture_output=True, env=env, timeout=60
    )
    assert result.returncode == 0, f"{mode} exited {result.returncode}:\n{result.stderr.decode()}"
    return result.stdout


def c_frame(harness: Path, ops: list[tuple[str, bytes]]) -> bytes:
    data = b"".join(op.encode() + struct.pack("<I", len(p)) + p for op, p in ops)
    return run(harness, "frame", data)


def c_unframe(harness: Path, chunks: list[bytes]) -> tuple[list[bytes], int, list[int]]:
    """Feed ``chunks`` to the C unframer; return (payloads, bad-CRC count, error codes)."""
    out = run(harness, "unframe", b"".join(struct.pack("<I", len(c)) + c for c in chunks))
    payloads, bad_crc, errors = [], 0, []
    pos = 0
    while pos < len(out):
        kind = out[pos : pos + 1]
        (n,) = struct.unpack_from("<I", out, pos + 1)
        body = out[pos + 5 : pos + 5 + n]
        pos += 5 + n
        if kind == b"P":
            payloads.append(body)
        elif kind == b"C":
            bad_crc += 1
        else:
            errors.append(struct.unpack("<I", body)[0])
    return payloads, bad_crc, errors


def random_payload(rng: random.Random, max_len: int = 400) -> bytes:
    n = rng.randrange(0, max_len)
    # Rich in escape-relevant bytes so escaping paths are exercised.
    return bytes(
        rng.choice((0xFF, 0xFE, 0xFD, 0x00)) if rng.random() < 0.3 else rng.randrange(256)
        for _ in range(n)
    )


def random_splits(rng: random.Random, data: bytes) -> list[bytes]:
    cuts = (
        sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randrange(0, 12))))
        if len(data) > 1
        else []
    )
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def test_c_framer_matches_python_framer(harness: Path) -> None:
    rng = random.Random(11)
    payloads = [b"one", b"two2", b"", b'es_\xff_capeir/^>t@"hr'] + [
        random_payload(rng) for _ in range(60)
    ]
    ops: list[tuple[str, bytes]] = []
    framer = Framer()
    expected = b""
    for i, p in enumerate(payloads):
        if i % 7 == 3:
            ops.append(("R", b""))
            framer.reset()
        ops.append(("F", p))
        expected += framer.frame(p)
    assert c_frame(harness, ops) == expected


def test_c_golden_frames(harness: Path) -> None:
    assert c_frame(
        harness, [("F", b"one"), ("F", b"two2"), ("R", b""), ("F", b"three")]
    ) == bytes.fromhex(
        "fe ff fd 03 00 00 00 6f 6e 65 58 f4 ff fd 04 00 00 00 74 77 6f 32 13 11"
        " fe ff fd 05 00 00 00 74 68 72 65 65 63 9f"
    )


def test_python_frames_into_c_unframer_random_splits(harness: Path) -> None:
    rng = random.Random(22)
    framer = Framer()
    payloads = [random_payload(rng) for _ in range(80)]
    wire = b"".join(framer.frame(p) for p in payloads)
    got, bad_crc, errors = c_unframe(harness, random_splits(rng, wire))
    assert got == payloads
    assert bad_crc == 0 and errors == []


def test_c_frames_into_python_unframer_random_splits(harness: Path) -> None:
    rng = random.Random(33)
    payloads = [random_payload(rng) for _ in range(80)]
    wire = c_frame(harness, [("F", p) for p in payloads])
    for _ in range(20):
        unframer = Unframer()
        got: list[bytes] = []
        for chunk in random_splits(rng, wire):
            got += unframer.feed(chunk)
        assert got == payloads


@pytest.mark.parametrize("seed", range(8))
def test_corruption_both_sides_agree(harness: Path, seed: int) -> None:
    """Corrupt random frames of a train: both unframers drop them and decode the rest."""
    rng = random.Random(seed)
    framer = Framer()
    payloads = [random_payload(rng, 200) for _ in range(40)]
    frames = [framer.frame(p) for p in payloads]
    corrupted = set(rng.sample(range(len(frames)), 8))
    for i in corrupted:
        f = bytearray(frames[i])
        # Flip a byte inside the frame (not the FE prefix), or cut the frame short.
        if rng.random() < 0.75:
            pos = rng.randrange(1 if f[0] == 0xFE else 0, len(f))
            f[pos] ^= rng.randrange(1, 256)
        else:
            del f[rng.randrange(3, len(f)) :]
        frames[i] = bytes(f)
    wire = b"".join(frames)
    c_got, _, _ = c_unframe(harness, random_splits(rng, wire))
    unframer = Unframer()
    py_got: list[bytes] = []
    for chunk in random_splits(rng, wire):
        py_got += unframer.feed(chunk)
    assert py_got == c_got
    # Every intact frame that is not right after a corrupted one survives; a corrupted frame
    # can take at most its successor with it (its damaged length may reach into it).
    must_survive = [
        p for i, p in enumerate(payloads) if i not in corrupted and i - 1 not in corrupted
    ]
    it = iter(py_got)
    assert all(any(p == q for q in it) for p in must_survive)
    assert all(p in payloads for p in py_got)


def test_c_unframer_restart_semantics(harness: Path) -> None:
    three = Framer().frame(b"three")[1:]
    one = Framer().frame(b"one")[1:]
    # FD alone after the FF: the C unframer reports a short packet and then decodes "one".
    got, _, errors = c_unframe(harness, [three[:7], b"\xff", b"\xfd", one[2:]])
    assert got == [b"one"] and len(errors) == 1
    unframer = Unframer()
    assert unframer.feed(three[:7]) + unframer.feed(b"\xff") + unframer.feed(
        b"\xfd"
    ) + unframer.feed(one[2:]) == [b"one"]


# --- session against the C session layer ----------------------------------------------------


class PipeTransport:
    """The harness's stdin/stdout as a transport (independent of project_api.api.transport)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        assert proc.stdout is not None and proc.stdin is not None
        self.rfd = proc.stdout.fileno()
        self.wfd = proc.stdin.fileno()

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        import select

        from project_api.errors import IoTimeoutError, TransportClosedError

        ready, _, _ = select.select([self.rfd], [], [], timeout_sec)
        if not ready:
            raise IoTimeoutError()
        data = os.read(self.rfd, n)
        if not data:
            raise TransportClosedError()
        return data

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view) :]


@pytest.fixture
def c_device(harness: Path):
    env = {**os.environ, **SAN_ENV}
    proc = subprocess.Popen(
        [str(harness), "session", "0x5a"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    yield proc
    if proc.stdin is not None:
        proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_host_session_with_c_device(
    c_device: subprocess.Popen[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    channel = SessionChannel(
        PipeTransport(c_device), Timeouts(0.5, 10.0, 10.0), rng=random.Random(3)
    )
    channel.start()
    assert channel.established
    rng = random.Random(44)
    with caplog.at_level(logging.INFO, logger="project_api.device"):
        for n in [0, 1, 5, 300, 2000, 8189]:
            message = rng.randbytes(n)
            channel.send(message)
            assert channel.receive() == message[::-1]
    logs = [r.getMessage() for r in caplog.records if r.name == "project_api.device"]
    assert logs == [f"got {n} bytes" for n in [0, 1, 5, 300, 2000, 8189]]
    channel.close()


def test_host_session_with_c_device_survives_garbage(c_device: subprocess.Popen[bytes]) -> None:
    transport = PipeTransport(c_device)
    channel = SessionChannel(transport, Timeouts(0.5, 10.0, 10.0), rng=random.Random(4))
    channel.start()
    # Garbage, a truncated frame and a corrupted frame on the way to the device.
    bad = bytearray(framed(struct.pack("<HB", channel.protocol.session_id, 0x10) + b"corrupt"))
    bad[-4] ^= 0x10
    transport.write(b"\x00\x13\xfe\xffgarbage\xff\xfd\x09\x00" + bytes(bad), None)
    channel.send(b"intact")
    assert channel.receive() == b"tcatni"


def test_c_device_restart_is_reported(c_device: subprocess.Popen[bytes]) -> None:
    transport = PipeTransport(c_device)
    channel = SessionChannel(transport, Timeouts(0.5, 10.0, 10.0), rng=random.Random(5))
    channel.start()
    channel.send(b"abc")
    assert channel.receive() == b"cba"
    channel.send(b"reboot")  # the device restarts its session as at boot
    with pytest.raises(SessionTerminatedError, match="probably restarted"):
        channel.receive()
    # A new session on the same line works again.
    again = SessionChannel(transport, Timeouts(0.5, 10.0, 10.0), rng=random.Random(6))
    again.start()
    again.send(b"xyz")
    assert again.receive() == b"zyx"


def test_session_over_project_fd_transport(c_device: subprocess.Popen[bytes]) -> None:
    """The same exchange through rpc-core's FdTransport (wrapped in TransportLogger)."""
    from project_api.api.transport import FdTransport, TransportLogger

    assert c_device.stdout is not None and c_device.stdin is not None
    timeouts = Timeouts(0.5, 10.0, 10.0)
    inner = FdTransport(os.dup(c_device.stdout.fileno()), os.dup(c_device.stdin.fileno()), timeouts)
    transport = TransportLogger("c-device", inner, level=logging.DEBUG)
    with transport:
        channel = SessionChannel(transport, transport.timeouts(), rng=random.Random(8))
        channel.start()
        payload = random.Random(9).randbytes(5000)
        channel.send(payload)
        assert channel.receive() == payload[::-1]
        channel.close()
