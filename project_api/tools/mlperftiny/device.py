"""The benchmark's UART protocol (mlcommons/tiny ``benchmark/api``) from the host side:
:class:`Device` over any :class:`~project_api.api.transport.Transport` (the template's: build/main
on FIFOs, QEMU's UART, a serial port). Commands end in ``%``; replies are ``\\r\\n`` lines up to
``m-ready``. Its replies are read strictly (each command's lines, :func:`_infer_reply`) so that
recovery (:mod:`project_api.tools.mlperftiny.recovery`) can tell damage from an answer.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from project_api.api.transport import Transport
from project_api.errors import IoTimeoutError, ProjectAPIError, TransportClosedError
from project_api.micro.recovery import (
    DEFAULT_QUIET_SEC,
)

#: Longest command the device takes, terminator excluded (EE_CMD_SIZE).
CMD_SIZE = 80
#: Bytes per ``db HH...`` command (2 hex digits each, "db " in front: 67 characters).
DB_CHUNK_BYTES = 32
#: Bytes per ``m-buffer-..`` line of ``db print``.
DB_PRINT_BYTES = 8

class MlperfTinyError(ProjectAPIError):
    """The device or the data broke the benchmark's protocol or rules."""


class DeviceTimeoutError(MlperfTinyError):
    """The device stopped answering; the message names the last command sent."""


class LinkClosedError(DeviceTimeoutError):
    """The device's link closed (the device process ended, the emulator died, a port vanished)."""


class MalformedReplyError(MlperfTinyError):
    """A reply line is not what the protocol allows; the message quotes it."""


class DeviceError(MlperfTinyError):
    """The device answered ``e-[...]``; :attr:`device_message` is that text."""

    def __init__(self, command: str, device_message: str):
        super().__init__(f"the device refused {command!r}: {device_message}")
        self.command = command
        self.device_message = device_message


class IntegrityError(MlperfTinyError):
    """What the device holds or said does not check out (a load's CRC, two ``results`` answers
    that differ, implausible laps): damage on the link. :attr:`kind` names it for the counts."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class InferResult:
    """One ``infer N W``: the two laps and the results line."""

    iterations: int
    warmups: int
    start_us: int
    end_us: int
    results: list[float]
    results_line: str = ""  #: the ``m-results-[...]`` line as it came

    @property
    def elapsed_us(self) -> int:
        return self.end_us - self.start_us


_RESULTS = re.compile(r"^m-results-\[(.*)\]$")
_LAP = re.compile(r"^m-lap-us-(\d+)$")
_MESSAGE = re.compile(r"^(m-|e-\[)[\x20-\x7e]*$")
_DB_CRC = re.compile(r"^m-db-crc-\[(\d+),(\d+),([0-9a-f]{8})\]$")
_BUFFER = re.compile(r"^m-buffer-([0-9a-f]{2}(?:-[0-9a-f]{2}){0,7})$")
_NUMBER = r"-?(?:\d+\.\d+|nan|inf)"
_RESULTS_STRICT = re.compile(rf"^m-results-\[(?:{_NUMBER}(?:,{_NUMBER})*)?\]$")
_NONCE = re.compile(r"^[a-z][a-z0-9]{0,38}$")

#: What a reply line may be: an exact text or a pattern it must match whole.
Expected = str | re.Pattern[str]


def _parse_results(line: str) -> list[float]:
    m = _RESULTS.match(line)
    if m is None:
        raise MalformedReplyError(f"malformed results line {line!r}")
    try:
        return [float(v) for v in m.group(1).split(",")] if m.group(1) else []
    except ValueError:
        raise MalformedReplyError(f"malformed results line {line!r}") from None


def _fits(line: str, want: Expected) -> bool:
    return line == want if isinstance(want, str) else want.fullmatch(line) is not None


def _shown(want: Expected) -> str:
    return repr(want) if isinstance(want, str) else repr(want.pattern.strip("^$"))


def _buffer_bytes(line: str) -> bytes | None:
    """The bytes of one ``m-buffer-hh-hh-..`` line of ``db print``, or None if it is not one."""
    m = _BUFFER.fullmatch(line)
    return bytes.fromhex(m.group(1).replace("-", "")) if m else None


class Device:
    """The benchmark's protocol over an open ``transport``.

    ``timeout_sec`` bounds the wait for each reply line of ordinary commands; :meth:`infer`
    takes its own. ``log`` receives ``(direction, text)`` for every command and line.
    A command may also be given a quick wait (``wait_sec``): its whole reply is declared lost
    once that long passed since it was sent *and* the link has been quiet for ``quiet_sec``
    (a reply still arriving is never cut off); the per-line limit stays the ceiling.
    """

    def __init__(self, transport: Transport, timeout_sec: float = 10.0,
                 log: Callable[[str, str], None] | None = None,
                 timeout_advice: str | None = None, quiet_sec: float = DEFAULT_QUIET_SEC):
        self.transport = transport
        self.timeout_sec = timeout_sec
        self.log = log
        #: How a message about a reply later than ``timeout_sec`` says to wait longer.
        self.timeout_advice = timeout_advice or "Device(timeout_sec=SECONDS) in Python"
        self.quiet_sec = quiet_sec
        self._buffer = b""
        self.last_command: str | None = None
        self.boot_lines: list[str] = []
        #: Bytes read from the device so far (a resync tells a silent device from a noisy one).
        self.bytes_received = 0
        #: Seconds from the last command's write to its ``m-ready``.
        self.last_reply_sec = 0.0
        #: Seconds the last wait that failed had lasted (from its command's write).
        self.last_wait_sec = 0.0
        self._sent_at = 0.0
        self._last_byte_at = 0.0
        #: The reply lines of the last command read so far (those a strict reply accepted):
        #: after a wait that failed, what had come.
        self.partial: list[str] = []

    # ---- lines ----
    def _read_line(self, timeout_sec: float, waiting_for: str,
                   quick: tuple[float, float] | None = None) -> str:
        """The next line. ``timeout_sec`` bounds the wait for it; ``quick`` is ``(deadline,
        limit)`` of the whole reply's quick wait (see the class doc)."""
        line_deadline = time.monotonic() + timeout_sec
        while b"\n" not in self._buffer:
            now = time.monotonic()
            until = line_deadline
            if quick is not None:
                if now >= quick[0]:
                    quiet_end = max(self._last_byte_at, self._sent_at) + self.quiet_sec
                    if quiet_end <= now:
                        raise self._lost(quick[1], waiting_for)
                    until = min(until, quiet_end)
                else:
                    until = min(until, quick[0])
            left = until - now
            if left <= 0:
                raise self._silent(timeout_sec, waiting_for)
            try:
                data = self.transport.read(4096, left)
            except IoTimeoutError:
                continue
            except TransportClosedError:
                self.last_wait_sec = time.monotonic() - self._sent_at
                raise LinkClosedError(
                    f"the device closed the connection {self._after()} (waiting for "
                    f"{waiting_for})") from None
            if data:
                self._last_byte_at = time.monotonic()
                self.bytes_received += len(data)
                self._buffer += data
        raw, self._buffer = self._buffer.split(b"\n", 1)
        line = raw.rstrip(b"\r").decode("ascii", errors="replace")
        if self.log is not None:
            self.log("<", line)
        return line

    def _after(self) -> str:
        return (f"after {self.last_command!r}" if self.last_command is not None
                else "before any command")

    def _silent(self, timeout_sec: float, waiting_for: str) -> DeviceTimeoutError:
        self.last_wait_sec = time.monotonic() - self._sent_at
        how = (f"if it needs longer, wait longer ({self.timeout_advice})"
               if timeout_sec == self.timeout_sec else
               "that wait allows three times the device time the command asks for")
        return DeviceTimeoutError(f"the device stopped answering {self._after()}: no {waiting_for} "
                                  f"within {timeout_sec:g} s; {how}, else reset the device")

    def _lost(self, limit_sec: float, waiting_for: str) -> DeviceTimeoutError:
        self.last_wait_sec = time.monotonic() - self._sent_at
        return DeviceTimeoutError(
            f"no {waiting_for} {self._after()} within {limit_sec:.3g} s (a wait sized from the "
            f"replies measured so far, and {self.quiet_sec:g} s of silence: a lost reply is "
            "noticed quickly)")

    def _write(self, text: str) -> None:
        if self.log is not None:
            self.log(">", text)
        self._sent_at = time.monotonic()
        self.transport.write(text.encode("ascii"), self.timeout_sec)

    def drop_input(self) -> None:
        """Forget bytes read but not yet taken (after the link was reopened)."""
        self._buffer = b""

    def wait_ready(self, timeout_sec: float | None = None) -> list[str]:
        """Lines up to the next ``m-ready`` (the start-up lines after a boot)."""
        lines = []
        while (line := self._read_line(timeout_sec or self.timeout_sec, "m-ready")) != "m-ready":
            lines.append(line)
        return lines

    def start(self, timeout_sec: float | None = None) -> list[str]:
        """Read the start-up lines up to ``m-ready``. A device that printed them before we
        connected (a board already running) is sent ``name``; lines up to its answer are
        skipped, so a late start-up banner cannot put replies out of step."""
        try:
            self.boot_lines = self.wait_ready(timeout_sec or self.timeout_sec)
            return self.boot_lines
        except DeviceTimeoutError as err:
            if isinstance(err, LinkClosedError):
                raise
        self.last_command = "name"
        self._write("name%")
        lines: list[str] = []
        named = False
        while True:
            line = self._read_line(self.timeout_sec, "the reply to 'name'")
            if line.startswith("m-name-"):
                named = True
            elif line == "m-ready" and named:
                break
            elif line != "m-ready":
                lines.append(line)
        self.boot_lines = lines
        return lines

    def command(self, text: str, timeout_sec: float | None = None,
                free_text: bool = False, *, wait_sec: float | None = None,
                expect: Sequence[Expected] | None = None,
                first_line_sec: float | None = None) -> list[str]:
        """Send ``text%``; return the reply lines before ``m-ready``. An ``e-[...]`` line raises
        :class:`DeviceError`; a line that is no message raises :class:`MalformedReplyError`
        unless ``free_text`` (``help``).

        ``wait_sec`` is a quick wait for the whole reply (see the class doc), ``first_line_sec``
        one for its first line (``infer`` prints one before it computes). ``expect`` makes
        the reply strict: its lines must be exactly these (texts, or patterns matched whole),
        and the first line that is not (a damaged ``m-ready`` too) raises at once, as
        :class:`DeviceError` for an ``e-[...]`` line, leaving the rest of the reply unread:
        resync (:meth:`sync`) before the next command."""
        if "%" in text or len(text) > CMD_SIZE:
            raise MlperfTinyError(f"command {text[:40]!r}... is longer than {CMD_SIZE} characters"
                                  if len(text) > CMD_SIZE else f"command {text!r} contains '%'")
        self.last_command = text
        self._write(text + "%")
        lines: list[str] = []
        self.partial = lines
        error: str | None = None
        timeout = timeout_sec or self.timeout_sec
        quick = (self._sent_at + wait_sec, wait_sec) if wait_sec else None
        first = (self._sent_at + first_line_sec, first_line_sec) if first_line_sec else quick
        if first is not None and quick is not None and quick[0] < first[0]:
            first = quick
        while (line := self._read_line(timeout, "m-ready", quick if lines else first)) != "m-ready":
            if line.startswith("e-["):
                error = error or (line[3:-1] if line.endswith("]") else line[3:])
                if expect is not None:
                    raise DeviceError(text, error)
            elif expect is not None:
                if len(lines) >= len(expect) or not _fits(line, expect[len(lines)]):
                    raise MalformedReplyError(
                        f"unexpected reply to {text!r}: {line!r} (expected "
                        f"{', '.join(map(_shown, expect)) or 'nothing'} before m-ready)")
            elif not free_text and _MESSAGE.match(line) is None:
                raise MalformedReplyError(f"malformed reply to {text!r}: {line!r}")
            lines.append(line)
        self.last_reply_sec = time.monotonic() - self._sent_at
        if error is not None:
            raise DeviceError(text, error)
        if expect is not None and len(lines) != len(expect):
            raise MalformedReplyError(
                f"the reply to {text!r} ended after {lines!r}; expected "
                f"{', '.join(map(_shown, expect))}")
        return lines

    def sync(self, nonce: str, wait_sec: float, timeout_sec: float | None = None) -> list[str]:
        """Bring the device back in step after a link fault: send ``<nonce>x%`` (which ends any
        command it was receiving, spoiling its last word) and ``<nonce>%``, a command no
        firmware knows, and drop every line up to its echo ``e-[Unknown command: <nonce>]``
        and the ``m-ready`` after it. Returns the dropped lines. ``wait_sec`` is the quick wait
        for the echo (see the class doc), ``timeout_sec`` the limit for each line (default
        :attr:`timeout_sec`)."""
        if _NONCE.fullmatch(nonce) is None:
            raise MlperfTinyError(f"sync word {nonce!r} must be a lowercase letter and up to 38 "
                                  "letters or digits")
        self.last_command = nonce
        echo = f"e-[Unknown command: {nonce}]"
        self._write(f"{nonce}x%{nonce}%")
        quick = (self._sent_at + wait_sec, wait_sec)
        each = timeout_sec or self.timeout_sec
        dropped: list[str] = []
        first = 0  # the reply to '<nonce>x': 1 its line came, 2 its m-ready too
        while (line := self._read_line(each, f"the echo of {nonce!r}", quick)) != echo:
            # A damaged echo is told at once (else its loss would be waited out): a line that
            # holds the nonce but is not the echo, or any line but the echo after the reply
            # to '<nonce>x' (which a device holding no half command echoes too).
            if first == 2 or (nonce in line and f"{nonce}x" not in line):
                raise MalformedReplyError(f"the echo of {nonce!r} came damaged: {line!r}")
            if f"{nonce}x" in line:
                first = 1
            elif first == 1 and line == "m-ready":
                first = 2
            dropped.append(line)
        line = self._read_line(each, "m-ready", quick)
        if line != "m-ready":
            raise MalformedReplyError(f"the echo of {nonce!r} was followed by {line!r}, not "
                                      "m-ready")
        self.last_reply_sec = time.monotonic() - self._sent_at
        return dropped

    # ---- commands ----
    def name(self) -> str:
        for line in self.command("name"):
            if m := re.match(r"^m-name-(.*)$", line):
                return m.group(1)
        raise MalformedReplyError("no m-name-... line in the reply to 'name'")

    def profile(self) -> dict[str, str]:
        found = {}
        for line in self.command("profile"):
            if m := re.match(r"^m-(profile|model)-\[(.*)\]$", line):
                found[m.group(1)] = m.group(2)
        if set(found) != {"profile", "model"}:
            raise MalformedReplyError("the reply to 'profile' lacks m-profile-[...] or "
                                      "m-model-[...]")
        return found

    def load(self, data: bytes) -> None:
        """``db load N`` and ``db HH...`` commands until ``m-load-done`` (nothing verified:
        :class:`LinkRecovery` loads with checks)."""
        if not data:
            raise MlperfTinyError("no input bytes to load")
        reply = self.command(f"db load {len(data)}")
        if f"m-[Expecting {len(data)} bytes]" not in reply:
            raise MalformedReplyError(f"unexpected reply to 'db load {len(data)}': {reply!r}")
        for i in range(0, len(data), DB_CHUNK_BYTES):
            reply = self.command("db " + data[i:i + DB_CHUNK_BYTES].hex())
            last = i + DB_CHUNK_BYTES >= len(data)
            if last != ("m-load-done" in reply):
                raise MalformedReplyError(
                    f"m-load-done {'missing after the last' if last else 'before the last'} "
                    f"db command ({i + DB_CHUNK_BYTES} of {len(data)} bytes sent)")

    def db_crc(self, wait_sec: float | None = None) -> tuple[int, int, int]:
        """``db crc`` (project-api's command): (bytes loaded since ``db load N``, that N, their
        CRC-32)."""
        (line,) = self.command("db crc", wait_sec=wait_sec, expect=[_DB_CRC])
        m = _DB_CRC.fullmatch(line)
        assert m is not None
        return int(m.group(1)), int(m.group(2)), int(m.group(3), 16)

    def db_print(self, wait_sec: float | None = None) -> list[str]:
        """``db print``: the reference's dump of the whole buffer, its lines as they came
        (``m-buffer-hh-hh-...``, 8 bytes each; damaged ones too)."""
        return self.command("db print", free_text=True, wait_sec=wait_sec)

    def timestamp(self, wait_sec: float | None = None) -> int:
        """``timestamp``: the device's microsecond clock."""
        (line,) = self.command("timestamp", wait_sec=wait_sec, expect=[_LAP])
        return int(line[len("m-lap-us-"):])

    def infer(self, iterations: int, warmups: int, timeout_sec: float, *,
              wait_sec: float | None = None, strict: bool = False,
              first_line_sec: float | None = None) -> InferResult:
        """``infer N W``. ``strict``: the reply must be exactly its eight lines, in order.
        ``wait_sec`` and ``first_line_sec``: quick waits (see :meth:`command`)."""
        text = f"infer {iterations} {warmups}"
        if strict:
            lines = self.command(text, timeout_sec, wait_sec=wait_sec,
                                 expect=_infer_reply(iterations, warmups),
                                 first_line_sec=first_line_sec)
        else:
            lines = self.command(text, timeout_sec, wait_sec=wait_sec)
        return _infer_result(iterations, warmups, lines)

    def reset(self) -> None:
        """``reset``: the model's state back to its values at boot (project-api's command;
        firmware of a stateless model answers it too, with nothing to do)."""
        if "m-reset-done" not in self.command("reset"):
            raise MalformedReplyError("no m-reset-done in the reply to 'reset'")

    def results(self) -> list[float]:
        lines = [line for line in self.command("results") if line.startswith("m-results-")]
        if len(lines) != 1:
            raise MalformedReplyError("no m-results-[...] line in the reply to 'results'")
        return _parse_results(lines[0])


def _infer_reply(iterations: int, warmups: int) -> list[Expected]:
    """The lines of the reply to ``infer N W``, before its m-ready, in order."""
    return [f"m-warmup-start-{warmups}", "m-warmup-done", f"m-infer-start-{iterations}",
            _LAP, _LAP, "m-infer-done", _RESULTS_STRICT]


def _infer_result(iterations: int, warmups: int, lines: Sequence[str]) -> InferResult:
    """An :class:`InferResult` from the reply lines of ``infer N W``."""
    laps = [int(m.group(1)) for line in lines if (m := _LAP.match(line))]
    expect = [f"m-warmup-start-{warmups}", "m-warmup-done", f"m-infer-start-{iterations}",
              "m-infer-done"]
    missing = [e for e in expect if e not in lines]
    results = [line for line in lines if line.startswith("m-results-")]
    if missing or len(laps) != 2 or len(results) != 1:
        raise MalformedReplyError(
            f"reply to 'infer {iterations} {warmups}' lacks "
            f"{', '.join(missing) or 'two m-lap-us-T lines and one m-results line'}: "
            f"{lines!r}")
    return InferResult(iterations, warmups, laps[0], laps[1], _parse_results(results[0]),
                       results[0])

def _infer_timeout(device_s: float, wall_per_device: float) -> float:
    return 30.0 + 3.0 * device_s * max(1.0, wall_per_device)
