"""Faults from the first byte in ``project-api mlperftiny`` (issue 32) on the emulated STM32F405
(QEMU netduinoplus2), both modes: 20 seeds at 1e-3 both ways, faults allowed from each run's
first byte (``name``, the set-up's sync, ``profile``, ``db crc``, ...), over one shared boot.
Accuracy scores equal TensorFlow Lite Micro's; performance windows complete."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from fault_proxy import FaultNth, FaultProxy
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    build_project,
    stm32_tools_and_no_qemu_left,
)

from project_api.emit import emit
from project_api.micro.recovery import RetryPolicy
from project_api.tools import mlperftiny as mt
from project_api.tools.references import tflm_outputs

TIMEOUT_SEC = 2.0


@pytest.fixture(scope="module")
def kws(models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("mlperf_stm32_byte0")
    tflite = models_dir / "kws_ref_model_int8.tflite"
    emitted = emit(tflite, tmp / "kws.tar")
    project = build_project(emitted.path, tmp / "prj", project_type="mlperftiny")
    rng = np.random.default_rng(34)
    xs = rng.integers(-128, 128, (2, *emitted.inputs[0].shape), dtype=np.int8)
    (out,) = tflm_outputs(tflite.read_bytes(), [xs])
    q = emitted.outputs[0].quantization
    scale, zero = np.float32(q["scale"][0]), int(q["zero_point"][0])
    scores = [[float(f"{float(v):.3f}") for v in
               (scale * (o.reshape(-1).astype(np.int32) - zero).astype(np.float32))]
              for o in out]
    samples = [mt.Sample(f"s{i}", i, [xs[i].tobytes()]) for i in range(2)]
    link = project.transport()
    link.open()  # the one boot the runs share
    link.is_open = True
    yield link, samples, scores
    link.close()
    project.close()


def _run(link, mode: str, samples, scores) -> None:
    """As the CLI does over the shared boot: ``name`` (a garbled one is left to the run's
    set-up), then the mode with recovery on."""
    device = mt.Device(link, timeout_sec=TIMEOUT_SEC)
    try:
        device.name()
    except mt.MlperfTinyError as err:
        if isinstance(err, mt.LinkClosedError):
            raise
    if mode == "accuracy":
        report = mt.accuracy(device, samples, retry=RetryPolicy())
        assert not report.failed and not report.stopped
        assert report.answered == [0, 1] and report.scores == scores
    else:
        perf = mt.performance(device, samples[:1], windows=1, warmups=1,
                              min_window_seconds=0.01, retry=RetryPolicy())
        assert not perf.failed and not perf.stopped
        assert len(perf.windows) == 1 and perf.windows[0].inference_ms > 0


@pytest.mark.parametrize("mode", ["accuracy", "performance"])
def test_a_fault_in_each_command_of_the_opening_is_mended_on_qemu(kws, mode: str) -> None:
    """Each command of a run's opening (``name``, the set-up's sync, ``profile``, ``db crc``,
    the loads, the first ``infer``) damaged in turn, one run each over the shared boot: every
    run completes, scores equal to TensorFlow Lite Micro's. Only the opening, to keep QEMU time
    down; the host test faults every command. A performance window's length is
    timing-dependent (a short window is re-run), but nothing before the first ``infer`` is, so
    every faulted run reaches and damages its chosen command."""
    link, samples, scores = kws
    clean = FaultNth(link, None, framing="text")
    _run(clean, mode, samples, scores)
    assert "infer" in clean.commands, clean.commands
    opening = clean.commands.index("infer") + 1
    assert opening >= 5, clean.commands  # name, sync, profile, db crc, db load, ..., infer
    for nth in range(opening):
        faulted = FaultNth(link, nth, framing="text")
        _run(faulted, mode, samples, scores)
        assert faulted.damaged, (mode, nth, faulted.commands)
        assert faulted.commands[nth] == clean.commands[nth], (nth, faulted.commands)


@pytest.mark.parametrize("mode", ["accuracy", "performance"])
def test_seed_sweep_faulting_from_byte_0_on_qemu(kws, mode: str) -> None:
    link, samples, scores = kws
    injected = 0
    for seed in range(20):
        proxy = FaultProxy.from_byte_0(link, 1e-3, 3500 + seed)
        _run(proxy, mode, samples, scores)
        injected += proxy.counts.total
    assert injected > 0
