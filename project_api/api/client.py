"""The Project API client: launches a project's server and calls it over JSON-RPC.

:func:`instantiate_from_dir` starts ``microtvm_api_server.py`` (or the project's
``launch_microtvm_api_server.sh``, which takes precedence) with two pipes, exactly as microTVM
v0.15 does, and returns a :class:`ProjectAPIClient` whose methods carry TVM's names.

Unlike the reference, the client never hangs on a dead server: while it waits for a reply it
also watches the process, and if the server dies it raises :class:`ServerExitedError` with the exit
status and the last lines of the server's stderr. Stderr goes through a pipe drained by a thread,
which keeps a bounded tail and forwards every line to the ``project_api.server_log`` logger at the
level the server logged it. The server's stdin is ``/dev/null`` (the reference inherits it) and
its ``PYTHONPATH`` starts with this package's location, so ``from project_api import server``
works in any template. Other differences: a relative ``project_dir`` works (the reference
launches a path relative to the wrong directory); a call interrupted by Ctrl-C does not leave
the next call reading the stale reply; :meth:`ProjectAPIClient.write_transport_nowait` can
pipeline a write with the following call; a server that never answers ``server_info_query``
(one stuck at start-up) is stopped after ``$PROJECT_API_SERVER_START_TIMEOUT_SEC`` (default 60 s)
with a :class:`~project_api.errors.ClientError`, where the reference waits forever.

Launching needs POSIX (``pass_fds`` and ``select`` on pipes). On Windows the launcher would be
``launch_microtvm_api_server.bat`` and the pipe ends would have to travel as inheritable handles;
see :mod:`project_api.api.server` for what that port involves.
"""

from __future__ import annotations

import collections
import io
import json
import logging
import os
import pathlib
import platform
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from project_api import TVM_COMPAT_VERSION
from project_api.api.base85 import Base85Text, b85decode, b85encode, json_dumps
from project_api.api.server import PROTOCOL_VERSION
from project_api.errors import (
    ClientError,
    ConnectionShutdownError,
    JSONRPCError,
    MalformedReplyError,
    MismatchedIdError,
    ProjectAPIServerNotFoundError,
    ServerExitedError,
    UnsupportedProtocolVersionError,
)
from project_api.system.processes import stop_process

__all__ = [
    "LAUNCH_SCRIPT_NAME",
    "SERVER_SCRIPT_NAME",
    "ProjectAPIClient",
    "instantiate_from_dir",
]

_LOG = logging.getLogger(__name__)
_SERVER_LOG = logging.getLogger("project_api.server_log")

SERVER_SCRIPT_NAME = "microtvm_api_server.py"
LAUNCH_SCRIPT_NAME = "launch_microtvm_api_server." + (
    "bat" if platform.system() == "Windows" else "sh"
)

# How often a client waiting on the server checks that the process is still alive.
_POLL_INTERVAL_SEC = 0.25
_POLL_INTERVAL_MS = int(_POLL_INTERVAL_SEC * 1000)
# How long to wait for a server whose pipe hit EOF to finish exiting.
_EXIT_WAIT_SEC = 2.0
_STDERR_TAIL_LINES = 40
# A pipe never holds more than 64 KiB; bigger reads only cost an mmap per call.
_READ_CHUNK_BYTES = 65536

#: How long a client waits for ``server_info_query`` (the first call, so a server start-up
#: included) before it gives up on the server; the environment variable overrides it.
SERVER_START_TIMEOUT_ENV = "PROJECT_API_SERVER_START_TIMEOUT_SEC"
DEFAULT_SERVER_START_TIMEOUT_SEC = 60.0

_SAFE_METHOD = re.compile(r"[A-Za-z0-9_]+\Z").match
_LEVEL_PREFIX = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):")


class _StderrPump(threading.Thread):
    """Drains a server's stderr: keeps the last lines and forwards each line to logging."""

    def __init__(self, stream: Any, label: str, max_lines: int = _STDERR_TAIL_LINES):
        super().__init__(name=f"stderr-{label}", daemon=True)
        self._stream = stream
        self._label = label
        self._lines: collections.deque[str] = collections.deque(maxlen=max_lines)
        self._lock = threading.Lock()

    def run(self) -> None:
        level = logging.INFO
        try:
            for raw in iter(self._stream.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                match = _LEVEL_PREFIX.match(line)
                if match:
                    level = logging.getLevelName(match.group(1))
                    line_for_log = line[match.end() :]
                else:
                    line_for_log = line
                with self._lock:
                    self._lines.append(line)
                _SERVER_LOG.log(level, "[%s] %s", self._label, line_for_log)
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._stream.close()
            except OSError:
                pass

    def tail(self) -> str:
        with self._lock:
            return "\n".join(self._lines)


class ProjectAPIClient:
    """Calls a Project API server over a pair of pipes (or any binary file objects).

    ``read_file``/``write_file`` are the client's ends. ``process`` is the server's
    ``subprocess.Popen`` when the client launched it; the client then watches it and owns it.
    ``testonly_did_write_request`` (TVM's hook) runs after each request is written, which lets a
    test serve it in-process before the client reads the reply.
    """

    def __init__(
        self,
        read_file: Any,
        write_file: Any,
        testonly_did_write_request: Callable[[], None] | None = None,
        *,
        process: subprocess.Popen | None = None,
        stderr_pump: _StderrPump | None = None,
        shutdown_grace_sec: float = 5.0,
    ):
        self._read_file = read_file
        self._write_file = write_file
        self._testonly_did_write_request = testonly_did_write_request
        self._process = process
        self._stderr_pump = stderr_pump
        self._shutdown_grace_sec = shutdown_grace_sec
        self._next_id = 0
        self._abandoned_ids: set[int] = set()
        self._pending: int | None = None  # id of an unanswered write_transport_nowait
        self._closed = False
        self._rbuf = b""
        self._read_fd = _raw_fd(read_file)
        self._write_fd = _raw_fd(write_file)
        self._read_poll: Any = None
        if self._read_fd is not None:
            os.set_blocking(self._read_fd, False)
            if hasattr(select, "poll"):  # one registered poll object: cheaper than select()
                self._read_poll = select.poll()
                self._read_poll.register(self._read_fd, select.POLLIN)
        if self._write_fd is not None:
            os.set_blocking(self._write_fd, False)

    # -- lifecycle

    def __enter__(self) -> ProjectAPIClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.shutdown()

    @property
    def is_shutdown(self) -> bool:
        return self._closed

    @property
    def process(self) -> subprocess.Popen | None:
        """The server process, when this client launched it."""
        return self._process

    def shutdown(self) -> None:
        """Close the pipes; wait for the server to exit, then kill it after a grace period."""
        if self._closed:
            return
        self._closed = True
        for f in (self._write_file, self._read_file):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        proc = self._process
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.wait(timeout=self._shutdown_grace_sec)
                except subprocess.TimeoutExpired:
                    _LOG.warning("API server pid %d did not exit; terminating it", proc.pid)
                    stop_process(proc, 1.0)
        if self._stderr_pump is not None:
            self._stderr_pump.join(timeout=1.0)

    # -- the exchange

    def _request_reply(
        self, method: str, params: dict[str, Any], timeout_sec: float | None = None
    ) -> Any:
        request_id = self._send_request(method, params)
        if self._pending is not None:
            try:
                self.flush_pending()
            except BaseException:
                self._abandoned_ids.add(request_id)
                raise
        return self._await_reply(method, request_id, timeout_sec)

    def _send_request(self, method: str, params: dict[str, Any]) -> int:
        if self._closed:
            raise ConnectionShutdownError("connection already closed")
        self._next_id += 1
        request_id = self._next_id
        # json.dumps({"jsonrpc": "2.0", "method": .., "params": .., "id": ..}), byte for byte.
        quoted = '"' + method + '"' if _SAFE_METHOD(method) else json.dumps(method)
        line = '{"jsonrpc": "2.0", "method": ' + quoted + ', "params": '
        line += json_dumps(params) + ', "id": ' + repr(request_id) + "}\n"
        self._send(line.encode("utf-8"), method)
        if self._testonly_did_write_request is not None:
            try:
                self._testonly_did_write_request()
            except KeyboardInterrupt:
                self._abandoned_ids.add(request_id)
                raise
        return request_id

    def _await_reply(self, method: str, request_id: int, timeout_sec: float | None = None) -> Any:
        deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
        try:
            reply = self._recv_reply(method, deadline)
        except _ReplyTimeout:
            self._abandoned_ids.add(request_id)
            self._kill()
            raise ClientError(
                f"the Project API server{self._pid_text()} did not answer {method} within "
                f"{timeout_sec:g}s; check that its {SERVER_SCRIPT_NAME} starts and serves "
                f"(-v shows its output), or raise {SERVER_START_TIMEOUT_ENV} (seconds)"
            ) from None
        except KeyboardInterrupt:
            # The reply will still come; skip it then, so the next call stays in step.
            self._abandoned_ids.add(request_id)
            raise
        if not isinstance(reply, dict):
            raise MalformedReplyError(
                f"calling method {method}: reply is not an object: {reply!r:.200}"
            )
        if reply.get("jsonrpc") != "2.0":
            raise MalformedReplyError(
                f'calling method {method}: reply["jsonrpc"]: want "2.0"; got {reply.get("jsonrpc")!r}'
            )
        if reply.get("id") != request_id:
            raise MismatchedIdError(
                f"calling method {method}: reply id {reply.get('id')!r} does not match request id {request_id}"
            )
        if "error" in reply:
            error = reply["error"]
            if not isinstance(error, dict):
                raise MalformedReplyError(
                    f"calling method {method}: reply error is not an object: {error!r:.200}"
                )
            raise JSONRPCError.from_json(f"calling method {method}", error)
        if "result" not in reply:
            raise MalformedReplyError(
                f"calling method {method}: reply has neither result nor error"
            )
        return reply["result"]

    def flush_pending(self) -> None:
        """Wait for the reply to a :meth:`write_transport_nowait` call; raise its error, if any."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._await_reply("write_transport", pending)

    def _pid_text(self) -> str:
        return f" (pid {self._process.pid})" if self._process is not None else ""

    def _kill(self) -> None:
        """Stop a server that stopped answering: close the pipes and end it at once."""
        proc = self._process
        if proc is not None and proc.poll() is None:
            _LOG.debug("terminating the unresponsive API server pid %d", proc.pid)
            stop_process(proc, 1.0)
        self.shutdown()

    def _recv_reply(self, method: str, deadline: float | None = None) -> Any:
        while True:
            line = self._recv_line(method, deadline)
            if not line:
                self._eof(method)
            try:
                reply = json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
            except (UnicodeDecodeError, ValueError) as exc:
                raise MalformedReplyError(
                    f"calling method {method}: reply is not JSON ({exc}): {line[:200]!r}"
                ) from None
            if isinstance(reply, dict) and reply.get("id") in self._abandoned_ids:
                self._abandoned_ids.discard(reply["id"])
                _LOG.debug("dropped the reply to interrupted request %s", reply["id"])
                continue
            return reply

    def _send(self, data: bytes, method: str) -> None:
        fd = self._write_fd
        if fd is None:
            try:
                self._write_file.write(data)
                self._write_file.flush()
            except (BrokenPipeError, ValueError) as exc:
                self._pipe_broke(method, exc)
            return
        try:  # a request usually fits in the pipe at once
            written = os.write(fd, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._pipe_broke(method, exc)
        if written == len(data):
            return
        view = memoryview(data)[written:]
        while view:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                _, ready, _ = select.select([], [fd], [], _POLL_INTERVAL_SEC)
                if not ready:
                    self._check_alive(method)
                continue
            except OSError as exc:
                self._pipe_broke(method, exc)
            view = view[written:]

    def _recv_line(self, method: str, deadline: float | None = None) -> bytes:
        fd = self._read_fd
        if fd is None:
            try:
                return self._read_file.readline()
            except ValueError:  # closed file
                return b""
        buf = self._rbuf
        nl = buf.find(b"\n")
        if nl >= 0:
            self._rbuf = buf[nl + 1 :]
            return buf[: nl + 1]
        parts = [buf] if buf else []
        while True:
            if self._read_poll is not None:
                ready = self._read_poll.poll(_POLL_INTERVAL_MS)
            else:
                ready, _, _ = select.select([fd], [], [], _POLL_INTERVAL_SEC)
            if not ready:
                self._check_alive(method)
                if deadline is not None and time.monotonic() >= deadline:
                    self._rbuf = b"".join(parts)
                    raise _ReplyTimeout
                continue
            try:
                chunk = os.read(fd, _READ_CHUNK_BYTES)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self._rbuf = b""
                line = b"".join(parts)
                return line if line.endswith(b"\n") else b""
            nl = chunk.find(b"\n")
            if nl >= 0:
                parts.append(chunk[: nl + 1])
                self._rbuf = chunk[nl + 1 :]
                return b"".join(parts)
            parts.append(chunk)

    def _check_alive(self, method: str) -> None:
        proc = self._process
        if proc is not None and proc.poll() is not None:
            raise self._exited(method)

    def _pipe_broke(self, method: str, exc: BaseException) -> None:
        if self._process is not None:
            try:
                self._process.wait(timeout=_EXIT_WAIT_SEC)
            except subprocess.TimeoutExpired:
                pass
            else:
                raise self._exited(method) from None
        self.shutdown()
        raise ConnectionShutdownError(f"cannot send {method} request: {exc}") from None

    def _eof(self, method: str) -> None:
        if self._process is not None:
            try:
                self._process.wait(timeout=_EXIT_WAIT_SEC)
            except subprocess.TimeoutExpired:
                pass
            else:
                raise self._exited(method)
        self.shutdown()
        raise ConnectionShutdownError("got EOF reading reply from API server")

    def _exited(self, method: str) -> ServerExitedError:
        proc = self._process
        assert proc is not None
        returncode = proc.wait()
        if self._stderr_pump is not None:
            self._stderr_pump.join(timeout=1.0)
            tail = self._stderr_pump.tail()
        else:
            tail = ""
        self.shutdown()
        how = (
            f"was killed by signal {-returncode}"
            if returncode < 0
            else f"exited with status {returncode}"
        )
        message = f"Project API server (pid {proc.pid}) {how} while calling method {method}"
        message += f"; the end of its stderr:\n{tail}" if tail else "; its stderr was empty"
        return ServerExitedError(message, returncode=returncode, stderr_tail=tail)

    # -- the API (TVM's names and parameters)

    def server_info_query(
        self, tvm_version: str = TVM_COMPAT_VERSION, timeout_sec: float | None = None
    ) -> dict[str, Any]:
        """Ask the server to describe its project; checks the protocol version.

        As the first call this also waits for the server to start, so it has a limit:
        ``timeout_sec``, default ``$PROJECT_API_SERVER_START_TIMEOUT_SEC`` or 60 s (0: none). A
        server that does not answer in time is stopped and :class:`ClientError` raised.
        """
        if timeout_sec is None:
            timeout_sec = server_start_timeout_sec()
        reply = self._request_reply(
            "server_info_query", {"tvm_version": tvm_version}, timeout_sec or None
        )
        if not isinstance(reply, dict):
            raise MalformedReplyError(f"server_info_query: want an object; got {reply!r:.200}")
        version = reply.get("protocol_version")
        if version != PROTOCOL_VERSION:
            raise UnsupportedProtocolVersionError(
                f"microTVM API Server supports protocol version {version}; want {PROTOCOL_VERSION}"
            )
        return reply

    def generate_project(
        self,
        model_library_format_path: str | os.PathLike[str],
        standalone_crt_dir: str | os.PathLike[str],
        project_dir: str | os.PathLike[str],
        options: dict[str, Any] | None = None,
    ) -> Any:
        return self._request_reply(
            "generate_project",
            {
                "model_library_format_path": str(model_library_format_path),
                "standalone_crt_dir": str(standalone_crt_dir),
                "project_dir": str(project_dir),
                "options": options if options is not None else {},
            },
        )

    def build(self, options: dict[str, Any] | None = None) -> Any:
        return self._request_reply("build", {"options": options if options is not None else {}})

    def flash(self, options: dict[str, Any] | None = None) -> Any:
        return self._request_reply("flash", {"options": options if options is not None else {}})

    def open_transport(self, options: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self._request_reply(
            "open_transport", {"options": options if options is not None else {}}
        )
        if not isinstance(reply, dict) or not isinstance(reply.get("timeouts"), dict):
            raise MalformedReplyError(
                f"open_transport: want {{'timeouts': {{...}}}}; got {reply!r:.200}"
            )
        return reply

    def close_transport(self) -> Any:
        return self._request_reply("close_transport", {})

    def read_transport(self, n: int, timeout_sec: float | None) -> dict[str, bytes]:
        reply = self._request_reply("read_transport", {"n": n, "timeout_sec": timeout_sec})
        if not isinstance(reply, dict) or not isinstance(reply.get("data"), str):
            raise MalformedReplyError(
                f"read_transport: want {{'data': <base85 str>}}; got {reply!r:.200}"
            )
        try:
            return {"data": b85decode(reply["data"])}
        except ValueError as exc:
            raise MalformedReplyError(f"read_transport: data is not base85: {exc}") from None

    def write_transport(
        self, data: bytes | bytearray | memoryview, timeout_sec: float | None
    ) -> None:
        self._request_reply(
            "write_transport",
            {"data": Base85Text(b85encode(data).decode("ascii")), "timeout_sec": timeout_sec},
        )

    def write_transport_nowait(
        self, data: bytes | bytearray | memoryview, timeout_sec: float | None
    ) -> None:
        """Send ``write_transport`` without waiting for its reply (our extension; same wire).

        The reply is collected by the next call (or :meth:`flush_pending`), which raises the
        write's error, if it had one, before its own result. This saves one pipe round trip per
        write-then-read exchange; at most one write is outstanding at a time.
        """
        self.flush_pending()
        self._pending = self._send_request(
            "write_transport",
            {"data": Base85Text(b85encode(data).decode("ascii")), "timeout_sec": timeout_sec},
        )


class _ReplyTimeout(Exception):
    """No reply line arrived before the deadline (internal)."""


def server_start_timeout_sec() -> float:
    """``$PROJECT_API_SERVER_START_TIMEOUT_SEC`` (seconds, 0 = no limit), else 60."""
    text = os.environ.get(SERVER_START_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_SERVER_START_TIMEOUT_SEC
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 and value != float("inf")):
        raise ClientError(
            f"{SERVER_START_TIMEOUT_ENV}={text!r} is not a number of seconds; set it to e.g. 120 "
            "(0: no limit)"
        )
    return value


def _raw_fd(file: Any) -> int | None:
    """The fd to use directly for an unbuffered pipe file; None for anything else."""
    if isinstance(file, (io.TextIOBase, io.BufferedIOBase)) or not isinstance(file, io.RawIOBase):
        return None
    try:
        return file.fileno()
    except (OSError, ValueError):
        return None


def _server_env() -> dict[str, str]:
    """The environment for a server: ours, with this package importable (``from project_api import server``)."""
    env = dict(os.environ)
    package_root = str(pathlib.Path(__file__).resolve().parents[2])
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = package_root + (os.pathsep + existing if existing else "")
    return env


def instantiate_from_dir(
    project_dir: str | os.PathLike[str], debug: bool = False
) -> ProjectAPIClient:
    """Launch the Project API server of ``project_dir`` and return a client connected to it."""
    project_dir = pathlib.Path(project_dir)
    given_dir = project_dir
    project_dir = project_dir.resolve()  # the server runs with cwd=project_dir
    server_py = project_dir / SERVER_SCRIPT_NAME
    launcher = project_dir / LAUNCH_SCRIPT_NAME
    if launcher.is_file():
        argv = [str(launcher), str(server_py)]
        if not os.access(launcher, os.X_OK):
            argv.insert(0, "/bin/sh")
    elif server_py.is_file():
        argv = [sys.executable, str(server_py)]
    else:
        raise ProjectAPIServerNotFoundError(
            f"No Project API server found in project directory: {given_dir}\n"
            f"Tried: {LAUNCH_SCRIPT_NAME}, {SERVER_SCRIPT_NAME}"
        )

    server_read, client_write = os.pipe()
    client_read, server_write = os.pipe()
    argv += ["--read-fd", str(server_read), "--write-fd", str(server_write)]
    if debug:
        argv.append("--debug")
    _LOG.debug("launching API server: %s (cwd %s)", " ".join(argv), project_dir)
    try:
        proc = subprocess.Popen(
            argv,
            bufsize=0,
            pass_fds=(server_read, server_write),
            cwd=project_dir,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=_server_env(),
        )
    except OSError as exc:
        for fd in (client_read, client_write):
            os.close(fd)
        raise ClientError(f"cannot launch the Project API server {argv[0]}: {exc}") from None
    finally:
        os.close(server_read)
        os.close(server_write)
    pump = _StderrPump(proc.stderr, f"{project_dir.name}:{proc.pid}")
    pump.start()
    return ProjectAPIClient(
        os.fdopen(client_read, "rb", buffering=0),
        os.fdopen(client_write, "wb", buffering=0),
        process=proc,
        stderr_pump=pump,
    )
