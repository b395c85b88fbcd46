"""Serial ports as pyserial lists them, without a board attached: ``ListPortInfo`` records
built in code and ``comports()`` patched to return them (ST-LINK virtual COM ports, a CP2102
bridge, a port with no USB ID)."""

from __future__ import annotations

from typing import Any
from unittest import mock

from serial.tools.list_ports_common import ListPortInfo

ST = (0x0483, 0x374B)


def port(device: str, vid: int | None = None, pid: int | None = None,
         serial_number: str | None = None, description: str = "n/a") -> ListPortInfo:
    """A port record as ``serial.tools.list_ports.comports()`` yields it."""
    info = ListPortInfo(device, skip_link_detection=True)
    info.vid, info.pid, info.serial_number, info.description = vid, pid, serial_number, description
    return info


def comports(*ports: ListPortInfo) -> Any:
    """``comports()`` patched to list ``ports`` (use with ``with``)."""
    return mock.patch("serial.tools.list_ports.comports", return_value=list(ports))


TTYS0 = port("/dev/ttyS0")
USB_UART = port("/dev/ttyUSB0", 0x10C4, 0xEA60, "0001", "CP2102 USB to UART Bridge Controller")
NUCLEO_A = port("/dev/ttyACM0", *ST, "0670FF495351848777254629", "STM32 STLink")
NUCLEO_B = port("/dev/ttyACM1", *ST, "066DFF555185754867081234", "STM32 STLink")
