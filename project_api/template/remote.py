"""Boards on other machines: a pyserial URL, a labgrid place, a pyOCD remote probe.

A template adopts it with its option list and a few lines in ``open_transport`` and ``flash``::

    OPTIONS = [..., *remote.REMOTE_OPTIONS]

    def open_transport(self, options):
        values = self.options_for("open_transport", options)
        link = remote.open_link(values, values["baud_rate"])
        if link is not None:                      # serial_url or labgrid_place: never a QEMU
            self.close_transport()
            self.attach(link.transport, *link.parts)
            return link.reply()
        ...the local board or emulator...

    def flash(self, options):
        if remote.flash_with_labgrid(values, elf, board):   # -o labgrid_place: labgrid's OpenOCD
            return
        serial_number = remote.probe_id(values) or values["serial_number"]   # -o probe=remote:...

``-o serial_url=URL`` is any pyserial URL (``rfc2217://host:port``, ``socket://host:port``,
``hwgrep://regex``, ``spy://...``) and replaces port discovery. ``-o labgrid_place=NAME``
acquires that place on the labgrid coordinator (``-o labgrid_coordinator=HOST:PORT``, else
``LG_COORDINATOR``) and connects to its ``NetworkSerialPort`` (RFC 2217 or raw TCP). A place
held by someone else is an error naming the holder; ``-o labgrid_wait=SECONDS`` waits for it.

The place is held by a small keeper process (``python -m project_api.template.remote``) that
acquires it through labgrid's Python client API, reports the serial resource on its stdout and
releases the place when its stdin reaches end of file: when the server closes the transport,
and equally when the server (or the client above it) is killed, since the pipe's write end dies
with its process. SIGINT and SIGTERM release it too.

The serial line is opened lazily on the server's side (:class:`NetworkUartTransport`): our client
reaches the device through the ``serial`` endpoint itself, and a TCP serial server (QEMU,
ser2net) takes one connection at a time; microTVM's client, which reads and writes through the
server, opens it on first use. Timeouts allow for network latency (:data:`NETWORK_TIMEOUTS`).

Flashing a board on another machine: ``-o probe=remote:HOST:PORT`` names a ``pyocd server`` on
the exporter host (the template's pyOCD runner then flashes the board's ``pyocd_target``); or,
with ``-o labgrid_place`` and no probe, labgrid's OpenOCDDriver flashes through the USB debugger
the place exports (labgrid copies the image to the exporter host and runs OpenOCD there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project_api import extras
from project_api.errors import OptionValueError, ServerError
from project_api.server import TransportTimeouts
from project_api.template.options import option
from project_api.template.quoting import tcl_word
from project_api.template.serial_ports import UartTransport
from project_api.template.transport import SerialEndpoint

_LOG = logging.getLogger(__name__)

#: Words every timeout error over such a link carries (see project_api.micro.session).
NETWORK_LINK = "over a network link (serial_url/labgrid)"

#: Session timeouts over a network link: a round trip through a coordinator's network and a
#: serial server adds latency, and an emulated board computes slowly.
NETWORK_TIMEOUTS = TransportTimeouts(session_start_retry_timeout_sec=2.0,
                                     session_start_timeout_sec=30.0,
                                     session_established_timeout_sec=120.0)

#: labgrid's default coordinator port (``labgrid-client -x HOST`` means HOST:20408).
LABGRID_DEFAULT_PORT = 20408

def remote_options(flash: bool = True) -> list[dict[str, Any]]:
    """The options of this module, for a template's ``OPTIONS``: the remote UART
    (``serial_url``, ``labgrid_*``) and, with ``flash``, flashing through a place's debugger or a
    pyOCD server (``probe``; a template whose flash tool cannot, such as ``west flash``, leaves
    that out)."""
    flash_too = ["open_transport", "flash"] if flash else ["open_transport"]
    opts = [
        option("serial_url", "str", optional=["open_transport"],
               help="pyserial URL of the board's UART (rfc2217://host:port, socket://host:port, "
                    "hwgrep://regex, ...): replaces port discovery; never starts a local QEMU."),
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


def require_labgrid(purpose: str = "-o labgrid_place") -> None:
    """ServerError naming the ``labgrid`` extra when labgrid's client is not installed."""
    extras.require("labgrid", purpose, error=lambda message: ServerError(message=message))


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


def coordinator_address(values: Mapping[str, Any]) -> str:
    """``-o labgrid_coordinator``, else ``LG_COORDINATOR``; HOST alone means HOST:20408."""
    address = values.get("labgrid_coordinator") or os.environ.get("LG_COORDINATOR")
    if not address:
        raise ServerError(message="labgrid_place needs the coordinator's address: set "
                                  "LG_COORDINATOR=HOST:PORT or pass -o labgrid_coordinator=HOST:PORT")
    return address if ":" in address.rsplit("]", 1)[-1] else f"{address}:{LABGRID_DEFAULT_PORT}"


def serial_url(resource: Mapping[str, Any]) -> str:
    """The pyserial URL of a labgrid ``NetworkSerialPort``'s parameters."""
    host, port = resource.get("host"), resource.get("port")
    if not host or not port:
        raise ServerError(message=f"the place's NetworkSerialPort has no host and port "
                                  f"({dict(resource)}); check the exporter's configuration")
    protocol = resource.get("protocol", "rfc2217")
    if protocol == "rfc2217":
        # As labgrid's SerialDriver: ser2net in front of a line without modem control (a pty,
        # many USB UARTs) does not answer SET_CONTROL, and the network may be slow.
        return f"rfc2217://{host}:{port}?ign_set_control&timeout=10"
    if protocol == "raw":
        return f"socket://{host}:{port}"
    raise ServerError(message=f"the place's NetworkSerialPort speaks {protocol!r}; want "
                              "rfc2217 or raw")


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


@dataclass
class PlaceKeeper:
    """A running keeper process holding labgrid place ``place``; :meth:`close` releases it."""

    place: str
    coordinator: str
    resource: dict[str, Any] | None  #: its NetworkSerialPort's parameters, if it has one
    proc: subprocess.Popen | None = field(repr=False, default=None)

    @property
    def url(self) -> str:
        if self.resource is None:
            raise ServerError(message=f"labgrid place {self.place} has no NetworkSerialPort "
                                      f"resource; add one with 'labgrid-client -p {self.place} "
                                      "add-match EXPORTER/GROUP/NetworkSerialPort'")
        return serial_url(self.resource)

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            _LOG.warning("labgrid: the keeper of place %s did not exit; killing it", self.place)
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        _LOG.info("labgrid: released place %s", self.place)


def acquire_place(place: str, coordinator: str, wait_sec: float = 0.0,
                  start_timeout_sec: float = 60.0) -> PlaceKeeper:
    """Start a keeper that acquires ``place`` on ``coordinator`` and holds it; ServerError
    with the keeper's one-line reason (held by whom, no such place, no serial port) if not."""
    require_labgrid()
    # NAME=VALUE words: a place or address that starts with '-' stays a value.
    argv = [sys.executable, "-m", "project_api.template.remote", f"--coordinator={coordinator}",
            f"--place={place}", f"--wait={wait_sec}"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=None, text=True)
    try:
        line = _read_line(proc, start_timeout_sec + wait_sec)
        reply = json.loads(line) if line else {"error": f"the labgrid keeper exited with status "
                                                        f"{proc.wait()}"}
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if "error" in reply:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait()
        raise ServerError(message=f"labgrid place {place} on {coordinator}: {reply['error']}")
    _LOG.info("labgrid: acquired place %s (%s)", place, reply["resource"])
    return PlaceKeeper(place, coordinator, reply["resource"], proc)


def _read_line(proc: subprocess.Popen, timeout_sec: float) -> str:
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        if not sel.select(timeout_sec):
            raise ServerError(message=f"labgrid: no answer from the coordinator within "
                                      f"{timeout_sec:g} s")
    return proc.stdout.readline()  # type: ignore[union-attr]


@dataclass
class RemoteLink:
    """What ``open_transport`` attaches for a remote board, and its reply."""

    transport: NetworkUartTransport
    endpoint: SerialEndpoint
    parts: list[Any]  #: closed after the transport: the endpoint, then the place keeper

    def reply(self) -> dict[str, Any]:
        return {"timeouts": NETWORK_TIMEOUTS, "endpoint": self.endpoint.to_json()}


def open_link(values: Mapping[str, Any], baudrate: int = 115200) -> RemoteLink | None:
    """The link for ``-o serial_url`` or ``-o labgrid_place``, or None when neither is set."""
    url, place = values.get("serial_url"), values.get("labgrid_place")
    if url and place:
        raise ServerError(message="give serial_url or labgrid_place, not both")
    if not (url or place):
        return None
    keeper = None
    if place:
        keeper = acquire_place(place, coordinator_address(values),
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
    _LOG.info("board at %s %s", url, NETWORK_LINK)
    endpoint = SerialEndpoint(str(url), baudrate)
    parts: list[Any] = [endpoint] + ([keeper] if keeper else [])
    return RemoteLink(NetworkUartTransport(str(url), baudrate), endpoint, parts)


def open_remote(handler: Any, values: Mapping[str, Any], baudrate: int) -> dict[str, Any] | None:
    """Attach the board ``-o serial_url`` or ``-o labgrid_place`` names to ``handler`` (a
    TransportMixin): the ``open_transport`` reply, or None when neither option is set."""
    link = open_link(values, baudrate)
    if link is None:
        return None
    handler.close_transport()
    handler.attach(link.transport, *link.parts)
    return link.reply()


# --- flashing through labgrid's OpenOCD driver ------------------------------------------------

#: What labgrid's OpenOCDDriver runs on the exporter host (``{filename}``: the image it copied).
LABGRID_OPENOCD_COMMANDS = ["init", "program {filename} verify reset", "exit"]


def flash_with_labgrid(values: Mapping[str, Any], image: Path, board: Mapping[str, Any]) -> bool:
    """Flash ``image`` to ``-o labgrid_place``'s board through labgrid's OpenOCDDriver, bound to
    the place's USB debugger (an exported ``USBDebugger``: labgrid copies the image to the
    exporter host and runs OpenOCD there over SSH). False when no place is given or
    ``-o probe`` names a pyOCD remote probe instead (then the template's runner flashes)."""
    if not values.get("labgrid_place") or values.get("probe"):
        return False
    runner = values.get("flash_runner")
    if runner not in (None, "openocd"):
        raise ServerError(message=f"flash_runner={runner} cannot flash a labgrid place; use "
                                  "flash_runner=openocd (labgrid's OpenOCD driver) or -o "
                                  "probe=remote:HOST:PORT (a 'pyocd server')")
    target_cfg = board.get("openocd_target")
    if not target_cfg:
        raise ServerError(message=f"board {board.get('name')} has no openocd_target for "
                                  "labgrid's OpenOCD driver; use -o probe=remote:HOST:PORT")
    from project_api.template.flash import check_arm_elf

    check_arm_elf(Path(image))
    place, coordinator = str(values["labgrid_place"]), coordinator_address(values)
    keeper = acquire_place(place, coordinator, float(values.get("labgrid_wait") or 0))
    try:
        os.environ["LG_COORDINATOR"] = coordinator  # where labgrid's RemotePlace looks
        script = Path(image).parent / "labgrid-openocd.cfg"
        script.write_text(f"source [find {tcl_word(str(target_cfg), 'openocd_target')}]\n")
        _labgrid_openocd_load(place, Path(image), script)
    finally:
        keeper.close()
    return True


def _labgrid_openocd_load(place: str, image: Path, script: Path) -> None:
    from labgrid import Target
    from labgrid.binding import BindingError
    from labgrid.driver import OpenOCDDriver
    from labgrid.exceptions import NoSupplierFoundError
    from labgrid.resource.remote import RemotePlace, RemotePlaceManager

    manager = RemotePlaceManager.get()  # one coordinator session per process, kept by labgrid
    if manager.session is not None:  # it has not run since: take the place updates first
        manager.loop.run_until_complete(manager.session.sync_with_coordinator())
    target = Target(place)
    try:
        RemotePlace(target, name=place)
        try:
            driver = OpenOCDDriver(target, name=None, interface_config="stlink.cfg",
                                   config=[str(script)], load_commands=LABGRID_OPENOCD_COMMANDS)
        except (NoSupplierFoundError, BindingError):
            raise ServerError(message=f"labgrid place {place} exports no USB debugger "
                                      "(USBDebugger) for OpenOCD; use -o probe=remote:HOST:PORT "
                                      "with a 'pyocd server' on the exporter host") from None
        target.activate(driver)
        _LOG.info("labgrid: OpenOCD on %s's debugger: %s", place, image)
        driver.load(str(image))
    except ServerError:
        raise
    except Exception as exc:  # labgrid's ExecutionError, SSH failures: one line
        raise ServerError(message=f"flash through labgrid place {place} failed: {exc}") from None
    finally:
        target.cleanup()


# --- the coordinator's places ----------------------------------------------------------------


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


# --- the keeper process ------------------------------------------------------------------------


def _place_error(session: Any, place: str) -> str | None:
    """Why ``place`` cannot be acquired now (None: it is free)."""
    known = session.places.get(place)
    if known is None:
        listed = ", ".join(sorted(session.places)) or "none"
        return f"no such place (places: {listed}); create it with 'labgrid-client -p {place} create'"
    if known.acquired:
        return f"held by {known.acquired}"
    return None


def _keep(coordinator: str, place: str, wait_sec: float) -> int:
    """Acquire, report the serial resource as one JSON line, hold until stdin closes, release."""
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
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return _keep(args.coordinator, args.place, args.wait)


if __name__ == "__main__":
    sys.exit(main())
