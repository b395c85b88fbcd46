"""Randomized parity of the compute operators TRANSPOSE_CONV and BATCH_MATMUL against TFLite
Micro and LiteRT, and of CONV_2D with dilation and DEPTHWISE_CONV_2D with a depth multiplier in
every scheme (geometries ``tests/emit/test_emit_random.py`` leaves out: dilations that differ per
axis together with a multiplier, dilated windows wider than the input, one input channel).

The machinery is ``tests/helpers/emit_parity.py``; int8 cases of schemes with DSP kernels also
run emitted for the Cortex-M4 (the portable definitions of its intrinsics, on the host).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers.emit_parity import SEEDS, Case, Prefetcher, check_parity, with_branches, with_targets

from project_api.tflite.builder import ModelBuilder
from project_api.tflite.tensors import TensorRef

pytest_plugins = ("helpers.emit_parity",)

#: Every weighted scheme: float32, int8 per tensor and per channel, int16x8 likewise.
WEIGHTED_MODES = ("float32", "int8", "int8_per_channel", "int16x8", "int16x8_per_channel")
INT16_MODES = ("int16x8", "int16x8_per_channel")


def _seeded(case: Case, variants: list[dict[str, Any]]) -> Case:
    for s in SEEDS:
        for v in variants:
            case.branches.append({**v, "seed": s})
    return case


# --- TRANSPOSE_CONV -----------------------------------------------------------------------------

#: (stride, padding): the usual upsampling by 2, VALID (the output grows by the kernel), stride
#: 1, strides that differ per axis.
TCONV_GEOMETRY = ((2, "SAME"), (2, "VALID"), (1, "SAME"), ((2, 1), "VALID"))
#: Per seed: input shape, kernel, filters (kernel larger than, equal to, smaller than stride).
TCONV_SHAPES = [{"input_shape": (1, 4, 4, 3), "kernel_size": 3, "filters": 4},
                {"input_shape": (1, 3, 5, 2), "kernel_size": (2, 3), "filters": 5},
                {"input_shape": (2, 3, 3, 4), "kernel_size": 4, "filters": 3}]
#: Edge cases, one branch per seed: no bias, a 1x1 kernel, a stride above the kernel (output
#: pixels no input reaches: the bias alone), an output shape below in * stride (SAME allows
#: it), many channels, input zero points at both int8 ends.
TCONV_EDGES: dict[str, dict[str, Any]] = {
    "no_bias": {"input_shape": (1, 4, 3, 3), "bias": False},
    "k1": {"input_shape": (1, 3, 4, 5), "kernel_size": 1, "stride": 1},
    "stride3_k2": {"input_shape": (1, 3, 3, 2), "kernel_size": 2, "stride": 3,
                   "padding": "VALID"},
    "output_shape_7x5": {"input_shape": (1, 4, 3, 2), "output_shape": (1, 7, 5, 4)},
    "c16_f12": {"input_shape": (1, 3, 3, 16), "filters": 12},
    "zero_point_min": {"input_shape": (1, 3, 3, 3), "value_range": (0.0, 2.0)},
    "zero_point_max": {"input_shape": (1, 3, 3, 3), "value_range": (-2.0, 0.0)},
}


def _tconv_cases() -> list[Case]:
    cases = []
    for mode in WEIGHTED_MODES:
        for stride, padding in TCONV_GEOMETRY:
            cases.append(with_branches("TRANSPOSE_CONV", mode,
                                       {"stride": stride, "padding": padding}, TCONV_SHAPES))
        for label, opts in TCONV_EDGES.items():
            if label.startswith("zero_point") and not mode.startswith("int8"):
                continue
            cases.append(_seeded(Case("TRANSPOSE_CONV", mode, {"edge": label}), [opts]))
    # as TFLM's seanet integration tests: int16x8, VALID, strides (1, 2), one input row, and
    # the output shape computed in the graph (here: a model input, which TFLM never reads and
    # LiteRT would resize the output by, so TFLM alone is the reference)
    for mode in INT16_MODES:
        cases.append(_seeded(Case("TRANSPOSE_CONV", mode, {"edge": "seanet_like"}, litert=False),
                             [{"input_shape": (1, 1, 5, 16), "kernel_size": (3, 4),
                               "stride": (1, 2), "padding": "VALID", "filters": 12,
                               "shape_input": True}]))
    for mode in INT16_MODES:  # TFLM widens an int16 bias to int64; LiteRT refuses it
        cases.append(with_branches("TRANSPOSE_CONV", mode, {"bias_form": "bias_int16"},
                                   [{**sh, "bias_dtype": "int16"} for sh in TCONV_SHAPES],
                                   litert=False))
    return cases


# --- BATCH_MATMUL -------------------------------------------------------------------------------

#: Activation right-hand sides: batches, adj_x, adj_y, both, broadcast batches (ranks 3 and 5).
BMM_ACTIVATION = [
    {"input_shape": (2, 3, 4), "b_shape": (2, 4, 5), "b_input": True},
    {"input_shape": (2, 4, 3), "b_shape": (2, 4, 5), "b_input": True, "adj_x": True},
    {"input_shape": (3, 4), "b_shape": (5, 4), "b_input": True, "adj_y": True},
    {"input_shape": (1, 4, 3), "b_shape": (2, 5, 4), "b_input": True, "adj_x": True,
     "adj_y": True},
    {"input_shape": (2, 1, 2, 3, 4), "b_shape": (1, 3, 1, 4, 2), "b_input": True},
    {"input_shape": (1, 3, 4), "b_shape": (4, 6), "b_input": True},
]
#: Constant right-hand sides (a layer's weights): plain, adj_y, a batch of weights, a rank-2
#: input, lhs batches broadcast over one weight matrix, one rhs batch per lhs batch.
BMM_CONSTANT = [
    {"input_shape": (1, 3, 4), "b_shape": (4, 5)},
    {"input_shape": (1, 3, 4), "b_shape": (5, 4), "adj_y": True},
    {"input_shape": (2, 3, 8), "b_shape": (2, 8, 3)},
    {"input_shape": (6, 7), "b_shape": (7, 4)},
    {"input_shape": (2, 2, 3, 4), "b_shape": (4, 5), "adj_x": False},
    {"input_shape": (2, 5, 3), "b_shape": (1, 5, 2), "adj_x": True},
]


def _symmetric_weights(mb: ModelBuilder, dtype: str, opts: dict[str, Any],
                       name: str) -> TensorRef:
    """A constant int8 right-hand side quantized symmetrically (zero point 0, as a layer's
    weights), the FULLY_CONNECTED-like case."""
    x = mb.input(opts["input_shape"], dtype, name=name)
    w = mb.rng.uniform(-1.0, 1.0, size=opts["b_shape"]).astype(np.float32)
    scale = float(np.abs(w).max()) / 127.0
    rhs = mb.constant(w, dtype, quant=(scale, 0))
    return mb.batch_matmul(x, rhs, adj_x=opts.get("adj_x", False),
                           adj_y=opts.get("adj_y", False))


#: float32 scales whose float32 product over the output scale is exactly 2^-16, while their
#: double product is not: TFLM's multiplier comes from the double one (its int64
#: requantization then rounds down where 2^-16 would round up).
POW2_SCALES = (2.633959229569882e-05, 2.633959229569882e-05, 4.546718264464289e-05)


def _pow2_scales(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    sl, sr, so = POW2_SCALES
    if dtype == "int8":
        sl, sr, so = sl * 256, sr * 256, so * 256 * 256
    a = mb.input(opts["input_shape"], dtype, quant=(sl, 0), name=name)
    b = mb.input(opts["b_shape"], dtype, quant=(sr, 0), name=f"{name}_b")
    return mb.batch_matmul(a, b, out_quant=(so, 0))


def _bmm_cases() -> list[Case]:
    cases = []
    for mode in ("float32", "int8", "int16x8"):
        cases.append(_seeded(Case("BATCH_MATMUL", mode, {"rhs": "activation"}), BMM_ACTIVATION))
        cases.append(_seeded(Case("BATCH_MATMUL", mode, {"rhs": "constant"}), BMM_CONSTANT))
    cases.append(_seeded(Case("BATCH_MATMUL", "int8", {"rhs": "constant_symmetric"},
                              branch=_symmetric_weights), BMM_CONSTANT))
    for mode in ("int8", "int16x8"):
        cases.append(_seeded(Case("BATCH_MATMUL", mode, {"edge": "scales_pow2_in_float32"},
                                  branch=_pow2_scales),
                             [{"input_shape": (4, 6), "b_shape": (6, 5)},
                              {"input_shape": (2, 3, 4), "b_shape": (2, 4, 3)}]))
    cases.append(_seeded(Case("BATCH_MATMUL", "int8", {"edge": "zero_points"}), [
        {"input_shape": (2, 3, 4), "b_shape": (2, 4, 5), "b_input": True,
         "value_range": (0.0, 2.0)},
        {"input_shape": (3, 4), "b_shape": (4, 5), "value_range": (-2.0, 0.0)},
        {"input_shape": (1, 2, 40), "b_shape": (40, 3), "value_range": (-0.1, 0.1)}]))
    return cases


# --- CONV_2D with dilation, DEPTHWISE_CONV_2D with a depth multiplier -------------------------

#: Geometries beside tests/emit/test_emit_random.py's: dilations that differ per axis, with strides;
#: a dilated window wider than the input (SAME: taps all outside for border pixels); VALID with
#: dilation and an odd kernel.
DILATED = [{"input_shape": (1, 9, 8, 3), "kernel_size": 3, "dilation": (2, 3), "stride": 1},
           {"input_shape": (1, 5, 6, 4), "kernel_size": (3, 2), "dilation": (3, 4),
            "stride": (2, 1)},
           {"input_shape": (1, 10, 9, 2), "kernel_size": (2, 3), "dilation": (3, 2),
            "padding": "VALID"}]


def _dilation_cases() -> list[Case]:
    cases = []
    for mode in WEIGHTED_MODES:
        cases.append(with_branches("CONV_2D", mode, {"edge": "dilation_per_axis"},
                                   [{**d, "filters": 5} for d in DILATED]))
        cases.append(with_branches("DEPTHWISE_CONV_2D", mode,
                                   {"edge": "multiplier_with_dilation"},
                                   [{**d, "depth_multiplier": m} for d, m in
                                    zip(DILATED, (2, 3, 4), strict=True)]))
        # one input channel, multiplier 6, dilated (the DSP target's im2col path)
        cases.append(_seeded(Case("DEPTHWISE_CONV_2D", mode, {"edge": "c1_m6_dilated"}), [
            {"input_shape": (1, 9, 7, 1), "kernel_size": 3, "depth_multiplier": 6,
             "dilation": (2, 2), "activation": "RELU6"}]))
    return cases


CASES = with_targets(_tconv_cases() + _bmm_cases() + _dilation_cases())


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parity(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)


# --- what TFLM refuses (or misreads), refused in one line ------------------------------------------


def _refusal(build) -> str:
    from project_api.emit import emit_sources
    from project_api.errors import UnsupportedOperatorError

    mb = ModelBuilder(seed=4, per_channel=True)
    mb.output(build(mb))
    with pytest.raises(UnsupportedOperatorError) as info:
        emit_sources(mb.build())
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def test_what_tflm_refuses_is_refused_in_one_line():
    def tconv_int16_int32_bias(mb):  # TFLM reads it as int64, past its end
        return mb.transpose_conv(mb.input((1, 3, 3, 2), "int16"), 3, bias_dtype="int32")

    assert _refusal(tconv_int16_int32_bias).startswith(
        "TRANSPOSE_CONV (node 0): type int32 of 'transpose_conv_2/bias' not supported "
        "(supported: int64, int16)")

    def tconv_hybrid(mb):
        x = mb.input((1, 3, 3, 2), "float32")
        w = mb.constant(np.ones((2, 3, 3, 2), np.float32), "int8", quant=(0.01, 0))
        shape = mb.constant(np.array([1, 6, 6, 2], np.int32), "int32")
        y, = mb.operator("TRANSPOSE_CONV", [shape, w, x], [((1, 6, 6, 2), "float32", None)],
                         {"padding": "SAME", "stride_w": 2, "stride_h": 2})
        return y

    assert "hybrid models are not supported" in _refusal(tconv_hybrid)

    def tconv_shape_mismatch(mb):
        x = mb.input((1, 3, 3, 2), "float32")
        w = mb.constant(np.ones((2, 3, 3, 2), np.float32), "float32")
        shape = mb.constant(np.array([1, 6, 6, 2], np.int32), "int32")
        y, = mb.operator("TRANSPOSE_CONV", [shape, w, x], [((1, 5, 6, 2), "float32", None)],
                         {"padding": "SAME", "stride_w": 2, "stride_h": 2})
        return y

    assert "the output shape input says [1, 6, 6, 2]" in _refusal(tconv_shape_mismatch)

    def bmm_int16_zero_point(mb):
        a = mb.input((2, 3), "int16", quant=(0.01, 5))
        return mb.batch_matmul(a, mb.input((3, 4), "int16"), out_quant=(0.1, 0))

    assert "must be 0, as TFLM requires" in _refusal(bmm_int16_zero_point)

    def bmm_hybrid(mb):
        a = mb.input((2, 3), "float32")
        w = mb.constant(np.ones((3, 4), np.float32), "int8", quant=(0.01, 0))
        y, = mb.operator("BATCH_MATMUL", [a, w], [((2, 4), "float32", None)],
                         {"adj_x": False, "adj_y": False})
        return y

    assert "TFLM takes no hybrid or int32-output BATCH_MATMUL" in _refusal(bmm_hybrid)

    def bmm_rank6(mb):
        return mb.batch_matmul(mb.input((1, 1, 1, 1, 2, 3), "float32"),
                               np.ones((3, 2), np.float32))

    assert "has rank 6; TFLM takes ranks 2 to 5" in _refusal(bmm_rank6)


def test_constant_rhs_takes_fully_connected_layout():
    """A constant right-hand side is stored as FULLY_CONNECTED stores its weights:
    [columns][depth] (here adj_y: the stored matrix is that already), zero points folded."""
    from project_api.emit import emit_sources, read_tflite

    mb = ModelBuilder(seed=2)
    x = mb.input((1, 3, 4), "int8")
    w = mb.rng.uniform(-1.0, 1.0, size=(4, 5)).astype(np.float32)
    rhs = mb.constant(w, "int8", quant=(float(np.abs(w).max()) / 127, 0))
    mb.output(mb.batch_matmul(x, rhs))
    model = mb.build()
    gen = emit_sources(model)
    (k,) = [k for k in gen.kernels if k.op.opcode == "BATCH_MATMUL"]
    consts = {c.suffix: c for c in k.constants}
    g = read_tflite(model)
    stored = g.tensor(k.op.inputs[1]).data
    zp_in = g.tensor(k.op.inputs[0]).quant.zero_point[0]
    assert consts["w"].ctype == "int8_t" and k.params["fold"]
    np.testing.assert_array_equal(consts["w"].values.reshape(5, 4), stored.T)
    np.testing.assert_array_equal(consts["b"].values.reshape(-1),
                                  -zp_in * stored.astype(np.int64).sum(axis=0))


def test_the_pool_stays_at_its_lower_bound():
    """TRANSPOSE_CONV and BATCH_MATMUL take no scratch (TFLM's TRANSPOSE_CONV takes an
    output-sized accumulator buffer), the DSP convolutions' im2col columns are planned: every
    case's activation pool is the planner's lower bound."""
    from project_api.emit import emit_sources

    for case in CASES:
        gen = emit_sources(case.build()[0], target=case.target)
        assert gen.workspace_size_bytes == gen.lower_bound_bytes, case.id
