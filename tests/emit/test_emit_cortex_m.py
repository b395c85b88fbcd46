"""Kernel targets of the emitter, and the Cortex-M4 builds of the shared models on QEMU.

Each shared int8 model is emitted for ``generic`` and for ``cortex-m4`` (the DSP-extension
kernels) with each weight layout (``int8``, the default, and ``int16``), built with
arm-none-eabi-gcc for QEMU's ``mps2-an386`` (Cortex-M4F) and run there on a fixed input; its
outputs must equal TFLite Micro's bit for bit. So must every DSP parity case of
``tests/helpers/emit_cases.py`` (every code path of the DSP kernels, both layouts). The
firmware's own timer calibration must find 40 instructions per SysTick tick (``-icount shift=0``, 25 MHz), and the
cortex-m4 firmware must really contain the DSP instructions. Under ``CI=true`` a missing
toolchain or QEMU fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
import subprocess
import tarfile

import numpy as np
import pytest
from conftest import require_tool
from helpers.emit_cases import dsp_cases, int16x8_network
from helpers.emit_parity import WEIGHT_LAYOUT_OPS

from project_api.cli import main
from project_api.emit import cortex_m_harness as H
from project_api.emit import emit, emit_sources
from project_api.emit.reference import run_tflm
from project_api.emit.target import GENERIC, resolve
from project_api.errors import EmitError
from project_api.system.paths import crt_dir

MODELS = ["hello_world_int8", "micro_speech_int8", "kws_ref_model_int8", "vww_96_int8",
          "ic_resnet8_int8", "ad01_int8"]
#: (kernel target, weight layout) of each build.
BUILDS = [("generic", None), ("cortex-m4", "int8"), ("cortex-m4", "int16")]
BUILD_IDS = ["generic", "cortex-m4-int8", "cortex-m4-int16"]
#: The models whose DSP builds must contain the SIMD instructions.
DSP_MODELS = ("kws_ref_model_int8", "vww_96_int8", "ic_resnet8_int8", "ad01_int8")


@pytest.mark.parametrize(("spec", "name", "dsp"), [
    (None, "generic", False),
    ("generic", "generic", False),
    ("cortex-m4", "cortex-m4", True),
    ("cortex-m7", "cortex-m7", True),
    ("cortex-m33", "cortex-m33", True),
    ("cortex-m0", "cortex-m0", False),
    ("-mcpu=cortex-m4", "cortex-m4", True),
    ("c -keys=arm_cpu,cpu -mcpu=cortex-m7", "cortex-m7", True),
    ("-mcpu=cortex-m33+nodsp", "cortex-m0", False),
    ("-mcpu=cortex-m0plus", "cortex-m0", False),
    ("-mcpu=cortex-m3", "cortex-m3", False),
    ("cortex-m3", "cortex-m3", False),
    ("cortex-m55", "cortex-m55", True),
    ("-mcpu=cortex-m55+nomve", "cortex-m55", True),
    ("-mcpu=cortex-m85", "cortex-m85", True),
])
def test_target_resolution(spec, name, dsp):
    t = resolve(spec)
    assert (t.name, t.dsp) == (name, dsp)


def test_unknown_target_is_refused():
    with pytest.raises(EmitError, match="unknown target"):
        resolve("cortex-m99")
    with pytest.raises(EmitError, match="no kernel target"):
        resolve("-mcpu=cortex-a53")
    for empty in ("", "  "):  # names nothing: never silently the portable path
        with pytest.raises(EmitError, match="empty target"):
            resolve(empty)


def _metadata(tar_path):
    with tarfile.open(tar_path) as tf:
        member = next(m for m in tf.getmembers() if m.name.lstrip("./") == "metadata.json")
        return json.loads(tf.extractfile(member).read())


def test_metadata_records_the_target(models_dir, tmp_path):
    model = models_dir / "hello_world_int8.tflite"
    emit(model, tmp_path / "g.tar")
    emit(model, tmp_path / "m4.tar", target="cortex-m4")
    emit(model, tmp_path / "m4w16.tar", target="cortex-m4", weights="int16")
    g = _metadata(tmp_path / "g.tar")["modules"]["default"]
    m4 = _metadata(tmp_path / "m4.tar")["modules"]["default"]
    w16 = _metadata(tmp_path / "m4w16.tar")["modules"]["default"]
    assert (g["target"], g["kernel_target"], g["weights"]) == (["c"], "generic", "int8")
    assert (m4["kernel_target"], m4["weights"]) == ("cortex-m4", "int8")
    assert "-mcpu=cortex-m4" in m4["target"][0]
    assert (w16["kernel_target"], w16["weights"]) == ("cortex-m4", "int16")


def test_unknown_weight_layout_is_refused(models_dir, tmp_path, capsys):
    model = models_dir / "hello_world_int8.tflite"
    with pytest.raises(EmitError, match="unknown weight layout 'int4'.*int8, int16"):
        emit_sources(model.read_bytes(), target="cortex-m4", weights="int4")
    assert main(["emit", str(model), "--out", str(tmp_path / "x.tar"), "--weights",
                 "int4"]) == 2
    assert not (tmp_path / "x.tar").exists()


def _tflite_weight_bytes(data: bytes) -> int:
    """Every constant tensor's buffer plus 4 bytes per per-channel scale of its int8 weights,
    read with the ``tflite`` package (independent of the emitter's reader)."""
    import tflite

    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    total = 0
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        buf = m.Buffers(t.Buffer())
        n = buf.DataLength() if buf is not None else 0
        if n == 0 and buf is not None and buf.Size():  # data past the 2 GiB flatbuffer limit
            n = buf.Size()
        if n == 0:
            continue
        total += n
        q = t.Quantization()
        if t.Type() == tflite.TensorType.INT8 and q is not None and q.ScaleLength() > 1:
            total += 4 * q.ScaleLength()
    return total


@pytest.mark.parametrize("name", ["kws_ref_model_int8", "vww_96_int8", "ic_resnet8_int8",
                                  "ad01_int8"])
def test_int8_weights_keep_the_models_size(models_dir, name):
    """With int8 weights the DSP build's constants stay within 2 % of the .tflite's weights
    (reordered, not widened), the int16 layout takes more, and every build's pool is at the
    planner's lower bound."""
    data = (models_dir / f"{name}.tflite").read_bytes()
    weights = _tflite_weight_bytes(data)
    w8 = emit_sources(data, target="cortex-m4")
    w16 = emit_sources(data, target="cortex-m4", weights="int16")
    assert w8.constants_size_bytes <= 1.02 * weights, (w8.constants_size_bytes, weights)
    assert w16.constants_size_bytes > w8.constants_size_bytes or name == "ad01_int8"
    for gen in (w8, w16, emit_sources(data)):
        assert gen.workspace_size_bytes == gen.lower_bound_bytes


def test_cli_target_flag(models_dir, tmp_path, capsys):
    model = str(models_dir / "kws_ref_model_int8.tflite")
    out = tmp_path / "k.tar"
    assert main(["emit", model, "--out", str(out), "--target=-mcpu=cortex-m7", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == "cortex-m7"
    assert _metadata(out)["modules"]["default"]["kernel_target"] == "cortex-m7"
    assert main(["emit", model, "--out", str(out), "--force", "--target", "cortex-m99"]) != 0


def test_generic_is_the_default(models_dir):
    data = (models_dir / "kws_ref_model_int8.tflite").read_bytes()
    gen = emit_sources(data)
    assert gen.target == GENERIC
    assert "arm_acle.h" not in gen.source and "d_smlad" not in gen.source
    dsp = emit_sources(data, target="cortex-m4")
    assert "d_smlad" in dsp.source
    assert dsp.workspace_size_bytes == dsp.lower_bound_bytes == gen.workspace_size_bytes


@pytest.fixture(scope="module")
def qemu_tools():
    for tool in (H.CC, H.SIZE, H.QEMU, "arm-none-eabi-objdump"):
        require_tool(tool)


def fixed_input(gen, seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, t.shape).astype(np.int8) for t in gen.inputs]


@pytest.mark.parametrize(("target", "weights"), BUILDS, ids=BUILD_IDS)
@pytest.mark.parametrize("name", MODELS)
def test_model_on_qemu_matches_tflm(qemu_tools, models_dir, tmp_path, name, target, weights):
    data = (models_dir / f"{name}.tflite").read_bytes()
    gen = emit_sources(data, target=target, weights=weights)
    inputs = fixed_input(gen)
    fw = H.build(gen, inputs, tmp_path)
    result = H.run(fw, timeout=240)
    want = run_tflm(data, inputs)
    assert len(result.outputs) == len(want)
    for k, (got, ref) in enumerate(zip(result.outputs, want, strict=True)):
        np.testing.assert_array_equal(got, np.asarray(ref).reshape(got.shape),
                                      err_msg=f"{name} ({target}, {weights} weights) output "
                                              f"{k} on QEMU vs TFLM")
    assert result.calibration.instructions_per_tick == pytest.approx(40.0, abs=0.05), \
        result.calibration.line()
    assert result.instructions > 0
    if target == "cortex-m4" and name in DSP_MODELS:
        dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(fw.elf)], capture_output=True,
                             text=True, check=True).stdout
        assert "smlad" in dis and "sxtb16" in dis, "the DSP instructions are not in the firmware"


def test_kws_profile_build_sums_to_the_whole(qemu_tools, models_dir, tmp_path):
    """The per-operator profile accounts for the inference (hooks cost a few instructions)."""
    data = (models_dir / "kws_ref_model_int8.tflite").read_bytes()
    gen = emit_sources(data, target="cortex-m4")
    inputs = fixed_input(gen)
    whole = H.run(H.build(gen, inputs, tmp_path / "plain"), timeout=240)
    prof = H.run(H.build(gen, inputs, tmp_path / "prof", profile=True), timeout=240)
    assert [o.tolist() for o in prof.outputs] == [o.tolist() for o in whole.outputs]
    nodes = {k.op.index for k in gen.kernels if not k.alias}
    assert set(prof.per_op) == nodes
    total = sum(prof.per_op.values())
    assert abs(total - whole.instructions) < 0.01 * whole.instructions


DSP_OP_CASES = [(c, w) for c in dsp_cases()
                for w in (("int8", "int16") if c.op in WEIGHT_LAYOUT_OPS else ("int8",))]


@pytest.mark.parametrize(("case", "weights"), DSP_OP_CASES,
                         ids=[f"{c.id}-weights_{w}" for c, w in DSP_OP_CASES])
def test_dsp_operator_on_qemu_matches_tflm(qemu_tools, tmp_path, case, weights):
    """Every code path of the DSP kernels, compiled with the real intrinsics, on the Cortex-M4."""
    model, labels = case.build()
    gen = emit_sources(model, name="op", target="cortex-m4", weights=weights)
    assert any(k.template.endswith(".dsp.c.j2") for k in gen.kernels), case.id
    inputs = fixed_input(gen, seed=3)
    result = H.run(H.build(gen, inputs, tmp_path), timeout=120)
    want = run_tflm(model, inputs)
    for k, (got, ref) in enumerate(zip(result.outputs, want, strict=True)):
        np.testing.assert_array_equal(got, np.asarray(ref).reshape(got.shape),
                                      err_msg=f"{case.id} {labels[k]} on QEMU vs TFLM")


def test_int16x8_network_on_qemu_matches_tflm(qemu_tools, tmp_path):
    """int16x8 (int64 accumulators and requantization, the softmax tables) on the Cortex-M4."""
    model = int16x8_network()
    gen = emit_sources(model, name="net16", target="cortex-m4")
    rng = np.random.default_rng(1)
    inputs = [rng.integers(-32768, 32768, t.shape).astype(np.int16) for t in gen.inputs]
    result = H.run(H.build(gen, inputs, tmp_path), timeout=120)
    want = run_tflm(model, inputs)
    np.testing.assert_array_equal(result.outputs[0], np.asarray(want[0]).reshape(
        result.outputs[0].shape), err_msg="int16x8 network on QEMU vs TFLM")


@pytest.mark.parametrize(("target", "mcpu", "dsp"), [
    ("cortex-m4", "cortex-m4", True),
    ("cortex-m7", "cortex-m7", True),
    ("cortex-m33", "cortex-m33", True),
    ("cortex-m33", "cortex-m33+nodsp", False),
    ("cortex-m0", "cortex-m0", False),
])
def test_each_target_builds_for_its_cpu(qemu_tools, models_dir, tmp_path, target, mcpu, dsp):
    """The C of each target compiles -Werror for its CPU; with the DSP extension it uses the
    SIMD instructions, without it (M33+nodsp running cortex-m33 C) the portable definitions."""
    data = (models_dir / "kws_ref_model_int8.tflite").read_bytes()
    gen = emit_sources(data, target=target)
    (tmp_path / "tvmgen_default.h").write_text(gen.header)
    src = tmp_path / "default_lib0.c"
    src.write_text(gen.source)
    obj = tmp_path / "lib0.o"
    subprocess.run([H.CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", f"-mcpu={mcpu}",
                    "-mthumb", f"-I{tmp_path}", f"-I{crt_dir() / 'include'}", "-c", str(src),
                    "-o", str(obj)], check=True, capture_output=True, text=True)
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    assert ("smlad" in dis) == dsp
