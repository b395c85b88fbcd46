"""The pipes a server talks over: reading and writing a file descriptor with a deadline, and the
FIFO pair of the client launching a server.
"""

from __future__ import annotations

import os
import pathlib
import select
import shutil
import stat
import tempfile
import time

from project_api.errors import (
    IoTimeoutError,
    TransportClosedError,
)


def _time_left(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic())


def read_with_timeout(fd: int, n: int, timeout_sec: float | None) -> bytes:
    """Read 1..``n`` bytes from ``fd``, waiting at most ``timeout_sec`` (None: forever).

    Raises :class:`IoTimeoutError` if nothing arrived in time and :class:`TransportClosedError`
    at end-of-file. Unlike the reference it does not close ``fd``: that is its owner's job.
    """
    deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
    while True:
        ready, _, _ = select.select([fd], [], [], _time_left(deadline))
        if not ready:
            raise IoTimeoutError()
        try:
            data = os.read(fd, n)
        except BlockingIOError:
            continue
        except OSError as exc:
            raise TransportClosedError() from exc
        if not data:
            raise TransportClosedError()
        return data


def write_with_timeout(fd: int, data: bytes, timeout_sec: float | None) -> int:
    """Write ``data`` to ``fd`` within ``timeout_sec`` (None: no limit); returns bytes written.

    If the deadline passes after part of ``data`` went out, returns that count; if none went out,
    raises :class:`IoTimeoutError`. A broken pipe or a zero-byte write raises
    :class:`TransportClosedError`.
    """
    deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
    view = memoryview(data)
    written = 0
    while written < len(view):
        _, ready, _ = select.select([], [fd], [], _time_left(deadline))
        if not ready:
            if written:
                return written
            raise IoTimeoutError()
        try:
            count = os.write(fd, view[written:])
        except BlockingIOError:
            continue
        except OSError as exc:
            raise TransportClosedError() from exc
        if count == 0:
            raise TransportClosedError()
        written += count
    return written


class FifoEndpoint:
    """A pair of named pipes through which our client reaches a device process directly.

    ``tx`` carries client → device bytes, ``rx`` device → client. :meth:`open_device_fds` returns
    the device's ends (read end of ``tx``, write end of ``rx``) without blocking; hand them to the
    device process (e.g. as its stdin/stdout) or to a thread. The endpoint keeps a spare reader on
    ``rx`` and a spare writer on ``tx`` open, so neither side sees a false end-of-file before the
    other connects; the client still sees EOF when the device's write end closes.
    Return :meth:`to_json` (or the endpoint itself) as ``"endpoint"`` from ``open_transport``,
    and call :meth:`close` from ``close_transport``. Its ``"remove_after_open": true`` lets our
    client unlink the pipes and their folder once it has opened them (open ends keep working),
    so nothing is left in the temporary directory even if this server is killed; the server
    must open any ends of its own before it replies.
    """

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, prefix: str = "project-api-fifo-"
    ):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir=directory))
        self.tx_path = self.dir / "tx"
        self.rx_path = self.dir / "rx"
        os.mkfifo(self.tx_path, 0o600)
        os.mkfifo(self.rx_path, 0o600)
        self._keep_fds: list[int] = []

    def open_device_fds(self, blocking: bool = True) -> tuple[int, int]:
        """Open and return ``(device_read_fd, device_write_fd)``; the caller owns both."""
        read_fd = os.open(self.tx_path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            self._keep_fds.append(os.open(self.tx_path, os.O_WRONLY | os.O_NONBLOCK))
            self._keep_fds.append(os.open(self.rx_path, os.O_RDONLY | os.O_NONBLOCK))
            write_fd = os.open(self.rx_path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            os.close(read_fd)
            self.close()
            raise
        os.set_blocking(read_fd, blocking)
        os.set_blocking(write_fd, blocking)
        return read_fd, write_fd

    def to_json(self) -> dict[str, str]:
        """The ``"endpoint"`` value for the ``open_transport`` reply."""
        return {"type": "fifo", "rx_path": str(self.rx_path), "tx_path": str(self.tx_path),
                "remove_after_open": True}

    def close(self) -> None:
        """Close the spare ends and remove the pipes and their directory."""
        while self._keep_fds:
            os.close(self._keep_fds.pop())
        remove_fifo_dir(self.dir, self.tx_path, self.rx_path)


def remove_fifo_dir(directory: pathlib.Path, *fifos: pathlib.Path) -> None:
    """Unlink the named FIFOs (only if they still are FIFOs) and remove their folder."""
    if not directory.exists():
        return
    for path in fifos:
        try:
            if stat.S_ISFIFO(path.lstat().st_mode):
                path.unlink()
        except FileNotFoundError:
            pass
    shutil.rmtree(directory, ignore_errors=True)
