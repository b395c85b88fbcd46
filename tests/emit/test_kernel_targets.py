"""Kernel targets reaching templates: the one-go path emits with the board's CPU, the host
template builds and runs an archive emitted for a Cortex-M4 (its intrinsics fall back to
portable C), and TVM's unconditional <arm_acle.h> still marks a module Arm-only."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool

from project_api.system.paths import templates_dir
from project_api.template.targets import board_cpu, unconditional_arm_header


def test_guarded_arm_header_is_portable() -> None:
    ours = ("#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__)\n#error big\n#endif\n"
            "#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP\n#include <arm_acle.h>\n"
            "#else\nstatic int portable;\n#endif\n")
    assert unconditional_arm_header(ours) is None
    tvm = "#include <stdint.h>\n#include <string.h>\n#include <arm_acle.h>\n"
    assert unconditional_arm_header(tvm) == "arm_acle.h"
    # an include guard is no Arm test: a header's own guard does not make its include portable
    guarded_file = "#ifndef LIB_H_\n#define LIB_H_\n  #  include \"arm_math.h\"\n#endif\n"
    assert unconditional_arm_header(guarded_file) == "arm_math.h"
    nested = ("#ifdef __cplusplus\nextern \"C\" {\n#endif\n#if __ARM_ARCH >= 7\n#ifdef X\n"
              "#include <arm_acle.h>\n#endif\n#elif defined(Y)\n#include <cmsis_gcc.h>\n#endif\n")
    assert unconditional_arm_header(nested) is None


def test_board_cpu_comes_from_boards_yaml(tmp_path: Path) -> None:
    assert board_cpu(templates_dir() / "stm32", "qemu_netduinoplus2") == "cortex-m4"
    assert board_cpu(templates_dir() / "zephyr", "qemu_x86") == "x86"
    assert board_cpu(templates_dir() / "host", None) is None
    assert board_cpu(templates_dir() / "stm32", "no_such_board") is None


def _kernel_target(mlf: Path) -> str:
    with tarfile.open(mlf) as tar:
        meta = json.load(tar.extractfile("./metadata.json"))  # type: ignore[arg-type]
    return meta["modules"]["default"]["kernel_target"] if "modules" in meta else \
        meta["kernel_target"]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "project_api", *args], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


def test_host_template_runs_cortex_m4_kernels_bit_exact(tmp_path: Path, models_dir: Path) -> None:
    """micro_speech emitted with the DSP kernels (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED)
    builds for this computer (its <arm_acle.h> is guarded) and matches TFLite Micro."""
    from project_api.api.project import generate_project
    from project_api.emit import emit
    from project_api.tools.validate import validate

    require_tool("cc")
    tflite = models_dir / "micro_speech_int8.tflite"
    result = emit(tflite, tmp_path / "m4.tar", target="cortex-m4")
    assert _kernel_target(result.path) == "cortex-m4"
    spec = result.inputs[0]
    rng = np.random.default_rng(4)
    data = {spec.name: rng.integers(-128, 128, (6, *spec.shape), dtype=np.int8)}
    with generate_project("host", result.path, tmp_path / "prj", {}, build=True) as project:
        report = validate(project, data, tflite=tflite, litert=False)
    (tflm,) = report.comparison("tflm").outputs
    assert report.samples == 6 and tflm.exact == 1.0 and tflm.max_abs_int == 0.0, tflm


@pytest.mark.parametrize(("template", "board", "expected"), [
    ("host", None, "generic"),
    ("stm32", "qemu_netduinoplus2", "cortex-m4"),
])
def test_one_go_run_emits_for_the_board(tmp_path: Path, models_dir: Path, template: str,
                                        board: str | None, expected: str) -> None:
    require_tool("cc")
    if template == "stm32":
        for tool in ("make", "arm-none-eabi-gcc", "qemu-system-arm"):
            require_tool(tool)
    args = ["run", "--template", template, "--model",
            str(models_dir / "micro_speech_int8.tflite"), "--out", str(tmp_path / "work"),
            "--check", "--repeat", "1"]
    if board:
        args += ["-o", f"board={board}"]
    out = _run(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "check output 0 against TFLite Micro: OK" in out.stdout
    assert _kernel_target(tmp_path / "work" / "model.tar") == expected
