"""A board's UART on another machine, at a pyserial URL (``-o serial_url``, and the serial port
of a labgrid place): the transport and its link.

``-o serial_url=URL`` is a device path or an allowed pyserial URL (``rfc2217://host:port``,
``socket://host:port``, ``loop://``, ``spy://`` without ``file=``; ``hwgrep://`` only with
``$PROJECT_API_ALLOW_HWGREP=1``; see ``serial_url_refusal``) and replaces port discovery. The serial line is opened
lazily on the server's side (:class:`NetworkUartTransport`): our client reaches the device
through the ``serial`` endpoint itself, and a TCP serial server (QEMU, ser2net) takes one
connection at a time; microTVM's client, which reads and writes through the server, opens it on
first use. Timeouts allow for network latency (:data:`NETWORK_TIMEOUTS`).
"""

from __future__ import annotations

import logging

from project_api.api.server import TransportTimeouts
from project_api.api.transport import serial_url_refusal
from project_api.errors import OptionValueError
from project_api.template.link import Closeable, Link, SerialEndpoint
from project_api.template.serial_ports import UartTransport

_LOG = logging.getLogger(__name__)

#: Words every timeout error over such a link carries (see project_api.micro.session).
NETWORK_LINK = "over a network link (serial_url/labgrid)"

#: Session timeouts over a network link: a round trip through a coordinator's network and a
#: serial server adds latency, and an emulated board computes slowly.
NETWORK_TIMEOUTS = TransportTimeouts(session_start_retry_timeout_sec=2.0,
                                     session_start_timeout_sec=30.0,
                                     session_established_timeout_sec=120.0)


class NetworkUartTransport(UartTransport):
    """A UART at a pyserial URL that is opened on first read or write, not by ``attach``: our
    client opens the endpoint itself, and a TCP serial server takes one connection at a time."""

    def __init__(self, port: str, baudrate: int = 115200,
                 timeouts: TransportTimeouts = NETWORK_TIMEOUTS) -> None:
        super().__init__(port, baudrate, timeouts)
        self._wanted = False

    def open(self) -> None:
        self._wanted = True

    def _ensure_open(self) -> None:
        if self._wanted and self._ser is None:
            super().open()

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        self._ensure_open()
        return super().read(n, timeout_sec)

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        self._ensure_open()
        super().write(data, timeout_sec)

    def close(self) -> None:
        self._wanted = False
        super().close()


def network_uart_link(url: str, baudrate: int, *parts: Closeable) -> Link:
    """The link to the UART at pyserial ``url``, with a ``serial`` endpoint our client opens
    itself; ``parts`` (a held labgrid place) are closed after it."""
    refusal = serial_url_refusal(url)
    if refusal:
        raise OptionValueError(f"-o serial_url: {refusal}", option="serial_url")
    _LOG.info("board at %s %s", url, NETWORK_LINK)
    return Link(NetworkUartTransport(url, baudrate), NETWORK_TIMEOUTS,
                SerialEndpoint(url, baudrate), *parts)
