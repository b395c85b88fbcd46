"""Loopback template project: a Project API server whose "device" echoes every byte back.

Tests and ``bench/transport.py`` use it to drive the whole client/server stack without hardware.
It is a template while no ``model.tar`` sits beside this file; ``generate_project`` copies this
script and the Model Library Format archive into a new directory, which is then a generated
project. The transport is an in-server loopback buffer (write, then read back the same bytes),
or, with ``transport=fifo``, a pair of named pipes served by an echo thread (the fast path).

Options (every type, a required one, one with choices, defaults):

==================  ====  ===================================  ==============  ==================
name                type  used by                              default         choices
==================  ====  ===================================  ==============  ==================
board               str   required: generate_project           (none)          (any)
transport           str   optional: open_transport             "rpc"           "rpc", "fifo"
buffer_size_bytes   int   optional: open_transport             16777216        (any > 0)
verbose             bool  optional: generate_project, build    False           (bool)
==================  ====  ===================================  ==============  ==================

``build`` writes ``build/firmware.bin`` (the board name); ``flash`` needs a build first and
records ``build/flashed``. Like every template it is a thin layer over ``project_api.template``,
which owns options, generation (copying this script and the archive), rollback and the device
link; what is left here is the imaginary device.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time

from project_api import server
from project_api.api.transport import LoopTransport
from project_api.errors import FlashError, IoTimeoutError
from project_api.template import Link, NewProject, TemplateHandler, option

_LOG = logging.getLogger("loopback_template")

DEFAULT_BUFFER_SIZE_BYTES = 16 * 1024 * 1024

TIMEOUTS = server.TransportTimeouts(
    session_start_retry_timeout_sec=0,
    session_start_timeout_sec=5.0,
    session_established_timeout_sec=5.0,
)

OPTIONS = [
    option("board", "str", required=["generate_project"],
           help="Name of the (imaginary) board; any non-empty string."),
    option("transport", "str", optional=["open_transport"], choices=["rpc", "fifo"],
           default="rpc",
           help="rpc: every read/write is a JSON-RPC call; fifo: offer the named-pipe fast path."),
    option("buffer_size_bytes", "int", optional=["open_transport"],
           default=DEFAULT_BUFFER_SIZE_BYTES, minimum=1,
           help="Capacity of the loopback buffer; a write that does not fit raises "
                "IoTimeoutError."),
    option("verbose", "bool", optional=["generate_project", "build"], default=False,
           help="Log each step."),
]


class _EchoThread(threading.Thread):
    """The fifo-mode device: buffers up to ``capacity`` bytes from ``read_fd`` and echoes them
    to ``write_fd``, so a large write can complete before anything is read back."""

    def __init__(self, read_fd: int, write_fd: int, capacity: int):
        super().__init__(name="loopback-echo", daemon=True)
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.capacity = capacity
        self._stop_r, self._stop_w = os.pipe()

    def run(self) -> None:
        pending = bytearray()
        try:
            while True:
                readers = [self._stop_r]
                if len(pending) < self.capacity:
                    readers.append(self.read_fd)
                writers = [self.write_fd] if pending else []
                readable, writable, _ = select.select(readers, writers, [])
                if self._stop_r in readable:
                    return
                if self.read_fd in readable:
                    try:
                        data = os.read(self.read_fd, min(65536, self.capacity - len(pending)))
                    except BlockingIOError:
                        data = None
                    if data == b"":
                        return
                    if data:
                        pending += data
                if writable:
                    try:
                        del pending[: os.write(self.write_fd, bytes(pending[:65536]))]
                    except BlockingIOError:
                        pass
        except OSError as exc:
            _LOG.info("echo thread stopping: %s", exc)
        finally:
            os.close(self.read_fd)
            os.close(self.write_fd)

    def close(self) -> None:
        os.write(self._stop_w, b"x")
        self.join()
        os.close(self._stop_r)
        os.close(self._stop_w)


class Handler(TemplateHandler):
    """The loopback template: everything but the device comes from project_api.template."""

    PLATFORM_NAME = "loopback"
    OPTIONS = OPTIONS

    def render(self, project: NewProject) -> None:
        (project.dir / "board.txt").write_text(project.options["board"] + "\n")
        if project.options["verbose"]:
            _LOG.info("generated %s for board %s", project.dir, project.options["board"])

    def do_build(self, values: dict) -> None:
        build_dir = self.project_dir / "build"
        build_dir.mkdir(exist_ok=True)
        (build_dir / "firmware.bin").write_bytes((self.project_dir / "board.txt").read_bytes())
        if values["verbose"]:
            _LOG.info("built %s", build_dir / "firmware.bin")

    def do_flash(self, values: dict) -> None:
        firmware = self.project_dir / "build" / "firmware.bin"
        if not firmware.exists():
            raise FlashError("flash: no build/firmware.bin; run build first")
        (self.project_dir / "build" / "flashed").write_text(str(time.time()) + "\n")

    def do_open_transport(self, values: dict) -> Link:
        capacity = values["buffer_size_bytes"]
        # One request at a time: nothing can arrive while a read would wait, so the buffer
        # answers at once (timeout 0) instead of sitting out the caller's timeout.
        loop = _ImmediateLoop(TIMEOUTS, capacity_bytes=capacity)
        if values["transport"] == "rpc":
            return Link(loop, TIMEOUTS)
        endpoint = server.FifoEndpoint()
        read_fd, write_fd = endpoint.open_device_fds(blocking=False)
        echo = _EchoThread(read_fd, write_fd, capacity)
        echo.start()
        return Link(loop, TIMEOUTS, endpoint, echo)


class _ImmediateLoop(LoopTransport):
    """The in-server loopback buffer: a write that does not fit whole, or a read of an empty
    buffer, fails at once (IoTimeoutError) and changes nothing."""

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        return super().read(n, 0)

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        if self._capacity is not None and len(self._buf) + len(data) > self._capacity:
            raise IoTimeoutError()
        super().write(data, 0)


if __name__ == "__main__":
    server.main(Handler())
