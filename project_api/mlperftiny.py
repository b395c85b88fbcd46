"""MLPerf Tiny host runner: the benchmark's UART protocol (mlcommons/tiny ``benchmark/api``) from
the host side, over a project's own transport, and the performance and accuracy modes of the
EEMBC EnergyRunner, open.

:class:`Device` speaks the protocol over any :class:`~project_api.transport.Transport` (the
template's: build/main on FIFOs, QEMU's UART, a serial port): commands end in ``%``, replies are
``\\r\\n`` lines up to ``m-ready``. :func:`performance` and :func:`accuracy` run the two modes;
:func:`results_text` lays their reports out like a submission's ``results.txt``.

Recovery from link faults
-------------------------

The protocol has no integrity check: on a noisy UART a bit flip silently changes a hex digit of
a ``db HH..`` command (wrong input data) or a digit of an ``m-results-[...]`` line (a wrong
score), a lost ``%`` merges two commands, a damaged line hides ``m-ready``. With a
:class:`~project_api.micro.recovery.RetryPolicy` that is enabled (the default; ``--retries N``),
both modes run through :class:`LinkRecovery`, which adds, without changing the wire of any
command:

- **strict replies**: every reply must be exactly the lines its command gives (``db HH..``:
  nothing, or ``m-load-done`` after the last byte; ``infer N W``: the eight lines in order, its
  echoes naming N and W); anything else is a fault;
- **resync** after a fault: ``<nonce>x%<nonce>%`` ends any half-received command (the junk word
  spoils it rather than letting it run) and asks for a word no firmware knows; everything the
  device printed before its ``e-[Unknown command: <nonce>]`` is dropped, so the next reply is the
  next command's. A device silent through :attr:`~RetryPolicy.reopen_attempts` syncs (or garbled
  through :data:`NOISY_SYNC_ATTEMPTS`) gets its link reopened (close and open: the template's ``open_transport`` starts
  the emulator or the device process again, or reopens the port), up to
  :attr:`~RetryPolicy.restart_attempts` times; start-up lines seen on the way, or a reopen, mean
  the device lost its memory: the sample starts again;
- **verified loads**: after the last ``db`` command the host asks ``db crc`` (project-api's
  command: ``m-db-crc-[<loaded>,<size>,<crc32>]``) and compares the count and zlib's CRC-32 with
  what it meant to send. After a fault mid-load it asks ``db crc`` and resumes from the bytes
  the device holds when they are a prefix of the input (any length), else starts again with
  ``db load N``. A firmware without ``db crc`` (its ``e-[...]`` twice at set-up) is checked with
  the reference's ``db print`` instead (each 8-byte line counts once it came back equal; a line
  that comes back different twice alike means the buffer is wrong: load again);
- **verified results**: after ``infer`` the host asks ``results`` and accepts the values only
  when two answers agree, text for text (the ``infer`` reply's line is the first);
- **plausible laps** (performance mode): a window's two ``m-lap-us-T`` lines must lie between
  ``timestamp`` readings taken right before and after its ``infer``; the device time around
  the timed runs must be what the warm-ups (W x the window's time per inference, within
  :data:`WARMUP_SPREAD` either way) and four link turnarounds explain, within
  :data:`LAP_SLACK_SEC` more; and the time per inference must be within
  :data:`PLAUSIBLE_RATIO` of the probes'. A window that fails the last two is run again and
  taken when it agrees within 10 % with the one refused (a busy host's windows do; a damaged
  lap does not repeat). A flipped high digit of either lap (or of a timestamp) is caught and
  the window run again. A change smaller than that band cannot be told from the truth and
  is not caught: half the warm-ups' time plus 50 ms and four turnarounds (KWS on the host
  template, 10 warm-ups of 0.4 ms: about 0.05 s, 0.5 % of a 10 s window; a model of 100 ms an
  inference: 0.55 s), i.e. a flip in the lowest four or five digits of a lap; nor is a
  damaged window that a refused one happens to agree with within 10 %;
- **quick waits**: each reply is waited for what such a command was measured to take (a
  :class:`~project_api.micro.recovery.WaitEstimator` per command kind; ``infer`` from the wall
  time per inference measured, its first line, printed before any inference, as a short
  command's), times the policy's margin, at least its floor, and only once the link has been
  quiet; ``--timeout`` (and for ``infer`` the limit sized from the device time it asks for)
  stays the ceiling. An ``infer`` reply that began and then outlasts its wait (a host busier
  than measured) is waited for by the sync as long again, and taken when the rest comes whole
  (a "late reply", whose time the waits learn); a sync after any fault in an ``infer`` also
  waits that long for a device still computing before it takes silence for a dead device.

**Progress** of a sample is how far it got: (window, stage, bytes acknowledged by the device in
the current load plus bytes verified by ``db print``), the stages being the load, the ``infer``
answered and the results confirmed. A fault that comes further than every fault before it in
the sample resets its count; :attr:`~RetryPolicy.retries` faults in a row with no progress give
the sample up (named in the report; the run goes on and the CLI exits 1): a command the
device refuses whatever the link (``e-[Inference failed]``) ends that way too, since its
retries bring the sample no further. The run's budget is
:meth:`~RetryPolicy.run_budget`; set-up (sync, ``profile``, asking for ``db crc``) has its own
:attr:`~RetryPolicy.setup_retries`. A model whose state is carried from sample to sample
(``reset_state=False``) cannot be retried once an ``infer`` of the sample was sent (nobody knows
whether the state took it): the run stops there, naming the sample. Every fault is counted in a
:class:`~project_api.micro.recovery.RecoveryStats` (by kind: timeout, garbled reply, refused
command, load mismatch, results differ, implausible laps, link closed), with the time spent
waiting for lost replies and bringing the device back.

``RetryPolicy.disabled()`` (``--no-retry``) is the behaviour before recovery: the same commands
as the EnergyRunner sends, nothing verified, and the first fault ends the run.
"""

from __future__ import annotations

import csv
import itertools
import logging
import math
import os
import re
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from project_api.errors import IoTimeoutError, ProjectAPIError, TransportClosedError
from project_api.micro.recovery import (
    DEFAULT_QUIET_SEC,
    MAX_WAIT_RAISES,
    NOISY_REOPEN_ATTEMPTS,
    UNRAISED_TIMEOUTS,
    RecoveryStats,
    RetryPolicy,
    WaitEstimator,
    fault_kind,
)
from project_api.transport import Transport

_LOG = logging.getLogger(__name__)

#: Longest command the device takes, terminator excluded (EE_CMD_SIZE).
CMD_SIZE = 80
#: Bytes per ``db HH...`` command (2 hex digits each, "db " in front: 67 characters).
DB_CHUNK_BYTES = 32
#: The benchmark's rule: each performance window runs at least this long on the device.
MIN_WINDOW_SECONDS = 10.0
#: Windows (one input each) of a performance run, as the benchmark's scripts loop.
WINDOWS = 5
#: Warm-up inferences before each window (the benchmark's scripts use 10 for KWS and AD).
WARMUPS = 10
#: Model versions scored by AUC of a reconstruction error rather than top-1.
ANOMALY_MODELS = ("ad01",)
#: Bytes per ``m-buffer-..`` line of ``db print``.
DB_PRINT_BYTES = 8
#: Performance mode with recovery: a window's time per inference is plausible within this
#: factor of the probe's (either way).
PLAUSIBLE_RATIO = 4.0
#: ... and its device time around the timed runs (``infer``'s warm-ups, its lines, the link's
#: turnarounds) between (1 - WARMUP_SPREAD) x the warm-ups' time and (1 + WARMUP_SPREAD) x
#: it plus four turnarounds plus LAP_SLACK_SEC: a lap moved by more than that is caught.
WARMUP_SPREAD = 0.5
LAP_SLACK_SEC = 0.05
#: ``infer 1 0`` probes before a window when recovery is on (the longest counts: a probe whose
#: lap lost a high digit cannot make a window hours long).
PROBES = 2
#: Syncs tried while the device answers, garbled, before its link is reopened (as many as
#: validate's sessions).
NOISY_SYNC_ATTEMPTS = NOISY_REOPEN_ATTEMPTS
#: Lines a device prints when it starts: seen while resyncing, they mean it lost its memory.
BOOT_LINES = ("m-timestamp-mode-performance", "m-init-done")

Progress = Callable[[int, int], None]
T = TypeVar("T")


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


# ---- data ----

@dataclass
class Sample:
    """One data set entry: its name, true class and the inputs (windows) the device runs."""

    name: str
    label: int
    windows: list[bytes]


@dataclass
class ModelFacts:
    """What the runner checks inputs and labels against: the bytes one input may have, and
    the classes a true label may name (None: not known)."""

    input_bytes: tuple[int, ...]
    description: str
    classes: int | None = None
    classes_from: str = ""  #: where :attr:`classes` comes from, for messages
    #: Bytes of state the model keeps from one run to the next (0: stateless); the modes reset
    #: it before every sample unless told to carry it.
    state_size_bytes: int = 0


def model_facts(project_dir: str | Path) -> ModelFacts:
    """The input sizes the project's firmware takes (its input tensor's bytes and, for an int8
    input with quantization, float32 values, 4 bytes each, it quantizes itself), and the
    classes of its labels: the output's size for a classifier, 2 (normal, anomalous) for AD."""
    from project_api import mlf
    from project_api.template import options as saved_options
    from project_api.template.mlperftiny_model import MLPERFTINY_MODELS, mlperftiny_version

    lib = mlf.open_mlf(Path(project_dir) / "model")
    mod = next(iter(lib.modules.values()))
    t = mod.inputs[0]
    sizes = [t.size_bytes]
    desc = f"{t.name} {t.dtype} {'x'.join(map(str, t.shape or ()))} ({t.size_bytes} bytes"
    if t.dtype == "int8" and t.quantization:
        sizes.append(4 * t.size_bytes)
        desc += f", or {4 * t.size_bytes} bytes of float32"
    classes, source = None, ""
    try:
        version = mlperftiny_version(mod, saved_options.load_options(Path(project_dir)).get(
            "mlperftiny_model"))
    except ProjectAPIError:
        version = None
    if version is not None and MLPERFTINY_MODELS.get(version) == "reconstruction":
        classes, source = 2, f"{version}: 0 normal, 1 anomalous"
    elif mod.outputs and mod.outputs[0].shape:
        classes = int(np.prod(mod.outputs[0].shape))
        source = f"the model's output {mod.outputs[0].name!r} has {classes} classes"
    return ModelFacts(tuple(sizes), desc + ")", classes, source,
                      int(getattr(mod, "state_size_bytes", 0) or 0))


def _split(data: bytes, facts: ModelFacts, where: str) -> list[bytes]:
    for size in facts.input_bytes:
        if len(data) == size:
            return [data]
    for size in sorted(facts.input_bytes, reverse=True):
        if len(data) > size and len(data) % size == 0:
            return [data[i:i + size] for i in range(0, len(data), size)]
    raise MlperfTinyError(f"{where} has {len(data)} bytes; the model's input is "
                          f"{facts.description}: refused before sending")


def load_dataset(path: str | Path, facts: ModelFacts) -> list[Sample]:
    """The samples of ``path``: a folder with ``y_labels.csv`` and ``.bin`` files (the
    EnergyRunner's layout: ``file,classes,class[,window bytes,stride bytes]``), or an ``.npz``
    with ``x`` (samples first; each sample's bytes are one input or several back to back, e.g.
    AD windows) and ``y`` (the true classes). Every input is checked against the model."""
    path = Path(path)
    samples: list[Sample] = []
    if path.is_dir():
        labels = path / "y_labels.csv"
        if not labels.is_file():
            raise MlperfTinyError(f"{path} holds no y_labels.csv (file,classes,class[,window,"
                                  "stride] per line)")
        folder = path.resolve()
        with labels.open(newline="") as f:
            for row_no, row in enumerate(csv.reader(f), 1):
                if not row or not row[0].strip():
                    continue
                where = f"{labels}:{row_no}"
                if len(row) not in (3, 5):
                    raise MlperfTinyError(f"{where}: expected file,classes,class"
                                          f"[,window,stride], got {row!r}")
                name = row[0].strip()
                file = path / name
                if Path(name).is_absolute() or not file.resolve().is_relative_to(folder):
                    raise MlperfTinyError(f"{where}: {name!r} lies outside {path}; name the "
                                          "data files relative to the data folder, inside it")
                if not file.is_file():
                    raise MlperfTinyError(f"{where}: {file} does not exist")
                label = _label(row[2], where, facts)
                data = file.read_bytes()
                if len(row) == 5:
                    width = _whole(row[3], "window", where)
                    stride = _whole(row[4], "stride", where)
                    if width <= 0 or stride <= 0 or width > len(data):
                        raise MlperfTinyError(f"{labels}:{row_no}: window {width} / stride "
                                              f"{stride} do not fit {file.name} ({len(data)} "
                                              "bytes)")
                    windows = [data[s:s + width] for s in range(0, len(data) - width + 1, stride)]
                    for w in windows:
                        _split(w, facts, f"a window of {file.name}")
                else:
                    windows = _split(data, facts, file.name)
                samples.append(Sample(name, label, windows))
    elif path.suffix == ".npz" and path.is_file():
        with np.load(path) as z:
            if "x" not in z or "y" not in z:
                raise MlperfTinyError(f"{path} must hold arrays 'x' (inputs, samples first) and "
                                      f"'y' (true classes); it holds {sorted(z.files)}")
            x, y = z["x"], z["y"]
        if len(x) != len(y):
            raise MlperfTinyError(f"{path}: {len(x)} inputs but {len(y)} labels")
        for i in range(len(x)):
            data = np.ascontiguousarray(x[i]).astype(x.dtype.newbyteorder("<")).tobytes()
            label = _label(y[i], f"{path}: y[{i}]", facts)
            samples.append(Sample(f"sample {i}", label, _split(data, facts, f"sample {i}")))
    else:
        raise MlperfTinyError(f"{path} is neither a folder with y_labels.csv nor an .npz file")
    if not samples:
        raise MlperfTinyError(f"{path} holds no samples")
    return samples


def _whole(text: str, what: str, where: str) -> int:
    """An integer field of y_labels.csv, or MlperfTinyError quoting it."""
    try:
        return int(str(text).strip())
    except ValueError:
        raise MlperfTinyError(f"{where}: {what} {text!r} is not an integer; write whole numbers "
                              "in y_labels.csv (file,classes,class[,window,stride])") from None


def _label(value: Any, where: str, facts: ModelFacts) -> int:
    """A true class: an integer among the model's classes (when known)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise MlperfTinyError(f"{where}: class {value!r} is not an integer; give each sample's "
                              "true class as a whole number")
    label = _whole(value, "class", where) if isinstance(value, str) else value
    if facts.classes is not None and not 0 <= label < facts.classes:
        raise MlperfTinyError(f"{where}: class {label} is not one of the model's classes 0.."
                              f"{facts.classes - 1} ({facts.classes_from}); fix the label")
    return label


# ---- recovery from link faults ----

def link_fault_kind(err: BaseException) -> str | None:
    """The kind of link fault ``err`` is (for :class:`~project_api.micro.recovery.RecoveryStats`),
    or None for an error that retrying cannot mend (bad input, the run's own rules)."""
    if isinstance(err, IntegrityError):
        return err.kind
    if isinstance(err, LinkClosedError):
        return "link closed"
    if isinstance(err, DeviceTimeoutError):
        return "timeout"
    if isinstance(err, MalformedReplyError):
        return "garbled reply"
    if isinstance(err, DeviceError):
        return "refused command"
    return fault_kind(err)


@dataclass
class FailedSample:
    """A sample (a window in performance mode) given up after its retries."""

    index: int  #: 0-based, in the run's order
    name: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "reason": self.reason}


class _SampleFailed(Exception):
    """A sample used up its retries (the run goes on)."""


class _RunStopped(Exception):
    """The run cannot go on: its budget is used up, the device cannot be brought back, or a
    model that carries its state lost a sample."""


@dataclass
class _LoadState:
    """Where the load of one input stands on the device (kept over faults)."""

    data: bytes
    generation: int = 0  #: loads started from 'db load N' so far
    begun_epoch: int | None = None  #: the device epoch of the last 'db load N'
    acked: int = 0  #: bytes the device acknowledged since
    verified: tuple[int, int] | None = None  #: (epoch, resyncs) when last verified
    printed: set[int] = field(default_factory=set)  #: db print lines that came back equal
    wrong: dict[int, bytes] = field(default_factory=dict)  #: ... and ones that did not

    def restart(self) -> None:
        self.generation += 1
        self.acked = 0
        self.verified = None
        self.printed.clear()
        self.wrong.clear()

    @property
    def amount(self) -> int:
        """How far the load got (for progress): bytes acknowledged plus bytes printed back."""
        return self.acked + DB_PRINT_BYTES * len(self.printed)


@dataclass
class _Answers:
    """The results answers of one window's ``infer`` (kept over faults)."""

    lines: list[str] = field(default_factory=list)
    epoch: int | None = None
    generation: int | None = None  #: the load generation they were computed from
    resyncs: int = 0  #: the resync count when the last answer came


class LinkRecovery:
    """A run's recovery from link faults over a :class:`Device`, under ``policy`` (see the
    module doc): the counts (:attr:`stats`), the budgets, the quick waits, resync and reopening,
    and the checked commands the modes use. ``reopen`` reopens the device's link (default: the
    transport's own ``close()`` and ``open()``). ``samples`` sizes the run's budget."""

    def __init__(self, device: Device, policy: RetryPolicy, samples: int,
                 reopen: Callable[[], None] | None = None) -> None:
        if not policy.enabled:
            raise ValueError("LinkRecovery needs an enabled RetryPolicy")
        self.device = device
        self.policy = policy
        self.stats = RecoveryStats()
        self.budget = policy.run_budget(samples)
        self.waits: WaitEstimator | None = (
            WaitEstimator(policy.wait_floor_sec, policy.wait_margin,
                          min(policy.wait_floor_sec, DEFAULT_QUIET_SEC))
            if policy.quick_waits else None)
        if self.waits is not None:
            device.quiet_sec = self.waits.quiet_sec
        self._reopen_link = reopen
        #: Bumped whenever the device lost its memory (link reopened, start-up lines seen).
        self.epoch = 0
        #: Successful resyncs so far (what was verified before one is checked again after it).
        self.resyncs = 0
        #: Whether the firmware has ``db crc`` (None: not asked yet).
        self.has_db_crc: bool | None = None
        #: Loads resumed mid-way after a fault (``db crc`` showed an intact prefix).
        self.resumed_loads = 0
        self.dirty = False  # a fault left the device out of step: sync before the next command
        self._tag = os.urandom(3).hex()
        self._count = itertools.count(1)
        self._best: tuple[int, ...] | None = None
        self._stuck = 0
        self._setup_faults = 0
        self._wall_per_inference: tuple[int, float] | None = None  # (inferences, seconds each)
        self._busy_until = 0.0  # when the device should be done with the last command sent
        self._turnarounds: list[int] = []  # device microseconds between two timestamps

    # ---- waits ----
    def _limit(self, key: tuple[Any, ...], wire_bytes: int) -> float | None:
        return self.waits.limit(key, wire_bytes) if self.waits is not None else None

    def _observe(self, key: tuple[Any, ...], text: str, lines: Sequence[str],
                 computes: bool = False) -> None:
        if self.waits is not None:
            wire = len(text) + 1 + sum(len(line) + 2 for line in lines) + len("m-ready\r\n")
            self.waits.observe(key, wire, self.device.last_reply_sec, computes)

    def send(self, text: str, expect: Sequence[Expected], key: tuple[Any, ...] | None = None,
             reply_bytes: int = 16) -> list[str]:
        """``text`` with a quick wait and a strict reply (:meth:`Device.command`)."""
        key = key or (text,)
        lines = self.device.command(text, wait_sec=self._limit(key, len(text) + 1 + reply_bytes),
                                    expect=expect)
        self._observe(key, text, lines)
        return lines

    def _infer_limit(self, runs: int) -> float | None:
        """The quick wait of an ``infer`` of ``runs`` inferences (warm-ups included)."""
        if self.waits is None or self._wall_per_inference is None:
            return None
        latency = self.waits.latency or 0.0
        predicted = latency + runs * self._wall_per_inference[1]
        return max(self.waits.floor_sec, self.waits.margin * predicted) * self.waits.scale

    def infer(self, iterations: int, warmups: int, device_sec: float | None = None) -> InferResult:
        """``infer N W`` with a strict reply; its wait sized from the wall time per inference
        measured so far, under :func:`_infer_timeout` of ``device_sec`` (device time the
        command asks for; None: not known yet)."""
        runs = iterations + warmups
        ceiling = _infer_timeout(device_sec if device_sec is not None else 60.0, 1.0)
        if self._wall_per_inference is not None and device_sec is not None:
            ceiling = _infer_timeout(device_sec, max(1.0, self._wall_per_inference[1] * runs
                                                     / max(device_sec, 1e-9)))
        limit = self._infer_limit(runs)
        sent = time.monotonic()
        # A sync after a fault in this command waits for a device still computing (as long
        # as the command's quick wait; --timeout before anything was measured), rather than
        # take its silence for a dead device.
        patience = limit if limit is not None else self.device.timeout_sec
        self._busy_until = sent + patience
        # m-warmup-start-W comes before any inference: its wait is a short command's.
        first = self._limit(("first line",), 40)
        try:
            res = self.device.infer(iterations, warmups, ceiling, wait_sec=limit, strict=True,
                                    first_line_sec=first)
            took = self.device.last_reply_sec
        except DeviceTimeoutError as err:
            if isinstance(err, LinkClosedError) or not self.device.partial:
                raise
            self._busy_until = time.monotonic() + patience  # one more wait as long
            res = self._late_reply(iterations, warmups, err)
            took = time.monotonic() - sent
        self._busy_until = 0.0
        if self.waits is not None:  # (infer's waits are its own: see _infer_limit)
            each = max(0.0, took - (self.waits.latency or 0.0)) / max(1, runs)
            if self._wall_per_inference is None or runs >= self._wall_per_inference[0]:
                self._wall_per_inference = (runs, each)
        return res

    def _late_reply(self, iterations: int, warmups: int, err: DeviceTimeoutError) -> InferResult:
        """The rest of an ``infer`` reply that began and then outlasted its quick wait (a host
        busier than measured; seldom a lost tail): a sync waits for it patiently and drops it
        in front of its echo (the device answers in order); it counts when the lines read
        before and those dropped make the reply exactly. Counted as a "late reply"."""
        partial = list(self.device.partial)
        waited = self.device.last_wait_sec
        began = time.monotonic()
        try:
            dropped = self._sync()
        except (ProjectAPIError, OSError):
            self.dirty = True
            raise err from None
        finally:
            self.stats.reopens += 1
            self.stats.reopen_seconds += time.monotonic() - began
        self.stats.faults["late reply"] += 1
        self.stats.retries += 1
        self.stats.wait_seconds += waited
        expect = _infer_reply(iterations, warmups)
        lines = partial
        if len(partial) < len(expect) and "m-ready" in dropped:
            lines = partial + dropped[:dropped.index("m-ready")]
        if len(lines) != len(expect) or not all(map(_fits, lines, expect)):
            raise MalformedReplyError(f"the late rest of the reply to 'infer {iterations} "
                                      f"{warmups}' came damaged: {lines[len(partial):]!r}")
        _LOG.info("the reply to 'infer %d %d' came late, whole", iterations, warmups)
        return _infer_result(iterations, warmups, lines)

    # ---- faults ----
    def begin_sample(self) -> None:
        self._best = None
        self._stuck = 0
        if self.waits is not None:
            self.waits.scale = 1.0

    def fault(self, err: BaseException, index: int | None,
              position: tuple[int, ...] = ()) -> None:
        """Count ``err``, check the budgets and bring the device back in step (see the module
        doc); ``index`` is the sample (None: setting up), ``position`` how far it got. Raises
        ``err`` when it is no link fault, :class:`_SampleFailed` or :class:`_RunStopped`."""
        kind = link_fault_kind(err)
        if kind is None:
            raise err
        stats = self.stats
        stats.faults[kind] += 1
        if kind == "timeout":
            stats.wait_seconds += self.device.last_wait_sec
        self.dirty = True
        last = _first_line(err)
        if index is None:
            self._setup_faults += 1
            if self._setup_faults > self.policy.setup_retries:
                raise _RunStopped(f"{self._setup_faults} faults in a row while setting up "
                                  f"(sync, profile, db crc); the last: {last}")
        else:
            stats.retried_samples.add(index)
            if self._best is None or position > self._best:
                self._best, self._stuck = position, 1
                if self.waits is not None:
                    self.waits.scale = 1.0
            else:
                self._stuck += 1
            if self._stuck > self.policy.retries:
                raise _SampleFailed(f"{self._stuck} faults in a row without progress (--retries "
                                    f"{self.policy.retries}); the last: {last}")
            if kind == "timeout" and self.waits is not None:
                # As validate's: the first few timeouts keep the measured waits (on a noisy link
                # most are real losses); past them the wait may be what is too short.
                self.waits.scale = float(2 ** min(MAX_WAIT_RAISES,
                                                  max(0, self._stuck - UNRAISED_TIMEOUTS)))
        if stats.retries >= self.budget:
            raise _RunStopped(f"the run used up its {self.budget} retries; the last fault: {last}")
        stats.retries += 1
        _LOG.info("%s: %s (%s); recovering (retry %d of %d)",
                  "setting up" if index is None else f"sample {index}", kind, last,
                  stats.retries, self.budget)
        self.resync(restart=kind == "link closed")

    def resync(self, restart: bool = False) -> None:
        """Bring the device back in step (:meth:`Device.sync`), reopening its link when it
        stays silent (or ``restart``: the link closed); raises :class:`_RunStopped` when
        nothing works. The time counts as recovering."""
        began = time.monotonic()
        try:
            self._resync(restart)
        finally:
            self.stats.reopen_seconds += time.monotonic() - began

    def _resync(self, restart: bool) -> None:
        policy = self.policy
        last: BaseException | None = None
        reopened = 0
        for attempt in range(policy.restart_attempts + 1):
            fresh = False
            if attempt or restart:
                restart = False
                self.stats.restarts += 1
                reopened += 1
                try:
                    self._reopen()
                except (ProjectAPIError, OSError) as err:
                    last = err
                    continue
                fresh = True
            silent = noisy = 0
            while silent < policy.reopen_attempts and noisy < NOISY_SYNC_ATTEMPTS:
                self.stats.reopens += 1
                heard = self.device.bytes_received
                try:
                    self._sync(long_wait=fresh)
                except (LinkClosedError, TransportClosedError) as err:
                    last = err
                    break
                except (ProjectAPIError, OSError) as err:
                    last = err
                    if self.device.bytes_received > heard:
                        noisy += 1
                    else:
                        silent += 1
                    continue
                return
        raise _RunStopped(f"the device could not be brought back in step (its link reopened "
                          f"{reopened} times); the last attempt: {_first_line(last)}")

    def _reopen(self) -> None:
        _LOG.info("reopening the device link")
        if self._reopen_link is not None:
            self._reopen_link()
        else:
            transport = self.device.transport
            try:
                transport.close()
            except (ProjectAPIError, OSError) as err:
                _LOG.debug("closing the transport failed: %s", err)
            transport.open()
        self.device.drop_input()
        self.epoch += 1
        try:  # the start-up lines of a device that starts again (none from a running board)
            self.device.wait_ready(min(self.device.timeout_sec, 3.0))
        except DeviceTimeoutError as err:
            if isinstance(err, LinkClosedError):
                raise
        except MalformedReplyError:
            pass

    def _sync(self, long_wait: bool = False) -> list[str]:
        nonce = f"sync{self._tag}{next(self._count):x}"
        limit = None if long_wait else self._limit(("sync",), 2 * len(nonce) + 40)
        busy = max(0.0, self._busy_until - time.monotonic())  # a command may still be running
        if limit is not None:
            limit += busy
        wait = limit if limit is not None else self.device.timeout_sec
        dropped = self.device.sync(nonce, wait, max(wait, self.device.timeout_sec))
        self._busy_until = 0.0
        if not long_wait and not busy:
            self._observe(("sync",), f"{nonce}x%{nonce}", [f"e-[Unknown command: {nonce}]"])
        if any(line in BOOT_LINES for line in dropped):
            _LOG.info("the device started again (its start-up lines came while resyncing)")
            self.epoch += 1
        self.resyncs += 1
        self.dirty = False
        return dropped

    def attempt(self, index: int | None, body: Callable[[], T],
                position: Callable[[], tuple[int, ...]] = tuple,
                unrecoverable: Callable[[], str | None] | None = None) -> T:
        """Run ``body`` until it returns; after each link fault recover (:meth:`fault`) and run
        it again (it resumes from the state it keeps). ``unrecoverable`` says why a fault now
        cannot be retried (the run then stops)."""
        if index is not None:
            self.begin_sample()
        while True:
            try:
                if self.dirty:
                    self.resync()
                return body()
            except (ProjectAPIError, OSError) as err:
                why = unrecoverable() if unrecoverable is not None else None
                if why is not None and link_fault_kind(err) is not None:
                    self.stats.faults[link_fault_kind(err) or ""] += 1
                    self.dirty = True
                    raise _RunStopped(f"{why}; the fault: {_first_line(err)}") from err
                self.fault(err, index, position())

    # ---- checked commands ----
    def setup(self) -> str:
        """Bring the device in step, read its model version (``profile``) and ask whether it
        has ``db crc``; returns the model version."""

        def body() -> str:
            if self.resyncs == 0:  # the run's first sync: whatever the device was doing
                self._sync(long_wait=True)
            lines = self.send("profile", [re.compile(r"^m-profile-\[.*\]$"),
                                          re.compile(r"^m-model-\[.*\]$")], reply_bytes=64)
            model = lines[1][len("m-model-["):-1]
            if self.has_db_crc is None:
                self.has_db_crc = self._asks_db_crc()
                _LOG.info("the firmware %s 'db crc'%s", "has" if self.has_db_crc else "lacks",
                          "" if self.has_db_crc else ": loads are checked with 'db print'")
            return model

        return self.attempt(None, body)

    def _asks_db_crc(self) -> bool:
        """Whether the firmware answers ``db crc`` (refused twice: it has not)."""
        for _ in range(2):
            try:
                lines = self.device.command("db crc", wait_sec=self._limit(("db crc",), 40))
            except DeviceError:
                continue
            if len(lines) != 1 or _DB_CRC.fullmatch(lines[0]) is None:
                raise MalformedReplyError(f"unexpected reply to 'db crc': {lines!r}")
            self._observe(("db crc",), "db crc", lines)
            return True
        return False

    def query_crc(self) -> tuple[int, int, int]:
        (line,) = self.send("db crc", [_DB_CRC], reply_bytes=30)
        m = _DB_CRC.fullmatch(line)
        assert m is not None
        return int(m.group(1)), int(m.group(2)), int(m.group(3), 16)

    def reset(self) -> None:
        self.send("reset", ["m-reset-done"])

    def timestamp(self) -> int:
        (line,) = self.send("timestamp", [_LAP], reply_bytes=24)
        return int(line[len("m-lap-us-"):])

    def results_line(self) -> str:
        (line,) = self.send("results", [_RESULTS_STRICT], reply_bytes=96)
        return line

    def load(self, st: _LoadState) -> None:
        """Load ``st.data`` into the device's buffer, verified (``db crc``, else ``db print``),
        going on from where ``st`` says a fault cut it (see the module doc)."""
        data = st.data
        n = len(data)
        if not data:
            raise MlperfTinyError("no input bytes to load")
        crc = zlib.crc32(data)
        if st.verified is not None and st.verified[0] == self.epoch:
            if st.verified[1] == self.resyncs:
                return
            # A resync since it was verified: check it again (the resync ended some command).
            if self.has_db_crc:
                got = self.query_crc()
                if got != (n, n, crc):
                    st.restart()
                    raise IntegrityError("load mismatch", _crc_mismatch(got, n, crc))
                st.verified = (self.epoch, self.resyncs)
                return
            # db print from scratch: every line must come back equal again
            st.verified = None
            st.printed.clear()
            st.wrong.clear()
        start: int | None = None
        if st.begun_epoch == self.epoch:
            if self.has_db_crc:
                start = self._resume_point(data)
            elif st.acked == n:
                start = n  # every byte acknowledged: check them with db print
        if start is None:
            st.restart()
            self.send(f"db load {n}", [f"m-[Expecting {n} bytes]"], key=("db load",))
            st.begun_epoch = self.epoch
            start = 0
        elif 0 < start < n:
            self.resumed_loads += 1
            self.stats.resumed += 1
        st.acked = start
        for off in range(start, n, DB_CHUNK_BYTES):
            chunk = data[off:off + DB_CHUNK_BYTES]
            last = off + len(chunk) >= n
            self.send("db " + chunk.hex(), ["m-load-done"] if last else [], key=("db", len(chunk)))
            st.acked = off + len(chunk)
        if self.has_db_crc:
            if start < n:
                got = self.query_crc()
                if got != (n, n, crc):
                    raise IntegrityError("load mismatch", _crc_mismatch(got, n, crc))
        else:
            self._check_by_print(st)
        st.verified = (self.epoch, self.resyncs)

    def _resume_point(self, data: bytes) -> int | None:
        """After a fault mid-load: the bytes the device holds when they are a prefix of
        ``data`` (its ``db crc``), else None (load again)."""
        loaded, size, crc = self.query_crc()
        if size == len(data) and 0 < loaded <= size and crc == zlib.crc32(data[:loaded]):
            return loaded
        return None

    def _check_by_print(self, st: _LoadState) -> None:
        """The reference's ``db print`` against ``st.data``, line by line (see the module
        doc); raises :class:`IntegrityError` until every line came back equal once."""
        data = st.data
        want = [data[i:i + DB_PRINT_BYTES] for i in range(0, len(data), DB_PRINT_BYTES)]
        key = ("db print", len(data))
        lines = self.device.db_print(self._limit(key, 10 + 34 * len(want)))
        self._observe(key, "db print", lines)
        if len(lines) != len(want):
            raise IntegrityError("garbled reply", f"'db print' answered {len(lines)} lines for "
                                                  f"{len(data)} bytes, not {len(want)}")
        for i, (line, w) in enumerate(zip(lines, want, strict=True)):
            got = _buffer_bytes(line)
            if got is None or i in st.printed:
                continue
            if got == w:
                st.printed.add(i)
            elif st.wrong.get(i) == got:
                st.begun_epoch = None  # the buffer holds these bytes: load again
                raise IntegrityError("load mismatch", f"'db print' shows {got.hex()} at bytes "
                                                      f"{DB_PRINT_BYTES * i}.. twice; "
                                                      f"{w.hex()} was sent")
            else:
                st.wrong[i] = got
        if len(st.printed) < len(want):
            raise IntegrityError("garbled reply", f"'db print' came back damaged "
                                                  f"({len(want) - len(st.printed)} of "
                                                  f"{len(want)} lines not yet seen equal)")

    def confirmed_results(self, st: _LoadState, answers: _Answers) -> list[float]:
        """The results of one ``infer 1 0`` on the loaded ``st``, accepted when two answers
        agree (the ``infer`` reply's line and ``results``)."""
        if answers.epoch != self.epoch or answers.generation != st.generation:
            answers.lines.clear()
        if not answers.lines:
            res = self.infer(1, 0)
            answers.lines.append(res.results_line)
            answers.epoch, answers.generation = self.epoch, st.generation
            answers.resyncs = self.resyncs
        elif answers.resyncs != self.resyncs:
            # A resync since the last answer: only a device that kept our input (its db crc,
            # or db print) still holds our results.
            self.load(st)
            if answers.generation != st.generation:
                answers.lines.clear()
                raise IntegrityError("load mismatch", "the device's buffer changed since its "
                                                      "'infer'")
            answers.resyncs = self.resyncs
        line = self.results_line()
        if line in answers.lines:
            return _parse_results(line)
        answers.lines.append(line)
        raise IntegrityError("results differ", f"'results' answered {line!r}, unlike "
                                               f"{answers.lines[0]!r}")

    def timed_window(self, iterations: int, warmups: int, per_inference_sec: float,
                     suspect: list[float]) -> InferResult:
        """One performance window, ``infer N W`` between ``timestamp`` readings, its laps
        checked (see the module doc). ``suspect`` holds the time per inference of a window
        found implausible just before (one that agrees with it within 10 % is accepted)."""
        ta = self.timestamp()
        t0 = self.timestamp()
        if t0 < ta:
            raise IntegrityError("implausible laps", f"the device's clock went back from {ta} "
                                                     f"to {t0} us")
        self._turnarounds.append(t0 - ta)
        device_sec = (iterations + warmups) * per_inference_sec
        res = self.infer(iterations, warmups, device_sec)
        t3 = self.timestamp()
        if not t0 <= res.start_us <= res.end_us <= t3:
            raise IntegrityError("implausible laps", f"laps {res.start_us}..{res.end_us} us lie "
                                                     f"outside the timestamps {t0}..{t3} us read "
                                                     "around 'infer'")
        # The device time around the timed runs is the warm-ups' (W x the window's own time
        # per inference: a damaged lap moves that by W/N of the damage only) and the link's
        # turnarounds. A lap moved by d moves it by d the other way.
        turnaround = statistics.median(self._turnarounds[-16:])
        each = max(res.elapsed_us, 1) / 1e6 / iterations
        warm = warmups * each * 1e6
        low = (1 - WARMUP_SPREAD) * warm
        high = (1 + WARMUP_SPREAD) * warm + 4 * turnaround + LAP_SLACK_SEC * 1e6
        around = (t3 - t0) - res.elapsed_us
        problem = None
        if not low <= around <= high:
            problem = (f"the device spent {around} us around {iterations} timed runs, not the "
                       f"{low:.0f}..{high:.0f} us its warm-ups and the link's turnarounds "
                       "explain: a lap line was damaged")
        elif not 1 / PLAUSIBLE_RATIO <= each / per_inference_sec <= PLAUSIBLE_RATIO:
            problem = (f"{each * 1e3:.4g} ms per inference in the window, "
                       f"{per_inference_sec * 1e3:.4g} ms in the probes")
        if problem is not None:
            # A busy host can make a true window look so (its warm-ups ran unhindered, its
            # timed runs did not): one that agrees with the window refused just before is
            # taken, as two answers that agree.
            if not (suspect and abs(each - suspect[-1]) <= 0.1 * suspect[-1]):
                suspect.append(each)
                raise IntegrityError("implausible laps", problem)
        suspect.clear()
        return res


def _crc_mismatch(got: tuple[int, int, int], n: int, crc: int) -> str:
    return (f"'db crc' shows {got[0]} of {got[1]} bytes with CRC {got[2]:08x}; {n} of {n} with "
            f"{crc:08x} were sent")


def _first_line(err: BaseException | None) -> str:
    if err is None:
        return "none"
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# ---- modes ----

@dataclass
class Window:
    """One performance window: one input, ``iterations`` timed inferences."""

    sample: str
    iterations: int
    warmups: int
    elapsed_us: int

    @property
    def seconds(self) -> float:
        return self.elapsed_us / 1e6

    @property
    def throughput(self) -> float:
        return self.iterations / self.seconds if self.elapsed_us > 0 else math.inf

    @property
    def inference_ms(self) -> float:
        return self.elapsed_us / 1e3 / self.iterations


def state_json(state_size_bytes: int, reset: bool) -> dict[str, Any]:
    """The ``state`` entry of a report's JSON: the model's state and whether it was reset
    before every sample (window)."""
    return {"size_bytes": state_size_bytes, "reset_between_samples": bool(reset)}


def state_line(state_size_bytes: int, reset: bool) -> str | None:
    """How a run met the model's state, in words (None for a stateless model)."""
    if not state_size_bytes:
        return None
    return (f"state: {state_size_bytes} B, " + ("reset before every sample" if reset else
                                                  "carried from sample to sample"))


class _Outcome:
    """What recovery did in a run (the fields each report declares last: ``recovery``, the
    counters, None when recovery was off; ``failed``, the samples (windows) given up and left
    out of the figures; ``stopped``, why the run stopped before its end; ``requested``, the
    samples (windows) asked for; ``resumed_loads``, loads resumed mid-way after a fault, as
    ``recovery.resumed`` counts them)."""

    recovery: RecoveryStats | None
    failed: list[FailedSample]
    stopped: str | None
    requested: int
    resumed_loads: int

    @property
    def ok(self) -> bool:
        """Every sample answered (none given up, the run not stopped)."""
        return not self.failed and self.stopped is None

    def recovery_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "recovery": None if self.recovery is None else self.recovery.to_json(),
            "samples_requested": self.requested,
            "samples_failed": [f.to_json() for f in self.failed],
            "stopped": self.stopped, "ok": self.ok}
        return data


@dataclass
class PerformanceReport(_Outcome):
    model: str
    windows: list[Window]
    min_window_seconds: float
    state_size_bytes: int = 0
    reset_state: bool = False  #: the state was reset before each window
    #: The recovery counters (None: recovery was off, ``RetryPolicy.disabled()``).
    recovery: RecoveryStats | None = None
    #: Samples (windows) given up after their retries, left out of the figures.
    failed: list[FailedSample] = field(default_factory=list)
    #: Why the run stopped before its end (None: it did not).
    stopped: str | None = None
    #: Samples (windows) the run was asked for.
    requested: int = 0
    #: Loads resumed mid-way after a fault.
    resumed_loads: int = 0

    @property
    def median_throughput(self) -> float:
        return statistics.median(w.throughput for w in self.windows) if self.windows else math.nan

    @property
    def median_inference_ms(self) -> float:
        return (statistics.median(w.inference_ms for w in self.windows) if self.windows
                else math.nan)

    @property
    def requirements_met(self) -> bool:
        """Whether every window lasted the benchmark's rule (:data:`MIN_WINDOW_SECONDS` of
        device time), whatever ``min_window_seconds`` this run asked for."""
        return bool(self.windows) and all(w.seconds >= MIN_WINDOW_SECONDS for w in self.windows)

    def to_json(self) -> dict[str, Any]:
        return {"mode": "performance", "model": self.model,
                "median_throughput_inf_per_s": self.median_throughput,
                "median_inference_ms": self.median_inference_ms,
                "min_window_seconds": self.min_window_seconds,
                "runtime_requirements_met": self.requirements_met,
                "windows": [{"sample": w.sample, "iterations": w.iterations,
                             "warmups": w.warmups, "runtime_s": w.seconds,
                             "throughput_inf_per_s": w.throughput,
                             "inference_ms": w.inference_ms} for w in self.windows],
                "state": state_json(self.state_size_bytes, self.reset_state),
                **self.recovery_json()}


def _infer_timeout(device_s: float, wall_per_device: float) -> float:
    return 30.0 + 3.0 * device_s * max(1.0, wall_per_device)


def performance(device: Device, samples: Sequence[Sample], *, windows: int = WINDOWS,
                warmups: int = WARMUPS, min_window_seconds: float = MIN_WINDOW_SECONDS,
                progress: Progress | None = None, state_size_bytes: int = 0,
                reset_state: bool = True, retry: RetryPolicy | None = None,
                reopen: Callable[[], None] | None = None) -> PerformanceReport:
    """The benchmark's performance mode: for each of ``windows`` inputs (the samples' first
    windows, in turn), load it, measure one inference, then run ``infer N W`` with N chosen so
    the window lasts at least ``min_window_seconds`` of device time (re-run longer if not). A
    stateful model (``state_size_bytes``) has its state reset before each window unless
    ``reset_state`` is false.

    ``retry`` (default ``RetryPolicy()``) recovers from link faults as the module doc says
    (loads and laps checked; two probes); ``RetryPolicy.disabled()`` runs as before recovery,
    the first fault raising. ``reopen`` reopens the device's link (default: its transport's
    ``close()`` and ``open()``). The report's :attr:`~PerformanceReport.recovery`,
    :attr:`~PerformanceReport.failed` and :attr:`~PerformanceReport.stopped` say what recovery
    did; a window given up is left out of the median."""
    policy = retry if retry is not None else RetryPolicy()
    reset = bool(state_size_bytes) and reset_state
    if not policy.enabled:
        return _performance_plain(device, samples, windows, warmups, min_window_seconds,
                                  progress, state_size_bytes, reset)
    link = LinkRecovery(device, policy, windows, reopen)
    report = PerformanceReport("", [], min_window_seconds, state_size_bytes, reset,
                               recovery=link.stats, requested=windows)
    try:
        report.model = link.setup()
    except _RunStopped as err:
        report.stopped = str(err)
        return report
    for k in range(windows):
        sample = samples[k % len(samples)]
        st = _PerfWindow(_LoadState(sample.windows[0]))

        def body(st: _PerfWindow = st, name: str = sample.name) -> Window:
            return _performance_window(link, st, name, warmups, min_window_seconds, reset)

        def position(st: _PerfWindow = st) -> tuple[int, ...]:
            return (len(st.probes), st.tries, st.load.amount)

        if not _run_sample(link, report, k, sample.name, body, position, report.windows.append):
            break
        if progress is not None:
            progress(k + 1, windows)
    report.resumed_loads = link.resumed_loads
    return report


@dataclass
class _PerfWindow:
    """Where one performance window stands (kept over faults)."""

    load: _LoadState
    fresh: bool = False  #: the state was reset and no 'infer' was sent since
    reset_epoch: int | None = None
    probes: list[float] = field(default_factory=list)  #: seconds per inference of each probe
    per_inference: float | None = None
    iterations: int = 0
    tries: int = 0  #: windows found shorter than asked
    suspect: list[float] = field(default_factory=list)


def _performance_window(link: LinkRecovery, st: _PerfWindow, name: str, warmups: int,
                        min_window_seconds: float, reset: bool) -> Window:
    if reset and not (st.fresh and st.reset_epoch == link.epoch):
        link.reset()
        st.fresh, st.reset_epoch = True, link.epoch
    link.load(st.load)
    while len(st.probes) < PROBES:
        st.fresh = False
        probe = link.infer(1, 0)
        if probe.end_us < probe.start_us:
            raise IntegrityError("implausible laps", f"the probe's laps go back: "
                                                     f"{probe.start_us}..{probe.end_us} us")
        st.probes.append(max(probe.elapsed_us, 1) / 1e6)
    if st.per_inference is None:
        st.per_inference = max(st.probes)
        st.iterations = max(1, math.ceil(min_window_seconds * 1.05 / st.per_inference))
    while st.tries < 4:
        st.fresh = False
        res = link.timed_window(st.iterations, warmups, st.per_inference, st.suspect)
        if res.elapsed_us / 1e6 >= min_window_seconds:
            return Window(name, st.iterations, warmups, res.elapsed_us)
        st.tries += 1
        st.per_inference = max(res.elapsed_us, 1) / 1e6 / st.iterations
        st.iterations = max(st.iterations + 1,
                            math.ceil(min_window_seconds * 1.1 / st.per_inference))
    raise MlperfTinyError(f"the window of {name} stayed shorter than {min_window_seconds:g} s "
                          "of device time after 4 tries")


def _run_sample(link: LinkRecovery, report: _Outcome, index: int, name: str,
                body: Callable[[], T], position: Callable[[], tuple[int, ...]],
                done: Callable[[T], None],
                unrecoverable: Callable[[], str | None] | None = None) -> bool:
    """One sample through :meth:`LinkRecovery.attempt`; a sample given up is recorded. Returns
    False when the run stops."""
    try:
        done(link.attempt(index, body, position, unrecoverable))
        return True
    except _SampleFailed as err:
        _LOG.warning("sample %d (%s) given up: %s", index, name, err)
        report.failed.append(FailedSample(index, name, str(err)))
        link.stats.failed_samples[index] = str(err)
        return True
    except _RunStopped as err:
        _LOG.warning("the run stops at sample %d (%s): %s", index, name, err)
        report.failed.append(FailedSample(index, name, str(err)))
        link.stats.failed_samples[index] = str(err)
        report.stopped = str(err)
        return False


def _performance_plain(device: Device, samples: Sequence[Sample], windows: int, warmups: int,
                       min_window_seconds: float, progress: Progress | None,
                       state_size_bytes: int, reset: bool) -> PerformanceReport:
    """Performance mode as before recovery: nothing checked, the first fault raises."""
    model = device.profile()["model"]
    done: list[Window] = []
    for k in range(windows):
        sample = samples[k % len(samples)]
        if reset:
            device.reset()
        device.load(sample.windows[0])
        t0 = time.monotonic()
        probe = device.infer(1, 0, _infer_timeout(60.0, 1.0))
        per_inf = max(probe.elapsed_us, 1) / 1e6
        wall_ratio = max(1.0, (time.monotonic() - t0) / per_inf)
        iterations = max(1, math.ceil(min_window_seconds * 1.05 / per_inf))
        for _attempt in range(4):
            device_s = (iterations + warmups) * per_inf
            res = device.infer(iterations, warmups, _infer_timeout(device_s, wall_ratio))
            if res.elapsed_us / 1e6 >= min_window_seconds:
                break
            per_inf = max(res.elapsed_us, 1) / 1e6 / iterations
            iterations = max(iterations + 1, math.ceil(min_window_seconds * 1.1 / per_inf))
        else:
            raise MlperfTinyError(f"window {k + 1} stayed shorter than {min_window_seconds:g} s "
                                  f"of device time after 4 tries ({res.elapsed_us} us)")
        done.append(Window(sample.name, iterations, warmups, res.elapsed_us))
        if progress is not None:
            progress(k + 1, windows)
    return PerformanceReport(model=model, windows=done, min_window_seconds=min_window_seconds,
                             state_size_bytes=state_size_bytes, reset_state=reset,
                             requested=windows)


def roc_auc(y_true: Sequence[int], score: Sequence[float]) -> float:
    """Area under the ROC curve of ``score`` for the positive class 1 (ties counted half), as
    scikit-learn's ``roc_auc_score`` computes it."""
    y = np.asarray(y_true, dtype=bool)
    s = np.asarray(score, dtype=np.float64)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        raise MlperfTinyError("AUC needs samples of both classes")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[y].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def _normalize(v: np.ndarray) -> np.ndarray:
    total = v.sum()
    return v / total if total > 0 else v


@dataclass
class AccuracyReport(_Outcome):
    model: str
    top1: float | None  #: share of samples whose class is right (classifiers)
    auc: float | None
    samples: int  #: samples answered (the figures' samples)
    scores: list[Any] = field(repr=False, default_factory=list)
    state_size_bytes: int = 0
    reset_state: bool = False  #: the state was reset before each sample
    #: Indices (in the run's samples) of the samples :attr:`scores` belong to, in order.
    answered: list[int] = field(repr=False, default_factory=list)
    #: The recovery counters (None: recovery was off, ``RetryPolicy.disabled()``).
    recovery: RecoveryStats | None = None
    #: Samples (windows) given up after their retries, left out of the figures.
    failed: list[FailedSample] = field(default_factory=list)
    #: Why the run stopped before its end (None: it did not).
    stopped: str | None = None
    #: Samples (windows) the run was asked for.
    requested: int = 0
    #: Loads resumed mid-way after a fault.
    resumed_loads: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"mode": "accuracy", "model": self.model, "samples": self.samples,
                "top1": self.top1, "auc": self.auc,
                "state": state_json(self.state_size_bytes, self.reset_state),
                **self.recovery_json()}


def scores_metrics(model: str, labels: Sequence[int],
                   scores: Sequence[Any]) -> tuple[float | None, float | None]:
    """The benchmark's metrics of per-sample scores: (top-1, AUC). AD: AUC of the
    reconstruction error; classifiers: top-1 of the averaged results and the mean one-vs-rest
    AUC of the normalized results over the classes present."""
    if model in ANOMALY_MODELS:
        return None, roc_auc(labels, [float(s) for s in scores])
    probs = np.array([_normalize(np.asarray(s, dtype=np.float64)) for s in scores])
    y = np.asarray(labels)
    top1 = float(np.mean(np.argmax(probs, axis=1) == y))
    aucs = [roc_auc(y == c, probs[:, c]) for c in sorted(set(y.tolist()))
            if 0 <= c < probs.shape[1] and 0 < np.sum(y == c) < len(y)]
    return top1, (float(np.mean(aucs)) if aucs else None)


def _score(model: str, results: Sequence[Sequence[float]]) -> Any:
    """A sample's score: the mean of its windows' results (AD: of their first value)."""
    if model in ANOMALY_MODELS:
        return float(np.mean([r[0] for r in results]))
    return np.mean(np.array(results, dtype=np.float64), axis=0).tolist()


def accuracy(device: Device, samples: Sequence[Sample],
             progress: Progress | None = None, *, state_size_bytes: int = 0,
             reset_state: bool = True, retry: RetryPolicy | None = None,
             reopen: Callable[[], None] | None = None) -> AccuracyReport:
    """The benchmark's accuracy mode: every window of every sample through ``infer 1 0``; a
    sample's score is the mean of its windows' results; metrics by :func:`scores_metrics`. A
    stateful model (``state_size_bytes``) has its state reset before each sample (its windows
    run in turn, state carried) unless ``reset_state`` is false (one stream of samples).

    ``retry`` (default ``RetryPolicy()``) recovers from link faults as the module doc says:
    every load checked (``db crc``, else ``db print``) and resumed after a fault, every result
    confirmed by a second ``results``, each sample answered once. ``RetryPolicy.disabled()``
    runs as before recovery, the first fault raising. ``reopen`` reopens the device's link
    (default: its transport's ``close()`` and ``open()``). A sample given up is named in
    :attr:`~AccuracyReport.failed` and left out of the figures; :attr:`~AccuracyReport.recovery`
    holds the counts. With a FaultProxy-wrapped transport::

        device = Device(proxy); device.start()
        report = accuracy(device, samples, retry=RetryPolicy())
        report.recovery.summary(), report.scores, report.failed
    """
    policy = retry if retry is not None else RetryPolicy()
    reset = bool(state_size_bytes) and reset_state
    carries = bool(state_size_bytes) and not reset_state
    if not policy.enabled:
        return _accuracy_plain(device, samples, progress, state_size_bytes, reset)
    link = LinkRecovery(device, policy, len(samples), reopen)
    report = AccuracyReport("", None, None, 0, state_size_bytes=state_size_bytes,
                            reset_state=reset, recovery=link.stats, requested=len(samples))
    try:
        report.model = link.setup()
    except _RunStopped as err:
        report.stopped = str(err)
        return report
    run_epoch = link.epoch
    scores: list[Any] = []
    for k, sample in enumerate(samples):
        st = _AccSample([_LoadState(w) for w in sample.windows],
                        [_Answers() for _ in sample.windows])

        def body(st: _AccSample = st) -> Any:
            if carries and link.epoch != run_epoch:
                raise _RunStopped("the device started again, losing the state carried from "
                                  "sample to sample (--no-reset)")
            return _accuracy_sample(link, st, report.model, reset)

        def position(st: _AccSample = st) -> tuple[int, ...]:
            j = min(len(st.done), len(st.loads) - 1)
            return (len(st.done), int(bool(st.answers[j].lines)), st.loads[j].amount)

        def unrecoverable(st: _AccSample = st, name: str = sample.name) -> str | None:
            if carries and st.infer_sent:
                return (f"the model carries its state from sample to sample (--no-reset): "
                        f"after a fault once 'infer' of {name} was sent, nobody knows whether "
                        "the state took it")
            return None

        def done(score: Any, k: int = k) -> None:
            scores.append(score)
            report.answered.append(k)

        if not _run_sample(link, report, k, sample.name, body, position, done, unrecoverable):
            break
        if progress is not None:
            progress(k + 1, len(samples))
    report.scores = scores
    report.samples = len(scores)
    report.resumed_loads = link.resumed_loads
    if scores:
        labels = [samples[i].label for i in report.answered]
        try:
            report.top1, report.auc = scores_metrics(report.model, labels, scores)
        except MlperfTinyError:
            if report.ok:
                raise
            report.top1 = None  # too few samples answered for the figure
    return report


@dataclass
class _AccSample:
    """Where one accuracy sample stands (kept over faults)."""

    loads: list[_LoadState]  #: one per window
    answers: list[_Answers]
    done: list[list[float]] = field(default_factory=list)  #: confirmed results per window
    infer_sent: bool = False  #: an 'infer' of this sample was sent
    fresh: bool = False  #: the state was reset and no 'infer' was sent since
    reset_epoch: int | None = None


def _accuracy_sample(link: LinkRecovery, st: _AccSample, model: str, reset: bool) -> Any:
    if reset and not (st.fresh and st.reset_epoch == link.epoch):
        st.done.clear()  # the state took some of the sample's windows: all of them again
        for answers in st.answers:
            answers.lines.clear()
        link.reset()
        st.fresh, st.reset_epoch = True, link.epoch
    while len(st.done) < len(st.loads):
        j = len(st.done)
        link.load(st.loads[j])
        st.fresh = False
        st.infer_sent = True
        st.done.append(link.confirmed_results(st.loads[j], st.answers[j]))
    return _score(model, st.done)


def _accuracy_plain(device: Device, samples: Sequence[Sample], progress: Progress | None,
                    state_size_bytes: int, reset: bool) -> AccuracyReport:
    """Accuracy mode as before recovery: nothing checked, the first fault raises."""
    model = device.profile()["model"]
    scores = []
    for k, sample in enumerate(samples):
        if reset:
            device.reset()
        results = []
        for w in sample.windows:
            device.load(w)
            results.append(device.infer(1, 0, _infer_timeout(60.0, 1.0)).results)
        scores.append(_score(model, results))
        if progress is not None:
            progress(k + 1, len(samples))
    top1, auc = scores_metrics(model, [s.label for s in samples], scores)
    return AccuracyReport(model=model, top1=top1, auc=auc, samples=len(samples), scores=scores,
                          state_size_bytes=state_size_bytes, reset_state=reset,
                          requested=len(samples), answered=list(range(len(samples))))


def _stamp(now: datetime | None = None) -> str:
    now = now or datetime.now()
    return now.strftime("%H%M%S.") + f"{now.microsecond // 1000:03d}"


def recovery_notes(report: PerformanceReport | AccuracyReport) -> list[str]:
    """What recovery did, in the lines ``results.txt`` notes (none when it was off): the faults
    by kind, the retries, the samples retried and the time spent recovering; each sample given
    up; why the run stopped early."""
    out: list[str] = []
    what = "window" if isinstance(report, PerformanceReport) else "sample"
    s = report.recovery
    if s is not None:
        kinds = ", ".join(f"{n} {k}" for k, n in s.faults.most_common())
        line = (f"Link faults: {s.fault_count}{f' ({kinds})' if kinds else ''}; retries: "
                f"{s.retries}; {what}s retried: {len(s.retried_samples)}; time recovering: "
                f"{s.recovery_seconds:.3f} sec.")
        if s.restarts:
            line += f" Device link reopened {s.restarts} time{'s' if s.restarts != 1 else ''}."
        out.append(line)
    for f in report.failed:
        label = f"window {f.index + 1} ({f.name})" if what == "window" else f"{f.name} (#{f.index})"
        out.append(f"FAILED {what} {label}, left out of the figures: {f.reason}")
    if report.stopped is not None:
        run = len(report.windows) if isinstance(report, PerformanceReport) else report.samples
        left = report.requested - run - len(report.failed)
        out.append(f"The run stopped early, {left} {what}{'s' if left != 1 else ''} not run: "
                   f"{report.stopped}")
    return out


def results_text(report: PerformanceReport | AccuracyReport, now: datetime | None = None) -> str:
    """``results.txt`` as a submission lays it out (``<time> ulp-mlperf: ...`` lines), then
    :func:`recovery_notes` when recovery was on."""
    head = f"{_stamp(now)} ulp-mlperf: "
    out: list[str] = []
    if isinstance(report, PerformanceReport):
        for i, w in enumerate(report.windows, 1):
            out += [f"Performance results for window {i}:",
                    f"  # Inferences : {w.iterations:>12}",
                    f"  Runtime      : {w.seconds:>12.3f} sec.",
                    f"  Throughput   : {w.throughput:>12.3f} inf./sec."]
            if w.seconds >= MIN_WINDOW_SECONDS:
                out.append("Runtime requirements have been met.")
            else:
                out.append(f"Runtime requirements have NOT been met (< {MIN_WINDOW_SECONDS:g} "
                           "sec., the benchmark's rule).")
        if report.windows:
            out += ["-" * 57, f"Median throughput is {report.median_throughput:.3f} inf./sec.",
                    "-" * 57]
        else:
            out.append("No window completed.")
    else:
        if report.top1 is not None:
            out.append(f"Top-1: {100 * report.top1:.1f}%")
        if report.auc is not None:
            out.append(f"AUC: {report.auc:.2f}")
        if not report.samples:
            out.append("No sample answered.")
    out += recovery_notes(report)
    return "".join(head + line + "\n" for line in out)
