"""project_api.template.transport: the mixin, device processes and the serial endpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from project_api import client
from project_api.errors import IoTimeoutError, TransportClosedError
from project_api.template import DeviceProcess, TemplateHandler, TransportMixin
from project_api.transport import LoopTransport, ProjectTransport


class _Part:
    def __init__(self, log: list[str], name: str):
        self.log, self.name = log, name

    def close(self) -> None:
        self.log.append(self.name)


class _Handler(TransportMixin, TemplateHandler):
    PLATFORM_NAME = "test"

    def build(self, options: dict) -> None:
        pass

    def flash(self, options: dict) -> None:
        pass

    def open_transport(self, options: dict) -> dict:
        return {}


def test_mixin_delegates_and_tears_down(tmp_path: Path) -> None:
    handler = _Handler(project_dir=tmp_path)
    with pytest.raises(TransportClosedError):
        handler.read_transport(1, 0)
    log: list[str] = []
    loop = LoopTransport(capacity_bytes=4)
    handler.attach(loop, _Part(log, "device"), _Part(log, "endpoint"))
    handler.write_transport(b"abc", 1.0)
    assert handler.read_transport(2, 1.0) == b"ab"
    assert handler.read_transport(10, 1.0) == b"c"
    with pytest.raises(IoTimeoutError):
        handler.read_transport(1, 0.01)
    handler.close_transport()
    assert log == ["device", "endpoint"]  # parts closed after the transport, in order
    with pytest.raises(TransportClosedError):
        handler.write_transport(b"x", 1.0)
    handler.close_transport()  # idempotent
    assert log == ["device", "endpoint"]


def test_closed_channel_tears_everything_down(tmp_path: Path) -> None:
    handler = _Handler(project_dir=tmp_path)
    log: list[str] = []
    loop = LoopTransport()
    handler.attach(loop, _Part(log, "device"))
    loop.close()  # the device went away
    with pytest.raises(TransportClosedError):
        handler.read_transport(1, 1.0)
    assert log == ["device"]


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
from project_api.template import SerialEndpoint, TemplateHandler, TransportMixin


class Handler(TransportMixin, TemplateHandler):
    PLATFORM_NAME = "uart"

    def build(self, options):
        pass

    def flash(self, options):
        pass

    def open_transport(self, options):
        timeouts = server.TransportTimeouts(0, 2.0, 2.0)
        return {{"timeouts": timeouts, "endpoint": SerialEndpoint("loop://", 921600).to_json()}}


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
