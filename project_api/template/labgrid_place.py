"""labgrid places for template servers: holding one, its serial port, flashing through it.

``-o labgrid_place=NAME`` acquires that place on the labgrid coordinator (``-o
labgrid_coordinator=HOST:PORT``, else ``LG_COORDINATOR``); its ``NetworkSerialPort`` (RFC 2217
or raw TCP, :func:`serial_url`) is the board's UART. A place held by someone else is an error
naming the holder and how to release it; ``-o labgrid_wait=SECONDS`` waits for it. A place whose
project-api holder on this machine is gone (a SIGKILLed keeper) is released and taken
(:mod:`project_api.template.labgrid_owner`).

The place is held by a keeper process (:mod:`project_api.template.labgrid_keeper`) that reports
the serial resource on its stdout and releases the place when its stdin reaches end of file:
when the server closes the transport, and equally when the server (or the client above it) is
killed, since the pipe's write end dies with its process.

Flashing (:func:`flash_with_labgrid`): with ``-o labgrid_place`` and no ``-o probe``, labgrid's
OpenOCDDriver flashes through the USB debugger the place exports (labgrid copies the image to the
exporter host and runs OpenOCD there), with the board's OpenOCD interface and target scripts of
boards.yaml (``openocd_interface``, ``openocd_target``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project_api.errors import OptionValueError, ServerError
from project_api.system import bounded, extras
from project_api.template.quoting import tcl_word

_LOG = logging.getLogger(__name__)

#: labgrid's default coordinator port (``labgrid-client -x HOST`` means HOST:20408).
LABGRID_DEFAULT_PORT = 20408
#: The keeper program (``python -m ...``).
KEEPER_MODULE = "project_api.template.labgrid_keeper"


def require_labgrid(purpose: str = "-o labgrid_place") -> None:
    """ServerError naming the ``labgrid`` extra when labgrid's client is not installed."""
    extras.require("labgrid", purpose, error=lambda message: ServerError(message=message))


def coordinator_address(values: Mapping[str, Any]) -> str:
    """``-o labgrid_coordinator``, else ``LG_COORDINATOR``; HOST alone means HOST:20408."""
    address = values.get("labgrid_coordinator") or os.environ.get("LG_COORDINATOR")
    if not address:
        raise ServerError(message="labgrid_place needs the coordinator's address: set "
                                  "LG_COORDINATOR=HOST:PORT or pass -o labgrid_coordinator=HOST:PORT")
    address = str(address)
    if ":" not in address.rsplit("]", 1)[-1]:
        address = f"{address}:{LABGRID_DEFAULT_PORT}"
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port[-6:]) < 65536 or len(port) > 5:
        raise OptionValueError(f"the labgrid coordinator {bounded.quote(address)} is no "
                               "HOST:PORT (PORT a number 1..65535); give e.g. lab-pc:20408")
    return address


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
    argv = [sys.executable, "-m", KEEPER_MODULE, f"--coordinator={coordinator}",
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
    target_cfg, interface = board.get("openocd_target"), board.get("openocd_interface")
    if not target_cfg or not interface:
        missing = "openocd_target" if not target_cfg else "openocd_interface"
        raise ServerError(message=f"board {board.get('name')} has no {missing} for "
                                  "labgrid's OpenOCD driver; use -o probe=remote:HOST:PORT")
    from project_api.template.flash import check_firmware

    check_firmware(Path(image), board)
    place, coordinator = str(values["labgrid_place"]), coordinator_address(values)
    keeper = acquire_place(place, coordinator, float(values.get("labgrid_wait") or 0))
    try:
        os.environ["LG_COORDINATOR"] = coordinator  # where labgrid's RemotePlace looks
        script = Path(image).parent / "labgrid-openocd.cfg"
        script.write_text(f"source [find {tcl_word(str(target_cfg), 'openocd_target')}]\n")
        _labgrid_openocd_load(place, Path(image), script, str(interface))
    finally:
        keeper.close()
    return True


def _labgrid_openocd_load(place: str, image: Path, script: Path, interface: str) -> None:
    """Load ``image`` with labgrid's OpenOCDDriver on ``place``'s USB debugger (``interface``:
    OpenOCD's script for the probe, as boards.yaml names it; labgrid looks it up under
    ``interface/`` itself)."""
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
            driver = OpenOCDDriver(target, name=None,
                                   interface_config=interface.removeprefix("interface/"),
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
