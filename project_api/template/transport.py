"""The device side of ``open_transport``: endpoints, device processes, and read/write plumbing.

A template's ``open_transport`` sets up a byte channel to its device and hands it to
:meth:`TransportMixin.attach`, together with whatever must be torn down afterwards (a
:class:`DeviceProcess`, a FIFO or :class:`SerialEndpoint`). The mixin then implements
``read_transport``, ``write_transport`` and ``close_transport`` by delegating to the
:class:`project_api.transport.Transport`, so no template reimplements fd or serial I/O::

    class Handler(TransportMixin, TemplateHandler):
        def open_transport(self, options):
            endpoint = server.FifoEndpoint()
            ...start the device on endpoint.open_device_fds()...
            self.attach(FdTransport.for_fifos(endpoint.rx_path, endpoint.tx_path), proc, endpoint)
            return {"timeouts": TIMEOUTS, "endpoint": endpoint.to_json()}

An endpoint returned as ``"endpoint"`` lets our client reach the device directly (microTVM's
client ignores it and uses read/write_transport): :class:`project_api.server.FifoEndpoint` for a
device process on this computer, :class:`SerialEndpoint` for a UART.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from project_api.errors import TransportClosedError
from project_api.processes import stop_process
from project_api.transport import Transport

_LOG = logging.getLogger(__name__)


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


class TransportMixin:
    """``read_transport`` / ``write_transport`` / ``close_transport`` over an attached Transport.

    Mix it in before :class:`~project_api.template.TemplateHandler`. Reads return 1..n bytes;
    both directions raise IoTimeoutError or TransportClosedError, as the Project API contract
    says; when the channel closes, everything attached is torn down.
    """

    _transport: Transport | None = None
    _attached: list[Any]

    def attach(self, transport: Transport, *parts: Any) -> None:
        """Open ``transport``; ``parts`` (objects with ``close()``) are closed after it, in order."""
        self._attached = list(parts)
        self._transport = transport
        transport.open()

    def open_uart(self, port: str, baudrate: int) -> dict[str, Any]:
        """Attach the board's UART ``port`` (a device or a pyserial URL): the ``open_transport``
        reply, with a ``serial`` endpoint our client opens itself."""
        from project_api.template.serial_ports import UART_TIMEOUTS, UartTransport

        self.close_transport()
        endpoint = SerialEndpoint(port, baudrate)
        self.attach(UartTransport(port, baudrate), endpoint)
        return {"timeouts": UART_TIMEOUTS, "endpoint": endpoint.to_json()}

    def close_transport(self) -> None:
        transport, self._transport = self._transport, None
        parts, self._attached = getattr(self, "_attached", []), []
        if transport is not None:
            try:
                transport.close()
            except OSError as exc:
                _LOG.debug("closing the transport: %s", exc)
        for part in parts:
            part.close()

    def read_transport(self, n: int, timeout_sec: float | None) -> bytes:
        if self._transport is None:
            raise TransportClosedError()
        try:
            return self._transport.read(n, timeout_sec)
        except TransportClosedError:
            _LOG.info("transport closed: end of file from the device")
            self.close_transport()
            raise

    def write_transport(self, data: bytes, timeout_sec: float | None) -> None:
        if self._transport is None:
            raise TransportClosedError()
        try:
            self._transport.write(data, timeout_sec)
        except TransportClosedError:
            _LOG.info("transport closed: the device stopped reading")
            self.close_transport()
            raise
