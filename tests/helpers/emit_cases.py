"""Emitter cases more than one test module runs: the shapes that reach every path of the DSP
kernels (``tests/emit/test_emit_random.py`` on the host, ``tests/emit/test_emit_cortex_m.py`` on QEMU's
Cortex-M4) and a small int16x8 network (``tests/emit/test_emit_random_networks.py``, the same)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from helpers.emit_parity import Case
from project_api.tflite import builder as B

#: The operators with weights (their int8 cases run per channel too).
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


#: Shapes that reach every path of the DSP kernels (run with both targets; the convolutions' with
#: both weight layouts, see emit_parity.WEIGHT_LAYOUT_OPS).
DSP_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("CONV_2D", "pw_odd_pixels_odd_filters", {"input_shape": (1, 5, 3, 8), "filters": 5,
                                              "kernel_size": 1}),
    ("CONV_2D", "pw_strided", {"input_shape": (1, 7, 6, 12), "filters": 6, "kernel_size": 1,
                               "stride": 2, "padding": "VALID"}),
    ("CONV_2D", "pw_c160_loop", {"input_shape": (1, 3, 3, 160), "filters": 4, "kernel_size": 1}),
    ("CONV_2D", "k3_c8_lanes_loop", {"input_shape": (1, 6, 5, 8), "filters": 7,
                                     "kernel_size": 3}),
    ("CONV_2D", "k10x4_c1_s2", {"input_shape": (1, 13, 6, 1), "filters": 8,
                                "kernel_size": (10, 4), "stride": 2}),
    ("DEPTHWISE_CONV_2D", "c8_k3_classes", {"input_shape": (1, 7, 5, 8), "kernel_size": 3}),
    ("DEPTHWISE_CONV_2D", "c8_k3_s2_d2", {"input_shape": (1, 9, 8, 8), "kernel_size": 3,
                                          "stride": 2, "dilation": 2}),
    ("DEPTHWISE_CONV_2D", "c4_k9_loop", {"input_shape": (1, 10, 10, 4), "kernel_size": 9}),
    ("DEPTHWISE_CONV_2D", "c1_m8_k10x8_s2", {"input_shape": (1, 13, 12, 1),
                                             "kernel_size": (10, 8), "depth_multiplier": 8,
                                             "stride": 2}),
    ("DEPTHWISE_CONV_2D", "c1_m3_k3_valid", {"input_shape": (1, 6, 7, 1), "kernel_size": 3,
                                             "depth_multiplier": 3, "padding": "VALID"}),
    ("CONV_2D", "pw_c68_loop_tail", {"input_shape": (1, 3, 4, 68), "filters": 6,
                                     "kernel_size": 1}),
    # sums beyond the int8-weight form's +-2^23: the int16-pair kernel takes over
    ("CONV_2D", "pw_c600_max_weights", {"input_shape": (1, 2, 3, 600),
                                        "filters": np.ones((3, 1, 1, 600), np.float32)}),
    # multipliers above 1 (left shifts): the older requantization forms (d_requant; where even
    # that cannot be proven exact, TFLM's q_mbqm: d64_tiny_out_scale)
    ("CONV_2D", "k3_c8_tiny_out_scale", {"input_shape": (1, 6, 5, 8), "filters": 4,
                                         "kernel_size": 3, "out_quant": (2e-6, 3)}),
    ("CONV_2D", "k3_c3_first_layer_s2", {"input_shape": (1, 11, 10, 3), "filters": 8,
                                         "kernel_size": 3, "stride": 2}),
    ("DEPTHWISE_CONV_2D", "c12_k3_valid", {"input_shape": (1, 5, 7, 12), "kernel_size": 3,
                                           "padding": "VALID"}),
    ("DEPTHWISE_CONV_2D", "c8_k3_tiny_out_scale", {"input_shape": (1, 5, 5, 8),
                                                   "kernel_size": 3, "out_quant": (2e-6, 0)}),
    ("FULLY_CONNECTED", "d16_odd_units", {"input_shape": (1, 16), "units": 7}),
    ("FULLY_CONNECTED", "d600_max_weights", {"input_shape": (1, 600),
                                             "units": np.ones((3, 600), np.float32)}),
    ("FULLY_CONNECTED", "d300_odd_units", {"input_shape": (2, 300), "units": 6}),
    ("FULLY_CONNECTED", "d64_tiny_out_scale", {"input_shape": (1, 64), "units": 9,
                                               "out_quant": (2e-9, 0)}),
    ("FULLY_CONNECTED", "batch3_d32", {"input_shape": (3, 32), "units": 10}),
    ("AVERAGE_POOL_2D", "c8_f3_same", {"input_shape": (1, 7, 6, 8), "filter_size": 3,
                                       "stride": 2, "padding": "SAME"}),
    ("AVERAGE_POOL_2D", "global_25x5_c12", {"input_shape": (1, 25, 5, 12),
                                            "filter_size": (25, 5)}),
    ("MAX_POOL_2D", "c8_f3_same", {"input_shape": (1, 7, 6, 8), "filter_size": 3,
                                   "stride": 1, "padding": "SAME"}),
    ("ADD", "relu_same_shape", {"input_shape": (1, 6, 6, 8), "b_shape": (1, 6, 6, 8),
                                "activation": "RELU"}),
    ("ADD", "bcast_channel", {"input_shape": (1, 4, 4, 8), "b_shape": (1, 1, 1, 8)}),
]


#: Shapes that reach a Helium kernel of the mve-int8 scheme with channel counts that leave its
#: MVE loops a partial last vector (16 int8 lanes in the dot products, 4 int32 lanes in the
#: depthwise taps): 1x1 and unpadded convolutions (a whole filter row per dot product, or a tap
#: at a time when dilated), depthwise convolutions no DSP kernel takes, fully connected.
MVE_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("CONV_2D", "pw_c19_f5", {"input_shape": (1, 3, 4, 19), "filters": 5, "kernel_size": 1}),
    # runs of 8 and 12 bytes: a single tail-predicated vector per dot product
    ("CONV_2D", "pw_c8_f6", {"input_shape": (1, 4, 5, 8), "filters": 6, "kernel_size": 1}),
    ("CONV_2D", "k2x1_c12_f4_valid", {"input_shape": (1, 5, 4, 12), "filters": 4,
                                      "kernel_size": (2, 1), "padding": "VALID"}),
    ("CONV_2D", "pw_c37_f3_s2", {"input_shape": (1, 5, 5, 37), "filters": 3, "kernel_size": 1,
                                 "stride": 2, "padding": "VALID"}),
    ("CONV_2D", "k3_c7_f6_valid", {"input_shape": (1, 6, 7, 7), "filters": 6,
                                   "kernel_size": 3, "padding": "VALID"}),
    ("CONV_2D", "k3_c19_f5_valid_d2", {"input_shape": (1, 7, 8, 19), "filters": 5,
                                       "kernel_size": 3, "padding": "VALID", "dilation": 2}),
    # padded: the window gathered into a column (63, 45, 36 and 27 bytes: at least MVE_COL_MIN)
    ("CONV_2D", "k3_c7_f6_same", {"input_shape": (1, 6, 7, 7), "filters": 6, "kernel_size": 3}),
    ("CONV_2D", "k3_c3_f9_same_s2", {"input_shape": (1, 9, 8, 3), "filters": 9,
                                     "kernel_size": 3, "stride": 2}),
    ("CONV_2D", "k3_c5_f4_same_s2", {"input_shape": (1, 7, 6, 5), "filters": 4,
                                     "kernel_size": 3, "stride": 2}),
    ("CONV_2D", "k3_c4_f3_same_d2", {"input_shape": (1, 7, 8, 4), "filters": 3,
                                     "kernel_size": 3, "dilation": 2}),
    # a filter row of whole vectors (3 x 16 bytes): the pixels inside the input read its rows
    ("CONV_2D", "k3_c16_f6_same_direct", {"input_shape": (1, 5, 6, 16), "filters": 6,
                                          "kernel_size": 3}),
    ("CONV_2D", "k3_c16_f4_same_s2_direct", {"input_shape": (1, 7, 6, 16), "filters": 4,
                                             "kernel_size": 3, "stride": 2}),
    # two output pixels a pass (M_DOT4X2: the weights loaded once for both): an odd output
    # width leaves a pixel alone, oc % 4 channels one at a time for both; a padded window of 9
    # vectors a row; a dilated height (the row skip); a 1x1 of 4 vectors. A second pixel 128
    # bytes on is past VLDRB's immediate: single pixels.
    ("CONV_2D", "k3_c16_f5_valid_pairs_odd", {"input_shape": (1, 5, 7, 16), "filters": 5,
                                              "kernel_size": 3, "padding": "VALID"}),
    ("CONV_2D", "k3_c48_f8_same_pairs", {"input_shape": (1, 4, 9, 48), "filters": 8,
                                         "kernel_size": 3}),
    ("CONV_2D", "k3_c16_f4_valid_dh2_pairs", {"input_shape": (1, 7, 6, 16), "filters": 4,
                                              "kernel_size": 3, "padding": "VALID",
                                              "dilation": (2, 1)}),
    ("CONV_2D", "pw_c64_f6_pairs", {"input_shape": (1, 3, 3, 64), "filters": 6,
                                    "kernel_size": 1}),
    ("CONV_2D", "k3_c64_f4_same_s2_single", {"input_shape": (1, 5, 5, 64), "filters": 4,
                                             "kernel_size": 3, "stride": 2}),
    # multipliers above 1: TFLM's requantization with its left shifts, four channels a vector
    # (m_mbqm4's M_RQ_LEFT form)
    ("CONV_2D", "pw_c40_f6_tiny_out_scale", {"input_shape": (1, 3, 4, 40), "filters": 6,
                                             "kernel_size": 1, "out_quant": (2e-9, 3)}),
    ("DEPTHWISE_CONV_2D", "c16_k3_tiny_out_scale_lanes", {"input_shape": (1, 5, 5, 16),
                                                          "kernel_size": 3,
                                                          "out_quant": (2e-9, 0)}),
    ("DEPTHWISE_CONV_2D", "c7_k3_same", {"input_shape": (1, 5, 6, 7), "kernel_size": 3}),
    # Helium's lanes: 16-channel blocks then 4-channel ones (20, 28), padded and strided
    ("DEPTHWISE_CONV_2D", "c20_k3_same_lanes", {"input_shape": (1, 5, 6, 20), "kernel_size": 3}),
    ("DEPTHWISE_CONV_2D", "c28_k3_same_lanes", {"input_shape": (1, 4, 5, 28), "kernel_size": 3}),
    ("DEPTHWISE_CONV_2D", "c16_k3_s2_lanes", {"input_shape": (1, 7, 6, 16), "kernel_size": 3,
                                              "stride": 2}),
    ("DEPTHWISE_CONV_2D", "c13_k3_s2", {"input_shape": (1, 7, 6, 13), "kernel_size": 3,
                                        "stride": 2}),
    ("FULLY_CONNECTED", "d23_u5", {"input_shape": (1, 23), "units": 5}),
    # ADD of two same-shape inputs: 4 lanes a step, a 2-element tail (90 = 22 x 4 + 2)
    ("ADD", "same_shape_tail", {"input_shape": (1, 5, 6, 3), "b_shape": (1, 5, 6, 3)}),
    ("ADD", "relu_same_shape_c16", {"input_shape": (1, 3, 3, 16), "b_shape": (1, 3, 3, 16),
                                    "activation": "RELU"}),
    ("ADD", "const_b_same_shape", {"input_shape": (1, 2, 3, 5), "b_shape": (1, 2, 3, 5),
                                   "b_input": False}),
    # MUL of two same-shape inputs: 4 lanes a step, a 3-element tail (63 = 15 x 4 + 3); a
    # constant operand; a RELU6 clamp. (A product scale above one, m_mbqm_n4's left shift, is
    # FULLY_CONNECTED d40_u6_tiny_out_scale's: a MUL with such a scale matched TFLM but LiteRT
    # gave other saturated values, so it cannot run against both references.)
    ("MUL", "same_shape_tail", {"input_shape": (1, 3, 7, 3), "b_shape": (1, 3, 7, 3)}),
    ("MUL", "const_b_same_shape", {"input_shape": (1, 2, 4, 5), "b_shape": (1, 2, 4, 5),
                                   "b_input": False}),
    ("MUL", "relu6_c20", {"input_shape": (1, 2, 3, 20), "b_shape": (1, 2, 3, 20),
                          "activation": "RELU6"}),
    ("FULLY_CONNECTED", "d33_u3_batch2", {"input_shape": (2, 33), "units": 3}),
    # four rows a pass (m_dot8x4): a single tail-predicated vector, batches, a row tail, and
    # multipliers above 1 (a left shift in the per-tensor vector requantization)
    ("FULLY_CONNECTED", "d8_u12", {"input_shape": (1, 8), "units": 12}),
    # pooling, 16 channels a call then a predicated tail: clipped windows down to one element
    # (7 x 7, filter 2, stride 2, SAME: the corner), a window of whole rows, batches, a clamp
    ("AVERAGE_POOL_2D", "c20_f2_same_corner", {"input_shape": (1, 7, 7, 20), "filter_size": 2,
                                               "stride": 2, "padding": "SAME"}),
    ("AVERAGE_POOL_2D", "global_9x4_c35", {"input_shape": (1, 9, 4, 35),
                                           "filter_size": (9, 4)}),
    ("AVERAGE_POOL_2D", "c5_f3_batch2", {"input_shape": (2, 5, 6, 5), "filter_size": 3,
                                         "stride": 1, "padding": "SAME"}),
    ("MAX_POOL_2D", "c19_f3_same", {"input_shape": (1, 7, 6, 19), "filter_size": 3,
                                    "stride": 2, "padding": "SAME"}),
    ("MAX_POOL_2D", "c32_f2_relu6", {"input_shape": (1, 6, 4, 32), "filter_size": 2,
                                     "activation": "RELU6"}),
    ("FULLY_CONNECTED", "d20_u7_batch3", {"input_shape": (3, 20), "units": 7}),
    ("FULLY_CONNECTED", "d40_u6_tiny_out_scale", {"input_shape": (1, 40), "units": 6,
                                                  "out_quant": (2e-9, 3)}),
]


def dsp_cases(seeds: Iterable[int] = (0, 1, 2),
              rows: list[tuple[str, str, dict[str, Any]]] | None = None) -> Iterator[Case]:
    """One case per DSP_CASES (or ``rows``) row and mode (per-channel too for the weighted
    operators), a branch per seed."""
    for op, label, opts in DSP_CASES if rows is None else rows:
        modes = ("int8", "int8_per_channel") if op in WEIGHTED else ("int8",)
        for mode in modes:
            case = Case(op, mode, {"dsp": label})
            for s in seeds:
                case.branches.append({**opts, "seed": s})
            yield case


def int16x8_network(seed: int = 3) -> bytes:
    """A small int16x8 CNN (int16 activations, int8 per-channel weights, int64 biases but one
    int32): CONV_2D 3x3 RELU, DEPTHWISE_CONV_2D x2, ADD, AVERAGE_POOL_2D, RESHAPE,
    FULLY_CONNECTED, SOFTMAX."""
    mb = B.ModelBuilder(seed=seed, per_channel=True, description="int16x8 network")
    x = mb.input((1, 10, 8, 2), "int16", value_range=(-2.0, 2.0), name="x")
    y = mb.conv2d(x, 6, 3, activation="RELU")
    y = mb.depthwise_conv2d(y, 3, depth_multiplier=2)
    y = mb.add(y, y)
    y = mb.average_pool2d(y, 2)
    y = mb.reshape(y, (1, -1))
    y = mb.fully_connected(y, 5, bias_dtype="int32")
    mb.output(mb.softmax(y))
    return mb.build()
