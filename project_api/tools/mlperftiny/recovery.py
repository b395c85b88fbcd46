"""Recovery from link faults for the MLPerf Tiny runner (:class:`LinkRecovery`).

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

import itertools
import logging
import os
import re
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from project_api.errors import ProjectAPIError, TransportClosedError
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
from project_api.tools.mlperftiny.device import (
    _DB_CRC,
    _LAP,
    _RESULTS_STRICT,
    DB_CHUNK_BYTES,
    DB_PRINT_BYTES,
    Device,
    DeviceError,
    DeviceTimeoutError,
    Expected,
    InferResult,
    IntegrityError,
    LinkClosedError,
    MalformedReplyError,
    MlperfTinyError,
    _buffer_bytes,
    _fits,
    _infer_reply,
    _infer_result,
    _infer_timeout,
    _parse_results,
)

_LOG = logging.getLogger(__name__)
T = TypeVar("T")

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
