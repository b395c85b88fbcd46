"""Recovery from link faults: one policy for every runner of the device RPC.

The protocol (spec §4) has a CRC per frame but no retransmission and no request ids: a damaged
request or reply is dropped by its receiver, the host's wait for that reply fails, and from then
on a late reply could answer the wrong request. What this module adds is what a long run on a
real link needs on top of that:

- :class:`RetryPolicy` says how hard to try: the retries a sample gets (recoveries in a row that
  bring none of its replies), the run's budget, and how each wait is sized;
- :class:`WaitEstimator` sizes each wait from what the link and the model were measured to take
  (the link's latency and seconds per byte, each request kind's own service time), with a floor
  and a margin, under the caller's ceiling, so a lost reply is noticed in about the time the
  request should take instead of after the whole per-reply limit;
- :class:`Recovery` is one session's use of a policy: it tells link faults from other errors,
  counts them (:class:`RecoveryStats`), keeps the budgets and reopens the session
  (:meth:`project_api.micro.Session.reopen`), which starts a new session on the same link, or
  reopens the link itself (the emulator started again, the board reset) when no session starts.

The runners (:func:`project_api.micro.stream.stream_samples` under ``validate`` and the farm,
``run``, :meth:`Session.time <project_api.micro.Session.time>`, the MLPerf Tiny host) decide what
to send again after a recovery; this module decides whether and how to recover.
"""

from __future__ import annotations

import collections
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from project_api.errors import (
    IoTimeoutError,
    ProjectAPIError,
    RetriesExhaustedError,
    SessionDesyncError,
    SessionLinkClosedError,
    SessionTerminatedError,
    SessionTimeoutError,
    TransportClosedError,
)


class Reopenable(Protocol):
    """What recovery needs of a session (a :class:`project_api.micro.Session`): reopening it."""

    def reopen(self, *, restart: bool = False, reason: str = "",
               same_boot: bool = False) -> None: ...

_LOG = logging.getLogger(__name__)

T = TypeVar("T")

#: Recoveries in a row that bring a sample none of its replies, after which it is given up. On
#: a 1e-3 byte-error link the smallest request is lost about one time in five, so fewer would
#: give up samples that only met noise.
DEFAULT_RETRIES = 16
#: Faults in a row while setting a run up (the handshake, the model's lookup and tensor views),
#: before any sample was sent: counted apart from a sample's retries (setup is short and cheap
#: to redo, and a noisy link may hit it several times in a row).
DEFAULT_SETUP_RETRIES = 32
#: A run's budget of recoveries: this many per sample...
DEFAULT_RUN_RETRIES_PER_SAMPLE = 16
#: ... and at least this many.
MIN_RUN_RETRIES = 100
#: New sessions tried on the open link, with no byte from the device, before the link itself
#: is reopened (a device that says nothing is gone or stopped).
DEFAULT_REOPEN_ATTEMPTS = 2
#: ... and new sessions tried while the device answers, garbled by a noisy link.
NOISY_REOPEN_ATTEMPTS = 16
#: Times the link is reopened (emulator restarted, board reset) within one recovery.
DEFAULT_RESTART_ATTEMPTS = 2
#: A wait is never sized below this many seconds (scheduling noise of a loaded host).
DEFAULT_WAIT_FLOOR_SEC = 0.25
#: A wait is this many times the predicted service time (plus four deviations).
DEFAULT_WAIT_MARGIN = 3.0
#: ... and at least this many times the slowest service time measured for such a request.
WORST_MARGIN = 2.0
#: Timeouts in a row without progress at a sample's measured waits before they are raised...
UNRAISED_TIMEOUTS = 3
#: ... doubling each timeout after, at most this many times (8x).
MAX_WAIT_RAISES = 3
#: A reply is declared lost only after the link has been silent this long (no byte arrived):
#: a reply still arriving is never cut off, however long it takes.
DEFAULT_QUIET_SEC = 0.25


@dataclass(frozen=True)
class RetryPolicy:
    """How a runner recovers from link faults (see the module doc).

    ``retries``: recoveries in a row that bring a sample none of its replies before the sample
    is given up (named in the report; the run goes on and exits 1). ``run_retries``: the run's
    whole budget; None means ``max(MIN_RUN_RETRIES, DEFAULT_RUN_RETRIES_PER_SAMPLE x samples)``.
    ``setup_retries``: faults in a row while a run is set up (handshake, model lookup), counted
    apart from the samples' retries. ``enabled=False`` (``--no-retry``) is microTVM's behaviour: the first fault ends the run.
    ``quick_waits`` sizes each wait from measured times (:class:`WaitEstimator`) with
    ``wait_floor_sec`` and ``wait_margin``; the caller's per-reply limit stays the ceiling.
    """

    retries: int = DEFAULT_RETRIES
    run_retries: int | None = None
    setup_retries: int = DEFAULT_SETUP_RETRIES
    enabled: bool = True
    quick_waits: bool = True
    wait_floor_sec: float = DEFAULT_WAIT_FLOOR_SEC
    wait_margin: float = DEFAULT_WAIT_MARGIN
    reopen_attempts: int = DEFAULT_REOPEN_ATTEMPTS
    restart_attempts: int = DEFAULT_RESTART_ATTEMPTS

    def __post_init__(self) -> None:
        if (self.retries < 0 or self.setup_retries < 0
                or (self.run_retries is not None and self.run_retries < 0)):
            raise ValueError(f"retries must be >= 0; got {self.retries}, {self.run_retries}, "
                             f"{self.setup_retries}")
        if not (self.wait_floor_sec > 0 and self.wait_margin >= 1):
            raise ValueError("wait_floor_sec must be > 0 and wait_margin >= 1")
        if self.reopen_attempts < 1 or self.restart_attempts < 0:
            raise ValueError("reopen_attempts must be >= 1 and restart_attempts >= 0")

    @classmethod
    def disabled(cls) -> RetryPolicy:
        """No recovery: the first fault ends the run (microTVM's behaviour)."""
        return cls(enabled=False, quick_waits=False)

    def run_budget(self, samples: int) -> int:
        """The recoveries a run of ``samples`` samples may use."""
        if self.run_retries is not None:
            return self.run_retries
        return max(MIN_RUN_RETRIES, DEFAULT_RUN_RETRIES_PER_SAMPLE * max(1, samples))

    def budget_rule(self) -> str:
        """How :meth:`run_budget` sets a run's budget, in words."""
        if self.run_retries is not None:
            return f"run_retries={self.run_retries}"
        return f"{DEFAULT_RUN_RETRIES_PER_SAMPLE} a sample, at least {MIN_RUN_RETRIES}"

    def describe(self) -> str:
        """One line for help texts and reports."""
        if not self.enabled:
            return "recovery off: the first link fault ends the run"
        return (f"a run's budget of retries: {self.budget_rule()}; {self.setup_retries} faults "
                f"in a row while setting up; waits of at least {self.wait_floor_sec:g}s, "
                f"{self.wait_margin:g}x the measured time")


def fault_kind(err: BaseException) -> str | None:
    """The kind of link fault ``err`` is ("timeout", "lost frame", "terminated", "link
    closed"), or None for an error that retrying cannot mend (a device error, bad input)."""
    if isinstance(err, SessionTimeoutError | IoTimeoutError):
        return "timeout"
    if isinstance(err, SessionDesyncError):
        return "lost frame"
    if isinstance(err, SessionTerminatedError):
        return "terminated"
    if isinstance(err, SessionLinkClosedError | TransportClosedError):
        return "link closed"
    return None


@dataclass
class RecoveryStats:
    """What recovery did in one run: faults seen by kind, recoveries, samples retried, samples
    given up, and the time it cost (waiting for replies that never came, plus reopening)."""

    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    retries: int = 0  #: recoveries made (one per fault recovered from)
    retried_samples: set[int] = field(default_factory=set)
    failed_samples: dict[int, str] = field(default_factory=dict)  #: sample -> why, given up
    #: sample -> why it was given up by one runner (a place of ``validate --places``) and then
    #: answered by another: not lost, and not in :attr:`failed_samples`.
    answered_elsewhere: dict[int, str] = field(default_factory=dict)
    resumed: int = 0  #: recoveries that went on mid-sample instead of sending it again whole
    reopens: int = 0  #: new sessions started on the open link
    restarts: int = 0  #: the link itself reopened (emulator started again, board reset)
    wait_seconds: float = 0.0  #: spent waiting for replies that were lost
    reopen_seconds: float = 0.0  #: spent starting sessions and reopening the link

    def settle(self, answered: Callable[[int], bool]) -> list[int]:
        """Move the given-up samples that ``answered(sample)`` says another runner answered
        from :attr:`failed_samples` to :attr:`answered_elsewhere`; returns them, in order."""
        moved = sorted(s for s in self.failed_samples if answered(s))
        for s in moved:
            self.answered_elsewhere[s] = self.failed_samples.pop(s)
        return moved

    @property
    def fault_count(self) -> int:
        return sum(self.faults.values())

    @property
    def recovery_seconds(self) -> float:
        return self.wait_seconds + self.reopen_seconds

    def merge(self, other: RecoveryStats, sample_offset: int = 0) -> None:
        """Add ``other``'s counts (its sample indices shifted by ``sample_offset``)."""
        self.faults.update(other.faults)
        self.retries += other.retries
        self.retried_samples |= {s + sample_offset for s in other.retried_samples}
        self.failed_samples.update({s + sample_offset: why
                                    for s, why in other.failed_samples.items()})
        self.answered_elsewhere.update({s + sample_offset: why
                                        for s, why in other.answered_elsewhere.items()})
        self.resumed += other.resumed
        self.reopens += other.reopens
        self.restarts += other.restarts
        self.wait_seconds += other.wait_seconds
        self.reopen_seconds += other.reopen_seconds

    def to_json(self) -> dict[str, Any]:
        return {"faults": self.fault_count, "faults_by_kind": dict(self.faults),
                "retries": self.retries, "samples_retried": len(self.retried_samples),
                "resumed_mid_sample": self.resumed,
                "samples_failed": {str(s): why for s, why in sorted(self.failed_samples.items())},
                "samples_answered_elsewhere": {
                    str(s): why for s, why in sorted(self.answered_elsewhere.items())},
                "sessions_reopened": self.reopens, "links_reopened": self.restarts,
                "recovery_seconds": self.recovery_seconds}

    def summary(self) -> str:
        """``3 faults (2 timeout, 1 lost frame), 3 samples retried, 0.41 s recovering``."""
        if not self.fault_count:
            return "no link faults"
        kinds = ", ".join(f"{n} {k}" for k, n in self.faults.most_common())
        text = (f"{self.fault_count} link fault{'s' if self.fault_count != 1 else ''} ({kinds}), "
                f"{len(self.retried_samples)} sample{'s' if len(self.retried_samples) != 1 else ''}"
                f" retried, {self.recovery_seconds:.2f} s recovering")
        if self.restarts:
            text += f", the device link reopened {self.restarts} time" + "s" * (self.restarts > 1)
        return text


class _Smoothed:
    """TCP's round-trip estimator (RFC 6298): a smoothed value and its mean deviation."""

    __slots__ = ("mean", "dev", "count", "worst")

    def __init__(self, first: float) -> None:
        self.mean = first
        self.dev = first / 2
        self.count = 1
        self.worst = first  #: the slowest recent value

    def add(self, value: float) -> None:
        # The slowest of the recent values (it fades by 1% a value, so one stall long ago does
        # not slow the noticing of every later loss).
        self.worst = max(value, self.worst * 0.99)
        self.dev += 0.25 * (abs(self.mean - value) - self.dev)
        self.mean += 0.125 * (value - self.mean)
        self.count += 1


#: The RPC code of kCallFunc (the first field of a call's key).
_CALL_FUNC = 3
#: Requests whose request plus reply is shorter than this teach the link's latency; longer ones
#: its seconds per byte.
_SMALL_BYTES = 512


class WaitEstimator:
    """How long a reply should take, learned from the replies that came.

    Each request has a key (its RPC code, the function it calls, its size): a key seen before
    is predicted from its own smoothed service times; a new one from the link's latency plus
    its bytes times the link's seconds per byte, once both are known. A service time is counted
    from when the request was sent or the previous reply arrived, whichever is later (the device
    answers in order). :meth:`limit` is ``max(floor, margin x mean + 4 x deviation, 2 x the slowest
    recent such reply)`` times :attr:`scale` (raised while a sample keeps failing), or None while
    nothing predicts it: the caller then waits its full per-reply limit. The limit is not a
    deadline: the channel declares a reply lost only once it is past and the link has also been
    silent for :attr:`quiet_sec` (a reply whose bytes are still arriving is never cut off).
    """

    def __init__(self, floor_sec: float = DEFAULT_WAIT_FLOOR_SEC,
                 margin: float = DEFAULT_WAIT_MARGIN,
                 quiet_sec: float = DEFAULT_QUIET_SEC) -> None:
        self.floor_sec = floor_sec
        self.margin = margin
        #: Silence (no byte from the device) after which a reply past its limit is lost.
        self.quiet_sec = quiet_sec
        self.scale = 1.0
        self._keys: dict[Any, _Smoothed] = {}
        self._wire: dict[Any, int] = {}  # the wire bytes of each key's requests
        self._latency: _Smoothed | None = None
        self._per_byte: _Smoothed | None = None
        #: Wire bytes of the requests answered so far, both ways (what crossed the link whole).
        self.wire_bytes = 0

    def observe(self, key: Any, wire_bytes: int, seconds: float, computes: bool = False) -> None:
        """A reply for a request of ``key`` (``wire_bytes`` both ways) came ``seconds`` after
        its service began; ``computes`` marks a request whose time is not the link's alone."""
        seconds = max(0.0, seconds)
        self.wire_bytes += wire_bytes
        entry = self._keys.get(key)
        if entry is None:
            self._keys[key] = _Smoothed(seconds)
            self._wire[key] = max(1, wire_bytes)
        else:
            entry.add(seconds)
        if computes:
            return
        if wire_bytes < _SMALL_BYTES:
            per_byte = self._per_byte.mean if self._per_byte else 0.0
            latency = max(0.0, seconds - wire_bytes * per_byte)
            if self._latency is None:
                self._latency = _Smoothed(latency)
            else:
                self._latency.add(latency)
        else:
            latency = self._latency.mean if self._latency else 0.0
            per_byte = max(0.0, seconds - latency) / wire_bytes
            if self._per_byte is None:
                self._per_byte = _Smoothed(per_byte)
            else:
                self._per_byte.add(per_byte)

    def predict(self, key: Any, wire_bytes: int) -> tuple[float, float] | None:
        """(mean, deviation) of the service time of a ``key`` request, or None if unknown."""
        entry = self._keys.get(key)
        if entry is not None:
            return max(entry.mean, entry.worst / self.margin * WORST_MARGIN), entry.dev
        if key[0] == _CALL_FUNC:
            return None  # a function never called before may compute for any time
        # A request of a kind seen before at another size (a copy cut into other blocks):
        # the measured one nearest in size, scaled up to this one's bytes.
        same = [(abs(self._wire[k] - wire_bytes), k) for k in self._keys if k[0] == key[0]]
        kin: tuple[float, float] | None = None
        if same:
            _, near = min(same)
            grow = max(1.0, wire_bytes / self._wire[near])
            entry = self._keys[near]
            kin = max(entry.mean, entry.worst / self.margin * WORST_MARGIN) * grow, entry.dev * grow
        if self._latency is None:
            return kin
        if self._per_byte is None:
            if wire_bytes >= _SMALL_BYTES:
                return kin
            mean, dev = self._latency.mean, self._latency.dev
        else:
            mean = self._latency.mean + wire_bytes * self._per_byte.mean
            dev = self._latency.dev + wire_bytes * self._per_byte.dev
        if kin is not None:
            mean, dev = max(mean, kin[0]), max(dev, kin[1])
        return mean, dev

    def limit(self, key: Any, wire_bytes: int) -> float | None:
        """Seconds to wait for a ``key`` reply (see the class doc), or None."""
        predicted = self.predict(key, wire_bytes)
        if predicted is None:
            return None
        mean, dev = predicted
        return max(self.floor_sec, self.margin * mean + 4 * dev) * self.scale

    @property
    def seconds_per_byte(self) -> float | None:
        """The link's measured seconds per wire byte (None until a long request came back)."""
        return self._per_byte.mean if self._per_byte else None

    @property
    def latency(self) -> float | None:
        """The link's measured latency of a short request (None until one came back)."""
        return self._latency.mean if self._latency else None


#: Copy blocks are never cut smaller than this (their headers would dominate).
MIN_BLOCK_BYTES = 128
#: Bytes a copy request and its reply carry besides the data (packet headers, framing, the
#: session header, the reply): what each extra block costs.
BLOCK_OVERHEAD_BYTES = 130
#: Wire bytes a fault costs besides the block sent again: the device's notice, a new session's
#: handshake and the boot mark, both ways.
FAULT_OVERHEAD_BYTES = 256
#: Wire bytes assumed clean before the first fault, so one early fault does not shrink blocks
#: far.
_PRIOR_CLEAN_BYTES = 4_000


def best_block_bytes(fault_rate: float, fault_cost_bytes: float, largest: int) -> int:
    """The copy block (bytes of data per request) with the least expected wire bytes per data
    byte when each wire byte is hit with probability ``fault_rate`` and a hit costs
    ``fault_cost_bytes`` plus the block sent again: ``e^(p(B+h)) ((B+h) + (1 - e^(-p(B+h))) C)
    / B`` over B up to ``largest`` (h = :data:`BLOCK_OVERHEAD_BYTES`). On a link whose time goes
    by its bytes, that is also the least time."""
    if fault_rate <= 0 or largest <= MIN_BLOCK_BYTES:
        return largest
    best, best_cost = largest, math.inf
    size = largest
    while True:
        wire = size + BLOCK_OVERHEAD_BYTES
        x = fault_rate * wire
        if x < 50:
            cost = math.exp(x) * (wire + (1 - math.exp(-x)) * fault_cost_bytes) / size
            if cost < best_cost:
                best, best_cost = size, cost
        if size <= MIN_BLOCK_BYTES:
            return best
        size = max(MIN_BLOCK_BYTES, int(size / 1.25))


class Recovery:
    """One session's use of a :class:`RetryPolicy`: the counters, the budgets, the wait
    estimator and the reopening. Made by :class:`~project_api.micro.Session` (its
    ``recovery`` attribute); runners call :meth:`begin_run`, then :meth:`recover` on each error."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.stats = RecoveryStats()
        self.waits = WaitEstimator(policy.wait_floor_sec, policy.wait_margin,
                                   min(policy.wait_floor_sec, DEFAULT_QUIET_SEC))
        self.budget = policy.run_budget(1)
        #: Link faults seen so far (timeouts and lost frames), for the fault rate.
        self.link_faults = 0
        self._run_begun = False

    @property
    def enabled(self) -> bool:
        return self.policy.enabled

    def begin_run(self, samples: int) -> RecoveryStats:
        """Start counting a run of ``samples`` samples: fresh counters and budget. The first
        run of a session also counts what recovery did while the session was opened."""
        stats = RecoveryStats()
        if not self._run_begun:
            stats.merge(self.stats)
            self._run_begun = True
        self.stats = stats
        self.budget = self.policy.run_budget(samples)
        self.waits.scale = 1.0
        return self.stats

    def fault_rate(self) -> float:
        """Link faults per wire byte seen so far (with a prior of clean bytes)."""
        return self.link_faults / (self.waits.wire_bytes + _PRIOR_CLEAN_BYTES)

    def block_bytes(self, largest: int) -> int:
        """The copy block for the link as measured so far (:func:`best_block_bytes`): a fault
        costs :data:`FAULT_OVERHEAD_BYTES` plus, once the link's speed is known, the bytes it
        could have carried in the time recovering took."""
        if not self.link_faults:
            return largest
        cost = float(FAULT_OVERHEAD_BYTES)
        per_byte = self.waits.seconds_per_byte
        if per_byte:
            cost += self.stats.recovery_seconds / max(1, self.stats.retries) / per_byte
        return best_block_bytes(self.fault_rate(), cost, largest)

    def recover(self, session: Reopenable, err: BaseException, *, sample: int | None = None,
                stuck: int = 1, wait_sec: float = 0.0, setup: int = 0,
                what: str | None = None) -> None:
        """Count ``err`` and reopen ``session``; re-raise ``err`` when it is no link fault or
        recovery is off, and raise :class:`RetriesExhaustedError` when ``sample`` (or the step
        ``what`` names, e.g. "timing") has failed ``stuck`` times in a row past the policy's
        retries or the run's budget is used up.

        ``setup`` (> 0) says the fault came while the run was being set up (no sample sent):
        it is the count of such faults in a row, bounded by the policy's ``setup_retries``
        instead of ``sample``'s retries. ``wait_sec`` is the time the failed wait took (counted
        as time lost to recovery).
        Afterwards the session is open again, with new handles (the runner asks for its
        model again and sends the sample's inputs again)."""
        kind = fault_kind(err)
        if kind is None or not self.policy.enabled:
            raise err
        stats = self.stats
        stats.faults[kind] += 1
        stats.wait_seconds += wait_sec
        if kind in ("timeout", "lost frame"):
            self.link_faults += 1
        where = f"sample {sample}" if sample is not None else what or "the call"
        if setup:
            where = "setting up" + (f" sample {sample}" if sample is not None else "")
            if setup > self.policy.setup_retries:
                reason = (f"{setup} faults in a row while setting up (handshake, model lookup); "
                          f"the last: {_first_line(err)}")
                if sample is not None:
                    stats.failed_samples[sample] = reason
                raise RetriesExhaustedError(f"{where}: gave up after {reason}", stats) from err
        elif sample is not None or what is not None:
            if sample is not None:
                stats.retried_samples.add(sample)
            if stuck > self.policy.retries:
                reason = (f"{stuck} faults in a row without progress (--retries "
                          f"{self.policy.retries}); the last: {_first_line(err)}")
                if sample is not None:
                    stats.failed_samples[sample] = reason
                raise RetriesExhaustedError(f"{where}: gave up after {reason}", stats,
                                            sample=sample) from err
        if stats.retries >= self.budget:
            raise RetriesExhaustedError(
                f"{where}: the run used up its {self.budget} retries "
                f"({self.policy.budget_rule()}); the last fault: {_first_line(err)}",
                stats) from err
        stats.retries += 1
        if not setup and kind == "timeout":
            # Waits are not raised for the first few faults of a sample: on a noisy link most
            # are real losses, and each raise is paid by every later loss of the sample. Past
            # them the wait may be what is too short (a device slower than measured): raise it.
            self.waits.scale = float(2 ** min(MAX_WAIT_RAISES,
                                              max(0, stuck - UNRAISED_TIMEOUTS)))
        _LOG.info("%s: %s (%s); recovering (retry %d of %d)", where, kind, _first_line(err),
                  stats.retries, self.budget)
        began = time.monotonic()
        try:
            session.reopen(restart=kind == "link closed", reason=_first_line(err),
                           same_boot=kind in ("timeout", "lost frame"))
        except RetriesExhaustedError as failed:
            if sample is not None:
                stats.failed_samples[sample] = str(failed)
            raise RetriesExhaustedError(f"{where}: gave up: {failed}", stats) from err
        finally:
            stats.reopen_seconds += time.monotonic() - began

    def opening(self, session: Reopenable, step: Callable[[], None],
                heard: Callable[[], bool]) -> None:
        """Open ``session`` by ``step()`` (its handshake and every check made at open: build
        hash, boot mark, ...) under this policy, like any other request: a link fault in any of
        them is counted as a fault while setting up and mended by :meth:`recover`, whose
        :meth:`~project_api.micro.Session.reopen` starts a new session and runs the checks
        again (within ``setup_retries``, the budget and the reopen attempts). A handshake that
        timed out with nothing ``heard()`` from the device is no noisy link but an absent or
        stopped device: raised at once, as without recovery."""
        try:
            step()
        except (ProjectAPIError, OSError) as err:
            kind = fault_kind(err)
            if not self.policy.enabled or kind is None or (kind == "timeout" and not heard()):
                raise
            waited = getattr(session, "last_wait_sec", 0.0) if kind == "timeout" else 0.0
            self.recover(session, err, setup=1, what="opening the session", wait_sec=waited)

    def progress(self) -> None:
        """A sample got a reply: waits go back to their measured size."""
        self.waits.scale = 1.0

    def call(self, session: Reopenable, step: Callable[[], T], what: str) -> T:
        """``step()``, called again after each link fault it meets once the session is
        reopened (``step`` must start from scratch: look its model up again, send its inputs
        again); ``what`` names it when it is given up. The call has a budget of its own (a
        run of one sample's), so that a long-lived session never runs out of retries. Without
        recovery, ``step()`` once."""
        stuck = 0
        budget = self.budget
        self.budget = self.stats.retries + self.policy.run_budget(1)
        try:
            while True:
                try:
                    result = step()
                except (ProjectAPIError, OSError) as err:
                    kind = fault_kind(err)
                    if not self.policy.enabled or kind is None:
                        raise
                    stuck += 1
                    waited = getattr(session, "last_wait_sec", 0.0) if kind == "timeout" else 0.0
                    self.recover(session, err, what=what, stuck=stuck, wait_sec=waited)
                    continue
                self.progress()
                return result
        finally:
            self.budget = max(budget, self.stats.retries)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


__all__ = [
    "NOISY_REOPEN_ATTEMPTS",
    "DEFAULT_RETRIES",
    "DEFAULT_RUN_RETRIES_PER_SAMPLE",
    "DEFAULT_SETUP_RETRIES",
    "MIN_RUN_RETRIES",
    "Recovery",
    "RecoveryStats",
    "RetryPolicy",
    "WaitEstimator",
    "best_block_bytes",
    "fault_kind",
]
