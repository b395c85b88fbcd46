"""Randomized parity of the reductions, comparisons, logical ops, SELECT_V2 and CAST against
TFLite Micro and LiteRT; bool tensors as graph inputs, outputs and intermediates (through the
view ops too); a MEAN-at-the-end CNN (the head of a PyTorch-style MobileNetV2) on the host and
on QEMU's Cortex-M4.

Every case is one model: its branches cover the options (axes, keep_dims, broadcasting,
constant operands, zero points at the int8 extremes), three seeds each. The machinery is
``tests/helpers/emit_parity.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import require_tool
from helpers.emit_parity import SEEDS, Case, Prefetcher, check_parity, with_targets

from project_api.tflite import builder as B
from project_api.tflite.builder import ModelBuilder
from project_api.tflite.tensors import TensorRef

pytest_plugins = ("helpers.emit_parity",)

#: Builder modes of the quantized schemes: float32, int8 (int8 activations) and int16x8.
QUANTIZED_MODES = ("float32", "int8", "int16x8")

# --- reductions -------------------------------------------------------------------------------

#: (input shape, axes, keep_dims): TFLM's historically special 4D mean over H, W (keep_dims,
#: both orders of the axes), negative and repeated axes, axes apart, every axis (a scalar out),
#: a count that is no power of two, batches.
REDUCE_VARIANTS: list[dict[str, Any]] = [
    {"input_shape": (1, 4, 5, 3), "axes": (1, 2), "keep_dims": True},
    {"input_shape": (2, 3, 6, 4), "axes": (2, 1), "keep_dims": True},
    {"input_shape": (1, 7, 9, 5), "axes": (1, 2), "keep_dims": False},
    {"input_shape": (2, 5, 3), "axes": (-1,), "keep_dims": False},
    {"input_shape": (2, 3, 4, 5), "axes": (0, 2), "keep_dims": True},
    {"input_shape": (3, 4, 2), "axes": (1, -2, 1), "keep_dims": False},
    {"input_shape": (2, 3, 4), "axes": (0, 1, 2), "keep_dims": False},
    {"input_shape": (3, 1, 10), "axes": (0, 2), "keep_dims": False},
]
#: Branches at the int8/int16 extremes: input zero points -128 and 127 (all-positive and
#: all-negative ranges), and for MEAN/SUM output zero points at both ends.
EXTREME_VARIANTS: list[dict[str, Any]] = [
    {"input_shape": (1, 4, 4, 6), "axes": (1, 2), "keep_dims": True, "value_range": (0.0, 3.0)},
    {"input_shape": (2, 9), "axes": (1,), "keep_dims": False, "value_range": (-2.0, 0.0)},
]
QUANT_OUT_VARIANTS: list[dict[str, Any]] = [
    # as converters write a MEAN after a RELU6 (MobileNetV2 from Keras and from PyTorch): input
    # zero point -128, the output's scale ten times finer, or the input's quantization itself
    {"input_shape": (1, 7, 7, 64), "axes": (1, 2), "keep_dims": False,
     "value_range": (0.0, 6.0), "out_quant": (0.0024, -128)},
    {"input_shape": (1, 4, 4, 96), "axes": (1, 2), "keep_dims": True,
     "value_range": (0.0, 6.0), "out_quant": B.quantize_params(0.0, 6.0)},
    {"input_shape": (1, 3, 5, 4), "axes": (1, 2), "keep_dims": True, "value_range": (-1.0, 1.0),
     "out_quant": (0.01, -128)},
    {"input_shape": (6, 5), "axes": (0,), "keep_dims": False, "value_range": (-1.0, 1.0),
     "out_quant": (0.005, 127)},
]


def _seeded(case: Case, variants: list[dict[str, Any]]) -> Case:
    for s in SEEDS:
        for v in variants:
            case.branches.append({**v, "seed": s})
    return case


def _reduce_cases() -> list[Case]:
    cases = []
    for op in ("MEAN", "SUM"):
        for mode in QUANTIZED_MODES:
            variants = REDUCE_VARIANTS + (EXTREME_VARIANTS if mode != "float32" else [])
            if mode == "int8":
                variants = variants + QUANT_OUT_VARIANTS
            cases.append(_seeded(Case(op, mode, {}), variants))
    for op in ("REDUCE_MAX", "REDUCE_MIN"):
        for mode in ("float32", "int8"):
            variants = REDUCE_VARIANTS + (EXTREME_VARIANTS if mode == "int8" else [])
            cases.append(_seeded(Case(op, mode, {}), variants))
    # an int16 SUM of 65792 elements: its int32 sum can wrap, as TFLM's does
    cases.append(Case("SUM", "int16x8", {"edge": "sum_wraps"}, branches=[
        {"input_shape": (1, 256, 257), "axes": (1, 2), "keep_dims": False,
         "out_quant": (4.0, 0), "seed": 0}]))
    return cases


# --- ARG_MAX / ARG_MIN ------------------------------------------------------------------------

#: Axes first, middle and last (negative too); the int8 run at the extremes is full of ties.
ARG_VARIANTS: list[dict[str, Any]] = [
    {"input_shape": (2, 5), "axis": -1}, {"input_shape": (7, 3), "axis": 0},
    {"input_shape": (2, 3, 4, 5), "axis": 2}, {"input_shape": (1, 6, 1, 3), "axis": -3},
    {"input_shape": (9,), "axis": 0},
]


def _arg_cases() -> list[Case]:
    return [_seeded(Case(op, mode, {}), ARG_VARIANTS) for op in ("ARG_MAX", "ARG_MIN")
            for mode in ("float32", "int8")]


# --- comparisons, logical operators ------------------------------------------------------------

COMPARISONS = B.COMPARISONS
#: Operand shapes: equal, broadcast both ways, a constant (broadcast), a scalar constant.
BINARY_VARIANTS: list[dict[str, Any]] = [
    {"input_shape": (2, 3, 4), "b_shape": (2, 3, 4)},
    {"input_shape": (2, 3, 4), "b_shape": (3, 1)},
    {"input_shape": (1, 3, 1), "b_shape": (2, 1, 5)},
    {"input_shape": (2, 3, 4), "b_shape": (4,), "b_input": False},
    {"input_shape": (5, 2), "b_shape": (1,), "b_input": False},
]
#: int8 only: the same quantization on both sides (raw equality: the run at the extremes has
#: many equal pairs), zero points at both ends, scales 100 times apart.
INT8_COMPARE_VARIANTS: list[dict[str, Any]] = [
    {"input_shape": (3, 7), "b_shape": (3, 7), "value_range": (-1.0, 1.5),
     "b_range": (-1.0, 1.5)},
    {"input_shape": (3, 7), "b_shape": (7,), "value_range": (0.0, 2.0), "b_range": (-2.0, 0.0)},
    {"input_shape": (4, 4), "b_shape": (4, 4), "value_range": (-0.02, 0.02),
     "b_range": (-2.0, 2.0)},
]


def _rounded(mb: ModelBuilder, x: TensorRef) -> TensorRef:
    """float32 ``x`` truncated to whole numbers (CAST to int32 and back): equal pairs are
    common among them."""
    return mb.cast(mb.cast(x, "int32"), "float32")


def _float_equality(op: str):
    """A branch comparing two float32 inputs truncated to whole numbers."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        a = mb.input(opts["input_shape"], "float32", name=name)
        b = mb.input(opts["b_shape"], "float32", name=f"{name}_b")
        return mb.comparison(op, _rounded(mb, a), _rounded(mb, b))

    return branch


def _compare_cases() -> list[Case]:
    cases = []
    for op in COMPARISONS:
        modes = ("float32", "int8", "int32", "int64")
        if op in ("EQUAL", "NOT_EQUAL"):
            modes = ("bool", *modes)
        for mode in modes:
            variants = BINARY_VARIANTS + (INT8_COMPARE_VARIANTS if mode == "int8" else [])
            cases.append(_seeded(Case(op, mode, {}), variants))
        cases.append(_seeded(Case(op, "float32", {"edge": "whole_numbers"},
                                  branch=_float_equality(op)), BINARY_VARIANTS[:3]))
    for op in ("LOGICAL_AND", "LOGICAL_OR"):
        cases.append(_seeded(Case(op, "bool", {}), [
            {"input_shape": (2, 3, 4), "b_shape": (2, 3, 4)},
            {"input_shape": (2, 3, 4), "b_shape": (3, 1)},
            {"input_shape": (4, 1), "b_shape": (1, 6)}]))
    cases.append(_seeded(Case("LOGICAL_NOT", "bool", {}), [
        {"input_shape": (2, 3, 4)}, {"input_shape": (17,)}]))
    return cases


# --- SELECT_V2 ----------------------------------------------------------------------------------

SELECT_VARIANTS: list[dict[str, Any]] = [
    {"input_shape": (2, 3, 4)},
    {"input_shape": (2, 3, 4), "cond_shape": (3, 1)},
    {"input_shape": (3, 1), "cond_shape": (2, 1, 4), "y_shape": (4,)},
    {"input_shape": (2, 5), "cond_shape": (2, 5), "y_shape": (5,), "y_input": False},
    {"input_shape": (1,), "cond_shape": (1,), "y_shape": (1,)},
]


def _select_cases() -> list[Case]:
    return [_seeded(Case("SELECT_V2", mode, {}), SELECT_VARIANTS)
            for mode in ("float32", "int8", "int16x8")]


# --- CAST --------------------------------------------------------------------------------------

CAST_TYPES = ("float32", "int8", "int16", "int32", "bool")
#: The case mode that names each source type.
_CAST_MODES = {"float32": "float32", "int8": "int8", "int16": "int16x8", "int32": "int32",
               "bool": "bool"}


def _cast_branch(src: str, dst: str):
    """input (``src``) -> CAST -> output (``dst``); a float32 input also scaled by 1000 first,
    so that every integer type saturates."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        x = mb.input(opts["input_shape"], src, name=name)
        if src == "float32" and opts.get("scaled"):
            x = mb.mul(x, np.full((1,), 1000.0, np.float32))
        return mb.cast(x, dst)

    return branch


def _cast_cases() -> list[Case]:
    cases = []
    for src in CAST_TYPES:
        for dst in CAST_TYPES:
            variants: list[dict[str, Any]] = [{"input_shape": (2, 3, 4)}]
            if src == "float32":
                variants.append({"input_shape": (3, 5), "scaled": True})
            case = Case("CAST", _CAST_MODES[src], {"to": dst}, branch=_cast_branch(src, dst))
            cases.append(_seeded(case, variants))
    return cases


# --- bool through the view ops ------------------------------------------------------------------


def _bool_view(op: str, chained: bool):
    """A bool branch through view ``op``: directly (graph input to graph output), or chained
    between two LOGICAL_NOTs (the view aliases a pool buffer of bool). (TFLM's EXPAND_DIMS
    refuses bool.)"""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        x = mb.input(opts["input_shape"], "bool", name=name)
        if chained:
            x = mb.logical("LOGICAL_NOT", x)
        y = mb.reshape(x, (-1,)) if op == "RESHAPE" else mb.squeeze(x)
        return mb.logical("LOGICAL_NOT", y) if chained else y

    return branch


def _view_cases() -> list[Case]:
    cases = []
    for op in ("RESHAPE", "SQUEEZE"):
        for chained in (False, True):
            cases.append(_seeded(Case(op, "bool", {"form": "chained" if chained else "direct"},
                                      branch=_bool_view(op, chained)),
                                 [{"input_shape": (2, 1, 3)}, {"input_shape": (1, 4, 1)}]))
    return cases


# --- a CNN that ends in MEAN ------------------------------------------------------------------


def mean_head_cnn(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """CONV_2D -> DEPTHWISE_CONV_2D -> MEAN over H, W -> FULLY_CONNECTED -> SOFTMAX: the head of
    a MobileNetV2 (Keras: MEAN without keep_dims; PyTorch's export: MEAN with keep_dims, then
    RESHAPE)."""
    x = mb.input(opts["input_shape"], dtype, value_range=(-1.0, 1.0), name=name)
    y = mb.conv2d(x, 8, 3, stride=2, activation="RELU6")
    y = mb.depthwise_conv2d(y, 3, activation="RELU6")
    y = mb.conv2d(y, 16, 1, activation="RELU6")
    y = mb.mean(y, (1, 2), keep_dims=opts["keep_dims"])
    if opts["keep_dims"]:
        y = mb.reshape(y, (1, 16))
    return mb.softmax(mb.fully_connected(y, 10))


def _network_cases() -> list[Case]:
    cases = []
    for mode in ("int8_per_channel", "float32", "int16x8_per_channel"):
        # LiteRT's MEAN rounds differently (1 LSB at times), which the layers after it
        # amplify: TFLM alone is the reference of the whole network
        case = Case("MEAN", mode, {"network": "cnn_mean_head"}, branch=mean_head_cnn,
                    litert=False)
        for s in SEEDS[:2]:
            for keep in (False, True):
                case.branches.append({"input_shape": (1, 12, 10, 3), "keep_dims": keep,
                                      "seed": s})
        cases.append(case)
    return cases


NETWORK_CASES = _network_cases()
CASES = with_targets(_reduce_cases() + _arg_cases() + _compare_cases() + _select_cases()
                     + _cast_cases() + _view_cases() + NETWORK_CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parity(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)


# --- what TFLM refuses, refused in one line ------------------------------------------------------


def _refusal(build) -> str:
    """The one-line refusal of the model ``build(mb)`` makes."""
    from project_api.emit import emit_sources
    from project_api.errors import UnsupportedOperatorError

    mb = ModelBuilder(seed=4)
    mb.output(build(mb))
    with pytest.raises(UnsupportedOperatorError) as info:
        emit_sources(mb.build())
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def _q(dtype: str, scale: float = 0.05, zp: int = 0) -> tuple[float, int] | None:
    return (scale, zp) if dtype in ("int8", "int16") else None


def test_what_tflm_refuses_is_refused_in_one_line():
    def arg_max_int64(mb):
        return mb.arg_max(mb.input((2, 5), "float32"), output_type="int64")

    assert _refusal(arg_max_int64).startswith("ARG_MAX (node 0): output 'arg_max_2' is int64; "
                                              "TFLM's ARG_MAX writes int32 only")

    def greater_int16(mb):
        x = mb.input((4,), "int16")
        return mb.comparison("GREATER", x, mb.input((4,), "int16"))

    assert _refusal(greater_int16) == ("GREATER (node 0): input 0 'input_1' is int16: int16 is "
                                       "not supported (supported: float32, int8, int32, int64)")

    def less_bool(mb):
        return mb.comparison("LESS", mb.input((4,), "bool"), mb.input((4,), "bool"))

    assert "bool is not supported" in _refusal(less_bool)

    def max_requantized(mb):
        x = mb.input((2, 3), "int8", quant=(0.1, 3))
        y, = mb.operator("REDUCE_MAX", [x, mb.constant(np.array([1], np.int32), "int32")],
                         [((2,), "int8", (0.2, 3))], {"keep_dims": False})
        return y

    assert "must have the quantization of input" in _refusal(max_requantized)

    def max_int16(mb):
        return mb.reduce_max(mb.input((2, 3), "int16"), 1)

    assert "int16x8 is not supported (supported: float32, int8)" in _refusal(max_int16)

    def cast_to_int64(mb):
        return mb.cast(mb.input((3,), "int32"), "int64")

    assert _refusal(cast_to_int64).startswith("CAST (node 0): input 'input_1' is int32, output "
                                              "'cast_2' is int64: int32->int64 is not supported")

    def compare_scale_above_one(mb):
        x = mb.input((4,), "int8", quant=(2.0, 0))
        return mb.comparison("EQUAL", x, mb.input((4,), "int8", quant=(0.5, 0)))

    assert "takes scales below 1 only" in _refusal(compare_scale_above_one)

    def and_int8(mb):
        x = mb.input((4,), "int8")
        y, = mb.operator("LOGICAL_AND", [x, mb.input((4,), "int8")], [((4,), "bool", None)])
        return y

    assert "int8 is not supported (supported: bool)" in _refusal(and_int8)

    def mean_axis_activation(mb):
        x = mb.input((2, 3), "float32")
        axis = mb.input((1,), "int32", name="axis")
        y, = mb.operator("MEAN", [x, axis], [((2,), "float32", None)], {"keep_dims": False})
        return y

    assert "input 1 'axis' must be a constant" in _refusal(mean_axis_activation)

    def mean_wrong_shape(mb):
        x = mb.input((2, 3), "float32")
        y, = mb.operator("MEAN", [x, mb.constant(np.array([1], np.int32), "int32")],
                         [((2, 1), "float32", None)], {"keep_dims": False})
        return y

    assert "with keep_dims=False gives [2]" in _refusal(mean_wrong_shape)

    def select_int32(mb):
        c = mb.input((4,), "bool")
        return mb.select_v2(c, mb.input((4,), "int32"), mb.input((4,), "int32"))

    assert "int32 is not supported (supported: float32, int8, int16)" in _refusal(select_int32)


def test_bool_and_int64_are_graph_input_and_output_types(tmp_path):
    """bool graph inputs and outputs are one byte each in the interface, as TFLite stores them,
    int64 eight; the host harness (bench, demo) feeds and reads them."""
    from project_api.emit import emit_sources
    from project_api.emit import harness as H
    from project_api.emit.reference import run_tflm

    require_tool("cc")
    mb = ModelBuilder(seed=1)
    a = mb.input((2, 3), "bool", name="a")
    b = mb.input((2, 3), "int64", name="b")
    mb.output(mb.logical("LOGICAL_NOT", a))
    mb.output(mb.comparison("LESS_EQUAL", b, np.array([0, 5, -5], np.int64)))
    model = mb.build()
    gen = emit_sources(model)
    assert [(t.dtype, t.size_bytes) for t in gen.inputs + gen.outputs] == [
        ("bool", 6), ("int64", 48), ("bool", 6), ("bool", 6)]
    assert "#define TVMGEN_DEFAULT_A_SIZE 6" in gen.header
    inputs = [np.array([[True, False, True], [False, False, True]]),
              np.array([[0, 6, -5], [-1, 5, -6]], np.int64)]
    got = H.run(H.build(gen, tmp_path), gen, inputs)
    for g, w in zip(got, run_tflm(model, inputs), strict=True):
        np.testing.assert_array_equal(g, w)


# --- the MEAN-at-the-end CNN on QEMU's Cortex-M4 ---------------------------------------------------


@pytest.mark.parametrize("target", ["generic", "cortex-m4"])
def test_mean_head_cnn_on_qemu_matches_tflm(tmp_path, target):
    """The int8 CNN that ends in MEAN over H, W, emitted for both kernel targets, on QEMU's
    Cortex-M4 (mps2-an386): bit-exact with TFLM."""
    from project_api.emit import cortex_m_harness as H
    from project_api.emit import emit_sources
    from project_api.emit.reference import run_tflm

    for tool in (H.CC, H.QEMU):
        require_tool(tool)
    mb = ModelBuilder(seed=5, per_channel=True)
    mb.output(mean_head_cnn(mb, "int8", {"input_shape": (1, 12, 10, 3), "keep_dims": True}, "x"))
    model = mb.build()
    gen = emit_sources(model, name="cnn", target=target)
    rng = np.random.default_rng(2)
    inputs = [rng.integers(-128, 128, t.shape).astype(np.int8) for t in gen.inputs]
    result = H.run(H.build(gen, inputs, tmp_path), timeout=120)
    want = run_tflm(model, inputs)
    np.testing.assert_array_equal(result.outputs[0], np.asarray(want[0]).reshape(
        result.outputs[0].shape), err_msg=f"MEAN-head CNN ({target}) on QEMU vs TFLM")


def test_ops_table_shows_conversions_compactly(capsys):
    """``project-api ops`` groups the 36 CAST conversions (uint32 too) into one product."""
    from project_api.cli import main

    assert main(["ops"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("CAST "))
    assert ("float32|int8|int16|int32|bool|uint32->float32|int8|int16|int32|bool|uint32"
            in line)


def test_the_pool_stays_at_its_lower_bound():
    """None of these operators takes scratch or an output-sized buffer (TFLM's MEAN takes an
    int32 one): every case's activation pool is the planner's lower bound."""
    from project_api.emit import emit_sources

    for case in CASES:
        gen = emit_sources(case.build()[0], target=case.target)
        assert gen.workspace_size_bytes == gen.lower_bound_bytes, case.id
