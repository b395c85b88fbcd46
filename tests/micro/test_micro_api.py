"""The high-level Session / Model / TimingResult API against the in-Python fake device."""

from __future__ import annotations

import logging
import statistics
import time

import numpy as np
import pytest
from micro_fake_device import FakeDevice, FakeModel, FakeTransport, Timeouts

from project_api.errors import (
    IoTimeoutError,
    RPCError,
    SessionError,
    SessionTerminatedError,
    SessionTimeoutError,
)
from project_api.micro import Model, Session, TimingResult
from project_api.micro.rpc import RPCCode, TypeCode
from project_api.micro.session import MessageType, SessionState


def mlp(inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, bias = inputs
    y = (x.astype(np.float32) * 0.5 + bias).astype(np.float32)
    return [y, (x.astype(np.int32).sum(axis=-1) % 128).astype(np.int8)]


def make_device(max_packet: int = 512) -> FakeDevice:
    model = FakeModel(
        inputs=[("input_1", "int8", (1, 300)), ("bias", "float32", (1, 300))],
        outputs=[("out", "float32", (1, 300)), ("sum", "int8", (1,))],
        compute=mlp,
    )
    return FakeDevice(max_packet_size=max_packet, models={"default": model})


def test_model_end_to_end() -> None:
    device = make_device()
    transport = FakeTransport(device)
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 300), dtype=np.int8)
    bias = rng.standard_normal((1, 300)).astype(np.float32)
    with Session(transport) as session:
        assert transport.is_open
        model = session.model()
        assert isinstance(model, Model)
        assert model.num_inputs == 2 and model.num_outputs == 2
        assert model.input_names == ["input_1", "bias"]
        assert model.get_input_index("bias") == 1
        model.set_input("input_1", x)
        model.set_input(1, bias)
        np.testing.assert_array_equal(model.get_input(0), x)
        np.testing.assert_array_equal(model.get_input("bias"), bias)
        model.run()
        y, s = model.get_output(0), model.get_output(1)
        expected_y, expected_s = mlp([x, bias])
        assert y.dtype == np.float32 and y.shape == (1, 300)
        np.testing.assert_array_equal(y, expected_y)
        assert s.dtype == np.int8 and s.shape == (1,)
        np.testing.assert_array_equal(s, expected_s)
        assert session.model("default") is model
    # Tensors bigger than a packet went in several chunks.
    assert device.requests.count(RPCCode.COPY_TO_REMOTE) > 2
    assert device.largest_payload <= 512
    # Every NDArray handle the host got was freed at close; on a CPU no copy needs a stream sync.
    assert device.live_ndarrays == set()
    assert device.stream_syncs == 0
    # Leaving the session ended it on the device and closed the transport the session opened.
    assert device.session.state == SessionState.NO_SESSION_ESTABLISHED
    assert not transport.is_open


def test_set_input_refuses_mismatches_before_sending() -> None:
    device = make_device()
    with Session(FakeTransport(device)) as session:
        model = session.model()
        sent_before = len(device.requests)
        with pytest.raises(
            SessionError, match=r"input 'input_1' .* is int8\[1, 300\]; got shape \[1, 301\]"
        ):
            model.set_input("input_1", np.zeros((1, 301), np.int8))
        with pytest.raises(SessionError, match=r"got dtype float32.*astype\(np.int8\)"):
            model.set_input("input_1", np.zeros((1, 300), np.float32))
        with pytest.raises(SessionError, match="out of range"):
            model.set_input(5, np.zeros(1, np.int8))
        assert RPCCode.COPY_TO_REMOTE not in device.requests[sent_before:]
        with pytest.raises(RPCError, match="no input named nope"):
            model.set_input("nope", np.zeros(1, np.int8))
        # Another shape of the same size is refused unless reshape=True (then the data is the same).
        with pytest.raises(SessionError, match=r"has shape \[1, 300\]; got shape \[300\]"):
            model.set_input("input_1", np.arange(300, dtype=np.int64).astype(np.int8))
        model.set_input("input_1", np.arange(300, dtype=np.int64).astype(np.int8), reshape=True)
        np.testing.assert_array_equal(model.get_input(0)[0], np.arange(300).astype(np.int8))
        with pytest.raises(SessionError, match="has 2 outputs; output index 2"):
            model.get_output(2)
    assert device.live_ndarrays == set()


def test_time_uses_device_evaluator() -> None:
    device = make_device()
    with Session(FakeTransport(device)) as session:
        model = session.model()
        model.set_input(0, np.ones((1, 300), np.int8))
        runs_before = device.models["default"].runs
        result = session.time(model, number=4, repeat=3)
        assert isinstance(result, TimingResult)
        assert len(result.results) == 3 and all(r > 0 for r in result.results)
        assert result.mean == pytest.approx(statistics.fmean(result.results))
        assert result.median == statistics.median(result.results)
        assert result.min <= result.median <= result.max
        # One warm-up plus number x repeat runs happened on the device.
        assert device.models["default"].runs - runs_before == 1 + 4 * 3
    # The evaluator function handle was released.
    assert any(tc == TypeCode.PACKED_FUNC_HANDLE for _, tc in device.freed)


def test_unknown_model() -> None:
    with Session(FakeTransport(make_device())) as session:
        with pytest.raises(RPCError, match="no model named other"):
            session.model("other")


def test_session_handshake_failure_closes_transport() -> None:
    transport = FakeTransport(make_device(), timeouts=Timeouts(0.02, 0.1, 0))
    transport.drop_writes = 100
    with pytest.raises(SessionTimeoutError):
        Session(transport).open()
    assert not transport.is_open


def test_timeouts_override_transport() -> None:
    transport = FakeTransport(make_device(), timeouts=Timeouts(0, 0, 0))
    transport.drop_writes = 100
    with pytest.raises(SessionTimeoutError, match="after 0.1s"):
        Session(transport, timeouts=Timeouts(0.05, 0.1, 0)).open()


def test_device_restart_reported_clearly(caplog: pytest.LogCaptureFixture) -> None:
    device = make_device()
    with Session(FakeTransport(device)) as session:
        model = session.model()
        device.log("watchdog reset")
        device.boot()
        with caplog.at_level(logging.INFO, logger="project_api.device"):
            with pytest.raises(SessionTerminatedError, match="probably restarted"):
                model.run()
    assert "watchdog reset" in [
        r.getMessage() for r in caplog.records if r.name == "project_api.device"
    ]


def test_session_not_open() -> None:
    session = Session(FakeTransport(make_device()))
    with pytest.raises(SessionError, match="not open"):
        session.model()


def test_already_open_transport_is_left_open() -> None:
    transport = FakeTransport(make_device())
    transport.open()
    with Session(transport, name="bench") as session:
        assert session.call("tvm.rpc.server.GetCRTMaxPacketSize") == 512 - 11
    assert transport.is_open


def test_garbage_between_replies_is_survived() -> None:
    device = make_device()
    transport = FakeTransport(device)
    with Session(transport) as session:
        model = session.model()
        transport.inject(b"\x00garbage\xff\xfe\xff\xfd\x01")
        device.session.send_message(MessageType.LOG, b"noise")
        device.output += device.session.take_output()
        assert model.num_inputs == 2


def test_close_releases_model_so_next_session_can_create_it() -> None:
    device = make_device()
    transport = FakeTransport(device)
    with Session(transport) as session:
        session.model()
        assert device.live_executors
    assert device.live_executors == set()
    # Function handles and the executor module were freed.
    assert sum(1 for _, tc in device.freed if tc == TypeCode.PACKED_FUNC_HANDLE) == 8
    assert sum(1 for _, tc in device.freed if tc == TypeCode.MODULE_HANDLE) == 1
    with Session(transport) as session:
        session.model().run()


def test_reply_timeout_makes_session_unusable() -> None:
    device = make_device()
    transport = FakeTransport(device, timeouts=Timeouts(0, 0, 0.1))
    with Session(transport) as session:
        model = session.model()
        device.silent = True
        with pytest.raises(SessionTimeoutError, match="no reply from the device within 0.1s"):
            model.run()
        device.silent = False
        with pytest.raises(SessionError, match="open a new Session"):
            model.run()
    assert not transport.is_open


class BlockingSerialServer:
    """A Project API client whose server reads like microTVM's serial templates: pyserial's
    ``read(n)`` waits until ``n`` bytes came or the timeout passed."""

    def __init__(self, device: FakeDevice, read_timeout_sec: float) -> None:
        self.device = device
        self.read_timeout_sec = read_timeout_sec
        self.pending = bytearray()
        self.is_shutdown = False
        self.stalls = 0
        self.reads: list[int] = []

    def open_transport(self, options: dict) -> dict:
        return {"timeouts": {"session_start_retry_timeout_sec": 0, "session_start_timeout_sec": 5.0,
                             "session_established_timeout_sec": 5.0}}  # fmt: skip

    def close_transport(self) -> None:
        pass

    def shutdown(self) -> None:
        self.is_shutdown = True

    def write_transport(self, data: bytes, timeout_sec: float | None) -> None:
        self.device.receive(bytes(data))

    def read_transport(self, n: int, timeout_sec: float | None) -> dict:
        self.reads.append(n)
        self.pending += self.device.output
        self.device.output.clear()
        if len(self.pending) < n:
            self.stalls += 1  # pyserial would sit here until the timeout
            time.sleep(self.read_timeout_sec)
            if not self.pending:
                raise IoTimeoutError()
        data = bytes(self.pending[:n])
        del self.pending[:n]
        return {"data": data}


def test_json_rpc_transport_reads_only_bytes_that_are_coming() -> None:
    from project_api.api.transport import ProjectTransport

    device = make_device()
    server = BlockingSerialServer(device, read_timeout_sec=0.5)
    transport = ProjectTransport(server, use_endpoint=False)
    begin = time.monotonic()
    with Session(transport) as session:
        model = session.model()
        model.set_input(0, np.ones((1, 300), np.int8))
        model.run()
        model.get_output(1)
    assert server.stalls == 0, server.reads
    assert time.monotonic() - begin < 5.0
    assert server.is_shutdown


def test_steady_state_inference_costs_only_the_copies() -> None:
    device = make_device(max_packet=4096)  # every tensor fits one packet
    rng = np.random.default_rng(1)
    with Session(FakeTransport(device)) as session:
        model = session.model()
        assert model.input_names == ["input_1", "bias"]
        first = len(device.requests)
        for i in range(4):
            x = rng.integers(-128, 128, (1, 300), dtype=np.int8)
            bias = rng.standard_normal((1, 300)).astype(np.float32)
            start = len(device.requests)
            model.set_input("input_1", x)
            model.set_input(1, bias)
            after_set = len(device.requests)
            model.run()
            after_run = len(device.requests)
            y, s = model.get_output(0), model.get_output(1)
            expected_y, expected_s = mlp([x, bias])
            np.testing.assert_array_equal(y, expected_y)
            np.testing.assert_array_equal(s, expected_s)
            if i == 0:
                # The first use asked for each tensor's view once (2 inputs + 2 outputs).
                assert len(device.live_ndarrays) == 4
                continue
            # Steady state: set_input = one copy each, run = one call, get_output = one copy each.
            assert device.requests[start:after_set] == [RPCCode.COPY_TO_REMOTE] * 2
            assert device.requests[after_set:after_run] == [RPCCode.CALL_FUNC]
            assert device.requests[after_run:] == [RPCCode.COPY_FROM_REMOTE] * 2
        assert device.count(RPCCode.FREE_HANDLE, first) == 0
        assert device.count(RPCCode.DEV_STREAM_SYNC, first) == 0
        # Input 0 by name and by index share one handle: 4 views are live, no more.
        np.testing.assert_array_equal(model.get_input(0), model.get_input("input_1"))
        assert len(device.live_ndarrays) == 4
    # Closing freed the cached views (NDArray handles) along with the rest.
    assert device.live_ndarrays == set()
    assert sum(1 for _, tc in device.freed if tc == TypeCode.NDARRAY_HANDLE) == 4


def test_model_close_frees_cached_views_and_a_new_session_asks_again() -> None:
    device = make_device()
    transport = FakeTransport(device)
    x = np.full((1, 300), 3, np.int8)
    with Session(transport) as session:
        model = session.model()
        model.set_input(0, x)
        model.close()
        assert device.live_ndarrays == set() and device.live_executors == set()
    with Session(transport) as session:
        model = session.model()
        start = len(device.requests)
        model.set_input(0, x)
        model.set_input(1, np.zeros((1, 300), np.float32))
        model.run()
        np.testing.assert_array_equal(model.get_output(0), (x * 0.5).astype(np.float32))
        # Fresh views were asked for in the new session: 2 inputs + output 0.
        assert len(device.live_ndarrays) == 3
        assert device.count(RPCCode.CALL_FUNC, start) >= 4
    assert device.live_ndarrays == set()


def test_non_cpu_tensors_keep_the_stream_sync() -> None:
    device = make_device()
    device.device_type = 2  # kDLCUDA: copies may be asynchronous there
    with Session(FakeTransport(device)) as session:
        model = session.model()
        x = np.arange(300, dtype=np.int16).astype(np.int8).reshape(1, 300)
        model.set_input(0, x)
        model.set_input(1, np.ones((1, 300), np.float32))
        model.run()
        start = len(device.requests)
        y = model.get_output(0)
        np.testing.assert_array_equal(y, mlp([x, np.ones((1, 300), np.float32)])[0])
        assert device.requests[-1] == RPCCode.DEV_STREAM_SYNC
        assert device.count(RPCCode.DEV_STREAM_SYNC, start) == 1
    assert device.stream_syncs == 3  # two set_input copies + one get_output copy
    assert device.live_ndarrays == set()


def test_oversized_input_refused_before_sending_even_when_cached() -> None:
    device = make_device()
    with Session(FakeTransport(device)) as session:
        model = session.model()
        model.set_input(0, np.zeros((1, 300), np.int8))  # the view is cached now
        start = len(device.requests)
        with pytest.raises(SessionError, match=r"got shape \[1, 600\]"):
            model.set_input(0, np.zeros((1, 600), np.int8))
        with pytest.raises(SessionError, match="got dtype int16"):
            model.set_input(0, np.zeros((1, 300), np.int16))
        assert device.requests[start:] == []
