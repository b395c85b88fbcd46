"""The keeper of a labgrid place: ``python -m project_api.template.labgrid_keeper
--coordinator=HOST:PORT --place=NAME [--wait=SECONDS]``.

It acquires the place through labgrid's Python client API, writes one JSON line on its stdout
(``{"resource": <the NetworkSerialPort's parameters or null>, "classes": [...]}``, or
``{"error": "<why, in one line>"}``) and holds the place until its stdin reaches end of file,
then releases it; SIGINT and SIGTERM release it too. Its parent is a template server
(:func:`project_api.template.labgrid_place.acquire_place`).

It records itself as the place's owner (:mod:`project_api.template.labgrid_owner`: a place tag)
while it holds it. A place it finds held by a project-api owner on this machine that is gone (a
SIGKILLed keeper) it releases first, with one line on stderr, and then acquires; while it waits
(``--wait``) such a place counts as free.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import time
from typing import Any

from project_api.template import labgrid_owner


def _place_error(session: Any, place: str) -> str | None:
    """Why ``place`` cannot be acquired now (None: it is free, or was held by a dead
    project-api owner here and is released now)."""
    known = session.places.get(place)
    if known is None:
        listed = ", ".join(sorted(session.places)) or "none"
        return f"no such place (places: {listed}); create it with 'labgrid-client -p {place} create'"
    if known.acquired and not labgrid_owner.release_if_stale(session, place):
        owner = labgrid_owner.Owner.from_tags(known.tags)
        by = f" ({owner.describe()})" if owner is not None else ""
        return (f"held by {known.acquired}{by}; "
                + labgrid_owner.release_hint(place, session.address))
    return None


def _record_owner(session: Any, place: str) -> None:
    """This keeper as ``place``'s owner record (a warning when the coordinator refuses it: the
    place is then held as labgrid-client would hold it, released by a person if we die)."""
    import grpc

    me = labgrid_owner.Owner.this_process()
    if me is None:
        return
    try:
        labgrid_owner.set_owner_tag(session, place, me.tag)
    except grpc.aio.AioRpcError as exc:
        logging.getLogger(__name__).warning("labgrid: could not record the owner of place %s: %s",
                                            place, exc.details())


def _keep(coordinator: str, place: str, wait_sec: float) -> int:
    """Acquire, report the serial resource as one JSON line, hold until stdin closes, release."""
    import grpc
    from labgrid.remote.client import Error as LabgridError
    from labgrid.remote.client import start_session

    out = sys.stdout
    sys.stdout = sys.stderr  # labgrid prints progress; our stdout carries one JSON line

    def answer(reply: dict[str, Any]) -> None:
        out.write(json.dumps(reply) + "\n")
        out.flush()

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        session = start_session(coordinator, extra={"args": argparse.Namespace(
            place=place, allow_unmatched=False, kick=False)})
    except (LabgridError, OSError) as exc:
        answer({"error": f"cannot reach the coordinator: {exc}"})
        return 1
    acquired = False
    try:
        deadline = time.monotonic() + wait_sec
        while True:
            why = _place_error(session, place)
            if why is None:
                try:
                    session.loop.run_until_complete(session.acquire())
                    acquired = True
                    _record_owner(session, place)
                    break
                except LabgridError as exc:  # someone else was quicker
                    why = str(exc).removeprefix("Error: ")
            if why.startswith("no such place") or time.monotonic() >= deadline:
                hint = "" if why.startswith("no such place") else (
                    "; wait for it with -o labgrid_wait=SECONDS" if wait_sec == 0 else
                    f" after waiting {wait_sec:g} s")
                answer({"error": why + hint})
                return 1
            session.loop.run_until_complete(asyncio_sleep(0.5))
        resources = session.get_target_resources(session.places[place])
        serial = [r for (_, cls), r in resources.items() if cls == "NetworkSerialPort"]
        # No serial port is fine for flashing (a debugger only); open_link refuses it.
        answer({"resource": dict(serial[0].params) if serial else None,
                "classes": sorted({cls for _, cls in resources})})
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()  # end of file: the server closed us or died
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if acquired:
            try:
                # The record goes first: killed between the two, the place is left held with
                # no record, which nobody releases by mistake.
                with contextlib.suppress(grpc.aio.AioRpcError):  # still release it
                    labgrid_owner.set_owner_tag(session, place, "")
                session.loop.run_until_complete(session.release())
            except LabgridError as exc:
                sys.stderr.write(f"labgrid: releasing {place}: {exc}\n")
        session.loop.run_until_complete(session.stop())
        session.loop.run_until_complete(session.close())


def asyncio_sleep(seconds: float) -> Any:
    """A coroutine that sleeps while the session's message pump takes place updates."""
    import asyncio

    return asyncio.sleep(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Hold a labgrid place until stdin closes.")
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--place", required=True)
    parser.add_argument("--wait", type=float, default=0.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s:%(message)s")
    return _keep(args.coordinator, args.place, args.wait)


if __name__ == "__main__":
    sys.exit(main())
