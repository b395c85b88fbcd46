"""Every kernel scheme of every core, on that core's emulated machine, bit-exact with TFLite Micro.

For each core of :data:`project_api.emit.machines.MACHINES` (``microbit`` M0, ``mps2-an385``
M3, ``mps2-an386`` M4, ``mps2-an500`` M7, ``mps2-an505`` M33, ``mps3-an547`` M55) and each
kernel scheme :data:`project_api.emit.target.RUN_ON` offers there, one firmware image holds
every shared model that fits the machine (the M4's run one by one in
``tests/emit/test_emit_cortex_m.py``), and another a share of the DSP parity cases of
``tests/helpers/emit_cases.py`` (small random layers; the M4 runs all of them in
``tests/emit/test_emit_cortex_m.py``, the other DSP cores a third each, so together they cover every
case): one build and one QEMU boot each, built once per session. Every output must equal TFLite
Micro's Python interpreter's on the same input, and the firmware's SysTick calibration must find
the machine's own clock (instructions per tick). The table of what is offered is checked
against what ran: a scheme not in it is refused by the emitter.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_tool
from helpers.emit_cases import MVE_CASES, dsp_cases
from helpers.emit_parity import WEIGHT_LAYOUT_OPS

from project_api.emit import cortex_m_harness as H
from project_api.emit import emit_sources
from project_api.emit.machines import MACHINES
from project_api.emit.reference import run_tflm
from project_api.emit.target import RUN_ON, resolve
from project_api.errors import EmitError

#: Every shared model TFLite Micro runs (kws_ref_model_float32 is a hybrid model, which TFLM
#: refuses: tests/emit/test_emit_models.py checks it against LiteRT on the host).
MODELS = ["hello_world_int8", "hello_world_float", "micro_speech_int8", "kws_ref_model_int8",
          "vww_96_int8", "ic_resnet8_int8", "ad01_int8"]
#: Models that do not fit a machine (the micro:bit's nRF51 has 16 KiB of RAM).
DOES_NOT_FIT = {"cortex-m0": {"kws_ref_model_int8", "vww_96_int8", "ic_resnet8_int8",
                              "ad01_int8"}}
#: The kernel target each core's DSP schemes are emitted for (the M55's without its MVE).
TARGET_OF_CORE = {c: c for c in MACHINES} | {"cortex-m55": "-mcpu=cortex-m55+nomve"}
#: The kernel target of each MVE scheme's core.
MVE_TARGET = {"cortex-m55": "cortex-m55"}
#: The cores whose DSP cases the test here runs (the M4 runs them all in test_emit_cortex_m).
DSP_SHARE = {"cortex-m7": 0, "cortex-m33": 1, "cortex-m55": 2}
PAIRS = sorted(RUN_ON, key=lambda p: (list(MACHINES).index(p[1]), p[0]))
#: The M4's pairs run model by model in tests/emit/test_emit_cortex_m.py (with its DSP checks).
MODEL_PAIRS = [p for p in PAIRS if p[1] != "cortex-m4"]


def _emit(data: bytes, name: str, core: str, scheme: str):
    if scheme == "generic":
        return emit_sources(data, name=name, target="generic")
    if scheme.startswith("mve-"):
        return emit_sources(data, name=name, target=MVE_TARGET[core],
                            weights=scheme.removeprefix("mve-"))
    return emit_sources(data, name=name, target=TARGET_OF_CORE[core],
                        weights=scheme.removeprefix("dsp-"))


def _inputs(gen, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for t in gen.inputs:
        if t.dtype == "float32":
            out.append(rng.standard_normal(t.shape).astype(np.float32))
        elif t.dtype == "int16":
            out.append(rng.integers(-32768, 32768, t.shape).astype(np.int16))
        else:
            out.append(rng.integers(-128, 128, t.shape).astype(np.int8).view(
                np.uint8 if t.dtype == "uint8" else np.int8))
    return out


@pytest.fixture(scope="session")
def arm_tools():
    for tool in (H.CC, H.SIZE, H.QEMU):
        require_tool(tool)


@pytest.fixture(scope="session")
def model_bytes(models_dir):
    return {m: (models_dir / f"{m}.tflite").read_bytes() for m in MODELS}


_TFLM: dict[tuple[bytes, bytes], list] = {}


def _tflm(data: bytes, inputs: list[np.ndarray]) -> list:
    """TFLM's outputs, once per model and input (the schemes of a core share them)."""
    key = (data, b"".join(x.tobytes() for x in inputs))
    if key not in _TFLM:
        _TFLM[key] = run_tflm(data, inputs)
    return _TFLM[key]


def _check(results, cases, where: str) -> None:
    for (label, data, inputs), res in zip(cases, results, strict=True):
        want = _tflm(data, inputs)
        assert len(res.outputs) == len(want), label
        for k, (got, ref) in enumerate(zip(res.outputs, want, strict=True)):
            np.testing.assert_array_equal(got, np.asarray(ref).reshape(got.shape),
                                          err_msg=f"{label} output {k} on {where} vs TFLM")


def _calibrated(res, core: str) -> None:
    mach = MACHINES[core]
    assert res.calibration.instructions_per_tick == pytest.approx(
        mach.ticks_instructions, abs=0.05), res.calibration.line()


@pytest.mark.parametrize(("scheme", "core"), MODEL_PAIRS,
                         ids=[f"{c}-{s}" for s, c in MODEL_PAIRS])
def test_models_on_their_core_match_tflm(arm_tools, model_bytes, tmp_path, scheme, core):
    """Every shared model that fits the machine, in one firmware, one boot, bit-exact."""
    mach = MACHINES[core]
    cases = []
    for k, name in enumerate(MODELS):
        gen = _emit(model_bytes[name], f"m{k}", core, scheme)
        cases.append((gen, _inputs(gen, 7), name))
    try:  # all in one image where the machine has the room
        groups = [(H.build_suite([(g, x) for g, x, _ in cases], tmp_path / "all", core=core),
                   cases)]
    except H.DoesNotFit:  # the micro:bit: one image per model that fits alone
        groups = []
        for k, case in enumerate(cases):
            try:
                groups.append((H.build_suite([case[:2]], tmp_path / f"one{k}", core=core),
                               [case]))
            except H.DoesNotFit:
                continue
    fits = {name for _, group in groups for _, _, name in group}
    assert set(MODELS) - fits == DOES_NOT_FIT.get(core, set()), \
        f"models that fit {mach.name}: {sorted(fits)}"
    for suite, group in groups:
        results = H.run_suite(suite, timeout=240)
        _check(results, [(f"{name} ({scheme})", model_bytes[name], x) for _, x, name in group],
               mach.name)
        _calibrated(results[0], core)


@pytest.mark.parametrize(("scheme", "core"),
                         [p for p in PAIRS if p[1] in DSP_SHARE and p[0].startswith("dsp-")],
                         ids=lambda v: v)
def test_dsp_cases_on_their_core_match_tflm(arm_tools, tmp_path, scheme, core):
    """A third of the DSP kernels' parity cases (every code path over the three cores), one
    firmware and one boot per (scheme, core)."""
    weights = scheme.removeprefix("dsp-")
    share = [c for k, c in enumerate(dsp_cases()) if k % 3 == DSP_SHARE[core]
             and (weights == "int8" or c.op in WEIGHT_LAYOUT_OPS)]
    assert share
    built, labelled = [], []
    for k, case in enumerate(share):
        model, labels = case.build()
        gen = emit_sources(model, name=f"c{k}", target=TARGET_OF_CORE[core], weights=weights)
        assert any(kn.template.endswith(".dsp.c.j2") for kn in gen.kernels), case.id
        inputs = _inputs(gen, 3)
        built.append((gen, inputs))
        labelled.append((f"{case.id} ({scheme})", model, inputs))
    suite = H.build_suite(built, tmp_path, core=core)
    results = H.run_suite(suite, timeout=240)
    _check(results, labelled, MACHINES[core].name)


def test_mve_cases_on_m55_match_tflm(arm_tools, tmp_path):
    """The Helium kernels over channel counts that leave every MVE loop a tail, and the M55's
    third of the DSP cases (the operators without MVE kernels keep the DSP ones), emitted for
    the mve-int8 scheme: one firmware, one boot on mps3-an547."""
    core = "cortex-m55"
    share = [c for k, c in enumerate(dsp_cases()) if k % 3 == DSP_SHARE[core]]
    mve_cases = list(dsp_cases(rows=MVE_CASES))
    built, labelled = [], []
    for k, case in enumerate([*mve_cases, *share]):
        model, _ = case.build()
        gen = emit_sources(model, name=f"c{k}", target=MVE_TARGET[core])
        if k < len(mve_cases):  # the case reaches a Helium kernel
            assert any(kn.params.get("mve") for kn in gen.kernels), case.id
            if "_same" in case.id and case.op == "CONV_2D":  # padded: through a column
                assert any(kn.params.get("col") for kn in gen.kernels), case.id
            if "_direct" in case.id:  # and its inner pixels straight from the input rows
                assert any(kn.params.get("direct") for kn in gen.kernels), case.id
            if "_lanes" in case.id:  # depthwise, channels a multiple of 4: Helium lanes
                assert any(kn.params.get("lanes") for kn in gen.kernels), case.id
        inputs = _inputs(gen, 11)
        built.append((gen, inputs))
        labelled.append((f"{case.id} (mve-int8)", model, inputs))
    suite = H.build_suite(built, tmp_path, core=core)
    _check(H.run_suite(suite, timeout=240), labelled, MACHINES[core].name)


@pytest.mark.parametrize(("mcpu", "helium"), [("cortex-m55", True), ("cortex-m4", False)])
def test_mve_c_is_helium_on_the_m55_and_portable_elsewhere(arm_tools, model_bytes, tmp_path,
                                                           mcpu, helium):
    """The mve-int8 C compiles -Werror to MVE's VMLADAVA for the M55, and to its portable loops
    for a CPU without MVE (the same source runs on both). (KWS's depths are whole vectors, so
    the compiler drops the VCTP tails; test_mve_cases_on_m55_match_tflm runs them.)"""
    import subprocess

    from project_api.system.paths import crt_dir

    gen = emit_sources(model_bytes["kws_ref_model_int8"], target="cortex-m55")
    (tmp_path / "tvmgen_default.h").write_text(gen.header)
    src = tmp_path / "lib0.c"
    src.write_text(gen.source)
    subprocess.run([H.CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", f"-mcpu={mcpu}",
                    "-mthumb", "-mfloat-abi=hard", f"-I{tmp_path}", f"-I{crt_dir() / 'include'}",
                    "-S", str(src), "-o", str(tmp_path / "lib0.s")], check=True,
                   capture_output=True, text=True)
    asm = (tmp_path / "lib0.s").read_text()
    assert ("vmladava.s8" in asm) == helium


@pytest.mark.parametrize("label, paired", [("k3_c16_f5_valid_pairs_odd", True),
                                           ("k3_c48_f8_same_pairs", True),
                                           ("k3_c16_f4_valid_dh2_pairs", True),
                                           ("pw_c64_f6_pairs", True),
                                           ("k3_c64_f4_same_s2_single", False)])
def test_mve_pair_cases_take_the_two_pixel_loop(label, paired):
    """The MVE_CASES rows written for M_DOT4X2 reach it (and the one past its immediate does
    not), so the M55 parity run and the host's portable run cover the two-pixel kernel."""
    row = [r for r in MVE_CASES if r[1] == label]
    (case,) = [c for c in dsp_cases((0,), rows=row) if c.mode == "int8"]
    model, _ = case.build()
    source = emit_sources(model, target="cortex-m55").source
    assert ("M_DOT4X2(a, e, op" in source) == paired  # a call, not the macro itself


@pytest.mark.parametrize("core", ["cortex-m0", "cortex-m3"])
def test_generic_cases_on_plain_cores_match_tflm(arm_tools, tmp_path, core):
    """Small random layers with the portable kernels on the cores without the DSP extension."""
    picked = [c for k, c in enumerate(dsp_cases()) if k % 6 == (0 if core == "cortex-m0" else 3)]
    built, labelled = [], []
    for k, case in enumerate(picked):
        model, _ = case.build()
        gen = emit_sources(model, name=f"c{k}", target=core)
        inputs = _inputs(gen, 5)
        built.append((gen, inputs))
        labelled.append((f"{case.id} (generic)", model, inputs))
    results = []
    for n in range(0, len(built), 4):  # the micro:bit's 16 KiB hold a few at a time
        results += H.run_suite(H.build_suite(built[n:n + 4], tmp_path / f"s{n}", core=core),
                               timeout=240)
    _check(results, labelled, MACHINES[core].name)


def test_targets_are_bound_to_their_machines():
    for name in ("cortex-m0", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33",
                 "cortex-m55", "cortex-m85"):
        t = resolve(name)
        assert t.core in MACHINES, name
        assert (t.scheme, t.core) in RUN_ON
    assert resolve("cortex-m85").core == "cortex-m55"  # the same MVE: run on the M55's machine
    assert resolve("-mcpu=cortex-m3").name == "cortex-m3"
    assert resolve("cortex-m55").scheme == "mve-int8"  # Helium by default, run on AN547
    assert resolve("-mcpu=cortex-m55+nomve").scheme == "dsp-int8"
    # no emulator runs the M85: it gets the DSP kernels shown on the M55's machine, never MVE
    assert resolve("cortex-m85").scheme == "dsp-int8"
    assert not any(c == "cortex-m85" for _, c in RUN_ON)


def test_a_scheme_that_never_ran_is_refused(monkeypatch):
    import project_api.emit.target as T

    monkeypatch.setattr(T, "RUN_ON", T.RUN_ON - {("dsp-int16", "cortex-m7")})
    with pytest.raises(EmitError, match="dsp-int16 kernels have never run on cortex-m7"):
        T.with_weights(resolve("cortex-m7"), "int16")
    assert T.with_weights(resolve("cortex-m7"), "int8").weights == "int8"


def test_every_machine_is_one_qemu_emulates(arm_tools):
    """The machine table names machines and CPUs this QEMU has (``-M help``, ``-cpu help``)."""
    import subprocess

    machines = subprocess.run([H.QEMU, "-M", "help"], capture_output=True, text=True,
                              check=True).stdout.split()
    cpus = subprocess.run([H.QEMU, "-cpu", "help"], capture_output=True, text=True,
                          check=True).stdout.split()
    for core, m in MACHINES.items():
        assert m.name in machines, core
        assert m.qemu_cpu in cpus, core
        assert f"-mcpu={core}" in m.cflags
