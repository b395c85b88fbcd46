"""Recovery from link faults on the host template's device link (issue 21): a run through a
lossy link, a device killed mid-run and a late reply of an abandoned session all end with every
sample answered once and right (checked against numpy), and every fault counted."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_tool
from fault_proxy import Direction, FaultProxy, KillAfter
from mlf_kernels import add_host_project, add_samples, device_pids

from project_api.api.transport import Transport, WrappedTransport
from project_api.errors import (
    IoTimeoutError,
    SessionError,
    SessionTimeoutError,
)
from project_api.micro import Session
from project_api.micro.framing import Unframer
from project_api.micro.recovery import RetryPolicy
from project_api.micro.session import MessageType
from project_api.tools.validate import validate

SHAPE = (1, 8)
#: The per-reply ceiling (what a lost reply would cost without quick waits).
CEILING_SEC = 20.0
#: The byte-error rate (both directions) of the lossy-link test.
RATE = 1e-4


@pytest.fixture(scope="module")
def add_project(tmp_path_factory: pytest.TempPathFactory):
    require_tool("make")
    require_tool("cc")
    project, info = add_host_project(tmp_path_factory.mktemp("recovery"), SHAPE)
    yield project, info
    project.close()


def _data(n: int, seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    inputs, want = add_samples(n, seed, SHAPE)
    return inputs, {"output": want}


def _check(report, want: dict[str, np.ndarray], n: int) -> None:
    assert report.samples == n
    np.testing.assert_array_equal(report.outputs[0].reshape(n, -1), want["output"].reshape(n, -1))


def test_validate_through_a_lossy_link_answers_every_sample(add_project) -> None:
    """300 samples at a 1e-4 byte-error rate in both directions: with recovery every output
    equals numpy's and faults were met and counted; without it the same link ends the run."""
    project, info = add_project
    n = 300
    data, want = _data(n, 21)
    proxy = FaultProxy.opened(project.transport(), RATE, 2101)
    try:
        with Session(proxy, timeout_sec=2.0, retry=RetryPolicy()) as session:
            session.recovery.begin_run(n)
            report = validate(session, data, want, module=info, number=0)
            stats = session.recovery.stats
    finally:
        proxy.close()
    _check(report, want, n)
    assert proxy.counts.in_direction(Direction.TO_DEVICE) > 0
    assert proxy.counts.in_direction(Direction.FROM_DEVICE) > 0
    assert stats.fault_count > 0 and stats.retries == stats.fault_count
    assert stats.retried_samples and not stats.failed_samples
    # The same seed without recovery: the first fault that costs a reply ends the run.
    proxy = FaultProxy.opened(project.transport(), RATE, 2101)
    try:
        with pytest.raises(SessionError), Session(proxy, timeout_sec=1.0) as session:
            validate(session, data, want, module=info, number=0)
    finally:
        proxy.close()


def test_lost_reply_is_noticed_in_about_the_request_time(add_project) -> None:
    """Once the link and the model were measured, a reply that never comes is given up after
    a wait sized from them, far below the 20 s per-reply ceiling (which stays the limit of a
    wait nothing predicts)."""
    project, info = add_project
    transport = _Swallow(project.transport())
    transport.open()
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            data, want = _data(20, 5)
            report = validate(session, data, want, module=info, number=0)
            _check(report, want, 20)
            model = session.model(info.name)
            transport.swallow = True  # the device's next reply is lost on the way
            with pytest.raises(SessionTimeoutError) as caught:
                model.run()
    finally:
        transport.close()
    limit = float(str(caught.value).split("within ")[1].split("s ")[0])
    assert limit < CEILING_SEC / 10, caught.value
    assert "measured" in str(caught.value)


def test_device_killed_mid_validate_run_completes(add_project) -> None:
    """The device process is SIGKILLed after some samples: recovery reopens the link through
    the template's open_transport (a new device process), and the run completes, right."""
    project, info = add_project
    n = 400
    data, want = _data(n, 7)
    binary = project.directory / "build/main"
    transport = KillAfter(project.transport(), lambda: device_pids(binary), after=200)
    transport.open()
    first = device_pids(binary)
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            session.recovery.begin_run(n)
            report = validate(session, data, want, module=info, number=0)
            stats = session.recovery.stats
    finally:
        transport.close()
    assert transport.killed, "the device was never killed"
    _check(report, want, n)
    assert stats.restarts >= 1 and stats.faults["link closed"] + stats.faults["timeout"] >= 1
    assert len(first) == 1 and first[0] in transport.killed
    assert not device_pids(binary)  # closing the link ended the new device process too


def test_late_reply_of_an_abandoned_session_is_not_taken(add_project) -> None:
    """The device's reply to a ``run`` is held back until the host gave up on that session
    and started a new one; then the old reply arrives in front of the new session's replies.
    It carries the old session id, so it is ignored: the sample is answered by the new session,
    once and right."""
    project, info = add_project
    n = 30
    data, want = _data(n, 11)
    transport = _HoldOne(project.transport(), hold_at=40)
    transport.open()
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            session.recovery.begin_run(n)
            report = validate(session, data, want, module=info, number=0)
            stats = session.recovery.stats
            ids = set(session._used_ids)
    finally:
        transport.close()
    assert transport.held and transport.released, "no reply was held back and let go"
    _check(report, want, n)
    assert stats.faults["timeout"] == 1 and len(ids) == 2


def test_no_retry_policy_is_microtvm_behaviour(add_project) -> None:
    """``RetryPolicy.disabled()`` (``--no-retry``): the first fault ends the run."""
    project, info = add_project
    data, want = _data(10, 3)
    transport = _Swallow(project.transport())
    transport.open()
    try:
        with Session(transport, timeout_sec=1.0, retry=RetryPolicy.disabled()) as session:
            transport.swallow = True
            with pytest.raises(SessionTimeoutError):
                validate(session, data, want, module=info, number=0)
    finally:
        transport.close()


def test_a_device_gone_for_good_stops_the_run_and_reports_what_was_answered(
        add_project) -> None:
    """Every reply lost from some point on: the sample that meets it is given up by name, no
    new session or reopened link brings the device back, and the run stops; the report holds
    the samples answered before, each equal to numpy's, and says why it stopped."""
    project, info = add_project
    data, want = _data(10, 4)
    transport = _Swallow(project.transport())
    transport.open()
    try:
        with Session(transport, timeout_sec=1.0, retry=RetryPolicy(retries=2)) as session:
            session.model(info.name)
            validate(session, _data(1, 9)[0], module=info, number=0)  # measured, and marked
            transport.swallow_from = transport.reads + 12  # a few replies more, then silence
            report = validate(session, data, want, module=info, number=0)
    finally:
        transport.close()
    assert report.stopped is not None and "no new session could be started" in report.stopped
    assert not report.ok and report.requested == 10 and 1 <= report.samples < 10
    idx = np.asarray(report.answered)
    np.testing.assert_array_equal(report.outputs[0].reshape(len(idx), -1),
                                  want["output"][idx].reshape(len(idx), -1))
    assert len(report.failed_samples) == 1
    assert report.recovery is not None and report.recovery.restarts == \
        RetryPolicy().restart_attempts  # the link was reopened too


class _Swallow(WrappedTransport):
    """Loses the device's bytes: the next reply when :attr:`swallow` is set, or every byte
    read after :attr:`swallow_from` reads."""

    def __init__(self, child: Transport) -> None:
        super().__init__(child)
        self.swallow = False
        self.swallow_from: int | None = None
        self.reads = 0

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        data = self.child.read(n, timeout_sec)
        self.reads += 1
        if self.swallow_from is not None and self.reads > self.swallow_from:
            return b""
        if self.swallow and data:
            self.swallow = False
            self._drain()
            return b""
        return data

    def _drain(self) -> None:
        """Read and drop the rest of the reply that is on its way."""
        while True:
            try:
                if not self.child.read(4096, 0.05):
                    return
            except Exception:  # noqa: BLE001 - nothing more is coming
                return


class _HoldOne(WrappedTransport):
    """Holds back the device's bytes from the ``hold_at``-th read until the host sends a new
    session's start (the old session was abandoned), then hands them out before anything else."""

    def __init__(self, child: Transport, hold_at: int) -> None:
        super().__init__(child)
        self.hold_at = hold_at
        self.reads = 0
        self.held = b""
        self.released = False
        self._holding = False
        self._sent = Unframer()

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        for payload in self._sent.feed(data):
            if self._holding and payload[2] == MessageType.START_SESSION_INIT:
                self._holding = False  # a handshake: the old session was given up
        self.child.write(data, timeout_sec)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        self.reads += 1
        if self.reads == self.hold_at and not self.held:
            self._holding = True
        if self._holding:
            try:
                self.held += self.child.read(n, 0.05)
            except IoTimeoutError:
                pass
            return b""
        if self.held and not self.released:
            self.released = True
            return self.held
        return self.child.read(n, timeout_sec)
