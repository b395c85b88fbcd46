"""Quick detection and resumption of link faults on the host template's device (issue 21): the
device tells of a request it dropped before it answers anything after it, a reply that stops
mid-frame is noticed without waiting out the reply's wait, the boot mark tells a device that
kept its memory from one that started again, and a run on a 1e-3 link goes on mid-sample where
a fault cut it, every output still equal to numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_tool
from fault_proxy import FaultProxy
from mlf_kernels import add_host_project, add_samples

from project_api.api.transport import Transport, WrappedTransport
from project_api.errors import SessionDesyncError, SessionTerminatedError
from project_api.micro import Session
from project_api.micro.framing import Unframer
from project_api.micro.recovery import RetryPolicy
from project_api.micro.session import DROPPED_FRAME_NOTICE, MessageType
from project_api.micro.stream import INPUT, OUTPUT, RESET, RUN, _Request, _resume_point
from project_api.tools.validate import validate

#: Two int8 inputs of 2 KiB each: under faults their copies are cut into several blocks.
SHAPE = (1, 2048)
CEILING_SEC = 20.0


@pytest.fixture(scope="module")
def big_add(tmp_path_factory: pytest.TempPathFactory):
    require_tool("make")
    require_tool("cc")
    project, info = add_host_project(tmp_path_factory.mktemp("resume"), SHAPE)
    yield project, info
    project.close()


def _data(n: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    return add_samples(n, seed, SHAPE)


class _Tamper(WrappedTransport):
    """Passes bytes through; ``write_hook`` / ``read_hook`` (set by a test) may change one
    write or read, once."""

    def __init__(self, child: Transport) -> None:
        super().__init__(child)
        self.write_hook = None
        self.read_hook = None

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        hook, self.write_hook = self.write_hook, None
        self.child.write(hook(bytes(data)) if hook else data, timeout_sec)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        data = self.child.read(n, timeout_sec)
        if self.read_hook is not None and len(data) > 20:
            hook, self.read_hook = self.read_hook, None
            data = hook(data)
        return data


def _open(project) -> _Tamper:
    transport = _Tamper(project.transport())
    transport.open()
    return transport


@pytest.mark.parametrize("damage", ["flip", "drop"])
def test_a_damaged_request_is_told_by_the_device_before_anything_else(big_add,
                                                                       damage: str) -> None:
    """A bit flipped in (or a byte dropped from) the copy of an input: the device drops the
    frame and says so in its notice (a dropped byte ends at the nop the host sends after each
    frame), so the wait ends on the notice: the error names it, and no timeout was needed."""
    project, info = big_add
    transport = _open(project)
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            model = session.model(info.name)
            model.set_input("a", np.zeros(SHAPE, np.int8))  # the views are cached

            def hurt(wire: bytes) -> bytes:
                assert wire.endswith(b"\xfe"), "no nop after the frame"
                at = len(wire) // 2
                if damage == "flip":
                    return wire[:at] + bytes([wire[at] ^ 0x10]) + wire[at + 1:]
                return wire[:at] + wire[at + 1:]

            transport.write_hook = hurt
            with pytest.raises(SessionDesyncError) as caught:
                model.set_input("a", np.ones(SHAPE, np.int8))
            assert "dropped a request frame" in str(caught.value)
            assert DROPPED_FRAME_NOTICE.decode() in str(caught.value)
            assert session._channel.device_drops == 1
    finally:
        transport.close()


def test_a_reply_that_stops_mid_frame_is_a_fault_at_once(big_add) -> None:
    """A byte lost from a reply: the frame never completes, and the silence in the middle of
    it ends the wait (not the reply's whole wait)."""
    project, info = big_add
    transport = _open(project)
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            model = session.model(info.name)
            model.set_input("a", np.zeros(SHAPE, np.int8))
            model.run()
            transport.read_hook = lambda data: data[:15] + data[16:]
            with pytest.raises(SessionDesyncError, match="stopped mid-way"):
                model.get_output(0)
    finally:
        transport.close()


def test_the_boot_mark_tells_kept_memory_from_a_restart(big_add) -> None:
    """After a reopen on the same boot the device answers our mark (memory kept, handles
    kept); after its server restarted (``tvm.testing.reset_server``, as a reset would) the mark
    is gone: nothing is taken as kept and the model's handles are looked up again."""
    project, info = big_add
    transport = _open(project)
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            model = session.model(info.name)
            session.ensure_boot_mark()
            session.reopen(reason="test", same_boot=True)
            assert session.memory_kept and session.same_boot
            assert session.model(info.name) is model
            with pytest.raises(SessionTerminatedError):
                session.call("tvm.testing.reset_server")  # ends the session as a reset does
            session.reopen(reason="test", same_boot=True)
            assert not session.memory_kept and not session.same_boot
            assert session.model(info.name) is not model
    finally:
        transport.close()


def test_a_firmware_without_the_mark_never_counts_as_kept(big_add, monkeypatch) -> None:
    """Firmware without ``project_api.boot_mark`` (TVM's own): memory is never taken as kept,
    so a sample is always sent again whole."""
    from project_api.micro import api

    project, info = big_add
    monkeypatch.setattr(api, "BOOT_MARK_FUNCTION", "project_api.no_such_function")
    transport = _open(project)
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            session.model(info.name)
            session.ensure_boot_mark()
            session.reopen(reason="test", same_boot=True)
            assert not session.memory_kept and session.same_boot
    finally:
        transport.close()


def _req(sample: int, stage: int, tensor: int = 0, offset: int = 0) -> _Request:
    return _Request(b"", 0, lambda reply: None, (sample, stage, tensor, offset))


def test_resume_point_rules() -> None:
    """Where streaming goes on after a fault, given the first request not answered and those
    after it the device may have run."""
    at_input = (3, INPUT, 1, 512)
    whole = (3, RESET, 0, 0)
    # Memory not known to be kept: the whole sample again.
    assert _resume_point(at_input, [_req(*at_input)], memory_kept=False) == whole
    # Kept, and only this sample's requests in flight: go on at the request.
    flight = [_req(*at_input), _req(3, INPUT, 1, 768), _req(3, RUN)]
    assert _resume_point(at_input, flight, memory_kept=True) == at_input
    # A later sample's input copy may have replaced this one's inputs: whole sample.
    assert _resume_point(at_input, [*flight, _req(4, INPUT)], memory_kept=True) == whole
    # After the run, a later sample's inputs do not matter, a later run does.
    at_output = (3, OUTPUT, 0, 0)
    flight = [_req(*at_output), _req(4, RESET), _req(4, INPUT, 0, 0)]
    assert _resume_point(at_output, flight, memory_kept=True) == at_output
    assert _resume_point(at_output, [*flight, _req(4, RUN)], memory_kept=True) == whole


def test_validate_at_1e_3_resumes_mid_sample_and_every_output_is_right(big_add) -> None:
    """60 samples of two 2 KiB inputs through a 1e-3 byte-error link both ways: copies are cut
    into smaller blocks as faults are measured, recoveries go on mid-sample, and every output
    equals numpy's; no sample is given up."""
    project, info = big_add
    n = 60
    data, want = _data(n, 31)
    proxy = FaultProxy.opened(project.transport(), 1e-3, 3101)
    answered: list[int] = []
    try:
        with Session(proxy, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            session.recovery.begin_run(n)
            report = validate(session, data, {"output": want}, module=info, number=0,
                              progress=lambda label, total: answered.append if
                              label == "device" else None)
            stats = session.recovery.stats
    finally:
        proxy.close()
    np.testing.assert_array_equal(report.outputs[0].reshape(n, -1), want.reshape(n, -1))
    assert sum(answered) == n
    assert stats.fault_count >= 20 and not stats.failed_samples
    assert stats.resumed > 0, stats
    assert stats.restarts == 0, stats  # a noisy link never needed the device restarted


def test_a_late_notice_after_the_reply_is_not_a_fault(big_add) -> None:
    """A notice that arrives while no reply is owed (noise between requests) is only logged."""
    project, info = big_add
    transport = _open(project)
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            model = session.model(info.name)
            model.set_input("a", np.zeros(SHAPE, np.int8))
            channel = session._channel
            notice = channel.protocol.framer.frame(
                bytes([0, 0, MessageType.LOG]) + DROPPED_FRAME_NOTICE + b" (bad CRC)")
            events = channel.protocol.receive(notice)
            for event in events:
                channel._handle(event)  # nothing owed: no error
            assert session.usable
            model.set_input("a", np.ones(SHAPE, np.int8))
            np.testing.assert_array_equal(model.get_input("a"), np.ones(SHAPE, np.int8))
    finally:
        transport.close()
    assert Unframer  # the wire helpers stay importable


def test_run_and_time_recover_through_a_noisy_link(big_add) -> None:
    """``project-api run``'s steps (set the inputs, run, read the outputs, then the device's
    timing) through a 1e-3 link: each is done again after a fault, the outputs equal numpy's
    and the timing is of one whole measurement."""
    from project_api.cli.base import run_and_time

    project, info = big_add
    data, want = _data(1, 41)
    proxy = FaultProxy.opened(project.transport(), 1e-3, 4101)
    try:
        with Session(proxy, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            outputs = timing = None
            faults = 0
            for _ in range(8):  # several calls, so that faults surely fall on each step
                outputs, timing = run_and_time(session, info, [data["a"][0], data["b"][0]],
                                               number=5, repeat=3)
                np.testing.assert_array_equal(outputs[0], want[0])
                stats = session.recovery.stats  # each call is a run of its own
                assert not stats.failed_samples
                faults += stats.fault_count
    finally:
        proxy.close()
    assert timing is not None and len(timing.results) == 3 and timing.min > 0
    assert faults > 0


class _LoseTimingReply(WrappedTransport):
    """Loses the device's reply to the ``count``-th request that calls a function handle made by
    the time evaluator (the measurement itself), once."""

    def __init__(self, child: Transport) -> None:
        super().__init__(child)
        self.armed = False
        self.lost = 0
        self._sent = Unframer()

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        for payload in self._sent.feed(data):
            # [u16 session][u8 type][u64 len][i32 code = 3 kCallFunc][u64 handle]
            if (len(payload) >= 23 and payload[2] == MessageType.NORMAL
                    and int.from_bytes(payload[11:15], "little") == 3
                    and (int.from_bytes(payload[15:23], "little") >> 16) & 0x7fff == 0x7fff
                    and not self.lost):
                self.armed = True
        self.child.write(data, timeout_sec)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        data = self.child.read(n, timeout_sec)
        if self.armed and data:
            self.armed = False
            self.lost += 1
            return b""
        return data


def test_session_time_measures_again_after_a_lost_reply(big_add) -> None:
    """The reply of the time evaluator's call is lost: the session is reopened and the whole
    measurement made again; without recovery the same loss ends the call."""
    project, info = big_add
    transport = _LoseTimingReply(project.transport())
    transport.open()
    transport.is_open = True
    try:
        with Session(transport, timeout_sec=2.0, retry=RetryPolicy()) as session:
            model = session.model(info.name)
            model.run()
            result = session.time(model, number=3, repeat=2)
            stats = session.recovery.stats
    finally:
        transport.close()
    assert transport.lost == 1
    assert len(result.results) == 2 and result.min > 0
    assert stats.fault_count == 1 and stats.retries == 1


class _SpoilOne(WrappedTransport):
    """Damages every request frame that carries ``marker`` (one sample's input): that sample
    can never get through, the others always can."""

    def __init__(self, child: Transport, marker: bytes) -> None:
        super().__init__(child)
        self.marker = marker
        self.spoiled = 0

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        at = bytes(data).find(self.marker)
        if at >= 0:
            self.spoiled += 1
            data = data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]
        self.child.write(data, timeout_sec)


def test_a_sample_that_never_gets_through_is_given_up_and_the_run_goes_on(big_add) -> None:
    """One sample's input is damaged on every try: after its retries it is given up by name,
    the run goes on with the next sample, and the report compares the other samples, each
    equal to numpy's, and is not ok (the CLI exits 1)."""
    project, info = big_add
    n, bad = 8, 5
    data, want = _data(n, 51)
    data["a"][bad, 0, 100:116] = np.arange(16, dtype=np.int8) - 77  # a marker in one sample
    want = (data["a"] + data["b"]).astype(np.int8)
    transport = _SpoilOne(project.transport(), data["a"][bad, 0, 100:116].tobytes())
    transport.open()
    transport.is_open = True
    try:
        with Session(transport, timeout_sec=CEILING_SEC, retry=RetryPolicy(retries=3)) as session:
            report = validate(session, data, {"output": want}, module=info, number=0)
    finally:
        transport.close()
    assert transport.spoiled == 4  # the first try and its 3 retries
    assert list(report.failed_samples) == [bad] and report.stopped is None
    assert not report.ok and report.requested == n and report.samples == n - 1
    assert report.answered == [i for i in range(n) if i != bad]
    idx = np.asarray(report.answered)
    np.testing.assert_array_equal(report.outputs[0].reshape(n - 1, -1),
                                  want[idx].reshape(n - 1, -1))
    (metrics,) = report.comparison().outputs
    assert metrics.exact == 1.0 and metrics.samples == n - 1


def test_cli_names_the_sample_given_up_and_exits_1(big_add, tmp_path, monkeypatch,
                                                    capsys) -> None:
    """``project-api validate`` with that sample: the table names it and says how many were
    not answered, ``--json`` has it in ``samples_failed`` with ``ok`` false, exit status 1."""
    import json

    from project_api.api.project import GeneratedProject
    from project_api.cli import main

    project, info = big_add
    n, bad = 6, 2
    data, want = _data(n, 61)
    data["a"][bad, 0, 200:216] = np.arange(16, dtype=np.int8) + 31
    np.savez(tmp_path / "x.npz", **data)
    np.savez(tmp_path / "y.npz", output=(data["a"] + data["b"]).astype(np.int8))
    marker = data["a"][bad, 0, 200:216].tobytes()
    plain = GeneratedProject.transport
    monkeypatch.setattr(GeneratedProject, "transport",
                        lambda self, *a, **k: _SpoilOne(plain(self, *a, **k), marker))
    argv = ["validate", str(project.directory), "--data", str(tmp_path / "x.npz"),
            "--reference", str(tmp_path / "y.npz"), "--retries", "2", "--number", "0"]
    assert main([*argv, "-q"]) == 1
    out = capsys.readouterr().out
    assert f"sample {bad} given up: 3 faults in a row without progress (--retries 2)" in out
    assert f"1 of {n} samples were not answered" in out
    assert main([*argv, "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert list(got["samples_failed"]) == [str(bad)] and got["ok"] is False
    assert got["samples_requested"] == n and got["stopped"] is None
