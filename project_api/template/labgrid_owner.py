"""Who holds a labgrid place for project-api, and whether that process still lives.

labgrid has no lease on an acquisition: a keeper (:mod:`.labgrid_keeper`) that is SIGKILLed
leaves its place acquired for good. So a keeper records itself in the place's tags (labgrid's
``SetPlaceTags``: the coordinator keeps them with the place, in its ``places.yaml``, whoever dies)
right after it acquires the place, as tag ``project_api_owner``, and deletes the tag before it
releases the place (killed in between, the place is left acquired with no record: never released
by anyone but a person, the safe side). The tag's value, ``PID_START_SPACE_HOST``:

* ``PID``: the keeper's process id;
* ``START``: its start time in clock ticks after boot (``/proc/PID/stat``), so a recycled pid is
  not taken for the owner (ticks after boot, not wall time: a clock step changes no process's
  ticks);
* ``SPACE``: where that pid means that process: 16 hex digits of the SHA-256 of the kernel's boot
  id and the pid namespace (another boot, another container or another machine is another
  space);
* ``HOST``: the host name (lower case, every character but ``a-z0-9`` as ``_``), for people.

A later project-api in the same space that finds the place acquired, the record present and the
owner dead (pid gone or a zombie, or started at another tick) releases it (:func:`release_if_stale`). A live
owner, an owner in another space and an acquisition without the record are never touched. The
record needs Linux's ``/proc``; elsewhere none is written, so nothing is released automatically.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_LOG = logging.getLogger(__name__)

#: The place tag that holds the owner record (labgrid tag keys: ``[a-z][a-z0-9_]+``).
OWNER_TAG = "project_api_owner"
_VALUE = re.compile(r"(\d+)_(\d+)_([0-9a-f]{16})_([a-z0-9_]*)")


def process_start(pid: int) -> int | None:
    """Process ``pid``'s start time in clock ticks after boot (None: no such process, a
    zombie, which has died and holds nothing, or no ``/proc``)."""
    try:
        stat = open(f"/proc/{pid}/stat", "rb").read()  # noqa: SIM115 (read at once)
    except OSError:
        return None
    # Field 2 is "(comm)", which may hold spaces and parentheses: count from the last ')'.
    fields = stat[stat.rindex(b")") + 2:].split()
    if fields[0] in (b"Z", b"X"):  # field 3, the state: zombie or dead
        return None
    return int(fields[19])  # field 22 of the whole line


def pid_space() -> str | None:
    """This process's pid space: the boot id and pid namespace, hashed (None without /proc)."""
    try:
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()  # noqa: SIM115
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return hashlib.sha256(f"{boot} {namespace}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Owner:
    """The process that acquired a place for project-api."""

    pid: int
    start: int  #: clock ticks after boot
    space: str
    host: str

    @classmethod
    def this_process(cls) -> Owner | None:
        """This process as an owner (None where its start time cannot be read)."""
        start, space = process_start(os.getpid()), pid_space()
        if start is None or space is None:
            return None
        host = re.sub(r"[^a-z0-9]", "_", socket.gethostname().lower())
        return cls(os.getpid(), start, space, host)

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> Owner | None:
        """The owner recorded in a place's tags (None: no record, or not one of ours)."""
        found = _VALUE.fullmatch(tags.get(OWNER_TAG, ""))
        if found is None:
            return None
        pid, start, space, host = found.groups()
        return cls(int(pid), int(start), space, host)

    @property
    def tag(self) -> str:
        return f"{self.pid}_{self.start}_{self.space}_{self.host}"

    @property
    def local(self) -> bool:
        """Its pid means a process here (same boot, same pid namespace)."""
        return self.space == pid_space()

    def alive(self) -> bool | None:
        """Whether it still runs (None: it ran in another pid space, so this cannot tell)."""
        if not self.local:
            return None
        return process_start(self.pid) == self.start

    def describe(self) -> str:
        """``project-api pid 123 on HOST`` and, where known, whether it lives."""
        alive = self.alive()
        state = "cannot tell whether it runs: another host" if alive is None else (
            "running" if alive else "gone")
        return f"project-api pid {self.pid} on {self.host}, {state}"

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "start": self.start, "host": self.host, "local": self.local,
                "alive": self.alive()}


def release_hint(place: str, coordinator: str) -> str:
    """How a person releases ``place`` someone else holds."""
    return f"release it with 'labgrid-client -x {coordinator} -p {place} release --kick'"


def stale_owner(place: Any) -> Owner | None:
    """The dead local owner of labgrid place ``place`` (a ``labgrid.remote.common.Place``)
    when it is acquired by one; None when it is free, held without our record, or held by a
    live owner or one in another pid space."""
    if not place.acquired:
        return None
    owner = Owner.from_tags(place.tags)
    if owner is None or owner.alive() is not False:
        return None
    return owner


def set_owner_tag(session: Any, place: str, value: str) -> None:
    """Write (``value``) or delete (``""``) the owner record on ``place`` (a labgrid
    ClientSession)."""
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

    session.loop.run_until_complete(session.stub.SetPlaceTags(
        pb.SetPlaceTagsRequest(placename=place, tags={OWNER_TAG: value})))
    session.loop.run_until_complete(session.sync_with_coordinator())


def release_if_stale(session: Any, place: str) -> bool:
    """Release ``place`` when its project-api owner is dead (:func:`stale_owner`), logging one
    line; True when it did. The release names the holder it saw (labgrid's ``fromuser``), so a
    place someone acquired meanwhile is left alone."""
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

    known = session.places.get(place)
    owner = stale_owner(known) if known is not None else None
    if owner is None:
        return False
    import grpc

    holder = known.acquired
    try:
        set_owner_tag(session, place, "")
        session.loop.run_until_complete(session.stub.ReleasePlace(
            pb.ReleasePlaceRequest(placename=place, fromuser=holder)))
        session.loop.run_until_complete(session.sync_with_coordinator())
    except grpc.aio.AioRpcError as exc:  # the place was deleted meanwhile, the coordinator left
        _LOG.warning("labgrid: could not release place %s of gone project-api pid %d: %s",
                     place, owner.pid, exc.details())
        return False
    _LOG.warning("labgrid: released place %s: its holder %s (project-api pid %d on %s) is gone",
                 place, holder, owner.pid, owner.host)
    return True
