"""``project-api devices``: what boards this computer can reach, in the spirit of ``pio device
list``: the local serial ports (USB ID, serial number, description, and the ``boards.yaml``
boards of every template whose USB ID they carry), the local debug probes (pyOCD), and the
labgrid places with their state when a coordinator is configured (``LG_COORDINATOR`` or
``--coordinator``), a held place with its project-api owner (pid, host) and whether that still
runs. ``--json`` for machines.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from project_api.cli.base import Subcommand

_LOG = logging.getLogger(__name__)


def board_usb_ids() -> dict[tuple[int, int], list[str]]:
    """``(vid, pid) -> ["template/board", ...]`` from every template's ``boards.yaml``."""
    from project_api.template.boards import templates_boards
    from project_api.template.serial_ports import usb_ids

    out: dict[tuple[int, int], list[str]] = {}
    for template, boards in templates_boards():
        for name, board in boards.items():
            key = usb_ids((board or {}).get("usb"))
            if key:
                out.setdefault(key, []).append(f"{template}/{name}")
    return out


def serial_ports(ports: list[Any] | None = None) -> list[dict[str, Any]]:
    """The local serial ports with the boards each matches by USB ID."""
    from project_api.template import serial_ports as sp

    by_usb = board_usb_ids()
    out = []
    for port in sp.list_ports() if ports is None else ports:
        has_usb = port.vid is not None and port.pid is not None
        out.append({
            "port": str(port.device),
            "usb_id": f"{port.vid:04x}:{port.pid:04x}" if has_usb else None,
            "serial_number": port.serial_number or None,
            "description": port.description if port.description not in (None, "n/a") else None,
            "boards": by_usb.get((port.vid, port.pid), []) if has_usb else [],
        })
    return out


def debug_probes() -> tuple[list[dict[str, Any]], str | None]:
    """The local debug probes pyOCD sees, and why none could be listed (None if it worked)."""
    try:
        from pyocd.core.helpers import ConnectHelper

        probes = ConnectHelper.get_all_connected_probes(blocking=False, print_wait_message=False)
    except Exception as exc:  # no libusb, no permission: the rest of the list still helps
        return [], f"pyOCD could not list probes: {exc}"
    return [{"unique_id": p.unique_id, "description": p.description,
             "vendor": getattr(p, "vendor_name", None),
             "product": getattr(p, "product_name", None)} for p in probes], None


class DevicesCommand(Subcommand):
    NAMES = ["devices"]
    HELP = "List the serial ports, debug probes and labgrid places this computer can reach."
    DESCRIPTION = (
        "List the local serial ports (USB VID:PID, serial number, description, and the "
        "boards.yaml boards whose USB ID they carry), the local debug probes (pyOCD), and the "
        "labgrid places with their state when a coordinator is configured (LG_COORDINATOR or "
        "--coordinator); a place project-api holds shows its owner (pid, host) and whether it "
        "still runs (a gone one's place is released by the next project-api that wants it)."
    )
    EPILOG = """\
examples:
  project-api devices
  project-api devices --json
  LG_COORDINATOR=lab-pc:20408 project-api devices
  project-api devices --coordinator lab-pc:20408 --no-probes
"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--coordinator", metavar="HOST:PORT",
                            help="labgrid coordinator (default: LG_COORDINATOR)")
        parser.add_argument("--no-probes", action="store_true",
                            help="do not ask pyOCD for debug probes")

    def invoke(self) -> int:
        a = self.args
        data: dict[str, Any] = {"serial_ports": serial_ports()}
        if a.no_probes:
            data["debug_probes"] = None
        else:
            data["debug_probes"], why = debug_probes()
            if why:
                data["debug_probes_error"] = why
        coordinator = a.coordinator or os.environ.get("LG_COORDINATOR")
        data["labgrid"] = None
        if coordinator:
            from project_api.system import extras
            from project_api.template.labgrid_place import coordinator_address
            from project_api.tools.places import list_places

            extras.require("labgrid", "listing labgrid places (--coordinator, LG_COORDINATOR)")
            address = coordinator_address({"labgrid_coordinator": coordinator})
            data["labgrid"] = {"coordinator": address,
                               "places": [p.to_json() for p in list_places(address)]}
        self.output(data, lambda: _text(data))
        return 0


def _text(data: dict[str, Any]) -> str:
    lines = ["serial ports:"]
    for p in data["serial_ports"]:
        facts = [p["usb_id"] or "no USB ID",
                 f"serial {p['serial_number']}" if p["serial_number"] else "no serial"]
        if p["description"]:
            facts.append(p["description"])
        boards = f"  boards: {', '.join(p['boards'])}" if p["boards"] else ""
        lines.append(f"  {p['port']}  {', '.join(facts)}{boards}")
    if not data["serial_ports"]:
        lines.append("  none")
    if data["debug_probes"] is not None:
        lines.append("debug probes (pyOCD):")
        for probe in data["debug_probes"]:
            lines.append(f"  {probe['unique_id']}  {probe['description']}")
        if not data["debug_probes"]:
            lines.append(f"  {data.get('debug_probes_error') or 'none'}")
    lab = data["labgrid"]
    if lab is None:
        lines.append("labgrid places: no coordinator (set LG_COORDINATOR or --coordinator)")
    else:
        lines.append(f"labgrid places on {lab['coordinator']}:")
        for place in lab["places"]:
            state = f"acquired by {place['acquired']}" if place["acquired"] else "free"
            owner = place["owner"]
            if owner is not None:
                alive = {True: "running", False: "gone: the next acquirer releases it",
                         None: "on another host"}[owner["alive"]]
                state += f" (project-api pid {owner['pid']} on {owner['host']}, {alive})"
            ports = f"  {', '.join(place['serial_ports'])}" if place["serial_ports"] else ""
            lines.append(f"  {place['name']}  {state}{ports}")
        if not lab["places"]:
            lines.append("  none")
    return "\n".join(lines)
