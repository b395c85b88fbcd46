"""A board farm on this machine for the remote-board tests and bench/farm.py: QEMU STM32 boards
serving their UARTs on loopback TCP ports, ser2net giving one of them an RFC 2217 front, and a
labgrid coordinator and exporter publishing them as NetworkSerialPort resources of places.

Everything listens on 127.0.0.1 only, on ports the kernel picked free, and :meth:`Farm.close`
stops every process it started (QEMUs die with this process too: PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from project_api.template.link import DeviceProcess
from project_api.template.qemu import start_qemu

BIN = Path(sys.executable).parent


def ser2net_path() -> str | None:
    """ser2net's path (Debian puts it in /usr/sbin, which a user's PATH may lack)."""
    return shutil.which("ser2net") or ("/usr/sbin/ser2net" if Path("/usr/sbin/ser2net").is_file()
                                       else None)


def require_farm_tools() -> None:
    """ser2net and labgrid's programs; skipped (or, under CI=true, failed) when missing."""
    from conftest import missing

    if ser2net_path() is None:
        missing("'ser2net' is not installed; run 'make setup' (apt-get install ser2net)")
    for tool in ("labgrid-coordinator", "labgrid-exporter", "labgrid-client"):
        if not (BIN / tool).is_file():
            missing(f"'{tool}' is not installed; run 'make setup' (pip install labgrid)")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: DeviceProcess, what: str, timeout_sec: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.poll()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} does not listen on 127.0.0.1:{port} after {timeout_sec:g} s")


def labgrid_client(coordinator: str, *args: str, env: dict[str, str] | None = None,
                   check: bool = True) -> subprocess.CompletedProcess:
    """``labgrid-client -x COORDINATOR ARGS...`` (the CLI sets places up; the template uses the
    Python API)."""
    return subprocess.run([str(BIN / "labgrid-client"), "-x", coordinator, *args],
                          capture_output=True, text=True, timeout=60, check=check,
                          env={**os.environ, **(env or {})})


class Farm:
    """``boards`` QEMU boards running ``elf``; board i is place ``<prefix>-i``."""

    def __init__(self, root: Path, elf: Path, boards: int = 3, prefix: str = "farm",
                 rfc2217: bool = True, labgrid: bool = True, debugger: bool = False) -> None:
        Path(root).mkdir(parents=True, exist_ok=True)
        # A fresh folder: the coordinator keeps its places in places.yaml in its working folder.
        self.root = Path(tempfile.mkdtemp(prefix="farm-", dir=root))
        self.elf = Path(elf)
        self.prefix = prefix
        self.qemus: list[DeviceProcess | None] = []
        self.ports: list[int] = []
        self.others: list[DeviceProcess] = []
        self.rfc2217_port: int | None = None
        self.pty: str | None = None
        self.coordinator: str | None = None
        self.places = [f"{prefix}-{i}" for i in range(boards)]
        #: With ``debugger``: place ``dbg-0`` holds a NetworkUSBDebugger (an ST-LINK as a
        #: labgrid exporter publishes it; nothing is plugged in, so only its record exists).
        self.debugger = debugger
        try:
            for i in range(boards):
                self._start_board(i, pty=rfc2217 and i == 0)
            if rfc2217:
                self._start_ser2net()
            if labgrid:
                self._start_labgrid()
        except BaseException:
            self.close()
            raise

    # --- boards ----------------------------------------------------------------------------

    def _start_board(self, i: int, pty: bool = False) -> None:
        """Board i's UART on a loopback TCP port, or (``pty``) on a pseudo-terminal that
        ser2net serves, as it would a USB serial port (RFC 2217 sets a tty's baud rate)."""
        port = 0 if pty else free_port()
        log = self.root / f"qemu-{i}.log"
        qemu = start_qemu(
            ["qemu-system-arm", "-M", "netduinoplus2", "-nographic", "-monitor", "none",
             "-icount", "shift=0", "-semihosting-config", "enable=on,target=native",
             "-kernel", str(self.elf), "-serial",
             "pty" if pty else f"tcp:127.0.0.1:{port},server=on,wait=off,nodelay=on"],
            cwd=self.root, log_path=log)
        self.qemus.append(qemu)
        self.ports.append(port)
        if not pty:
            wait_listening(port, qemu, f"QEMU board {i}")
            return
        deadline = time.monotonic() + 30
        while not (found := re.search(r"redirected to (/dev/pts/\d+)", log.read_text())):
            if qemu.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"QEMU board {i} named no pty: {log.read_text()[-500:]}")
            time.sleep(0.05)
        self.pty = found.group(1)

    def url(self, i: int) -> str:
        """Board i's raw TCP serial URL (not board 0 with ``rfc2217``: it is on a pty)."""
        assert self.ports[i], "board 0 is behind ser2net: use rfc2217_url"
        return f"socket://127.0.0.1:{self.ports[i]}"

    def kill_board(self, i: int) -> None:
        """Stop board i's QEMU at once (a board that dies mid-run)."""
        qemu = self.qemus[i]
        if qemu is not None:
            qemu.close()

    # --- ser2net: an RFC 2217 accepter in front of board 0's pty -------------------------------

    def _start_ser2net(self) -> None:
        ser2net = ser2net_path()
        if ser2net is None:
            raise RuntimeError("ser2net is not installed; apt-get install ser2net")
        self.rfc2217_port = free_port()
        config = self.root / "ser2net.yaml"
        config.write_text(
            "%YAML 1.1\n---\n"
            "connection: &board0\n"
            f"  accepter: telnet(rfc2217),tcp,127.0.0.1,{self.rfc2217_port}\n"
            f"  connector: serialdev,{self.pty},115200n81,local\n"
            "  options:\n"
            "    kickolduser: true\n"
            # Forward at once: waiting for more characters only adds latency to RPC replies.
            "    chardelay: false\n")
        proc = DeviceProcess([ser2net, "-n", "-c", str(config), "-P",
                              str(self.root / "ser2net.pid")], cwd=self.root,
                             stdout=open(self.root / "ser2net.log", "wb"),
                             stderr=subprocess.STDOUT)
        self.others.append(proc)
        wait_listening(self.rfc2217_port, proc, "ser2net")

    @property
    def rfc2217_url(self) -> str:
        return f"rfc2217://127.0.0.1:{self.rfc2217_port}"

    # --- labgrid -------------------------------------------------------------------------------

    def _start_labgrid(self) -> None:
        port = free_port()
        self.coordinator = f"127.0.0.1:{port}"
        log = open(self.root / "coordinator.log", "wb")
        coordinator = DeviceProcess([str(BIN / "labgrid-coordinator"), "-l", self.coordinator],
                                    cwd=self.root, stdout=log, stderr=subprocess.STDOUT,
                                    stop_wait_sec=5.0)
        self.others.append(coordinator)
        wait_listening(port, coordinator, "labgrid-coordinator")
        groups: dict[str, Any] = {}
        for i in range(len(self.ports)):
            # Board 0 through ser2net's RFC 2217 accepter; the others raw TCP.
            rfc = i == 0 and self.rfc2217_port is not None
            groups[f"board{i}"] = {"NetworkSerialPort": {
                "host": "127.0.0.1", "port": self.rfc2217_port if rfc else self.ports[i],
                "speed": 115200, "protocol": "rfc2217" if rfc else "raw"}}
        if self.debugger:
            groups["debugger0"] = {"NetworkUSBDebugger": {
                "host": "127.0.0.1", "busnum": 1, "devnum": 7, "path": "1-1.4",
                "vendor_id": 0x0483, "model_id": 0x374B}}
        config = self.root / "exporter.yaml"
        config.write_text(yaml.safe_dump(groups))
        exporter = DeviceProcess(
            [str(BIN / "labgrid-exporter"), "-c", self.coordinator, "-n", "farm", "--hostname",
             "127.0.0.1", str(config)], cwd=self.root,
            stdout=open(self.root / "exporter.log", "wb"), stderr=subprocess.STDOUT,
            stop_wait_sec=5.0)
        self.others.append(exporter)
        deadline = time.monotonic() + 60
        while True:
            out = labgrid_client(self.coordinator, "resources", check=False).stdout
            if all(f"farm/board{i}/NetworkSerialPort" in out for i in range(len(self.ports))) \
                    and (not self.debugger or "farm/debugger0/NetworkUSBDebugger" in out):
                break
            if exporter.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the exporter published no resources: {out!r}; log: "
                                   f"{(self.root / 'exporter.log').read_text()[-2000:]}")
            time.sleep(0.2)
        for i, place in enumerate(self.places):
            labgrid_client(self.coordinator, "-p", place, "create")
            labgrid_client(self.coordinator, "-p", place, "add-match",
                           f"farm/board{i}/NetworkSerialPort")
        if self.debugger:
            labgrid_client(self.coordinator, "-p", "dbg-0", "create")
            labgrid_client(self.coordinator, "-p", "dbg-0", "add-match",
                           "farm/debugger0/NetworkUSBDebugger")

    def holder(self, place: str) -> str | None:
        """Who holds ``place`` ("host/user"), or None, as the coordinator says."""
        assert self.coordinator is not None
        out = labgrid_client(self.coordinator, "-p", place, "show").stdout
        for line in out.splitlines():
            key, _, value = line.strip().partition(":")
            if key == "acquired":
                value = value.strip()
                return None if value in ("", "None") else value
        raise AssertionError(f"no 'acquired' line in {out!r}")

    # --- teardown ------------------------------------------------------------------------------

    def processes(self) -> list[DeviceProcess]:
        return [p for p in (*self.qemus, *self.others) if p is not None]

    def close(self) -> None:
        for proc in reversed(self.others):
            proc.close()
        for qemu in self.qemus:
            if qemu is not None:
                qemu.close()

    def assert_stopped(self) -> None:
        """Every process the farm started is gone (after :meth:`close`)."""
        alive = []
        for proc in self.processes():
            try:
                os.kill(proc.pid, 0)
            except ProcessLookupError:
                continue
            alive.append(f"{Path(proc.argv[0]).name} (pid {proc.pid})")
        assert not alive, f"left running: {', '.join(alive)}"

    def __enter__(self) -> Farm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
