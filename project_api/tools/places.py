"""The places of a labgrid coordinator, as the host side lists them (``project-api devices``,
sharded validation in :mod:`project_api.tools.farm`), each held one with its project-api owner and
whether that lives (:mod:`project_api.template.labgrid_owner`)."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any

from project_api.errors import ServerError
from project_api.template.labgrid_owner import Owner
from project_api.template.labgrid_place import require_labgrid, serial_url


@dataclass(frozen=True)
class PlaceState:
    """A labgrid place as the coordinator sees it."""

    name: str
    acquired: str | None  #: "host/user" of the holder, or None when free
    serial_ports: tuple[str, ...]  #: pyserial URLs of its NetworkSerialPort resources (if known)
    tags: dict[str, str] = field(default_factory=dict)
    comment: str = ""
    #: The project-api process that holds it, from its owner record (None: free, or acquired
    #: without one, e.g. by labgrid-client).
    owner: Owner | None = None

    @property
    def stale(self) -> bool:
        """Held by a project-api owner on this machine that is gone: the next project-api
        that acquires it releases it first, so it counts as free."""
        return bool(self.acquired) and self.owner is not None and self.owner.alive() is False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": "acquired" if self.acquired else "free",
                "acquired": self.acquired, "serial_ports": list(self.serial_ports),
                "tags": dict(self.tags), "comment": self.comment,
                "owner": self.owner.to_json() if self.owner is not None else None}


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
                owner = Owner.from_tags(place.tags) if place.acquired else None
                out.append(PlaceState(name, place.acquired or None, tuple(urls),
                                      dict(place.tags), place.comment or "", owner))
            return out
        finally:
            session.loop.run_until_complete(session.stop())
            session.loop.run_until_complete(session.close())
