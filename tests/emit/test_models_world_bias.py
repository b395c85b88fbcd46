"""Issue 37 item 1: a folded bias that overflows int32 while every real accumulator fits.

The emitter folds ``input_offset x sum(weights)`` into the bias. A converter-made model can
hold a bias so near the int32 limit that this folded term leaves int32, although TFLite Micro,
which never holds that term alone, runs it. The model here (built in code) has such channels in
a 1x1 CONV_2D (the dot form, the DSP 1x1 kernel) and a FULLY_CONNECTED (the dot form, the DSP
kernel), in both directions (past +2^31 and past -2^31), beside ordinary channels; the inputs
are drawn where the real accumulators fit. Every kernel target must equal TFLM bit for bit: on
the host (ASan/UBSan: no signed overflow anywhere) and on QEMU's Cortex-M4.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_tool
from helpers.emit_parity import CFLAGS

from project_api.emit import cortex_m_harness as H
from project_api.emit import emit_sources, harness, read_tflite
from project_api.emit.reference import run_tflm
from project_api.tflite.builder import ModelBuilder

#: Input zero point -128: the input offset is +128, the largest there is.
X_QUANT = (1 / 16, -128)
DEPTH = 16
#: Biases (as int32) this far inside the int32 limit: the folded term passes it.
CONV_MARGIN = 1 << 17
FC_MARGIN = 1 << 21


def _bias_for(int_value: float, s_x: float, s_w: float) -> float:
    return int_value * s_x * s_w


def overflow_model() -> bytes:
    mb = ModelBuilder(seed=5)
    x = mb.input((1, 4, 4, DEPTH), "int8", quant=X_QUANT, name="x")
    rng = np.random.default_rng(11)
    w = np.stack([np.ones((1, 1, DEPTH)), -np.ones((1, 1, DEPTH)),
                  rng.uniform(-0.5, 0.5, (1, 1, DEPTH)), rng.uniform(-0.5, 0.5, (1, 1, DEPTH))])
    s_w = np.abs(w).reshape(4, -1).max(axis=1) / 127
    big = 2**31 - 1 - CONV_MARGIN
    bias = np.array([_bias_for(big, X_QUANT[0], s_w[0]), _bias_for(-big, X_QUANT[0], s_w[1]),
                     0.3, -0.2])
    conv = mb.conv2d(x, w.astype(np.float32), bias=bias.astype(np.float32), padding="VALID",
                     per_channel=True, out_quant=(8 / 128, 0))
    mb.output(conv)
    flat = mb.reshape(x, (1, 16 * DEPTH))
    depth = 16 * DEPTH
    wf = np.stack([np.ones(depth), -np.ones(depth), rng.uniform(-0.5, 0.5, depth)])
    s_f = np.abs(wf).max(axis=1) / 127
    bigf = 2**31 - 1 - FC_MARGIN
    bf = np.array([_bias_for(bigf, X_QUANT[0], s_f[0]), _bias_for(-bigf, X_QUANT[0], s_f[1]), 0.1])
    fc = mb.fully_connected(flat, wf.astype(np.float32), bias=bf.astype(np.float32),
                            per_channel=True, out_quant=(16 / 128, 0))
    mb.output(fc)
    return mb.build()


def folded_terms(model: bytes) -> list[np.ndarray]:
    """Per CONV_2D/FULLY_CONNECTED: bias + input offset x the weight sum, per channel (int64)."""
    g = read_tflite(model)
    out = []
    for op in g.operators:
        if op.opcode not in ("CONV_2D", "FULLY_CONNECTED"):
            continue
        x, w, b = (g.tensor(i) for i in op.inputs[:3])
        wi = w.data.astype(np.int64).reshape(w.shape[0], -1)
        out.append(b.data.astype(np.int64) - int(x.quant.zero_point[0]) * wi.sum(axis=1))
    return out


def fitting_inputs(seed: int) -> list[np.ndarray]:
    """Inputs whose real accumulators fit int32: x + 128 <= 62 everywhere (the conv's biggest
    channel sums 16 x 127 x 62 < 2^17, the FC's 256 x 127 x 62 < 2^21); the last set is the
    extreme itself."""
    rng = np.random.default_rng(seed)
    shape = (1, 4, 4, DEPTH)
    if seed == 2:
        return [np.full(shape, -128 + 62, np.int8)]
    return [rng.integers(-128, -128 + 63, shape).astype(np.int8)]


@pytest.fixture(scope="module")
def model() -> bytes:
    data = overflow_model()
    conv, fc = folded_terms(data)
    for name, folded in (("conv", conv), ("fc", fc)):
        assert folded[0] > 2**31 - 1 and folded[1] < -(2**31), (name, folded)
        assert np.abs(folded[2:]).max() < 2**31, (name, folded)
    return data


def test_the_folded_bias_overflows_and_tflm_still_runs_it(model):
    outs = run_tflm(model, fitting_inputs(0))
    conv, fc = (np.asarray(o).reshape(-1, o.shape[-1]) for o in outs)
    # the +2^31 channels saturate high, the -2^31 ones low (a wrong wrap flips them)
    assert (conv[:, 0] == 127).all() and (conv[:, 1] == -128).all()
    assert (fc[:, 0] == 127).all() and (fc[:, 1] == -128).all()
    assert len(np.unique(conv[:, 2])) > 1  # the ordinary channels vary with the input


KERNEL_TARGETS = [("generic", None), ("cortex-m0", None), ("cortex-m4", "int8"),
                  ("cortex-m4", "int16"), ("cortex-m7", "int8"), ("cortex-m33", "int8"), ("cortex-m55", "int8")]


@pytest.mark.parametrize(("target", "weights"), KERNEL_TARGETS,
                         ids=[f"{t}-{w or 'default'}" for t, w in KERNEL_TARGETS])
def test_host_build_matches_tflm(model, tmp_path, target, weights):
    """Each target's C (the DSP ones with the portable intrinsics) under ASan and UBSan's
    signed-overflow check, against TFLM."""
    require_tool("gcc")
    gen = emit_sources(model, name="wrap", target=target, weights=weights)
    exe = harness.build(gen, tmp_path, cflags=CFLAGS[4:] + ["-O1"])
    for seed in (0, 1, 2):
        inputs = fitting_inputs(seed)
        got = harness.run(exe, gen, inputs)
        want = run_tflm(model, inputs)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_array_equal(g, np.asarray(w).reshape(g.shape),
                                          err_msg=f"{target} output {k} seed {seed}")


@pytest.mark.parametrize("weights", ["int8", "int16"])
def test_cortex_m4_on_qemu_matches_tflm(model, tmp_path, weights):
    for tool in (H.CC, H.SIZE, H.QEMU):
        require_tool(tool)
    gen = emit_sources(model, name="wrap", target="cortex-m4", weights=weights)
    assert any(k.template.endswith(".dsp.c.j2") for k in gen.kernels)
    inputs = fitting_inputs(1)
    result = H.run(H.build(gen, inputs, tmp_path), timeout=120)
    want = run_tflm(model, inputs)
    for k, (got, ref) in enumerate(zip(result.outputs, want, strict=True)):
        np.testing.assert_array_equal(got, np.asarray(ref).reshape(got.shape),
                                      err_msg=f"output {k} on QEMU's Cortex-M4 vs TFLM")
