"""Issue #8, host RPC side: long runs, hung devices, Ctrl-C, timing limits, executor reuse.

Against the in-Python fake device (tests/micro_fake_device.py); its ``run_sec`` makes each model
run keep the device busy, so a reply comes late without the test sleeping on its own.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from micro_fake_device import FakeDevice, FakeModel, FakeTransport, Timeouts

from project_api.errors import RPCError, SessionError, SessionTimeoutError
from project_api.micro import Session
from project_api.micro.rpc import RPCCode, TypeCode


def make_device(**kwargs) -> FakeDevice:
    model = FakeModel(
        inputs=[("x", "int8", (1, 4))],
        outputs=[("y", "int8", (1, 4))],
        compute=lambda ins: [ins[0]],
    )
    return FakeDevice(models={"default": model}, **kwargs)


def test_timing_longer_than_the_reply_timeout_gets_a_wait_from_its_work() -> None:
    # 1 warm-up + 4 x 3 runs of 0.05 s = 0.65 s, more than the 0.3 s per-reply wait.
    device = make_device(run_sec=0.05)
    with Session(FakeTransport(device, timeouts=Timeouts(0, 0, 0.3))) as session:
        model = session.model()
        result = session.time(model, number=4, repeat=3)
        assert len(result.results) == 3
        assert all(r >= 0.05 for r in result.results)
        # One run was timed first (1 warm-up + 1 run), then the measurement itself.
        assert device.time_evaluators == 2
        assert device.models["default"].runs == 2 + 1 + 4 * 3
        model.run()  # the session is still in step
    assert sum(1 for _, tc in device.freed if tc == TypeCode.PACKED_FUNC_HANDLE) >= 2


def test_explicit_timeouts_skip_the_probe_and_raise_the_limit() -> None:
    device = make_device(run_sec=0.4)
    with Session(FakeTransport(device, timeouts=Timeouts(0, 0, 0.2))) as session:
        model = session.model()
        model.run(timeout_sec=5)
        session.time(model, number=1, repeat=2, timeout_sec=10)
        assert device.time_evaluators == 1
    # Session(timeout_sec=) replaces the per-reply wait of every call.
    device = make_device(run_sec=0.4)
    with Session(FakeTransport(device, timeouts=Timeouts(0, 0, 0.2)), timeout_sec=5) as session:
        model = session.model()
        model.run()
        session.time(model, number=1, repeat=1)
        assert device.time_evaluators == 1


def test_late_run_reply_names_the_call_the_wait_and_the_option() -> None:
    device = make_device(run_sec=0.5)
    with Session(FakeTransport(device, timeouts=Timeouts(0, 0, 0.1))) as session:
        model = session.model()
        with pytest.raises(SessionTimeoutError) as info:
            model.run()
    message = str(info.value)
    assert "run of model 'default'" in message
    assert "within 0.1s" in message
    # From Python the advice is the Session's parameter; no command line flag is named.
    assert "Session(timeout_sec=SECONDS)" in message and "--timeout" not in message
    assert "\n" not in message


def test_late_reply_advice_is_the_callers_own() -> None:
    """Issue #17, item 2: a command line names its own flag (validate has --timeout too)."""
    device = make_device(run_sec=0.5)
    advice = "project-api validate --timeout SECONDS"
    with Session(FakeTransport(device, timeouts=Timeouts(0, 0, 0.1)),
                 timeout_advice=advice) as session:
        model = session.model()
        with pytest.raises(SessionTimeoutError) as info:
            model.run()
    assert f"raise the limit ({advice})" in str(info.value)
    assert "project-api run" not in str(info.value)


def test_a_derived_timing_limit_says_how_it_was_made() -> None:
    """Issue #17, item 2: a timing call waits longer than the per-reply limit (its work, from
    one run measured first); the message gives the limit it used and how it was made."""
    import time

    device = make_device(run_sec=0.05)
    armed = []
    create_evaluator, process = device._time_evaluator, device.process

    def evaluator(*args):  # the second evaluator is the measurement itself: it will hang
        reply = create_evaluator(*args)
        if device.time_evaluators == 2:
            armed.append(True)
        return reply

    def hang_once_armed(packet):
        if armed:
            device.silent = True  # this request (the measurement) and all after go unanswered
        return process(packet)

    device.handles[device.globals["runtime.RPCTimeEvaluator"]] = evaluator
    device.process = hang_once_armed
    with Session(FakeTransport(device, timeouts=Timeouts(0, 0, 0.3))) as session:
        model = session.model()
        began = time.monotonic()
        with pytest.raises(SessionTimeoutError) as info:
            session.time(model, number=4, repeat=3)
        waited = time.monotonic() - began
    message = str(info.value)
    m = re.search(r"within ([0-9.]+)s", message)
    assert m is not None, message
    limit = float(m.group(1))
    # 0.3 s per reply + 2 x (1 + 12 runs) x the measured per-run time (>= 0.05 s).
    assert limit >= 0.3 + 2 * 13 * 0.05
    assert "the 0.3s per-reply wait plus 2 x the" in message and "measured first" in message
    assert waited >= limit  # it waited what it says (the probe came first)


def test_hung_device_while_timing_reports_the_timing_call_first() -> None:
    device = make_device()
    transport = FakeTransport(device, timeouts=Timeouts(0, 0, 0.1))
    with Session(transport) as session:
        model = session.model()
        device.silent = True
        with pytest.raises(SessionTimeoutError) as info:
            session.time(model, number=10, repeat=3)
        # The first message says what hung, not "an earlier reply timed out".
        message = str(info.value)
        assert "no reply from the device within 0.1s" in message
        assert "RPCTimeEvaluator" in message or "timing model 'default'" in message
        assert "Session(timeout_sec=SECONDS)" in message
        assert "earlier" not in message
        # A follow-on call says why the session is out of step.
        with pytest.raises(SessionError, match="timed out after 0.1s.*open a new Session"):
            model.run()
    assert not transport.is_open


def test_ctrl_c_while_timing_leaves_at_once_without_cleanup_waits() -> None:
    device = make_device(run_sec=0.05)
    transport = FakeTransport(device, timeouts=Timeouts(0, 0, 0.5))
    with pytest.raises(KeyboardInterrupt):
        with Session(transport) as session:
            model = session.model()
            sent = len(device.requests)
            transport.interrupt_reads = 1
            session.time(model, number=100, repeat=3, timeout_sec=60)
    # Nothing was sent after the interrupt: no handle release that would wait for a busy
    # device (the reply owed would answer it), and the transport was closed.
    assert device.requests[sent:] == [RPCCode.GET_GLOBAL_FUNC, RPCCode.CALL_FUNC, RPCCode.CALL_FUNC]
    assert not transport.is_open


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"repeat": 65537}, r"repeat 65537 is out of range.*1 <= repeat <= 65536"),
        ({"repeat": 0}, r"repeat 0 is out of range"),
        ({"number": 10**9 + 1}, r"1 <= number <= 1000000000"),
        ({"number": 2**64}, r"number .* is out of range"),
        ({"min_repeat_ms": -1}, r"min_repeat_ms must be an integer >= 0"),
    ],
)
def test_timing_limits_are_checked_before_sending(kwargs: dict, pattern: str) -> None:
    device = make_device()
    with Session(FakeTransport(device)) as session:
        model = session.model()
        sent = len(device.requests)
        with pytest.raises(SessionError, match=pattern):
            session.time(model, **kwargs)
        assert device.requests[sent:] == []


@pytest.mark.parametrize("stale", ["", "runtime.RPCTimeEvaluator: no function named foo"])
def test_tvm_runtime_executor_created_once_per_boot(stale: str) -> None:
    device = make_device(executor_once_per_boot=True)
    transport = FakeTransport(device)
    with Session(transport) as session:
        session.model().run()
    device.last_error = stale
    with Session(transport) as session:
        with pytest.raises(SessionError, match=r"reset the device") as info:
            session.model()
        assert "once per boot" in str(info.value)
        assert "\n" not in str(info.value)
    device.boot()  # a reset: the executor can be created again
    with Session(transport) as session:
        session.model().run()


def test_unknown_model_is_named() -> None:
    with Session(FakeTransport(make_device())) as session:
        with pytest.raises(RPCError, match=r"no AOT model 'other' \(no model named other\)"):
            session.model("other")


def test_same_size_other_shape_is_refused_unless_reshape() -> None:
    device = make_device()
    with Session(FakeTransport(device)) as session:
        model = session.model()
        sent = len(device.requests)
        for shape in ((4,), (2, 2), (1, 1, 4)):
            expected = re.escape(f"shape [1, 4]; got shape {list(shape)}")
            with pytest.raises(SessionError, match=expected):
                model.set_input(0, np.zeros(shape, np.int8).reshape(shape))
        assert RPCCode.COPY_TO_REMOTE not in device.requests[sent:]
        model.set_input(0, np.arange(4, dtype=np.int8).reshape(2, 2), reshape=True)
        np.testing.assert_array_equal(model.get_input(0), [[0, 1, 2, 3]])
