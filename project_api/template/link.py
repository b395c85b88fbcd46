"""The device link: what a template's ``open_transport`` hook builds, as one value.

A :class:`Link` is the transport the server reads and writes for clients that go through
JSON-RPC (microTVM's), the session timeouts, the endpoint our client may open itself (the fast
path), and the parts to tear down after the transport (a device process, an emulator, a held
labgrid place). The template builds it, alone or through a helper, and returns it;
:class:`~project_api.template.TemplateHandler` opens it, replies with :meth:`Link.reply`, serves
``read_transport``/``write_transport`` from it and closes it::

    def do_open_transport(self, values):
        return uart_link(port, values["baud_rate"])              # a board's UART

The helpers: :func:`uart_link` (a serial port or pyserial URL), :func:`process_link` (a device
program on this computer, on FIFOs), :func:`project_api.template.qemu.emulator_link` (QEMU, up to
the firmware's ready line) and :func:`project_api.template.remote.remote_link` (``-o
serial_url``, ``-o labgrid_place``). A link holds nothing a later ``open_transport`` needs: the
base closes the old one first, so the hook can run again after the device went away.

An endpoint is an object with ``to_json()`` (the ``"endpoint"`` value of the reply, or None for
a channel only the server can hold) and ``close()``: :class:`project_api.api.server.FifoEndpoint`
for FIFOs on this computer, :class:`SerialEndpoint` for a UART.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from project_api.api.fifo import FifoEndpoint
from project_api.api.server import TransportTimeouts
from project_api.api.transport import FdTransport, Transport
from project_api.system.processes import stop_process

_LOG = logging.getLogger(__name__)


class Closeable(Protocol):
    def close(self) -> None: ...


class Endpoint(Protocol):
    """What our client may open itself (the reply's ``"endpoint"``)."""

    def to_json(self) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


class Link:
    """A device link: ``transport`` (opened by :meth:`open`), its ``timeouts``, the
    ``endpoint`` our client may open instead, and ``parts`` to close after the transport.

    :meth:`close` closes the transport, then each part in order, then the endpoint; both
    :meth:`open` and :meth:`close` may be called again (they do nothing the second time).
    """

    def __init__(self, transport: Transport, timeouts: TransportTimeouts,
                 endpoint: Endpoint | None = None, *parts: Closeable) -> None:
        self.transport = transport
        self.timeouts = timeouts
        self.endpoint = endpoint
        self.parts = parts
        self._state = "new"

    def open(self) -> None:
        """Open the transport (once)."""
        if self._state == "new":
            self.transport.open()
            self._state = "open"

    def reply(self) -> dict[str, Any]:
        """The ``open_transport`` reply: the timeouts and, when there is one, the endpoint."""
        endpoint = self.endpoint.to_json() if self.endpoint is not None else None
        return {"timeouts": self.timeouts, **({"endpoint": endpoint} if endpoint else {})}

    def close(self) -> None:
        """Close the transport, the parts and the endpoint (once)."""
        if self._state == "closed":
            return
        self._state = "closed"
        try:
            self.transport.close()
        except OSError as exc:
            _LOG.debug("closing the transport: %s", exc)
        for part in (*self.parts, *([self.endpoint] if self.endpoint is not None else [])):
            part.close()


class SerialEndpoint:
    """A serial port our client opens itself (``{"type": "serial", "port", "baudrate"}``).

    ``port`` may be a device path or any pyserial URL (``socket://host:port``, ``rfc2217://...``).
    """

    def __init__(self, port: str, baudrate: int = 115200):
        self.port = port
        self.baudrate = baudrate

    def to_json(self) -> dict[str, Any]:
        """The ``"endpoint"`` value for the ``open_transport`` reply."""
        return {"type": "serial", "port": self.port, "baudrate": self.baudrate}

    def close(self) -> None:
        """Nothing to release: the port is opened by whoever uses it."""


class DeviceProcess:
    """A device program this server starts (``build/main``, an emulator) and always stops.

    :meth:`close` terminates it, waits ``stop_wait_sec`` and then kills it; it is safe to call
    twice. The process is its own session leader only if asked (``new_session=True``).
    """

    def __init__(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: Path,
        stdin: Any = None,
        stdout: Any = None,
        stderr: Any = None,
        new_session: bool = False,
        stop_wait_sec: float = 2.0,
    ):
        self.argv = [str(a) for a in argv]
        self._proc: subprocess.Popen | None = subprocess.Popen(
            self.argv, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
            start_new_session=new_session,
        )
        self.pid = self._proc.pid
        self._stop_wait_sec = stop_wait_sec
        _LOG.info("started %s (pid %d)", Path(self.argv[0]).name, self.pid)

    def poll(self) -> int | None:
        """The exit status, or None while it runs (or after close)."""
        return self._proc.poll() if self._proc is not None else None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stop_process(proc, self._stop_wait_sec)
        _LOG.debug("%s exited with %s", Path(self.argv[0]).name, proc.returncode)


def uart_link(port: str, baudrate: int, timeouts: TransportTimeouts | None = None) -> Link:
    """A board's UART ``port`` (a device or a pyserial URL), with a ``serial`` endpoint our
    client opens itself; ``timeouts`` default to :data:`~.serial_ports.UART_TIMEOUTS`."""
    from project_api.template.serial_ports import UART_TIMEOUTS, UartTransport

    timeouts = timeouts or UART_TIMEOUTS
    return Link(UartTransport(port, baudrate, timeouts), timeouts, SerialEndpoint(port, baudrate))


def process_link(argv: Sequence[str | os.PathLike[str]], *, cwd: Path,
                 timeouts: TransportTimeouts) -> Link:
    """A device program on this computer (``argv``, run in ``cwd``) with its stdin and stdout
    on a FIFO pair our client opens itself; the server's own ends serve clients that ignore the
    endpoint (microTVM's). Whatever fails, nothing is left."""
    endpoint = FifoEndpoint()
    try:
        device_in, device_out = endpoint.open_device_fds(blocking=True)
        try:
            device = DeviceProcess(argv, cwd=cwd, stdin=device_in, stdout=device_out)
        finally:
            os.close(device_in)
            os.close(device_out)
    except BaseException:
        endpoint.close()
        raise
    return Link(FdTransport.for_fifos(endpoint.rx_path, endpoint.tx_path, timeouts), timeouts,
                endpoint, device)
