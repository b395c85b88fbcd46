"""project_api.template.link and the base class's link plumbing: a Link attached, served and
closed by TemplateHandler, device processes, the serial endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from project_api.api import client
from project_api.api.server import TransportTimeouts
from project_api.api.transport import LoopTransport, ProjectTransport
from project_api.errors import IoTimeoutError, TransportClosedError
from project_api.template import DeviceProcess, Link, TemplateHandler


class _Part:
    def __init__(self, log: list[str], name: str):
        self.log, self.name = log, name

    def close(self) -> None:
        self.log.append(self.name)

    def to_json(self) -> None:  # as an endpoint: one only the server holds
        return None


TIMEOUTS = TransportTimeouts(0, 1.0, 1.0)


class _Handler(TemplateHandler):
    """A generated project whose link is whatever the test puts in ``next_link``."""

    PLATFORM_NAME = "test"
    next_link: Link | None = None
    opened = 0

    def do_open_transport(self, values: dict) -> Link:
        self.opened += 1
        assert self.next_link is not None
        return self.next_link


def _generated(tmp_path: Path) -> _Handler:
    (tmp_path / "model.tar").write_bytes(b"")
    return _Handler(project_dir=tmp_path)


def test_base_attaches_serves_and_tears_down(tmp_path: Path) -> None:
    handler = _generated(tmp_path)
    with pytest.raises(TransportClosedError):
        handler.read_transport(1, 0)
    log: list[str] = []
    loop = LoopTransport(capacity_bytes=4)
    handler.next_link = Link(loop, TIMEOUTS, _Part(log, "endpoint"), _Part(log, "device"))
    assert handler.open_transport({}) == {"timeouts": TIMEOUTS}  # its endpoint has no JSON
    handler.write_transport(b"abc", 1.0)
    assert handler.read_transport(2, 1.0) == b"ab"
    assert handler.read_transport(10, 1.0) == b"c"
    with pytest.raises(IoTimeoutError):
        handler.read_transport(1, 0.01)
    handler.close_transport()
    assert log == ["device", "endpoint"]  # parts after the transport, the endpoint last
    with pytest.raises(TransportClosedError):
        handler.write_transport(b"x", 1.0)
    handler.close_transport()  # idempotent
    assert log == ["device", "endpoint"]


def test_closed_channel_tears_everything_down(tmp_path: Path) -> None:
    handler = _generated(tmp_path)
    log: list[str] = []
    loop = LoopTransport()
    handler.next_link = Link(loop, TIMEOUTS, None, _Part(log, "device"))
    handler.open_transport({})
    loop.close()  # the device went away
    with pytest.raises(TransportClosedError):
        handler.read_transport(1, 1.0)
    assert log == ["device"]


def test_open_transport_again_closes_the_old_link_first(tmp_path: Path) -> None:
    """After the device went away, open_transport runs the hook again (issue 21 restarts
    QEMU or reopens a port this way): the old link is closed before the hook builds a new one."""
    handler = _generated(tmp_path)
    log: list[str] = []
    handler.next_link = Link(LoopTransport(), TIMEOUTS, None, _Part(log, "first"))
    handler.open_transport({})
    second = LoopTransport()
    handler.next_link = Link(second, TIMEOUTS, None, _Part(log, "second"))
    handler.open_transport({})
    assert log == ["first"] and handler.opened == 2
    handler.write_transport(b"z", 1.0)
    assert handler.read_transport(1, 1.0) == b"z"  # served from the new link
    handler.close_transport()
    assert log == ["first", "second"]


def test_a_link_that_cannot_open_is_closed_whole(tmp_path: Path) -> None:
    class Broken(LoopTransport):
        def open(self) -> None:
            raise TransportClosedError(data={"reason": "no such port"})

    handler = _generated(tmp_path)
    log: list[str] = []
    handler.next_link = Link(Broken(), TIMEOUTS, _Part(log, "endpoint"), _Part(log, "device"))
    with pytest.raises(TransportClosedError):
        handler.open_transport({})
    assert log == ["device", "endpoint"]
    with pytest.raises(TransportClosedError):
        handler.read_transport(1, 0)


def test_device_process_is_killed_if_it_ignores_sigterm(tmp_path: Path) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
    device = DeviceProcess([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE,
                           stop_wait_sec=0.2)
    assert device._proc is not None and device._proc.stdout is not None
    assert device._proc.stdout.readline() == b"up\n"
    assert device.poll() is None
    device.close()
    with pytest.raises(ProcessLookupError):
        os.kill(device.pid, 0)
    device.close()


SERIAL_SERVER = """\
import sys
sys.path.insert(0, {root!r})
from project_api import server
from project_api.template import TemplateHandler, uart_link


class Handler(TemplateHandler):
    PLATFORM_NAME = "uart"

    def do_open_transport(self, values):
        return uart_link("loop://", 921600, server.TransportTimeouts(0, 2.0, 2.0))


if __name__ == "__main__":
    server.main(Handler())
"""


def test_serial_endpoint_lets_our_client_talk_to_the_port(tmp_path: Path) -> None:
    (tmp_path / "microtvm_api_server.py").write_text(SERIAL_SERVER.format(root=str(REPO_ROOT)))
    (tmp_path / "model.tar").write_bytes(b"")  # a generated project
    with client.instantiate_from_dir(tmp_path) as api:
        transport = ProjectTransport(api, {}, shutdown_client=False)
        transport.open()
        try:
            assert transport.endpoint == {"type": "serial", "port": "loop://", "baudrate": 921600}
            transport.write(b"hello", 1.0)  # pyserial's loop:// echoes: no JSON-RPC round trip
            got = b""
            deadline = time.monotonic() + 2
            while len(got) < 5 and time.monotonic() < deadline:
                got += transport.read(5 - len(got), 1.0)
            assert got == b"hello"
        finally:
            transport.close()
