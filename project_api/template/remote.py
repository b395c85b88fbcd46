"""Boards on other machines, for a template: the options and the link.

A template adopts it with its option list and one line in ``do_open_transport`` and ``do_flash``::

    OPTIONS = [..., *remote.REMOTE_OPTIONS]

    def do_open_transport(self, values):
        link = remote.remote_link(values, values["baud_rate"])   # serial_url or labgrid_place
        if link is not None:                                      # never a local QEMU then
            return link
        ...the local board or emulator...

    def do_flash(self, values):
        if labgrid_place.flash_with_labgrid(values, elf, board):  # labgrid's OpenOCD
            return
        serial_number = remote.probe_id(values) or values["serial_number"]   # -o probe=remote:...

``-o serial_url=URL`` (any pyserial URL, :mod:`.remote_serial`) replaces port discovery;
``-o labgrid_place=NAME`` holds that place of a labgrid coordinator and uses its serial port
(:mod:`.labgrid_place`). Flashing a board on another machine: ``-o probe=remote:HOST:PORT``
names a ``pyocd server`` on the exporter host (the template's pyOCD runner then flashes the
board's ``pyocd_target``); or, with ``-o labgrid_place`` and no probe, labgrid's OpenOCDDriver
flashes through the USB debugger the place exports.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from project_api.errors import OptionValueError, ServerError
from project_api.template import labgrid_place
from project_api.template.link import Link
from project_api.template.options import DeclaredOption, option
from project_api.template.remote_serial import network_uart_link

_LOG = logging.getLogger(__name__)


def remote_options(flash: bool = True) -> list[DeclaredOption]:
    """The options of this module, for a template's ``OPTIONS``: the remote UART
    (``serial_url``, ``labgrid_*``) and, with ``flash``, flashing through a place's debugger or a
    pyOCD server (``probe``; a template whose flash tool cannot, such as ``west flash``, leaves
    that out)."""
    flash_too = ["open_transport", "flash"] if flash else ["open_transport"]
    opts = [
        option("serial_url", "str", optional=["open_transport"],
               help="pyserial URL of the board's UART (rfc2217://host:port, socket://host:port, "
                    "loop://, a device path; hwgrep:// with PROJECT_API_ALLOW_HWGREP=1): "
                    "replaces port discovery; never starts a local QEMU."),
        option("labgrid_place", "str", optional=flash_too,
               help="labgrid place to acquire; its NetworkSerialPort is the UART (released on "
                    "close)" + ("; flash: through labgrid's OpenOCD driver on its USB debugger "
                                "(or -o probe)." if flash else ".")),
        option("labgrid_coordinator", "str", optional=flash_too,
               help="labgrid coordinator HOST:PORT (default: LG_COORDINATOR)."),
        option("labgrid_wait", "int", default=0, minimum=0, maximum=24 * 3600,
               optional=flash_too,
               help="seconds to wait for a labgrid place someone else holds (0: fail at once)."),
    ]
    if flash:
        opts.append(option("probe", "str", optional=["flash"],
                           help="debug probe: remote:HOST:PORT for a 'pyocd server' on another "
                                "machine."))
    return opts


#: Every option of this module (:func:`remote_options` with flashing).
REMOTE_OPTIONS = remote_options()


def probe_id(values: Mapping[str, Any]) -> str | None:
    """The pyOCD unique id of ``-o probe`` (``remote:HOST:PORT``), or None when not given."""
    probe = values.get("probe")
    if not probe:
        return None
    kind, _, address = str(probe).partition(":")
    host, _, port = address.rpartition(":")
    if kind != "remote" or not host or not port.isdigit():
        raise OptionValueError(f"probe={probe}: want remote:HOST:PORT, the address of a "
                               "'pyocd server' (e.g. remote:lab-pc:5555)")
    return f"remote:{host}:{port}"


def reached_remotely(values: Mapping[str, Any]) -> bool:
    """Whether the board is reached through ``-o serial_url`` or ``-o labgrid_place``: no local
    probe, so nothing here can reset it."""
    return bool(values.get("serial_url") or values.get("labgrid_place"))


def remote_link(values: Mapping[str, Any], baudrate: int = 115200) -> Link | None:
    """The link to the board ``-o serial_url`` or ``-o labgrid_place`` names (the place held
    until the link closes), or None when neither option is set."""
    url, place = values.get("serial_url"), values.get("labgrid_place")
    if url and place:
        raise ServerError(message="give serial_url or labgrid_place, not both")
    if url:
        return network_uart_link(str(url), baudrate)
    if not place:
        return None
    keeper = labgrid_place.acquire_place(place, labgrid_place.coordinator_address(values),
                                         float(values.get("labgrid_wait") or 0))
    try:
        url = keeper.url
    except ServerError:
        keeper.close()
        raise
    speed = (keeper.resource or {}).get("speed")
    if speed and int(speed) != baudrate:  # the firmware's rate is what the UART runs at
        _LOG.warning("labgrid place %s exports its serial port at %s baud; the firmware "
                     "runs at %d (-o baud_rate), which is used", place, speed, baudrate)
    return network_uart_link(url, baudrate, keeper)
