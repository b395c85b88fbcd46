"""The Project API server: the base class a template's ``microtvm_api_server.py`` implements.

A template project ships a ``microtvm_api_server.py`` that subclasses :class:`ProjectAPIHandler`
and ends with ``server.main(Handler())``. The client (:mod:`project_api.api.client`) launches it with
two pipe file descriptors and talks JSON-RPC 2.0 over them, one JSON document per line.

Names, call styles and wire bytes follow microTVM v0.15's ``tvm.micro.project_api.server``, so a
TVM server ports by changing only its import line to ``from project_api import server``. Where we
differ, we are stricter or more robust on the same wire:

- the server keeps serving after any bad request: unparseable input gets a -32700 reply and an
  invalid request a -32600 reply (the reference's exact messages), both with ``"id": null``;
  only end-of-file stops :meth:`ProjectAPIServer.serve_forever`;
- a request without ``"id"`` is a JSON-RPC 2.0 notification: it runs, and gets no reply;
- every method's parameters are type-checked (the reference checks only three methods);
- :func:`main` honours its ``argv`` argument;
- a zero-byte ``os.write`` raises :class:`TransportClosedError`, and :func:`read_with_timeout`
  leaves closing the descriptor to its owner;
- base85 coding of transport data is numpy-vectorised when numpy is importable (byte-identical
  to :func:`base64.b85encode`; the stdlib codec is the fallback).

This module imports only the standard library and ``jsonrpcserver`` (which does the dispatch),
because template servers import it from whatever Python runs them. numpy is optional.

Launching works on any POSIX system: the client passes the pipe ends with ``pass_fds``, and both
sides use ``select`` on them. Windows would need three changes, all in the launch path: the pipe
ends must be passed as inheritable handles (``os.set_handle_inheritable`` plus
``msvcrt.get_osfhandle``/``open_osfhandle``, handle numbers instead of fds on the command line),
waiting on a pipe needs a reader thread or overlapped I/O since ``select`` only accepts sockets
there, and the per-project launcher is ``launch_microtvm_api_server.bat``.

Fast path (our extension; TVM clients ignore it): ``open_transport`` may return, beside
``"timeouts"``, an ``"endpoint"`` such as a :class:`FifoEndpoint`; our client then moves the
device bytes through that pair of named pipes instead of one JSON-RPC call per read or write.
"""

from __future__ import annotations

import abc
import argparse
import collections
import errno
import inspect
import io
import json
import logging
import os
import pathlib
import re
import select
import sys
import traceback
import warnings
from typing import Any

from project_api.api.base85 import B85_ALPHABET, Base85Text, b85decode, b85encode, json_dumps

# The parts' private names the tests reach through this module.
from project_api.api.base85 import _b85decode_numpy as _b85decode_numpy
from project_api.api.base85 import _b85encode_numpy as _b85encode_numpy
from project_api.api.base85 import _numpy as _numpy
from project_api.api.fifo import FifoEndpoint, read_with_timeout, write_with_timeout
from project_api.api.options import ProjectOption, default_project_options
from project_api.errors import (
    ErrorCode,
    IoTimeoutError,
    JSONRPCError,
    ServerError,
    TransportClosedError,
    UnsupportedTVMVersionError,
)

_LOG = logging.getLogger(__name__)


__all__ = [
    "B85_ALPHABET",
    "ErrorCode",
    "FifoEndpoint",
    "IoTimeoutError",
    "JSONRPCError",
    "ProjectAPIHandler",
    "ProjectAPIServer",
    "ProjectOption",
    "ServerError",
    "ServerInfo",
    "TransportClosedError",
    "TransportTimeouts",
    "UnsupportedTVMVersionError",
    "Base85Text",
    "b85decode",
    "b85encode",
    "default_project_options",
    "json_dumps",
    "main",
    "read_with_timeout",
    "write_with_timeout",
]

PROTOCOL_VERSION = 1

ServerInfo = collections.namedtuple(
    "ServerInfo", ["platform_name", "is_template", "model_library_format_path", "project_options"]
)

TransportTimeouts = collections.namedtuple(
    "TransportTimeouts",
    [
        "session_start_retry_timeout_sec",
        "session_start_timeout_sec",
        "session_established_timeout_sec",
    ],
)

TransportTimeouts.__doc__ = """Session timeouts a transport asks of the RPC session above it.

``session_start_retry_timeout_sec``: resend the start train if no reply came in this time (0: never).
``session_start_timeout_sec``: the whole handshake's limit (0: none).
``session_established_timeout_sec``: per-reply limit once the session is up (0: wait forever).
"""


class ProjectAPIHandler(abc.ABC):
    """What a template project implements; the server does validation and marshalling.

    To add a template: subclass this in ``microtvm_api_server.py`` next to the template's files,
    implement the 8 methods, declare options as :class:`ProjectOption` data, and end the file
    with ``server.main(Handler())``. Raise :class:`ServerError` subclasses for expected failures
    (they reach the client as the same class); anything else arrives as a ``ServerError`` with the
    server-side traceback. Log with :mod:`logging`; stdout is yours, stderr reaches the user.
    """

    @abc.abstractmethod
    def server_info_query(self, tvm_version: str) -> ServerInfo:
        """Describe this project.

        Raise :class:`UnsupportedTVMVersionError` if the client's ``tvm_version`` (a TVM-style
        version string) is not supported. A result that has a ``protocol_version`` field
        overrides the default of 1.
        """

    @abc.abstractmethod
    def generate_project(
        self,
        model_library_format_path: pathlib.Path,
        standalone_crt_dir: pathlib.Path,
        project_dir: pathlib.Path,
        options: dict,
    ) -> None:
        """From a template, create ``project_dir`` (it must not exist) for the given model.

        ``options`` maps option names to values. Copy this server script into the new project so
        the client can launch it from there; remove what you created if generation fails.
        """

    @abc.abstractmethod
    def build(self, options: dict) -> None:
        """Build the generated project; ``options`` maps option names to values."""

    @abc.abstractmethod
    def flash(self, options: dict) -> None:
        """Put the built firmware on the device."""

    @abc.abstractmethod
    def open_transport(self, options: dict) -> TransportTimeouts:
        """Open the byte channel to the device and return its session timeouts.

        May instead return ``{"timeouts": TransportTimeouts(...), "endpoint": ...}`` where the
        endpoint (for example a :class:`FifoEndpoint`) lets our client reach the device directly.
        """

    @abc.abstractmethod
    def close_transport(self) -> None:
        """Close the channel opened by :meth:`open_transport`; a no-op when none is open."""

    @abc.abstractmethod
    def read_transport(self, n: int, timeout_sec: float | None) -> bytes:
        """Read 1 to ``n`` bytes from the device, waiting at most ``timeout_sec``.

        ``timeout_sec=None`` waits forever; ``0`` returns only what is already there. Never
        return an empty result: raise :class:`IoTimeoutError` when nothing arrived in time, and
        :class:`TransportClosedError` when the channel is gone (EOF).
        """

    @abc.abstractmethod
    def write_transport(self, data: bytes, timeout_sec: float | None) -> None:
        """Write all of ``data`` to the device within ``timeout_sec`` (None: no limit).

        Raise :class:`IoTimeoutError` if the device stops accepting bytes in time, and
        :class:`TransportClosedError` when the channel is gone.
        """


_NoneType = type(None)

# The wire type of every parameter, in the order of the abstract methods' signatures.
_WIRE_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    "server_info_query": {"tvm_version": (str,)},
    "generate_project": {
        "model_library_format_path": (str,),
        "standalone_crt_dir": (str,),
        "project_dir": (str,),
        "options": (dict,),
    },
    "build": {"options": (dict,)},
    "flash": {"options": (dict,)},
    "open_transport": {"options": (dict,)},
    "close_transport": {},
    "read_transport": {"n": (int,), "timeout_sec": (float, int, _NoneType)},
    "write_transport": {"data": (str,), "timeout_sec": (float, int, _NoneType)},
}

# The exact types json.loads produces for valid values: the fast check in ProjectAPIServer._call.
_EXACT_TYPES: dict[str, dict[str, frozenset[type]]] = {
    method: {name: frozenset(types) for name, types in params.items()}
    for method, params in _WIRE_TYPES.items()
}

_METHOD_RE = re.compile(r"^[a-zA-Z0-9_]+$")


def _describe_types(types: tuple[type, ...]) -> str:
    shown = [t for t in types if not (t is int and float in types)]
    return " or ".join("None" if t is _NoneType else str(t) for t in shown)


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


class _InvalidRequest(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class _LineReader:
    """Reads ``\\n``-terminated lines: straight from the fd when there is one, else readline()."""

    _CHUNK = 65536  # a pipe holds 64 KiB; larger os.read sizes cost an mmap per call

    def __init__(self, file: Any):
        self._file = file
        self._fd: int | None = None
        self._buf = b""
        try:
            if not isinstance(file, io.TextIOBase) and not getattr(file, "peek", None):
                self._fd = file.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None

    def readline(self) -> bytes | str:
        if self._fd is None:
            return self._file.readline()
        buf = self._buf
        nl = buf.find(b"\n")
        if nl >= 0:
            self._buf = buf[nl + 1 :]
            return buf[: nl + 1]
        parts = [buf] if buf else []
        while True:
            try:
                chunk = os.read(self._fd, self._CHUNK)
            except BlockingIOError:
                select.select([self._fd], [], [])
                continue
            if not chunk:
                self._buf = b""
                return b"".join(parts)
            nl = chunk.find(b"\n")
            if nl >= 0:
                parts.append(chunk[: nl + 1])
                self._buf = chunk[nl + 1 :]
                return b"".join(parts)
            parts.append(chunk)


def _write_all(file: Any, fd: int | None, data: bytes) -> None:
    if fd is None:
        if isinstance(file, io.TextIOBase):
            file.write(data.decode("utf-8"))
        else:
            file.write(data)
        file.flush()
        return
    try:  # a reply usually fits in the pipe at once
        written = os.write(fd, data)
    except BlockingIOError:
        written = 0
    if written == len(data):
        return
    view = memoryview(data)[written:]
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        if written == 0:
            raise BrokenPipeError("zero-byte write on the reply pipe")
        view = view[written:]


class ProjectAPIServer:
    """Serves JSON-RPC requests from ``read_file`` to ``handler``, replying on ``write_file``.

    The files are binary (or text) file objects; when they have a file descriptor the server
    uses it directly. One request is handled at a time, in order.
    """

    _PROTOCOL_VERSION = PROTOCOL_VERSION

    def __init__(self, read_file: Any, write_file: Any, handler: ProjectAPIHandler):
        # jsonrpcserver pulls in jsonschema (~0.2 s), so it is imported only by a real server.
        # Its package __init__ uses a deprecated importlib.resources call; that is not ours to fix.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from jsonrpcserver.dispatcher import call, get_method
            from jsonrpcserver.request import Request
            from jsonrpcserver.result import Error, Success
            from jsonrpcserver.sentinels import NOCONTEXT, NODATA
            from oslash.either import Left  # jsonrpcserver's result type

        self._get_method = get_method
        self._call_method = call
        self._rpc_request = Request
        self._left = Left
        self._nodata = NODATA
        self._success = Success
        self._error = Error
        self._nocontext = NOCONTEXT
        self._reader = _LineReader(read_file)
        self._write_file = write_file
        try:
            self._write_fd: int | None = (
                None
                if isinstance(write_file, io.TextIOBase) or getattr(write_file, "raw", None)
                else write_file.fileno()
            )
        except (AttributeError, OSError, ValueError):
            self._write_fd = None
        self._handler = handler
        self._dispatchers = {name: getattr(self, "_dispatch_" + name) for name in _WIRE_TYPES}
        self._methods = _MethodTable(self)

    # -- the loop

    def serve_forever(self) -> None:
        """Serve until the client closes its end (EOF) or the reply pipe breaks."""
        while self.serve_one_request():
            pass

    def serve_one_request(self) -> bool:
        """Read, handle and answer one request. Returns False only at EOF or a broken pipe."""
        line = self._reader.readline()
        if not line:
            _LOG.debug("EOF on the request pipe; stopping")
            return False
        try:
            reply = self._handle_line(line)
        except Exception:  # a bug here must not kill the server
            _LOG.exception("internal error while serving a request")
            reply = self._error_reply(None, ErrorCode.INTERNAL_ERROR, "internal server error", None)
        if reply is None:
            return True
        try:
            _write_all(self._write_file, self._write_fd, reply)
        except (BrokenPipeError, ConnectionError, ValueError, OSError) as exc:
            _LOG.warning("cannot send reply (%s); stopping", exc)
            return False
        return True

    # -- one request

    def _handle_line(self, line: bytes | str) -> bytes | None:
        if _LOG.isEnabledFor(logging.DEBUG):
            _LOG.debug("request: %.300s", line.rstrip())
        try:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
            request = json.loads(text)
        except (UnicodeDecodeError, ValueError) as exc:
            _LOG.warning("request is not valid JSON: %s", exc)
            return self._error_reply(
                None, ErrorCode.PARSE_ERROR, f"request: invalid JSON: {exc}", None
            )
        try:
            self._validate(request)
        except _InvalidRequest as exc:
            _LOG.warning("invalid request: %s", exc.message)
            return self._error_reply(None, exc.code, exc.message, None)
        is_notification = "id" not in request
        params = request.get("params")
        if params is None:
            params = {}
        rpc_request = self._rpc_request(
            request["method"], params, None if is_notification else request["id"]
        )
        # jsonrpcserver's dispatch_request() minus its validate_args(): that generic check
        # (inspect.Signature.bind, ~10 us) is redundant with ours, which gives TVM's messages.
        result = self._get_method(self._methods, rpc_request.method).bind(
            lambda method: self._call_method(rpc_request, self._nocontext, method)
        )
        if is_notification:
            return None
        return self._serialize(rpc_request.method, rpc_request.id, result)

    @staticmethod
    def _validate(request: Any) -> None:
        code = ErrorCode.INVALID_REQUEST
        if not isinstance(request, dict):
            raise _InvalidRequest(code, f"request: want dict; got {request!r}")
        if request.get("jsonrpc") != "2.0":
            raise _InvalidRequest(
                code, f'request["jsonrpc"]: want "2.0"; got {request.get("jsonrpc")!r}'
            )
        method = request.get("method")
        if not isinstance(method, str):
            raise _InvalidRequest(code, f'request["method"]: want str; got {method!r}')
        if not _METHOD_RE.match(method):
            raise _InvalidRequest(
                code, f'request["method"]: should match regex {_METHOD_RE.pattern}; got {method!r}'
            )
        params = request.get("params", {})
        if not isinstance(params, dict):
            raise _InvalidRequest(code, f'request["params"]: want dict; got {type(params)}')
        if "id" in request:
            id_ = request["id"]
            if isinstance(id_, bool) or not isinstance(id_, (str, int, float, _NoneType)):
                raise _InvalidRequest(code, f'request["id"]: want str, number, null; got {id_!r}')

    def _serialize(self, method: str, id_: Any, result: Any) -> bytes:
        # jsonrpcserver results are oslash Eithers; like jsonrpcserver.response we read the
        # ErrorResult / SuccessResult inside, and print the reply exactly as json.dumps would
        # print {"jsonrpc": "2.0", "id": .., "result" | "error": ..}.
        try:
            if isinstance(result, self._left):
                err = result._error
                data = None if err.data is self._nodata else err.data
                error = {"code": int(err.code), "message": err.message, "data": data}
                text = '{"jsonrpc": "2.0", "id": ' + json_dumps(id_)
                text += ', "error": ' + json.dumps(error) + "}"
            else:
                text = '{"jsonrpc": "2.0", "id": ' + json_dumps(id_)
                text += ', "result": ' + json_dumps(result._value.result) + "}"
        except (TypeError, ValueError) as exc:
            _LOG.error("method %s: reply is not JSON-serializable: %s", method, exc)
            return self._error_reply(
                id_,
                ErrorCode.INTERNAL_ERROR,
                f"{method}: the handler's result is not JSON-serializable: {exc}",
                None,
            )
        if _LOG.isEnabledFor(logging.DEBUG):
            _LOG.debug("reply: %.300s", text)
        return (text + "\n").encode("utf-8")

    @staticmethod
    def _error_reply(id_: Any, code: int, message: str, data: Any) -> bytes:
        reply = {
            "jsonrpc": "2.0",
            "id": id_,
            "error": {"code": int(code), "message": message, "data": data},
        }
        return (json.dumps(reply) + "\n").encode("utf-8")

    # -- method calls (run by jsonrpcserver's dispatcher)

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        Error, Success = self._error, self._success
        wire = _WIRE_TYPES[method]
        exact = _EXACT_TYPES[method]
        if params.keys() == exact.keys() and all(type(params[k]) in t for k, t in exact.items()):
            pass  # the common case: every parameter present, nothing extra, plain JSON types
        else:
            error = self._check_params(method, wire, params)
            if error is not None:
                return error
        try:
            return Success(self._dispatchers[method](**params))
        except _InvalidParams as exc:
            return Error(ErrorCode.INVALID_PARAMS, f"method {method}: {exc}", None)
        except JSONRPCError as err:
            if isinstance(err, ServerError):
                err.set_traceback(err.__traceback__)
            _LOG.debug("method %s raised %s", method, type(err).__name__)
            return Error(int(err.code), err.message, err.data)
        except Exception as exc:
            _LOG.error("method %s failed", method, exc_info=True)
            err = ServerError(message=f"calling method {method}")
            err.set_traceback(exc.__traceback__)
            err.data["traceback"] += "".join(traceback.format_exception_only(type(exc), exc))
            return Error(int(err.code), err.message, err.data)

    def _check_params(self, method: str, wire: dict[str, tuple[type, ...]], params: dict) -> Any:
        """The INVALID_PARAMS error for ``params``, or None when they are acceptable."""
        Error = self._error
        for name in wire:
            if name not in params:
                return Error(
                    ErrorCode.INVALID_PARAMS, f"method {method}: parameter {name} not given", None
                )
        extra = [name for name in params if name not in wire]
        if extra:
            return Error(
                ErrorCode.INVALID_PARAMS, f"{method}: extra parameters: {', '.join(extra)}", None
            )
        for name, types in wire.items():
            value = params[name]
            if not _type_ok(value, types):
                return Error(
                    ErrorCode.INVALID_PARAMS,
                    f"method {method}: parameter {name}: want {_describe_types(types)}, got {type(value)}",
                    None,
                )
        return None

    def _dispatch_server_info_query(self, tvm_version: str) -> dict[str, Any]:
        info = self._handler.server_info_query(tvm_version)
        if hasattr(info, "_asdict"):
            reply = dict(info._asdict())
        elif isinstance(info, dict):
            reply = dict(info)
        else:
            raise TypeError(f"server_info_query must return a ServerInfo; got {type(info)}")
        if reply.get("model_library_format_path") is not None:
            reply["model_library_format_path"] = str(reply["model_library_format_path"])
        reply["project_options"] = [
            dict(opt._asdict()) if hasattr(opt, "_asdict") else dict(opt)
            for opt in reply.get("project_options") or []
        ]
        reply.setdefault("protocol_version", self._PROTOCOL_VERSION)
        return reply

    def _dispatch_generate_project(
        self,
        model_library_format_path: str,
        standalone_crt_dir: str,
        project_dir: str,
        options: dict,
    ) -> Any:
        return self._handler.generate_project(
            pathlib.Path(model_library_format_path),
            pathlib.Path(standalone_crt_dir),
            pathlib.Path(project_dir),
            options,
        )

    def _dispatch_build(self, options: dict) -> Any:
        return self._handler.build(options=options)

    def _dispatch_flash(self, options: dict) -> Any:
        return self._handler.flash(options=options)

    def _dispatch_open_transport(self, options: dict) -> dict[str, Any]:
        result = self._handler.open_transport(options)
        if isinstance(result, dict):
            if "timeouts" not in result:
                raise TypeError("open_transport returned a dict without 'timeouts'")
            reply = {"timeouts": _as_json_obj(result["timeouts"])}
            for key, value in result.items():
                if key != "timeouts":
                    reply[key] = _as_json_obj(value)
            return reply
        if hasattr(result, "_asdict"):
            return {"timeouts": dict(result._asdict())}
        raise TypeError(f"open_transport must return TransportTimeouts; got {type(result)}")

    def _dispatch_close_transport(self) -> Any:
        return self._handler.close_transport()

    def _dispatch_read_transport(self, n: int, timeout_sec: float | None) -> dict[str, str]:
        if n < 1:
            raise _InvalidParams(f"parameter n: want at least 1, got {n}")
        if timeout_sec is not None and timeout_sec < 0:
            raise _InvalidParams(f"parameter timeout_sec: want >= 0 or None, got {timeout_sec}")
        data = self._handler.read_transport(n, timeout_sec)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"read_transport must return bytes; got {type(data)}")
        return {"data": Base85Text(b85encode(data).decode("ascii"))}

    def _dispatch_write_transport(self, data: str, timeout_sec: float | None) -> None:
        if timeout_sec is not None and timeout_sec < 0:
            raise _InvalidParams(f"parameter timeout_sec: want >= 0 or None, got {timeout_sec}")
        try:
            raw = b85decode(data)
        except ValueError as exc:
            raise _InvalidParams(f"parameter data: not valid base85 ({exc})") from None
        self._handler.write_transport(raw, timeout_sec)
        return None


class _InvalidParams(Exception):
    """A parameter has the right type but a bad value."""


def _as_json_obj(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "_asdict"):
        return dict(value._asdict())
    return value


class _MethodTable(dict):
    """jsonrpcserver's method mapping: our 8 methods, plus an exact 'no such method' reply."""

    def __init__(self, server: ProjectAPIServer):
        super().__init__()
        self._error = server._error
        signature = inspect.Signature([inspect.Parameter("params", inspect.Parameter.VAR_KEYWORD)])
        for name in _WIRE_TYPES:
            method = _bind_method(server, name)
            method.__signature__ = signature  # type: ignore[attr-defined]
            self[name] = method

    def __missing__(self, name: str) -> Any:
        error = self._error

        def not_found(**params: Any) -> Any:
            return error(ErrorCode.METHOD_NOT_FOUND, f"{name}: no such method", None)

        return not_found


def _bind_method(server: ProjectAPIServer, name: str) -> Any:
    def method(**params: Any) -> Any:
        return server._call(name, params)

    method.__name__ = name
    return method


def main(handler: ProjectAPIHandler, argv: list[str] | None = None) -> None:
    """Run ``handler`` as a Project API server on the pipes named by ``--read-fd``/``--write-fd``."""
    parser = argparse.ArgumentParser(description="Project API server (launched by the client)")
    parser.add_argument("--read-fd", type=int, required=True, help="fd to read requests from")
    parser.add_argument("--write-fd", type=int, required=True, help="fd to write replies to")
    parser.add_argument("--debug", action="store_true", help="log every request at DEBUG level")
    args = parser.parse_args(argv)
    # A server needs no BLAS; if numpy gets imported (base85, or by the template), OpenBLAS's
    # worker threads would otherwise compete with the device for CPU (measured: the FIFO echo's
    # round trip went from ~20 us to 60-400 us on a 2-core machine).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, stream=sys.stderr)
    for fd in (args.read_fd, args.write_fd):
        try:
            os.fstat(fd)
        except OSError as exc:
            parser.error(f"fd {fd} is not open ({errno.errorcode.get(exc.errno, exc.errno)})")
    read_file = os.fdopen(args.read_fd, "rb", buffering=0)
    write_file = os.fdopen(args.write_fd, "wb", buffering=0)
    server = ProjectAPIServer(read_file, write_file, handler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        _LOG.info("interrupted; stopping")
    finally:
        read_file.close()
        write_file.close()
