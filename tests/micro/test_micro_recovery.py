"""Recovery from link faults against the in-Python device: the wait estimator, a damaged frame
while replies are owed, and a retried sample on a device that creates its executor once per
boot (TVM's own C runtime)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from micro_fake_device import FakeDevice, FakeModel, FakeTransport, Timeouts

from project_api.errors import (
    IoTimeoutError,
    RetriesExhaustedError,
    RPCError,
    SessionDesyncError,
)
from project_api.micro import Session
from project_api.micro.recovery import Recovery, RetryPolicy, WaitEstimator
from project_api.tools.samples import TensorSpec
from project_api.tools.validate import stream_samples


def _device(once_per_boot: bool = False) -> FakeDevice:
    model = FakeModel(inputs=[("x", "int8", (1, 16))], outputs=[("y", "int8", (1, 16))],
                      compute=lambda xs: [(xs[0].astype(np.int16) * 3 % 127).astype(np.int8)])
    return FakeDevice(models={"default": model}, executor_once_per_boot=once_per_boot)


def _want(xs: np.ndarray) -> np.ndarray:
    return (xs.astype(np.int16) * 3 % 127).astype(np.int8)


def test_wait_estimator_sizes_from_what_was_measured() -> None:
    waits = WaitEstimator(floor_sec=0.25, margin=3.0)
    call = (3, 0x1234)
    assert waits.limit(call, 100) is None  # nothing measured: the caller's ceiling applies
    for _ in range(20):
        waits.observe(call, 100, 0.2, computes=True)
    # A steady 0.2 s: 3 x 0.2 plus four (shrinking) deviations, well under a second.
    limit = waits.limit(call, 100)
    assert limit is not None and 0.6 <= limit < 1.0
    waits.observe((1, 40, 48), 100, 0.01)  # a short syscall teaches the link's latency
    assert waits.limit((1, 44, 48), 104) == 0.25  # another short request: the floor
    assert waits.limit((3, 0x9999), 100) is None  # an unknown function may compute for long


def test_damaged_frame_while_two_replies_are_owed_desyncs_at_once() -> None:
    """Without request ids the reply after a lost one would answer the wrong request: a frame
    damaged while two replies are owed puts the session out of step before any is taken."""
    device = _device()
    transport = FakeTransport(device, Timeouts(0, 0, 5))
    with Session(transport, retry=RetryPolicy()) as session:
        channel = session.rpc.channel
        model = session.model()
        model.set_input(0, np.zeros((1, 16), np.int8))
        handle = model._functions["get_num_inputs"]
        from project_api.micro.rpc import call_func_packet

        channel.send(call_func_packet(handle, []))
        channel.send(call_func_packet(handle, []))
        transport.inject(b"\xff\xfd\x05\x00\x00\x00hello\x12\x34")  # a frame with a bad CRC
        with pytest.raises(SessionDesyncError, match="lost or damaged"):
            channel.receive()
        assert not session.usable
    # Without recovery the same noise is skipped (microTVM's behaviour, for compatibility).
    device = _device()
    transport = FakeTransport(device, Timeouts(0, 0, 5))
    with Session(transport) as session:
        channel = session.rpc.channel
        handle = session.model()._functions["get_num_inputs"]
        from project_api.micro.rpc import call_func_packet

        channel.send(call_func_packet(handle, []))
        channel.send(call_func_packet(handle, []))
        transport.inject(b"\xff\xfd\x05\x00\x00\x00hello\x12\x34")
        channel.receive()
        channel.receive()


@pytest.mark.parametrize("once_per_boot", [False, True], ids=["crt", "tvm-crt"])
def test_lost_request_is_retried_and_every_sample_answered(once_per_boot: bool) -> None:
    """Two host writes lost mid-stream: each is noticed, the session reopened and the sample
    sent again; every output equals the model's, each sample answered once. On a device that
    creates its executor once per boot the kept handles are what make the retry possible."""
    device = _device(once_per_boot)
    transport = FakeTransport(device, Timeouts(0.2, 2, 1))
    rng = np.random.default_rng(3)
    xs = rng.integers(-128, 127, (40, 1, 16), dtype=np.int8, endpoint=True)
    answered = []
    with Session(transport, retry=RetryPolicy(wait_floor_sec=0.05)) as session:
        session.recovery.begin_run(len(xs))
        model = session.model()
        spec = TensorSpec("y", "y", np.dtype(np.int8), (1, 16))
        original = transport.write
        count = [0]

        def lossy(data: bytes, timeout_sec: float | None) -> None:
            count[0] += 1
            if count[0] in (30, 90):
                transport.drop_writes = 1
            original(data, timeout_sec)

        transport.write = lossy  # type: ignore[method-assign]
        outs, _ = stream_samples(session, model, [xs], [spec], progress=answered.append,
                                 pipeline=False)
        stats = session.recovery.stats
        kept = session.same_boot
    np.testing.assert_array_equal(outs[0], _want(xs))
    assert len(answered) == len(xs)
    assert stats.faults["timeout"] == 2 and stats.retries == 2 and not stats.failed_samples
    assert kept  # a lost write: the device did not restart, its handles were kept


def test_without_kept_handles_a_once_per_boot_device_refuses_the_retry() -> None:
    """What the kept handles spare: looking the model up again on such a device fails."""
    device = _device(once_per_boot=True)
    transport = FakeTransport(device, Timeouts(0.2, 2, 1))
    with Session(transport, retry=RetryPolicy()) as session:
        session.model()
        session.reopen(reason="test")  # a new session, handles forgotten
        with pytest.raises(RPCError, match="once per boot"):
            session.model()


class _SlowLink(FakeTransport):
    """A link that, once :attr:`slow` is set, hands out the device's bytes one per read,
    ``byte_sec`` apart: a clean but slow link, its replies arriving steadily."""

    def __init__(self, device: FakeDevice, timeouts: object, byte_sec: float) -> None:
        super().__init__(device, timeouts)
        self.byte_sec = byte_sec
        self.slow = False

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        if not self.slow:
            return super().read(n, timeout_sec)
        if timeout_sec is not None and timeout_sec < self.byte_sec:
            time.sleep(timeout_sec)
            raise IoTimeoutError()
        time.sleep(self.byte_sec)
        return super().read(1, timeout_sec)


def test_clean_slow_link_never_times_out_while_bytes_flow() -> None:
    """A clean link that slows down mid-run (each reply now takes several times the measured
    limit, its bytes arriving steadily): no reply is declared lost, no fault counted."""
    device = _device()
    transport = _SlowLink(device, Timeouts(0.2, 2, 5), byte_sec=0.004)
    rng = np.random.default_rng(5)
    xs = rng.integers(-128, 127, (24, 1, 16), dtype=np.int8, endpoint=True)
    answered: list[int] = []

    def progress(k: int) -> None:
        answered.append(k)
        transport.slow = 20 <= len(answered) < 23  # three samples over the slow link

    with Session(transport, retry=RetryPolicy(wait_floor_sec=0.05)) as session:
        session.recovery.begin_run(len(xs))
        spec = TensorSpec("y", "y", np.dtype(np.int8), (1, 16))
        outs, _ = stream_samples(session, session.model(), [xs], [spec], progress=progress,
                                 pipeline=False)
        stats = session.recovery.stats
    np.testing.assert_array_equal(outs[0], _want(xs))
    assert len(answered) == len(xs)
    assert stats.fault_count == 0 and stats.retries == 0, stats.summary()


def test_damaged_frame_while_one_reply_is_owed_is_a_fault_at_once() -> None:
    """A frame with a bad CRC while one reply is owed (that reply was most likely hit): the
    session is put out of step at once, not after a wait for a reply that will not come."""
    device = _device()
    transport = FakeTransport(device, Timeouts(0, 0, 5))
    with Session(transport, retry=RetryPolicy(quick_waits=False)) as session:
        channel = session.rpc.channel
        handle = session.model()._functions["get_num_inputs"]
        from project_api.micro.rpc import call_func_packet

        transport.drop_writes = 1  # the reply never comes: only the damage can tell
        channel.send(call_func_packet(handle, []))
        transport.inject(b"\xff\xfd\x05\x00\x00\x00hello\x12\x34")  # a frame with a bad CRC
        with pytest.raises(SessionDesyncError, match="lost or damaged"):
            channel.receive()
        assert not session.usable


def test_setup_survives_more_faults_in_a_row_than_a_sample_may_have() -> None:
    """Faults in a row while a run is set up (the model's tensor views looked up after each
    reopen) are counted apart from a sample's retries: with --retries 2, five setup faults in
    a row and the run still completes, every sample answered once and right."""
    device = _device()
    transport = FakeTransport(device, Timeouts(0.2, 2, 1))
    rng = np.random.default_rng(7)
    xs = rng.integers(-128, 127, (6, 1, 16), dtype=np.int8, endpoint=True)
    spec = TensorSpec("y", "y", np.dtype(np.int8), (1, 16))
    answered: list[int] = []
    with Session(transport, retry=RetryPolicy(retries=2, wait_floor_sec=0.05)) as session:
        session.recovery.begin_run(len(xs))
        stream_samples(session, session.model(), [xs], [spec], pipeline=False)  # measures
        session.recovery.begin_run(len(xs))
        original = transport.write
        setup_faults = [5]

        def lossy(data: bytes, timeout_sec: float | None) -> None:
            # Lose the first request of each new session (not its handshake): the setup's.
            if setup_faults[0] and session._channel is not None and not answered:
                setup_faults[0] -= 1
                transport.drop_writes = 1
            original(data, timeout_sec)

        transport.write = lossy  # type: ignore[method-assign]
        outs, _ = stream_samples(session, session.model(), [xs], [spec],
                                 progress=answered.append, pipeline=False)
        stats = session.recovery.stats
    np.testing.assert_array_equal(outs[0], _want(xs))
    assert len(answered) == len(xs)
    assert setup_faults == [0] and stats.fault_count == 5 and stats.retries == 5
    assert not stats.failed_samples


def test_a_copy_of_a_new_block_size_is_predicted_from_the_kind_measured() -> None:
    """Copies are cut into blocks whose size follows the fault rate: a block of a size never
    sent before is predicted from the same kind of request measured at another size (scaled
    up to its bytes), not left to the whole per-reply limit."""
    waits = WaitEstimator(floor_sec=0.05, margin=3.0)
    for _ in range(10):
        waits.observe((5, 1100, 48), 1200, 0.02)  # kCopyToRemote of 1 KB blocks
    small, large = waits.limit((5, 600, 48), 700), waits.limit((5, 2100, 48), 2200)
    assert small is not None and large is not None
    assert small == pytest.approx(waits.limit((5, 1100, 48), 1200))  # never shrunk below
    assert large > small  # more bytes: more time
    assert waits.limit((6, 40, 1048), 1100) is None  # another kind, nothing measured


def test_waits_stay_measured_for_the_first_timeouts_of_a_sample() -> None:
    """On a noisy link most timeouts are real losses: a sample's first three in a row keep
    the measured waits (raising them would make every later loss cost more); past them the
    waits double, at most to 8x. A damaged frame never raises them."""
    from project_api.errors import SessionTimeoutError

    device = _device()
    transport = FakeTransport(device, Timeouts(0.2, 2, 1))
    with Session(transport, retry=RetryPolicy()) as session:
        session.recovery.begin_run(10)
        scales = []
        for stuck in range(1, 9):
            session.recovery.recover(session, SessionTimeoutError("lost"), sample=0,
                                     stuck=stuck)
            scales.append(session.recovery.waits.scale)
        session.recovery.recover(session, SessionDesyncError("damaged"), sample=1, stuck=1)
        after_damage = session.recovery.waits.scale
    assert scales == [1, 1, 1, 2, 4, 8, 8, 8]
    assert after_damage == 8  # unchanged by a lost frame (progress() resets it)


@pytest.mark.parametrize(("policy", "budget", "rule"), [
    (RetryPolicy(run_retries=3), 3, "(run_retries=3)"),
    (RetryPolicy(), 100, "(16 a sample, at least 100)"),
])
def test_a_used_up_run_budget_names_the_rule_that_set_it(policy: RetryPolicy, budget: int,
                                                         rule: str) -> None:
    class Reopens:
        count = 0

        def reopen(self, *, restart: bool = False, reason: str = "",
                   same_boot: bool = False) -> None:
            self.count += 1

    session, recovery = Reopens(), Recovery(policy)
    recovery.begin_run(2)
    for i in range(budget):
        recovery.recover(session, SessionDesyncError("a damaged frame"), sample=i % 2)
    with pytest.raises(RetriesExhaustedError) as err:
        recovery.recover(session, SessionDesyncError("a damaged frame"), sample=0)
    assert f"the run used up its {budget} retries {rule}" in str(err.value)
    assert session.count == budget and recovery.stats.retries == budget
    assert policy.describe().startswith(f"a run's budget of retries: {rule[1:-1]};")
