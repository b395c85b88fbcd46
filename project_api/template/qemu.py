"""QEMU for template servers: a serial line our client reaches directly, and an emulator that
never outlives the server that started it.

A template whose boards include emulated ones (stm32's, Zephyr's QEMU boards) builds the same
firmware as for hardware and runs it under QEMU, whose binary and machine options come from the
board's entry of ``boards.yaml``; ``open_transport`` returns the link :func:`emulator_link`
builds (QEMU started, the server's end of the serial line open, the firmware's ready line
read)::

    line = QemuSerialLine()                              # FIFOs <dir>/uart.in, <dir>/uart.out
    argv = emulator_argv(qemu["binary"], qemu["args"], elf, line)
    return emulator_link(argv, line, cwd=project_dir, log_path=project_dir / "build" / "qemu.log",
                         timeouts=TIMEOUTS, banner=b"ready", package=qemu.get("package"))

The serial line is QEMU's ``pipe`` chardev on two FIFOs, so the ``"fifo"`` endpoint our client
already understands reaches the UART without a JSON-RPC round trip; microTVM's client goes
through ``read_transport``/``write_transport`` on the server's own ends. No byte is lost: QEMU
opens both FIFOs itself (read-write) before the machine runs, the firmware's output waits in
the pipe until someone reads it, and the host's bytes wait until the emulated UART takes them.
Emulated UARTs drop what arrives before the firmware enables the receiver, which is why the
server waits for the firmware's ready line before it replies.

:class:`QemuSocketLine` is the other serial line: QEMU's ``socket`` chardev listening on a unix
socket with ``wait=on``, so QEMU does not run the machine before the server has connected (no
output is lost) and, with no ``mux``, every byte passes unchanged (a muxed chardev takes 0x01 as
its escape character). The socket is made afresh by each line, so a second ``open_transport``
never depends on what the first one removed. Our client has no socket endpoint; a template using
it returns no ``"endpoint"`` and the bytes go through ``read_transport``/``write_transport``.

Lifetime: :func:`start_qemu` runs QEMU through a tiny exec wrapper that asks Linux to kill it
(``PR_SET_PDEATHSIG``) when the server process dies, however it dies (SIGKILL included), and
refuses to start if the server is already gone; the link's
:class:`~project_api.template.link.DeviceProcess` stops it on ``close_transport`` and at exit, and
a later ``open_transport`` starts it afresh from the image.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from project_api.api.fifo import remove_fifo_dir
from project_api.api.server import TransportTimeouts
from project_api.api.transport import FdTransport, Transport
from project_api.errors import IoTimeoutError, ServerError
from project_api.template.link import DeviceProcess, Link
from project_api.template.quoting import qemu_option_value

_LOG = logging.getLogger(__name__)

#: Runs argv[2:] with PR_SET_PDEATHSIG=SIGKILL, unless the parent (argv[1]) is already gone.
_PDEATHSIG_WRAPPER = (
    "import ctypes, os, signal, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:\n"
    "    sys.exit('prctl(PR_SET_PDEATHSIG) failed: errno %d' % ctypes.get_errno())\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('the server that started QEMU is gone')\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def start_qemu(argv: Sequence[str | os.PathLike[str]], *, cwd: Path, log_path: Path,
               stop_wait_sec: float = 2.0, package: str | None = None) -> DeviceProcess:
    """Start QEMU (``argv[0]`` a program name or path) with stdin from /dev/null and its
    stdout/stderr (semihosting output included) in ``log_path``; it dies with this process.
    ``package`` names what installs ``argv[0]`` (boards.yaml), for the message when it is missing.

    Linux delivers the death signal when the *thread* that started QEMU ends: call this from the
    server's main thread (template servers have no other), not from a short-lived worker."""
    program = shutil.which(str(argv[0]))
    if program is None:
        how = (f"e.g. 'apt-get install {package}'" if package
               else f"the package that provides {Path(str(argv[0])).name}")
        raise ServerError(message=f"'{argv[0]}' is not installed (not found on PATH); install "
                                  f"QEMU, {how}")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        wrapped = [sys.executable, "-c", _PDEATHSIG_WRAPPER, str(os.getpid()), program,
                   *map(str, argv[1:])]
        proc = DeviceProcess(wrapped, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                             stderr=log, stop_wait_sec=stop_wait_sec)
    _LOG.info("QEMU: %s (log %s)", " ".join(map(str, argv)), log_path)
    return proc


def log_tail(log_path: Path, lines: int = 5) -> str:
    """The last ``lines`` lines of a QEMU log, joined with ' | ' (empty if there is none)."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


#: Copy requests a client keeps in flight to an emulated microcontroller: one. Its UART
#: receive ring holds one packet (``ProjectType.rx_ring_bytes``) and the receive interrupt
#: drains the emulated UART into it whether or not the firmware keeps up, so a second packet
#: sent while the first is being handled may overflow the ring (bytes lost, the request never
#: answered). The host template's FIFOs lose nothing and keep the client's default.
EMULATED_PIPELINE_DEPTH = 1


class QemuSerialLine:
    """Two FIFOs for QEMU's ``pipe`` chardev: ``<dir>/uart.in`` (host to device) and
    ``<dir>/uart.out`` (device to host), in a fresh temporary folder."""

    def __init__(self, directory: str | os.PathLike[str] | None = None,
                 prefix: str = "project-api-qemu-") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix, dir=directory))
        self.base = self.dir / "uart"
        self.tx_path = self.dir / "uart.in"
        self.rx_path = self.dir / "uart.out"
        os.mkfifo(self.tx_path, 0o600)
        os.mkfifo(self.rx_path, 0o600)
        # Spare ends until QEMU has opened the FIFOs (release_spares): the server's writer can
        # open uart.in, and its reader sees no end of file on uart.out, before QEMU runs.
        self._spare_fds = [os.open(p, os.O_RDWR | os.O_NONBLOCK)
                           for p in (self.tx_path, self.rx_path)]

    def qemu_args(self, chardev_id: str) -> list[str]:
        """``-chardev pipe,...`` defining ``chardev_id``; pass ``-serial chardev:<id>`` too."""
        return ["-chardev", f"pipe,id={chardev_id},path={qemu_option_value(str(self.base))}"]

    def open(self, timeouts: TransportTimeouts | None = None,
             process: DeviceProcess | None = None, log_path: Path | None = None) -> FdTransport:
        """The server's own ends (for clients that ignore the endpoint), not yet opened; QEMU
        need not run yet."""
        return FdTransport.for_fifos(self.rx_path, self.tx_path, timeouts)

    def to_json(self) -> dict[str, Any]:
        """The ``"fifo"`` endpoint for the ``open_transport`` reply; our client removes the
        FIFOs once it has opened them, so nothing stays behind if the server is killed."""
        return {"type": "fifo", "rx_path": str(self.rx_path), "tx_path": str(self.tx_path),
                "remove_after_open": True, "pipeline_depth": EMULATED_PIPELINE_DEPTH}

    def release_spares(self) -> None:
        """Close the spare ends once QEMU holds its own (after the firmware's first output), so
        the host sees end of file and broken pipe when QEMU exits."""
        while self._spare_fds:
            os.close(self._spare_fds.pop())

    def close(self) -> None:
        self.release_spares()
        remove_fifo_dir(self.dir, self.tx_path, self.rx_path)


class QemuSocketLine:
    """A unix socket ``<dir>/uart.sock`` (in a fresh temporary folder) for QEMU's ``socket``
    chardev in server mode; :meth:`connect` is the server's end once QEMU listens."""

    def __init__(self, directory: str | os.PathLike[str] | None = None,
                 prefix: str = "project-api-qemu-") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix, dir=directory))
        self.path = self.dir / "uart.sock"

    def qemu_args(self, chardev_id: str) -> list[str]:
        """``-chardev socket,...`` defining ``chardev_id``; pass ``-serial chardev:<id>`` too."""
        return ["-chardev", f"socket,id={chardev_id},path={qemu_option_value(str(self.path))},"
                            "server=on,wait=on"]

    def connect(self, timeouts: TransportTimeouts | None = None,
                process: DeviceProcess | None = None, timeout_sec: float = 10.0,
                log_path: Path | None = None) -> FdTransport:
        """Connect to QEMU's socket (retrying until it listens); the connection as a transport.

        ServerError when QEMU exits first or does not listen within ``timeout_sec``."""
        deadline = time.monotonic() + timeout_sec
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(self.path))
                break
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
            status = process.poll() if process is not None else None
            if status is not None or time.monotonic() > deadline:
                what = (f"the emulator exited with status {status}" if status is not None
                        else f"the emulator did not listen on {self.path} within "
                             f"{timeout_sec:g} s")
                tail = log_tail(log_path) if log_path is not None else ""
                raise ServerError(message=f"open_transport: {what}"
                                          f"{'; log: ' + tail if tail else ''}")
            time.sleep(0.05)
        fd = sock.detach()
        return FdTransport(fd, fd, timeouts)

    def open(self, timeouts: TransportTimeouts | None = None,
             process: DeviceProcess | None = None, log_path: Path | None = None) -> FdTransport:
        """:meth:`connect`: the server's connection, once QEMU listens."""
        return self.connect(timeouts, process, log_path=log_path)

    def to_json(self) -> None:
        """No endpoint: QEMU takes one connection, the server's, so the bytes go through
        JSON-RPC."""
        return None

    def release_spares(self) -> None:
        """Nothing to release (a socket has no spare ends)."""

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def emulator_argv(binary: str, machine_args: Sequence[str], image: Path,
                  line: QemuSerialLine | QemuSocketLine,
                  gdbserver_port: int | None = None) -> list[str]:
    """QEMU's command line: ``binary`` with the board's ``machine_args``, no monitor, ``image``
    as the kernel, the first serial port on ``line`` and, with ``gdbserver_port``, a GDB server
    that holds the CPU until GDB continues it."""
    argv = [str(binary), *map(str, machine_args), "-monitor", "none", "-kernel", str(image),
            *line.qemu_args("uart"), "-serial", "chardev:uart"]
    if gdbserver_port is not None:
        argv += ["-gdb", f"tcp::{int(gdbserver_port)}", "-S"]
    return argv


def require_image(path: Path) -> Path:
    """``path`` if the firmware image is built and a whole ELF file (:func:`.elf.check_image`),
    else ServerError saying what is wrong and to build it."""
    from project_api.template.elf import check_image

    if not Path(path).is_file():
        raise ServerError(message=f"open_transport: {path} does not exist; run 'project-api "
                                  "build' first")
    check_image(Path(path))
    return Path(path)


def emulator_link(argv: Sequence[str], line: QemuSerialLine | QemuSocketLine, *, cwd: Path,
                  log_path: Path, timeouts: TransportTimeouts, banner: bytes | None,
                  banner_timeout_sec: float = 30.0, package: str | None = None) -> Link:
    """Start QEMU (``argv``, whose serial line is ``line``; ``package`` installs it), open the
    server's end of the line and wait for the firmware's ``banner``: the device link, with
    ``line`` as its endpoint. Whatever fails, nothing is left: QEMU is stopped and the line's
    folder removed."""
    try:
        qemu = start_qemu(argv, cwd=cwd, log_path=log_path, package=package)
    except BaseException:
        line.close()
        raise
    link: Link | None = None
    try:
        link = Link(line.open(timeouts, qemu, log_path), timeouts, line, qemu)
        link.open()
        if banner is not None:
            wait_for_banner(link.transport, banner, banner_timeout_sec, qemu, log_path, line)
    except BaseException:
        if link is not None:
            link.close()
        else:
            qemu.close()
            line.close()
        raise
    return link


def wait_for_banner(transport: Transport, banner: bytes, timeout_sec: float,
                    process: DeviceProcess | None = None,
                    log_path: Path | None = None,
                    line_owner: QemuSerialLine | QemuSocketLine | None = None) -> bytes:
    """Read from ``transport`` until a line containing ``banner`` has arrived; return that line.

    Then ``line_owner``'s spare ends are released. Raises ServerError naming what was seen
    when the emulator exits or ``timeout_sec`` passes.
    Bytes after the banner line are not read (the firmware sends none before the host does).
    """
    seen = b""
    deadline = time.monotonic() + timeout_sec
    while True:
        if banner in seen and seen.endswith(b"\n"):
            line = seen[seen.rfind(b"\n", 0, seen.index(banner)) + 1:]
            _LOG.info("device ready: %s", line.decode(errors="replace").strip())
            if line_owner is not None:
                line_owner.release_spares()
            return line
        left = deadline - time.monotonic()
        status = process.poll() if process is not None else None
        if left <= 0 or status is not None:
            what = (f"the emulator exited with status {status}" if status is not None
                    else f"no ready line within {timeout_sec:g} s")
            tail = log_tail(log_path) if log_path is not None else ""
            raise ServerError(message=f"open_transport: {what} (waiting for {banner!r}; got "
                                      f"{seen[-80:]!r}){'; log: ' + tail if tail else ''}")
        try:
            seen += transport.read(1, min(left, 0.2))
        except IoTimeoutError:
            continue  # poll the process again
