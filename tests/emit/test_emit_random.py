"""Randomized parity of the emitted C against TFLite Micro and LiteRT, operator by operator, for
the operators the emitter started with (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, the pools,
ADD, MUL, RESHAPE, SOFTMAX, QUANTIZE, DEQUANTIZE) in float32, int8 and int16x8.

Every operator option combination is one test: a model whose branches (one input and one
output each) cover the fused activations and three seeds, each seed with its own input shape,
kernel size, weights and quantization. The machinery (emit, compile under ASan and UBSan, run,
compare bit-exact with TFLM and within tolerance of LiteRT; the DSP-target copies of every case
whose scheme has DSP kernels) is ``tests/helpers/emit_parity.py``; newer operators have their
own modules, ``tests/test_ops_<family>.py``. ``DSP_CASES`` (``tests/helpers/emit_cases.py``)
add shapes that reach each code path of the DSP kernels (with int8 and int16 weights): 1x1 with
odd pixel and channel counts, strided, long reductions and loop tails, columns on the stack and
in the pool, 3-channel first layers, border and interior ranges, odd outputs, sums the
int8-weight form cannot hold, left shifts, FULLY_CONNECTED's input made in registers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers.emit_cases import MVE_CASES, dsp_cases
from helpers.emit_parity import Case, Prefetcher, check_parity, with_targets
from helpers.emit_parity import with_branches as _with_branches

pytest_plugins = ("helpers.emit_parity",)

SEEDS = (0, 1, 2)
#: The modes of the weighted operators' cases from before int16x8 (kept as they were).
WEIGHTED_MODES = ("int8", "int8_per_channel", "float32")
#: int16x8: int16 activations, int8 weights per tensor or per channel, int64 (or int32) bias.
INT16_MODES = ("int16x8", "int16x8_per_channel")


# --- the case matrix ----------------------------------------------------------------------------


def _cases() -> Iterator[Case]:
    weighted_modes = WEIGHTED_MODES
    plain_modes = ("int8", "float32")
    for mode in weighted_modes:
        for stride in (1, 2):
            for padding in ("SAME", "VALID"):
                for dilation in (1, 2):
                    opts = {"stride": stride, "padding": padding, "dilation": dilation}
                    yield _with_branches("CONV_2D", mode, opts, [
                        {"input_shape": (1, 9, 9, 3), "kernel_size": 3, "filters": 4},
                        {"input_shape": (1, 8, 7, 4), "kernel_size": (2, 3), "filters": 5},
                        {"input_shape": (1, 7, 10, 2), "kernel_size": 1, "filters": 8},
                    ])
                    for mult in (1, 2):
                        yield _with_branches("DEPTHWISE_CONV_2D", mode,
                                             {**opts, "depth_multiplier": mult}, [
                            {"input_shape": (1, 9, 9, 3), "kernel_size": 3},
                            {"input_shape": (1, 8, 7, 4), "kernel_size": (3, 2)},
                            {"input_shape": (1, 7, 10, 2), "kernel_size": 2},
                        ])
        for bias in (True, False):
            for keep in (False, True):
                yield _with_branches("FULLY_CONNECTED", mode,
                                     {"bias": bias, "keep_num_dims": keep}, [
                    {"input_shape": (1, 12), "units": 5},
                    {"input_shape": (3, 7), "units": 8},
                    {"input_shape": (1, 2, 10), "units": 3},
                ])
    for mode in plain_modes:
        for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            for filt in (2, 3):
                for stride in (1, 2):
                    for padding in ("SAME", "VALID"):
                        yield _with_branches(op, mode, {"filter_size": filt, "stride": stride,
                                                        "padding": padding}, [
                            {"input_shape": (1, 8, 8, 3)},
                            {"input_shape": (1, 7, 9, 4)},
                            {"input_shape": (1, 6, 5, 2)},
                        ])
        for op in ("ADD", "MUL"):
            for kind, per_seed in _binary_shapes().items():
                yield _with_branches(op, mode, {"shapes": kind}, per_seed)
        for shape_input in (True, False):
            case = Case("RESHAPE", mode, {"shape_input": shape_input})
            for s in SEEDS:
                for target in ((1, -1), (1, 12, 4), (48,)):
                    case.branches.append({"shape_input": shape_input, "shape": target,
                                          "input_shape": (1, 4, 4, 3), "seed": s})
            yield case
        case = Case("SOFTMAX", mode, {})
        for beta in (1.0, 0.5, 2.0):
            for s, shape in zip(SEEDS, ((1, 10), (2, 5), (1, 3, 7)), strict=True):
                case.branches.append({"beta": beta, "input_shape": shape, "seed": s})
        yield case
        # QUANTIZE: float32 -> int8 in mode float32, int8 -> int8 (requantize) in mode int8
        case = Case("QUANTIZE", mode, {"from": mode})
        for s in SEEDS:
            for shape in ((1, 4, 4, 3), (1, 10), (2, 3)):
                case.branches.append({"input_shape": shape, "seed": s})
        yield case
    case = Case("DEQUANTIZE", "int8", {})
    for s in SEEDS:
        for shape in ((1, 4, 4, 3), (1, 10), (2, 3)):
            case.branches.append({"input_shape": shape, "seed": s})
    yield case


def _binary_shapes() -> dict[str, list[dict[str, Any]]]:
    """ADD/MUL operand shapes per kind, one entry per seed (channel counts differ by seed)."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    chans = (3, 8, 1)
    kinds["same"] = [{"input_shape": (1, 4, 4, c), "b_shape": (1, 4, 4, c)} for c in chans]
    kinds["same_const"] = [{"input_shape": (1, 4, 4, c), "b_shape": (1, 4, 4, c),
                            "b_input": False} for c in chans]
    kinds["bcast_channel"] = [{"input_shape": (1, 4, 4, c), "b_shape": (1, 1, 1, c)}
                              for c in chans]
    kinds["bcast_rank_const"] = [{"input_shape": (1, 4, 4, c), "b_shape": (c,),
                                  "b_input": False} for c in chans]
    kinds["bcast_both"] = [{"input_shape": (1, 4, 1, c), "b_shape": (1, 1, 5, c)} for c in chans]
    kinds["bcast_2d"] = [{"input_shape": (2, 2 * c), "b_shape": (1, 2 * c)} for c in chans]
    return kinds


def _zero_channel_filters() -> np.ndarray:
    """CONV_2D weights [4, 3, 3, 2] whose output channel 1 is all zeros (a degenerate scale)."""
    w = np.random.default_rng(11).uniform(-0.5, 0.5, size=(4, 3, 3, 2)).astype(np.float32)
    w[1] = 0.0
    return w


#: Edge cases, each in the listed modes with one branch per seed: batches, big and lopsided
#: kernels, strides beyond the kernel, windows larger than the input, odd channel counts, extreme
#: scales and zero points, long rows.
EDGE_CASES: list[tuple[str, tuple[str, ...], str, dict[str, Any]]] = [
    ("CONV_2D", WEIGHTED_MODES, "batch2", {"input_shape": (2, 6, 6, 3), "filters": 4}),
    ("CONV_2D", WEIGHTED_MODES, "k5_s3_valid", {"input_shape": (1, 11, 11, 2), "filters": 3,
                                         "kernel_size": 5, "stride": 3, "padding": "VALID"}),
    ("CONV_2D", WEIGHTED_MODES, "lopsided", {"input_shape": (1, 9, 8, 3), "kernel_size": (3, 2),
                                      "stride": (1, 2), "dilation": (2, 1)}),
    ("CONV_2D", WEIGHTED_MODES, "c33_f17", {"input_shape": (1, 4, 4, 33), "filters": 17}),
    ("CONV_2D", WEIGHTED_MODES, "k7x1_c1_f16", {"input_shape": (1, 10, 5, 1), "filters": 16,
                                         "kernel_size": (7, 1)}),
    ("CONV_2D", WEIGHTED_MODES, "kernel_beyond_input", {"input_shape": (1, 3, 3, 2), "kernel_size": 5}),
    ("CONV_2D", WEIGHTED_MODES, "zero_channel", {"input_shape": (1, 5, 5, 2),
                                          "filters": _zero_channel_filters()}),
    ("CONV_2D", WEIGHTED_MODES, "relu_n1_to_1", {"input_shape": (1, 6, 6, 3),
                                          "activation": "RELU_N1_TO_1"}),
    ("DEPTHWISE_CONV_2D", WEIGHTED_MODES, "m3_k5", {"input_shape": (1, 7, 7, 2), "kernel_size": 5,
                                             "depth_multiplier": 3}),
    ("DEPTHWISE_CONV_2D", WEIGHTED_MODES, "batch2_s2", {"input_shape": (2, 5, 5, 4), "stride": 2}),
    ("DEPTHWISE_CONV_2D", WEIGHTED_MODES, "c16_lopsided_valid", {
        "input_shape": (1, 6, 6, 16), "stride": (2, 1), "dilation": (1, 2), "padding": "VALID"}),
    ("FULLY_CONNECTED", WEIGHTED_MODES, "depth300", {"input_shape": (1, 300), "units": 20}),
    ("FULLY_CONNECTED", WEIGHTED_MODES, "batch4", {"input_shape": (4, 16), "units": 6}),
    ("FULLY_CONNECTED", WEIGHTED_MODES, "keep_dims_4d", {"input_shape": (1, 2, 3, 8), "units": 5,
                                                  "keep_num_dims": True}),
    ("AVERAGE_POOL_2D", ("int8", "float32"), "global", {"input_shape": (1, 5, 7, 8),
                                                        "filter_size": (5, 7)}),
    ("AVERAGE_POOL_2D", ("int8", "float32"), "batch2_same", {
        "input_shape": (2, 7, 7, 3), "filter_size": 3, "stride": 2, "padding": "SAME"}),
    ("MAX_POOL_2D", ("int8", "float32"), "window_beyond_input", {
        "input_shape": (1, 3, 3, 4), "filter_size": 4, "stride": 1, "padding": "SAME"}),
    ("MAX_POOL_2D", ("int8", "float32"), "s3_f2", {"input_shape": (1, 9, 9, 3), "filter_size": 2,
                                                   "stride": 3}),
    ("ADD", ("int8", "float32"), "scale_ratio_5000", {"value_range": (-0.01, 0.01),
                                                      "b_range": (-50.0, 50.0)}),
    ("ADD", ("int8", "float32"), "scalar_input", {"b_shape": (1,)}),
    ("ADD", ("int8", "float32"), "row1000", {"input_shape": (1, 1000), "b_shape": (1, 1000),
                                             "activation": "RELU_N1_TO_1"}),
    ("MUL", ("int8", "float32"), "scale_ratio_5000", {"value_range": (-0.01, 0.01),
                                                      "b_range": (-50.0, 50.0)}),
    ("MUL", ("int8", "float32"), "scalar_input", {"b_shape": (1,)}),
    ("SOFTMAX", ("int8", "float32"), "row100_beta3", {"input_shape": (1, 100), "beta": 3.0,
                                                      "value_range": (-10.0, 10.0)}),
    ("SOFTMAX", ("int8", "float32"), "rows_of_one", {"input_shape": (4, 1)}),
    ("SOFTMAX", ("int8", "float32"), "narrow_input", {"value_range": (-0.05, 0.05)}),
    ("QUANTIZE", ("float32", "int8"), "zero_point_min", {"quant": (0.01, -128)}),
    ("QUANTIZE", ("float32", "int8"), "zero_point_max", {"quant": (0.01, 127)}),
    ("QUANTIZE", ("int8",), "scale_down_100", {"value_range": (-12.0, 13.0),
                                               "quant": (0.001, 3)}),
    ("DEQUANTIZE", ("int8",), "zero_point_min", {"value_range": (0.0, 5.0)}),
    ("DEQUANTIZE", ("int8",), "zero_point_max", {"value_range": (-5.0, 0.0)}),
]


def _edge_cases() -> Iterator[Case]:
    for op, modes, label, opts in EDGE_CASES:
        for mode in modes:
            case = Case(op, mode, {"edge": label})
            for s in SEEDS:
                case.branches.append({**opts, "seed": s})
            yield case


#: int16x8 geometry of CONV_2D and DEPTHWISE_CONV_2D: (stride, padding, dilation).
INT16_GEOMETRY = ((1, "SAME", 1), (2, "VALID", 1), (1, "SAME", 2), (2, "SAME", 2))
#: int16x8 pools: (filter, stride, padding).
INT16_POOLS = ((2, 2, "VALID"), (3, 1, "SAME"), (3, 2, "SAME"), (2, 1, "VALID"))
CONV_SHAPES = [{"input_shape": (1, 9, 9, 3), "kernel_size": 3, "filters": 4},
               {"input_shape": (1, 8, 7, 4), "kernel_size": (2, 3), "filters": 5},
               {"input_shape": (1, 7, 10, 2), "kernel_size": 1, "filters": 8}]
DW_SHAPES = [{"input_shape": (1, 9, 9, 3), "kernel_size": 3},
             {"input_shape": (1, 8, 7, 4), "kernel_size": (3, 2)},
             {"input_shape": (1, 7, 10, 2), "kernel_size": 2}]
FC_SHAPES = [{"input_shape": (1, 12), "units": 5}, {"input_shape": (3, 7), "units": 8},
             {"input_shape": (1, 2, 10), "units": 3}]
POOL_SHAPES = [{"input_shape": (1, 8, 8, 3)}, {"input_shape": (1, 7, 9, 4)},
               {"input_shape": (1, 6, 5, 2)}]
#: The bias forms of int16x8 CONV_2D and FULLY_CONNECTED besides the converter's int64: an
#: int32 bias, no bias (TFLM: an int64 accumulator), no bias with quantized_bias_type int32
#: (an int32 one). LiteRT reads an int16x8 bias as int64 and requires a CONV_2D bias, so these
#: are checked against TFLM alone.
INT16_BIAS_FORMS = {"bias_int32": {"bias_dtype": "int32"}, "no_bias": {"bias": False},
                    "no_bias_acc_int32": {"bias": False, "bias_dtype": "int32"}}
#: QUANTIZE conversions of the int16x8 scheme: (input mode, output type, LiteRT has it).
INT16_CONVERSIONS = (("float32", "int16", True), ("int8", "int16", True),
                     ("int8", "int32", False), ("int16x8", "int8", True),
                     ("int16x8", "int16", True), ("int16x8", "int32", True),
                     ("int32", "int8", True), ("int32", "int16", True))


def _int16_cases() -> Iterator[Case]:
    """int16x8 (int16 activations, int8 weights, int64 or int32 bias) for the operators the
    emitter started with, and QUANTIZE/DEQUANTIZE between int8, int16, int32 and float32."""
    for mode in INT16_MODES:
        for i, (stride, padding, dilation) in enumerate(INT16_GEOMETRY):
            opts = {"stride": stride, "padding": padding, "dilation": dilation}
            yield _with_branches("CONV_2D", mode, opts, CONV_SHAPES)
            yield _with_branches("DEPTHWISE_CONV_2D", mode,
                                 {**opts, "depth_multiplier": 1 + i % 2}, DW_SHAPES)
        for bias in (True, False):
            for keep in (False, True):
                yield _with_branches("FULLY_CONNECTED", mode,
                                     {"bias": bias, "keep_num_dims": keep}, FC_SHAPES,
                                     litert=bias)
        for label, form in INT16_BIAS_FORMS.items():
            yield _with_branches("CONV_2D", mode, {"bias_form": label},
                                 [{**sh, **form} for sh in CONV_SHAPES], litert=False)
            if label != "no_bias":  # (FULLY_CONNECTED without a bias: above)
                yield _with_branches("FULLY_CONNECTED", mode, {"bias_form": label},
                                     [{**sh, **form} for sh in FC_SHAPES], litert=False)
        yield _with_branches("DEPTHWISE_CONV_2D", mode, {"bias_form": "no_bias"},
                             [{**sh, "bias": False} for sh in DW_SHAPES])
    for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        for filt, stride, padding in INT16_POOLS:
            yield _with_branches(op, "int16x8", {"filter_size": filt, "stride": stride,
                                                 "padding": padding}, POOL_SHAPES)
    for op in ("ADD", "MUL"):
        for kind, per_seed in _binary_shapes().items():
            yield _with_branches(op, "int16x8", {"shapes": kind}, per_seed)
    case = Case("SOFTMAX", "int16x8", {})
    for beta in (1.0, 0.5, 2.0):
        for s, shape in zip(SEEDS, ((1, 10), (2, 5), (1, 3, 7)), strict=True):
            case.branches.append({"beta": beta, "input_shape": shape, "seed": s})
    yield case
    for src, to, litert in INT16_CONVERSIONS:
        case = Case("QUANTIZE", src, {"from": src, "to": to}, litert=litert)
        for s in SEEDS:
            for shape in ((1, 4, 4, 3), (1, 10), (2, 3)):
                case.branches.append({"input_shape": shape, "seed": s, "to": to})
        yield case
    for src, to in (("uint8", "int8"), ("int8", "uint8")):  # image models' uint8 ends
        case = Case("QUANTIZE", src, {"from": src, "to": to})
        for s in SEEDS:
            for shape in ((1, 4, 4, 3), (1, 10), (2, 3)):
                case.branches.append({"input_shape": shape, "seed": s, "to": to})
        yield case
    case = Case("DEQUANTIZE", "int16x8", {})
    for s in SEEDS:
        for shape in ((1, 4, 4, 3), (1, 10), (2, 3)):
            case.branches.append({"input_shape": shape, "seed": s})
    yield case


#: int16x8 edge cases, one branch per seed: long reductions, lopsided and big kernels, a zero
#: output channel, RELU_N1_TO_1, wide softmax rows sweeping the exp table, scale ratios, the
#: int8 zero point extremes of a requantization to int8.
INT16_EDGE_CASES: list[tuple[str, tuple[str, ...], str, dict[str, Any]]] = [
    ("CONV_2D", INT16_MODES, "c33_f17", {"input_shape": (1, 4, 4, 33), "filters": 17}),
    ("CONV_2D", INT16_MODES, "k7x1_c1_f16", {"input_shape": (1, 10, 5, 1), "filters": 16,
                                             "kernel_size": (7, 1)}),
    ("CONV_2D", INT16_MODES, "zero_channel", {"input_shape": (1, 5, 5, 2),
                                              "filters": _zero_channel_filters()}),
    ("CONV_2D", INT16_MODES, "relu_n1_to_1", {"input_shape": (1, 6, 6, 3),
                                              "activation": "RELU_N1_TO_1"}),
    ("CONV_2D", ("int16x8_per_channel",), "c160_wide_acc", {
        "input_shape": (1, 5, 5, 3), "filters": 160, "kernel_size": 3}),
    ("DEPTHWISE_CONV_2D", INT16_MODES, "m3_k5", {"input_shape": (1, 7, 7, 2), "kernel_size": 5,
                                                 "depth_multiplier": 3}),
    ("DEPTHWISE_CONV_2D", ("int16x8_per_channel",), "c160_wide_acc", {
        "input_shape": (1, 4, 4, 160), "kernel_size": 3}),
    ("FULLY_CONNECTED", INT16_MODES, "depth300", {"input_shape": (1, 300), "units": 20}),
    ("AVERAGE_POOL_2D", ("int16x8",), "global", {"input_shape": (1, 5, 7, 8),
                                                 "filter_size": (5, 7)}),
    ("MAX_POOL_2D", ("int16x8",), "window_beyond_input", {
        "input_shape": (1, 3, 3, 4), "filter_size": 4, "stride": 1, "padding": "SAME"}),
    ("ADD", ("int16x8",), "scale_ratio_5000", {"value_range": (-0.01, 0.01),
                                               "b_range": (-50.0, 50.0)}),
    ("ADD", ("int16x8",), "row1000", {"input_shape": (1, 1000), "b_shape": (1, 1000),
                                      "activation": "RELU_N1_TO_1"}),
    ("MUL", ("int16x8",), "scale_ratio_5000", {"value_range": (-0.01, 0.01),
                                               "b_range": (-50.0, 50.0)}),
    ("SOFTMAX", ("int16x8",), "rows64_wide", {"input_shape": (64, 16),
                                              "value_range": (-30.0, 30.0)}),
    ("SOFTMAX", ("int16x8",), "row100_beta3", {"input_shape": (1, 100), "beta": 3.0,
                                               "value_range": (-10.0, 10.0)}),
    ("SOFTMAX", ("int16x8",), "rows_of_one", {"input_shape": (4, 1)}),
    ("SOFTMAX", ("int16x8",), "narrow_input", {"value_range": (-0.05, 0.05)}),
    ("QUANTIZE", ("int16x8",), "to_int8_zero_point_min", {"to": "int8", "quant": (0.01, -128)}),
    ("QUANTIZE", ("int16x8",), "to_int8_zero_point_max", {"to": "int8", "quant": (0.01, 127)}),
]


def _int16_edge_cases() -> Iterator[Case]:
    for op, modes, label, opts in INT16_EDGE_CASES:
        for mode in modes:
            case = Case(op, mode, {"edge": label})
            for s in SEEDS:
                case.branches.append({**opts, "seed": s})
            yield case


#: The Helium cases emitted for the M55 and built for the host: the plain C that the MVE helpers
#: stand for (mve.h.j2's portable branches, the filters interleaved as on the M55), against the
#: references. (tests/emit/test_emit_cores.py runs the same cases' Helium code on mps3-an547.)
MVE_HOST_CASES = [dataclasses.replace(c, target="cortex-m55")
                  for c in dsp_cases(SEEDS, rows=MVE_CASES)]

CASES = with_targets(list(_cases()) + list(_edge_cases()) + list(dsp_cases(SEEDS))
                     + list(_int16_cases()) + list(_int16_edge_cases())) + MVE_HOST_CASES


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_emitted_matches_references(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)
