"""The one exception tree of project-api.

Everything this package raises on purpose derives from :class:`ProjectAPIError`::

    ProjectAPIError
    ├── JSONRPCError                    an error reply from a Project API server (has .code, .data)
    │   └── ServerError                 code -32000; travels by class name, with a traceback in data
    │       ├── TransportClosedError    the byte channel to the device is gone
    │       ├── IoTimeoutError          a transport read or write timed out
    │       ├── UnsupportedTVMVersionError
    │       └── TemplateStepError       a template step failed; carries a one-line ``detail``
    │           ├── BuildError          the build command failed (first compiler error, log path)
    │           ├── FlashError          flashing failed, or there is nothing built to flash
    │           ├── MissingProgramError a program the step needs is not installed
    │           └── OptionValueError    the template refuses an option's value (a usage error)
    ├── ClientError                     the client could not talk to its server
    │   ├── ProjectAPIServerNotFoundError
    │   ├── ConnectionShutdownError
    │   ├── ServerExitedError           the server process died; carries exit status + stderr tail
    │   ├── MalformedReplyError
    │   ├── MismatchedIdError
    │   └── UnsupportedProtocolVersionError
    ├── ProjectError                    misuse of a template or generated project
    │   ├── OptionError                 an option is unknown, missing, mistyped or not a choice
    │   ├── NotATemplateProjectError
    │   └── TemplateProjectError
    ├── MLFError                        a Model Library Format archive is invalid or unsafe
    ├── ValidationError                 bad samples or references, a device model unlike its archive
    ├── SessionError                    the RPC session with the device failed
    │   ├── SessionTimeoutError
    │   ├── SessionTerminatedError      the device ended (or restarted) the session
    │   ├── SessionDesyncError          a frame was lost or a reply did not fit its request
    │   ├── SessionLinkClosedError      the device link closed under the session
    │   ├── RetriesExhaustedError       recovery gave up on a sample or a run
    │   └── RPCError                    the device reported an error for a call
    └── EmitError                       a model cannot be turned into C
        └── UnsupportedOperatorError

The JSON-RPC part keeps microTVM v0.15's names and wire behaviour: a ``ServerError`` subclass is
sent as ``{"code": -32000, "message": "<ClassName>", "data": {"traceback": ...}}`` and rebuilt as
the same class on the client. Unlike the reference, an error code the client does not know becomes
a plain :class:`JSONRPCError` instead of an ``AssertionError``.
"""

from __future__ import annotations

import enum
import traceback
from typing import Any


class ProjectAPIError(Exception):
    """Root of every error that project-api raises deliberately."""


class ErrorCode(enum.IntEnum):
    """JSON-RPC 2.0 error codes, plus the Project API's server error."""

    SERVER_ERROR = -32000
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603


class JSONRPCError(ProjectAPIError):
    """An error that travels as a JSON-RPC error object ``{code, message, data}``."""

    def __init__(self, code: int, message: str, data: Any = None, client_context: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.client_context = client_context

    def to_json(self) -> dict[str, Any]:
        """The wire form: ``{"code": .., "message": .., "data": ..}`` in that key order."""
        return {"code": int(self.code), "message": self.message, "data": self.data}

    def __str__(self) -> str:
        text = f"JSON-RPC error # {int(self.code)}: {self.message}"
        if isinstance(self.data, dict) and "traceback" in self.data:
            text += "\n" + str(self.data["traceback"])
        elif self.data:
            text += "\n" + repr(self.data)
        return text

    @classmethod
    def from_json(cls, client_context: str, json_error: dict[str, Any]) -> JSONRPCError:
        """Rebuild the error a server sent.

        A -32000 error whose message names a known :class:`ServerError` subclass comes back as
        that class. Any other code, known or not, gives a plain :class:`JSONRPCError`.
        """
        code = json_error.get("code")
        message = json_error.get("message")
        data = json_error.get("data")
        if not isinstance(message, str):
            message = repr(message)
        if code == ErrorCode.SERVER_ERROR:
            return ServerError.from_json(client_context, message, data)
        if not isinstance(code, int):
            return JSONRPCError(ErrorCode.INTERNAL_ERROR, f"malformed error code {code!r}: {message}", data)
        try:
            code = ErrorCode(code)
        except ValueError:
            pass
        return JSONRPCError(code, message, data, client_context=client_context)


def _all_subclasses(klass: type) -> list[type]:
    found: list[type] = []
    pending = list(klass.__subclasses__())
    while pending:
        sub = pending.pop(0)
        found.append(sub)
        pending.extend(sub.__subclasses__())
    return found


class ServerError(JSONRPCError):
    """An error raised inside a server's handler; always code -32000.

    A plain ``ServerError`` needs ``message=``. Subclasses must not pass one: their class name is
    their message, which is how they are recognised on the other side of the wire.
    """

    def __init__(self, message: str | None = None, data: Any = None, client_context: str | None = None):
        if type(self) is ServerError:
            if message is None:
                raise TypeError("ServerError needs message=")
        else:
            if message is not None:
                raise TypeError(f"{type(self).__name__} takes no message; its class name is its message")
            message = type(self).__name__
        super().__init__(ErrorCode.SERVER_ERROR, message, data, client_context=client_context)

    def __str__(self) -> str:
        text = super().__str__()
        if self.client_context:
            text = f"{self.client_context}: {text}"
        return text

    @classmethod
    def from_exception(cls, exc: BaseException, **kwargs: Any) -> ServerError:
        """Wrap an arbitrary exception, attaching its traceback as ``data``."""
        err = cls(**kwargs)
        err.set_traceback(exc.__traceback__)
        return err

    def set_traceback(self, tb: Any) -> None:
        """Put the formatted traceback ``tb`` in ``data`` unless data already carries one."""
        if isinstance(self.data, dict) and "traceback" in self.data:
            return
        lines = traceback.format_tb(tb) if tb is not None else []
        if lines:
            first, sep, rest = lines[0].partition("\n")
            lines[0] = first + "  # <--- Outermost server-side stack frame" + sep + rest
        text = "".join(lines)
        if self.data is None:
            self.data = {}
        if isinstance(self.data, dict):
            self.data["traceback"] = text

    @classmethod
    def from_json(cls, client_context: str, message: str, data: Any) -> ServerError:  # type: ignore[override]
        for sub in _all_subclasses(ServerError):
            if sub.__name__ == message:
                return sub(data=data, client_context=client_context)
        return ServerError(message=message, data=data, client_context=client_context)


class TransportClosedError(ServerError):
    """The transport to the device is closed: EOF, a broken pipe or a zero-byte write."""


class IoTimeoutError(ServerError):
    """A transport read or write did not complete before its timeout."""


class UnsupportedTVMVersionError(ServerError):
    """The server does not support the client's (TVM-compatible) version."""


class TemplateStepError(ServerError):
    """A template's build, flash or set-up step failed; ``detail`` says why in one line.

    On the wire it stays a ServerError subclass (message = class name); the detail travels in
    ``data["detail"]`` and as the last line of the traceback, so microTVM's client, which shows
    only the traceback, still shows it. ``data`` may carry more facts (e.g. ``"log"``: the path
    of the full build log).
    """

    def __init__(self, detail: str | None = None, data: Any = None,
                 client_context: str | None = None, **facts: Any):
        if detail is not None or facts:
            data = dict(data or {})
            if detail is not None:
                data["detail"] = detail
            data.update(facts)
        super().__init__(data=data, client_context=client_context)

    @property
    def detail(self) -> str:
        """The one-line reason (empty if the peer sent none)."""
        value = self.data.get("detail") if isinstance(self.data, dict) else None
        return str(value) if value else ""

    def set_traceback(self, tb: Any) -> None:
        super().set_traceback(tb)
        if self.detail and isinstance(self.data, dict):
            text = str(self.data.get("traceback") or "")
            line = f"{type(self).__name__}: {self.detail}"
            if not text.rstrip().endswith(line):
                self.data["traceback"] = text + line + "\n"

    def __str__(self) -> str:
        if not self.detail:
            return super().__str__()
        prefix = f"{self.client_context}: " if self.client_context else ""
        return f"{prefix}{self.detail}"


class BuildError(TemplateStepError):
    """Building the project failed; ``detail`` names the first compiler error and the log."""


class FlashError(TemplateStepError):
    """Flashing failed, or the project has not been built."""


class MissingProgramError(TemplateStepError):
    """A program a step needs (compiler, make, flasher) is not installed; ``detail`` says how."""


class OptionValueError(TemplateStepError):
    """The template refuses an option's value: out of its bounds, not one of its choices, of the
    wrong type, missing where required, or not fitting the board. ``detail`` names the option and
    the fix; the command line treats it as a usage error (exit status 2), as it does the
    :class:`OptionError` our client finds before calling."""


# --- client side -----------------------------------------------------------------------------


class ClientError(ProjectAPIError):
    """The client could not complete an exchange with its server."""


class ProjectAPIServerNotFoundError(ClientError):
    """A directory holds neither ``launch_microtvm_api_server.sh`` nor ``microtvm_api_server.py``."""


class ConnectionShutdownError(ClientError):
    """The connection to the server is closed."""


class ServerExitedError(ConnectionShutdownError):
    """The server process exited; the message gives its exit status and the tail of its stderr."""

    def __init__(self, message: str, returncode: int | None = None, stderr_tail: str = ""):
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class MalformedReplyError(ClientError):
    """The server's reply is not a valid JSON-RPC 2.0 response."""


class MismatchedIdError(ClientError):
    """The server's reply answers a different request id."""


class UnsupportedProtocolVersionError(ClientError):
    """The server speaks a Project API protocol version other than 1."""


# --- projects --------------------------------------------------------------------------------


class ProjectError(ProjectAPIError):
    """A template or generated project was used the wrong way."""


class OptionError(ProjectError, ValueError):
    """A project option is unknown, missing, of the wrong type or not one of its choices."""


class NotATemplateProjectError(ProjectError):
    """A directory used as a template reports ``is_template == False``."""


class TemplateProjectError(ProjectError):
    """A directory used as a generated project reports ``is_template == True``."""


class MLFError(ProjectAPIError, ValueError):
    """A Model Library Format archive is malformed, unsupported or unsafe to extract."""


class ValidationError(ProjectAPIError):
    """Bad samples, a bad reference, an unknown metric, or a device model that does not match
    its archive: a one-line ``<what>; <what to do>``."""


# --- device sessions -------------------------------------------------------------------------


class SessionError(ProjectAPIError):
    """The RPC session with the device failed."""


class SessionTimeoutError(SessionError, TimeoutError):
    """The handshake or a reply from the device did not arrive in time."""


class SessionTerminatedError(SessionError):
    """The device ended the session, typically because it restarted."""


class SessionDesyncError(SessionError):
    """Replies may no longer match requests: a frame was lost or damaged on the link, a reply
    was not the kind its request asks for, or an earlier wait was abandoned."""


class SessionLinkClosedError(SessionError):
    """The byte channel to the device closed under the session (the device died, exited or
    was unplugged)."""


class RetriesExhaustedError(SessionError):
    """Recovery gave up: a sample (or the run) used up its retries; the message says which and
    why. :attr:`stats` holds the run's recovery counters. :attr:`sample` names the sample that
    was given up when the run itself could go on (its retries in a row are used up, the link is
    fine); None when the run cannot (its budget is used up, no session starts). A runner that
    stops may attach what it got before in :attr:`partial`."""

    def __init__(self, message: str, stats: Any = None, sample: int | None = None):
        super().__init__(message)
        self.stats = stats
        self.sample = sample
        self.partial: Any = None


class RPCError(SessionError):
    """The device reported an error for a remote call."""


# --- emitter ---------------------------------------------------------------------------------


class EmitError(ProjectAPIError, ValueError):
    """A model cannot be turned into C: corrupt input or something the emitter does not support."""


class UnsupportedOperatorError(EmitError):
    """The model uses an operator, type or option the emitter does not implement."""
