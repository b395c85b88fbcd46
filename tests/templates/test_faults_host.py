"""Faults on the host template's device link: a dying device, line noise, oversized tensors, reset."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool
from mlf_kernels import add_mlf, dense_mlf, device_pids, generate_host_project

from project_api.api.transport import ProjectTransport, Transport
from project_api.errors import (
    ProjectAPIError,
    RPCError,
    SessionError,
    SessionTerminatedError,
    TransportClosedError,
)
from project_api.micro import Session


@pytest.fixture(scope="module")
def add_project(tmp_path_factory: pytest.TempPathFactory):
    require_tool("make")
    require_tool("cc")
    tmp = tmp_path_factory.mktemp("faults")
    mlf = add_mlf(tmp / "add.tar", dtype="int8", shape=(1, 8))
    # Under ASan+UBSan: a memory error in the device while it digests noise ends the session.
    project = generate_host_project(mlf, tmp / "prj", sanitize=True)
    yield project
    project.close()


def _check_add(session: Session, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 127, (1, 8), dtype=np.int8, endpoint=True)
    b = rng.integers(-128, 127, (1, 8), dtype=np.int8, endpoint=True)
    model = session.model()
    model.set_input("a", a)
    model.set_input("b", b)
    model.run()
    np.testing.assert_array_equal(model.get_output(0), a + b)


@pytest.mark.parametrize("fast_path", [True, False], ids=["fifo", "jsonrpc"])
def test_killed_device_gives_clear_error_in_time(tmp_path: Path, fast_path: bool) -> None:
    require_tool("make")
    require_tool("cc")
    mlf, _, _ = dense_mlf(tmp_path / "dense.tar", in_features=64, out_features=64)
    with generate_host_project(mlf, tmp_path / "prj") as project:
        binary = tmp_path / "prj/build/main"
        transport = ProjectTransport(project.client, project.options, use_endpoint=fast_path,
                                     shutdown_client=False)
        with Session(transport) as session:
            timeouts = transport.timeouts()
            model = session.model()
            model.set_input(0, np.ones((1, 64), dtype=np.float32))
            pids = device_pids(binary)
            assert len(pids) == 1

            def kill_soon() -> None:
                time.sleep(0.5)
                os.kill(pids[0], signal.SIGKILL)

            killer = threading.Thread(target=kill_soon)
            killer.start()
            start = time.monotonic()
            # A billion runs (minutes): the device is busy inside this call when it is killed.
            with pytest.raises((TransportClosedError, SessionError)) as info:
                session.time(model, number=1_000_000_000, repeat=1)
            elapsed = time.monotonic() - start
            killer.join()
    text = str(info.value)
    assert "TransportClosedError" in text or "closed" in text or "ended" in text, text
    # Not a performance claim: the error must come from the dead link, not from waiting out the
    # whole session timeout (or forever).
    assert elapsed < timeouts.session_established_timeout_sec, elapsed


def test_line_noise_is_survived(add_project) -> None:
    transport = add_project.transport()
    with Session(transport) as session:
        _check_add(session, 0)
        rng = np.random.default_rng(9)
        noises = [
            bytes(rng.integers(0, 0xFE, 300, dtype=np.uint8, endpoint=True)),  # no 0xff: skipped
            b"\xff\xfd\x05\x00\x00\x00hello\x00\x00",  # a whole frame with a bad CRC
            b"\xff\xfd\xff\xff\xff\x7f",  # a frame start with an absurd length, cut short
            b"\xff\x00\xff\xfe\xff",  # broken escapes
            bytes(rng.integers(0, 255, 500, dtype=np.uint8, endpoint=True)),  # anything at all
        ]
        for k, noise in enumerate(noises):
            transport.write(noise, 1.0)
            _check_add(session, k + 1)


class NoisyReads(Transport):
    """Puts line noise in front of the device's next reply, once per entry of ``noises``."""

    def __init__(self, child: Transport, noises: list[bytes]):
        self.child = child
        self.noises = list(noises)
        self.enabled = False
        self._armed = False
        self._pending = b""

    def timeouts(self):
        return self.child.timeouts()

    def open(self) -> None:
        self.child.open()

    def close(self) -> None:
        self.child.close()

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        self.child.write(data, timeout_sec)
        self._armed = self.enabled and bool(self.noises)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        if self._armed:
            self._pending += self.noises.pop(0)
            self._armed = False
        if self._pending:
            out, self._pending = self._pending[:n], self._pending[n:]
            return out
        return self.child.read(n, timeout_sec)


def test_line_noise_from_the_device_is_survived(add_project) -> None:
    rng = np.random.default_rng(11)
    noises = [
        bytes(rng.integers(0, 0xFE, 64, dtype=np.uint8, endpoint=True)),
        b"\xff\xfd\x05\x00\x00\x00hello\x12\x34",  # a frame with a bad CRC before the reply
        b"\x00\xff\x00\x55",  # a broken escape
    ] * 4
    transport = NoisyReads(
        ProjectTransport(add_project.client, add_project.options, shutdown_client=False), noises
    )
    with Session(transport) as session:
        transport.enabled = True
        for k in range(3):
            _check_add(session, 100 + k)
    assert not transport.noises  # every noise burst went in


def test_oversized_tensor_refused(add_project) -> None:
    with add_project.session() as session:
        model = session.model()
        with pytest.raises(SessionError, match="shape"):
            model.set_input("a", np.zeros((1, 4096), dtype=np.int8))
        with pytest.raises(SessionError, match="dtype"):
            model.set_input("a", np.zeros((1, 8), dtype=np.float32))
        # A device allocation far beyond the device's memory pool is refused by the device.
        with pytest.raises((RPCError, SessionError)):
            session.empty((1 << 30,), "int8")
        _check_add(session, 42)  # the session is still good


def test_device_reset_terminates_session(add_project) -> None:
    binary = add_project.directory / "build/main"
    with add_project.session() as session:
        _check_add(session, 1)
        before = device_pids(binary)
        with pytest.raises(SessionTerminatedError):
            session.call("tvm.testing.reset_server")
        with pytest.raises(ProjectAPIError):
            _check_add(session, 2)  # the old session is over
        assert device_pids(binary) == before  # re-exec keeps the process id
    with add_project.session() as session:  # a fresh session works again
        _check_add(session, 3)
