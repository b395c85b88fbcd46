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
records ``build/flashed``. Only ``from project_api import server`` is imported, like any template.
"""

from __future__ import annotations

import logging
import os
import pathlib
import select
import shutil
import tarfile
import threading
import time

from project_api import server

_LOG = logging.getLogger("loopback_template")

PROJECT_DIR = pathlib.Path(__file__).resolve().parent
MODEL_LIBRARY_FORMAT_RELPATH = "model.tar"
IS_TEMPLATE = not (PROJECT_DIR / MODEL_LIBRARY_FORMAT_RELPATH).exists()
DEFAULT_BUFFER_SIZE_BYTES = 16 * 1024 * 1024

PROJECT_OPTIONS = [
    server.ProjectOption(
        "board",
        required=["generate_project"],
        type="str",
        help="Name of the (imaginary) board; any non-empty string.",
    ),
    server.ProjectOption(
        "transport",
        optional=["open_transport"],
        type="str",
        choices=["rpc", "fifo"],
        default="rpc",
        help="rpc: every read/write is a JSON-RPC call; fifo: offer the named-pipe fast path.",
    ),
    server.ProjectOption(
        "buffer_size_bytes",
        optional=["open_transport"],
        type="int",
        default=DEFAULT_BUFFER_SIZE_BYTES,
        help="Capacity of the loopback buffer; a write that does not fit raises IoTimeoutError.",
    ),
    server.ProjectOption(
        "verbose",
        optional=["generate_project", "build"],
        type="bool",
        default=False,
        help="Log each step.",
    ),
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

    def stop(self) -> None:
        os.write(self._stop_w, b"x")
        self.join()
        os.close(self._stop_r)
        os.close(self._stop_w)


class Handler(server.ProjectAPIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._buffer: bytearray | None = None
        self._capacity = DEFAULT_BUFFER_SIZE_BYTES
        self._endpoint: server.FifoEndpoint | None = None
        self._echo: _EchoThread | None = None

    def server_info_query(self, tvm_version: str) -> server.ServerInfo:
        return server.ServerInfo(
            platform_name="loopback",
            is_template=IS_TEMPLATE,
            model_library_format_path=None
            if IS_TEMPLATE
            else PROJECT_DIR / MODEL_LIBRARY_FORMAT_RELPATH,
            project_options=PROJECT_OPTIONS,
        )

    def generate_project(
        self,
        model_library_format_path: pathlib.Path,
        standalone_crt_dir: pathlib.Path,
        project_dir: pathlib.Path,
        options: dict,
    ) -> None:
        if not IS_TEMPLATE:
            raise server.ServerError(
                message="generate_project: this is a generated project, not a template"
            )
        board = options.get("board")
        if not isinstance(board, str) or not board:
            raise server.ServerError(
                message="generate_project: option board is required (a non-empty str)"
            )
        if not model_library_format_path.exists():
            raise server.ServerError(
                message=f"generate_project: model library format {model_library_format_path} does not exist"
            )
        if project_dir.exists():
            raise server.ServerError(
                message=f"generate_project: {project_dir} already exists; pick a new directory or remove it"
            )
        project_dir.mkdir(parents=True)
        try:
            shutil.copy2(__file__, project_dir / pathlib.Path(__file__).name)
            dest = project_dir / MODEL_LIBRARY_FORMAT_RELPATH
            if model_library_format_path.is_dir():
                with tarfile.open(dest, "w") as tar:
                    tar.add(model_library_format_path, arcname=".")
            else:
                shutil.copy2(model_library_format_path, dest)
            (project_dir / "board.txt").write_text(board + "\n")
        except BaseException:
            shutil.rmtree(project_dir, ignore_errors=True)
            raise
        if options.get("verbose"):
            _LOG.info("generated %s for board %s", project_dir, board)

    def _require_generated(self, method: str) -> None:
        if IS_TEMPLATE:
            raise server.ServerError(
                message=f"{method}: run generate_project first; this is the template"
            )

    def build(self, options: dict) -> None:
        self._require_generated("build")
        build_dir = PROJECT_DIR / "build"
        build_dir.mkdir(exist_ok=True)
        (build_dir / "firmware.bin").write_bytes((PROJECT_DIR / "board.txt").read_bytes())
        if options.get("verbose"):
            _LOG.info("built %s", build_dir / "firmware.bin")

    def flash(self, options: dict) -> None:
        self._require_generated("flash")
        firmware = PROJECT_DIR / "build" / "firmware.bin"
        if not firmware.exists():
            raise server.ServerError(message="flash: no build/firmware.bin; run build first")
        (PROJECT_DIR / "build" / "flashed").write_text(str(time.time()) + "\n")

    def open_transport(self, options: dict):
        self.close_transport()
        capacity = options.get("buffer_size_bytes", DEFAULT_BUFFER_SIZE_BYTES)
        if not isinstance(capacity, int) or capacity < 1:
            raise server.ServerError(
                message=f"open_transport: buffer_size_bytes must be a positive int; got {capacity!r}"
            )
        self._capacity = capacity
        self._buffer = bytearray()
        timeouts = server.TransportTimeouts(
            session_start_retry_timeout_sec=0,
            session_start_timeout_sec=5.0,
            session_established_timeout_sec=5.0,
        )
        kind = options.get("transport", "rpc")
        if kind == "rpc":
            return timeouts
        if kind != "fifo":
            raise server.ServerError(
                message=f"open_transport: transport must be rpc or fifo; got {kind!r}"
            )
        self._endpoint = server.FifoEndpoint()
        read_fd, write_fd = self._endpoint.open_device_fds(blocking=False)
        self._echo = _EchoThread(read_fd, write_fd, capacity)
        self._echo.start()
        return {"timeouts": timeouts, "endpoint": self._endpoint}

    def close_transport(self) -> None:
        if self._echo is not None:
            self._echo.stop()
            self._echo = None
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None
        self._buffer = None

    def _open_buffer(self) -> bytearray:
        if self._buffer is None:
            raise server.TransportClosedError()
        return self._buffer

    def read_transport(self, n: int, timeout_sec: float | None) -> bytes:
        buf = self._open_buffer()
        if not buf:
            # Nothing can arrive while we would wait (one request at a time), so time out now.
            raise server.IoTimeoutError()
        data = bytes(buf[:n])
        del buf[:n]
        return data

    def write_transport(self, data: bytes, timeout_sec: float | None) -> None:
        buf = self._open_buffer()
        if len(buf) + len(data) > self._capacity:
            raise server.IoTimeoutError()
        buf += data


if __name__ == "__main__":
    server.main(Handler())
