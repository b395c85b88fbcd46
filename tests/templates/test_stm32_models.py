"""STM32 template on QEMU: the three shared models through `validate`, bit-exact with TFLite
Micro, and the clear errors for a missing toolchain and an emulator killed mid-session (#9)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import path_with_only
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    QEMU_BOARD,
    build_project,
    qemu_pids,
    stm32_tools_and_no_qemu_left,
)

from project_api.api.project import generate_project
from project_api.emit import emit
from project_api.errors import MissingProgramError, ProjectAPIError, SessionError
from project_api.tools.validate import validate

MODELS = ("hello_world_int8", "micro_speech_int8", "kws_ref_model_int8")


@pytest.fixture(scope="module")
def projects(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("stm32_models")
    built = {}
    try:
        for name in MODELS:
            tflite = models_dir / f"{name}.tflite"
            mlf = emit(tflite, root / f"{name}.tar", name="default")
            project = build_project(mlf.path, root / name)
            built[name] = (project, tflite, mlf)
            project.flash()
        yield built
    finally:
        for project, _, _ in built.values():
            project.close()


def _samples(mlf, n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = mlf.inputs[0]
    return {t.name: rng.integers(-128, 127, (n, *t.shape), dtype=np.int8, endpoint=True)}


@pytest.mark.parametrize("name", MODELS)
def test_validate_on_qemu_is_bit_exact_with_tflite_micro(projects: dict, name: str) -> None:
    project, tflite, mlf = projects[name]
    n = 40 if name == "hello_world_int8" else 12
    report = validate(project, _samples(mlf, n, seed=len(name)), tflite=tflite, litert=False,
                      number=2, repeat=2)
    (tflm,) = report.comparison("tflm").outputs
    assert report.samples == n and tflm.samples == n
    assert tflm.exact == 1.0 and tflm.max_abs_int == 0.0, tflm
    # -icount shift=0: SysTick counts instructions, so every timing round gives the same time,
    # but for the few instructions of a UART interrupt that may land in one round (1 ns each).
    assert report.timing is not None
    times = report.timing.results
    assert min(times) > 0 and max(times) - min(times) <= max(1e-3 * max(times), 50e-9)


def test_qemu_killed_mid_session_is_a_clear_error(projects: dict) -> None:
    project, _, mlf = projects["hello_world_int8"]
    x = np.zeros(mlf.inputs[0].shape, dtype=np.int8)
    before = qemu_pids()
    with project.session() as session:
        model = session.model()
        model.set_input(0, x)
        model.run()
        started = qemu_pids() - before
        assert len(started) == 1
        os.kill(started.pop(), signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises((SessionError, ProjectAPIError)) as info:
            for _ in range(50):
                model.set_input(0, x)
                model.run()
        assert time.monotonic() - t0 < 30  # reported, not hung
    message = str(info.value).splitlines()[0]
    assert "the link to the device closed" in message and "crashed, exited" in message
    # The project still works afterwards: the next session starts a new emulator.
    with project.session() as session:
        model = session.model()
        model.set_input(0, x)
        model.run()
        assert model.get_output(0).size == 1


def test_missing_toolchain_gets_the_install_hint(projects: dict, tmp_path: Path) -> None:
    _, _, mlf = projects["hello_world_int8"]
    with path_with_only(tmp_path / "bin"):  # make and python, but no arm-none-eabi-gcc
        with generate_project("stm32", mlf.path, tmp_path / "prj", {"board": QEMU_BOARD}) as project:
            with pytest.raises(MissingProgramError) as info:
                project.build()
    assert "'arm-none-eabi-gcc' is not installed" in str(info.value)
    assert "gcc-arm-none-eabi" in str(info.value)
