"""RESIZE_BILINEAR (TFLM ``resize_bilinear.cc``, ``reference_ops::ResizeBilinear`` and
``ResizeBilinearInteger``): NHWC; each output pixel interpolates the four input pixels around
its source position.

The source rows and columns and their weights are computed at emit time as TFLM computes
them: float32 in float (scale ``in / out``, or ``(in - 1) / (out - 1)`` with
``align_corners``; the position ``(i + 0.5) * scale - 0.5`` with ``half_pixel_centers``, else
``i * scale``; floor and ceil clamped to the input), int8 in TFLM's integer form (scales in
Q10 rounded to nearest, positions in Q10, the four products summed in int64 and divided by
2^20 rounding half away from zero). The kernel interpolates in TFLM's order of operations.
``align_corners`` and ``half_pixel_centers`` together are refused, as TFLM refuses them. int8
keeps the input's codes (TFLM does not requantize). Types: float32, int8 (TFLM's list).
"""

from __future__ import annotations

import math

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import Sources
from ._resize import cdiv, operands
from .common import ConstArray, Kernel, OpSpec, dtype_scheme, unsupported

SPEC = OpSpec(opcodes=("RESIZE_BILINEAR",), schemes=("float32", "int8"), classify=dtype_scheme)


def float_axis(out_size: int, in_size: int, ac: bool, hpc: bool
               ) -> tuple[list[int], list[int], np.ndarray]:
    """(lower index, upper index, fraction) per output index, in float32 as TFLM."""
    f = np.float32
    scale = f(in_size) / f(out_size)
    if ac and out_size > 1:
        scale = f(in_size - 1) / f(out_size - 1)
    lower, upper, frac = [], [], []
    for i in range(out_size):
        v = (f(i) + f(0.5)) * scale - f(0.5) if hpc else f(i) * scale
        v = f(v)
        lo = max(int(math.floor(float(v))), 0)
        lower.append(lo)
        upper.append(min(int(math.ceil(float(v))), in_size - 1))
        frac.append(f(v - f(lo)))
    return lower, upper, np.asarray(frac, np.float32)


def int_axis(out_size: int, in_size: int, ac: bool, hpc: bool
             ) -> tuple[list[int], list[int], list[int]]:
    """(lower index, upper index, Q10 weight of the upper one) per output index, in TFLM's
    integer arithmetic."""
    scale = cdiv((1 << 10) * in_size + out_size // 2, out_size)
    if ac and out_size > 1:
        scale = cdiv((1 << 10) * (in_size - 1) + (out_size - 1) // 2, out_size - 1)
    lower, upper, weight = [], [], []
    for i in range(out_size):
        v = i * scale + scale // 2 - (1 << 9) if hpc else i * scale
        lo = max(cdiv(v, 1 << 10), 0)
        lower.append(lo)
        upper.append(min(cdiv(v + (1 << 10) - 1, 1 << 10), in_size - 1))
        weight.append(v - (1 << 10) * lo)
    return lower, upper, weight


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y, oh, ow, ac, hpc = operands(op, graph, SPEC.schemes)
    if ac and hpc:
        raise unsupported(op, "align_corners and half_pixel_centers are both set; TFLM takes "
                              "at most one")
    n, ih, iw, c = x.shape
    src = Sources()
    name, const = src.add(x, "input")
    consts = list(src.constants)
    axis = float_axis if x.dtype == "float32" else int_axis
    y0, y1, wy = axis(oh, ih, ac, hpc)
    x0, x1, wx = axis(ow, iw, ac, hpc)
    i32 = np.int32
    consts += [ConstArray("y0", "int32_t", np.asarray(y0, np.int64).astype(i32) * iw * c),
               ConstArray("y1", "int32_t", np.asarray(y1, np.int64).astype(i32) * iw * c),
               ConstArray("x0", "int32_t", np.asarray(x0, i32) * c),
               ConstArray("x1", "int32_t", np.asarray(x1, i32) * c)]
    if x.dtype == "float32":
        consts += [ConstArray("wy", "float", wy), ConstArray("wy_", "float", np.float32(1) - wy),
                   ConstArray("wx", "float", wx), ConstArray("wx_", "float", np.float32(1) - wx)]
    else:
        consts += [ConstArray("wy", "int32_t", np.asarray(wy, i32)),
                   ConstArray("wx", "int32_t", np.asarray(wx, i32))]
    params = {"x": name, "x_const": const, "n": n, "oh": oh, "ow": ow, "c": c,
              "batch": ih * iw * c, "float": x.dtype == "float32"}
    return Kernel(op, "resize_bilinear.c.j2", params, src.inputs, [y.index], consts)
