"""MLPerf Tiny firmware (project_type=mlperftiny, crt/src/mlperftiny): the UART protocol against
the golden transcript tests/golden/mlperftiny/kws01.txt on the host template (stdin/stdout)
and on the STM32 template under QEMU, and ``results`` equal to TensorFlow Lite Micro's
dequantized outputs for the shared KWS model (#13)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool
from helpers.mlperftiny_transcript import (
    golden_blocks,
    play_golden,
    samples,
    tflm_results,
)

from project_api.api.project import GeneratedProject, generate_project
from project_api.api.transport import Transport
from project_api.emit import emit
from project_api.tools.mlperftiny import Device, DeviceError


def test_golden_commands_are_well_formed() -> None:
    too_long = [c for c, _ in golden_blocks() if c and c.startswith("xxx")]
    assert too_long and len(too_long[0]) - 1 > 80  # longer than EE_CMD_SIZE


def check_against_tflm(device: Device, tflite: Path, mlf, n: int, seed: int) -> None:
    for x in samples(mlf, n, seed):
        device.load(x.tobytes())
        got = device.infer(1, 0, 120.0).results
        assert [f"{v:.3f}" for v in got] == tflm_results(tflite, mlf, x)


@pytest.fixture(scope="module")
def kws(models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tflite = models_dir / "kws_ref_model_int8.tflite"
    return tflite, emit(tflite, tmp_path_factory.mktemp("kws") / "kws.tar")


@pytest.fixture(scope="module")
def host_project(kws, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedProject]:
    require_tool("cc")
    require_tool("make")
    _, mlf = kws
    project = generate_project("host", mlf.path, tmp_path_factory.mktemp("host") / "prj",
                               {"project_type": "mlperftiny", "warning_as_error": True,
                                "sanitize": True}, build=True)
    try:
        yield project
    finally:
        project.close()


def _open(project: GeneratedProject) -> Transport:
    t = project.transport()
    t.open()
    return t


def test_host_golden_transcript_and_results_equal_tflm(host_project, kws) -> None:
    tflite, mlf = kws
    (x,) = samples(mlf, 1, seed=13)
    t = _open(host_project)
    try:
        results = play_golden(t, x.tobytes())
    finally:
        t.close()
    want = tflm_results(tflite, mlf, x)
    assert len(results) == 3
    for r in results:
        assert [f"{v:.3f}" for v in r] == want


def test_host_results_equal_tflm_on_many_inputs(host_project, kws) -> None:
    tflite, mlf = kws
    t = _open(host_project)
    try:
        device = Device(t)
        device.start()
        check_against_tflm(device, tflite, mlf, n=20, seed=1)
    finally:
        t.close()


def test_host_device_errors_and_resync(host_project) -> None:
    """The client raises the device's e-[...] text and stays in step for the next command."""
    t = _open(host_project)
    try:
        device = Device(t)
        assert device.start()[-1] == "m-init-done"
        with pytest.raises(DeviceError, match=r"Command 'db load' must be >0 bytes"):
            device.command("db load 0")
        assert device.name() == "dut-[project-api]"
        assert device.profile() == {"profile": "ULPMark for tinyML Firmware V0.0.1",
                                    "model": "kws01"}
        help_lines = device.command("help", free_text=True)
        assert any(line.startswith("infer N") for line in help_lines)
    finally:
        t.close()


def test_host_float32_input_is_quantized_on_the_device(host_project, kws) -> None:
    """An int8 model also takes float32 values (4 bytes each) and quantizes them with the
    input's scale and zero point, as the benchmark's AD firmware does."""
    tflite, mlf = kws
    q = mlf.inputs[0].quantization
    scale, zero = np.float32(q["scale"][0]), int(q["zero_point"][0])
    (x,) = samples(mlf, 1, seed=7)
    xf = ((x.astype(np.float32) - zero) * scale).astype("<f4")
    t = _open(host_project)
    try:
        device = Device(t)
        device.start()
        device.load(xf.tobytes())
        got = device.infer(1, 0, 60.0).results
    finally:
        t.close()
    assert [f"{v:.3f}" for v in got] == tflm_results(tflite, mlf, x)


# ---- QEMU (STM32 template) -------------------------------------------------------------------

@pytest.fixture(scope="module")
def qemu_project(kws, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedProject]:
    import stm32_support
    from stm32_support import build_project

    for tool in ("make", "arm-none-eabi-gcc", "qemu-system-arm", "pgrep"):
        require_tool(tool)
    stm32_support._OURS[:] = [str(tmp_path_factory.getbasetemp())]  # our QEMUs only
    _, mlf = kws
    project = build_project(mlf.path, tmp_path_factory.mktemp("stm32") / "prj",
                            project_type="mlperftiny")
    try:
        project.flash()
        yield project
    finally:
        project.close()


def test_qemu_golden_transcript_and_results_equal_tflm(qemu_project, kws) -> None:
    from stm32_support import qemu_pids

    before = qemu_pids()
    tflite, mlf = kws
    (x,) = samples(mlf, 1, seed=13)
    t = _open(qemu_project)
    try:
        results = play_golden(t, x.tobytes())
        device = Device(t)
        check_against_tflm(device, tflite, mlf, n=5, seed=2)
    finally:
        t.close()
    want = tflm_results(tflite, mlf, x)
    assert len(results) == 3 and all([f"{v:.3f}" for v in r] == want for r in results)
    deadline = time.monotonic() + 5
    while qemu_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not qemu_pids() - before, "QEMU left running after close"


def test_host_image_models_take_uint8_pixels_less_128(kws, tmp_path: Path) -> None:
    """-o mlperftiny_model=ic01 (or vww01): the data set's uint8 pixels enter an int8 model
    less 128, as the benchmark's reference firmware does (shown on the KWS network)."""
    require_tool("cc")
    tflite, mlf = kws
    with generate_project("host", mlf.path, tmp_path / "prj",
                          {"project_type": "mlperftiny", "mlperftiny_model": "ic01"},
                          build=True) as project:
        (x,) = samples(mlf, 1, seed=21)
        pixels = (x.astype(np.int16) + 128).astype(np.uint8)
        t = _open(project)
        try:
            device = Device(t)
            device.start()
            assert device.profile()["model"] == "ic01"
            device.load(pixels.tobytes())
            got = device.infer(1, 0, 60.0).results
        finally:
            t.close()
    assert [f"{v:.3f}" for v in got] == tflm_results(tflite, mlf, x)
