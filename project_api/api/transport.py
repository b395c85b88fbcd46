"""Byte channels to a device: one base class, small backends.

:class:`Transport` is the contract every backend meets (as pyserial's ``SerialBase`` is for
ports): ``read(n, timeout_sec)`` returns 1..n bytes, never 0, and raises :class:`IoTimeoutError`
when nothing came in time or :class:`TransportClosedError` when the channel is gone;
``write(data, timeout_sec)`` writes everything or raises. ``timeout_sec=None`` waits forever and
``0`` does not wait. Reads and writes time out the same way, and say so by raising.

Backends: :class:`ProjectTransport` (through a Project API server, or straight through the
endpoint its ``open_transport`` offers), :class:`FdTransport` (pipes and FIFOs),
:class:`SerialTransport` (pyserial, any ``serial_for_url`` URL) and :class:`LoopTransport`
(in-memory loopback for tests). :class:`TransportLogger` wraps any of them and logs each call
in microTVM's format, with hex dumps; :func:`debug_transport` turns that on at DEBUG level.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import os
import re
import select
import stat
import string
import threading
import time
from typing import Any

from project_api.api.server import TransportTimeouts
from project_api.errors import IoTimeoutError, JSONRPCError, TransportClosedError

__all__ = [
    "FdTransport",
    "IoTimeoutError",
    "LoopTransport",
    "ProjectTransport",
    "SerialTransport",
    "Timeout",
    "Transport",
    "TransportClosedError",
    "TransportLogger",
    "TransportTimeouts",
    "debug_transport",
    "debug_transport_timeouts",
]

_LOG = logging.getLogger(__name__)

# Reads larger than a pipe buffer gain nothing and make os.read mmap a buffer per call.
_MAX_READ_BYTES = 65536


def debug_transport_timeouts(session_start_retry_timeout_sec: float = 0) -> TransportTimeouts:
    """Timeouts for debugging: retry as given, otherwise wait forever."""
    return TransportTimeouts(
        session_start_retry_timeout_sec=session_start_retry_timeout_sec,
        session_start_timeout_sec=0,
        session_established_timeout_sec=0,
    )


class Timeout:
    """A deadline on ``time.monotonic``: ``None`` never expires, ``0`` is already expired.

    Every I/O loop makes one at its start and passes :meth:`time_left` to ``select``.
    """

    def __init__(self, duration: float | None):
        self.restart(duration)

    def restart(self, duration: float | None) -> None:
        """Start counting ``duration`` seconds again from now."""
        if duration is not None and duration < 0:
            raise ValueError(f"timeout must be None or >= 0 seconds; got {duration}")
        self.duration = duration
        self.is_infinite = duration is None
        self.is_non_blocking = duration == 0
        self.target_time = None if duration is None else time.monotonic() + duration

    def expired(self) -> bool:
        """True once the deadline has passed (never for an infinite timeout)."""
        return self.target_time is not None and time.monotonic() >= self.target_time

    def time_left(self) -> float | None:
        """Seconds to the deadline, at least 0; None when infinite."""
        if self.target_time is None:
            return None
        return max(0.0, self.target_time - time.monotonic())


class Transport(abc.ABC):
    """A byte channel to a device. Subclasses implement the five methods below.

    Use as a context manager: entering opens, leaving closes.
    """

    def __enter__(self) -> Transport:
        self.open()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @abc.abstractmethod
    def timeouts(self) -> TransportTimeouts:
        """The session timeouts this channel needs (valid after :meth:`open`)."""

    @abc.abstractmethod
    def open(self) -> None:
        """Open the channel."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the channel; closing a closed channel does nothing."""

    @abc.abstractmethod
    def read(self, n: int, timeout_sec: float | None) -> bytes:
        """Return 1..``n`` bytes, waiting at most ``timeout_sec`` for the first one.

        Raises :class:`IoTimeoutError` if none arrived in time and :class:`TransportClosedError`
        if the channel is gone.
        """

    @abc.abstractmethod
    def write(self, data: bytes, timeout_sec: float | None) -> None:
        """Write all of ``data`` within ``timeout_sec``, or raise :class:`IoTimeoutError`
        (:class:`TransportClosedError` if the channel is gone)."""


# --- logging wrapper -------------------------------------------------------------------------

_PRINTABLE = frozenset((string.digits + string.ascii_letters + string.punctuation).encode("ascii"))


def _hex_lines(data: bytes) -> list[str]:
    """microTVM's dump: ``%04x`` offset, 16 hex bytes padded to 47 chars, two spaces, ascii."""
    lines = []
    for offset in range(0, max(len(data), 1), 16):
        chunk = data[offset : offset + 16]
        hex_part = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if b in _PRINTABLE else "." for b in chunk)
        lines.append(f"{offset:04x}  {hex_part:<47}  {text}" if data else "")
    if len(lines) == 1 and data:
        lines[0] = lines[0][6:]
    return lines


def _timeout_text(timeout_sec: float | None) -> str:
    return " None " if timeout_sec is None else f"{timeout_sec:5.2f}s"


class WrappedTransport(Transport):
    """A transport that passes everything to ``child``: subclass it to observe or alter the
    bytes (override ``read``/``write``). ``is_open`` is true between :meth:`open` and
    :meth:`close`, so a :class:`~project_api.micro.Session` over an already opened wrapper
    leaves it open and sessions can come and go over one device link."""

    def __init__(self, child: Transport) -> None:
        self.child = child
        self.is_open = False

    def timeouts(self) -> TransportTimeouts:
        return self.child.timeouts()

    def open(self) -> None:
        self.child.open()
        self.is_open = True

    def close(self) -> None:
        self.is_open = False
        self.child.close()

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        return self.child.read(n, timeout_sec)

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        self.child.write(data, timeout_sec)


class TransportLogger(Transport):
    """Wraps ``child`` and logs every call to ``logger`` (default: this module's) at ``level``."""

    def __init__(
        self,
        name: str,
        child: Transport,
        logger: logging.Logger | None = None,
        level: int = logging.INFO,
    ):
        self.name = name
        self.child = child
        self.logger = logger if logger is not None else _LOG
        self.level = level

    def timeouts(self) -> TransportTimeouts:
        return self.child.timeouts()

    def open(self) -> None:
        self.logger.log(self.level, "%s: opening transport", self.name)
        self.child.open()

    def close(self) -> None:
        self.logger.log(self.level, "%s: closing transport", self.name)
        return self.child.close()

    def _log_dump(self, head: str, args: tuple, data: bytes) -> None:
        """Log ``head % (name, *args)`` then the hex dump: on the same line if it is one line."""
        lines = _hex_lines(data)
        sep = "\n" if len(lines) > 1 else " "
        self.logger.log(self.level, head + sep + "%s", self.name, *args, "\n".join(lines))

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        timeout_str = _timeout_text(timeout_sec)
        try:
            data = self.child.read(n, timeout_sec)
        except IoTimeoutError:
            self.logger.log(
                self.level,
                "%s: read {%s} %4d B -> [IoTimeoutError %s]",
                self.name,
                timeout_str,
                n,
                timeout_str,
            )
            raise
        except Exception as err:
            self.logger.log(
                self.level,
                "%s: read {%s} %4d B -> [err: %s]",
                self.name,
                timeout_str,
                n,
                type(err).__name__,
            )
            raise
        self._log_dump("%s: read {%s} %4d B -> [%3d B]:", (timeout_str, n, len(data)), data)
        return data

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        timeout_str = _timeout_text(timeout_sec)
        try:
            self.child.write(data, timeout_sec)
        except IoTimeoutError:
            self.logger.log(
                self.level,
                "%s: write {%s}       <- [%3d B]: [IoTimeoutError %s]",
                self.name,
                timeout_str,
                len(data),
                timeout_str,
            )
            raise
        except Exception as err:
            self.logger.log(
                self.level,
                "%s: write {%s}       <- [%3d B]: [err: %s]",
                self.name,
                timeout_str,
                len(data),
                type(err).__name__,
            )
            raise
        self._log_dump("%s: write {%s}        <- [%3d B]:", (timeout_str, len(data)), data)


def debug_transport(transport: Transport, name: str = "transport") -> Transport:
    """``transport`` wrapped so each call is logged, with hex dumps, at DEBUG level."""
    return TransportLogger(name, transport, level=logging.DEBUG)


# --- backends --------------------------------------------------------------------------------


class FdTransport(Transport):
    """Raw file descriptors: a pipe pair, two FIFOs, or one descriptor for both directions.

    The transport owns the fds once opened and closes them in :meth:`close`. ``read_path`` /
    ``write_path`` variants (:meth:`for_fifos`) open the FIFOs in :meth:`open`; with
    ``remove_after_open`` they then unlink both FIFOs and remove their folder when it is left
    empty, so nothing stays behind even if the server that made them is killed.
    """

    def __init__(
        self,
        read_fd: int | None,
        write_fd: int | None,
        timeouts: TransportTimeouts | None = None,
        *,
        read_path: str | os.PathLike[str] | None = None,
        write_path: str | os.PathLike[str] | None = None,
        remove_after_open: bool = False,
    ):
        self._remove_after_open = remove_after_open
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._read_path = read_path
        self._write_path = write_path
        self._timeouts = timeouts if timeouts is not None else debug_transport_timeouts()
        self._open = read_fd is not None and write_fd is not None
        if self._open:
            self._prepare()

    @classmethod
    def for_fifos(
        cls,
        rx_path: str | os.PathLike[str],
        tx_path: str | os.PathLike[str],
        timeouts: TransportTimeouts | None = None,
        *,
        remove_after_open: bool = False,
    ) -> FdTransport:
        """A transport reading device output from FIFO ``rx_path`` and writing to ``tx_path``."""
        return cls(None, None, timeouts, read_path=rx_path, write_path=tx_path,
                   remove_after_open=remove_after_open)

    def _prepare(self) -> None:
        assert self._read_fd is not None and self._write_fd is not None
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)

    def timeouts(self) -> TransportTimeouts:
        return self._timeouts

    def open(self) -> None:
        if self._open:
            return
        if self._read_path is None or self._write_path is None:
            raise TransportClosedError()
        # Reader first, without blocking; the device (or a FifoEndpoint) holds the other ends.
        try:
            self._read_fd = os.open(self._read_path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise TransportClosedError(
                data={"reason": f"cannot open {self._read_path}: {exc}"}
            ) from exc
        try:
            self._write_fd = os.open(self._write_path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:  # ENXIO: nobody reads the device side
            os.close(self._read_fd)
            self._read_fd = None
            raise TransportClosedError(
                data={"reason": f"cannot open {self._write_path}: {exc}"}
            ) from exc
        self._open = True
        self._prepare()
        if self._remove_after_open:
            _remove_fifos(self._read_path, self._write_path)

    def close(self) -> None:
        if not self._open:
            return
        self._open = False
        fds = {self._read_fd, self._write_fd}
        self._read_fd = self._write_fd = None
        for fd in fds:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        if not self._open or self._read_fd is None:
            raise TransportClosedError()
        fd = self._read_fd
        try:
            data = os.read(fd, min(n, _MAX_READ_BYTES))
        except BlockingIOError:
            timeout = Timeout(timeout_sec)
            while True:
                ready, _, _ = select.select([fd], [], [], timeout.time_left())
                if not ready:
                    raise IoTimeoutError() from None
                try:
                    data = os.read(fd, min(n, _MAX_READ_BYTES))
                    break
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise TransportClosedError() from exc
        except OSError as exc:
            raise TransportClosedError() from exc
        if not data:
            raise TransportClosedError()
        return data

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        if not self._open or self._write_fd is None:
            raise TransportClosedError()
        fd = self._write_fd
        view = memoryview(data)
        timeout: Timeout | None = None
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                if timeout is None:
                    timeout = Timeout(timeout_sec)
                _, ready, _ = select.select([], [fd], [], timeout.time_left())
                if not ready:
                    raise IoTimeoutError() from None
                continue
            except OSError as exc:
                raise TransportClosedError() from exc
            if written == 0:
                raise TransportClosedError()
            view = view[written:]


def _remove_fifos(*paths: str | os.PathLike[str]) -> None:
    """Unlink the FIFOs among ``paths`` (open ends keep working) and rmdir their folders if empty."""
    folders = set()
    for path in paths:
        try:
            if stat.S_ISFIFO(os.lstat(path).st_mode):
                os.unlink(path)
                folders.add(os.path.dirname(os.path.abspath(path)))
        except OSError as exc:
            _LOG.debug("could not remove FIFO %s: %s", path, exc)
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError as exc:  # not empty, or not ours to remove: leave it
            _LOG.debug("left FIFO folder %s: %s", folder, exc)


class LoopTransport(Transport):
    """An in-memory loopback: what is written is read back. Thread-safe; for tests."""

    def __init__(
        self, timeouts: TransportTimeouts | None = None, capacity_bytes: int | None = None
    ):
        self._timeouts = timeouts if timeouts is not None else debug_transport_timeouts()
        self._capacity = capacity_bytes
        self._buf = bytearray()
        self._cond = threading.Condition()
        self._open = False

    def timeouts(self) -> TransportTimeouts:
        return self._timeouts

    def open(self) -> None:
        with self._cond:
            self._open = True
            self._buf.clear()

    def close(self) -> None:
        with self._cond:
            self._open = False
            self._cond.notify_all()

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        timeout = Timeout(timeout_sec)
        with self._cond:
            while True:
                if not self._open:
                    raise TransportClosedError()
                if self._buf:
                    data = bytes(self._buf[:n])
                    del self._buf[:n]
                    self._cond.notify_all()
                    return data
                if timeout.expired():
                    raise IoTimeoutError()
                self._cond.wait(timeout.time_left())

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        timeout = Timeout(timeout_sec)
        view = memoryview(data)
        with self._cond:
            while view:
                if not self._open:
                    raise TransportClosedError()
                room = len(view) if self._capacity is None else self._capacity - len(self._buf)
                if room > 0:
                    self._buf += view[:room]
                    view = view[room:]
                    self._cond.notify_all()
                    continue
                if timeout.expired():
                    raise IoTimeoutError()
                self._cond.wait(timeout.time_left())


def open_failure(port: str, exc: BaseException) -> str:
    """Why pyserial could not open ``port`` and what to check, in one line (pyserial wraps the
    socket's or the device's OSError in its own message; the OSError says it best)."""
    cause = exc.__context__ if isinstance(exc.__context__, OSError) else None
    if isinstance(exc, OSError) and cause is None and exc.errno is not None:
        cause = exc
    network = "://" in port
    check = ("check the host and port, and that the serial server (ser2net, QEMU, a labgrid "
             "exporter) runs there" if network else
             "check the board is connected and no other program holds the port")
    if isinstance(cause, ConnectionRefusedError):
        return f"connection refused to {port} (nothing listens there); {check}"
    if isinstance(cause, PermissionError):
        return (f"cannot open {port}: permission denied; add yourself to the port's group "
                "(e.g. 'sudo usermod -aG dialout $USER', then log in again)")
    if cause is not None and cause.strerror:
        return f"cannot open {port}: {cause.strerror.lower()}; {check}"
    text = " ".join(str(exc).split())
    text = re.sub(r"^could not open port \S+: ", "", text, flags=re.I)
    return f"cannot open {port}: {text or type(exc).__name__}; {check}"


#: The pyserial URL schemes a user may give, beside a device path (``/dev/ttyACM0``, ``COM3``).
SERIAL_SCHEMES = ("socket://", "rfc2217://", "loop://", "spy:// (without file=)")

#: ``hwgrep://`` scans every port of the machine; it is taken only when this variable is 1.
HWGREP_ENV = "PROJECT_API_ALLOW_HWGREP"


def serial_url_refusal(url: str) -> str | None:
    """Why ``url`` is not a serial URL a user may give (None when it is one).

    Allowed: a device path, ``socket://``, ``rfc2217://``, ``loop://`` and ``spy://`` that logs
    to stderr. Refused: every other pyserial handler, ``spy://`` with ``file=`` (it creates or
    truncates that file) and ``hwgrep://`` unless ``$PROJECT_API_ALLOW_HWGREP=1``.
    """
    accepted = ("accepted: a device path (/dev/ttyACM0, COM3), " + ", ".join(SERIAL_SCHEMES)
                + f", hwgrep:// with ${HWGREP_ENV}=1")
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if "\0" in url or "\n" in url:
        return f"serial URL {_quote(url)} holds a NUL or newline; {accepted}"
    if match is None:
        return None  # a device path
    scheme = match.group(1).lower()
    if scheme in ("socket", "rfc2217", "loop"):
        return None
    if scheme == "spy":
        if re.search(r"[?&]file=", url):
            return (f"serial URL {_quote(url)}: spy:// with file= would write that file; "
                    f"drop file= (spy:// then logs to stderr); {accepted}")
        return None
    if scheme == "hwgrep" and os.environ.get(HWGREP_ENV) == "1":
        return None
    return f"serial URL scheme {scheme}:// is not accepted ({_quote(url)}); {accepted}"


def _quote(value: str, limit: int = 200) -> str:
    return repr(value[:limit]) + (f"... ({len(value)} characters)" if len(value) > limit else "")


class SerialTransport(Transport):
    """A serial port through pyserial; ``port`` is a device path or an allowed URL
    (:func:`serial_url_refusal`)."""

    def __init__(
        self,
        port: str,
        baudrate: int = 115200,
        timeouts: TransportTimeouts | None = None,
        **serial_kwargs: Any,
    ):
        self.port = port
        self.baudrate = baudrate
        self._timeouts = timeouts if timeouts is not None else debug_transport_timeouts()
        self._serial_kwargs = serial_kwargs
        self._ser: Any = None
        self._unsupported: set[str] = set()

    def timeouts(self) -> TransportTimeouts:
        return self._timeouts

    def open(self) -> None:
        import serial

        refusal = serial_url_refusal(self.port)
        if refusal:
            raise TransportClosedError(data={"reason": refusal})
        try:
            self._ser = serial.serial_for_url(
                self.port, baudrate=self.baudrate, **self._serial_kwargs
            )
        except (serial.SerialException, ValueError) as exc:
            raise TransportClosedError(data={"reason": open_failure(self.port, exc)}) from exc
        sock = getattr(self._ser, "_socket", None)  # socket:// and rfc2217://
        if sock is not None:
            # Frames are small and answered at once: Nagle's wait for an ACK would add a delayed
            # ACK's 40 ms to every request.
            import socket

            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        if self._ser is not None:
            ser, self._ser = self._ser, None
            ser.close()

    def _set(self, attr: str, value: float | None) -> None:
        if attr in self._unsupported or getattr(self._ser, attr) == value:
            return
        if attr == "timeout" and type(self._ser).__module__ == "serial.rfc2217":
            # Upstream pyserial's rfc2217 Serial renegotiates baud rate, data bits, parity and
            # stop bits with the server on every timeout change (pyserial-labgrid does not);
            # its read() only consults _timeout, so set that alone.
            self._ser._timeout = value
            return
        try:
            setattr(self._ser, attr, value)
        except NotImplementedError:  # rfc2217:// has no write_timeout: its writes go to a socket
            _LOG.debug("%s: %s is not supported; writes wait as the socket does", self.port, attr)
            self._unsupported.add(attr)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        import serial

        if self._ser is None:
            raise TransportClosedError()
        try:
            self._set("timeout", timeout_sec)
            data = self._ser.read(1)
            if not data:
                raise IoTimeoutError()
            waiting = min(n - 1, self._ser.in_waiting)
            if waiting > 0:
                self._set("timeout", 0)
                data += self._ser.read(waiting)
        except serial.SerialException as exc:
            raise TransportClosedError() from exc
        return data

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        import serial

        if self._ser is None:
            raise TransportClosedError()
        try:
            self._set("write_timeout", timeout_sec)
            self._ser.write(data)
            self._ser.flush()
        except serial.SerialTimeoutException as exc:
            raise IoTimeoutError() from exc
        except serial.SerialException as exc:
            raise TransportClosedError() from exc


class ProjectTransport(Transport):
    """The device channel of a generated project, through its Project API server.

    :meth:`open` calls ``open_transport(options)``. When the reply offers an ``"endpoint"``
    (``{"type": "fifo", ...}`` or ``{"type": "serial", ...}``), reads and writes go straight
    through it; otherwise each is a ``read_transport`` / ``write_transport`` call. :meth:`close`
    sends ``close_transport`` and, like microTVM, shuts the client down unless
    ``shutdown_client=False``. ``use_endpoint=False`` forces the JSON-RPC path.

    ``pipeline_writes=True`` (JSON-RPC path only) sends each ``write_transport`` without waiting
    for its reply, which the next call collects: a write-then-read costs one pipe round trip
    instead of two, but a failed write is reported by the following read, write or close
    instead of by the write itself.
    """

    def __init__(
        self,
        api_client: Any,
        options: dict[str, Any] | None = None,
        *,
        use_endpoint: bool = True,
        shutdown_client: bool = True,
        pipeline_writes: bool = False,
    ):
        self._client = api_client
        self._options = options if options is not None else {}
        self._use_endpoint = use_endpoint
        self._shutdown_client = shutdown_client
        self._pipeline_writes = pipeline_writes
        self._timeouts: TransportTimeouts | None = None
        self._direct: Transport | None = None
        self.endpoint: dict[str, Any] | None = None

    def timeouts(self) -> TransportTimeouts:
        if self._timeouts is None:
            raise TransportClosedError()
        return self._timeouts

    def open(self) -> None:
        reply = self._client.open_transport(self._options)
        self._timeouts = TransportTimeouts(**reply["timeouts"])
        endpoint = reply.get("endpoint")
        if self._use_endpoint and isinstance(endpoint, dict):
            direct = self._direct_transport(endpoint)
            if direct is not None:
                try:
                    direct.open()
                except BaseException:
                    self._client.close_transport()  # leave the server's side closed too
                    self._timeouts = None
                    raise
                self._direct = direct
                self.endpoint = endpoint

    def _direct_transport(self, endpoint: dict[str, Any]) -> Transport | None:
        kind = endpoint.get("type")
        if kind == "fifo":
            return FdTransport.for_fifos(
                endpoint["rx_path"], endpoint["tx_path"], self._timeouts,
                remove_after_open=bool(endpoint.get("remove_after_open")),
            )
        if kind == "serial":
            return SerialTransport(
                endpoint["port"], endpoint.get("baudrate", 115200), self._timeouts
            )
        _LOG.warning("ignoring unknown transport endpoint type %r; using JSON-RPC", kind)
        return None

    def close(self) -> None:
        if self._direct is not None:
            direct, self._direct = self._direct, None
            direct.close()
        if not self._client.is_shutdown:
            try:
                try:
                    self._client.flush_pending()
                except JSONRPCError as exc:
                    _LOG.warning("the last write before close failed: %s", exc)
                self._client.close_transport()
            finally:
                if self._shutdown_client:
                    self._client.shutdown()
        self._timeouts = None

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        if self._direct is not None:
            return self._direct.read(n, timeout_sec)
        return self._client.read_transport(n, timeout_sec)["data"]

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        if self._direct is not None:
            self._direct.write(data, timeout_sec)
        elif self._pipeline_writes:
            self._client.write_transport_nowait(data, timeout_sec)
        else:
            self._client.write_transport(data, timeout_sec)
