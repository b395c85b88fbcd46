"""Finding a board's serial port, and opening it for ``open_transport``.

A board's UART reaches the host through its debug probe's USB virtual COM port (ST-LINK: VID
0x0483). :func:`find_port` looks for it in ``serial.tools.list_ports.comports()`` by the USB IDs
of the template's ``boards.yaml`` and, when given, the probe's serial number (the same one pyOCD
shows as the probe's unique id; matched as pyOCD does, case-insensitive substring). ``-o
serial_port=...`` skips the search and may be any pyserial URL (``loop://``, ``socket://...``)::

    port = board_port(board["usb"], values["serial_port"], values["serial_number"], name)
    self.attach(UartTransport(port, values["baud_rate"]), SerialEndpoint(port, ...))

Nothing found, or more than one port, is a one-line error that lists the ports present or the
candidates and says which option picks one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from project_api.api.server import TransportTimeouts
from project_api.api.transport import SerialTransport
from project_api.errors import ServerError, TransportClosedError

_LOG = logging.getLogger(__name__)

#: Timeouts for a host-driven session over a UART: a device that is reset and running answers
#: the session start within a few retries; no single call takes 10 s at 115200 baud.
UART_TIMEOUTS = TransportTimeouts(session_start_retry_timeout_sec=2.0,
                                  session_start_timeout_sec=10.0,
                                  session_established_timeout_sec=10.0)


def list_ports() -> list[Any]:
    """The serial ports present (pyserial ``ListPortInfo`` objects)."""
    from serial.tools import list_ports as pyserial_list_ports

    return list(pyserial_list_ports.comports())


def describe_port(port: Any) -> str:
    """``/dev/ttyACM0 (0483:374b, serial 066D..., STM32 STLink)``."""
    ids = (f"{port.vid:04x}:{port.pid:04x}" if port.vid is not None and port.pid is not None
           else "no USB ID")
    parts = [ids, f"serial {port.serial_number}" if port.serial_number else "no serial"]
    if port.description and port.description != "n/a":
        parts.append(port.description)
    return f"{port.device} ({', '.join(parts)})"


def find_port(vid: int, pid: int, serial_number: str | None = None, what: str = "the board",
              ports: Sequence[Any] | None = None, index: int | None = None) -> str:
    """The device of the one port with USB ID ``vid:pid`` (and ``serial_number``), else
    ServerError listing every port present (none matches) or the candidates (several do).

    ``index``: the probe has several serial ports (a J-Link OB's VCOM0..2); when the matches all
    belong to one probe (one serial number), take the index-th by USB location."""
    present = list_ports() if ports is None else list(ports)
    matches = [p for p in present if p.vid == vid and p.pid == pid]
    if serial_number:
        wanted = serial_number.lower()
        matches = [p for p in matches if wanted in (p.serial_number or "").lower()]
    usb = f"USB ID {vid:04x}:{pid:04x}" + (f" and serial number {serial_number}"
                                           if serial_number else "")
    if not matches:
        listed = "; ".join(describe_port(p) for p in present) or "none"
        raise ServerError(message=f"no serial port of {what} ({usb}); ports present: {listed}; "
                                  "connect the board by USB or pass -o serial_port=PORT")
    serials = {p.serial_number for p in matches}
    if index is not None and len(matches) > 1 and len(serials) == 1:
        ordered = sorted(matches, key=lambda p: (str(p.location or ""), str(p.device)))
        if index < len(ordered):
            matches = [ordered[index]]
    if len(matches) > 1:
        listed = "; ".join(describe_port(p) for p in matches)
        raise ServerError(message=f"{len(matches)} serial ports match {what} ({usb}): {listed}; "
                                  "pass -o serial_number=... or -o serial_port=...")
    _LOG.info("serial port of %s: %s", what, describe_port(matches[0]))
    return str(matches[0].device)


def usb_ids(usb: Any) -> tuple[int, int] | None:
    """``(vid, pid)`` of a boards.yaml ``usb`` entry: ``{vid: 0x0483, pid: 0x374b}`` or the
    string ``"0483:374b"`` (hex); None for none (an emulated board)."""
    if not usb:
        return None
    if isinstance(usb, Mapping):
        return int(usb["vid"]), int(usb["pid"])
    vid, _, pid = str(usb).partition(":")
    return int(vid, 16), int(pid, 16)


def board_port(usb: Any, serial_port: str | None,
               serial_number: str | None, what: str = "the board",
               index: int | None = None) -> str:
    """``serial_port`` if given, else :func:`find_port` by the board's ``usb`` IDs
    (:func:`usb_ids`)."""
    if serial_port:
        return serial_port
    ids = usb_ids(usb)
    if ids is None:
        raise ServerError(message=f"{what} has no USB IDs in boards.yaml to find its serial port "
                                  "by; pass -o serial_port=PORT")
    return find_port(*ids, serial_number, what, index=index)


class UartTransport(SerialTransport):
    """A :class:`~project_api.api.transport.SerialTransport` whose :meth:`open` failing is a
    one-line ServerError saying why (no such port, no permission, held by another program)."""

    def __init__(self, port: str, baudrate: int = 115200,
                 timeouts: TransportTimeouts = UART_TIMEOUTS) -> None:
        super().__init__(port, baudrate, timeouts)

    def open(self) -> None:
        try:
            super().open()
        except TransportClosedError as exc:
            reason = exc.data.get("reason") if isinstance(exc.data, dict) else None
            reason = reason or f"cannot open {self.port}"
            hint = ("add yourself to the port's group (e.g. 'sudo usermod -aG dialout $USER', "
                    "then log in again)" if "ermission" in reason
                    else "check the board is connected and no other program holds the port")
            fix = "" if ";" in reason else f"; {hint}"  # the reason may carry its fix already
            raise ServerError(message=f"open_transport: {reason}{fix}") from None
