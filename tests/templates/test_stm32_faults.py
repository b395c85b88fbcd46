"""Faults on the emulated STM32F405's UART link (QEMU netduinoplus2): seeded bit flips, dropped
bytes and noise bursts in both directions never yield a wrong result, and a device that resets
mid-session ends the session with a clear error.

What the protocol guarantees, and so what these tests hold the host to: every frame carries a
CRC-16, so a corrupted request or reply is dropped by its receiver. There is no retransmission:
a dropped request gets no reply and a dropped reply never arrives, so the host's wait for it
times out (``SessionTimeoutError``) and the session is marked out of step (a late reply could
answer the wrong request); the caller opens a new session, whose new session id makes the device
and the host ignore whatever the old one still had in flight. A corruption outside any frame
(noise between frames, a flipped nop prefix) costs nothing: it is "recovered".
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from pathlib import Path

import numpy as np
import pytest
from fault_proxy import Direction, FaultProxy, KillAfter
from mlf_kernels import Module, Tensor, write_mlf
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    QEMU_BOARD,
    build_project,
    qemu_pids,
    stm32_tools_and_no_qemu_left,
)

from project_api.emit import emit
from project_api.emit.reference import run_tflm
from project_api.errors import (
    ProjectAPIError,
    RPCError,
    SessionError,
    SessionTerminatedError,
)
from project_api.micro import Session
from project_api.micro.recovery import RetryPolicy
from project_api.tools.validate import validate

_LOG = logging.getLogger(__name__)

INFERENCES = 1000
BYTE_ERROR_RATE = 1e-4
SEED = 20261201
#: The per-reply wait: what a lost frame costs. One hello_world round trip takes about 5 ms
#: on QEMU; a slow machine only turns more faults into reported errors, never wrong results.
REPLY_WAIT_SEC = 1.0
#: Failed session openings in a row after which the emulator is restarted.
OPEN_ATTEMPTS = 3

@pytest.fixture(scope="module")
def hello_world(models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("stm32_faults")
    tflite = models_dir / "hello_world_int8.tflite"
    emitted = emit(tflite, tmp / "hello_world.tar", name="default")
    project = build_project(emitted.path, tmp / "prj")
    yield project, tflite, emitted
    project.close()


@dataclasses.dataclass
class Tally:
    """What became of each inference (and of the session openings between them)."""

    clean: int = 0  #: correct, and no fault hit its bytes
    recovered: int = 0  #: correct although faults hit its bytes
    reported: int = 0  #: an error was raised (then a new session was opened)
    wrong: list[int] = dataclasses.field(default_factory=list)  #: indices of wrong results
    open_failures: int = 0  #: session openings (handshake + model lookup) that raised
    device_restarts: int = 0  #: emulator restarts (OPEN_ATTEMPTS failed openings, or a refusal)
    errors: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def _open_session(proxy: FaultProxy, tally: Tally):
    """A new session and its model over ``proxy``; restarts the emulator when opening keeps
    failing (a fault may have hit the device in a way no new session can repair)."""
    failures = 0
    while True:
        session = Session(proxy, timeout_sec=REPLY_WAIT_SEC)
        try:
            session.open()
            return session, session.model()
        except SessionError as err:
            session.close()
            tally.open_failures += 1
            tally.errors[f"opening: {type(err).__name__}"] += 1
            failures += 1
            _LOG.info("opening a session failed (%s): %s", type(err).__name__, err)
            if failures >= OPEN_ATTEMPTS:
                tally.device_restarts += 1
                proxy.close()
                proxy.open()
                failures = 0


def test_thousand_inferences_under_line_faults(hello_world) -> None:
    """1,000 hello_world inferences at a 1e-4 byte-error rate: every result equals TFLite
    Micro's, or the call raised; none is wrong and none hangs."""
    project, tflite, emitted = hello_world
    model_bytes = tflite.read_bytes()
    tensor = emitted.inputs[0]
    rng = np.random.default_rng(SEED)
    xs = rng.integers(-128, 127, (INFERENCES, *tensor.shape), dtype=np.int8, endpoint=True)
    want = {int(v): run_tflm(model_bytes, [np.full(tensor.shape, v, dtype=np.int8)])[0]
            for v in np.unique(xs)}
    tally = Tally()
    proxy = FaultProxy.opened(project.transport(), BYTE_ERROR_RATE, SEED)
    session = None
    try:
        for i, x in enumerate(xs):
            if session is None:
                session, model = _open_session(proxy, tally)
            proxy.take_recent()
            try:
                model.set_input(0, x)
                model.run()
                got = model.get_output(0)
            except ProjectAPIError as err:
                tally.reported += 1
                tally.errors[type(err).__name__] += 1
                _LOG.info("inference %d: %s: %s", i, type(err).__name__, err)
                session.close()
                session = None
                if isinstance(err, RPCError):
                    # The device itself refused: restart it, as a user would.
                    tally.device_restarts += 1
                    proxy.close()
                    proxy.open()
                continue
            faults = proxy.take_recent()
            expected = want[int(x.reshape(-1)[0])]
            if got.dtype != expected.dtype or not np.array_equal(
                    got.reshape(expected.shape), expected):
                tally.wrong.append(i)
            elif faults:
                tally.recovered += 1
            else:
                tally.clean += 1
    finally:
        if session is not None:
            session.close()
        proxy.close()
    _LOG.warning("line faults: %s; %d inferences: %d clean, %d recovered, %d reported, %d "
                 "wrong; %d failed session openings, %d emulator restarts; errors %s",
                 proxy.counts, INFERENCES, tally.clean, tally.recovered, tally.reported,
                 len(tally.wrong), tally.open_failures, tally.device_restarts,
                 dict(tally.errors))
    assert tally.wrong == [], f"wrong results at inferences {tally.wrong}"
    assert tally.clean + tally.recovered + tally.reported == INFERENCES
    # The faults really went in, both ways, and some were survived without an error.
    assert proxy.counts.in_direction(Direction.TO_DEVICE) > 0
    assert proxy.counts.in_direction(Direction.FROM_DEVICE) > 0
    assert tally.reported > 0 and tally.clean > tally.reported


def test_abandoned_sessions_leave_nothing_on_the_device(hello_world) -> None:
    """A session abandoned after a timeout cannot free its executor's tensor views (replies may
    no longer match requests), so the device frees a dead session's tensors when the next
    session starts: 80 abandoned sessions in a row (the pool held about 47 before) all work,
    without a device reset."""
    project, tflite, emitted = hello_world
    tensor = emitted.inputs[0]
    x = np.full(tensor.shape, 17, dtype=np.int8)
    want = run_tflm(tflite.read_bytes(), [x])[0]
    transport = project.transport()
    transport.open()
    transport.is_open = True
    try:
        for _ in range(80):
            with Session(transport, timeout_sec=REPLY_WAIT_SEC) as session:
                model = session.model()
                model.set_input(0, x)
                model.run()
                np.testing.assert_array_equal(model.get_output(0).reshape(want.shape), want)
                with pytest.raises(SessionError):  # nothing is owed: the wait times out
                    session.rpc.channel.receive(max_wait_sec=0.05)
                assert not session.usable  # so close() leaves the handles on the device
    finally:
        transport.close()


def _reset_module(name: str = "default") -> Module:
    """``y = x + 1`` (int8), except that x == -128 makes the firmware request a system reset
    (SCB AIRCR SYSRESETREQ) in the middle of the run: QEMU restarts the machine, as a
    watchdog or a brown-out would restart a real board."""
    x, y = Tensor("x", "int8", (1, 4)), Tensor("y", "int8", (1, 4))
    src = f"""#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <stdint.h>
#include "tvmgen_{name}.h"

#define AIRCR (*(volatile uint32_t*)0xE000ED0Cu)

TVM_DLL int32_t tvmgen_{name}_fused_add_one(int8_t* p0, int8_t* T_out) {{
  if (p0[0] == -128) {{
    __asm volatile("dsb" ::: "memory");
    AIRCR = 0x05FA0004u; /* VECTKEY | SYSRESETREQ */
    __asm volatile("dsb" ::: "memory");
    for (;;) {{
    }}
  }}
  for (int32_t i = 0; i < 4; ++i) {{
    T_out[i] = (int8_t)(p0[i] + 1);
  }}
  return 0;
}}

int32_t tvmgen_{name}_run(struct tvmgen_{name}_inputs* inputs,
                          struct tvmgen_{name}_outputs* outputs) {{
  return tvmgen_{name}_fused_add_one((int8_t*)inputs->x, (int8_t*)outputs->y);
}}
"""
    return Module(name, [x], [y], src, 0, [f"tvmgen_{name}_fused_add_one"])


def _add_one(session: Session, value: int) -> None:
    model = session.model()
    x = np.full((1, 4), value, dtype=np.int8)
    model.set_input(0, x)
    model.run()
    np.testing.assert_array_equal(model.get_output(0), (x + 1).astype(np.int8))


def test_device_reset_mid_session(tmp_path: Path) -> None:
    """The firmware restarts during a run: its RPC server's start-up TerminateSession reaches
    the host, which raises SessionTerminatedError (no hang, no value); the old session stays
    refused; a new session over the same link works, bit-exact."""
    mlf = write_mlf(tmp_path / "reset.tar", [_reset_module()])
    with build_project(mlf, tmp_path / "prj") as project:
        before = qemu_pids()
        transport = project.transport()
        transport.open()
        transport.is_open = True  # sessions come and go over this one link (see Session)
        emulator = qemu_pids() - before
        try:
            with Session(transport) as session:
                _add_one(session, 5)
                model = session.model()
                model.set_input(0, np.full((1, 4), -128, dtype=np.int8))
                with pytest.raises(SessionTerminatedError, match="ended the session"):
                    model.run()
                with pytest.raises(SessionTerminatedError):
                    model.get_output(0)  # the old session is over
            with Session(transport) as session:  # the restarted firmware serves a new one
                _add_one(session, 41)
                _add_one(session, 126)
            # One machine: QEMU restarted the firmware itself (no second emulator, no exit).
            assert len(emulator) == 1 and qemu_pids() - before == emulator
        finally:
            transport.close()


def _hello_plan(hello_world, n: int, seed: int):
    """(project, ModuleInfo, data, want): ``n`` seeded hello_world inputs and TFLite Micro's
    outputs for them (each distinct input value run once)."""
    from project_api.archive import mlf

    project, tflite, emitted = hello_world
    with mlf.open_mlf(emitted.path) as library:
        info = library.module(None)
    tensor = emitted.inputs[0]
    rng = np.random.default_rng(seed)
    xs = rng.integers(-128, 127, (n, *tensor.shape), dtype=np.int8, endpoint=True)
    model_bytes = tflite.read_bytes()
    table = {int(v): run_tflm(model_bytes, [np.full(tensor.shape, v, dtype=np.int8)])[0]
             for v in np.unique(xs)}
    want = np.stack([table[int(x.reshape(-1)[0])] for x in xs])
    return project, info, {info.inputs[0].name: xs}, want


def test_thousand_inferences_under_line_faults_all_answered(hello_world) -> None:
    """The 1,000 inferences at 1e-4 again, through ``validate`` with recovery on: every sample
    is answered, once, equal to TFLite Micro's output; the faults were counted."""
    project, info, data, want = _hello_plan(hello_world, INFERENCES, SEED)
    proxy = FaultProxy.opened(project.transport(), BYTE_ERROR_RATE, SEED)
    try:
        with Session(proxy, timeout_sec=REPLY_WAIT_SEC, retry=RetryPolicy()) as session:
            report = validate(session, data, module=info, number=0)
    finally:
        proxy.close()
    stats = report.recovery
    _LOG.warning("line faults: %s; recovery: %s", proxy.counts, stats and stats.summary())
    assert report.samples == INFERENCES
    got = report.outputs[0]
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert proxy.counts.in_direction(Direction.TO_DEVICE) > 0
    assert proxy.counts.in_direction(Direction.FROM_DEVICE) > 0
    assert stats is not None and stats.fault_count > 0 and not stats.failed_samples


def test_qemu_killed_mid_validate_run_completes(hello_world) -> None:
    """The emulator is SIGKILLed mid-run: recovery reopens the link (the template starts QEMU
    again from the flashed image) and the run completes, every output TFLite Micro's."""
    n = 200
    project, info, data, want = _hello_plan(hello_world, n, SEED + 1)
    before = qemu_pids()
    transport = KillAfter(project.transport(), lambda: qemu_pids() - before, after=300)
    transport.open()
    try:
        with Session(transport, timeout_sec=REPLY_WAIT_SEC, retry=RetryPolicy()) as session:
            report = validate(session, data, module=info, number=0)
    finally:
        transport.close()
    assert transport.killed, "the emulator was never killed"
    np.testing.assert_array_equal(report.outputs[0].reshape(want.shape), want)
    stats = report.recovery
    assert stats is not None and stats.restarts >= 1 and not stats.failed_samples
    assert not transport.killed & qemu_pids()


def test_late_reply_of_an_abandoned_session_is_not_taken_on_qemu(hello_world) -> None:
    """The protocol has no request ids. Through the fault proxy at 1e-4, the device's bytes
    are held back once, mid-run, until the host has given up on that session and started a new
    one; then the old bytes (a whole reply of the old session among them) arrive first. They
    carry the old session id, so nothing of them is taken: every sample is answered once, equal
    to TFLite Micro's, and the held reply shows up as one fault."""
    from project_api.micro.framing import Unframer

    n = 120
    project, info, data, want = _hello_plan(hello_world, n, SEED + 2)
    proxy = FaultProxy.opened(project.transport(), BYTE_ERROR_RATE, SEED + 2)
    done = [0]

    def progress(label: str, total: int):
        def advance(k: int) -> None:
            done[0] += k
            if done[0] == n // 2:
                proxy.hold_next_reply()
        return advance if label == "device" else None

    try:
        with Session(proxy, timeout_sec=REPLY_WAIT_SEC, retry=RetryPolicy()) as session:
            report = validate(session, data, module=info, number=0, progress=progress)
            ids = set(session._used_ids)
            final = session._channel.protocol.session_id
    finally:
        proxy.close()
    late = [p for p in Unframer().feed(proxy.released) if len(p) >= 3 and p[2] == 0x10]
    assert late, "no reply of the old session arrived late"
    late_ids = {int.from_bytes(p[:2], "little") for p in late}
    assert late_ids <= ids and final not in late_ids and len(ids) >= 2
    assert done[0] == n
    np.testing.assert_array_equal(report.outputs[0].reshape(want.shape), want)
    assert report.recovery is not None and report.recovery.fault_count >= 1
