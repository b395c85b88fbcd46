"""``project-api profile`` on QEMU's STM32F405 (``-icount shift=0``: the device's time counts
instructions, so the figures are exact): KWS with the Cortex-M4 kernels, a profile build beside
the plain build. Its outputs are bit-exact with TFLite Micro and with the plain build, the
operators add up to the whole model as the device's time evaluator measures it (within 1 %,
the part the report calls unattributed), the profile build takes within 2 % of the plain one,
and the standalone firmware's printed records give the same table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    QEMU_BOARD,
    build_project,
    stm32_tools_and_no_qemu_left,
)

from project_api.archive import mlf
from project_api.cli import main
from project_api.emit import emit
from project_api.emit.reference import run_tflm
from project_api.tools.profile import ICOUNT_INSTRUCTIONS_PER_SECOND, profile_session


@pytest.fixture(scope="module")
def kws(models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("profile_stm32")
    tflite = models_dir / "kws_ref_model_int8.tflite"
    emit(tflite, root / "plain.tar", target="cortex-m4")
    emit(tflite, root / "prof.tar", target="cortex-m4", profile=True)
    plain = build_project(root / "plain.tar", root / "plain")
    prof = build_project(root / "prof.tar", root / "prof")
    try:
        plain.flash()
        prof.flash()
        yield {"root": root, "tflite": tflite, "plain": plain, "prof": prof}
    finally:
        plain.close()
        prof.close()


def _x(seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (1, 49, 10, 1), dtype=np.int8)


def test_profile_on_qemu_adds_up_and_costs_under_2_percent(kws) -> None:
    x = _x()
    with mlf.open_mlf(kws["root"] / "prof" / "model") as lib:
        module, metadata = lib.module(), lib.metadata
    with kws["prof"].session() as session:
        report = profile_session(session, module, metadata, [x], repeat=3, number=3,
                                 instructions_rate=ICOUNT_INSTRUCTIONS_PER_SECOND)
    with kws["plain"].session() as session:
        model = session.model()
        model.set_input(0, x)
        model.run()
        plain_out = model.get_output(0)
        plain = session.time(model, number=3, repeat=3).median
    want = run_tflm(kws["tflite"].read_bytes(), [x])[0]
    assert np.array_equal(report.outputs[0], want.reshape(plain_out.shape))
    assert np.array_equal(report.outputs[0], plain_out)
    # the profile build costs under 2 % (a few instructions per operator)
    assert abs(report.whole_seconds - plain) / plain < 0.02
    # the operators add up to the whole, within the part outside them (1 %)
    un = report.unattributed_seconds
    assert 0 <= un < 0.01 * report.whole_seconds, (un, report.whole_seconds)
    # every convolution takes time; QEMU counts instructions, so repeats agree (a UART
    # interrupt may land in one of them)
    for o in report.ops:
        assert o.instructions == pytest.approx(o.seconds * 1e9)
        assert o.max_seconds - o.min_seconds <= 1e-6 + 1e-3 * o.seconds, o
        if o.op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            assert o.instructions > 10_000 and o.instructions_per_mac is not None
    assert report.overhead_seconds * 1e9 < 100  # instructions per operator, subtracted
    # the four pointwise convolutions have the same shapes: the same count, but for the few
    # instructions their requantization takes on some values
    convs = [o.instructions for o in report.ops if o.op == "CONV_2D" and o.node > 0]
    assert len(convs) == 4 and max(convs) - min(convs) < 1e-4 * max(convs)


def test_profile_cli_on_qemu_with_baseline(kws, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = kws["root"]
    assert main(["profile", str(root / "prof"), "--baseline", str(root / "plain"),
                 "--repeat", "2", "--number", "2", "--plot", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "instructions" in out and "instr/MAC" in out
    assert "outputs: bit-exact with the baseline" in out
    assert "the profile build takes +" in out or "the profile build takes -" in out
    assert (tmp_path / "p" / "profile.png").stat().st_size > 10_000


def test_standalone_firmware_prints_the_table(kws, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = kws["root"]
    prj = build_project(root / "prof.tar", tmp_path / "sa", project_type="standalone")
    prj.close()
    run = subprocess.run(
        ["qemu-system-arm", "-M", "netduinoplus2", "-display", "none", "-monitor", "none",
         "-icount", "shift=0", "-semihosting-config", "enable=on,target=native",
         "-kernel", str(tmp_path / "sa" / "build" / "firmware.elf"), "-serial", "stdio"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    log = tmp_path / "uart.txt"
    log.write_text(run.stdout)
    assert main(["profile", str(tmp_path / "sa"), "--log", str(log), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ops = data["ops"]
    assert [o["op"] for o in ops][:3] == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D"]
    assert data["instructions_per_second"] == ICOUNT_INSTRUCTIONS_PER_SECOND
    assert all(o["instructions"] > 0 for o in ops)
    # the sample's one run: its operators lie inside the span from the first hook to the last
    assert data["sum_us"] <= data["span_us"] < data["sum_us"] * 1.01
