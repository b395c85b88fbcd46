"""The places of a labgrid coordinator, as the host side lists them (``project-api devices``,
sharded validation in :mod:`project_api.farm`)."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any

from project_api.errors import ServerError
from project_api.template.labgrid_place import require_labgrid, serial_url


@dataclass(frozen=True)
class PlaceState:
    """A labgrid place as the coordinator sees it."""

    name: str
    acquired: str | None  #: "host/user" of the holder, or None when free
    serial_ports: tuple[str, ...]  #: pyserial URLs of its NetworkSerialPort resources (if known)
    tags: dict[str, str] = field(default_factory=dict)
    comment: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": "acquired" if self.acquired else "free",
                "acquired": self.acquired, "serial_ports": list(self.serial_ports),
                "tags": dict(self.tags), "comment": self.comment}


def list_places(coordinator: str) -> list[PlaceState]:
    """Every place on ``coordinator`` with its holder and the serial ports it matches (through
    labgrid's Python client API); ServerError when the coordinator cannot be reached."""
    require_labgrid()
    from labgrid.remote.client import Error as LabgridError
    from labgrid.remote.client import start_session

    with contextlib.redirect_stdout(sys.stderr):
        try:
            session = start_session(coordinator)
        except (LabgridError, OSError) as exc:
            raise ServerError(message=f"labgrid coordinator {coordinator}: {exc}; check "
                                      "LG_COORDINATOR / --coordinator") from None
        try:
            out = []
            for name, place in sorted(session.places.items()):
                urls = []
                for exporter, groups in session.resources.items():
                    for group_name, group in groups.items():
                        for resource_name, resource in group.items():
                            path = (exporter, group_name, resource.cls, resource_name)
                            if resource.cls == "NetworkSerialPort" and place.hasmatch(path):
                                with contextlib.suppress(ServerError):
                                    urls.append(serial_url(resource.params))
                out.append(PlaceState(name, place.acquired or None, tuple(urls),
                                      dict(place.tags), place.comment or ""))
            return out
        finally:
            session.loop.run_until_complete(session.stop())
            session.loop.run_until_complete(session.close())
