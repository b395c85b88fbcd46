"""zephyr template with Zephyr itself: the full flow on qemu_cortex_m3 (generate, ``west
build``, run under QEMU, host-driven inference bit-exact with TFLite Micro; project type
mlperftiny through the golden MLPerf Tiny transcript, results equal to TFLite Micro's).

Needs ``ZEPHYR_BASE`` (a Zephyr tree with its SDK or toolchain set up) and west. Zephyr cannot be
installed from the package registries CI reaches, so without them these tests skip with that
reason, even under CI=true (the one exception to tests/conftest.py ``missing``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.mlperftiny_transcript import play_golden, samples, tflm_results

from project_api.api.project import generate_project
from project_api.emit import emit
from project_api.emit.reference import run_tflm

ZEPHYR_UNAVAILABLE = ("Zephyr is not installable from the package registries CI reaches; set "
                      "ZEPHYR_BASE and install west to run these")


@pytest.fixture(scope="module")
def zephyr_installation() -> Path:
    """The Zephyr tree and west, or a skip with the reason, also under CI=true: Zephyr is the one
    toolchain CI cannot install (see tests/conftest.py ``missing`` for every other one)."""
    base = os.environ.get("ZEPHYR_BASE")
    have_west = importlib.util.find_spec("west") is not None or shutil.which("west") is not None
    if not base or not (Path(base) / "VERSION").is_file() or not have_west:
        print(ZEPHYR_UNAVAILABLE, file=sys.stderr)
        pytest.skip(ZEPHYR_UNAVAILABLE)
    return Path(base)


@pytest.fixture(scope="module")
def hello(zephyr_installation: Path, models_dir: Path,
          tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    tflite = models_dir / "hello_world_int8.tflite"
    return tflite, emit(tflite, tmp_path_factory.mktemp("zephyr_flow") / "hello.tar",
                        name="default")


def _west_cmd() -> str:
    return (f"{sys.executable} -m west" if importlib.util.find_spec("west") is not None
            else "west")


def test_full_flow_on_qemu_cortex_m3(zephyr_installation: Path, hello, tmp_path: Path) -> None:
    tflite, emitted = hello
    shape = emitted.inputs[0].shape
    options = {"board": "qemu_cortex_m3", "zephyr_base": str(zephyr_installation),
               "west_cmd": _west_cmd()}
    with generate_project("zephyr", emitted.path, tmp_path / "prj", options, build=True) as project:
        prj = Path(project.directory)
        assert (prj / "build/zephyr/zephyr.elf").is_file()
        assert (prj / "build/zephyr/zephyr.dts").is_file()
        project.flash()  # QEMU board: nothing to write
        rng = np.random.default_rng(1)
        with project.session() as session:
            model = session.model()
            for _ in range(4):
                x = rng.integers(-128, 127, shape, dtype=np.int8, endpoint=True)
                model.set_input(0, x)
                model.run()
                want = run_tflm(tflite.read_bytes(), [x])[0]
                np.testing.assert_array_equal(model.get_output(0).reshape(want.shape), want)
            timing = session.time(model, number=2, repeat=2)
            assert all(t > 0 for t in timing.results)
        project.build()  # pristine auto: a second build reuses the build directory


def test_mlperftiny_golden_transcript_on_qemu_cortex_m3(zephyr_installation: Path,
                                                        models_dir: Path, tmp_path: Path) -> None:
    """project_type=mlperftiny: generate and build, then the shared golden transcript
    (tests/golden/mlperftiny/kws01.txt) over QEMU's UART, results equal to TFLite Micro's."""
    tflite = models_dir / "kws_ref_model_int8.tflite"
    kws = emit(tflite, tmp_path / "kws.tar")
    options = {"board": "qemu_cortex_m3", "zephyr_base": str(zephyr_installation),
               "west_cmd": _west_cmd(), "project_type": "mlperftiny",
               "mlperftiny_model": "kws01"}
    (x,) = samples(kws, 1, seed=13)
    with generate_project("zephyr", kws.path, tmp_path / "prj", options, build=True) as project:
        assert (Path(project.directory) / "build/zephyr/zephyr.elf").is_file()
        project.flash()  # QEMU board: nothing to write
        transport = project.transport()
        transport.open()
        try:
            results = play_golden(transport, x.tobytes())
        finally:
            transport.close()
    want = tflm_results(tflite, kws, x)
    assert len(results) == 3 and all([f"{v:.3f}" for v in r] == want for r in results)
